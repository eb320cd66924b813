/*
 * shm_pair.h - helpers of the shm transport tests (t-shm-pipe.c, t-shm-handshake.c):
 * patterned data, descriptor counts, and a connector/acceptor pair of
 * transport/shm*.c endpoints in one process, progressed together. Header-only.
 */
#ifndef RING_SHM_PAIR_H
#define RING_SHM_PAIR_H

#include "ring_build.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ringd/status.h>

#include "dev_shm.h"
#include "shm_int.h"
#include "tap.h"
#include "transport.h"

#define BIG ((size_t)(4u << 20) + 17) /* larger than the default 4 MiB pipe */

/* ---- helpers ---------------------------------------------------------------------- */

static inline double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int count_fds(void)
{
    int n = dir_count("/proc/self/fd", "");

    return n < 0 ? -1 : n - 1; /* the directory's own descriptor */
}

/* one diag line per open descriptor: what it is */
static inline void diag_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char path[300], target[256];
        ssize_t n;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        n = readlink(path, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        diag("    fd %s: %s", e->d_name, target);
    }
    closedir(d);
}

/* byte i of message `seed`: not periodic in any power of two up to 2^24 */
static inline unsigned char pat(uint32_t seed, size_t i)
{
    uint64_t x = (uint64_t)i * 0x9e3779b1u + (uint64_t)seed * 0x85ebca6bu;

    x ^= x >> 15;
    x *= 0x2c1b3c6dULL;
    x ^= x >> 12;
    return (unsigned char)(x ^ (x >> 24));
}

static inline void pat_fill(unsigned char *p, size_t n, uint32_t seed, size_t from)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat(seed, from + i);
}

/* index of the first byte that differs from the pattern, or -1 */
static inline long pat_bad(const unsigned char *p, size_t n, uint32_t seed, size_t from)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(seed, from + i))
            return (long)i;
    return -1;
}

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);

    if (p == NULL)
        bail("out of memory (%zu bytes)", n);
    return p;
}

static inline void req_one(ring_tp_req_t *r, void *buf, size_t n)
{
    memset(r, 0, sizeof(*r));
    r->iov[0].iov_base = buf;
    r->iov[0].iov_len = n;
    r->iovcnt = 1;
}

typedef struct pair {
    const ring_tp_ops_t *ops;
    ring_tp_t *tp;
    ring_tp_listener_t *l;
    ring_tp_ep_t *c, *a; /* the connector and its accepted other end */
} pair_t;

/* progress (and wait when nothing moved) until every request of reqs is done or the
 * deadline passes; 1 when all are done */
static inline int run_reqs(ring_tp_t *tp, const ring_tp_ops_t *ops, ring_tp_req_t *const *reqs, int n,
                    double secs)
{
    double until = now_s() + secs;
    long loops = 0;

    for (;;) {
        int all = 1;

        for (int i = 0; i < n; i++)
            all &= reqs[i]->done != 0;
        if (all)
            return 1;
        if (now_s() > until || ++loops > 50000000L)
            return 0;
        if (ops->progress(tp) == 0)
            ops->wait(tp, 20);
    }
}

static inline int pair_run(pair_t *p, ring_tp_req_t *const *reqs, int n, double secs)
{
    return run_reqs(p->tp, p->ops, reqs, n, secs);
}

/* progress for about secs, whatever happens */
static inline void pair_spin(pair_t *p, double secs)
{
    double until = now_s() + secs;

    while (now_s() < until)
        if (p->ops->progress(p->tp) == 0)
            p->ops->wait(p->tp, 5);
}

/* A connected pair in shared memory (pipe_env: RING_SHM_BYTES, NULL = default). */
static inline int pair_open(pair_t *p, const char *pipe_env)
{
    ring_tp_params_t params;
    double until = now_s() + 5;
    int port;

    memset(p, 0, sizeof(*p));
    memset(&params, 0, sizeof(params));
    if (pipe_env != NULL)
        setenv("RING_SHM_BYTES", pipe_env, 1);
    else
        unsetenv("RING_SHM_BYTES");
    p->ops = ring_tp_find("shm");
    if (p->ops == NULL) {
        diag("ring_tp_find(\"shm\") is NULL");
        return -1;
    }
    if (p->ops->init(&params, &p->tp) != RING_OK) {
        diag("init: %s", ring_last_error());
        return -1;
    }
    if (p->ops->listen(p->tp, "127.0.0.1", 0, &p->l) != RING_OK) {
        diag("listen: %s", ring_last_error());
        return -1;
    }
    port = p->ops->listener_port(p->l);
    if (port <= 0 || p->ops->connect(p->tp, "127.0.0.1", port, &p->c) != RING_OK) {
        diag("connect to port %d: %s", port, ring_last_error());
        return -1;
    }
    while (p->a == NULL && now_s() < until) {
        if (p->ops->accept(p->l, &p->a) != RING_OK) {
            diag("accept: %s", ring_last_error());
            return -1;
        }
        if (p->a == NULL && p->ops->progress(p->tp) == 0)
            p->ops->wait(p->tp, 10);
    }
    /* the hand-shake: both ends in their pipes */
    while (p->a != NULL && (p->a->phase != SHM_PIPES || p->c->phase != SHM_PIPES) &&
           p->a->phase != SHM_FAILED && p->c->phase != SHM_FAILED && now_s() < until)
        if (p->ops->progress(p->tp) == 0)
            p->ops->wait(p->tp, 10);
    if (p->a == NULL || p->a->phase != SHM_PIPES || p->c->phase != SHM_PIPES) {
        diag("hand-shake: acceptor %s phase %d (%s), connector phase %d (%s)",
             p->a ? "" : "missing,", p->a ? (int)p->a->phase : -1, p->a ? p->a->why : "",
             (int)p->c->phase, p->c->why);
        return -1;
    }
    return 0;
}

static inline void pair_close(pair_t *p)
{
    if (p->ops == NULL)
        return;
    if (p->c != NULL)
        p->ops->ep_close(p->c);
    if (p->a != NULL)
        p->ops->ep_close(p->a);
    if (p->l != NULL)
        p->ops->listener_close(p->l);
    if (p->tp != NULL)
        p->ops->fini(p->tp);
    memset(p, 0, sizeof(*p));
    unsetenv("RING_SHM_BYTES");
}

static inline void pair_open_or_bail(pair_t *p, const char *pipe_env, const char *label)
{
    if (pair_open(p, pipe_env) != 0)
        bail("%s: cannot open an shm pair on 127.0.0.1", label);
}


/* At the end of a program: as many descriptors open as at its start (fds0). */
static inline void check_no_fd_left(int fds0)
{
    int fds1 = count_fds();

    if (!is_int(fds1, fds0, "no descriptor left open after every endpoint, listener and "
                "transport was closed (%d before, %d after)", fds0, fds1))
        diag_fds();
}

#endif /* RING_SHM_PAIR_H */
