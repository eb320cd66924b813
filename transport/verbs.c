/*
 * verbs.c - the RDMA verbs transport: messages as RDMA WRITE WITH
 * IMMEDIATE into the peer's receive slots, with credits (the protocol is in
 * verbs_int.h), bootstrapped over the tcp transport (verbs_boot.c: the
 * job's secret first, then the queue-pair records), or over shm, whose
 * connections to peers on this host carry the messages themselves
 * (VB_EP_LOCAL: --transport auto).
 *
 * Completions are polled in progress(); the engine busy-polls that for
 * --spin-us, then calls wait(), which arms every CQ and sleeps in poll() on
 * the completion channel and the bootstrap sockets together.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "log.h"
#include "shm.h"
#include "tcp.h"
#include "verbs.h"
#include "verbs_int.h"

static const char *vb_peer_gid(const ring_tp_ep_t *ep, char *buf, size_t len)
{
    vb_gid_format(ep->theirs.gid, buf, len);
    return buf;
}

static void vb_push(ring_tp_req_t **head, ring_tp_req_t **tail, ring_tp_req_t *req)
{
    req->next = NULL;
    if (*tail != NULL)
        (*tail)->next = req;
    else
        *head = req;
    *tail = req;
}

static ring_tp_req_t *vb_pop(ring_tp_req_t **head, ring_tp_req_t **tail)
{
    ring_tp_req_t *r = *head;

    if (r != NULL) {
        *head = r->next;
        if (*head == NULL)
            *tail = NULL;
    }
    return r;
}

static size_t vb_req_len(const ring_tp_req_t *req)
{
    size_t len = 0;

    for (int i = 0; i < req->iovcnt; i++)
        len += req->iov[i].iov_len;
    return len;
}

/* Copy len bytes from src into bytes [off, off + len) of the request's iov. */
static void vb_iov_fill(const ring_tp_req_t *req, size_t off, size_t len, const void *src)
{
    for (int i = 0; i < req->iovcnt && len > 0; i++) {
        size_t l = req->iov[i].iov_len, n;

        if (off >= l) {
            off -= l;
            continue;
        }
        n = l - off < len ? l - off : len;
        memcpy((char *)req->iov[i].iov_base + off, src, n);
        src = (const char *)src + n;
        len -= n;
        off = 0;
    }
}

/* ---- the transport --------------------------------------------------------------- */

