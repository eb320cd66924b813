/*
 * t-allreduce.c - ring allreduce across real processes on 127.0.0.1 (and
 * [::1] when it works): every result is checked against a double-precision
 * reference with an fp32 tolerance, and must be bitwise identical on every
 * peer.
 *
 * Data is a pure function of (seed, rank, index), so every rank computes
 * the reference itself without seeing the others' data. Values are k/2^23
 * in [-1, 1) times a power of two in 2^-3..2^4: exact in fp32, with some
 * dynamic range. Each child reports, per allreduce, the number of wrong
 * elements, the largest error relative to the tolerance and a hash of its
 * result; the parent compares the hashes across ranks.
 *
 * Tolerance: a ring sum adds the N contributions one after another in fp32,
 * so |err| <= (N-1) u sum|x_r| with u = 2^-24; the average also rounds 1/N
 * and the product: |err| <= (N+1) u sum|x_r| / N. N = 1 must be exact.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "mix64.h"
#include "tap.h"

#define MAX_OPS 40
#define V_OPS 0          /* values 3*i .. 3*i+2: bad count, hash, max err/tol */
#define V_POLLS 170      /* async: number of ring_request_test rounds */
#define V_TEST_ERR 171   /* async: 1 when a ring_request_test returned an error */
#define V_NODONE 172     /* async: requests not done after polling */
#define V_EXTRA_ST 173   /* maxreq: status of the start beyond RING_MAX_REQUESTS */
#define V_WAIT_ST 174    /* async: first failing wait status, 0 */

#define BIG_COUNT ((size_t)16 << 20) /* 16M floats = 64 MiB */

typedef struct op {
    size_t count;
    ring_op_t op;
    int inplace;
    int misalign;        /* buffers start one float past a 64-byte boundary */
    uint32_t tensor;
    size_t stride;       /* check every stride-th element (and the last): 0 or 1 = all */
} op_t;

typedef struct ar_case {
    uint64_t seed;
    int nops;
    op_t ops[MAX_OPS];
    int nasync;          /* the first nasync ops are started together, then tested and waited */
    int wait_last_first; /* wait for the last async request first, then the others in order */
    int try_extra;       /* after starting them, one more start must say RING_ERR_NO_RESOURCE */
} ar_case_t;

/* ---- data ------------------------------------------------------------- */

static inline uint64_t stream_key(uint64_t seed, int op, int rank)
{
    return mix64(seed * 1000003u + (uint64_t)op * 7919u + (uint64_t)rank * 104729u);
}

/* element i of rank's input to op: exact in fp32 */
static inline float gen(uint64_t key, size_t i)
{
    uint64_t h = mix64(key ^ (i * 0xd1b54a32d192ed03ull));
    int32_t k = (int32_t)(h >> 40) - (1 << 23);   /* -2^23 .. 2^23-1 */
    int e = (int)((h >> 8) & 7) - 3;              /* -3 .. 4 */

    return ldexpf((float)k, e - 23);
}

static uint64_t hash_floats(const float *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const uint32_t *w = (const uint32_t *)(const void *)p;

    for (size_t i = 0; i < n; i++) {
        h ^= w[i];
        h *= 0x100000001b3ull;
    }
    return h ^ n;
}

static const char *op_name(ring_op_t op)
{
    return op == RING_SUM ? "sum" : "avg";
}

/* ---- the child -------------------------------------------------------- */

typedef struct bufs {
    void *smem, *rmem;
    float *send, *recv;
} bufs_t;

static int bufs_alloc(bufs_t *b, const op_t *o)
{
    size_t bytes = (o->count + 32) * sizeof(float);

    memset(b, 0, sizeof(*b));
    if (o->count == 0)
        return 0; /* NULL buffers are allowed for an empty allreduce */
    b->smem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    b->rmem = o->inplace ? NULL : aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (b->smem == NULL || (!o->inplace && b->rmem == NULL))
        return -1;
    b->send = (float *)b->smem + (o->misalign ? 1 : 0);
    b->recv = o->inplace ? b->send : (float *)b->rmem + (o->misalign ? 1 : 0);
    return 0;
}

static void bufs_free(bufs_t *b)
{
    free(b->smem);
    free(b->rmem);
}

static void fill(const ar_case_t *c, int i, int rank, bufs_t *b)
{
    const op_t *o = &c->ops[i];
    uint64_t key = stream_key(c->seed, i, rank);

    for (size_t k = 0; k < o->count; k++)
        b->send[k] = gen(key, k);
    if (!o->inplace)
        for (size_t k = 0; k < o->count; k++)
            b->recv[k] = NAN; /* stale output must not pass */
}

