/*
 * t-coll.c - broadcast, allgather(v), reduce-scatter and barrier across real
 * processes on 127.0.0.1, for N = 1, 2, 3, 4, 7, with small chunks, two
 * channels, the fp16 codec (broadcast and allgather must stay bit-exact
 * under it) and the progress thread; then mixed requests in flight, and the
 * failures: a peer calling another collective or another root, different
 * allgather sizes, a peer killed mid-broadcast.
 *
 * Data is a pure function of (seed, rank, index), so every rank checks its
 * result without seeing the others' inputs. Broadcast data holds the bit
 * patterns an allreduce against zeros would change: -0.0, NaNs with
 * payloads, subnormals, infinities.
 */
#include "ring_build.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "mix64.h"
#include "tap.h"

#define V_BAD 0       /* values 0..V_NCHECK-1: wrong elements per check */
#define V_NCHECK 24
#define V_HASH 40     /* 40..: a hash of each check's result (compared across ranks) */
#define V_ENTER 80    /* barrier: entry time (us, CLOCK_MONOTONIC) */
#define V_LEAVE 81
#define V_STATUS 90   /* failure cases: the status the rank got */

/* byte i of rank's data for check c: every bit pattern, and the special floats */
static uint32_t gen_word(int c, int rank, size_t i)
{
    static const uint32_t special[] = {0x80000000u, 0x7fc00001u, 0xffc12345u, 0x00000001u,
                                       0x807fffffu, 0x7f800000u, 0xff800000u, 0x7fbfffffu};
    uint64_t h = mix64((uint64_t)c * 1000003u ^ (uint64_t)rank * 104729u ^ i * 0xd1b54a32d192ed03ull);

    return (h & 7) == 0 ? special[(h >> 3) & 7] : (uint32_t)(h >> 32);
}

static void gen_bytes(int c, int rank, unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(gen_word(c, rank, i / 4) >> (8 * (i % 4)));
}

/* an fp32 value exact in fp32, in [-16, 16) */
static float gen_float(int c, int rank, size_t i)
{
    uint64_t h = mix64((uint64_t)c * 7919u ^ (uint64_t)rank * 15485863u ^ i * 0x9e3779b97f4a7c15ull);

    return ldexpf((float)((int32_t)(h >> 40) - (1 << 23)), (int)((h >> 8) & 7) - 3 - 23);
}

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h ^ n;
}

static uint64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- the checks, in the child ---------------------------------------------- */

typedef struct coll_case {
    int codec_fp16;      /* reduce-scatter tolerance: fp16 on the wire */
    size_t bcast_bytes;
    size_t gather_bytes;
    size_t rs_count;
} coll_case_t;

static int check_broadcast(ring_comm_t *comm, int slot, int root, size_t bytes)
{
    int rank = ring_comm_rank(comm);
    unsigned char *buf = malloc(bytes + 1), *want = malloc(bytes + 1);
    uint64_t bad = 0;
    ring_status_t st;

    if (buf == NULL || want == NULL)
        return h_fail(RING_ERR_NO_MEMORY, "malloc");
    gen_bytes(slot, root, want, bytes);
    if (rank == root)
        memcpy(buf, want, bytes);
    else
        memset(buf, 0xee, bytes);
    st = ring_broadcast(comm, buf, bytes, root);
    if (st != RING_OK) {
        free(buf), free(want);
        return h_fail(st, "ring_broadcast");
    }
    for (size_t i = 0; i < bytes; i++)
        bad += buf[i] != want[i];
    h_put(V_BAD + slot, bad);
    h_put(V_HASH + slot, hash_bytes(buf, bytes));
    free(buf), free(want);
    return 0;
}

