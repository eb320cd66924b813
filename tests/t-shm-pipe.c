/*
 * t-shm-pipe.c - the shared-memory transport (transport/shm*.c) straight
 * through its ops table: endpoint pairs in one process (the connector and
 * the acceptor on one ring_tp_t, progressed together, as t-ratelimit.c does
 * with tcp), and one pair across two processes for the eventfd wake-ups.
 *
 * Checked: RING_SHM_BYTES is validated; messages of 0 .. 4 MiB+17 bytes
 * arrive whole, in order and intact (patterned data) through the default
 * 4 MiB pipes and through 64 KiB ones that wrap many times; scatter/gather
 * with several iovs on both sides; an urgent send overtakes queued sends not
 * yet begun, never one already begun; a message larger than the receive
 * fails it with RING_ERR_MISMATCH (req->bytes = its size, the capacity
 * filled), fails later receives, and sends still work; closing one end
 * fails the other's pending requests (what was written before is delivered
 * first); a hostile peer that corrupts the shared indices makes the victim
 * fail with RING_ERR_PROTOCOL and words from ep_error (receive buffers are
 * malloc'd to their exact size, so ASan sees any write past them); wait()
 * sleeps when nothing can move and returns at once when something can;
 * requests posted during the hand-shake wait for it, on shared memory and
 * on the fall-back to tcp (the connector's unix socket unreachable); a
 * plain tcp peer on an shm listener reads and writes as over tcp; a
 * hostile acceptor that passes a blocking pipe for an eventfd cannot make
 * wait() block; an endpoint closed in the middle of its hand-over leaves no
 * descriptor behind; 64 and 100 connections opened at once all move to
 * shared memory; no wake-up is lost between processes, and a killed peer
 * fails the pending receive; no descriptor is left after fini.
 *
 * Every loop is bounded by a deadline (progress(), then wait(ms)).
 */
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

#include "shm_int.h"
#include "tap.h"
#include "transport.h"

#define BIG ((size_t)(4u << 20) + 17) /* larger than the default 4 MiB pipe */

/* ---- helpers ---------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

/* one diag line per open descriptor: what it is */
static void diag_fds(void)
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
static unsigned char pat(uint32_t seed, size_t i)
{
    uint64_t x = (uint64_t)i * 0x9e3779b1u + (uint64_t)seed * 0x85ebca6bu;

    x ^= x >> 15;
    x *= 0x2c1b3c6dULL;
    x ^= x >> 12;
    return (unsigned char)(x ^ (x >> 24));
}

static void pat_fill(unsigned char *p, size_t n, uint32_t seed, size_t from)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat(seed, from + i);
}

/* index of the first byte that differs from the pattern, or -1 */
static long pat_bad(const unsigned char *p, size_t n, uint32_t seed, size_t from)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(seed, from + i))
            return (long)i;
    return -1;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);

    if (p == NULL)
        bail("out of memory (%zu bytes)", n);
    return p;
}

static void req_one(ring_tp_req_t *r, void *buf, size_t n)
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
static int run_reqs(ring_tp_t *tp, const ring_tp_ops_t *ops, ring_tp_req_t *const *reqs, int n,
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

static int pair_run(pair_t *p, ring_tp_req_t *const *reqs, int n, double secs)
{
    return run_reqs(p->tp, p->ops, reqs, n, secs);
}

/* progress for about secs, whatever happens */
static void pair_spin(pair_t *p, double secs)
{
    double until = now_s() + secs;

    while (now_s() < until)
        if (p->ops->progress(p->tp) == 0)
            p->ops->wait(p->tp, 5);
}

/* A connected pair in shared memory (pipe_env: RING_SHM_BYTES, NULL = default). */
static int pair_open(pair_t *p, const char *pipe_env)
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

static void pair_close(pair_t *p)
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

static void pair_open_or_bail(pair_t *p, const char *pipe_env, const char *label)
{
    if (pair_open(p, pipe_env) != 0)
        bail("%s: cannot open an shm pair on 127.0.0.1", label);
}

/* ---- RING_SHM_BYTES ---------------------------------------------------------------- */

static void test_env(void)
{
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    static const char *const bad[] = {"123", "32K", "2G", "96K", "-64K", "lots"};
    static const char *const good[] = {"64K", "1M", "65536"};
    ring_tp_params_t params;

    memset(&params, 0, sizeof(params));
    if (!ok(ops != NULL && strcmp(ops->name, "shm") == 0, "ring_tp_find(\"shm\") finds the "
            "shared-memory transport"))
        bail("no shm transport in this build");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ring_tp_t *tp = (ring_tp_t *)&params; /* must stay as it is */
        ring_status_t st;

        setenv("RING_SHM_BYTES", bad[i], 1);
        st = ops->init(&params, &tp);
        if (!ok(st == RING_ERR_INVALID && tp == (ring_tp_t *)&params &&
                    strstr(ring_last_error(), "RING_SHM_BYTES") != NULL &&
                    strstr(ring_last_error(), bad[i]) != NULL,
                "RING_SHM_BYTES=%s: init fails with RING_ERR_INVALID naming the variable and "
                "the value (%s)", bad[i], ring_status_str(st)))
            diag("    message: %s", ring_last_error());
        if (st == RING_OK && tp != (ring_tp_t *)&params)
            ops->fini(tp);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        ring_tp_t *tp = NULL;
        ring_status_t st;

        setenv("RING_SHM_BYTES", good[i], 1);
        st = ops->init(&params, &tp);
        ok(st == RING_OK && tp != NULL, "RING_SHM_BYTES=%s: init succeeds", good[i]);
        if (st == RING_OK)
            ops->fini(tp);
    }
    unsetenv("RING_SHM_BYTES");
}

/* ---- whole messages, in order ------------------------------------------------------ */

#define NSIZES 5
static const size_t sizes[NSIZES] = {0, 1, 3, 4095, BIG};

typedef struct flow {
    ring_tp_req_t s[NSIZES], r[NSIZES];
    unsigned char *sb[NSIZES], *rb[NSIZES];
    size_t cap[NSIZES];
    uint32_t seed0;
} flow_t;

static void flow_init(flow_t *f, uint32_t seed0, size_t slack)
{
    memset(f, 0, sizeof(*f));
    f->seed0 = seed0;
    for (int i = 0; i < NSIZES; i++) {
        f->sb[i] = xmalloc(sizes[i]);
        pat_fill(f->sb[i], sizes[i], seed0 + (uint32_t)i, 0);
        /* every other receive exactly the message's size, the others larger */
        f->cap[i] = sizes[i] + (i % 2 ? slack : 0);
        f->rb[i] = xmalloc(f->cap[i]);
        memset(f->rb[i], 0xee, f->cap[i]);
        req_one(&f->s[i], f->sb[i], sizes[i]);
        req_one(&f->r[i], f->rb[i], f->cap[i]);
    }
}

static void flow_post_recvs(const pair_t *p, ring_tp_ep_t *ep, flow_t *f)
{
    for (int i = 0; i < NSIZES; i++)
        if (p->ops->post_recv(ep, &f->r[i]) != RING_OK)
            diag("post_recv #%d: %s", i, ring_last_error());
}

static void flow_post_sends(const pair_t *p, ring_tp_ep_t *ep, flow_t *f)
{
    for (int i = 0; i < NSIZES; i++)
        if (p->ops->post_send(ep, &f->s[i]) != RING_OK)
            diag("post_send #%d: %s", i, ring_last_error());
}

