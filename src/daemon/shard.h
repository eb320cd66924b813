/*
 * shard.h - which training samples a peer sees, and in what order.
 *
 * Peer r of N owns the samples i with i % N == r (TensorFlow's
 * dataset.shard(N, r)), truncated so every shard has the same length
 * (floor(ntrain / N)): every peer then takes the same number of steps per
 * epoch, and the lockstep ring never waits on a peer that ran out of data.
 * Each epoch the shard is shuffled, only within itself, by a permutation
 * seeded by (seed, epoch, rank); with shuffling off, step s of a ring of N
 * with batch B covers exactly the samples step s of a single peer with
 * batch N*B covers (the same global batch), which the tests rely on.
 */
#ifndef RINGD_DAEMON_SHARD_H
#define RINGD_DAEMON_SHARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct shard {
    int rank, world;
    int shuffle;
    uint64_t seed;
    size_t len;               /* samples in this shard */
    uint32_t *order;          /* this epoch's order of the shard's sample indices */
    uint64_t epoch;           /* epoch the order is for */
} shard_t;

/* 0, or -1 (out of memory, or fewer samples than peers). */
int shard_init(shard_t *s, size_t ntrain, int rank, int world, uint64_t seed, int shuffle);

/* Arrange the order for epoch (a pure function of seed, epoch, rank). */
void shard_set_epoch(shard_t *s, uint64_t epoch);

/* The indices of batch number b of the epoch (batch size bs). */
static inline const uint32_t *shard_batch(const shard_t *s, uint64_t b, int bs)
{
    return s->order + b * (uint64_t)bs;
}

/* Full batches per epoch. */
static inline uint64_t shard_steps_per_epoch(const shard_t *s, int bs)
{
    return s->len / (size_t)bs;
}

void shard_free(shard_t *s);

#endif /* RINGD_DAEMON_SHARD_H */
