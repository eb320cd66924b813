/*
 * verbs_boot.c - one verbs endpoint's bootstrap over its TCP connection:
 *
 *   [with the job's secret] the engine's connection guard (params.hooks:
 *       its challenge-response), the side that called connect as its
 *       connector, run to the end first;
 *   our QP (INIT, receives posted) and our record out, theirs in;
 *   RTR, RTS, then one ready byte each way; the endpoint is open.
 *
 * With a secret, nothing about this peer goes to the other side before it
 * has proven the secret: the acceptor's record follows its proof, which it
 * sends only after checking the connector's; the connector's record waits
 * until it has checked the acceptor's proof. The queue pair and its 4 MiB
 * of registered slots are made only then, so strangers cost no RDMA
 * resources. A failed exchange fails that endpoint alone, closes its
 * connection and logs why (who, from where): never the listener, never
 * the ring. Without a secret the records go out at once, as they always did.
 *
 * Over an shm bootstrap (--transport auto) the records wait until shm's own
 * hand-shake has told where the connection runs: in shared memory (the peer
 * is on this host) the endpoint needs no queue pair and goes VB_EP_LOCAL,
 * its messages carried by the bootstrap connection; over tcp (another host)
 * the records go out as above.
 */
#include "ring_build.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "le.h"
#include "log.h"
#include "shm.h"
#include "tcp.h"
#include "verbs_int.h"

/* Our QP in INIT with its receives posted, our record on its way, theirs awaited. */
static int vb_boot_post_record(ring_tp_ep_t *ep, char *err, size_t errlen)
{
    vb_tp_t *tp = ep->tp;

    if (vb_qp_create(ep, err, errlen) != 0 || vb_qp_to_init(ep, err, errlen) != 0 ||
        vb_qp_post_recvs(ep, VB_SLOTS + VB_RQ_EXTRA, err, errlen) != 0)
        return -1;
    ep->mine.link_layer = tp->dev.link_layer;
    ep->mine.mtu = tp->dev.mtu;
    ep->mine.lid = tp->dev.lid;
    ep->mine.port = tp->dev.port;
    ep->mine.gid_index = (uint8_t)tp->dev.gid_index;
    ep->mine.qpn = ep->qp->qp_num;
    ep->mine.psn = (uint32_t)(rand() ^ (int)ep->qp->qp_num) & 0xffffff;
    ep->mine.rkey = ep->rx_mr->rkey;
    ep->mine.addr = (uint64_t)(uintptr_t)ep->rx_slots;
    ep->mine.nslots = VB_SLOTS;
    ep->mine.slot_bytes = VB_SLOT_BYTES;
    memcpy(ep->mine.gid, tp->dev.gid, 16);
    snprintf(ep->mine.dev_name, sizeof(ep->mine.dev_name), "%s", tp->dev.name);
    vb_record_encode(&ep->mine, ep->rec_out);
    ep->rec_send.iov[0] = (struct iovec){ep->rec_out, VB_RECORD_BYTES};
    ep->rec_send.iovcnt = 1;
    ep->rec_recv.iov[0] = (struct iovec){ep->rec_in, VB_RECORD_BYTES};
    ep->rec_recv.iovcnt = 1;
    (void)ep->tp->boot_ops->post_send(ep->boot, &ep->rec_send);
    (void)ep->tp->boot_ops->post_recv(ep->boot, &ep->rec_recv);
    return 0;
}

/* The peer is on this host: what was posted meanwhile goes to the bootstrap
 * connection, in order, and so does everything later (vb_post_send/recv). */