/* every message arrived whole, in order, intact; 1 when so */
static int flow_check(const flow_t *f, const char *label)
{
    int good = 1;

    for (int i = 0; i < NSIZES; i++) {
        long bad = -1;
        int tail_ok = 1;

        if (f->r[i].done && f->r[i].status == RING_OK && f->r[i].bytes == sizes[i])
            bad = pat_bad(f->rb[i], sizes[i], f->seed0 + (uint32_t)i, 0);
        for (size_t k = sizes[i]; k < f->cap[i]; k++)
            tail_ok &= f->rb[i][k] == 0xee;
        if (!f->r[i].done || f->r[i].status != RING_OK || f->r[i].bytes != sizes[i] ||
            bad >= 0 || !tail_ok || !f->s[i].done || f->s[i].status != RING_OK) {
            diag("%s: message #%d of %zu bytes: recv done %d %s bytes %zu, first bad byte %ld, "
                 "beyond untouched %d; send done %d %s", label, i, sizes[i], f->r[i].done,
                 ring_status_str(f->r[i].status), f->r[i].bytes, bad, tail_ok, f->s[i].done,
                 ring_status_str(f->s[i].status));
            good = 0;
        }
    }
    return good;
}

static void flow_free(flow_t *f)
{
    for (int i = 0; i < NSIZES; i++) {
        free(f->sb[i]);
        free(f->rb[i]);
    }
}

static void test_messages(const char *pipe_env, size_t want_pipe)
{
    static flow_t ca, ac;
    pair_t p;
    char label[80];
    ring_tp_req_t *all[4 * NSIZES];
    int n = 0;

    snprintf(label, sizeof(label), "pipes of %s", pipe_env ? pipe_env : "4M (default)");
    pair_open_or_bail(&p, pipe_env, label);
    ok(p.a->tx.size == want_pipe && p.c->tx.size == want_pipe && p.a->rx.size == want_pipe,
       "%s: the hand-shake moved both ends into shared memory, pipes of %zu bytes (%llu)", label,
       want_pipe, (unsigned long long)p.a->tx.size);

    /* 1. both directions at once, receives posted first */
    flow_init(&ca, 100, 13);
    flow_init(&ac, 200, 4096);
    flow_post_recvs(&p, p.a, &ca);
    flow_post_recvs(&p, p.c, &ac);
    flow_post_sends(&p, p.c, &ca);
    flow_post_sends(&p, p.a, &ac);
    for (int i = 0; i < NSIZES; i++) {
        all[n++] = &ca.s[i];
        all[n++] = &ca.r[i];
        all[n++] = &ac.s[i];
        all[n++] = &ac.r[i];
    }
    ok(pair_run(&p, all, n, 20), "%s: messages of 0, 1, 3, 4095 and 4 MiB+17 bytes both ways "
       "at once: all done", label);
    ok(flow_check(&ca, "connector to acceptor"), "%s: connector to acceptor: whole, in order, "
       "intact, nothing written past the message", label);
    ok(flow_check(&ac, "acceptor to connector"), "%s: acceptor to connector: whole, in order, "
       "intact, nothing written past the message", label);
    flow_free(&ca);
    flow_free(&ac);

    /* 2. sends first: the small ones go into the pipe, the big one waits for room; the
     *    receives come later */
    flow_init(&ca, 300, 1);
    flow_post_sends(&p, p.c, &ca);
    pair_spin(&p, 0.05);
    ok(ca.s[0].done && ca.s[3].done && !ca.s[4].done && !ca.r[0].done,
       "%s: sends posted before any receive: the small ones are in the pipe, the 4 MiB+17 one "
       "waits for room", label);
    flow_post_recvs(&p, p.a, &ca);
    n = 0;
    for (int i = 0; i < NSIZES; i++) {
        all[n++] = &ca.s[i];
        all[n++] = &ca.r[i];
    }
    ok(pair_run(&p, all, n, 20) && flow_check(&ca, "receives posted late"),
       "%s: receives posted after the sends: whole, in order, intact", label);
    flow_free(&ca);

    /* 3. many messages of odd sizes, 8 in flight: the pipe wraps at every offset */
    {
        enum { ROUNDS = 24, INFLIGHT = 8 };
        ring_tp_req_t s[INFLIGHT], r[INFLIGHT];
        unsigned char *sb[INFLIGHT], *rb[INFLIGHT];
        size_t len[INFLIGHT];
        uint64_t total = 0, x = 12345;
        int bad = 0, stuck = 0;

        for (int round = 0; round < ROUNDS && !stuck; round++) {
            ring_tp_req_t *rs[2 * INFLIGHT];

            for (int k = 0; k < INFLIGHT; k++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                len[k] = (size_t)(x >> 33) % (k % 3 == 0 ? 150001 : 3001);
                sb[k] = xmalloc(len[k]);
                rb[k] = xmalloc(len[k]);
                pat_fill(sb[k], len[k], (uint32_t)(round * INFLIGHT + k), 0);
                req_one(&s[k], sb[k], len[k]);
                req_one(&r[k], rb[k], len[k]);
                /* both directions; receives before or after the sends */
                if (round % 2 == 0)
                    p.ops->post_recv(k % 2 ? p.c : p.a, &r[k]);
                p.ops->post_send(k % 2 ? p.a : p.c, &s[k]);
                if (round % 2 == 1)
                    p.ops->post_recv(k % 2 ? p.c : p.a, &r[k]);
                rs[2 * k] = &s[k];
                rs[2 * k + 1] = &r[k];
                total += len[k];
            }
            stuck = !pair_run(&p, rs, 2 * INFLIGHT, 10);
            if (stuck)
                pair_close(&p); /* before the requests and buffers go */
            for (int k = 0; k < INFLIGHT; k++) {
                if (!r[k].done || r[k].status != RING_OK || r[k].bytes != len[k] ||
                    pat_bad(rb[k], len[k], (uint32_t)(round * INFLIGHT + k), 0) >= 0) {
                    if (bad++ < 3)
                        diag("round %d message %d (%zu bytes): done %d %s bytes %zu", round, k,
                             len[k], r[k].done, ring_status_str(r[k].status), r[k].bytes);
                }
                free(sb[k]);
                free(rb[k]);
            }
        }
        ok(!stuck && bad == 0, "%s: %d messages of 0..150000 bytes (%.1f MiB) both ways, 8 in "
           "flight: whole, in order, intact", label, ROUNDS * INFLIGHT,
           (double)total / (1 << 20));
    }
    pair_close(&p);
}

/* ---- scatter/gather ------------------------------------------------------------------ */

static void test_iov(void)
{
    static const size_t sv[4] = {5, 0, 70001, 3}, rv[4] = {1, 40000, 0, 30008};
    unsigned char *sbuf[4], *rbuf[4], *r2a, *r2b, *s2a, *s2b;
    ring_tp_req_t s, r, s2, r2, *reqs[4] = {&s, &r, &s2, &r2};
    size_t off = 0, total = 0;
    int good = 1;
    pair_t p;

    pair_open_or_bail(&p, "64K", "iov");
    memset(&s, 0, sizeof(s));
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 4; i++) {
        sbuf[i] = xmalloc(sv[i]);
        pat_fill(sbuf[i], sv[i], 7, off);
        off += sv[i];
        s.iov[i] = (struct iovec){sbuf[i], sv[i]};
        rbuf[i] = xmalloc(rv[i]);
        memset(rbuf[i], 0, rv[i]);
        r.iov[i] = (struct iovec){rbuf[i], rv[i]};
        total += rv[i];
    }
    s.iovcnt = r.iovcnt = 4;
    /* a second message of 300 bytes in 2 iovs into 2 iovs holding 1050 */
    s2a = xmalloc(100);
    s2b = xmalloc(200);
    r2a = xmalloc(50);
    r2b = xmalloc(1000);
    pat_fill(s2a, 100, 8, 0);
    pat_fill(s2b, 200, 8, 100);
    memset(r2b, 0xee, 1000);
    memset(&s2, 0, sizeof(s2));
    memset(&r2, 0, sizeof(r2));
    s2.iov[0] = (struct iovec){s2a, 100};
    s2.iov[1] = (struct iovec){s2b, 200};
    s2.iovcnt = 2;
    r2.iov[0] = (struct iovec){r2a, 50};
    r2.iov[1] = (struct iovec){r2b, 1000};
    r2.iovcnt = 2;
    p.ops->post_recv(p.a, &r);
    p.ops->post_recv(p.a, &r2);
    p.ops->post_send(p.c, &s);
    p.ops->post_send(p.c, &s2);
    ok(pair_run(&p, reqs, 4, 10) && s.status == RING_OK && r.status == RING_OK &&
           s2.status == RING_OK && r2.status == RING_OK,
       "iov: 4 send iovs (5, 0, 70001, 3) into 4 receive iovs (1, 40000, 0, 30008) through a "
       "64 KiB pipe, and 2 into 2: done");
    is_int((long long)r.bytes, (long long)off, "iov: the receive's bytes is the message's size");
    off = 0;
    for (int i = 0; i < 4; i++) {
        good &= pat_bad(rbuf[i], rv[i], 7, off) < 0;
        off += rv[i];
    }
    ok(good && total == off, "iov: the bytes land in the receive iovs in order, across their "
       "boundaries");
    good = r2.bytes == 300 && pat_bad(r2a, 50, 8, 0) < 0 && pat_bad(r2b, 250, 8, 50) < 0;
    for (int k = 250; k < 1000; k++)
        good &= r2b[k] == 0xee;
    ok(good, "iov: a 300-byte message in 2 iovs fills 50 + 250 of 50 + 1000, bytes = 300, the "
       "rest untouched");
    for (int i = 0; i < 4; i++) {
        free(sbuf[i]);
        free(rbuf[i]);
    }
    free(s2a);
    free(s2b);
    free(r2a);
    free(r2b);
    pair_close(&p);
}

