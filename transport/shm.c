/*
 * shm.c - the shared-memory transport's ops table: tcp endpoints underneath,
 * the hand-shake that moves one into shared memory (shm_int.h tells the
 * story), liveness through the tcp connection, and waiting on both.
 *
 * The hand-shake, two tcp messages before any of the caller's:
 *   offer  (connector): "RSHO" version name_len token[16] name
 *   answer (acceptor):  "RSHA" version yes
 * Until it is over the caller's requests wait in the endpoint's queues; then
 * they go through the pipes (yes) or to the tcp endpoint, in order (no).
 */
#include "ring_build.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "errors.h"
#include "le.h"
#include "log.h"
#include "parse.h"
#include "shm_int.h"
#include "tcp.h"
#include "tp_queue.h"

#define HS_VERSION 1
#define OFFER_FIXED (4 + 1 + 1 + SHM_TOKEN_BYTES)
#define ANSWER_BYTES (4 + 1 + 1)

static const ring_tp_ops_t *const tcp = &ring_tcp_ops;

_Static_assert(SHM_WAIT_FDS == TCP_WAIT_FDS + 2 * SHM_MAX_EPS, "shm.h's SHM_WAIT_FDS");

/* RING_SHM_BYTES: each direction's pipe, a power of two in 64 KiB..1 GiB. */
static ring_status_t pipe_bytes_from_env(size_t *bytes_p)
{
    const char *s = getenv("RING_SHM_BYTES");
    size_t v;

    *bytes_p = SHM_PIPE_DEFAULT;
    if (s == NULL || *s == '\0')
        return RING_OK;
    if (ring_parse_size(s, &v) != 0 || v < ((size_t)64 << 10) || v > ((size_t)1 << 30) ||
        (v & (v - 1)) != 0)
        return ring_error_set(RING_ERR_INVALID, "RING_SHM_BYTES=%s: expected a power of two "
                              "from 64K to 1G (each direction's shared-memory pipe)", s);
    *bytes_p = v;
    return RING_OK;
}

