/*
 * schedule.h - the ring schedule as pure functions: which part of the buffer
 * goes where at each step. No I/O; tested exhaustively in tests/t-sched.c.
 *
 * A channel's elements are split into N segments (block distribution: the
 * lengths differ by at most one aligned block) and every segment into the
 * same number of chunks. Frames are numbered q = step * nchunks + chunk for
 * steps 0 .. 2(N-1)-1: reduce-scatter steps 0..N-2, then allgather.
 * At reduce-scatter step k peer i sends segment (i-k) mod N and receives
 * (i-k-1) mod N; after it peer i owns segment (i+1) mod N. At allgather
 * step k it sends (i+1-k) mod N and receives (i-k) mod N.
 */
#ifndef RING_SCHEDULE_H
#define RING_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#define RING_SCHED_ALIGN 16 /* elements per block: 64 bytes of fp32 */

typedef struct ring_range {
    size_t off, len;         /* in elements */
} ring_range_t;

typedef struct ring_sched {
    int rank, nranks;
    size_t count;            /* elements of this channel's part */
    int nchunks;             /* chunks per segment, >= 1 */
    uint32_t nframes;        /* frames each way: 2(N-1) * nchunks (0 when N == 1) */
} ring_sched_t;

typedef struct ring_sched_frame {
    int step;                /* 0 .. 2(N-1)-1 */
    int chunk;               /* 0 .. nchunks-1 */
    int segment;
    int reduce;              /* 1 in reduce-scatter steps */
    int last_reduce;         /* 1 in the last reduce-scatter step (the segment becomes final) */
    ring_range_t range;      /* elements within the channel's part */
} ring_sched_frame_t;

/* Part `part` of `parts` of count elements, in blocks of `align`. */
ring_range_t ring_sched_split(size_t count, int parts, int part, size_t align);

/* Set up the schedule of one channel's part for one rank. */
void ring_sched_init(ring_sched_t *s, int rank, int nranks, size_t count, size_t elem_size,
                     size_t chunk_bytes);

/* Segment sent and received at a step. */
int ring_sched_send_segment(int rank, int nranks, int step);
int ring_sched_recv_segment(int rank, int nranks, int step);

/* The frame this rank sends (or receives) as number q < s->nframes. */
void ring_sched_send_frame(const ring_sched_t *s, uint32_t q, ring_sched_frame_t *f);
void ring_sched_recv_frame(const ring_sched_t *s, uint32_t q, ring_sched_frame_t *f);

#endif /* RING_SCHEDULE_H */
