/*
 * t-shm.c - rings of real processes over the shared-memory transport
 * (setting transport=shm), through tests/support/harness.c as t-allreduce.c and
 * t-fault.c run them.
 *
 * Checked:
 * - N = 2, 3, 4, 7: allreduces of 1, 1000, 65536 and 1<<20 floats (and
 *   16M floats = 64 MiB at N = 2 and 4) with codec none. Inputs are small
 *   integers, a pure function of (rank, op, index), so every rank computes
 *   the exact sum itself (sums of small integers are exact in fp32): the
 *   result must equal it exactly, and be bitwise identical on every rank
 *   (each reports a hash; the parent compares them).
 * - N = 4 with codec fp16: within the derived bound (see t-codec-ring.c:
 *   |err| <= N (2^-11 + 2^-24) sum|x|) and bitwise identical.
 * - the ring really runs in shared memory: each rank has ringd-shm memfd
 *   segments mapped while it is open, and none after ring_comm_close.
 * - more: 128 connections per neighbour (channels=16 tcp-streams=8), a
 *   rank that starts late (refused connections tried again), pipes of
 *   64 KiB (RING_SHM_BYTES) that every chunk wraps around.
 * - SIGKILL of a rank mid-allreduce: the survivors fail within the 5 s
 *   timeout, naming the killed rank; SIGSTOP of a rank: they fail with
 *   timed out (or naming it) soon after the timeout; a rank that closes its
 *   communicator: the others fail at once saying so (its CLOSE notice went
 *   through the pipe before its end closed); nobody hangs.
 * - one rank on shm, the others on tcp (N = 3 with rank 0 on shm, N = 2
 *   with rank 1): every rank fails, none hangs, and a message says "shm" or
 *   "transport".
 * - nothing leaks: /dev/shm has as many entries after each run as before
 *   (the transport uses memfd, so none should ever appear), and each child
 *   has as many descriptors open after ring_comm_close as before
 *   ring_comm_open, on success and on every failure path.
 */
#include "ring_build.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev_shm.h"
#include "harness.h"
#include "tap.h"

#define MAX_OPS 8
#define V_BAD 0          /* + op: elements off the reference */
#define V_HASH 10        /* + op: hash of the result */
#define V_WORST 20       /* + op: largest err / tolerance (double) */
#define V_FD0 150        /* descriptors before ring_comm_open */
#define V_FD1 151        /* descriptors after ring_comm_close (or the failed open) */
#define V_MAPS_OPEN 152  /* ringd-shm segments mapped while open */
#define V_MAPS_CLOSED 153 /* ... after close */
#define V_ITERS 154      /* K_LOOP: allreduces completed */
#define V_OPENED 155     /* 1 when ring_comm_open succeeded */
#define V_CLOSE_T 156    /* K_CLOSE: h_now() of the close, in the closer */
#define V_FAIL_T 157     /* h_now() when a ring call failed */

#define BIG_COUNT ((size_t)16 << 20) /* 16M floats = 64 MiB */

enum kind {
    K_SIZES, /* one allreduce per count, checked */
    K_LOOP,  /* allreduce `loop_count` floats again and again; h_ready after the first */
    K_CLOSE, /* rank `closer` opens, says ready, sleeps `delay`, closes; the others allreduce */
};

typedef struct scase {
    enum kind kind;
    int fp16;            /* inputs in [-1, 1) checked within the fp16 bound, not exact */
    int nops;
    size_t counts[MAX_OPS];
    size_t loop_count;
    double max_time;
    int late_rank;       /* this rank sleeps `delay` before ring_comm_open (-1: none) */
    int closer;          /* K_CLOSE */
    double delay;
} scase_t;

/* ---- shared by parent and children ---------------------------------------------- */

/* descriptors open in this process (less the one that reads the directory) */
static int count_fds(void)
{
    int n = dir_count("/proc/self/fd", "");

    return n < 0 ? -1 : n - 1;
}

/* ringd-shm memfd segments mapped into this process */
static int count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, "memfd:ringd-shm") != NULL)
            n++;
    fclose(f);
    return n;
}

static inline uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

/* element k of rank's input to op: a small integer (exact sums), or for fp16 a multiple
 * of 2^-10 in [-1, 1) */