static void vb_boot_go_local(ring_tp_ep_t *ep)
{
    ring_tp_req_t *sq = ep->sq_head, *rq = ep->rq_head;

    ep->state = VB_EP_LOCAL;
    ep->sq_head = ep->sq_tail = ep->rq_head = ep->rq_tail = NULL;
    for (ring_tp_req_t *next; sq != NULL; sq = next) {
        next = sq->next;
        (void)ep->tp->boot_ops->post_send(ep->boot, sq);
    }
    for (ring_tp_req_t *next; rq != NULL; rq = next) {
        next = rq->next;
        (void)ep->tp->boot_ops->post_recv(ep->boot, rq);
    }
    ep->tp->nlocal++;
    ring_log(RING_LOG_DEBUG, "verbs: %s is on this host: shared memory, no queue pair",
             ep->tp->boot_ops->ep_peer(ep->boot));
}

/* After the secret (or at once without one): the records, once it is known
 * that the peer is on another host; 1 when something happened. */
static int vb_boot_place(ring_tp_ep_t *ep)
{
    char err[384];
    int local = ep->tp->boot_ops == &ring_shm_ops ? ring_shm_ep_local(ep->boot) : 0;

    if (local < 0) {
        ep->placing = 1; /* shm's hand-shake still runs: vb_boot_progress asks again */
        return 0;
    }
    ep->placing = 0;
    if (local == 1) {
        vb_boot_go_local(ep);
        return 1;
    }
    /* a failed hand-shake lands here too: the record's receive then says why */
    if (vb_boot_post_record(ep, err, sizeof(err)) != 0) {
        vb_ep_fail(ep, RING_ERR_NO_RESOURCE, errno, "verbs: %s", err);
        ring_log(RING_LOG_WARN, "%s", ep->error_text);
    }
    return 1;
}

ring_status_t vb_boot_start(vb_tp_t *tp, ring_tp_ep_t *boot, int acceptor, ring_tp_ep_t **ep_p)
{
    const ring_tp_hooks_t *h = &tp->params.hooks;
    ring_tp_ep_t *ep;
    char err[384];

    if (tp->neps == VB_MAX_EPS) {
        tp->boot_ops->ep_close(boot);
        return ring_error_set(RING_ERR_NO_RESOURCE, "too many verbs connections (%d)",
                              VB_MAX_EPS);
    }
    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        tp->boot_ops->ep_close(boot);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a verbs connection");
    }
    ep->tp = tp;
    ep->boot = boot;
    ep->state = VB_EP_BOOT;
    ep->acceptor = acceptor;
    ring_bucket_init(&ep->tx_bucket, tp->params.rate_limit_bps, ring_bucket_now());
    tp->eps[tp->neps++] = ep;
    if (h->guard_begin != NULL) {
        /* the secret first: no QP, no record until the other side has proven it */
        ring_status_t st;

        ep->guard = calloc(1, h->guard_state_bytes);
        if (ep->guard == NULL) {
            vb_ep_free(ep);
            return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a verbs connection");
        }
        st = h->guard_begin(h->ctx, ep->guard, tp->boot_ops, boot, acceptor);
        if (st != RING_OK) {
            vb_ep_free(ep);
            return st;
        }
        ep->guarding = 1;
        *ep_p = ep;
        return RING_OK;
    }
    if (tp->boot_ops == &ring_shm_ops) {
        ep->placing = 1; /* vb_boot_progress places it once shm's hand-shake has */
        *ep_p = ep;
        return RING_OK;
    }
    if (vb_boot_post_record(ep, err, sizeof(err)) != 0) {
        vb_ep_free(ep);
        return ring_error_set(RING_ERR_NO_RESOURCE, "verbs: %s", err);
    }
    *ep_p = ep;
    return RING_OK;
}

/* Close the bootstrap connection of an endpoint that failed before it was
 * authenticated: the other side hears nothing more, only the close. */
static void vb_boot_drop(ring_tp_ep_t *ep)
{
    snprintf(ep->peer, sizeof(ep->peer), "%s", ep->tp->boot_ops->ep_peer(ep->boot));
    ep->tp->boot_ops->ep_close(ep->boot);
    ep->boot = NULL;
}