static ring_status_t shm_init(const ring_tp_params_t *params, ring_tp_t **tp_p)
{
    shm_tp_t *tp = calloc(1, sizeof(*tp));
    ring_status_t st;

    if (tp == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory creating the shm transport");
    tp->params = *params;
    tp->ux_fd = -1;
    for (int i = 0; i < SHM_ARRIVALS; i++)
        tp->arrivals[i].conn_fd = tp->arrivals[i].seg_fd = tp->arrivals[i].efd_mine =
            tp->arrivals[i].efd_peer = -1;
    tp->scope = shm_scope(params->host_id);
    tp->params.host_id = NULL; /* the caller's string: its scope is kept instead */
    st = pipe_bytes_from_env(&tp->pipe_bytes);
    if (st == RING_OK)
        st = tcp->init(params, &tp->tcp);
    if (st != RING_OK) {
        free(tp);
        return st;
    }
    *tp_p = (ring_tp_t *)tp;
    return RING_OK;
}

static void shm_fini(ring_tp_t *tp_)
{
    shm_tp_t *tp = (shm_tp_t *)tp_;

    shm_ux_close(tp);
    tcp->fini(tp->tcp);
    free(tp);
}

static ring_status_t shm_listen(ring_tp_t *tp_, const char *host, int port,
                                ring_tp_listener_t **l_p)
{
    shm_tp_t *tp = (shm_tp_t *)tp_;
    ring_tp_listener_t *l = calloc(1, sizeof(*l));
    ring_status_t st;

    if (l == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a listener");
    l->tp = tp;
    st = tcp->listen(tp->tcp, host, port, &l->tcp);
    if (st != RING_OK) {
        free(l);
        return st;
    }
    *l_p = l;
    return RING_OK;
}

static int shm_listener_port(const ring_tp_listener_t *l)
{
    return tcp->listener_port(l->tcp);
}

static void shm_listener_close(ring_tp_listener_t *l)
{
    if (l == NULL)
        return;
    tcp->listener_close(l->tcp);
    free(l);
}

/* ---- endpoints -------------------------------------------------------- */

static ring_status_t ep_wrap(shm_tp_t *tp, ring_tp_ep_t *tep, int acceptor, ring_tp_ep_t **ep_p)
{
    ring_tp_ep_t *ep;

    if (tp->neps == SHM_MAX_EPS) {
        tcp->ep_close(tep);
        return ring_error_set(RING_ERR_NO_RESOURCE, "more than %d shm connections", SHM_MAX_EPS);
    }
    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        tcp->ep_close(tep);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a connection");
    }
    ep->tp = tp;
    ep->tcp = tep;
    ep->acceptor = acceptor;
    ep->efd_mine = ep->efd_peer = -1;
    snprintf(ep->peer, sizeof(ep->peer), "%s", tcp->ep_peer(tep));
    tp->eps[tp->neps++] = ep;
    *ep_p = ep;
    return RING_OK;
}

static void hs_post(ring_tp_ep_t *ep, ring_tp_req_t *req, unsigned char *buf, size_t len, int send)
{
    memset(req, 0, sizeof(*req));
    req->iov[0].iov_base = buf;
    req->iov[0].iov_len = len;
    req->iovcnt = 1;
    (void)(send ? tcp->post_send(ep->tcp, req) : tcp->post_recv(ep->tcp, req));
}

static ring_status_t shm_accept(ring_tp_listener_t *l, ring_tp_ep_t **ep_p)
{
    ring_tp_ep_t *tep = NULL, *ep;

    *ep_p = NULL;
    RING_CHECK(tcp->accept(l->tcp, &tep));
    if (tep == NULL)
        return RING_OK;
    RING_CHECK(ep_wrap(l->tp, tep, 1, &ep));
    ep->phase = SHM_ANSWERING; /* peek_offer looks at the first bytes before reading them */
    *ep_p = ep;
    return RING_OK;
}

static ring_status_t shm_connect(ring_tp_t *tp_, const char *host, int port, ring_tp_ep_t **ep_p)
{
    shm_tp_t *tp = (shm_tp_t *)tp_;
    ring_tp_ep_t *tep, *ep;
    size_t name_len = 0;

    RING_CHECK(tcp->connect(tp->tcp, host, port, &tep));
    RING_CHECK(ep_wrap(tp, tep, 0, &ep));
    ep->phase = SHM_OFFERING;
    if (shm_random(ep->token, sizeof(ep->token)) != 0 || shm_ux_listen(tp) != 0)
        name_len = 0; /* no socket to be reached at: the offer says tcp only */
    else
        name_len = strlen(tp->ux_name);
    memcpy(ep->hs_out, "RSHO", 4);
    ep->hs_out[4] = HS_VERSION;
    ep->hs_out[5] = (unsigned char)name_len;
    memcpy(ep->hs_out + 6, ep->token, SHM_TOKEN_BYTES);
    memcpy(ep->hs_out + OFFER_FIXED, tp->ux_name, name_len);
    hs_post(ep, &ep->hs_send, ep->hs_out, OFFER_FIXED + name_len, 1);
    hs_post(ep, &ep->hs_recv, ep->hs_in, sizeof(ep->hs_in), 0);
    *ep_p = ep;
    return RING_OK;
}

static ring_status_t shm_post(ring_tp_ep_t *ep, ring_tp_req_t *req, int send)
{
    if (ep->phase == SHM_TCP)
        return send ? tcp->post_send(ep->tcp, req) : tcp->post_recv(ep->tcp, req);
    ring_tp_req_reset(req);
    if (ep->phase == SHM_FAILED) {
        ring_tp_req_complete(req, ep->error, ep->error_errno);
        return req->status;
    }
    if (!send && ep->rx_broken) {
        ring_tp_req_complete(req, RING_ERR_MISMATCH, 0);
        return req->status;
    }
    if (send && ep->gone) { /* a receive may still read what it wrote before */
        ring_tp_req_complete(req, RING_ERR_REMOTE, ep->gone_errno);
        return req->status;
    }
    if (send) {
        RING_CHECK(ring_lp_put_prefix(req, NULL));
        ring_tp_queue_push(req, &ep->sq_head, &ep->sq_tail);
    } else {
        ring_tp_queue_push(req, &ep->rq_head, &ep->rq_tail);
    }
    return RING_OK;
}

static ring_status_t shm_post_send(ring_tp_ep_t *ep, ring_tp_req_t *req)
{
    return shm_post(ep, req, 1);
}

static ring_status_t shm_post_recv(ring_tp_ep_t *ep, ring_tp_req_t *req)
{
    return shm_post(ep, req, 0);
}

/* The hand-shake ended in tcp: the held requests go to the tcp endpoint in order. */
static void go_tcp(ring_tp_ep_t *ep)
{
    ring_tp_req_t *sq = ep->sq_head, *rq = ep->rq_head;

    ep->phase = SHM_TCP;
    ep->sq_head = ep->sq_tail = ep->rq_head = ep->rq_tail = NULL;
    while (sq != NULL) {
        ring_tp_req_t *next = sq->next;
        (void)tcp->post_send(ep->tcp, sq);
        sq = next;
    }
    while (rq != NULL) {
        ring_tp_req_t *next = rq->next;
        (void)tcp->post_recv(ep->tcp, rq);
        rq = next;
    }
}

static void go_pipes(ring_tp_ep_t *ep)
{
    /* nothing more comes over tcp: its socket only tells us when the peer goes
     * (a receive posted there would cost a read() on every progress call) */
    ep->live_fd = tcp_ep_fd(ep->tcp);
    ep->live_at = 0;
    ring_log(RING_LOG_DEBUG, "shm: the connection %s %s moves to shared memory (pipes of %llu "
             "bytes)", ep->acceptor ? "from" : "to", ep->peer, (unsigned long long)ep->tx.size);
    ep->phase = SHM_PIPES;
}

/* Has the peer gone? Its socket is readable only then: EOF (orderly close, or the
 * kernel closing a killed process's socket), a reset, or bytes it must not send. */
static void live_check(ring_tp_ep_t *ep)
{
    char c;
    ssize_t got;
    int err;

    do
        got = recv(ep->live_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    while (got < 0 && errno == EINTR);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    err = got < 0 ? errno : 0;
    if (got <= 0) {
        shm_ep_peer_gone(ep, err);
        return;
    }
    (void)shm_ep_progress_rx(ep);
    shm_ep_fail(ep, RING_ERR_PROTOCOL, 0, "sent tcp data after moving to shared memory");
}

/* A hand-shake receive failed: the endpoint fails as its tcp connection did
 * (connect.c retries a refused connection: the status and errno must stay). */
static void hs_failed(ring_tp_ep_t *ep, const ring_tp_req_t *req, const char *what)
{
    char why[160];

    if (req->status == RING_ERR_MISMATCH || (req->status == RING_OK && req->bytes > 0)) {
        snprintf(why, sizeof(why), "sent no shared-memory %s: it runs another transport "
                 "(use the same --transport, RING_TRANSPORT, on every peer)", what);
        shm_ep_fail(ep, RING_ERR_PROTOCOL, 0, why);
        return;
    }
    shm_ep_fail(ep, req->status == RING_OK ? RING_ERR_PROTOCOL : req->status, req->sys_errno,
                NULL);
}

static void answer(ring_tp_ep_t *ep, int yes)
{
    memcpy(ep->hs_out, "RSHA", 4);
    ep->hs_out[4] = HS_VERSION;
    ep->hs_out[5] = (unsigned char)yes;
    hs_post(ep, &ep->hs_send, ep->hs_out, ANSWER_BYTES, 1);
}

int shm_offer_decode(const unsigned char *m, size_t len, unsigned char token[SHM_TOKEN_BYTES],
                     char name[SHM_NAME_MAX])
{
    size_t name_len;

    if (len < OFFER_FIXED || memcmp(m, "RSHO", 4) != 0)
        return -1;
    name_len = m[5];
    if (m[4] != HS_VERSION || name_len >= SHM_NAME_MAX || len != OFFER_FIXED + name_len)
        return -2;
    memcpy(token, m + 6, SHM_TOKEN_BYTES);
    memcpy(name, m + OFFER_FIXED, name_len);
    name[name_len] = '\0';
    return 0;
}

/* Acceptor: the offer came. */
static void on_offer(ring_tp_ep_t *ep)
{
    char name[SHM_NAME_MAX], why[200];
    int rc = ep->hs_recv.status == RING_OK
                 ? shm_offer_decode(ep->hs_in, ep->hs_recv.bytes, ep->token, name)
                 : -1;
    size_t name_len;

    if (rc == -1) {
        hs_failed(ep, &ep->hs_recv, "offer");
        return;
    }
    if (rc != 0) {
        shm_ep_fail(ep, RING_ERR_PROTOCOL, 0, "sent a shared-memory offer of another version");
        return;
    }
    name_len = strlen(name);
    if (name_len > 0 && shm_seg_offer(ep->tp, ep, name, why, sizeof(why)) == 0) {
        answer(ep, 1);
        go_pipes(ep);
        return;
    }
    ring_log(RING_LOG_DEBUG, "shm: the connection from %s stays tcp: %s", ep->peer,
             name_len > 0 ? why : "it has no unix socket");
    answer(ep, 0); /* before any message of the caller's: tcp keeps the order */
    go_tcp(ep);
}

/* Connector: the answer came. */
static void on_answer(ring_tp_ep_t *ep)
{
    const unsigned char *m = ep->hs_in;
    char why[200];
    int rc;

    if (ep->hs_recv.status != RING_OK || ep->hs_recv.bytes != ANSWER_BYTES ||
        memcmp(m, "RSHA", 4) != 0 || m[4] != HS_VERSION) {
        hs_failed(ep, &ep->hs_recv, "answer");
        return;
    }
    if (m[5] == 0) {
        ring_log(RING_LOG_DEBUG, "shm: the connection to %s stays tcp (another host)", ep->peer);
        go_tcp(ep);
        return;
    }
    /* the acceptor handed the segment over before it answered: it is here */
    rc = shm_seg_claim(ep->tp, ep, why, sizeof(why));
    if (rc != 1) {
        char msg[260];
        snprintf(msg, sizeof(msg), "shared memory: %s", rc == 0 ? "its segment never came" : why);
        shm_ep_fail(ep, RING_ERR_PROTOCOL, 0, msg);
        return;
    }
    go_pipes(ep);
}

/*
 * Acceptor: is the first message an offer? Looked at without reading it, so
 * that a peer that offers nothing (a ringd over tcp, whose hello then tells the
 * caller so, or a stranger the caller ignores) is a plain tcp connection whose
 * every message the caller reads whole, as if this transport were not here.
 */
static void peek_offer(ring_tp_ep_t *ep)
{
    unsigned char b[8];
    ssize_t got;
    size_t len;

    do
        got = recv(tcp_ep_fd(ep->tcp), b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);
    while (got < 0 && errno == EINTR);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (got >= 4) {
        len = le_get32(b);
        if (got < 8 && (size_t)got < 4 + len)
            return; /* the magic has not come yet */
        if (got == 8 && memcmp(b + 4, "RSHO", 4) == 0 && len <= sizeof(ep->hs_in)) {
            ep->phase = SHM_READING_OFFER;
            hs_post(ep, &ep->hs_recv, ep->hs_in, sizeof(ep->hs_in), 0);
            return;
        }
    }
    /* no offer, or the connection ended (tcp tells the caller's receive how) */
    ring_log(RING_LOG_DEBUG, "shm: the connection from %s offered no shared memory: tcp",
             ep->peer);
    go_tcp(ep);
}

static int ep_progress(ring_tp_ep_t *ep)
{
    int n = 0;

    switch (ep->phase) {
    case SHM_OFFERING:
        if (ep->hs_send.done && ep->hs_send.status != RING_OK)
            shm_ep_fail(ep, ep->hs_send.status, ep->hs_send.sys_errno, NULL);
        else if (ep->hs_recv.done)
            on_answer(ep);
        return ep->phase != SHM_OFFERING;
    case SHM_ANSWERING:
        peek_offer(ep);
        return ep->phase != SHM_ANSWERING;
    case SHM_READING_OFFER:
        if (ep->hs_recv.done)
            on_offer(ep);
        return ep->phase != SHM_READING_OFFER;
    case SHM_PIPES:
        n += shm_ep_progress_rx(ep);
        n += shm_ep_progress_tx(ep);
        /* the clock costs as much as the rest of an idle pass: read it every
         * SHM_LIVE_SKIP calls (a pass takes well under 2 ms / 32) */
        if (ep->phase == SHM_PIPES && !ep->gone &&
            (ep->rq_head != NULL || ep->sq_head != NULL) &&
            (ep->live_skip == 0 || --ep->live_skip == 0)) {
            double now = ring_now();

            ep->live_skip = SHM_LIVE_SKIP;
            if (now >= ep->live_at) {
                ep->live_at = now + SHM_LIVE_CHECK_S;
                live_check(ep);
                n += ep->phase != SHM_PIPES || ep->gone;
            }
        }
        return n;
    default:
        return 0;
    }
}

static int shm_progress(ring_tp_t *tp_)
{
    shm_tp_t *tp = (shm_tp_t *)tp_;
    int n = tcp->progress(tp->tcp);

    for (int i = 0; i < tp->neps; i++)
        n += ep_progress(tp->eps[i]);
    return n;
}

int ring_shm_wait_fds(ring_tp_t *tp_, struct pollfd *pfd, int *timeout_ms_p)
{
    shm_tp_t *tp = (shm_tp_t *)tp_;
    int n = tcp_wait_fds(tp->tcp, pfd, timeout_ms_p);

    tp->nsleeping = 0;
    for (int i = 0; i < tp->neps; i++) {
        ring_tp_ep_t *ep = tp->eps[i];

        if (ep->phase == SHM_ANSWERING) /* its first bytes, which peek_offer looks at */
            pfd[n++] = (struct pollfd){.fd = tcp_ep_fd(ep->tcp), .events = POLLIN};

        if (ep->phase != SHM_PIPES || (ep->rq_head == NULL && ep->sq_head == NULL))
            continue;
        tp->sleeping[tp->nsleeping++] = ep;
        if (shm_ep_sleep_prepare(ep))
            *timeout_ms_p = 0; /* it is already there */
        pfd[n++] = (struct pollfd){.fd = ep->efd_mine, .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = ep->live_fd, .events = POLLIN};
        ep->live_at = 0; /* woken by it, the next progress looks */
        ep->live_skip = 0;
    }
    return n;
}

void ring_shm_wait_done(ring_tp_t *tp_)
{
    shm_tp_t *tp = (shm_tp_t *)tp_;

    for (int i = 0; i < tp->nsleeping; i++)
        shm_ep_wake_done(tp->sleeping[i]);
    tp->nsleeping = 0;
}

static void shm_wait(ring_tp_t *tp, int timeout_ms)
{
    struct pollfd pfd[SHM_WAIT_FDS];
    int n = ring_shm_wait_fds(tp, pfd, &timeout_ms);

    (void)poll(pfd, (nfds_t)n, timeout_ms);
    ring_shm_wait_done(tp);
}

int ring_shm_ep_local(const ring_tp_ep_t *ep)
{
    return ep->phase == SHM_PIPES ? 1
           : ep->phase == SHM_TCP || ep->phase == SHM_FAILED ? 0
                                                              : -1;
}

static const char *shm_ep_peer(const ring_tp_ep_t *ep)
{
    return ep->peer;
}

static const char *shm_ep_error(const ring_tp_ep_t *ep)
{
    return ep->why;
}

static void shm_ep_close(ring_tp_ep_t *ep)
{
    shm_tp_t *tp;

    if (ep == NULL)
        return;
    tp = ep->tp;
    shm_ep_fail(ep, RING_ERR_CANCELED, 0, NULL);
    tcp->ep_close(ep->tcp); /* completes the hand-shake requests first */
    if (!ep->acceptor)
        shm_arrival_forget(tp, ep->token); /* a hand-over that came too late */
    shm_seg_release(ep);
    for (int i = 0; i < tp->neps; i++)
        if (tp->eps[i] == ep) {
            tp->eps[i] = tp->eps[--tp->neps];
            break;
        }
    free(ep);
}

const ring_tp_ops_t ring_shm_ops = {
    .size = sizeof(ring_tp_ops_t),
    .name = "shm",
    .kind = RING_TP_SHM,
    .init = shm_init,
    .fini = shm_fini,
    .listen = shm_listen,
    .accept = shm_accept,
    .listener_close = shm_listener_close,
    .listener_port = shm_listener_port,
    .connect = shm_connect,
    .post_send = shm_post_send,
    .post_recv = shm_post_recv,
    .progress = shm_progress,
    .wait = shm_wait,
    .ep_peer = shm_ep_peer,
    .ep_close = shm_ep_close,
    .ep_error = shm_ep_error,
};
