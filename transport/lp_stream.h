/*
 * lp_stream.h - the length-prefixed stream that tcp and shm both carry: a
 * message is its payload's size (4 bytes, little-endian), then the payload.
 * The sender packs the prefix here. The receiver runs one machine
 * (ring_lp_rx_t) over whatever its transport reads from (tcp's staging
 * buffer, a shared-memory pipe); the body goes straight into the caller's
 * buffer, never through a copy of its own. Nothing here allocates or does I/O.
 */
#ifndef RING_LP_STREAM_H
#define RING_LP_STREAM_H

#include <stddef.h>
#include <sys/uio.h>

#include "transport.h"

/* ---- sending -------------------------------------------------------------- */

/* Pack req's length prefix (req->prefix) and set *len_p (when not NULL) to its
 * payload's size; RING_ERR_INVALID, last error set, when the size does not fit. */
ring_status_t ring_lp_put_prefix(ring_tp_req_t *req, size_t *len_p);

/* ---- receiving ------------------------------------------------------------ */

/*
 * One stream's message in progress; all zeroes is "before a prefix". The
 * body's offset is the head receive's req->offset (the request is where the
 * body lands, so it keeps the count), reset when the prefix is whole.
 */
typedef struct ring_lp_rx {
    unsigned char len_buf[4];   /* the prefix as it arrives, possibly in pieces */
    size_t len_got;             /* 0..4 bytes of it so far */
    int have_len;               /* the prefix is whole: body bytes follow */
    size_t msg_len;             /* the body's size, as the prefix announced it */
} ring_lp_rx_t;

/* Where the stream's bytes come from: avail of them are ready; take copies n <= avail
 * of them to dst and consumes them (a callback, so a ring that wraps copies in two). */
typedef struct ring_lp_src {
    size_t avail;
    void (*take)(void *ctx, void *dst, size_t n);
    void *ctx;
} ring_lp_src_t;

/* What one ring_lp_rx_step did. */
typedef enum ring_lp_event {
    RING_LP_DRY = 0,     /* nothing: the message needs bytes and the source has none */
    RING_LP_PREFIX,      /* prefix bytes taken, the prefix not yet whole */
    RING_LP_HEADER,      /* the prefix is whole (rx->msg_len): the body begins */
    RING_LP_BODY,        /* body bytes went into the head receive's iovs */
    RING_LP_COMPLETE     /* the message is in, up to req's capacity: ring_lp_rx_complete */
} ring_lp_event_t;

/* One move of rx for the head receive req: prefix bytes, or at most max_body body
 * bytes (a transport that publishes its progress in pieces), from src. */
ring_lp_event_t ring_lp_rx_step(ring_lp_rx_t *rx, ring_tp_req_t *req, ring_lp_src_t *src,
                                size_t max_body);
/* Body bytes req still waits for (0 before the prefix is whole): the message's
 * size, cut to req's capacity, less what arrived. */
size_t ring_lp_rx_left(const ring_lp_rx_t *rx, const ring_tp_req_t *req);
/* req's iovs from its offset on, at most max bytes: where the body goes next, for a
 * transport that reads into them itself (readv, zero-copy). Returns how many. */
int ring_lp_rx_body_iov(const ring_tp_req_t *req, size_t max, struct iovec iov[RING_TP_IOV_MAX]);
/* After RING_LP_COMPLETE: complete the head receive (tp_queue.h's
 * ring_tp_rx_complete: 1 when the message was larger than it, and the stream is
 * out of step) and make rx ready for the next prefix. */
int ring_lp_rx_complete(ring_lp_rx_t *rx, ring_tp_req_t **head, ring_tp_req_t **tail);

#endif /* RING_LP_STREAM_H */