/* ---- urgent sends ---------------------------------------------------------------------- */

static void test_urgent(void)
{
    enum { A_LEN = 200000, B_LEN = 1000, C_LEN = 10, U_LEN = 64 };
    static const size_t lens[4] = {A_LEN, B_LEN, C_LEN, U_LEN};
    unsigned char *sb[4], *rb[4];
    ring_tp_req_t s[4], r[4], *reqs[8];
    double until;
    pair_t p;
    int want1[4] = {0, 3, 1, 2}; /* A (begun), then U, B, C */
    int want2[3] = {3, 1, 2};    /* nothing begun: U, B, C */
    int good = 1;

    pair_open_or_bail(&p, "64K", "urgent");
    for (int i = 0; i < 4; i++) {
        sb[i] = xmalloc(lens[i]);
        rb[i] = xmalloc(A_LEN);
        pat_fill(sb[i], lens[i], 40 + (uint32_t)i, 0);
        req_one(&s[i], sb[i], lens[i]);
        req_one(&r[i], rb[i], A_LEN);
        reqs[i] = &s[i];
        reqs[4 + i] = &r[i];
    }
    s[3].urgent = 1;
    /* A begins (it fills the pipe: nobody receives yet) */
    p.ops->post_send(p.c, &s[0]);
    until = now_s() + 2;
    while (s[0].offset == 0 && now_s() < until)
        if (p.ops->progress(p.tp) == 0)
            p.ops->wait(p.tp, 5);
    ok(s[0].offset > 0 && !s[0].done, "urgent: a 200000-byte send has begun and waits for room "
       "in the 64 KiB pipe");
    p.ops->post_send(p.c, &s[1]);
    p.ops->post_send(p.c, &s[2]);
    p.ops->post_send(p.c, &s[3]); /* urgent */
    for (int i = 0; i < 4; i++)
        p.ops->post_recv(p.a, &r[i]);
    ok(pair_run(&p, reqs, 8, 10), "urgent: all done");
    for (int k = 0; k < 4; k++) {
        int m = want1[k];

        if (r[k].status != RING_OK || r[k].bytes != lens[m] ||
            pat_bad(rb[k], lens[m], 40 + (uint32_t)m, 0) >= 0) {
            diag("receive %d: %s, %zu bytes, want message %d of %zu bytes", k,
                 ring_status_str(r[k].status), r[k].bytes, m, lens[m]);
            good = 0;
        }
    }
    ok(good, "urgent: an urgent send goes before the queued ones not yet begun, after the one "
       "begun, and intact (A, U, B, C)");

    /* nothing begun: the urgent one goes first */
    good = 1;
    for (int i = 1; i < 4; i++) {
        req_one(&s[i], sb[i], lens[i]);
        req_one(&r[i], rb[i], A_LEN);
    }
    s[3].urgent = 1;
    p.ops->post_send(p.c, &s[1]);
    p.ops->post_send(p.c, &s[2]);
    p.ops->post_send(p.c, &s[3]);
    for (int i = 1; i < 4; i++)
        p.ops->post_recv(p.a, &r[i]);
    ok(pair_run(&p, reqs + 1, 3, 10) && pair_run(&p, reqs + 5, 3, 10), "urgent: second round "
       "done");
    for (int k = 0; k < 3; k++) {
        int m = want2[k];

        if (r[k + 1].status != RING_OK || r[k + 1].bytes != lens[m] ||
            pat_bad(rb[k + 1], lens[m], 40 + (uint32_t)m, 0) >= 0)
            good = 0;
    }
    ok(good, "urgent: posted behind two sends not yet begun, it arrives first (U, B, C)");
    for (int i = 0; i < 4; i++) {
        free(sb[i]);
        free(rb[i]);
    }
    pair_close(&p);
}

/* ---- a message larger than the receive ------------------------------------------------ */

static void test_oversize(void)
{
    unsigned char *m1 = xmalloc(1000), *m2 = xmalloc(10), *small = xmalloc(100),
                  *big = xmalloc(2000), *late = xmalloc(100), *back = xmalloc(200000),
                  *back_in = xmalloc(200000);
    ring_tp_req_t s1, s2, r1, r2, r3, sb, rb;
    ring_tp_req_t *first[4] = {&s1, &s2, &r1, &r2}, *second[2] = {&sb, &rb};
    ring_status_t st;
    pair_t p;

    pair_open_or_bail(&p, "64K", "oversize");
    pat_fill(m1, 1000, 60, 0);
    pat_fill(m2, 10, 61, 0);
    pat_fill(back, 200000, 62, 0);
    req_one(&s1, m1, 1000);
    req_one(&s2, m2, 10);
    req_one(&r1, small, 100);
    req_one(&r2, big, 2000);
    p.ops->post_recv(p.a, &r1);
    p.ops->post_recv(p.a, &r2);
    p.ops->post_send(p.c, &s1);
    p.ops->post_send(p.c, &s2);
    ok(pair_run(&p, first, 4, 5), "oversize: a 1000-byte message into a 100-byte receive: the "
       "requests complete");
    ok(r1.status == RING_ERR_MISMATCH && r1.bytes == 1000,
       "oversize: the receive fails with RING_ERR_MISMATCH and bytes = 1000 (%s, %zu)",
       ring_status_str(r1.status), r1.bytes);
    ok(pat_bad(small, 100, 60, 0) < 0, "oversize: the capacity was filled with the message's "
       "first 100 bytes (and not one more: ASan watches the buffer)");
    ok(r2.status == RING_ERR_MISMATCH, "oversize: the receive queued behind it fails too (%s)",
       ring_status_str(r2.status));
    req_one(&r3, late, 100);
    st = p.ops->post_recv(p.a, &r3);
    ok(st != RING_OK && r3.done && r3.status == RING_ERR_MISMATCH,
       "oversize: a later receive fails at once with RING_ERR_MISMATCH (%s, done %d)",
       ring_status_str(st), r3.done);
    ok(s1.status == RING_OK && s2.status == RING_OK, "oversize: the peer's sends succeeded");
    /* the broken end can still send (to tell its peer why) */
    req_one(&sb, back, 200000);
    req_one(&rb, back_in, 200000);
    st = p.ops->post_send(p.a, &sb);
    p.ops->post_recv(p.c, &rb);
    ok(st == RING_OK && pair_run(&p, second, 2, 10) && sb.status == RING_OK &&
           rb.status == RING_OK && rb.bytes == 200000 && pat_bad(back_in, 200000, 62, 0) < 0,
       "oversize: the end whose receives failed still sends 200000 bytes, intact");
    free(m1);
    free(m2);
    free(small);
    free(big);
    free(late);
    free(back);
    free(back_in);
    pair_close(&p);
}