static inline float gen(int fp16, int op, int rank, size_t k)
{
    uint32_t h = mix32((uint32_t)k * 0x9e3779b1u ^ (uint32_t)op * 0x85ebca6bu ^
                       (uint32_t)rank * 0xc2b2ae35u);

    if (fp16)
        return ldexpf((float)((int)(h & 2047) - 1024), -10);
    return (float)((int)(h % 17) - 8);
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

/* ---- the child ------------------------------------------------------------------ */

static void verify(const scase_t *c, int i, int rank, int n, const float *res)
{
    size_t count = c->counts[i];
    uint64_t bad = 0;
    double worst = 0;
    size_t first_bad = 0;
    double first_got = 0, first_want = 0;

    for (size_t k = 0; k < count; k++) {
        double sum = 0, abs_sum = 0, tol, err;

        for (int r = 0; r < n; r++) {
            float x = gen(c->fp16, i, r, k);
            sum += x;
            abs_sum += fabs(x);
        }
        /* fp16: each of the N encodes of a partial sum rounds by 2^-11 of it, each fp32
         * add by 2^-24 (t-codec-ring.c derives it); none: exact */
        tol = c->fp16 ? n * (ldexp(1, -11) + ldexp(1, -24)) * abs_sum * 1.0001 + ldexp(1, -30)
                      : 0;
        err = fabs((double)res[k] - sum);
        if (!(err <= tol)) {
            if (bad++ == 0) {
                first_bad = k;
                first_got = res[k];
                first_want = sum;
            }
        }
        if (tol > 0 && err / tol > worst)
            worst = err / tol;
        else if (tol == 0 && err > 0)
            worst = INFINITY;
    }
    h_put(V_BAD + i, bad);
    h_put(V_HASH + i, hash_floats(res, count));
    h_put_double(V_WORST + i, worst);
    if (bad > 0)
        h_msg("rank %d op %d (count %zu): %llu bad elements, first at %zu: got %.9g, want %.9g",
              rank, i, count, (unsigned long long)bad, first_bad, first_got, first_want);
}

static int s_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const scase_t *c = arg;
    ring_comm_t *comm = NULL;
    ring_status_t st;
    int code = 0, fd0 = count_fds();

    h_put(V_FD0, (uint64_t)fd0);
    if (c->late_rank == rank && c->delay > 0)
        usleep((useconds_t)(c->delay * 1e6)); /* the others' connections are refused meanwhile */
    st = ring_comm_open(cfg, &comm);
    if (st != RING_OK) {
        code = h_fail(st, "ring_comm_open");
        h_put(V_FD1, (uint64_t)count_fds());
        h_put(V_MAPS_CLOSED, (uint64_t)count_maps());
        return code;
    }
    h_put(V_OPENED, 1);
    h_put(V_MAPS_OPEN, (uint64_t)count_maps());
    if (c->kind == K_SIZES) {
        for (int i = 0; i < c->nops && code == 0; i++) {
            size_t count = c->counts[i];
            int inplace = count >= ((size_t)1 << 20); /* the big ones: half the memory */
            float *send = malloc(count * sizeof(float));
            float *recv = inplace ? send : malloc(count * sizeof(float));
            char what[96];

            if (send == NULL || recv == NULL) {
                h_msg("rank %d: out of memory for %zu floats", rank, count);
                code = 99;
                free(send);
                if (!inplace)
                    free(recv);
                break;
            }
            for (size_t k = 0; k < count; k++)
                send[k] = gen(c->fp16, i, rank, k);
            if (!inplace)
                for (size_t k = 0; k < count; k++)
                    recv[k] = NAN;
            st = ring_allreduce(comm, send, recv, count, RING_FLOAT32, RING_SUM);
            if (st != RING_OK) {
                snprintf(what, sizeof(what), "ring_allreduce #%d (count %zu)", i, count);
                code = h_fail(st, what);
            } else {
                verify(c, i, rank, n, recv);
            }
            free(send);
            if (!inplace)
                free(recv);
        }
    } else if (c->kind == K_CLOSE) {
        float *buf = calloc(c->loop_count, sizeof(float));

        if (buf == NULL) {
            h_msg("out of memory");
            ring_comm_close(comm);
            return 99;
        }
        if (rank == c->closer) {
            h_ready();
            usleep((useconds_t)(c->delay * 1e6));
            h_put_double(V_CLOSE_T, h_now());
        } else {
            st = ring_allreduce(comm, buf, buf, c->loop_count, RING_FLOAT32, RING_SUM);
            h_put_double(V_FAIL_T, h_now());
            if (st != RING_OK)
                code = h_fail(st, "ring_allreduce");
            else
                h_msg("the allreduce succeeded although rank %d closed its communicator",
                      c->closer);
        }
        free(buf);
    } else {
        float *buf = malloc(c->loop_count * sizeof(float));
        int i;

        if (buf == NULL) {
            h_msg("out of memory");
            ring_comm_close(comm);
            return 99;
        }
        for (size_t k = 0; k < c->loop_count; k++)
            buf[k] = 1.0f;
        st = h_allreduce_loop(comm, buf, c->loop_count, 100000, c->max_time, 0, &i);
        if (st != RING_OK)
            code = h_fail(st, "ring_allreduce");
        h_put(V_ITERS, (uint64_t)i);
        if (code == 0)
            h_msg("finished %d allreduces without an error", i);
        free(buf);
    }
    ring_comm_close(comm);
    h_put(V_FD1, (uint64_t)count_fds());
    h_put(V_MAPS_CLOSED, (uint64_t)count_maps());
    return code;
}