/* The guard (the challenge-response) on the bootstrap connection; 1 when it moved. */
static int vb_boot_guard(ring_tp_ep_t *ep)
{
    const ring_tp_hooks_t *h = &ep->tp->params.hooks;
    ring_tp_guard_state_t gs = h->guard_step(h->ctx, ep->guard);
    const char *peer = ep->tp->boot_ops->ep_peer(ep->boot);
    ring_tp_guard_why_t w;
    const char *why, *foreign;

    if (gs == RING_TP_GUARD_PENDING)
        return 0;
    ep->guarding = 0;
    if (gs == RING_TP_GUARD_DONE) {
        ring_log(RING_LOG_DEBUG, "verbs: %s %s proved the job's secret", ep->acceptor ?
                 "a connection from" : "the bootstrap connection to", peer);
        (void)vb_boot_place(ep);
        return 1;
    }
    memset(&w, 0, sizeof(w));
    h->guard_why(h->ctx, ep->guard, &w);
    why = w.why != NULL ? w.why : "";
    if (w.unreachable) {
        /* nobody listens there (yet): the same failure as without a secret */
        vb_ep_fail(ep, w.status, w.sys_errno, "%s: %s", peer,
                   ring_tp_cause(w.status, w.sys_errno));
        vb_boot_drop(ep);
        return 1;
    }
    if (w.first_len >= 4 && le_get32(w.first) == VB_RECORD_MAGIC)
        why = "sent its verbs queue-pair record without authenticating: it runs without a "
              "secret (give every peer the same --secret-file)";
    else if (w.first_len >= 4 && h->foreign_bytes != NULL &&
             (foreign = h->foreign_bytes(h->ctx, w.first, w.first_len)) != NULL)
        why = foreign; /* another protocol where the challenge was due: in its words */
    if (ep->acceptor)
        vb_ep_fail(ep, RING_ERR_PROTOCOL, EACCES, "verbs bootstrap: a connection from %s %s; "
                   "closed it, told it nothing", peer, why);
    else
        vb_ep_fail(ep, RING_ERR_PROTOCOL, EACCES, "verbs bootstrap: authentication with %s "
                   "failed: %s", peer, why);
    /* what the other side sent failed a check (a relay, another rank): a security
     * notice, at the default log level; a close may be a peer restarting */
    if (w.bad_message)
        ring_log_security("verbs bootstrap: refused %s %s, which %s; closed it, told it "
                          "nothing", ep->acceptor ? "a connection from" : "the answer of", peer,
                          why);
    else
        ring_log(RING_LOG_WARN, "%s", ep->error_text);
    vb_boot_drop(ep);
    return 1;
}

/* What arrived instead of a verbs record, in words. */
static void vb_boot_refused(ring_tp_ep_t *ep)
{
    const ring_tp_hooks_t *h = &ep->tp->params.hooks;
    const char *peer = ep->tp->boot_ops->ep_peer(ep->boot);
    ring_tp_req_t *r = &ep->rec_recv;
    int spoke = r->status == RING_OK || r->status == RING_ERR_MISMATCH;
    /* another protocol's first bytes (the engine knows its own): in its words */
    const char *what = spoke && h->foreign_bytes != NULL
                           ? h->foreign_bytes(h->ctx, ep->rec_in, r->bytes) : NULL;

    if (what != NULL)
        vb_ep_fail(ep, RING_ERR_PROTOCOL, 0, "%s %s", peer, what);
    else if (r->status != RING_OK)
        vb_ep_fail(ep, r->status, r->sys_errno, "%s: %s", peer,
                   ring_tp_cause(r->status, r->sys_errno));
    else
        vb_ep_fail(ep, RING_ERR_PROTOCOL, 0, "%s sent %zu bytes that are not a ringd verbs "
                   "record", peer, r->bytes);
}