/* allgatherv with rank r giving sizes[r] bytes; in place when inplace */
static int check_allgather(ring_comm_t *comm, int slot, const size_t *sizes, int inplace)
{
    int rank = ring_comm_rank(comm), n = ring_comm_size(comm);
    size_t total = 0, off = 0, mine_off = 0;
    unsigned char *out, *in;
    uint64_t bad = 0;
    ring_request_t *req;
    ring_status_t st;

    for (int r = 0; r < n; r++) {
        if (r == rank)
            mine_off = total;
        total += sizes[r];
    }
    out = malloc(total + 1);
    in = malloc(sizes[rank] + 1);
    if (out == NULL || in == NULL)
        return h_fail(RING_ERR_NO_MEMORY, "malloc");
    memset(out, 0xee, total);
    gen_bytes(slot, rank, inplace ? out + mine_off : in, sizes[rank]);
    st = ring_allgatherv_start(comm, inplace ? out + mine_off : in, out, sizes, 7, &req);
    if (st == RING_OK)
        st = ring_request_wait(req);
    if (st != RING_OK) {
        free(out), free(in);
        return h_fail(st, "ring_allgatherv");
    }
    for (int r = 0; r < n; r++) {
        unsigned char *want = malloc(sizes[r] + 1);
        if (want == NULL)
            return h_fail(RING_ERR_NO_MEMORY, "malloc");
        gen_bytes(slot, r, want, sizes[r]);
        for (size_t i = 0; i < sizes[r]; i++)
            bad += out[off + i] != want[i];
        off += sizes[r];
        free(want);
    }
    h_put(V_BAD + slot, bad);
    h_put(V_HASH + slot, hash_bytes(out, total));
    free(out), free(in);
    return 0;
}

/* reduce-scatter of n * count floats: this rank's block against a double reference */
static int check_reduce_scatter(ring_comm_t *comm, int slot, size_t count, ring_op_t op, int fp16)
{
    int rank = ring_comm_rank(comm), n = ring_comm_size(comm);
    float *in = malloc((size_t)n * count * sizeof(float) + 4);
    float *out = malloc(count * sizeof(float) + 4);
    uint64_t bad = 0;
    ring_status_t st;

    if (in == NULL || out == NULL)
        return h_fail(RING_ERR_NO_MEMORY, "malloc");
    for (size_t i = 0; i < (size_t)n * count; i++)
        in[i] = gen_float(slot, rank, i);
    for (size_t i = 0; i < count; i++)
        out[i] = NAN;
    st = ring_reduce_scatter(comm, in, out, count, RING_FLOAT32, op);
    if (st != RING_OK) {
        free(in), free(out);
        return h_fail(st, "ring_reduce_scatter");
    }
    for (size_t i = 0; i < count; i++) {
        size_t k = (size_t)rank * count + i;
        double sum = 0, abs_sum = 0, want, tol;

        for (int r = 0; r < n; r++) {
            float x = gen_float(slot, r, k);
            sum += x;
            abs_sum += fabs(x);
        }
        want = op == RING_AVG ? sum / n : sum;
        /* fp32: (N+1) roundings of u = 2^-24 of the sum of magnitudes; fp16 on the wire:
         * each hop rounds to 2^-11 of its chunk's largest partial sum (< 16 N) */
        tol = fp16 ? (n + 1) * ldexp(1.0, -11) * 16.0 * n : (n + 1) * ldexp(1.0, -24) * abs_sum;
        tol *= 1.0001;
        if (!(fabs((double)out[i] - want) <= tol) && bad++ == 0)
            h_msg("reduce-scatter %s of %zu per rank: element %zu is %.9g, want %.9g +- %.3g",
                  op == RING_AVG ? "avg" : "sum", count, k, out[i], want, tol);
        bad += in[k] != gen_float(slot, rank, k); /* the input is left alone */
    }
    h_put(V_BAD + slot, bad);
    free(in), free(out);
    return 0;
}

static int check_barrier(ring_comm_t *comm)
{
    int rank = ring_comm_rank(comm);
    ring_status_t st;

    usleep((useconds_t)rank * 60000); /* rank r enters 60 r ms late */
    h_put(V_ENTER, now_us());
    st = ring_barrier(comm);
    h_put(V_LEAVE, now_us());
    return st == RING_OK ? 0 : h_fail(st, "ring_barrier");
}