static ring_status_t vb_init(const ring_tp_params_t *params, ring_tp_t **tp_p)
{
    vb_tp_t *tp = calloc(1, sizeof(*tp));
    ring_tp_params_t boot_params = *params;
    char why[512];
    ring_status_t st;

    if (tp == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory creating the verbs transport");
    tp->params = *params;
    tp->params.ib_dev = NULL; /* the caller's string: only vb_dev_open reads it, below */
    tp->params.host_id = NULL; /* likewise: only the shm bootstrap's init reads it */
    /* shared memory ignores --rate-limit: with a cap every connection runs RDMA */
    tp->boot_ops = params->verbs_local_shm && params->rate_limit_bps <= 0 ? &ring_shm_ops
                                                                          : &ring_tcp_ops;
    if (vb_dev_open(params, &tp->dev, why, sizeof(why)) != 0) {
        free(tp);
        return ring_error_set(RING_ERR_UNSUPPORTED, "--transport verbs: %s", why);
    }
    tp->channel = ibv_create_comp_channel(tp->dev.ctx);
    if (tp->channel == NULL ||
        fcntl(tp->channel->fd, F_SETFL, fcntl(tp->channel->fd, F_GETFL) | O_NONBLOCK) != 0) {
        int e = errno;

        if (tp->channel != NULL)
            ibv_destroy_comp_channel(tp->channel);
        vb_dev_close(&tp->dev);
        free(tp);
        return ring_error_set(RING_ERR_IO, "verbs: cannot create a completion channel: %s",
                              strerror(e));
    }
    st = tp->boot_ops->init(&boot_params, &tp->boot_tp);
    if (st != RING_OK) {
        ibv_destroy_comp_channel(tp->channel);
        vb_dev_close(&tp->dev);
        free(tp);
        return st;
    }
    ring_log(RING_LOG_INFO, "verbs: %s port %u, %s, GID %d %s, MTU %d", tp->dev.name,
             tp->dev.port, tp->dev.link_layer == 2 ? "RoCE" : "InfiniBand", tp->dev.gid_index,
             tp->dev.gid_text, 128 << tp->dev.mtu);
    *tp_p = (ring_tp_t *)tp;
    return RING_OK;
}

static void vb_fini(ring_tp_t *tp_)
{
    vb_tp_t *tp = (vb_tp_t *)tp_;

    if (tp == NULL)
        return;
    ring_log(RING_LOG_DEBUG, "verbs: sent %llu bytes straight from registered memory, %llu "
             "through the bounce slots", (unsigned long long)tp->bytes_direct,
             (unsigned long long)tp->bytes_bounced);
    if (tp->boot_ops == &ring_shm_ops)
        ring_log(RING_LOG_INFO, "verbs: %d connection(s) to peers on this host ran in shared "
                 "memory", tp->nlocal);
    tp->boot_ops->fini(tp->boot_tp);
    vb_regions_free(tp);
    ibv_destroy_comp_channel(tp->channel);
    vb_dev_close(&tp->dev);
    free(tp);
}

static ring_status_t vb_listen(ring_tp_t *tp_, const char *host, int port,
                               ring_tp_listener_t **l_p)
{
    vb_tp_t *tp = (vb_tp_t *)tp_;
    ring_tp_listener_t *l = calloc(1, sizeof(*l));
    ring_status_t st;

    if (l == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a listener");
    st = tp->boot_ops->listen(tp->boot_tp, host, port, &l->boot);
    if (st != RING_OK) {
        free(l);
        return st;
    }
    l->tp = tp;
    *l_p = l;
    return RING_OK;
}

static int vb_listener_port(const ring_tp_listener_t *l)
{
    return l->tp->boot_ops->listener_port(l->boot);
}

static void vb_listener_close(ring_tp_listener_t *l)
{
    if (l == NULL)
        return;
    l->tp->boot_ops->listener_close(l->boot);
    free(l);
}

static ring_status_t vb_accept(ring_tp_listener_t *l, ring_tp_ep_t **ep_p)
{
    ring_tp_ep_t *boot = NULL;

    *ep_p = NULL;
    RING_CHECK(l->tp->boot_ops->accept(l->boot, &boot));
    if (boot == NULL)
        return RING_OK;
    return vb_boot_start(l->tp, boot, 1, ep_p);
}

static ring_status_t vb_connect(ring_tp_t *tp_, const char *host, int port, ring_tp_ep_t **ep_p)
{
    vb_tp_t *tp = (vb_tp_t *)tp_;
    ring_tp_ep_t *boot;

    RING_CHECK(tp->boot_ops->connect(tp->boot_tp, host, port, &boot));
    return vb_boot_start(tp, boot, 0, ep_p);
}

/* ---- the data path --------------------------------------------------------------- */

static int vb_post_write(ring_tp_ep_t *ep, uint32_t imm, uint64_t wr_id, struct ibv_sge *sge,
                         int nsge, uint64_t remote)
{
    struct ibv_send_wr wr, *bad;
    int rc;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm);
    wr.sg_list = nsge > 0 ? sge : NULL;
    wr.num_sge = nsge;
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = ep->theirs.rkey;
    rc = ibv_post_send(ep->qp, &wr, &bad);
    if (rc != 0) {
        char gid[64];

        vb_ep_fail(ep, RING_ERR_IO, rc, "RDMA write to %s (GID %s, QP 0x%x -> 0x%x) could not "
                   "be posted: %s", ep->tp->boot_ops->ep_peer(ep->boot),
                   vb_peer_gid(ep, gid, sizeof(gid)), ep->mine.qpn, ep->theirs.qpn, strerror(rc));
        return -1;
    }
    ep->sq_out++;
    return 0;
}

/* Return freed slots to the sender, in batches (a write with immediate, no data). */
static int vb_return_credits(ring_tp_ep_t *ep)
{
    uint32_t n = ep->rx_unreturned;

    if (n < VB_CREDIT_BATCH || ep->sq_out >= VB_SQ_DEPTH)
        return 0;
    if (vb_post_write(ep, VB_IMM_CREDIT | n, VB_WR_CREDIT, NULL, 0, ep->theirs.addr) != 0)
        return 0;
    ep->rx_unreturned = 0;
    return 1;
}

/*
 * The gather list of bytes [off, off + len) of a request: pieces inside a
 * registered region go as they are, the others are copied into the bounce
 * slot (consecutive copies share one entry). Returns the number of entries.
 */
static int vb_gather(ring_tp_ep_t *ep, const ring_tp_req_t *req, size_t off, size_t len,
                     unsigned char *bounce, struct ibv_sge *sge)
{
    int n = 0;
    size_t used = 0;

    for (int i = 0; i < req->iovcnt && len > 0; i++) {
        size_t l = req->iov[i].iov_len, take;
        const unsigned char *p;
        const vb_region_t *r;

        if (off >= l) {
            off -= l;
            continue;
        }
        take = l - off < len ? l - off : len;
        p = (const unsigned char *)req->iov[i].iov_base + off;
        r = vb_region_find(ep->tp, p, take);
        if (r != NULL) {
            sge[n++] = (struct ibv_sge){(uint64_t)(uintptr_t)p, (uint32_t)take, r->mr->lkey};
            ep->tp->bytes_direct += take;
        } else {
            memcpy(bounce + used, p, take);
            if (n > 0 && sge[n - 1].lkey == ep->tx_mr->lkey &&
                sge[n - 1].addr + sge[n - 1].length == (uint64_t)(uintptr_t)(bounce + used))
                sge[n - 1].length += (uint32_t)take;
            else
                sge[n++] = (struct ibv_sge){(uint64_t)(uintptr_t)(bounce + used), (uint32_t)take,
                                            ep->tx_mr->lkey};
            used += take;
            ep->tp->bytes_bounced += take;
        }
        len -= take;
        off = 0;
    }
    return n;
}

/* Seconds until the next fragment may be posted under --rate-limit (0: now).
 * Control-sized fragments (RING_BUCKET_CTRL_BYTES or less) never wait. */
static double vb_tx_delay(ring_tp_ep_t *ep, uint32_t len)
{
    if (!ring_bucket_on(&ep->tx_bucket) || len <= RING_BUCKET_CTRL_BYTES)
        return 0;
    ring_bucket_refill(&ep->tx_bucket, ring_bucket_now());
    return ring_bucket_delay(&ep->tx_bucket, len);
}

/* Bytes of the next fragment of the send queue's head request. */
static uint32_t vb_next_fragment(const ring_tp_ep_t *ep)
{
    uint32_t frag_max = ep->theirs.slot_bytes < VB_SLOT_BYTES ? ep->theirs.slot_bytes
                                                              : VB_SLOT_BYTES;
    size_t left = vb_req_len(ep->sq_head) - ep->sq_head->offset;

    return left < frag_max ? (uint32_t)left : frag_max;
}

/* Post fragments of the queued sends while credits, bounce slots, the SQ and
 * the rate limit allow. */
static int vb_push_tx(ring_tp_ep_t *ep)
{
    int moved = 0;

    while (ep->state == VB_EP_OPEN && ep->sq_head != NULL && ep->tx_credits > 0 &&
           ep->tx_posted - ep->tx_completed < VB_SLOTS && ep->sq_out < VB_SQ_DEPTH - 1) {
        ring_tp_req_t *req = ep->sq_head;
        size_t total = vb_req_len(req);
        uint32_t len = vb_next_fragment(ep);
        int last = req->offset + len == total;
        uint32_t slot = ep->tx_posted % VB_SLOTS;
        unsigned char *bounce = ep->tx_bounce + (size_t)slot * VB_SLOT_BYTES;
        uint64_t remote = ep->theirs.addr +
                          (uint64_t)(ep->tx_posted % ep->theirs.nslots) * ep->theirs.slot_bytes;
        struct ibv_sge sge[RING_TP_IOV_MAX];
        int nsge;

        if (vb_tx_delay(ep, len) > 0)
            break; /* waiting for tokens: vb_wait sleeps until they come */
        nsge = vb_gather(ep, req, req->offset, len, bounce, sge);
        if (vb_post_write(ep, len | (last ? VB_IMM_LAST : 0), VB_WR_DATA, sge, nsge,
                          remote) != 0)
            return 1;
        ring_bucket_take(&ep->tx_bucket, len);
        ep->tx_ends_req[slot] = (uint8_t)last;
        ep->tx_posted++;
        ep->tx_credits--;
        req->offset += len;
        moved = 1;
        if (last)
            vb_push(&ep->fl_head, &ep->fl_tail, vb_pop(&ep->sq_head, &ep->sq_tail));
    }
    return moved;
}

/* How the bootstrap connection ended, as the errno of a request failed by it. */
static int vb_gone_errno(const ring_tp_ep_t *ep)
{
    return ep->live_recv.status == RING_OK ? EPROTO : ep->live_recv.sys_errno;
}

/* Copy landed fragments into the posted receives, in order. */
static int vb_deliver(ring_tp_ep_t *ep)
{
    int moved = 0;

    while (ep->rx_consumed != ep->rx_arrived && ep->rq_head != NULL) {
        ring_tp_req_t *req = ep->rq_head;
        uint32_t k = ep->rx_consumed % VB_SLOTS, len = ep->rx_len[k];
        size_t cap = vb_req_len(req), room = cap > ep->rx_msg_bytes ? cap - ep->rx_msg_bytes : 0;

        vb_iov_fill(req, ep->rx_msg_bytes, len < room ? len : room,
                 ep->rx_slots + (size_t)k * VB_SLOT_BYTES);
        if (len > room)
            ep->rx_overflow = 1;
        ep->rx_msg_bytes += len;
        ep->rx_consumed++;
        ep->rx_unreturned++;
        moved = 1;
        if (ep->rx_last[k]) {
            req = vb_pop(&ep->rq_head, &ep->rq_tail);
            req->bytes = ep->rx_msg_bytes;
            ep->rx_msg_bytes = 0;
            if (ep->rx_overflow) {
                ep->rx_overflow = 0;
                /* as tcp: this receive and every later one fail, sends still work */
                ep->rx_broken = 1;
                vb_req_finish(req, RING_ERR_MISMATCH, 0);
                vb_fail_list(&ep->rq_head, &ep->rq_tail, RING_ERR_MISMATCH, 0);
            } else {
                vb_req_finish(req, RING_OK, 0);
            }
        }
    }
    if (!ep->gone) /* its QP is gone with it */
        moved |= vb_return_credits(ep);
    return moved;
}

static void vb_completion_error(ring_tp_ep_t *ep, const struct ibv_wc *wc)
{
    char gid[64];
    const char *what = wc->wr_id == VB_WR_RECV ? "receive from" : "RDMA write to";

    vb_ep_fail(ep, RING_ERR_REMOTE, wc->status == IBV_WC_RETRY_EXC_ERR ? ETIMEDOUT : ECONNRESET,
               "%s %s (GID %s, QP 0x%x -> 0x%x on %s) failed: %s", what,
               ep->tp->boot_ops->ep_peer(ep->boot), vb_peer_gid(ep, gid, sizeof(gid)), ep->mine.qpn,
               ep->theirs.qpn, ep->tp->dev.name, ibv_wc_status_str(wc->status));
}

/* Drain the endpoint's CQ: retire writes, note landed fragments and credits. */
static int vb_poll_cq(ring_tp_ep_t *ep)
{
    struct ibv_wc wc[16];
    int n, moved = 0;
    char err[384];

    while ((n = ibv_poll_cq(ep->cq, 16, wc)) > 0) {
        moved = 1;
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                vb_completion_error(ep, &wc[i]); /* flushes after the first change nothing */
                continue;
            }
            if (wc[i].wr_id == VB_WR_DATA) {
                uint32_t slot = ep->tx_completed % VB_SLOTS;

                ep->tx_completed++;
                ep->sq_out--;
                if (ep->tx_ends_req[slot]) {
                    ring_tp_req_t *req = vb_pop(&ep->fl_head, &ep->fl_tail);
                    if (req != NULL)
                        vb_req_finish(req, RING_OK, 0);
                }
            } else if (wc[i].wr_id == VB_WR_CREDIT) {
                ep->sq_out--;
            } else if (ep->state != VB_EP_FAILED) {
                uint32_t imm = ntohl(wc[i].imm_data);

                if (!(wc[i].wc_flags & IBV_WC_WITH_IMM)) {
                    vb_ep_fail(ep, RING_ERR_PROTOCOL, 0, "%s wrote without an immediate",
                               ep->tp->boot_ops->ep_peer(ep->boot));
                    continue;
                }
                if (imm & VB_IMM_CREDIT) {
                    ep->tx_credits += imm & VB_IMM_LEN;
                } else if ((imm & VB_IMM_LEN) > VB_SLOT_BYTES ||
                           ep->rx_arrived - ep->rx_consumed >= VB_SLOTS) {
                    vb_ep_fail(ep, RING_ERR_PROTOCOL, 0, "%s broke the credit protocol (a "
                               "fragment of %u bytes, %u slots full)",
                               ep->tp->boot_ops->ep_peer(ep->boot), imm & VB_IMM_LEN,
                               ep->rx_arrived - ep->rx_consumed);
                    continue;
                } else {
                    uint32_t k = ep->rx_arrived % VB_SLOTS;

                    ep->rx_len[k] = imm & VB_IMM_LEN;
                    ep->rx_last[k] = (imm & VB_IMM_LAST) != 0;
                    ep->rx_arrived++;
                }
                if (vb_qp_post_recvs(ep, 1, err, sizeof(err)) != 0)
                    vb_ep_fail(ep, RING_ERR_IO, errno, "%s", err);
            }
        }
    }
    if (n < 0 && ep->state != VB_EP_FAILED)
        vb_ep_fail(ep, RING_ERR_IO, 0, "polling the completion queue of QP 0x%x failed",
                   ep->mine.qpn);
    return moved;
}