/* ---- the parent ----------------------------------------------------------------- */

static const h_setting_t shm_none[] = {{-1, "transport", "shm"}, {-1, "codec", "none"},
                                       {0, NULL, NULL}};
static const h_setting_t shm_fp16[] = {{-1, "transport", "shm"}, {-1, "codec", "fp16"},
                                       {0, NULL, NULL}};

static const h_run_t *run_it(int n, const scase_t *c, const h_setting_t *settings,
                             const char *timeout, const char *connect_timeout,
                             const h_action_t *actions, int nactions, double budget)
{
    h_ring_spec_t rs = {.n = n, .fn = s_child, .arg = (void *)c, .settings = settings,
                        .timeout = timeout, .connect_timeout = connect_timeout,
                        .actions = actions, .nactions = nactions, .budget = budget,
                        .grace = 3};

    return h_run_ring(&rs);
}

/* The leak checks of one run: /dev/shm entries (parent), descriptors and segments (each
 * rank that ended by itself). */
static void check_leaks(const h_run_t *run, const char *label, int shm_before, unsigned skip)
{
    int shm_after = dev_shm_count_settled("", shm_before), fds_ok = 1, maps_ok = 1;

    /* at most as many: a ring of another test (make check -j) may remove its
     * direct segment meanwhile (a count of 1 before and 0 after was seen) */
    if (!ok(shm_after >= 0 && shm_after <= shm_before, "%s: /dev/shm has no more entries "
            "after the run than before (%d before, %d after)", label, shm_before, shm_after))
        diag("    the transport should use memfd only");
    for (int r = 0; r < run->n; r++) {
        const h_result_t *res = &run->r[r];

        if (skip & (1u << r))
            continue;
        if (!res->has_val[V_FD0] || !res->has_val[V_FD1] ||
            h_val(res, V_FD0, 0) != h_val(res, V_FD1, 1)) {
            diag("    rank %d: %llu descriptors before ring_comm_open, %llu after close%s", r,
                 (unsigned long long)h_val(res, V_FD0, 0), (unsigned long long)h_val(res, V_FD1, 0),
                 h_val(res, V_OPENED, 0) ? "" : " (the open failed)");
            fds_ok = 0;
        }
        if (h_val(res, V_MAPS_CLOSED, 1) != 0) {
            diag("    rank %d: %llu ringd-shm segments still mapped after close", r,
                 (unsigned long long)h_val(res, V_MAPS_CLOSED, 1));
            maps_ok = 0;
        }
    }
    ok(fds_ok, "%s: every rank has as many descriptors open after ring_comm_close as before "
       "ring_comm_open", label);
    ok(maps_ok, "%s: no rank keeps a shared-memory segment mapped after close", label);
}