/* ---- closing one end --------------------------------------------------------------------- */

static void test_close(void)
{
    unsigned char bye[3] = {'b', 'y', 'e'}, in1[64], in2[64], more[8] = {0};
    ring_tp_req_t s, r1, r2, s_after, *reqs[2] = {&r1, &r2};
    ring_status_t st;
    double t0, dt;
    pair_t p;
    int done;

    /* 1. the connector writes, then closes: the acceptor gets the message, then an error */
    pair_open_or_bail(&p, NULL, "close");
    req_one(&s, bye, sizeof(bye));
    p.ops->post_send(p.c, &s);
    pair_run(&p, (ring_tp_req_t *[]){&s}, 1, 2);
    req_one(&r1, in1, sizeof(in1));
    req_one(&r2, in2, sizeof(in2));
    p.ops->post_recv(p.a, &r1);
    p.ops->post_recv(p.a, &r2);
    p.ops->ep_close(p.c);
    p.c = NULL;
    t0 = now_s();
    done = pair_run(&p, reqs, 2, 5);
    dt = now_s() - t0;
    ok(done && dt < 2.0, "close: the other end's receives complete %.3f s after the close, no "
       "hang", dt);
    ok(r1.status == RING_OK && r1.bytes == 3 && memcmp(in1, "bye", 3) == 0,
       "close: what was written before the close is delivered first (%s)",
       ring_status_str(r1.status));
    ok(r2.status == RING_ERR_REMOTE || r2.status == RING_ERR_CANCELED,
       "close: the pending receive fails with RING_ERR_REMOTE or CANCELED (%s, errno %d)",
       ring_status_str(r2.status), r2.sys_errno);
    req_one(&s_after, more, sizeof(more));
    st = p.ops->post_send(p.a, &s_after);
    ok(st != RING_OK && s_after.done && s_after.status == r2.status,
       "close: a later send fails at once with the same sticky status (%s)", ring_status_str(st));
    pair_close(&p);

    /* 2. the acceptor closes while the connector's big send waits for room in the pipe */
    {
        unsigned char *big = xmalloc(BIG);
        ring_tp_req_t sb, *one[1] = {&sb};

        pair_open_or_bail(&p, NULL, "close 2");
        memset(big, 1, BIG);
        req_one(&sb, big, BIG);
        p.ops->post_send(p.c, &sb);
        pair_spin(&p, 0.05);
        ok(!sb.done, "close: a 4 MiB+17 send waits for room (the peer receives nothing)");
        p.ops->ep_close(p.a);
        p.a = NULL;
        t0 = now_s();
        done = pair_run(&p, one, 1, 5);
        dt = now_s() - t0;
        ok(done && sb.status != RING_OK && dt < 2.0,
           "close: that send fails (%s, errno %d) %.3f s after the peer closed, no hang",
           ring_status_str(sb.status), sb.sys_errno, dt);
        pair_close(&p);
        free(big);
    }
}

/* ---- a hostile peer ---------------------------------------------------------------------- */

/* One corruption: `poke` writes the shared memory as a hostile peer would; the victim
 * `victim_rx` (receive) or not (send) must fail with RING_ERR_PROTOCOL and words. */
typedef void (*poke_fn)(pair_t *p);

static void poke_head_far(pair_t *p)
{
    /* the attacker (connector) is the producer of the acceptor's rx pipe */
    atomic_store(&p->c->tx.ctl->head, p->a->rx.pos + p->a->rx.size + 1);
}

static void poke_head_huge(pair_t *p)
{
    atomic_store(&p->c->tx.ctl->head, p->a->rx.pos + ((uint64_t)1 << 40));
}

static void poke_head_back(pair_t *p)
{
    atomic_store(&p->c->tx.ctl->head, p->a->rx.pos - 1);
}

static void poke_tail_ahead(pair_t *p)
{
    /* the attacker (connector) is the consumer of the acceptor's tx pipe */
    atomic_store(&p->c->rx.ctl->tail, p->a->tx.pos + 1);
}

static void poke_tail_far_back(pair_t *p)
{
    atomic_store(&p->c->rx.ctl->tail, p->a->tx.pos - p->a->tx.size - 1);
}

static void hostile_case(const char *label, poke_fn poke, int victim_rx)
{
    unsigned char warm[1000], warm_in[1000], *buf = xmalloc(100), extra[8] = {0};
    ring_tp_req_t ws, wr, v, later, *w[2] = {&ws, &wr}, *one[1] = {&v};
    ring_status_t st;
    const char *why;
    pair_t p;
    int done;

    pair_open_or_bail(&p, "64K", label);
    /* move the indices off 0 (and the attacker's pipe data off the start) */
    memset(warm, 3, sizeof(warm));
    req_one(&ws, warm, sizeof(warm));
    req_one(&wr, warm_in, sizeof(warm_in));
    p.ops->post_recv(p.a, &wr);
    p.ops->post_send(p.c, &ws);
    pair_run(&p, w, 2, 5);
    req_one(&ws, warm, sizeof(warm));
    req_one(&wr, warm_in, sizeof(warm_in));
    p.ops->post_recv(p.c, &wr);
    p.ops->post_send(p.a, &ws);
    pair_run(&p, w, 2, 5);

    poke(&p);
    memset(buf, 0, 100);
    req_one(&v, buf, 100);
    if (victim_rx)
        p.ops->post_recv(p.a, &v);
    else
        p.ops->post_send(p.a, &v);
    done = pair_run(&p, one, 1, 3);
    ok(done && v.status == RING_ERR_PROTOCOL,
       "hostile peer, %s: the victim's %s fails with RING_ERR_PROTOCOL (%s)", label,
       victim_rx ? "receive" : "send", ring_status_str(v.status));
    why = p.ops->ep_error(p.a);
    if (!ok(why != NULL && strstr(why, "shared memory") != NULL && strstr(why, "corrupt") != NULL,
            "hostile peer, %s: ep_error says the index in shared memory is corrupt", label))
        diag("    ep_error: '%s'", why ? why : "(null)");
    req_one(&later, extra, sizeof(extra));
    st = victim_rx ? p.ops->post_send(p.a, &later) : p.ops->post_recv(p.a, &later);
    ok(st == RING_ERR_PROTOCOL && later.done && later.status == RING_ERR_PROTOCOL,
       "hostile peer, %s: the error is sticky: a later %s fails at once (%s)", label,
       victim_rx ? "send" : "receive", ring_status_str(st));
    free(buf);
    pair_close(&p);
}

/* A consistent but hostile stream: the pipe exactly full, a length prefix of ~4 GiB. */
static void hostile_length(void)
{
    unsigned char *buf = xmalloc(100);
    ring_tp_req_t v, *one[1] = {&v};
    shm_pipe_t *tx;
    uint64_t pos;
    pair_t p;
    int done;

    pair_open_or_bail(&p, "64K", "hostile length");
    tx = &p.c->tx;
    pos = tx->pos;
    for (uint64_t i = 0; i < tx->size; i++)
        tx->data[(pos + i) & tx->mask] = (unsigned char)(i < 4 ? (i == 3 ? 0xff : 0xf0) : i);
    atomic_store(&tx->ctl->head, pos + tx->size); /* exactly full: a valid index */
    req_one(&v, buf, 100);
    p.ops->post_recv(p.a, &v);
    done = pair_run(&p, one, 1, 3);
    ok(done && v.status == RING_ERR_MISMATCH && v.bytes == 0xfff0f0f0u,
       "hostile peer, a full pipe announcing a 4 GiB message: the 100-byte receive fails with "
       "RING_ERR_MISMATCH, bytes %zu, and nothing is written past it", v.bytes);
    free(buf);
    pair_close(&p);
}