/* A request starts afresh; on a failed endpoint it fails at once with the sticky error. */
static ring_status_t vb_req_start(ring_tp_ep_t *ep, ring_tp_req_t *req)
{
    req->done = 0;
    req->status = RING_OK;
    req->sys_errno = 0;
    req->offset = 0;
    req->bytes = 0;
    if (ep->state != VB_EP_FAILED)
        return RING_OK;
    vb_req_finish(req, ep->error, ep->error_errno);
    return ep->error;
}

static ring_status_t vb_post_send(ring_tp_ep_t *ep, ring_tp_req_t *req)
{
    if (ep->state == VB_EP_LOCAL)
        return ep->tp->boot_ops->post_send(ep->boot, req);
    RING_CHECK(vb_req_start(ep, req));
    if (ep->gone) { /* a receive may still read what it wrote before it left */
        vb_req_finish(req, RING_ERR_REMOTE, vb_gone_errno(ep));
        return RING_ERR_REMOTE;
    }
    if (vb_req_len(req) > UINT32_MAX)
        return ring_error_set(RING_ERR_INVALID, "message of %zu bytes is too large",
                              vb_req_len(req));
    if (req->urgent && ep->sq_head != NULL) {
        /* before every queued message, except one already partly posted */
        ring_tp_req_t *after = ep->sq_head->offset > 0 ? ep->sq_head : NULL;

        req->next = after != NULL ? after->next : ep->sq_head;
        if (after != NULL)
            after->next = req;
        else
            ep->sq_head = req;
        if (req->next == NULL)
            ep->sq_tail = req;
    } else {
        vb_push(&ep->sq_head, &ep->sq_tail, req);
    }
    if (ep->state == VB_EP_OPEN)
        (void)vb_push_tx(ep);
    return RING_OK;
}

