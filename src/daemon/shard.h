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
 *
 * --elastic: when the ring changes at step k of an epoch (shard_reshard),
 * the samples of the epoch that no step has taken yet become the pool: every
 * old rank's untaken samples, interleaved in rank order (with shuffling off,
 * ascending, as one peer would take them), then the samples the old shards
 * left out by truncation. The new members deal the pool as above: new rank
 * r of N' takes pool[j] for j % N' == r, floor(pool / N') each, in order.
 * So no sample is taken twice in an epoch, and every member computes every
 * member's share from what all of them hold: the old shards are a pure
 * function of (seed, epoch, rank, world) and of the earlier changes of the
 * epoch. A second change before any step on the new shards deals the same
 * pool again. The next epoch is the standard sharding of the new ring.
 */
#ifndef RINGD_DAEMON_SHARD_H
#define RINGD_DAEMON_SHARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct shard {
    int rank, world;
    int shuffle;
    uint64_t seed;
    size_t ntrain;            /* the training set */
    size_t len;               /* samples in this shard */
    uint32_t *order;          /* this epoch's order of the shard's sample indices */
    size_t cap;               /* order's room */
    uint64_t epoch;           /* epoch the order is for */
    /* since a change of the ring in this epoch (--elastic): the pool dealt */
    uint64_t base;            /* the epoch's step the pool was taken at (0: no pool) */
    uint32_t *pool;           /* NULL: the standard shard of the epoch */
    size_t npool;
} shard_t;

/* 0, or -1 (out of memory, or fewer samples than peers). */
int shard_init(shard_t *s, size_t ntrain, int rank, int world, uint64_t seed, int shuffle);

/* Arrange the order for epoch (a pure function of seed, epoch, rank). */
void shard_set_epoch(shard_t *s, uint64_t epoch);

/* The ring changed after step pos of the current epoch (0: at its start, before
 * shard_set_epoch): this peer is now rank of world. Re-deal the epoch's untaken
 * samples (see above); at pos 0 the epoch starts with the new ring's standard
 * shards. 0, or -1 out of memory. */
int shard_reshard(shard_t *s, uint64_t pos, int bs, int rank, int world);

/* The pieces of shard_reshard, for a ring that grows (rank 0 sends the pool): the
 * untaken samples at step pos of the current epoch (malloc'd; NULL out of memory), and
 * this peer's deal of a pool (owned by s from then on). */
uint32_t *shard_untaken(const shard_t *s, uint64_t pos, int bs, size_t *n_out);
int shard_deal(shard_t *s, uint64_t epoch, uint64_t pos, uint32_t *pool, size_t n, int rank,
               int world);

/* The indices of batch number b of the epoch (batch size bs). */
static inline const uint32_t *shard_batch(const shard_t *s, uint64_t b, int bs)
{
    return s->order + (b - s->base) * (uint64_t)bs;
}

/* Full batches per epoch (the epoch's steps, counting those before a change). */
static inline uint64_t shard_steps_per_epoch(const shard_t *s, int bs)
{
    return s->base + s->len / (size_t)bs;
}

void shard_free(shard_t *s);

#endif /* RINGD_DAEMON_SHARD_H */