static void test_hostile(void)
{
    hostile_case("write index one past the pipe's size", poke_head_far, 1);
    hostile_case("write index 2^40 ahead", poke_head_huge, 1);
    hostile_case("write index moved back", poke_head_back, 1);
    hostile_case("read index ahead of the write index", poke_tail_ahead, 0);
    hostile_case("read index more than the pipe behind", poke_tail_far_back, 0);
    hostile_length();
}

/* ---- waiting ------------------------------------------------------------------------------ */

static void test_wait(void)
{
    unsigned char ping[5] = "ping", pong[5] = "pong", in1[16], in2[16];
    ring_tp_req_t s1, s2, r1, r2, *first[2] = {&s1, &r1}, *second[1] = {&s2}, *last[1] = {&r2};
    double t0, dt;
    pair_t p;

    pair_open_or_bail(&p, NULL, "wait");
    req_one(&r1, in1, sizeof(in1));
    p.ops->post_recv(p.a, &r1);
    for (int i = 0; i < 1000 && p.ops->progress(p.tp) != 0; i++) /* nothing comes */
        ;
    t0 = now_s();
    p.ops->wait(p.tp, 300);
    dt = now_s() - t0;
    ok(dt > 0.25 && !r1.done, "wait: with a receive pending and nothing coming, wait(300) "
       "sleeps (%.3f s)", dt);
    req_one(&s1, ping, sizeof(ping));
    p.ops->post_send(p.c, &s1);
    pair_run(&p, first, 2, 2);
    /* a message that sits in the pipe: its receive is posted after it came */
    req_one(&s2, pong, sizeof(pong));
    p.ops->post_send(p.c, &s2);
    pair_run(&p, second, 1, 2);
    req_one(&r2, in2, sizeof(in2));
    p.ops->post_recv(p.a, &r2);
    t0 = now_s();
    p.ops->wait(p.tp, 2000);
    dt = now_s() - t0;
    ok(dt < 0.5, "wait: with the message already in the pipe, wait(2000) returns at once "
       "(%.3f s)", dt);
    ok(pair_run(&p, last, 1, 2) && r1.status == RING_OK && r2.status == RING_OK &&
           r2.bytes == sizeof(pong) && memcmp(in1, "ping", 5) == 0 && memcmp(in2, "pong", 5) == 0,
       "wait: both receives complete, intact");
    pair_close(&p);
}

/* ---- requests posted during the hand-shake, and the fall-back to tcp ----------------- */

/* Connect and accept without waiting for the hand-shake; with no_unix, the connector's
 * unix socket is closed first, as if the acceptor were on another host: both ends must
 * stay tcp. Requests posted at once wait for the hand-shake, then go in order (an urgent
 * one first: none has begun). */
static void test_early(int no_unix)
{
    enum { M = 4 };
    static const size_t lens[M] = {10, 200000, 0, 33};
    const char *label = no_unix ? "fall-back to tcp" : "posted during the hand-shake";
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_tp_ep_t *c = NULL, *a = NULL;
    unsigned char *sb[M], *rb[M], *back = xmalloc(5000), *back_in = xmalloc(5000);
    ring_tp_req_t s[M], r[M], bs, br, rx, *all[2 * M + 2], *one[1] = {&rx};
    unsigned char x[8];
    int want[M] = {3, 0, 1, 2}, good = 1, port, n = 0;
    double until = now_s() + 5;

    memset(&params, 0, sizeof(params));
    setenv("RING_SHM_BYTES", "64K", 1);
    if (ops->init(&params, &tp) != RING_OK || ops->listen(tp, "127.0.0.1", 0, &l) != RING_OK)
        bail("%s: %s", label, ring_last_error());
    port = ops->listener_port(l);
    if (ops->connect(tp, "127.0.0.1", port, &c) != RING_OK)
        bail("%s: connect: %s", label, ring_last_error());
    if (no_unix)
        shm_ux_close(c->tp); /* the acceptor cannot reach it: "another host" */
    for (int i = 0; i < M; i++) {
        sb[i] = xmalloc(lens[i]);
        rb[i] = xmalloc(200000);
        pat_fill(sb[i], lens[i], 80 + (uint32_t)i, 0);
        req_one(&s[i], sb[i], lens[i]);
        req_one(&r[i], rb[i], 200000);
        all[n++] = &s[i];
        all[n++] = &r[i];
    }
    s[3].urgent = 1;
    for (int i = 0; i < M; i++)
        ops->post_send(c, &s[i]);
    while (a == NULL && now_s() < until) {
        if (ops->accept(l, &a) != RING_OK)
            break;
        if (a == NULL)
            ops->wait(tp, 5);
    }
    if (a == NULL)
        bail("%s: nothing to accept", label);
    pat_fill(back, 5000, 90, 0);
    req_one(&bs, back, 5000);
    req_one(&br, back_in, 5000);
    ops->post_send(a, &bs);
    for (int i = 0; i < M; i++)
        ops->post_recv(a, &r[i]);
    ops->post_recv(c, &br);
    all[n++] = &bs;
    all[n++] = &br;
    ok(c->phase == SHM_OFFERING && a->phase == SHM_ANSWERING, "%s: requests posted while the "
       "hand-shake runs (connector offering, acceptor waiting for the offer)", label);
    ok(run_reqs(tp, ops, all, n, 10), "%s: all complete", label);
    for (int k = 0; k < M; k++) {
        int m = want[k];

        if (r[k].status != RING_OK || r[k].bytes != lens[m] ||
            pat_bad(rb[k], lens[m], 80 + (uint32_t)m, 0) >= 0) {
            diag("%s: receive %d: %s, %zu bytes, want message %d of %zu", label, k,
                 ring_status_str(r[k].status), r[k].bytes, m, lens[m]);
            good = 0;
        }
    }
    ok(good && br.status == RING_OK && br.bytes == 5000 && pat_bad(back_in, 5000, 90, 0) < 0,
       "%s: whole, in order (the urgent one first), intact, both ways", label);
    if (no_unix)
        ok(c->phase == SHM_TCP && a->phase == SHM_TCP, "%s: both ends stayed tcp (phases %d, %d)",
           label, (int)c->phase, (int)a->phase);
    else
        ok(c->phase == SHM_PIPES && a->phase == SHM_PIPES, "%s: both ends went to shared "
           "memory (phases %d, %d)", label, (int)c->phase, (int)a->phase);
    /* closing one end fails the other's pending receive, on tcp too (rx stays in scope
     * until the endpoint is closed: a receive that never completes is still queued) */
    req_one(&rx, x, sizeof(x));
    ops->post_recv(a, &rx);
    ops->ep_close(c);
    ok(run_reqs(tp, ops, one, 1, 3) && rx.status != RING_OK,
       "%s: the connector closes: the acceptor's pending receive fails", label);
    ops->ep_close(a);
    ops->listener_close(l);
    ops->fini(tp);
    unsetenv("RING_SHM_BYTES");
    for (int i = 0; i < M; i++) {
        free(sb[i]);
        free(rb[i]);
    }
    free(back);
    free(back_in);
}

/* ---- a tcp peer on an shm listener ------------------------------------------------------ */

/* A peer that runs plain tcp (a tcp ringd, or a stranger) connects to an shm listener: its
 * first message is no offer, so the connection is plain tcp and the caller reads that
 * message as if shm were not there: whole when the receive holds it, in order with the
 * next. first_len: the first message's size (more than the hand-shake's 128-byte buffer
 * too). */