/* Every collective, started together, then waited in order. */
static int check_mixed_async(ring_comm_t *comm, int slot)
{
    int rank = ring_comm_rank(comm), n = ring_comm_size(comm);
    size_t bytes = 5003, count = 3001;
    unsigned char *b = malloc(bytes), *g = malloc(bytes * (size_t)n), *want = malloc(bytes);
    float *a = malloc(count * sizeof(float)), *rsin = malloc(count * (size_t)n * sizeof(float));
    float *rsout = malloc(count * sizeof(float));
    ring_request_t *req[5];
    uint64_t bad = 0;
    ring_status_t st = RING_OK;

    if (!b || !g || !want || !a || !rsin || !rsout)
        return h_fail(RING_ERR_NO_MEMORY, "malloc");
    gen_bytes(slot, 0, want, bytes);
    memcpy(b, rank == 0 ? want : b, rank == 0 ? bytes : 0);
    for (size_t i = 0; i < count; i++)
        a[i] = (float)(rank + 1);
    for (size_t i = 0; i < count * (size_t)n; i++)
        rsin[i] = (float)i;
    gen_bytes(slot + 1, rank, g + (size_t)rank * bytes, bytes);
    /* exact: the sums below are checked for equality, whatever the codec */
    st = ring_allreduce_start_flags(comm, a, a, count, RING_FLOAT32, RING_SUM, 1, RING_CALL_EXACT,
                                    &req[0]);
    if (st == RING_OK)
        st = ring_broadcast_start(comm, b, bytes, 0, 2, &req[1]);
    if (st == RING_OK)
        st = ring_allgather_start(comm, g + (size_t)rank * bytes, g, bytes, 3, &req[2]);
    if (st == RING_OK)
        st = ring_reduce_scatter_start(comm, rsin, rsout, count, RING_FLOAT32, RING_SUM, 4,
                                       RING_CALL_EXACT, &req[3]);
    if (st == RING_OK)
        st = ring_barrier_start(comm, &req[4]);
    for (int i = 0; i < 5 && st == RING_OK; i++)
        st = ring_request_wait(req[i]);
    if (st != RING_OK)
        return h_fail(st, "mixed requests");
    for (size_t i = 0; i < count; i++) {
        bad += a[i] != (float)(n * (n + 1) / 2);
        bad += rsout[i] != (float)n * (float)((size_t)rank * count + i);
    }
    bad += memcmp(b, want, bytes) != 0;
    for (int r = 0; r < n; r++) {
        gen_bytes(slot + 1, r, want, bytes);
        bad += memcmp(g + (size_t)r * bytes, want, bytes) != 0;
    }
    h_put(V_BAD + slot, bad);
    free(b), free(g), free(want), free(a), free(rsin), free(rsout);
    return 0;
}

static int rank_main(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const coll_case_t *c = arg;
    ring_comm_t *comm;
    ring_status_t st = ring_comm_open(cfg, &comm);
    size_t sizes[H_MAX_RANKS];
    int rc = 0, slot = 0;

    if (st != RING_OK)
        return h_fail(st, "ring_comm_open");
    /* slots 0..6: a broadcast from every root (up to 7 ranks) */
    for (int root = 0; root < n && rc == 0; root++)
        rc = check_broadcast(comm, slot++, root, c->bcast_bytes + (size_t)root);
    slot = 7;
    if (rc == 0) /* empty and one-byte broadcasts */
        rc = check_broadcast(comm, slot++, n - 1, 0);
    if (rc == 0)
        rc = check_broadcast(comm, slot++, 0, 1);
    for (int r = 0; r < n; r++)
        sizes[r] = c->gather_bytes;
    if (rc == 0)
        rc = check_allgather(comm, slot++, sizes, 0);
    if (rc == 0)
        rc = check_allgather(comm, slot++, sizes, 1);
    for (int r = 0; r < n; r++) /* different sizes, one rank with none */
        sizes[r] = r == 1 ? 0 : c->gather_bytes / (size_t)(r + 1) + (size_t)r;
    if (rc == 0)
        rc = check_allgather(comm, slot++, sizes, 0);
    if (rc == 0)
        rc = check_reduce_scatter(comm, slot++, c->rs_count, RING_SUM, c->codec_fp16);
    if (rc == 0)
        rc = check_reduce_scatter(comm, slot++, c->rs_count / 3 + 1, RING_AVG, c->codec_fp16);
    if (rc == 0)
        rc = check_reduce_scatter(comm, slot++, 0, RING_SUM, c->codec_fp16);
    if (rc == 0)
        rc = check_mixed_async(comm, slot++); /* slots 16, 17 */
    if (rc == 0)
        rc = check_barrier(comm);
    ring_comm_close(comm);
    return rc;
}