static void vb_check_alive(ring_tp_ep_t *ep);

static ring_status_t vb_post_recv(ring_tp_ep_t *ep, ring_tp_req_t *req)
{
    if (ep->state == VB_EP_LOCAL)
        return ep->tp->boot_ops->post_recv(ep->boot, req);
    RING_CHECK(vb_req_start(ep, req));
    if (ep->rx_broken) {
        vb_req_finish(req, RING_ERR_MISMATCH, 0);
        return RING_ERR_MISMATCH;
    }
    vb_push(&ep->rq_head, &ep->rq_tail, req);
    if (ep->state == VB_EP_OPEN)
        (void)vb_deliver(ep);
    if (ep->gone) /* nothing more will land: fail it now if it got nothing */
        vb_check_alive(ep);
    return RING_OK;
}

/* The bootstrap connection ended (or said something it never should): the peer is gone.
 * What it wrote before (an ABORT saying why) is read first, as tcp reads the bytes
 * before a FIN: while fragments no receive has taken remain, only sends fail; the
 * endpoint fails once they are read (this runs on every progress pass). */
static void vb_check_alive(ring_tp_ep_t *ep)
{
    if (!ep->live_recv.done)
        return;
    (void)vb_deliver(ep);
    if (ep->rx_consumed != ep->rx_arrived && ep->live_recv.status != RING_OK) {
        if (!ep->gone) {
            ep->gone = 1;
            vb_fail_list(&ep->sq_head, &ep->sq_tail, RING_ERR_REMOTE, vb_gone_errno(ep));
        }
        return;
    }
    vb_ep_fail(ep, RING_ERR_REMOTE, vb_gone_errno(ep),
               "%s: %s", ep->tp->boot_ops->ep_peer(ep->boot),
               ep->live_recv.status == RING_OK
                   ? "unexpected bytes on the bootstrap connection"
                   : ring_tp_cause(ep->live_recv.status, ep->live_recv.sys_errno));
}