static void test_tcp_peer(size_t first_len)
{
    const ring_tp_ops_t *sops = ring_tp_find("shm"), *tops = ring_tp_find("tcp");
    ring_tp_params_t params;
    ring_tp_t *stp = NULL, *ttp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_tp_ep_t *c = NULL, *a = NULL;
    unsigned char *m1 = xmalloc(first_len), *m2 = xmalloc(300), *in1 = xmalloc(1000),
                  *in2 = xmalloc(1000), back[20], back_in[20];
    ring_tp_req_t s1, s2, r1, r2, bs, br;
    double until = now_s() + 5;
    int port, good;

    memset(&params, 0, sizeof(params));
    if (sops->init(&params, &stp) != RING_OK || tops->init(&params, &ttp) != RING_OK ||
        sops->listen(stp, "127.0.0.1", 0, &l) != RING_OK)
        bail("tcp peer: %s", ring_last_error());
    port = sops->listener_port(l);
    if (tops->connect(ttp, "127.0.0.1", port, &c) != RING_OK)
        bail("tcp peer: connect: %s", ring_last_error());
    pat_fill(m1, first_len, 70, 0);
    pat_fill(m2, 300, 71, 0);
    memset(back, 9, sizeof(back));
    req_one(&s1, m1, first_len);
    req_one(&s2, m2, 300);
    req_one(&r1, in1, 1000);
    req_one(&r2, in2, 1000);
    req_one(&bs, back, sizeof(back));
    req_one(&br, back_in, sizeof(back_in));
    tops->post_send(c, &s1);
    tops->post_send(c, &s2);
    tops->post_recv(c, &br);
    while (!(r1.done && r2.done && br.done) && now_s() < until) {
        int moved;

        if (a == NULL) {
            if (sops->accept(l, &a) != RING_OK)
                break;
            if (a != NULL) {
                sops->post_recv(a, &r1);
                sops->post_recv(a, &r2);
                sops->post_send(a, &bs);
            }
        }
        moved = sops->progress(stp) + tops->progress(ttp);
        if (moved == 0)
            usleep(1000);
    }
    good = r1.done && r1.status == RING_OK && r1.bytes == first_len &&
           pat_bad(in1, first_len, 70, 0) < 0;
    if (!ok(good, "tcp peer: its first message (%zu bytes) reaches a 1000-byte receive whole, "
            "as over tcp (%s, %zu bytes)", first_len, ring_status_str(r1.status), r1.bytes))
        diag("    shm.c: the hand-shake reads the first message into hs_in (SHM_HS_BYTES = 128) "
             "and deliver_held() gives the caller only that: RING_ERR_MISMATCH for anything "
             "larger, whatever the caller's capacity");
    ok(r2.done && r2.status == RING_OK && r2.bytes == 300 && pat_bad(in2, 300, 71, 0) < 0,
       "tcp peer: its second message follows, whole (%s)", ring_status_str(r2.status));
    ok(a != NULL && a->phase == SHM_TCP && br.done && br.status == RING_OK && br.bytes == 20,
       "tcp peer: the connection is plain tcp and carries the reply too");
    if (a != NULL)
        sops->ep_close(a);
    tops->ep_close(c);
    sops->listener_close(l);
    sops->fini(stp);
    tops->fini(ttp);
    free(m1);
    free(m2);
    free(in1);
    free(in2);
}

/* ---- a hostile acceptor ---------------------------------------------------------------- */

/* what travels with the fds over the unix socket (shm_seg.c's shm_handover_t) */
typedef struct handover {
    unsigned char token[SHM_TOKEN_BYTES];
    uint64_t pipe_bytes;
} handover_t;

/* read exactly n bytes from a socket within secs: 0, or -1 */
static int read_full(int fd, void *buf, size_t n, double secs)
{
    double until = now_s() + secs;
    unsigned char *p = buf;

    while (n > 0 && now_s() < until) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t got;

        if (poll(&pfd, 1, 50) <= 0)
            continue;
        got = read(fd, p, n);
        if (got <= 0)
            return -1;
        p += got;
        n -= (size_t)got;
    }
    return n == 0 ? 0 : -1;
}

/* The victim: connect, then progress and wait(50) with a receive pending for 1.5 s. Exit
 * 0 when every wait returned within its time, 3 when one took over a second, 4 when the
 * endpoint never got going, 2 when it could not start. */
static void victim_child(int port)
{
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_ep_t *ep = NULL;
    unsigned char buf[100];
    ring_tp_req_t r;
    double until;

    alarm(20);
    memset(&params, 0, sizeof(params));
    if (ops->init(&params, &tp) != RING_OK || ops->connect(tp, "127.0.0.1", port, &ep) != RING_OK)
        _exit(2);
    req_one(&r, buf, sizeof(buf));
    ops->post_recv(ep, &r);
    until = now_s() + 1.5;
    while (now_s() < until) {
        double t0 = now_s();

        if (ops->progress(tp) == 0)
            ops->wait(tp, 50);
        if (now_s() - t0 > 1.0)
            _exit(3);
    }
    _exit(ep->phase == SHM_PIPES || ep->phase == SHM_FAILED ? 0 : 4);
}

/*
 * The acceptor side done by hand: it answers the offer with a proper sealed segment but
 * passes an ordinary (blocking) pipe where the connector's eventfd belongs. The connector
 * may refuse it or use it, but its wait() must never block past its timeout: a process
 * stuck in a read() can no longer time out its other peers.
 */
static void test_hostile_eventfd(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t salen = sizeof(sa);
    unsigned char msg[4 + SHM_HS_BYTES], answer[4 + 6] = {6, 0, 0, 0, 'R', 'S', 'H', 'A', 1, 1};
    const size_t pipe_bytes = 65536, seg_bytes = SHM_DATA_OFFSET + 2 * 65536;
    int lfd, cfd = -1, seg = -1, ux = -1, pp[2] = {-1, -1}, ws = 0, status = -1, exited = 0;
    uint32_t len;
    pid_t pid;
    double until;
    const char *step = "accept";

    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 4) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &salen) != 0)
        bail("hostile acceptor: listen: %s", strerror(errno));
    fflush(stdout);
    pid = fork();
    if (pid < 0)
        bail("fork: %s", strerror(errno));
    if (pid == 0)
        victim_child(ntohs(sa.sin_port));
    {
        struct pollfd pfd = {.fd = lfd, .events = POLLIN};

        if (poll(&pfd, 1, 5000) == 1)
            cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    }
    if (cfd >= 0) {
        step = "read the offer";
        if (read_full(cfd, msg, 4, 3) == 0) {
            len = (uint32_t)msg[0] | (uint32_t)msg[1] << 8 | (uint32_t)msg[2] << 16 |
                  (uint32_t)msg[3] << 24;
            if (len >= 6 + SHM_TOKEN_BYTES && len <= SHM_HS_BYTES &&
                read_full(cfd, msg + 4, len, 3) == 0 && memcmp(msg + 4, "RSHO", 4) == 0 &&
                msg[9] > 0 && len == 6u + SHM_TOKEN_BYTES + msg[9])
                step = "make the segment";
        }
    }
    if (strcmp(step, "make the segment") == 0) {
        void *map;

        seg = memfd_create("ringd-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (seg >= 0 && ftruncate(seg, (off_t)seg_bytes) == 0 &&
            fcntl(seg, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0 &&
            (map = mmap(NULL, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, seg, 0)) !=
                MAP_FAILED) {
            shm_seg_hdr_t *hdr = map;

            hdr->magic = SHM_SEG_MAGIC;
            hdr->version = 1;
            hdr->pipe_bytes = pipe_bytes;
            munmap(map, seg_bytes);
            if (pipe2(pp, O_CLOEXEC) == 0)
                step = "hand it over";
        }
    }
    if (strcmp(step, "hand it over") == 0) {
        struct sockaddr_un ua;
        size_t name_len = msg[9];
        handover_t ho;
        struct iovec iov = {.iov_base = &ho, .iov_len = sizeof(ho)};
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(3 * sizeof(int))];
        } cm;
        struct msghdr mh;
        int fds[3] = {seg, pp[0], pp[1]}; /* the connector's "eventfd": a pipe's read end */

        memset(&ua, 0, sizeof(ua));
        ua.sun_family = AF_UNIX;
        memcpy(ua.sun_path + 1, msg + 4 + 6 + SHM_TOKEN_BYTES, name_len);
        memcpy(ho.token, msg + 4 + 6, SHM_TOKEN_BYTES);
        ho.pipe_bytes = pipe_bytes;
        memset(&mh, 0, sizeof(mh));
        memset(&cm, 0, sizeof(cm));
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof(cm.buf);
        cm.h.cmsg_level = SOL_SOCKET;
        cm.h.cmsg_type = SCM_RIGHTS;
        cm.h.cmsg_len = CMSG_LEN(sizeof(fds));
        memcpy(CMSG_DATA(&cm.h), fds, sizeof(fds));
        ux = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (ux >= 0 &&
            connect(ux, (struct sockaddr *)&ua,
                    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + name_len)) == 0 &&
            sendmsg(ux, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(ho) &&
            write(cfd, answer, sizeof(answer)) == (ssize_t)sizeof(answer))
            step = "done";
    }
    until = now_s() + 3.5;
    while (now_s() < until) {
        pid_t w = waitpid(pid, &ws, WNOHANG);

        if (w == pid) {
            exited = 1;
            status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
            break;
        }
        usleep(10000);
    }
    if (!exited) {
        char path[64], line[256] = "";
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
        if ((f = fopen(path, "r")) != NULL) {
            if (fgets(line, sizeof(line), f) != NULL)
                line[strcspn(line, "\n")] = '\0';
            fclose(f);
        }
        diag("hostile acceptor: the connector is stuck in /proc/%d/syscall: %s (0 = read, then "
             "the fd)", (int)pid, line);
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
    }
    ok(strcmp(step, "done") == 0, "hostile acceptor: it answered the offer with a sealed segment "
       "and a pipe for an eventfd (last step: %s)", step);
    if (!ok(exited && status == 0, "hostile acceptor: the connector's wait(50) never blocks "
            "(%s)", !exited ? "still stuck 3.5 s later: killed" : status == 3 ? "a wait took over "
            "1 s" : status == 0 ? "every wait returned in time" : "it could not run"))
        diag("    shm_ep_wake_done() reads ep->efd_mine with eventfd_read(), counting on the "
             "EFD_NONBLOCK the acceptor set; shm_seg_claim() never checks that the fds it "
             "received are non-blocking eventfds");
    for (int i = 0; i < 2; i++)
        if (pp[i] >= 0)
            close(pp[i]);
    if (seg >= 0)
        close(seg);
    if (ux >= 0)
        close(ux);
    if (cfd >= 0)
        close(cfd);
    close(lfd);
}

