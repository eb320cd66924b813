/* lp_stream.c - the length-prefixed stream of tcp and shm (lp_stream.h). */
#include "ring_build.h"

#include <stdint.h>

#include "errors.h"
#include "le.h"
#include "lp_stream.h"
#include "tp_queue.h"

ring_status_t ring_lp_put_prefix(ring_tp_req_t *req, size_t *len_p)
{
    size_t len = ring_tp_req_capacity(req);

    if (len > UINT32_MAX)
        return ring_error_set(RING_ERR_INVALID, "message of %zu bytes is too large", len);
    le_put32(req->prefix, (uint32_t)len);
    if (len_p != NULL)
        *len_p = len;
    return RING_OK;
}

size_t ring_lp_rx_left(const ring_lp_rx_t *rx, const ring_tp_req_t *req)
{
    size_t capacity, want;

    if (!rx->have_len)
        return 0;
    /* a larger message fills the capacity, then ring_tp_rx_complete fails it */
    capacity = ring_tp_req_capacity(req);
    want = rx->msg_len < capacity ? rx->msg_len : capacity;
    return want - req->offset;
}

int ring_lp_rx_body_iov(const ring_tp_req_t *req, size_t max, struct iovec iov[RING_TP_IOV_MAX])
{
    size_t at = req->offset;
    int n = 0;

    for (int i = 0; i < req->iovcnt && max > 0; i++) {
        const struct iovec *in = &req->iov[i];
        size_t len;

        if (at >= in->iov_len) { /* filled before: skip it */
            at -= in->iov_len;
            continue;
        }
        len = in->iov_len - at < max ? in->iov_len - at : max;
        iov[n++] = (struct iovec){.iov_base = (char *)in->iov_base + at, .iov_len = len};
        max -= len;
        at = 0;
    }
    return n;
}

/* The prefix's next bytes; the message starts over in req once it is whole. */
static ring_lp_event_t rx_prefix(ring_lp_rx_t *rx, ring_tp_req_t *req, ring_lp_src_t *src)
{
    size_t n = sizeof(rx->len_buf) - rx->len_got;

    if (src->avail == 0)
        return RING_LP_DRY;
    if (n > src->avail)
        n = src->avail;
    src->take(src->ctx, rx->len_buf + rx->len_got, n);
    src->avail -= n;
    rx->len_got += n;
    if (rx->len_got < sizeof(rx->len_buf))
        return RING_LP_PREFIX;
    rx->msg_len = le_get32(rx->len_buf);
    rx->have_len = 1;
    req->offset = 0;
    req->bytes = 0;
    return RING_LP_HEADER;
}

ring_lp_event_t ring_lp_rx_step(ring_lp_rx_t *rx, ring_tp_req_t *req, ring_lp_src_t *src,
                                size_t max_body)
{
    struct iovec iov[RING_TP_IOV_MAX];
    size_t left, n;
    int cnt;

    if (!rx->have_len)
        return rx_prefix(rx, req, src);
    left = ring_lp_rx_left(rx, req);
    if (left == 0)
        return RING_LP_COMPLETE;
    n = src->avail < left ? src->avail : left;
    if (n > max_body)
        n = max_body;
    if (n == 0)
        return RING_LP_DRY;
    /* from the source into the caller's buffer: the only copy */
    cnt = ring_lp_rx_body_iov(req, n, iov);
    for (int i = 0; i < cnt; i++)
        src->take(src->ctx, iov[i].iov_base, iov[i].iov_len);
    src->avail -= n;
    req->offset += n;
    return RING_LP_BODY;
}

int ring_lp_rx_complete(ring_lp_rx_t *rx, ring_tp_req_t **head, ring_tp_req_t **tail)
{
    size_t msg_len = rx->msg_len;

    rx->have_len = 0;
    rx->len_got = 0;
    return ring_tp_rx_complete(head, tail, msg_len);
}