static int vb_progress(ring_tp_t *tp_)
{
    vb_tp_t *tp = (vb_tp_t *)tp_;
    int moved = tp->boot_ops->progress(tp->boot_tp);

    for (int i = 0; i < tp->neps; i++) {
        ring_tp_ep_t *ep = tp->eps[i];

        if (ep->state == VB_EP_BOOT)
            moved += vb_boot_progress(ep);
        if (ep->state != VB_EP_OPEN)
            continue;
        moved += vb_poll_cq(ep);
        moved += vb_deliver(ep);
        moved += vb_push_tx(ep);
        vb_check_alive(ep);
    }
    return moved;
}

static void vb_wait(ring_tp_t *tp_, int timeout_ms)
{
    vb_tp_t *tp = (vb_tp_t *)tp_;
    struct pollfd pfd[SHM_WAIT_FDS + 1]; /* the larger of tcp's and shm's, + the channel */
    int shm = tp->boot_ops == &ring_shm_ops;
    int n;

    /* the bounded busy-poll is the engine's (--spin-us, before it calls wait) */
    /* arm, then look once more: a completion between the last poll and arming
     * raises no event */
    for (int i = 0; i < tp->neps; i++)
        if (tp->eps[i]->state == VB_EP_OPEN)
            (void)ibv_req_notify_cq(tp->eps[i]->cq, 0);
    if (vb_progress(tp_) > 0)
        return;
    n = shm ? ring_shm_wait_fds(tp->boot_tp, pfd, &timeout_ms)
            : tcp_wait_fds(tp->boot_tp, pfd, &timeout_ms);
    /* a send held back by --rate-limit: wake up when its tokens are there */
    for (int i = 0; i < tp->neps; i++) {
        ring_tp_ep_t *ep = tp->eps[i];
        double ms;

        if (ep->state != VB_EP_OPEN || ep->sq_head == NULL || !ring_bucket_on(&ep->tx_bucket))
            continue;
        ms = ceil(vb_tx_delay(ep, vb_next_fragment(ep)) * 1000.0);
        if (ms > 0 && (timeout_ms < 0 || ms < (double)timeout_ms))
            timeout_ms = (int)ms;
    }
    pfd[n++] = (struct pollfd){.fd = tp->channel->fd, .events = POLLIN};
    if (poll(pfd, (nfds_t)n, timeout_ms) > 0 && (pfd[n - 1].revents & POLLIN)) {
        struct ibv_cq *cq;
        void *ctx;

        /* every event read is acknowledged at once, so ibv_destroy_cq never waits */
        for (int i = 0; i < 1024 && ibv_get_cq_event(tp->channel, &cq, &ctx) == 0; i++)
            ibv_ack_cq_events(cq, 1);
    }
    if (shm)
        ring_shm_wait_done(tp->boot_tp);
}

