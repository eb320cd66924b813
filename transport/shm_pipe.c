/*
 * shm_pipe.c - moving messages through the shared-memory pipes: the same
 * length-prefixed byte stream as tcp (lp_stream.h), written into one
 * direction's ring by its producer and copied out by its consumer. Each side keeps its own
 * index; the peer's, read from shared memory, is checked before it is used
 * (a peer may be buggy or hostile: it can stall us, never make us read or
 * write outside the segment). A sleeping side is woken through its eventfd.
 * Nothing here allocates.
 */
#include "ring_build.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shm_int.h"
#include "tp_queue.h"

/* Publish the index every this many bytes of a long copy, so that the other
 * side copies out one piece while this side copies in the next. */
#define SHM_PIECE ((size_t)128 << 10)

void shm_ep_fail(ring_tp_ep_t *ep, ring_status_t status, int sys_errno, const char *why)
{
    if (ep->phase != SHM_FAILED) {
        ep->phase = SHM_FAILED;
        ep->error = status;
        ep->error_errno = sys_errno;
        if (why != NULL)
            snprintf(ep->why, sizeof(ep->why), "%s", why);
    }
    ring_tp_queue_fail(&ep->sq_head, &ep->sq_tail, ep->error, ep->error_errno);
    ring_tp_queue_fail(&ep->rq_head, &ep->rq_tail, ep->error, ep->error_errno);
}

void shm_ep_peer_gone(ring_tp_ep_t *ep, int sys_errno)
{
    ep->gone = 1;
    ep->gone_errno = sys_errno;
    ring_tp_queue_fail(&ep->sq_head, &ep->sq_tail, RING_ERR_REMOTE, sys_errno);
    /* what it wrote before going (an ABORT saying why) is read as tcp reads the
     * bytes before a FIN: a receive posted later still gets it */
    (void)shm_ep_progress_rx(ep);
}

static void wake_peer(ring_tp_ep_t *ep, _Atomic uint32_t *flag)
{
    /* pairs with the fence in shm_ep_sleep_prepare: either the peer sees the new
     * index before it sleeps, or we see its flag and wake it */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(flag, memory_order_relaxed) != 0) {
        atomic_store_explicit(flag, 0, memory_order_relaxed);
        (void)eventfd_write(ep->efd_peer, 1);
    }
}

/* ---- sending ---------------------------------------------------------- */

/* Room in the tx pipe, or -1 when the peer's tail cannot be right. */
static int64_t tx_room(ring_tp_ep_t *ep)
{
    shm_pipe_t *p = &ep->tx;
    uint64_t tail = atomic_load_explicit(&p->ctl->tail, memory_order_acquire);
    uint64_t used = p->pos - tail;

    return used > p->size ? -1 : (int64_t)(p->size - used);
}

static void pipe_put(shm_pipe_t *p, const void *src, size_t n)
{
    size_t off = (size_t)(p->pos & p->mask), first = p->size - off < n ? p->size - off : n;

    memcpy(p->data + off, src, first);
    if (n > first)
        memcpy(p->data, (const char *)src + first, n - first);
    p->pos += n;
}

/* The part of req's stream (prefix, then iovs) at its offset, at most limit bytes. */
static size_t tx_piece(const ring_tp_req_t *req, const void **src, size_t limit)
{
    size_t skip = req->offset;

    if (skip < sizeof(req->prefix)) {
        *src = req->prefix + skip;
        return sizeof(req->prefix) - skip < limit ? sizeof(req->prefix) - skip : limit;
    }
    skip -= sizeof(req->prefix);
    for (int i = 0; i < req->iovcnt; i++) {
        if (skip >= req->iov[i].iov_len) {
            skip -= req->iov[i].iov_len;
            continue;
        }
        *src = (const char *)req->iov[i].iov_base + skip;
        return req->iov[i].iov_len - skip < limit ? req->iov[i].iov_len - skip : limit;
    }
    return 0;
}