/* ---- the parent ----------------------------------------------------------------- */

#define NSLOTS 17

static void run_case(const char *label, int n, const coll_case_t *c, const h_setting_t *settings)
{
    h_run_t *run = calloc(1, sizeof(*run));
    h_spec_t spec = {.n = n, .settings = settings, .fn = rank_main, .arg = (void *)c,
                     .child_timeout = 40, .timeout = "10s"};
    int exits = 1, bad = 0, hashes = 1;
    uint64_t last_enter = 0, first_leave = UINT64_MAX;

    if (run == NULL || h_run(&spec, run) != 0) {
        ok(0, "%s: the ring ran (%s)", label, run != NULL ? run->error : "out of memory");
        free(run);
        return;
    }
    for (int r = 0; r < n; r++) {
        exits &= run->r[r].exited && run->r[r].code == 0;
        for (int s = 0; s < NSLOTS; s++)
            bad += h_val(&run->r[r], V_BAD + s, 0) != 0;
        /* broadcast and allgather results are the same bytes everywhere */
        for (int s = 0; s < 12; s++)
            hashes &= h_val(&run->r[r], V_HASH + s, 0) == h_val(&run->r[0], V_HASH + s, 0);
        if (h_val(&run->r[r], V_ENTER, 0) > last_enter)
            last_enter = h_val(&run->r[r], V_ENTER, 0);
        if (h_val(&run->r[r], V_LEAVE, UINT64_MAX) < first_leave)
            first_leave = h_val(&run->r[r], V_LEAVE, UINT64_MAX);
    }
    if (!ok(exits, "%s: every rank ran every collective and exited 0", label))
        h_diag(run);
    if (!ok(exits && bad == 0, "%s: broadcast from every root, allgather(v) incl. in place and "
            "empty blocks, reduce-scatter sum/avg, mixed requests in flight: all results right",
            label)) {
        h_diag(run);
        for (int r = 0; r < n; r++)
            for (int s = 0; s < NSLOTS; s++)
                if (h_val(&run->r[r], V_BAD + s, 0) != 0)
                    diag("rank %d check %d: %llu wrong", r, s,
                         (unsigned long long)h_val(&run->r[r], V_BAD + s, 0));
    }
    ok(exits && hashes, "%s: broadcast and allgather results are bitwise the same on every rank",
       label);
    ok(exits && last_enter <= first_leave, "%s: no rank left the barrier before the last one "
       "entered it (last entry %llu us, first exit %llu us)", label,
       (unsigned long long)last_enter, (unsigned long long)first_leave);
    free(run);
}

/* ---- failures ----------------------------------------------------------------- */

typedef enum fail_kind { F_OTHER_COLL, F_OTHER_ROOT, F_OTHER_SIZES, F_KILLED, F_STOPPED,
                            F_STOPPED_ALLREDUCE } fail_kind_t;

