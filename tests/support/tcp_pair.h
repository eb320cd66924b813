/*
 * tcp_pair.h - helpers of the TCP transport tests (t-ratelimit.c, t-tcp.c): a
 * connector and its accepted other end on 127.0.0.1 in one process, both
 * progressed by the same transport, as the engine drives them. Header-only.
 */
#ifndef RING_TCP_PAIR_H
#define RING_TCP_PAIR_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "transport.h"

typedef struct pair {
    const ring_tp_ops_t *ops;
    ring_tp_t *tp;
    ring_tp_listener_t *l;
    ring_tp_ep_t *tx, *rx;  /* tx is the connector, rx its accepted other end */
} pair_t;

/* A port the kernel says is free on 127.0.0.1 (as the harness picks them), or -1. */
static inline int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Open the pair (sends from tx capped at rate bytes/s; 0: no cap); 0, or -1. */
static inline int pair_open(pair_t *p, double rate)
{
    ring_tp_params_t params = {.sockbuf = 4 << 20, .rate_limit_bps = rate};
    double until = h_now() + 5;
    int port = -1;

    memset(p, 0, sizeof(*p));
    p->ops = ring_tp_find("tcp");
    if (p->ops == NULL || p->ops->init(&params, &p->tp) != RING_OK)
        return -1;
    for (int i = 0; i < 5 && p->l == NULL; i++) {
        port = free_port();
        if (port < 0 || p->ops->listen(p->tp, "127.0.0.1", port, &p->l) != RING_OK)
            p->l = NULL;
    }
    if (p->l == NULL || p->ops->connect(p->tp, "127.0.0.1", port, &p->tx) != RING_OK)
        return -1;
    while (p->rx == NULL && h_now() < until) {
        if (p->ops->accept(p->l, &p->rx) != RING_OK)
            return -1;
        p->ops->progress(p->tp);
        if (p->rx == NULL)
            p->ops->wait(p->tp, 10);
    }
    return p->rx != NULL ? 0 : -1;
}

static inline void pair_close(pair_t *p)
{
    if (p->ops == NULL)
        return;
    if (p->tx != NULL)
        p->ops->ep_close(p->tx);
    if (p->rx != NULL)
        p->ops->ep_close(p->rx);
    if (p->l != NULL)
        p->ops->listener_close(p->l);
    if (p->tp != NULL)
        p->ops->fini(p->tp);
}

/* Progress and wait (as the engine does) until *done or the deadline; counts the loops. */
static inline int pair_run_until(pair_t *p, const int *done, double deadline, long *loops)
{
    while (!*done && h_now() < deadline) {
        if (p->ops->progress(p->tp) == 0)
            p->ops->wait(p->tp, 100);
        if (loops != NULL)
            (*loops)++;
    }
    return *done;
}

#endif /* RING_TCP_PAIR_H */