int shm_ep_progress_tx(ring_tp_ep_t *ep)
{
    int completed = 0, moved = 0;

    while (ep->phase == SHM_PIPES && ep->sq_head != NULL) {
        ring_tp_req_t *req = ep->sq_head;
        size_t total = sizeof(req->prefix) + ring_tp_req_capacity(req);
        int64_t room = tx_room(ep);
        const void *src = NULL;
        size_t n;

        if (room < 0) {
            shm_ep_fail(ep, RING_ERR_PROTOCOL, 0, "its read index in shared memory is "
                        "corrupt (a bug or a hostile peer)");
            break;
        }
        if (req->offset < total) {
            if (room == 0)
                break;
            n = tx_piece(req, &src, (size_t)room < SHM_PIECE ? (size_t)room : SHM_PIECE);
            pipe_put(&ep->tx, src, n);
            req->offset += n;
            moved = 1;
            atomic_store_explicit(&ep->tx.ctl->head, ep->tx.pos, memory_order_release);
            wake_peer(ep, &ep->tx.ctl->consumer_sleeps);
        }
        if (req->offset == total) {
            ep->sq_head = req->next;
            if (ep->sq_head == NULL)
                ep->sq_tail = NULL;
            req->bytes = total - sizeof(req->prefix);
            ring_tp_req_complete(req, RING_OK, 0);
            completed++;
        }
    }
    return completed + moved;
}

/* ---- receiving -------------------------------------------------------- */

/* Bytes waiting in the rx pipe, or -1 when the peer's head cannot be right. */
static int64_t rx_avail(ring_tp_ep_t *ep)
{
    shm_pipe_t *p = &ep->rx;
    uint64_t head = atomic_load_explicit(&p->ctl->head, memory_order_acquire);
    uint64_t avail = head - p->pos;

    return avail > p->size ? -1 : (int64_t)avail;
}

/* The rx pipe as the receive machine's source (lp_stream.h): it copies out
 * straight into the prefix or the caller's buffer. */
static void pipe_get(void *ctx, void *dst, size_t n)
{
    shm_pipe_t *p = ctx;
    size_t off = (size_t)(p->pos & p->mask), first = p->size - off < n ? p->size - off : n;

    memcpy(dst, p->data + off, first);
    if (n > first)
        memcpy((char *)dst + first, p->data, n - first);
    p->pos += n;
}

static void rx_consumed(ring_tp_ep_t *ep)
{
    atomic_store_explicit(&ep->rx.ctl->tail, ep->rx.pos, memory_order_release);
    wake_peer(ep, &ep->rx.ctl->producer_sleeps);
}

int shm_ep_progress_rx(ring_tp_ep_t *ep)
{
    int progressed = 0;

    while (ep->phase == SHM_PIPES && ep->rq_head != NULL) {
        int64_t avail = rx_avail(ep);
        ring_lp_src_t src;
        ring_lp_event_t ev;

        if (avail < 0) {
            shm_ep_fail(ep, RING_ERR_PROTOCOL, 0, "its write index in shared memory is "
                        "corrupt (a bug or a hostile peer)");
            break;
        }
        src = (ring_lp_src_t){(size_t)avail, pipe_get, &ep->rx};
        ev = ring_lp_rx_step(&ep->lp_rx, ep->rq_head, &src, SHM_PIECE);
        if (ev == RING_LP_DRY) {
            /* all it wrote is read (or the message is cut short): now its leaving is news */
            if (ep->gone)
                shm_ep_fail(ep, RING_ERR_REMOTE, ep->gone_errno, NULL);
            break;
        }
        if (ev == RING_LP_COMPLETE) {
            ep->rx_broken |= ring_lp_rx_complete(&ep->lp_rx, &ep->rq_head, &ep->rq_tail);
            progressed++;
            continue;
        }
        rx_consumed(ep);
        progressed = 1;
    }
    return progressed;
}

/* ---- sleeping --------------------------------------------------------- */

int shm_ep_ready(ring_tp_ep_t *ep)
{
    if (ep->phase != SHM_PIPES)
        return 0;
    if (ep->rq_head != NULL && (rx_avail(ep) != 0 || ep->gone))
        return 1;
    return ep->sq_head != NULL && tx_room(ep) != 0;
}

int shm_ep_sleep_prepare(ring_tp_ep_t *ep)
{
    if (ep->phase != SHM_PIPES)
        return 0;
    if (ep->rq_head != NULL)
        atomic_store_explicit(&ep->rx.ctl->consumer_sleeps, 1, memory_order_relaxed);
    if (ep->sq_head != NULL)
        atomic_store_explicit(&ep->tx.ctl->producer_sleeps, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    return shm_ep_ready(ep);
}

void shm_ep_wake_done(ring_tp_ep_t *ep)
{
    eventfd_t v;

    if (ep->phase != SHM_PIPES)
        return;
    atomic_store_explicit(&ep->rx.ctl->consumer_sleeps, 0, memory_order_relaxed);
    atomic_store_explicit(&ep->tx.ctl->producer_sleeps, 0, memory_order_relaxed);
    (void)eventfd_read(ep->efd_mine, &v); /* non-blocking: clears a wake-up, if any */
}
