/*
 * tcp_io.c - moving bytes: length-prefixed messages over a non-blocking
 * socket. Sends coalesce queued messages into one sendmsg; receives read
 * small pieces greedily into a staging buffer and large payloads directly
 * into the caller's buffer (the framing itself: lp_stream.c). Sends may be held back by a token bucket
 * (ring_tp_params_t.rate_limit_bps). Nothing here allocates.
 */
#include "ring_build.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "le.h"
#include "tcp_int.h"
#include "tp_queue.h"

/* A send's payload size, as its length prefix says (the iovs are the caller's). */
static size_t req_payload(const ring_tp_req_t *req)
{
    return le_get32(req->prefix);
}

void tcp_ep_fail(ring_tp_ep_t *ep, ring_status_t status, int sys_errno)
{
    if (ep->state != TCP_EP_FAILED) {
        ep->state = TCP_EP_FAILED;
        ep->error = status;
        ep->error_errno = sys_errno;
    }
    ring_tp_queue_fail(&ep->sq_head, &ep->sq_tail, ep->error, ep->error_errno);
    ring_tp_queue_fail(&ep->rq_head, &ep->rq_tail, ep->error, ep->error_errno);
    ep->tx_queued = 0;
    ep->tx_ctrl = 0;
}

/* The peer stopped reading (EPIPE, a reset): what it wrote before leaving may
 * still be unread, and a receive posted later must get it, so only the sends
 * fail here; reading past its last byte (EOF or the reset) fails the ep. */
static void tcp_ep_tx_gone(ring_tp_ep_t *ep, int sys_errno)
{
    ep->tx_gone = 1;
    ep->tx_gone_errno = sys_errno;
    ring_tp_queue_fail(&ep->sq_head, &ep->sq_tail, RING_ERR_REMOTE, sys_errno);
    ep->tx_queued = 0;
    ep->tx_ctrl = 0;
}

static void io_fail_errno(ring_tp_ep_t *ep, int err)
{
    tcp_ep_fail(ep, err == ENOMEM || err == ENOBUFS ? RING_ERR_IO : RING_ERR_REMOTE, err);
}

/* The peer's end of the stream: after a send failed, the error it gave (a reset, a
 * timeout) says more than the EOF that reading then finds. */
static void rx_fail_eof(ring_tp_ep_t *ep)
{
    tcp_ep_fail(ep, RING_ERR_REMOTE, ep->tx_gone ? ep->tx_gone_errno : 0);
}

/* ---- rate limit: the endpoint's token bucket (token_bucket.c) -------- */

/* Bytes from the head of the queue to the end of its last control message
 * (0 when there is none): they go out without waiting for tokens. */
static size_t tx_urgent_bytes(const ring_tp_ep_t *ep)
{
    size_t cum = 0, urgent = 0;
    int seen = 0;

    for (const ring_tp_req_t *req = ep->sq_head; req != NULL && seen < ep->tx_ctrl;
         req = req->next) {
        size_t payload = req_payload(req);

        cum += sizeof(req->prefix) + payload - req->offset;
        if (payload <= RING_BUCKET_CTRL_BYTES) {
            urgent = cum;
            seen++;
        }
    }
    return urgent;
}

size_t tcp_ep_tx_allowance(ring_tp_ep_t *ep, double now, double *delay_s)
{
    ring_bucket_t *b = &ep->tx_bucket;
    size_t urgent;
    double delay;

    if (delay_s != NULL)
        *delay_s = 0;
    if (!ring_bucket_on(b))
        return SIZE_MAX;
    ring_bucket_refill(b, now);
    delay = ring_bucket_delay(b, (double)ep->tx_queued);
    if (delay == 0)
        return b->tokens >= (double)(SIZE_MAX / 2) ? SIZE_MAX / 2 : (size_t)b->tokens;
    urgent = ep->tx_ctrl > 0 ? tx_urgent_bytes(ep) : 0;
    if (urgent == 0 && delay_s != NULL)
        *delay_s = delay;
    return urgent;
}

/* ---- sending ---------------------------------------------------------- */

/* Gather the unsent part of the queue, prefix then iovs of each message, up to limit bytes. */
static int tx_gather(ring_tp_ep_t *ep, struct iovec *iov, size_t limit)
{
    int n = 0;

    for (ring_tp_req_t *req = ep->sq_head;
         req != NULL && n < TCP_TX_IOV - RING_TP_IOV_MAX - 1 && limit > 0; req = req->next) {
        size_t skip = req->offset;

        if (skip < sizeof(req->prefix)) {
            iov[n].iov_base = req->prefix + skip;
            iov[n].iov_len = sizeof(req->prefix) - skip;
            if (iov[n].iov_len > limit)
                iov[n].iov_len = limit;
            limit -= iov[n].iov_len;
            n++;
            skip = 0;
        } else {
            skip -= sizeof(req->prefix);
        }
        for (int i = 0; i < req->iovcnt && limit > 0; i++) {
            if (skip >= req->iov[i].iov_len) {
                skip -= req->iov[i].iov_len;
                continue;
            }
            iov[n].iov_base = (char *)req->iov[i].iov_base + skip;
            iov[n].iov_len = req->iov[i].iov_len - skip;
            if (iov[n].iov_len > limit)
                iov[n].iov_len = limit;
            limit -= iov[n].iov_len;
            skip = 0;
            n++;
        }
    }
    return n;
}