static int fail_main(int rank, int n, const ring_config_t *cfg, void *arg)
{
    fail_kind_t kind = *(const fail_kind_t *)arg;
    ring_comm_t *comm;
    ring_status_t st = ring_comm_open(cfg, &comm);
    static unsigned char buf[1 << 20], out[4 << 20];
    size_t sizes[H_MAX_RANKS];

    if (st != RING_OK)
        return h_fail(st, "ring_comm_open");
    for (int r = 0; r < n; r++)
        sizes[r] = 1000 + (kind == F_OTHER_SIZES && rank == 2 && r == 0 ? 1 : 0);
    switch (kind) {
    case F_OTHER_COLL:
        st = rank == 1 ? ring_broadcast(comm, buf, 4000, 0)
                       : ring_allreduce(comm, buf, buf, 1000, RING_FLOAT32, RING_SUM);
        break;
    case F_OTHER_ROOT:
        /* a root only sends, so it may finish before anyone notices: the barrier
         * after it is where every peer must hear of the mismatch */
        st = ring_broadcast(comm, buf, 4000, rank == 2 ? 1 : 0);
        if (st == RING_OK)
            st = ring_barrier(comm);
        break;
    case F_OTHER_SIZES: {
        ring_request_t *req;
        st = ring_allgatherv_start(comm, buf, out, sizes, 0, &req);
        if (st == RING_OK)
            st = ring_request_wait(req);
        break;
    }
    case F_KILLED:
    case F_STOPPED:
        h_ready();
        for (int i = 0; i < 100000 && st == RING_OK; i++)
            st = ring_broadcast(comm, buf, sizeof(buf), i % n);
        break;
    case F_STOPPED_ALLREDUCE:
        h_ready();
        for (int i = 0; i < 100000 && st == RING_OK; i++)
            st = ring_allreduce(comm, buf, buf, 1000, RING_FLOAT32, RING_SUM);
        break;
    }
    h_put(V_STATUS, (uint64_t)st);
    if (st != RING_OK)
        h_fail(st, "collective");
    ring_comm_close(comm);
    return st == RING_OK ? 0 : 1;
}

static void run_failure(const char *label, int n, fail_kind_t kind, ring_status_t want,
                        const char *phrase, const h_setting_t *settings)
{
    h_run_t *run = calloc(1, sizeof(*run));
    h_action_t signal_1 = {.after_ready = 0, .at = 0.3, .target = 1,
                           .sig = kind == F_KILLED ? SIGKILL : SIGSTOP};
    int stopped = kind == F_STOPPED || kind == F_STOPPED_ALLREDUCE;
    int signalled = kind == F_KILLED || stopped;
    h_spec_t spec = {.n = n, .settings = settings, .fn = fail_main, .arg = &kind,
                     .child_timeout = 20, .timeout = "3s",
                     .actions = signalled ? &signal_1 : NULL, .nactions = signalled ? 1 : 0};
    int all = 1, named = 1, named_any = 0;

    if (run == NULL || h_run(&spec, run) != 0) {
        ok(0, "%s: the ring ran", label);
        free(run);
        return;
    }
    for (int r = 0; r < n; r++) {
        if (signalled && r == 1)
            continue;
        all &= run->r[r].exited && run->r[r].code == 1 && run->r[r].t_end < 12 &&
               (h_val(&run->r[r], V_STATUS, 0) == (uint64_t)want ||
                ((kind == F_OTHER_ROOT || stopped) &&
                 h_val(&run->r[r], V_STATUS, 0) == RING_ERR_REMOTE));
        named &= strstr(run->r[r].msg, phrase) != NULL;
        named_any |= strstr(run->r[r].msg, phrase) != NULL;
    }
    /* with another root, the peers that finished hear of it as the ring's failure.
     * A stopped peer is named by everyone: a peer further on that times out first asks
     * its live neighbour (fail.c's probe) before blaming it */
    if (kind == F_OTHER_ROOT)
        named = named_any;
    if (!ok(all, "%s: every (surviving) rank fails with %s, no hang", label,
            ring_status_str(want)))
        h_diag(run);
    if (!ok(all && named, "%s: the message says '%s'", label, phrase))
        h_diag(run);
    else
        diag("%s: rank 0: %s", label, run->r[0].msg);
    free(run);
}