static void ring_sizes(int n, int fp16, const size_t *counts, int nops, double budget,
                       const h_setting_t *settings, const char *what, int late_rank)
{
    static scase_t c;
    const h_run_t *run;
    char label[96];
    int all_exit0 = 1, mapped = 1, shm_before = dev_shm_count("");

    memset(&c, 0, sizeof(c));
    c.kind = K_SIZES;
    c.late_rank = -1;
    c.fp16 = fp16;
    c.nops = nops;
    for (int i = 0; i < nops; i++)
        c.counts[i] = counts[i];
    if (late_rank >= 0) {
        c.late_rank = late_rank;
        c.delay = 0.7;
    }
    snprintf(label, sizeof(label), "shm N=%d codec %s%s", n, fp16 ? "fp16" : "none",
             what != NULL ? what : "");
    if (settings == NULL)
        settings = fp16 ? shm_fp16 : shm_none;
    run = run_it(n, &c, settings, "10s", "10s", NULL, 0, budget);
    for (int r = 0; r < n; r++) {
        all_exit0 &= run->r[r].exited && run->r[r].code == 0;
        mapped &= h_val(&run->r[r], V_MAPS_OPEN, 0) >= 1;
    }
    if (!ok(all_exit0, "%s: all %d ranks exit 0 (%.2f s)", label, n, run->t_done))
        h_diag(run);
    if (!ok(mapped, "%s: every rank had ringd-shm segments mapped while open (the ring ran in "
            "shared memory, not tcp)", label))
        for (int r = 0; r < n; r++)
            diag("    rank %d: %llu segments", r,
                 (unsigned long long)h_val(&run->r[r], V_MAPS_OPEN, 0));
    for (int i = 0; i < nops; i++) {
        uint64_t bad = 0, h0 = 0;
        int missing = 0, same = 1;
        double worst = 0;

        for (int r = 0; r < n; r++) {
            const h_result_t *res = &run->r[r];

            if (!res->has_val[V_BAD + i] || !res->has_val[V_HASH + i]) {
                missing++;
                continue;
            }
            bad += h_val(res, V_BAD + i, 0);
            if (h_val_double(res, V_WORST + i, 0) > worst)
                worst = h_val_double(res, V_WORST + i, 0);
            if (r == 0)
                h0 = h_val(res, V_HASH + i, 0);
            else
                same &= h_val(res, V_HASH + i, 0) == h0;
        }
        if (!ok(missing == 0 && bad == 0, "%s: count %zu: %s on every rank%s", label,
                counts[i], fp16 ? "within the fp16 bound" : "exact",
                fp16 ? "" : " (small integers)")) {
            diag("    %d rank(s) reported nothing, %llu bad elements in all, max err/tol %.3g",
                 missing, (unsigned long long)bad, worst);
            for (int r = 0; r < n; r++)
                if (run->r[r].msg[0])
                    diag("    rank %d: %s", r, run->r[r].msg);
        }
        if (fp16)
            diag("%s: count %zu: max err / bound %.3g", label, counts[i], worst);
        if (!ok(missing == 0 && same, "%s: count %zu: bitwise identical on all %d ranks", label,
                counts[i], n))
            for (int r = 0; r < n; r++)
                diag("    rank %d: hash %016llx", r,
                     (unsigned long long)h_val(&run->r[r], V_HASH + i, 0));
    }
    check_leaks(run, label, shm_before, 0);
}

static void kill_mid_allreduce(int n, int victim)
{
    static const scase_t c = {.kind = K_LOOP, .loop_count = (size_t)1 << 20, .max_time = 20,
                              .late_rank = -1};
    h_action_t act[1] = {{victim, 1.0, victim, SIGKILL}};
    char label[96], want[32];
    int shm_before = dev_shm_count("");
    const h_run_t *run;
    double t_kill;

    snprintf(label, sizeof(label), "shm: SIGKILL rank %d of %d mid-allreduce (timeout 5 s)",
             victim, n);
    snprintf(want, sizeof(want), "rank %d", victim);
    run = run_it(n, &c, shm_none, "5s", "10s", act, 1, 25);
    t_kill = run->t_signal[victim];
    if (!ok(t_kill > 0 && run->r[victim].signo == SIGKILL && h_val(&run->r[victim], V_ITERS, 0) == 0,
            "%s: rank %d was killed at %.2f s, in its loop", label, victim, t_kill))
        h_diag(run);
    for (int r = 0; r < n; r++) {
        int got = h_outcome(&run->r[r]);
        double after = run->r[r].t_end - t_kill;
        char d[96];

        if (r == victim)
            continue;
        if (!ok(got > 0 && got < RING_STATUS_COUNT && h_val(&run->r[r], V_ITERS, 0) > 0,
                "%s: rank %d fails after %llu allreduces (%s)", label, r,
                (unsigned long long)h_val(&run->r[r], V_ITERS, 0),
                h_describe(&run->r[r], d, sizeof(d))))
            h_diag(run);
        ok(t_kill > 0 && after < 5.0, "%s: rank %d fails %.2f s after the kill, within the "
           "timeout, no hang", label, r, after);
        like(run->r[r].msg, want, "%s: rank %d's message names %s", label, r, want);
    }
    diag("%s: rank %d says: %s", label, victim == 0 ? 1 : 0, run->r[victim == 0 ? 1 : 0].msg);
    check_leaks(run, label, shm_before, 1u << victim);
}