/* After the secret: their record -> RTR, RTS -> ready byte both ways -> open. */
static int vb_boot_records(ring_tp_ep_t *ep)
{
    char err[384];

    if (!ep->ready_sent) {
        if (!ep->rec_recv.done)
            return 0;
        if (ep->rec_recv.status != RING_OK || ep->rec_recv.bytes != VB_RECORD_BYTES) {
            vb_boot_refused(ep);
            return 1;
        }
        if (vb_record_decode(ep->rec_in, &ep->theirs, err, sizeof(err)) != 0) {
            vb_ep_fail(ep, RING_ERR_PROTOCOL, 0, "%s sent a bad verbs record: %s",
                       ep->tp->boot_ops->ep_peer(ep->boot), err);
            return 1;
        }
        if (ep->theirs.link_layer != ep->mine.link_layer) {
            vb_ep_fail(ep, RING_ERR_MISMATCH, 0, "%s uses %s (%s), this peer %s (%s): one ring "
                       "cannot mix InfiniBand and RoCE", ep->tp->boot_ops->ep_peer(ep->boot),
                       ep->theirs.link_layer == 2 ? "RoCE" : "InfiniBand", ep->theirs.dev_name,
                       ep->mine.link_layer == 2 ? "RoCE" : "InfiniBand", ep->mine.dev_name);
            return 1;
        }
        if (vb_qp_to_rtr(ep, err, sizeof(err)) != 0 || vb_qp_to_rts(ep, err, sizeof(err)) != 0) {
            vb_ep_fail(ep, RING_ERR_IO, errno, "%s", err);
            return 1;
        }
        ep->tx_credits = ep->theirs.nslots;
        ep->rdy_out = 'R';
        ep->rdy_send.iov[0] = (struct iovec){&ep->rdy_out, 1};
        ep->rdy_send.iovcnt = 1;
        ep->rdy_recv.iov[0] = (struct iovec){&ep->rdy_in, 1};
        ep->rdy_recv.iovcnt = 1;
        (void)ep->tp->boot_ops->post_send(ep->boot, &ep->rdy_send);
        (void)ep->tp->boot_ops->post_recv(ep->boot, &ep->rdy_recv);
        ep->ready_sent = 1;
    }
    if (!ep->rdy_recv.done)
        return 0;
    if (ep->rdy_recv.status != RING_OK || ep->rdy_recv.bytes != 1 || ep->rdy_in != 'R') {
        vb_ep_fail(ep, ep->rdy_recv.status != RING_OK ? ep->rdy_recv.status : RING_ERR_PROTOCOL,
                   ep->rdy_recv.sys_errno, "%s: the verbs bootstrap failed before the queue "
                   "pairs were ready (%s)", ep->tp->boot_ops->ep_peer(ep->boot),
                   ring_tp_cause(ep->rdy_recv.status, ep->rdy_recv.sys_errno));
        return 1;
    }
    /* from now on the bootstrap connection only tells us when the peer is gone */
    ep->live_recv.iov[0] = (struct iovec){&ep->live_in, 1};
    ep->live_recv.iovcnt = 1;
    (void)ep->tp->boot_ops->post_recv(ep->boot, &ep->live_recv);
    ep->state = VB_EP_OPEN;
    ring_log(RING_LOG_DEBUG, "verbs: %s open: QP 0x%x -> %s QP 0x%x (GID %s)",
             ep->tp->boot_ops->ep_peer(ep->boot), ep->mine.qpn, ep->theirs.dev_name, ep->theirs.qpn,
             ep->tp->dev.gid_text);
    return 1;
}

int vb_boot_progress(ring_tp_ep_t *ep)
{
    int moved;

    if (ep->guarding)
        return vb_boot_guard(ep);
    if (ep->placing)
        return vb_boot_place(ep);
    moved = vb_boot_records(ep);
    /* with a secret the caller's own exchange over this endpoint sees only that it
     * failed, not why (another transport, another link layer...): say it here */
    if (ep->state == VB_EP_FAILED && ep->guard != NULL)
        ring_log(RING_LOG_WARN, "verbs: %s", ep->error_text);
    return moved;
}