int tcp_ep_progress_tx(ring_tp_ep_t *ep)
{
    struct iovec iov[TCP_TX_IOV];
    struct msghdr msg;
    int completed = 0;
    double now = ring_bucket_on(&ep->tx_bucket) ? ring_bucket_now() : 0;

    while (ep->state == TCP_EP_OPEN && ep->sq_head != NULL) {
        ssize_t sent;
        size_t left, allowed = tcp_ep_tx_allowance(ep, now, NULL);

        if (allowed == 0)
            break; /* waiting for tokens: tcp_wait sleeps until they come */
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)tx_gather(ep, iov, allowed);
        /* MSG_NOSIGNAL: a dead peer is an error status, never a SIGPIPE */
        sent = sendmsg(ep->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0) {
            int err = errno;

            if (err == EINTR)
                continue;
            if (err == ENOMEM || err == ENOBUFS)
                io_fail_errno(ep, err);
            else if (err != EAGAIN && err != EWOULDBLOCK)
                tcp_ep_tx_gone(ep, err);
            break;
        }
        completed |= sent > 0;
        left = (size_t)sent;
        ep->tx_queued -= left;
        ring_bucket_take(&ep->tx_bucket, (double)left);
        while (left > 0 && ep->sq_head != NULL) {
            ring_tp_req_t *req = ep->sq_head;
            size_t total = sizeof(req->prefix) + ring_tp_req_capacity(req);
            size_t take = total - req->offset < left ? total - req->offset : left;

            req->offset += take;
            left -= take;
            if (req->offset == total) {
                ep->sq_head = req->next;
                if (ep->sq_head == NULL)
                    ep->sq_tail = NULL;
                req->bytes = total - sizeof(req->prefix);
                if (req->bytes <= RING_BUCKET_CTRL_BYTES)
                    ep->tx_ctrl--;
                ring_tp_req_complete(req, RING_OK, 0);
                completed++;
            }
        }
    }
    return completed;
}

/* The staging buffer as the receive machine's source (lp_stream.h). */
static void stage_take(void *ctx, void *dst, size_t n)
{
    ring_tp_ep_t *ep = ctx;

    memcpy(dst, ep->rx_stage + ep->rx_stage_off, n);
    ep->rx_stage_off += n;
}

/* Read the rest of the body (or less) straight into the request's iovs. */
static ssize_t rx_read_direct(ring_tp_ep_t *ep, ring_tp_req_t *req, size_t want)
{
    struct iovec iov[RING_TP_IOV_MAX];
    int n = ring_lp_rx_body_iov(req, want, iov);
    ssize_t got;

    do
        got = readv(ep->fd, iov, n);
    while (got < 0 && errno == EINTR);
    if (got > 0)
        req->offset += (size_t)got;
    return got;
}

/* Refill the staging buffer; returns bytes read, 0 on would-block, -1 when the ep failed. */
static ssize_t rx_fill_stage(ring_tp_ep_t *ep)
{
    ssize_t got;

    ep->rx_stage_off = 0;
    ep->rx_stage_len = 0;
    do
        got = read(ep->fd, ep->rx_stage, TCP_RX_STAGE);
    while (got < 0 && errno == EINTR);
    if (got == 0) {
        rx_fail_eof(ep);
        return -1;
    }
    if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        io_fail_errno(ep, errno);
        return -1;
    }
    ep->rx_stage_len = (size_t)got;
    return got;
}

int tcp_ep_progress_rx(ring_tp_ep_t *ep)
{
    int progressed = 0;

    /* a lazy receive with nothing staged: read for now and then, not on every pass;
     * once a send failed, at once (the peer's last words say why it left) */
    if (ep->rq_head != NULL && ep->rq_head->lazy && !ep->tx_gone &&
        ep->rx_stage_off == ep->rx_stage_len) {
        double now = ring_now();

        if (now < ep->rx_lazy_next)
            return 0;
        ep->rx_lazy_next = now + TCP_LAZY_RX_S;
    }
    while (ep->state == TCP_EP_OPEN && ep->rq_head != NULL) {
        ring_tp_req_t *req = ep->rq_head;
        ring_lp_src_t src = {ep->rx_stage_len - ep->rx_stage_off, stage_take, ep};
        ring_lp_event_t ev = ring_lp_rx_step(&ep->lp_rx, req, &src, SIZE_MAX);
        size_t left;

        if (ev == RING_LP_COMPLETE) {
            ep->rx_broken |= ring_lp_rx_complete(&ep->lp_rx, &ep->rq_head, &ep->rq_tail);
            progressed++;
            continue;
        }
        if (ev != RING_LP_DRY) {
            if (ev == RING_LP_BODY)
                progressed = 1;
            continue;
        }
        /* the stage is empty: a large body skips it, read into the caller's buffer */
        left = ring_lp_rx_left(&ep->lp_rx, req);
        if (left >= TCP_RX_STAGE) {
            ssize_t got = rx_read_direct(ep, req, left);
            if (got == 0) {
                rx_fail_eof(ep);
                break;
            }
            if (got < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                    io_fail_errno(ep, errno);
                break;
            }
        } else if (rx_fill_stage(ep) <= 0) {
            break;
        }
        progressed = 1;
    }
    return progressed;
}