/* ---- an endpoint closed during its hand-over ----------------------------------------- */

/* The connector closes its endpoint after the acceptor handed the segment over, before the
 * answer came: once both ends are closed (and another pair has come and gone, collecting
 * what waits on the unix socket), no descriptor of it may stay open. */
static void test_close_in_handover(void)
{
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_tp_ep_t *c = NULL, *a = NULL, *c2 = NULL, *a2 = NULL;
    double until = now_s() + 5;
    int port, fds0, fds1, c_offering;

    memset(&params, 0, sizeof(params));
    unsetenv("RING_SHM_BYTES");
    if (ops->init(&params, &tp) != RING_OK || ops->listen(tp, "127.0.0.1", 0, &l) != RING_OK)
        bail("close in hand-over: %s", ring_last_error());
    port = ops->listener_port(l);
    /* a first pair makes the unix listener; count from there */
    if (ops->connect(tp, "127.0.0.1", port, &c2) != RING_OK)
        bail("close in hand-over: connect: %s", ring_last_error());
    while ((a2 == NULL || a2->phase != SHM_PIPES || c2->phase != SHM_PIPES) && now_s() < until) {
        if (a2 == NULL && ops->accept(l, &a2) != RING_OK)
            break;
        if (ops->progress(tp) == 0)
            ops->wait(tp, 5);
    }
    ops->ep_close(c2);
    ops->ep_close(a2);
    c2 = a2 = NULL;
    fds0 = count_fds();
    if (ops->connect(tp, "127.0.0.1", port, &c) != RING_OK)
        bail("close in hand-over: connect: %s", ring_last_error());
    while ((a == NULL || a->phase == SHM_ANSWERING || a->phase == SHM_READING_OFFER) &&
           now_s() < until) {
        if (a == NULL && ops->accept(l, &a) != RING_OK)
            break;
        if (ops->progress(tp) == 0)
            ops->wait(tp, 5);
    }
    c_offering = c->phase == SHM_OFFERING;
    ok(a != NULL && a->phase == SHM_PIPES && c_offering, "close in hand-over: the acceptor "
       "handed its segment over, the connector has not taken it yet");
    ops->ep_close(c);
    ops->ep_close(a);
    /* another pair: the connector collects what waits on its unix socket */
    a2 = NULL;
    if (ops->connect(tp, "127.0.0.1", port, &c2) != RING_OK)
        bail("close in hand-over: connect: %s", ring_last_error());
    while ((a2 == NULL || a2->phase != SHM_PIPES || c2->phase != SHM_PIPES) && now_s() < until) {
        if (a2 == NULL && ops->accept(l, &a2) != RING_OK)
            break;
        if (ops->progress(tp) == 0)
            ops->wait(tp, 5);
    }
    ok(c2->phase == SHM_PIPES, "close in hand-over: a later connection still moves to shared "
       "memory");
    ops->ep_close(c2);
    ops->ep_close(a2);
    fds1 = count_fds();
    if (!is_int(fds1, fds0, "close in hand-over: with every endpoint closed, the descriptors are "
                "back to %d (before fini)", fds0)) {
        diag("    the hand-over of the closed endpoint (its segment and 2 eventfds) stays in "
             "shm_tp_t.arrivals: a received arrival never expires (SHM_ARRIVAL_TTL_S applies "
             "only to connections not yet read) and shm_ep_close does not drop its token's");
        diag_fds();
    }
    ops->listener_close(l);
    ops->fini(tp);
}

/* ---- many connections at once ----------------------------------------------------------- */

/* As many connections as a ring with many channels and streams opens to one neighbour, all
 * at once: every one must move to shared memory (the connector collects the hand-overs
 * that arrive for all of them) and carry a message. */
static void test_many(int k)
{
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_tp_ep_t **c = calloc((size_t)k, sizeof(*c)), **a = calloc((size_t)k, sizeof(*a));
    int port, na = 0, pipes = 0, failed = 0, delivered = 0;
    double until = now_s() + 10;
    char first_why[260] = "";

    memset(&params, 0, sizeof(params));
    unsetenv("RING_SHM_BYTES");
    if (c == NULL || a == NULL || ops->init(&params, &tp) != RING_OK ||
        ops->listen(tp, "127.0.0.1", 0, &l) != RING_OK)
        bail("many: %s", ring_last_error());
    port = ops->listener_port(l);
    for (int i = 0; i < k; i++)
        if (ops->connect(tp, "127.0.0.1", port, &c[i]) != RING_OK)
            bail("many: connect #%d: %s", i, ring_last_error());
    while (now_s() < until) {
        int settled = 0;

        while (na < k) {
            ring_tp_ep_t *ep = NULL;

            if (ops->accept(l, &ep) != RING_OK || ep == NULL)
                break;
            a[na++] = ep;
        }
        if (ops->progress(tp) == 0)
            ops->wait(tp, 10);
        for (int i = 0; i < k; i++)
            settled += c[i]->phase == SHM_PIPES || c[i]->phase == SHM_FAILED ||
                       c[i]->phase == SHM_TCP;
        for (int i = 0; i < na; i++)
            settled += a[i]->phase == SHM_PIPES || a[i]->phase == SHM_FAILED ||
                       a[i]->phase == SHM_TCP;
        if (na == k && settled == 2 * k)
            break;
    }
    for (int i = 0; i < k; i++) {
        pipes += c[i]->phase == SHM_PIPES;
        if (c[i]->phase == SHM_FAILED && failed++ == 0)
            snprintf(first_why, sizeof(first_why), "%s (%s)", c[i]->why,
                     ring_status_str(c[i]->error));
    }
    for (int i = 0; i < na; i++)
        pipes += a[i]->phase == SHM_PIPES;
    if (!ok(na == k && pipes == 2 * k, "many: %d connections opened at once: all %d ends "
            "move to shared memory (%d did, %d connectors failed)", k, 2 * k, pipes, failed))
        diag("    first failure: %s", first_why);
    /* a message on each, connector to acceptor: the pairing is by tcp connection */
    {
        ring_tp_req_t *s = calloc((size_t)k, sizeof(*s)), *r = calloc((size_t)k, sizeof(*r));
        ring_tp_req_t **all = calloc(2 * (size_t)k, sizeof(*all));
        unsigned char *out = calloc((size_t)k, 8), *in = calloc((size_t)k, 8);
        int n = 0;

        for (int i = 0; i < k && i < na; i++) {
            if (c[i]->phase != SHM_PIPES)
                continue;
            memcpy(out + 8 * i, &i, sizeof(i));
            req_one(&s[i], out + 8 * i, sizeof(i));
            ops->post_send(c[i], &s[i]);
            all[n++] = &s[i];
        }
        for (int i = 0; i < na; i++) {
            if (a[i]->phase != SHM_PIPES)
                continue;
            req_one(&r[i], in + 8 * i, 8);
            ops->post_recv(a[i], &r[i]);
            all[n++] = &r[i];
        }
        run_reqs(tp, ops, all, n, 2);
        for (int i = 0; i < na; i++)
            delivered += r[i].done && r[i].status == RING_OK && r[i].bytes == sizeof(int);
        ok(delivered == k, "many: a message on each of the %d connections arrives (%d did)", k,
           delivered);
        /* the endpoints go first: they complete what is still pending */
        for (int i = 0; i < k; i++)
            ops->ep_close(c[i]);
        for (int i = 0; i < na; i++)
            ops->ep_close(a[i]);
        free(s);
        free(r);
        free(all);
        free(out);
        free(in);
    }
    ops->listener_close(l);
    ops->fini(tp);
    free(c);
    free(a);
}