/* k + stride, but never skip the last element */
static size_t next_index(size_t k, size_t stride, size_t count)
{
    if (k + stride < count || k + 1 >= count)
        return k + stride;
    return count - 1;
}

/* Check op i's result; reports bad count, hash and max err/tol. */
static void verify(const ar_case_t *c, int i, int rank, int n, const bufs_t *b)
{
    const op_t *o = &c->ops[i];
    uint64_t keys[H_MAX_RANKS];
    const double u = ldexp(1.0, -24);
    uint64_t bad = 0;
    double worst = 0;
    size_t first_bad = (size_t)-1;
    double first_got = 0, first_want = 0;

    for (int r = 0; r < n; r++)
        keys[r] = stream_key(c->seed, i, r);
    size_t stride = o->stride > 1 ? o->stride : 1;

    for (size_t k = 0; k < o->count; k = next_index(k, stride, o->count)) {
        double sum = 0, abs_sum = 0, want, tol, err;
        float mine = 0;

        for (int r = 0; r < n; r++) {
            float x = gen(keys[r], k);
            if (r == rank)
                mine = x;
            sum += x;
            abs_sum += fabs(x);
        }
        if (o->op == RING_SUM) {
            want = sum;
            tol = (n - 1) * u * abs_sum * 1.0001;
        } else {
            want = sum / n;
            tol = n == 1 ? 0 : (n + 1) * u * abs_sum / n * 1.0001;
        }
        err = fabs((double)b->recv[k] - want);
        if (!(err <= tol) || (!o->inplace && memcmp(&b->send[k], &mine, sizeof(mine)) != 0)) {
            if (bad++ == 0) {
                first_bad = k;
                first_got = b->recv[k];
                first_want = want;
            }
        }
        if (tol > 0 && err / tol > worst)
            worst = err / tol;
        else if (tol == 0 && err > 0)
            worst = INFINITY;
    }
    h_put(V_OPS + 3 * i, bad);
    h_put(V_OPS + 3 * i + 1, hash_floats(b->recv, o->count));
    h_put_double(V_OPS + 3 * i + 2, worst);
    if (bad > 0)
        h_msg("op %d (count %zu %s %s): %llu bad elements, first at %zu: got %.9g, want %.9g "
              "(or the send buffer changed)", i, o->count, op_name(o->op),
              o->inplace ? "in place" : "out of place", (unsigned long long)bad, first_bad,
              first_got, first_want);
}

static int ar_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const ar_case_t *c = arg;
    ring_comm_t *comm;
    ring_request_t *reqs[MAX_OPS];
    bufs_t bufs[MAX_OPS];
    ring_status_t st;
    int code = 0;

    st = ring_comm_open(cfg, &comm);
    if (st != RING_OK)
        return h_fail(st, "ring_comm_open");
    memset(bufs, 0, sizeof(bufs));

    if (c->nasync > 0) {
        int done[MAX_OPS] = {0}, ndone = 0, test_err = 0;
        uint64_t polls = 0;
        double until = h_now() + 20;

        for (int i = 0; i < c->nasync; i++) {
            const op_t *o = &c->ops[i];
            if (bufs_alloc(&bufs[i], o) != 0) {
                h_msg("out of memory");
                return 99;
            }
            fill(c, i, rank, &bufs[i]);
            st = ring_allreduce_start(comm, bufs[i].send, bufs[i].recv, o->count, RING_FLOAT32,
                                      o->op, o->tensor, &reqs[i]);
            if (st != RING_OK)
                return h_fail(st, "ring_allreduce_start");
        }
        if (c->try_extra) {
            ring_request_t *extra = NULL;
            float one = 1;
            st = ring_allreduce_start(comm, &one, &one, 1, RING_FLOAT32, RING_SUM, 999, &extra);
            h_put(V_EXTRA_ST, (uint64_t)st);
            if (st == RING_OK)
                (void)ring_request_wait(extra); /* keep the ring in step even so */
        }
        /* poll: bounded in time and count */
        while (ndone < c->nasync && h_now() < until && polls < 50000000) {
            polls++;
            for (int i = 0; i < c->nasync; i++) {
                int d = 0;
                if (done[i])
                    continue;
                st = ring_request_test(reqs[i], &d);
                if (st != RING_OK)
                    test_err = 1;
                if (d) {
                    done[i] = 1;
                    ndone++;
                }
            }
            if (ndone < c->nasync && (polls & 63) == 0)
                usleep(50);
        }
        h_put(V_POLLS, polls);
        h_put(V_TEST_ERR, (uint64_t)test_err);
        h_put(V_NODONE, (uint64_t)(c->nasync - ndone));
        h_put(V_WAIT_ST, 0);
        if (c->wait_last_first) {
            st = ring_request_wait(reqs[c->nasync - 1]);
            if (st != RING_OK) {
                h_put(V_WAIT_ST, (uint64_t)st);
                return h_fail(st, "ring_request_wait (last first)");
            }
        }
        for (int i = 0; i < c->nasync - (c->wait_last_first ? 1 : 0); i++) {
            st = ring_request_wait(reqs[i]);
            if (st != RING_OK) {
                h_put(V_WAIT_ST, (uint64_t)st);
                return h_fail(st, "ring_request_wait");
            }
        }
        for (int i = 0; i < c->nasync; i++) {
            verify(c, i, rank, n, &bufs[i]);
            bufs_free(&bufs[i]);
        }
    }
    for (int i = c->nasync; i < c->nops && code == 0; i++) {
        const op_t *o = &c->ops[i];
        bufs_t b;

        if (bufs_alloc(&b, o) != 0) {
            h_msg("out of memory for %zu floats", o->count);
            code = 99;
            break;
        }
        fill(c, i, rank, &b);
        st = ring_allreduce(comm, b.send, b.recv, o->count, RING_FLOAT32, o->op);
        if (st != RING_OK) {
            char what[96];
            snprintf(what, sizeof(what), "ring_allreduce #%d (count %zu)", i, o->count);
            code = h_fail(st, what);
        } else {
            verify(c, i, rank, n, &b);
        }
        bufs_free(&b);
    }
    ring_comm_close(comm);
    return code;
}

