/*
 * timeline.h - --timeline FILE: a Chrome trace-event JSON of every allreduce,
 * per ring step and phase, for chrome://tracing and Perfetto (the Horovod
 * timeline, for the ring). timeline.c writes it; the request engine
 * (allreduce.c, codec_pipeline.c) calls the hooks below.
 *
 * What a rank's file holds (JSON Array Format, one event per line):
 *  - metadata ("ph":"M"): process_name "rank R (host)", process_sort_index,
 *    process_labels, and thread_name "channel C" per channel: pid = rank,
 *    tid = channel;
 *  - per allreduce and channel, a complete event ("ph":"X", ts and dur in
 *    microseconds) named "allreduce tensor T SIZE CODEC", from the moment
 *    the engine starts the request to the moment it finishes;
 *  - nested in it, one event per ring step, "reduce-scatter step k" and
 *    "allgather step k" (k = 0..N-2). A step is the time this peer spent
 *    receiving that step's chunks: it begins when the previous step's last
 *    chunk has been received (the first at the start) and ends when its own
 *    last chunk has (the last step: when the channel's sends are done too),
 *    so steps tile the allreduce even though the pipeline overlaps them;
 *  - nested in each step, its phases, as totals over the step (one event
 *    per phase, not per chunk: a 256 MiB buffer has thousands of chunks),
 *    laid end to end from the step's start in a fixed order; args give the
 *    calls and bytes or values behind each total. Whatever of the step no
 *    phase covers is time outside the library (the caller's code between
 *    ring_request_test calls) or bookkeeping too small to time.
 * A phase's time is counted in the step open on its channel when it ran:
 * sends of step k+1 that the pipeline posts while step k is still being
 * received count in step k. Transport progress and waits are not per
 * channel: they count in every channel's open step. One thread runs every
 * channel, so with several channels the time spent on one shows as a gap
 * in the steps of the others.
 *
 * Timestamps are CLOCK_MONOTONIC in microseconds (since boot on Linux),
 * so the files of processes on one host line up; the merge (ring-launch
 * --timeline, --merge-timeline) moves them to the job's first event. The
 * monotonic clocks of different hosts do not agree, and the merge does not
 * offset them.
 *
 * Costs: with the setting empty comm->tl is NULL and every hook site is one
 * predictable branch. With it on, two clock reads (vDSO) per timed call
 * and, per allreduce and channel, 1 + 2(N-1) x (1 + up to 8) lines of about
 * 200 bytes, formatted without printf into a 1 MiB buffer; past
 * cfg.timeline_max_events the file ends with a marker event and recording
 * stops (timeline.c).
 */
#ifndef RING_TIMELINE_H
#define RING_TIMELINE_H

#include <stdint.h>
#include <time.h>

#include "comm_int.h"

/* A step's phases, in the order they are laid out inside it. */
typedef enum ring_tl_phase {
    RING_TL_SEND,   /* posting frames to the transport (headers, queueing) */
    RING_TL_RECV,   /* taking received frames (checks) and posting receive buffers */
    RING_TL_ENCODE, /* reduce-scatter step 0: this peer's chunk to fp16/bf16 */
    RING_TL_REDUCE, /* fp32 sums, or the fused decode + add + encode */
    RING_TL_DECODE, /* allgather with a codec: decode into the result, forward */
    RING_TL_LZ4,    /* lz4 compress and decompress (not counted in the above) */
    RING_TL_MAC,    /* --auth frames: tagging and checking frames (frame_mac.h) */
    RING_TL_IO,     /* transport progress that moved bytes (socket copies, completions) */
    RING_TL_WAIT,   /* nothing could progress: empty polls, yields, sleeps in poll() */
    RING_TL_NPHASES
} ring_tl_phase_t;

static inline int64_t ring_tl_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A timed call in progress: when it began, and how much of its channel's time
 * other phases had taken by then (nested phases are not counted twice). */
typedef struct ring_tl_span {
    int64_t t0;
    int64_t taken0;
    uint64_t sent0; /* comm->stats.payload_bytes: what a send span sent */
} ring_tl_span_t;

/* Open comm->cfg.timeline ({rank} replaced; without it only rank 0 writes),
 * leaving comm->tl NULL when off. Fails naming the setting and the path. */
ring_status_t ring_tl_open(ring_comm_t *comm);
/* Write what is buffered, close the JSON array and free. */
void ring_tl_close(ring_comm_t *comm);

void ring_tl_request_begin(ring_comm_t *comm, const ring_request_t *req);
void ring_tl_request_end(ring_comm_t *comm, const ring_request_t *req, ring_status_t status);
/* A channel retired a frame (either way): close the steps it completed. */
void ring_tl_channel_moved(ring_comm_t *comm, const ring_channel_t *ch);

ring_tl_span_t ring_tl_span_begin(const ring_comm_t *comm, const ring_channel_t *ch);
/* Count the span in phase ph of ch's open step (ch NULL: every channel's);
 * amount is bytes (send, recv) or values (kernels). */
void ring_tl_span_end(ring_comm_t *comm, const ring_channel_t *ch, ring_tl_phase_t ph,
                      const ring_tl_span_t *span, uint64_t amount);

/*
 * Run stmt, timed as phase ph of channel ch when the timeline is on: one
 * branch when it is off. ph and amount are evaluated after stmt. A stmt
 * that returns early (RING_CHECK) is simply not counted.
 */
#define RING_TL_TIMED(comm, ch, ph, amount, ...)                                 \
    do {                                                                         \
        if ((comm)->tl != NULL) {                                                \
            ring_tl_span_t tl_span_ = ring_tl_span_begin((comm), (ch));          \
            __VA_ARGS__;                                                         \
            ring_tl_span_end((comm), (ch), (ph), &tl_span_, (uint64_t)(amount)); \
        } else {                                                                 \
            __VA_ARGS__;                                                         \
        }                                                                        \
    } while (0)

#endif /* RING_TIMELINE_H */