static void stop_mid_allreduce(int n, int victim)
{
    static const scase_t c = {.kind = K_LOOP, .loop_count = (size_t)1 << 20, .max_time = 20,
                              .late_rank = -1};
    h_action_t act[1] = {{victim, 0.5, victim, SIGSTOP}};
    char label[96], want[32];
    int shm_before = dev_shm_count("");
    const h_run_t *run;
    double t_stop;

    snprintf(label, sizeof(label), "shm: SIGSTOP rank %d of %d mid-allreduce (timeout 5 s)",
             victim, n);
    snprintf(want, sizeof(want), "rank %d", victim);
    run = run_it(n, &c, shm_none, "5s", "10s", act, 1, 25);
    t_stop = run->t_signal[victim];
    ok(t_stop > 0, "%s: rank %d was stopped at %.2f s", label, victim, t_stop);
    for (int r = 0; r < n; r++) {
        int got = h_outcome(&run->r[r]);
        double after = run->r[r].t_end - t_stop;
        char d[96];

        if (r == victim)
            continue;
        if (!ok(got == RING_ERR_TIMED_OUT ||
                    (got > 0 && got < RING_STATUS_COUNT && strstr(run->r[r].msg, want) != NULL),
                "%s: rank %d fails with timed out or naming %s (%s)", label, r, want,
                h_describe(&run->r[r], d, sizeof(d))))
            h_diag(run);
        ok(t_stop > 0 && after < 5.0 + 3.0, "%s: rank %d fails %.2f s after the stop (timeout "
           "5 s + a few), no hang", label, r, after);
        if (!ok(strstr(run->r[r].msg, "timed out") != NULL || strstr(run->r[r].msg, want) != NULL,
                "%s: rank %d's message says timed out or names %s", label, r, want))
            diag("    '%s'", run->r[r].msg);
    }
    ok(run->r[victim].stopped_killed && run->r[victim].signo == SIGKILL,
       "%s: the stopped rank was killed afterwards, nothing left behind", label);
    check_leaks(run, label, shm_before, 1u << victim);
}

static void peer_closes(int n, int closer)
{
    scase_t c = {.kind = K_CLOSE, .loop_count = (size_t)1 << 20, .delay = 0.5, .closer = closer,
                 .late_rank = -1};
    char label[96], want[32];
    int shm_before = dev_shm_count("");
    const h_run_t *run = run_it(n, &c, shm_none, "10s", "10s", NULL, 0, 15);
    double t_close = h_val_double(&run->r[closer], V_CLOSE_T, -1);

    snprintf(label, sizeof(label), "shm: rank %d of %d closes its communicator", closer, n);
    snprintf(want, sizeof(want), "rank %d", closer);
    is_int(h_outcome(&run->r[closer]), 0, "%s: the closing rank exits 0", label);
    for (int r = 0; r < n; r++) {
        double after = h_val_double(&run->r[r], V_FAIL_T, 1e9) - t_close;
        char d[96];

        if (r == closer)
            continue;
        if (!ok(h_outcome(&run->r[r]) == RING_ERR_REMOTE, "%s: rank %d fails with remote peer "
                "failure (%s)", label, r, h_describe(&run->r[r], d, sizeof(d))))
            h_diag(run);
        ok(t_close > 0 && after < 2.0, "%s: rank %d fails %.2f s after the close, no hang", label,
           r, after);
        if (!like(run->r[r].msg, "closed its communicator", "%s: rank %d's message says rank %d "
                  "closed its communicator (its CLOSE notice went through the pipe before it "
                  "went)", label, r, closer))
            h_diag(run);
        like(run->r[r].msg, want, "%s: rank %d's message names %s", label, r, want);
    }
    check_leaks(run, label, shm_before, 0);
}