/* ---- the parent ------------------------------------------------------- */

static void add_op(ar_case_t *c, size_t count, ring_op_t op, int inplace, int misalign,
                   uint32_t tensor)
{
    op_t *o;

    if (c->nops == MAX_OPS)
        bail("too many ops in one case");
    o = &c->ops[c->nops++];
    o->count = count;
    o->op = op;
    o->inplace = inplace;
    o->misalign = misalign;
    o->tensor = tensor;
}

/* every combination of op and placement for one count */
static void add_all4(ar_case_t *c, size_t count, int misalign)
{
    add_op(c, count, RING_SUM, 1, misalign, 0);
    add_op(c, count, RING_SUM, 0, misalign, 0);
    add_op(c, count, RING_AVG, 1, misalign, 0);
    add_op(c, count, RING_AVG, 0, misalign, 0);
}

/* Run a case and check it; returns the run (valid until the next call). */
static const h_run_t *run_case(const char *label, int n, const ar_case_t *c,
                               const h_setting_t *settings, const char *host, double budget)
{
    h_ring_spec_t rs = {.label = label, .n = n, .host = host, .settings = settings,
                        .fn = ar_child, .arg = (void *)c, .budget = budget, .grace = 3};
    const h_run_t *run = h_run_ring(&rs);
    int all_exit0 = 1;

    for (int r = 0; r < n; r++)
        all_exit0 &= run->r[r].exited && run->r[r].code == 0;
    if (!ok(all_exit0, "%s: all %d ranks exit 0 (%.2f s)", label, n, run->t_done))
        h_diag(run);
    for (int i = 0; i < c->nops; i++) {
        const op_t *o = &c->ops[i];
        uint64_t bad = 0, h0 = 0;
        int missing = 0, same = 1;
        double worst = 0;
        char what[160];

        snprintf(what, sizeof(what), "%s: #%d count=%zu %s %s%s%s%s", label, i, o->count,
                 op_name(o->op), o->inplace ? "in-place" : "out-of-place",
                 o->misalign ? " misaligned" : "", i < c->nasync ? " async" : "",
                 o->stride > 1 ? " (values sampled 1/5, hash of all)" : "");
        for (int r = 0; r < n; r++) {
            const h_result_t *res = &run->r[r];
            if (!res->has_val[V_OPS + 3 * i] || !res->has_val[V_OPS + 3 * i + 1]) {
                missing++;
                continue;
            }
            bad += h_val(res, V_OPS + 3 * i, 0);
            if (h_val_double(res, V_OPS + 3 * i + 2, 0) > worst)
                worst = h_val_double(res, V_OPS + 3 * i + 2, 0);
            if (r == 0)
                h0 = h_val(res, V_OPS + 3 * i + 1, 0);
            else
                same &= h_val(res, V_OPS + 3 * i + 1, 0) == h0;
        }
        if (!ok(missing == 0 && bad == 0, "%s: within fp32 tolerance on every rank "
                "(max err/tol %.3g)", what, worst)) {
            diag("    %d rank(s) reported nothing, %llu bad elements in all", missing,
                 (unsigned long long)bad);
            for (int r = 0; r < n; r++)
                if (run->r[r].msg[0])
                    diag("    rank %d: %s", r, run->r[r].msg);
        }
        if (!ok(missing == 0 && same, "%s: bitwise identical on all %d ranks", what, n))
            for (int r = 0; r < n; r++)
                diag("    rank %d: hash %016llx", r,
                     (unsigned long long)h_val(&run->r[r], V_OPS + 3 * i + 1, 0));
    }
    return run;
}

