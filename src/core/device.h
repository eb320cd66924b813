/*
 * device.h - CUDA device buffers in the engine: what a communicator keeps
 * for them (ring_dev_t, made at its first device buffer) and the hooks the
 * engine calls. Host buffers never reach any of it: comm->dev stays NULL
 * and every hook returns at once.
 *
 * Two paths (docs/codec.md, "CUDA"):
 *  - device_codec.c: fp32 device buffers with fp16/bf16 on the wire. Each
 *    chunk is encoded, reduced and decoded on the GPU, on the
 *    communicator's own stream; only encoded bytes cross PCIe, through the
 *    channels' tx and stage buffers (page-locked). Frames wait for their
 *    copies by events: a send waits for its chunk's device-to-host copy, a
 *    receive into a stage slot for the host-to-device copy that still reads
 *    it. So chunk k's copies overlap chunk k-1 on the wire.
 *  - device.c: everything else (codec none, half buffers, error feedback,
 *    one side on the host) is staged whole: copied to page-locked host
 *    memory when it begins, run on the host, copied back when it ends.
 * Both wait for the caller's stream by an event recorded at start, and end
 * by recording the request's done event (ring_request_wait_stream).
 */
#ifndef RING_DEVICE_H
#define RING_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <ringd/comm.h>

#include "autotune_space.h" /* RING_MAX_CHANNELS */

/* included by comm_int.h once RING_WINDOW is defined */
struct ring_channel;
struct ring_sched_frame;
struct ring_frame;

/* A channel's device side (device_codec.c). */
typedef struct ring_dev_channel {
    void *tx;                  /* device: one encoded chunk per tx slot */
    size_t tx_cap;             /* slots tx and the arrays below hold */
    void **tx_event;           /* per tx slot: its device-to-host copy */
    uint32_t *tx_pending;      /* per tx slot: the frame whose copy is queued, or NONE */
    uint32_t *tx_ready;        /* per tx slot: the frame whose host bytes are final, or NONE */
    float *tx_bound;           /* per tx slot: the bound and exponent of the queued chunk, */
    int *tx_exp;               /* for the overflow check once its bytes are on the host */
    void *in;                  /* device: RING_WINDOW received chunks */
    void *in_event[RING_WINDOW]; /* per stage slot: the host-to-device copy reading it */
    int in_pending[RING_WINDOW];
    float *own_max, *red_max;  /* per send / receive frame: |largest| local value of its range */
    size_t frames_cap;         /* entries of those two arrays */
    void *pinned_tx, *pinned_stage; /* host memory page-locked for copies (NULL: not) */
} ring_dev_channel_t;

typedef struct ring_dev {
    int device;                /* the GPU of this communicator's device buffers */
    void *stream;              /* libringd's own stream on it */
    void *in_event[RING_MAX_REQUESTS];   /* per request slot: recorded on the caller's stream */
    void *done_event[RING_MAX_REQUESTS]; /* per request slot: its last device writes */
    unsigned pending;          /* copies the gates still wait for (the engine must not sleep) */
    int waiting;               /* the next request waits for the caller's stream (same) */
    void *stage;               /* device.c: page-locked host staging, grow-only */
    size_t stage_bytes;
    ring_dev_channel_t ch[RING_MAX_CHANNELS];
} ring_dev_t;

#define RING_DEV_NONE UINT32_MAX

/* What a request's buffers are (req->dev). */
enum { RING_DEV_HOST, RING_DEV_STAGED, RING_DEV_CODEC };

/* device.c */
/* At start, in the caller's thread: whether the buffers are device memory, on
 * the communicator's GPU, and the caller's stream captured in an event.
 * RING_ERR_INVALID (nothing queued) for a second GPU. */
ring_status_t ring_dev_request_start(ring_comm_t *comm, ring_request_t *req, ring_stream_t stream);
/* 0 while the caller's stream has not reached the request's start: not begun yet. */
int ring_dev_begin_ready(ring_comm_t *comm, const ring_request_t *req);
/* When it begins: the codec path, or the staging copy in. */
ring_status_t ring_dev_request_begin(ring_comm_t *comm, ring_request_t *req);
/* When the ring is done: the staged result copied back; the done event recorded. */
ring_status_t ring_dev_request_finish(ring_comm_t *comm, ring_request_t *req,
                                      ring_status_t status);
/* After the ring, in the waiter's thread: the host waits for the done event
 * (stream_wait 0) or `stream` does (1). */
ring_status_t ring_dev_request_wait(ring_request_t *req, ring_stream_t stream, int stream_wait);
/* 1 while a gate waits for a copy: the engine polls rather than sleeps. */
int ring_dev_busy(const ring_comm_t *comm);
void ring_dev_comm_free(ring_comm_t *comm);

/* device_codec.c */
int ring_dev_codec_takes(const ring_comm_t *comm, const ring_request_t *req);
ring_status_t ring_dev_codec_begin(ring_comm_t *comm, ring_request_t *req);
/* Gates: 1 when frame q may be sent / received into its stage slot, 0 not
 * yet, -1 when the device failed (the communicator has failed). */
int ring_dev_send_ready(ring_comm_t *comm, struct ring_channel *ch, ring_request_t *req,
                        uint32_t q);
int ring_dev_recv_ready(ring_comm_t *comm, struct ring_channel *ch, uint32_t q);
/* ring_enc_combine's step for a request on the codec path: frame f, received. */
ring_status_t ring_dev_combine(ring_comm_t *comm, struct ring_channel *ch, ring_request_t *req,
                               const struct ring_sched_frame *sf, uint32_t q,
                               const struct ring_frame *f);
/* Before the channel's tx buffer moves (codec_pipeline.c grows it). */
void ring_dev_unpin_tx(ring_comm_t *comm, struct ring_channel *ch);
void ring_dev_codec_free(ring_comm_t *comm);

#endif /* RING_DEVICE_H */
