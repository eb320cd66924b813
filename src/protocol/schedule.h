/*
 * schedule.h - the ring schedule as pure functions: which part of the buffer
 * goes where at each step. No I/O; tested exhaustively in tests/unit/t-sched.c.
 *
 * A channel's elements are split into N segments (block distribution: the
 * lengths differ by at most one aligned block) and every segment into the
 * same number of chunks. Frames are numbered q = step * nchunks + chunk for
 * steps 0 .. 2(N-1)-1: reduce-scatter steps 0..N-2, then allgather.
 * At reduce-scatter step k peer i sends segment (i-k) mod N and receives
 * (i-k-1) mod N; after it peer i owns segment (i+1) mod N. At allgather
 * step k it sends (i+1-k) mod N and receives (i-k) mod N.
 *
 * The other collectives are parts of the same schedule, or a chain:
 *  - reduce-scatter: steps 0..N-2 only;
 *  - allgather: steps N-1..2N-3 only (frame q is step N-1 + q / nchunks), each
 *    peer starting with the segment it owns;
 *  - broadcast: one segment, forwarded from the root along the ring: the peer
 *    `root_dist` places after the root receives every chunk (unless it is the
 *    root) and sends every chunk (unless it is the last before the root),
 *    frame q = chunk q, step 0.
 * For these the caller gives each segment's range (segs[], absolute offsets),
 * so a segment can be a rank's block of the user's buffer.
 */
#ifndef RING_SCHEDULE_H
#define RING_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#define RING_SCHED_ALIGN 16 /* elements per block: 64 bytes of fp32 */

typedef struct ring_range {
    size_t off, len;         /* in elements */
} ring_range_t;

typedef enum ring_sched_kind {
    RING_SCHED_ALLREDUCE = 0,
    RING_SCHED_REDUCE_SCATTER,
    RING_SCHED_ALLGATHER,
    RING_SCHED_BROADCAST
} ring_sched_kind_t;

typedef struct ring_sched {
    ring_sched_kind_t kind;
    int rank, nranks;        /* rank: the place on the ring */
    size_t count;            /* elements of this channel's part */
    int nchunks;             /* chunks per segment, >= 1 */
    int first_step;          /* the step of frame 0: N-1 for allgather, else 0 */
    int root_dist;           /* broadcast: places from the root to this peer */
    const ring_range_t *segs; /* N segment ranges (1 for broadcast), or NULL: the
                               * block distribution of count */
    uint32_t nsend, nrecv;   /* frames this peer sends and receives (allreduce: 2(N-1) *
                              * nchunks each way; 0 when N == 1) */
} ring_sched_t;

typedef struct ring_sched_frame {
    int step;                /* 0 .. 2(N-1)-1 */
    int chunk;               /* 0 .. nchunks-1 */
    int segment;
    int reduce;              /* 1 in reduce-scatter steps */
    int last_reduce;         /* 1 in the last reduce-scatter step (the segment becomes final) */
    int own;                 /* a send of this peer's own input (not a forwarded chunk) */
    ring_range_t range;      /* elements within the channel's part (absolute with segs) */
} ring_sched_frame_t;

/* Part `part` of `parts` of count elements, in blocks of `align`. */
ring_range_t ring_sched_split(size_t count, int parts, int part, size_t align);

/* Set up the allreduce schedule of one channel's part for one rank. */
void ring_sched_init(ring_sched_t *s, int rank, int nranks, size_t count, size_t elem_size,
                     size_t chunk_bytes);

/* Set up another collective's schedule: segs holds N ranges (reduce-scatter,
 * allgather) or 1 (broadcast, with root_dist) and must outlive s. */
void ring_sched_init_coll(ring_sched_t *s, ring_sched_kind_t kind, int rank, int nranks,
                          const ring_range_t *segs, int root_dist, size_t elem_size,
                          size_t chunk_bytes);

/* How many frames must have been received before frame q may be sent (what
 * it forwards), and sent before frame q may be received (the region it lands
 * in is still being read by a send of an earlier step). */
uint32_t ring_sched_send_needs(const ring_sched_t *s, uint32_t q);
uint32_t ring_sched_recv_needs(const ring_sched_t *s, uint32_t q);

/* Segment sent and received at a step. */
int ring_sched_send_segment(int rank, int nranks, int step);
int ring_sched_recv_segment(int rank, int nranks, int step);

/* The frame this rank sends (or receives) as number q < s->nframes. */
void ring_sched_send_frame(const ring_sched_t *s, uint32_t q, ring_sched_frame_t *f);
void ring_sched_recv_frame(const ring_sched_t *s, uint32_t q, ring_sched_frame_t *f);

#endif /* RING_SCHEDULE_H */