static void sizes_case(ar_case_t *c, int n, int big, int big_sampled)
{
    size_t sizes[] = {0, 1, (size_t)(n - 1), 13, 1009, 65537};
    size_t seen[8];
    int nseen = 0;

    memset(c, 0, sizeof(*c));
    c->seed = 1000 + (uint64_t)n;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        int dup = 0;
        for (int j = 0; j < nseen; j++)
            dup |= seen[j] == sizes[k];
        if (dup)
            continue;
        seen[nseen++] = sizes[k];
        add_all4(c, sizes[k], 0);
    }
    /* unaligned count (not a multiple of 16 nor of N) in unaligned buffers */
    add_all4(c, 100003, 1);
    if (big) {
        add_op(c, BIG_COUNT, RING_SUM, 1, 0, 0);
        add_op(c, BIG_COUNT, RING_AVG, 0, 0, 0);
    } else if (big_sampled) {
        /* the reference costs N hashes per element: check a fifth of them here */
        add_op(c, BIG_COUNT, RING_AVG, 1, 0, 0);
        c->ops[c->nops - 1].stride = 5;
    }
}

int main(void)
{
    static ar_case_t c;
    const int ns[] = {1, 2, 3, 4, 7};
    double t_start = h_now();
    char label[96];

    setvbuf(stdout, NULL, _IOLBF, 0);

    /* 1. counts 0, 1, N-1, primes, unaligned, 64 MiB: sum and avg, in place and out of place,
     *    all in a row on one communicator (so also several allreduces of different sizes) */
    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
        int n = ns[k];
        int big = n == 2 || n == 4;

        sizes_case(&c, n, big, n > 2);
        snprintf(label, sizeof(label), "N=%d", n);
        run_case(label, n, &c, NULL, NULL, 40);
    }

    /* 2. three requests in flight at once, polled with ring_request_test, waited in order */
    {
        const h_run_t *run;
        int polled_ok = 1;

        memset(&c, 0, sizeof(c));
        c.seed = 77;
        add_op(&c, 65537, RING_SUM, 0, 0, 101);
        add_op(&c, 1009, RING_AVG, 1, 0, 102);
        add_op(&c, 262147, RING_SUM, 1, 1, 103);
        c.nasync = 3;
        add_op(&c, 4099, RING_AVG, 0, 0, 0); /* and a blocking one after them */
        run = run_case("N=3 async x3", 3, &c, NULL, NULL, 20);
        for (int r = 0; r < 3; r++)
            polled_ok &= h_val(&run->r[r], V_NODONE, 99) == 0 &&
                         h_val(&run->r[r], V_TEST_ERR, 1) == 0;
        if (!ok(polled_ok, "N=3 async x3: ring_request_test reports every request done, no "
                "error, before any wait"))
            h_diag(run);
        diag("N=3 async x3: polls per rank: %llu %llu %llu",
             (unsigned long long)h_val(&run->r[0], V_POLLS, 0),
             (unsigned long long)h_val(&run->r[1], V_POLLS, 0),
             (unsigned long long)h_val(&run->r[2], V_POLLS, 0));
    }

    /* 3. RING_MAX_REQUESTS in flight, one more is refused, the last is waited for first */
    {
        const h_run_t *run;
        int refused = 1;

        memset(&c, 0, sizeof(c));
        c.seed = 78;
        for (int i = 0; i < RING_MAX_REQUESTS; i++)
            add_op(&c, 1000 + (size_t)i * 37, i % 2 ? RING_AVG : RING_SUM, i % 3 == 0, 0,
                   200 + (uint32_t)i);
        c.nasync = RING_MAX_REQUESTS;
        c.try_extra = 1;
        c.wait_last_first = 1;
        add_op(&c, 5000, RING_SUM, 1, 0, 0); /* the ring still works after the slots wrapped */
        add_op(&c, 77, RING_AVG, 0, 0, 0);
        run = run_case("N=2 max requests", 2, &c, NULL, NULL, 20);
        for (int r = 0; r < 2; r++)
            refused &= h_val(&run->r[r], V_EXTRA_ST, 0) == RING_ERR_NO_RESOURCE;
        if (!ok(refused, "N=2 max requests: start #%d returns RING_ERR_NO_RESOURCE",
                RING_MAX_REQUESTS + 1))
            h_diag(run);
    }

    /* 4. small chunks: hundreds of chunks per segment */
    {
        static const h_setting_t chunk4k[] = {{-1, "chunk-size", "4K"}, {0, NULL, NULL}};

        memset(&c, 0, sizeof(c));
        c.seed = 79;
        add_op(&c, 65537, RING_SUM, 1, 0, 0);
        add_op(&c, 1048581, RING_SUM, 0, 0, 0);
        add_op(&c, 1048581, RING_AVG, 1, 1, 0);
        add_op(&c, 7, RING_AVG, 0, 0, 0);
        run_case("N=3 chunk-size 4K", 3, &c, chunk4k, NULL, 20);
    }

    /* 5. a chunk size that is not a multiple of the 64-byte block (the smallest one too) */
    {
        static const h_setting_t chunk1000[] = {{-1, "chunk-size", "1000"}, {0, NULL, NULL}};
        static const h_setting_t chunk64[] = {{-1, "chunk-size", "64"}, {0, NULL, NULL}};

        memset(&c, 0, sizeof(c));
        c.seed = 80;
        add_op(&c, 1009, RING_SUM, 1, 0, 0);
        add_op(&c, 65537, RING_SUM, 0, 0, 0);
        add_op(&c, 262147, RING_AVG, 1, 0, 0);
        run_case("N=3 chunk-size 1000", 3, &c, chunk1000, NULL, 20);

        memset(&c, 0, sizeof(c));
        c.seed = 81;
        add_op(&c, 1009, RING_SUM, 0, 0, 0);
        add_op(&c, 20011, RING_AVG, 1, 0, 0);
        run_case("N=3 chunk-size 64", 3, &c, chunk64, NULL, 20);
    }

    /* 6. several channels and streams */
    {
        static const h_setting_t ch2s3[] = {{-1, "channels", "2"}, {-1, "tcp-streams", "3"},
                                            {-1, "chunk-size", "64K"}, {0, NULL, NULL}};
        static const h_setting_t ch3[] = {{-1, "channels", "3"}, {0, NULL, NULL}};

        memset(&c, 0, sizeof(c));
        c.seed = 82;
        add_op(&c, 0, RING_SUM, 1, 0, 0);
        add_op(&c, 1, RING_SUM, 0, 0, 0);
        add_op(&c, 13, RING_AVG, 1, 0, 0);
        add_op(&c, 33, RING_SUM, 0, 1, 0);
        add_op(&c, 65537, RING_AVG, 0, 0, 0);
        add_op(&c, 1048581, RING_SUM, 1, 1, 0);
        add_op(&c, 1048581, RING_AVG, 0, 0, 0);
        run_case("N=4 channels=2 tcp-streams=3", 4, &c, ch2s3, NULL, 20);

        memset(&c, 0, sizeof(c));
        c.seed = 83;
        add_op(&c, 20, RING_SUM, 1, 0, 0);    /* fewer blocks than channels */
        add_op(&c, 100003, RING_AVG, 0, 1, 0);
        run_case("N=2 channels=3", 2, &c, ch3, NULL, 20);
    }

    /* 7. IPv6 loopback */
    {
        memset(&c, 0, sizeof(c));
        c.seed = 84;
        add_op(&c, 1009, RING_SUM, 1, 0, 0);
        add_op(&c, 65537, RING_AVG, 0, 0, 0);
        if (h_ipv6_usable()) {
            run_case("N=3 [::1]", 3, &c, NULL, "::1", 20);
        } else {
            /* as many results as the case would have */
            skip("[::1] is not usable here");
            for (int i = 0; i < 2 * c.nops; i++)
                skip("[::1] is not usable here");
        }
    }

    /* 8. the listen address given as an interface name, and as the wildcard */
    {
        static const h_setting_t bind_lo[] = {{-1, "bind", "lo"}, {0, NULL, NULL}};
        static const h_setting_t bind_any[] = {{-1, "bind", "*"}, {0, NULL, NULL}};

        memset(&c, 0, sizeof(c));
        c.seed = 85;
        add_op(&c, 1009, RING_SUM, 1, 0, 0);
        run_case("N=2 --bind lo (interface name)", 2, &c, bind_lo, NULL, 20);
        run_case("N=2 --bind * (every address)", 2, &c, bind_any, NULL, 20);
    }

    diag("t-allreduce: %.1f s", h_now() - t_start);
    return done_testing();
}
