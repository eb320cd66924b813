/*
 * tcp.c - the TCP transport's set-up, tear-down and waiting: listeners,
 * non-blocking connects, endpoints, and poll() over all of them.
 * Bytes move in tcp_io.c; names and socket options live in tcp_addr.c.
 */
#include "ring_build.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "errors.h"
#include "tcp.h"
#include "tcp_int.h"
#include "tp_queue.h"

static int tcp_set_nonblock(int fd)
{
    int flags = fcntl(fd, F_GETFL, 0);

    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static ring_status_t tcp_init(const ring_tp_params_t *params, ring_tp_t **tp_p)
{
    tcp_tp_t *tp = calloc(1, sizeof(*tp));

    if (tp == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory creating the tcp transport");
    tp->params = *params;
    *tp_p = (ring_tp_t *)tp;
    return RING_OK;
}

static void tcp_fini(ring_tp_t *tp_)
{
    free(tp_);
}

static void tcp_tp_forget_ep(tcp_tp_t *tp, ring_tp_ep_t *ep)
{
    for (int i = 0; i < tp->neps; i++)
        if (tp->eps[i] == ep) {
            tp->eps[i] = tp->eps[--tp->neps];
            return;
        }
}

static ring_status_t tcp_ep_create(tcp_tp_t *tp, int fd, tcp_ep_state_t state,
                                   const char *peer, ring_tp_ep_t **ep_p)
{
    ring_tp_ep_t *ep;

    if (tp->neps == TCP_MAX_EPS) {
        close(fd);
        return ring_error_set(RING_ERR_NO_RESOURCE, "too many tcp connections (%d)", TCP_MAX_EPS);
    }
    ep = calloc(1, sizeof(*ep));
    if (ep != NULL)
        ep->rx_stage = malloc(TCP_RX_STAGE);
    if (ep == NULL || ep->rx_stage == NULL) {
        free(ep);
        close(fd);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a tcp connection");
    }
    ep->tp = tp;
    ep->fd = fd;
    ep->state = state;
    ring_bucket_init(&ep->tx_bucket, tp->params.rate_limit_bps, ring_bucket_now());
    snprintf(ep->peer, sizeof(ep->peer), "%s", peer);
    tp->eps[tp->neps++] = ep;
    *ep_p = ep;
    return RING_OK;
}

static ring_status_t tcp_listen(ring_tp_t *tp_, const char *host, int port,
                                ring_tp_listener_t **l_p)
{
    tcp_tp_t *tp = (tcp_tp_t *)tp_;
    struct sockaddr_storage ss;
    socklen_t sslen;
    char err[256], addr[80];
    ring_tp_listener_t *l;
    ring_status_t st;
    int fd, e, one = 1;

    if (tp->nlisteners == (int)(sizeof(tp->listeners) / sizeof(tp->listeners[0])))
        return ring_error_set(RING_ERR_NO_RESOURCE, "too many tcp listeners");
    if (tcp_resolve(host, port, 1, &ss, &sslen, err, sizeof(err)) != 0)
        return ring_error_set(RING_ERR_INVALID, "cannot listen: %s", err);
    tcp_format_addr((struct sockaddr *)&ss, addr, sizeof(addr));
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ring_error_set(RING_ERR_IO, "cannot create a socket to listen on %s: %s", addr,
                              strerror(errno));
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* accepted sockets inherit the buffer sizes, which must be set before listen() */
    tcp_set_options(fd, tp->params.sockbuf);
    if (bind(fd, (struct sockaddr *)&ss, sslen) != 0) {
        e = errno;
        st = ring_error_set(RING_ERR_IO, "cannot listen on %s: %s%s", addr, strerror(e),
                            e == EADDRINUSE ? " (another process has this port: pick another "
                                              "with --port or RING_PEERS)"
                            : e == EADDRNOTAVAIL ? " (this address is not on this host: check "
                                                   "RING_PEERS or --bind)"
                                                 : "");
        goto fail;
    }
    if (listen(fd, 128) != 0 || tcp_set_nonblock(fd) != 0) {
        e = errno;
        st = ring_error_set(RING_ERR_IO, "cannot listen on %s: %s", addr, strerror(e));
        goto fail;
    }
    l = calloc(1, sizeof(*l));
    if (l == NULL) {
        st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a listener");
        goto fail;
    }
    l->tp = tp;
    l->fd = fd;
    tp->listeners[tp->nlisteners++] = l;
    *l_p = l;
    return RING_OK;
fail:
    close(fd);
    return st;
}

static ring_status_t tcp_accept(ring_tp_listener_t *l, ring_tp_ep_t **ep_p)
{
    struct sockaddr_storage ss;
    socklen_t sslen = sizeof(ss);
    char peer[80];
    int fd;

    *ep_p = NULL;
    fd = accept4(l->fd, (struct sockaddr *)&ss, &sslen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        /* out of descriptors (a flood of connections): the newcomer waits in the
         * backlog or is refused; never a reason to fail what is already running */
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED ||
            errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            return RING_OK;
        return ring_error_set(RING_ERR_IO, "accept failed: %s", strerror(errno));
    }
    if (l->tp->neps == TCP_MAX_EPS) {
        close(fd); /* full: drop the newcomer, keep the endpoints we have */
        return RING_OK;
    }
    tcp_set_options(fd, l->tp->params.sockbuf);
    tcp_format_addr((struct sockaddr *)&ss, peer, sizeof(peer));
    return tcp_ep_create(l->tp, fd, TCP_EP_OPEN, peer, ep_p);
}

static int tcp_listener_port(const ring_tp_listener_t *l)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (getsockname(l->fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

static void tcp_listener_close(ring_tp_listener_t *l)
{
    tcp_tp_t *tp;

    if (l == NULL)
        return;
    tp = l->tp;
    for (int i = 0; i < tp->nlisteners; i++)
        if (tp->listeners[i] == l)
            tp->listeners[i] = tp->listeners[--tp->nlisteners];
    close(l->fd);
    free(l);
}

static ring_status_t tcp_connect(ring_tp_t *tp_, const char *host, int port, ring_tp_ep_t **ep_p)
{
    tcp_tp_t *tp = (tcp_tp_t *)tp_;
    struct sockaddr_storage ss;
    socklen_t sslen;
    char err[256], peer[80];
    int fd;
    ring_tp_ep_t *ep;

    if (tcp_resolve(host, port, 0, &ss, &sslen, err, sizeof(err)) != 0)
        return ring_error_set(RING_ERR_INVALID, "cannot connect: %s", err);
    tcp_format_addr((struct sockaddr *)&ss, peer, sizeof(peer));
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ring_error_set(RING_ERR_IO, "cannot create a socket to %s: %s", peer,
                              strerror(errno));
    tcp_set_options(fd, tp->params.sockbuf);
    RING_CHECK(tcp_ep_create(tp, fd, TCP_EP_CONNECTING, peer, &ep));
    if (connect(fd, (struct sockaddr *)&ss, sslen) == 0)
        ep->state = TCP_EP_OPEN;
    else if (errno != EINPROGRESS)
        tcp_ep_fail(ep, RING_ERR_REMOTE, errno); /* reported through the requests */
    *ep_p = ep;
    return RING_OK;
}

static void tcp_ep_check_connected(ring_tp_ep_t *ep)
{
    struct pollfd pfd = {.fd = ep->fd, .events = POLLOUT};
    int err = 0;
    socklen_t len = sizeof(err);

    if (poll(&pfd, 1, 0) <= 0)
        return;
    if (getsockopt(ep->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err != 0)
        tcp_ep_fail(ep, RING_ERR_REMOTE, err);
    else
        ep->state = TCP_EP_OPEN;
}

static ring_status_t tcp_post(ring_tp_ep_t *ep, ring_tp_req_t *req, ring_tp_req_t **head,
                              ring_tp_req_t **tail)
{
    ring_tp_req_reset(req);
    if (ep->state == TCP_EP_FAILED) {
        ring_tp_req_complete(req, ep->error, ep->error_errno);
        return ep->error;
    }
    if (head == &ep->sq_head && ep->tx_gone) { /* a receive may still read what it wrote */
        ring_tp_req_complete(req, RING_ERR_REMOTE, ep->tx_gone_errno);
        return RING_ERR_REMOTE;
    }
    ring_tp_queue_push(req, head, tail);
    return RING_OK;
}

static ring_status_t tcp_post_send(ring_tp_ep_t *ep, ring_tp_req_t *req)
{
    size_t len;

    RING_CHECK(ring_lp_put_prefix(req, &len));
    RING_CHECK(tcp_post(ep, req, &ep->sq_head, &ep->sq_tail));
    ep->tx_queued += sizeof(req->prefix) + len;
    if (len <= RING_BUCKET_CTRL_BYTES)
        ep->tx_ctrl++;
    return RING_OK;
}

static ring_status_t tcp_post_recv(ring_tp_ep_t *ep, ring_tp_req_t *req)
{
    if (ep->rx_broken && ep->state != TCP_EP_FAILED) {
        req->status = RING_ERR_MISMATCH;
        req->sys_errno = 0;
        req->done = 1;
        return RING_ERR_MISMATCH;
    }
    return tcp_post(ep, req, &ep->rq_head, &ep->rq_tail);
}

static int tcp_progress(ring_tp_t *tp_)
{
    tcp_tp_t *tp = (tcp_tp_t *)tp_;
    int progressed = 0;

    for (int i = 0; i < tp->neps; i++) {
        ring_tp_ep_t *ep = tp->eps[i];

        if (ep->state == TCP_EP_CONNECTING)
            tcp_ep_check_connected(ep);
        if (ep->state != TCP_EP_OPEN)
            continue;
        progressed += tcp_ep_progress_rx(ep);
        progressed += tcp_ep_progress_tx(ep);
    }
    return progressed;
}

int tcp_wait_fds(ring_tp_t *tp_, struct pollfd *pfd, int *timeout_ms_p)
{
    tcp_tp_t *tp = (tcp_tp_t *)tp_;
    int n = 0, timeout_ms = *timeout_ms_p;
    double now = tp->params.rate_limit_bps > 0 ? ring_bucket_now() : 0;

    for (int i = 0; i < tp->nlisteners; i++)
        pfd[n++] = (struct pollfd){.fd = tp->listeners[i]->fd, .events = POLLIN};
    for (int i = 0; i < tp->neps; i++) {
        ring_tp_ep_t *ep = tp->eps[i];
        short events = 0;

        ep->rx_lazy_next = 0; /* what wakes the wait may be for a lazy receive: read it */
        if (ep->state == TCP_EP_CONNECTING)
            events = POLLOUT;
        else if (ep->state == TCP_EP_OPEN) {
            if (ep->rq_head != NULL) {
                if (ep->rx_stage_off < ep->rx_stage_len)
                    timeout_ms = 0; /* staged bytes are waiting to be delivered */
                events |= POLLIN;
            }
            if (ep->sq_head != NULL) {
                double delay;

                if (tcp_ep_tx_allowance(ep, now, &delay) > 0) {
                    events |= POLLOUT;
                } else {
                    /* short of tokens: no POLLOUT (it would be ready at once and
                     * spin), but wake up when the bucket has refilled enough */
                    double ms = ceil(delay * 1000.0);

                    if (ms < 1)
                        ms = 1;
                    if (timeout_ms < 0 || ms < (double)timeout_ms)
                        timeout_ms = (int)ms;
                }
            }
        }
        if (events != 0)
            pfd[n++] = (struct pollfd){.fd = ep->fd, .events = events};
    }
    *timeout_ms_p = timeout_ms;
    return n;
}

static void tcp_wait(ring_tp_t *tp, int timeout_ms)
{
    struct pollfd pfd[TCP_WAIT_FDS];
    int n = tcp_wait_fds(tp, pfd, &timeout_ms);

    (void)poll(pfd, (nfds_t)n, timeout_ms);
}

int tcp_ep_fd(const ring_tp_ep_t *ep)
{
    return ep->fd;
}

static const char *tcp_ep_peer(const ring_tp_ep_t *ep)
{
    return ep->peer;
}

static void tcp_ep_close(ring_tp_ep_t *ep)
{
    char drain[4096];

    if (ep == NULL)
        return;
    tcp_ep_fail(ep, RING_ERR_CANCELED, 0);
    /* Read what the peer sent and we never asked for: closing with unread
     * bytes would send a reset that can destroy data still on its way to it. */
    (void)shutdown(ep->fd, SHUT_WR);
    while (read(ep->fd, drain, sizeof(drain)) > 0)
        ;
    close(ep->fd);
    tcp_tp_forget_ep(ep->tp, ep);
    free(ep->rx_stage);
    free(ep);
}

const ring_tp_ops_t ring_tcp_ops = {
    .size = sizeof(ring_tp_ops_t),
    .name = "tcp",
    .kind = RING_TP_TCP,
    .init = tcp_init,
    .fini = tcp_fini,
    .listen = tcp_listen,
    .accept = tcp_accept,
    .listener_close = tcp_listener_close,
    .listener_port = tcp_listener_port,
    .connect = tcp_connect,
    .post_send = tcp_post_send,
    .post_recv = tcp_post_recv,
    .progress = tcp_progress,
    .wait = tcp_wait,
    .ep_peer = tcp_ep_peer,
    .ep_close = tcp_ep_close,
};