int main(void)
{
    static const h_setting_t small_chunks[] = {{-1, "chunk-size", "4K"}, {0, NULL, NULL}};
    static const h_setting_t two_channels[] = {{-1, "channels", "2"}, {-1, "chunk-size", "16K"},
                                               {0, NULL, NULL}};
    static const h_setting_t fp16[] = {{-1, "codec", "fp16"}, {0, NULL, NULL}};
    static const h_setting_t thread[] = {{-1, "progress-thread", "on"}, {0, NULL, NULL}};
    static const h_setting_t ring_algo[] = {{-1, "algo", "ring"}, {0, NULL, NULL}};
    static const h_setting_t rank0_first[] = {{0, "timeout", "1s"}, {0, NULL, NULL}};
    const int ns[] = {1, 2, 3, 4, 7};
    coll_case_t c = {.bcast_bytes = 100003, .gather_bytes = 20011, .rs_count = 10007};
    coll_case_t c16 = c;
    char label[96];
    double t0 = h_now();

    setvbuf(stdout, NULL, _IOLBF, 0);
    c16.codec_fp16 = 1;
    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
        snprintf(label, sizeof(label), "N=%d", ns[k]);
        run_case(label, ns[k], &c, NULL);
    }
    run_case("N=3 chunk-size 4K", 3, &c, small_chunks);
    run_case("N=4 two channels", 4, &c, two_channels);
    run_case("N=3 codec fp16 (broadcast, allgather exact)", 3, &c16, fp16);
    run_case("N=4 progress thread", 4, &c, thread);
    run_failure("N=3 rank 1 broadcasts while the others allreduce", 3, F_OTHER_COLL,
                RING_ERR_MISMATCH, "broadcast #", ring_algo);
    /* with recursive doubling (--algo auto) the others' notice frames tell it */
    run_failure("N=3 rank 1 broadcasts while the others allreduce (--algo auto)", 3,
                F_OTHER_COLL, RING_ERR_MISMATCH, "broadcast #", NULL);
    run_failure("N=3 rank 2 broadcasts from another root", 3, F_OTHER_ROOT, RING_ERR_MISMATCH,
                "broadcast #", NULL);
    /* direct.c's set-up allgathers end ring_comm_open: a peer still finishing the
     * last one keeps the first call's ABORT for that call (comm->fail.abort_deferred) */
    run_failure("N=3 rank 2 gives other allgather sizes", 3, F_OTHER_SIZES, RING_ERR_MISMATCH,
                "bytes in all", NULL);
    run_failure("N=3 SIGKILL rank 1 mid-broadcast", 3, F_KILLED, RING_ERR_REMOTE, "rank 1", NULL);
    run_failure("N=3 SIGKILL rank 1 mid-broadcast, progress thread", 3, F_KILLED, RING_ERR_REMOTE,
                "rank 1", thread);
    /* a stopped peer: the neighbour waiting for it times out, the other hears of it */
    run_failure("N=3 SIGSTOP rank 1 mid-broadcast, progress thread", 3, F_STOPPED,
                RING_ERR_TIMED_OUT, "rank 1", thread);
    run_failure("N=3 SIGSTOP rank 1 mid-broadcast, no thread", 3, F_STOPPED, RING_ERR_TIMED_OUT,
                "rank 1", NULL);
    /* rank 0 waits on rank 2, which waits on the stopped rank 1; rank 0's shorter timeout
     * fires first, and it must ask rank 2 rather than blame it */
    run_failure("N=3 SIGSTOP rank 1 mid-allreduce, rank 0 times out first", 3, F_STOPPED_ALLREDUCE,
                RING_ERR_TIMED_OUT, "rank 1 (", rank0_first);
    /* rank 0 waits on 3, which waits on 2, which waits on the stopped rank 1: rank 0 asks
     * rank 3 first, which is not timed out yet; it says it waits too and asks rank 2 in
     * turn, whose answer (rank 1) travels back down the ring to rank 0 */
    run_failure("N=4 SIGSTOP rank 1 mid-allreduce, rank 0 times out first", 4,
                F_STOPPED_ALLREDUCE, RING_ERR_TIMED_OUT, "rank 1 (", rank0_first);
    diag("t-coll: %.1f s", h_now() - t0);
    done_testing();
}