static void transport_mismatch(int n, int shm_rank)
{
    static const scase_t c = {.kind = K_SIZES, .nops = 1, .counts = {1000}, .late_rank = -1};
    h_setting_t mixed[] = {{-1, "transport", "tcp"}, {shm_rank, "transport", "shm"},
                           {-1, "codec", "none"}, {0, NULL, NULL}};
    char label[96];
    int shm_before = dev_shm_count(""), said = 0;
    const h_run_t *run;

    snprintf(label, sizeof(label), "rank %d of %d on shm, the others on tcp", shm_rank, n);
    run = run_it(n, &c, mixed, "5s", "5s", NULL, 0, 20);
    for (int r = 0; r < n; r++) {
        int got = h_outcome(&run->r[r]);
        char d[96];

        if (!ok(got > 0 && got < RING_STATUS_COUNT, "%s: rank %d fails (%s)", label, r,
                h_describe(&run->r[r], d, sizeof(d))))
            h_diag(run);
        ok(run->r[r].t_end < 8.0, "%s: rank %d fails in %.2f s, no hang (connect-timeout 5 s)",
           label, r, run->r[r].t_end);
        said |= strstr(run->r[r].msg, "shm") != NULL || strstr(run->r[r].msg, "transport") != NULL;
    }
    if (!ok(said, "%s: a rank's message mentions \"shm\" or \"transport\"", label))
        h_diag(run);
    else
        for (int r = 0; r < n; r++)
            diag("%s: rank %d at %.2f s: %s", label, r, run->r[r].t_end, run->r[r].msg);
    check_leaks(run, label, shm_before, 0);
}

int main(void)
{
    static const size_t small[] = {1, 1000, 65536, (size_t)1 << 20};
    static const size_t with_big[] = {1, 1000, 65536, (size_t)1 << 20, BIG_COUNT};
    static const size_t fp16_counts[] = {1000, 65536, (size_t)1 << 20};
    double t_start = h_now();

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    if (dev_shm_count("") < 0)
        diag("no /dev/shm here: its entries count as -1 before and after");

    ring_sizes(2, 0, with_big, 5, 40, NULL, NULL, -1);
    ring_sizes(3, 0, small, 4, 30, NULL, NULL, -1);
    ring_sizes(4, 0, with_big, 5, 40, NULL, NULL, -1);
    ring_sizes(7, 0, small, 4, 30, NULL, NULL, -1);
    ring_sizes(4, 1, fp16_counts, 3, 30, NULL, NULL, -1);
    {
        /* 128 connections to each neighbour, all set up at once */
        static const h_setting_t many[] = {{-1, "transport", "shm"}, {-1, "codec", "none"},
                                           {-1, "channels", "16"}, {-1, "tcp-streams", "8"},
                                           {0, NULL, NULL}};
        static const size_t counts[] = {1000, 65536};
        static const size_t one[] = {65536};
        static const size_t wrap[] = {1000, (size_t)1 << 20};

        ring_sizes(2, 0, one, 1, 30, many, " channels=16 tcp-streams=8", -1);
        /* rank 1 starts 0.7 s late: the connections to it are refused and tried again */
        ring_sizes(3, 0, counts, 2, 30, NULL, " (rank 1 starts 0.7 s late)", 1);
        /* pipes of 64 KiB: every chunk wraps around them, producers wait for room */
        setenv("RING_SHM_BYTES", "64K", 1);
        ring_sizes(3, 0, wrap, 2, 30, NULL, " RING_SHM_BYTES=64K", -1);
        unsetenv("RING_SHM_BYTES");
    }
    kill_mid_allreduce(4, 2);
    kill_mid_allreduce(2, 1);
    stop_mid_allreduce(3, 1);
    peer_closes(2, 1);
    peer_closes(3, 0);
    transport_mismatch(3, 0);
    transport_mismatch(2, 1);
    diag("t-shm: %.1f s", h_now() - t_start);
    return done_testing();
}