/* ---- two processes --------------------------------------------------------------------- */

#define ECHO_MAX 300000

/* The child: connect, echo every message back until the parent kills it. */
static void echo_child(int port)
{
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_ep_t *ep = NULL;
    unsigned char *buf = malloc(ECHO_MAX);
    ring_tp_req_t r, s, *rr[1] = {&r}, *ss[1] = {&s};

    alarm(20);
    memset(&params, 0, sizeof(params));
    if (buf == NULL || ops->init(&params, &tp) != RING_OK ||
        ops->connect(tp, "127.0.0.1", port, &ep) != RING_OK)
        _exit(2);
    for (int i = 0; i < 100000; i++) {
        req_one(&r, buf, ECHO_MAX);
        if (ops->post_recv(ep, &r) != RING_OK || !run_reqs(tp, ops, rr, 1, 15) ||
            r.status != RING_OK)
            _exit(3);
        req_one(&s, buf, r.bytes);
        if (ops->post_send(ep, &s) != RING_OK || !run_reqs(tp, ops, ss, 1, 15) ||
            s.status != RING_OK)
            _exit(4);
    }
    _exit(5);
}

static void test_two_processes(void)
{
    enum { TRIPS = 400 };
    const ring_tp_ops_t *ops = ring_tp_find("shm");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_tp_ep_t *ep = NULL;
    unsigned char *out = xmalloc(ECHO_MAX), *in = xmalloc(ECHO_MAX);
    ring_tp_req_t s, r, *rr[1] = {&r};
    double until, worst = 0, t_all, t_kill;
    int port, bad = 0, trips = 0, ws = 0, in_pipes, done;
    pid_t pid;
    uint64_t x = 99;

    memset(&params, 0, sizeof(params));
    setenv("RING_SHM_BYTES", "64K", 1); /* the acceptor's choice: the child inherits it anyway */
    if (ops->init(&params, &tp) != RING_OK || ops->listen(tp, "127.0.0.1", 0, &l) != RING_OK)
        bail("two processes: %s", ring_last_error());
    port = ops->listener_port(l);
    fflush(stdout);
    pid = fork();
    if (pid < 0)
        bail("fork: %s", strerror(errno));
    if (pid == 0)
        echo_child(port);
    until = now_s() + 5;
    while (ep == NULL && now_s() < until) {
        if (ops->accept(l, &ep) != RING_OK)
            break;
        if (ep == NULL && ops->progress(tp) == 0)
            ops->wait(tp, 10);
    }
    if (ep == NULL) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        bail("two processes: the child never connected");
    }
    /* round trips; wait(1000) when nothing moves, so a lost wake-up costs a second */
    t_all = now_s();
    for (int i = 0; i < TRIPS; i++) {
        size_t len;
        double t0 = now_s(), dt;

        x = x * 6364136223846793005ull + 1442695040888963407ull;
        len = i % 10 == 9 ? ECHO_MAX - (size_t)(x >> 50) : (size_t)(x >> 33) % 200;
        pat_fill(out, len, (uint32_t)i, 0);
        req_one(&s, out, len);
        req_one(&r, in, ECHO_MAX);
        ops->post_recv(ep, &r);
        ops->post_send(ep, &s);
        until = now_s() + 10;
        while ((!s.done || !r.done) && now_s() < until)
            if (ops->progress(tp) == 0)
                ops->wait(tp, 1000);
        dt = now_s() - t0;
        if (dt > worst)
            worst = dt;
        if (!r.done || r.status != RING_OK || r.bytes != len || pat_bad(in, len, (uint32_t)i, 0) >= 0) {
            if (bad++ < 3)
                diag("round trip %d (%zu bytes): done %d %s bytes %zu", i, len, r.done,
                     ring_status_str(r.status), r.bytes);
            if (!r.done)
                break;
        }
        trips++;
    }
    t_all = now_s() - t_all;
    in_pipes = ep->phase == SHM_PIPES;
    ok(in_pipes && trips == TRIPS && bad == 0, "two processes: %d echo round trips of 0..300000 "
       "bytes through 64 KiB pipes, intact (%.2f s)", trips, t_all);
    ok(worst < 0.9, "two processes: no wake-up lost: the slowest round trip took %.3f s "
       "(waits of 1 s)", worst);

    /* the peer dies while we wait for it */
    req_one(&r, in, ECHO_MAX);
    req_one(&s, out, 0);
    ops->post_recv(ep, &r); /* the child echoes nothing: it is killed first */
    kill(pid, SIGKILL);
    t_kill = now_s();
    done = run_reqs(tp, ops, rr, 1, 5);
    t_kill = now_s() - t_kill;
    ok(done && (r.status == RING_ERR_REMOTE || r.status == RING_ERR_IO) && t_kill < 2.0,
       "two processes: SIGKILL of the peer fails the pending receive (%s, errno %d) in %.3f s",
       ring_status_str(r.status), r.sys_errno, t_kill);
    ok(ops->post_send(ep, &s) != RING_OK && s.done, "two processes: later sends fail at once");
    until = now_s() + 5;
    while (waitpid(pid, &ws, WNOHANG) == 0 && now_s() < until)
        usleep(10000);
    ops->ep_close(ep);
    ops->listener_close(l);
    ops->fini(tp);
    unsetenv("RING_SHM_BYTES");
    free(out);
    free(in);
}

int main(void)
{
    double t_start = now_s();
    int fds0 = count_fds(), fds1;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    alarm(60);
    test_env();
    test_messages(NULL, (size_t)4 << 20);
    test_messages("64K", (size_t)64 << 10);
    test_iov();
    test_urgent();
    test_oversize();
    test_close();
    test_hostile();
    test_wait();
    test_early(0);
    test_early(1);
    test_tcp_peer(100);
    test_tcp_peer(300);
    test_hostile_eventfd();
    test_close_in_handover();
    test_many(64);
    test_many(100);
    test_two_processes();
    fds1 = count_fds();
    if (!is_int(fds1, fds0, "no descriptor left open after every endpoint, listener and "
                "transport was closed (%d before, %d after)", fds0, fds1))
        diag_fds();
    diag("t-shm-pipe: %.1f s", now_s() - t_start);
    return done_testing();
}