static const char *vb_ep_peer(const ring_tp_ep_t *ep)
{
    /* a bootstrap that failed its authentication is closed at once */
    return ep->boot != NULL ? ep->tp->boot_ops->ep_peer(ep->boot) : ep->peer;
}

static const char *vb_ep_error(const ring_tp_ep_t *ep)
{
    if (ep->state == VB_EP_LOCAL)
        return ep->tp->boot_ops->ep_error(ep->boot);
    return ep->state == VB_EP_FAILED ? ep->error_text : "";
}

static void vb_ep_close(ring_tp_ep_t *ep)
{
    if (ep == NULL)
        return;
    vb_ep_fail(ep, RING_ERR_CANCELED, 0, NULL);
    vb_ep_free(ep);
}

/* Is there an active RDMA port this process could use? (for --transport auto) */
int ring_verbs_probe(const ring_tp_params_t *params, char *why, size_t whylen)
{
    vb_dev_t dev;

    if (vb_dev_open(params, &dev, why, whylen) != 0)
        return 0;
    vb_dev_close(&dev);
    return 1;
}

const ring_tp_ops_t ring_verbs_ops = {
    .size = sizeof(ring_tp_ops_t),
    .name = "verbs",
    .kind = RING_TP_VERBS,
    .init = vb_init,
    .fini = vb_fini,
    .listen = vb_listen,
    .accept = vb_accept,
    .listener_close = vb_listener_close,
    .listener_port = vb_listener_port,
    .connect = vb_connect,
    .post_send = vb_post_send,
    .post_recv = vb_post_recv,
    .progress = vb_progress,
    .wait = vb_wait,
    .ep_peer = vb_ep_peer,
    .ep_close = vb_ep_close,
    .ep_error = vb_ep_error,
    .reg_mem = vb_reg_mem,
    .dereg_mem = vb_dereg_mem,
};
