/*
 * t-rd.c - recursive doubling (--algo rd|auto, src/core/rd.c) across real
 * processes on 127.0.0.1: N = 2, 3, 4, 5, 7, 8 (powers of two and the fold
 * of the others), over shm and tcp pairs.
 *
 * - Integer-valued data sums exactly in any order: every rank's result must
 *   equal the exact sum bit for bit, with --algo rd and with --algo ring, so
 *   the two algorithms agree bitwise.
 * - Random data: every rank must hold the same bits (the hash of its result),
 *   close to a double-precision reference.
 * - Selection: --algo auto takes fp32 calls without a codec up to
 *   --rd-max-bytes (N = 2, 3 and 4 over tcp), and leaves larger ones, fp16 codec calls and fp16
 *   buffers to the ring (counted by ring_comm_get_stats' rd_allreduces).
 * - Failures: a peer killed or stopped mid-loop is named by every other, no
 *   hang; peers that disagree on --algo, --rd-max-bytes or --rd-fit fail at
 *   open, saying so.
 * - --rd-fit: every rank runs with rank 0's limit; the calls on both sides of
 *   it run by one algorithm everywhere, exact.
 */
#include "ring_build.h"

#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sum_check.h"
#include "tap.h"

enum { V_STATUS, V_WRONG, V_HASH, V_RD, V_ALL, V_ERR, V_SEL, V_LIMIT };

typedef enum rd_mode { M_CORRECT, M_SELECT, M_LOOP, M_EXACT_ONE, M_FIT } rd_mode_t;

static const size_t counts[] = {1, 7, 1024, 4097, 16384};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))
#define MAXCOUNT 16384

static int correct_main(ring_comm_t *comm, int rank, int n)
{
    static float in[MAXCOUNT], out[MAXCOUNT];
    sum_check_t res;
    ring_status_t st = sum_check_run(comm, rank, n, counts, NCOUNTS, in, out, &res);

    h_put(V_WRONG, res.wrong);
    h_put(V_HASH, res.hash);
    h_put_double(V_ERR, res.max_err);
    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

/* --algo auto, --rd-max-bytes 4K, --codec fp16: which calls rd takes. Bit k of
 * V_SEL is set when call k ran as recursive doubling: 4096 exact bytes and the tiny
 * exact average do; 4100 bytes, codec calls and fp16 buffers stay on the ring. */
static int select_main(ring_comm_t *comm)
{
    static const sum_check_call_t calls[] = {SEL_EXACT_4096, SEL_EXACT_4100, SEL_CODEC, SEL_FP16,
                                             SEL_TINY_EXACT_AVG};
    uint64_t sel = 0;
    ring_status_t st = sum_check_select(comm, calls, sizeof(calls) / sizeof(calls[0]),
                                        offsetof(ring_comm_stats_t, rd_allreduces), &sel);

    h_put(V_SEL, sel);
    return st == RING_OK ? 0 : h_fail(st, "select");
}

/* --rd-max-bytes 4K, --rd-fit: calls just above 4K x 1, 2, 4, 8 and 16, which
 * run by rd on every peer or by the ring on every peer, whatever rank 0's
 * times chose (else they would fail as a mismatch); V_RD counts them */
static const size_t fit_counts[] = {1025, 2049, 4097, 8193, 16385};
#define NFIT (sizeof(fit_counts) / sizeof(fit_counts[0]))

static int fit_main(ring_comm_t *comm, int rank, int n)
{
    static float in[16385], out[16385];
    sum_check_t res;
    ring_status_t st = sum_check_run(comm, rank, n, fit_counts, NFIT, in, out, &res);

    h_put(V_WRONG, res.wrong);
    h_put(V_HASH, res.hash);
    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

/* allreduces of 1024 floats for up to 8 s, ready after the 21st; the harness kills or
 * stops a peer */
static int loop_main(ring_comm_t *comm)
{
    static float buf[1024];
    ring_status_t st = h_allreduce_loop(comm, buf, 1024, 1000000, 8, 20, NULL);

    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

/* 10 allreduces; in the 6th, rank 1 alone passes RING_CALL_EXACT: with --codec
 * fp16 it runs recursive doubling, the others the ring, with the same header */
static int exact_one_main(ring_comm_t *comm, int rank)
{
    static float buf[1024];
    ring_status_t st = RING_OK;

    for (int i = 0; i < 10 && st == RING_OK; i++) {
        ring_request_t *req;

        st = ring_allreduce_start_flags(comm, buf, buf, 1024, RING_FLOAT32, RING_SUM, 0,
                                        i == 5 && rank == 1 ? RING_CALL_EXACT : 0, &req);
        if (st == RING_OK)
            st = ring_request_wait(req);
    }
    h_put(V_STATUS, (uint64_t)st);
    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

static int rank_main(int rank, int n, const ring_config_t *cfg, void *arg)
{
    rd_mode_t mode = *(const rd_mode_t *)arg;
    ring_comm_t *comm;
    ring_comm_stats_t s;
    ring_status_t st = ring_comm_open(cfg, &comm);
    int rc;

    if (st != RING_OK)
        return h_fail(st, "ring_comm_open");
    rc = mode == M_CORRECT  ? correct_main(comm, rank, n)
         : mode == M_SELECT ? select_main(comm)
         : mode == M_LOOP   ? loop_main(comm)
         : mode == M_FIT    ? fit_main(comm, rank, n)
                            : exact_one_main(comm, rank);
    if (ring_comm_get_stats(comm, &s) == RING_OK) {
        h_put(V_RD, s.rd_allreduces);
        h_put(V_ALL, s.allreduces);
        h_put(V_LIMIT, s.rd_max_bytes);
    }
    ring_comm_close(comm);
    return rc;
}

/* the ring of a check: NULL (a diag line says why) when it could not be run */
static h_run_t *run_ring(int n, rd_mode_t *mode, const h_setting_t *settings,
                         const h_action_t *action, const char *timeout)
{
    h_ring_spec_t rs = {.n = n, .settings = settings, .fn = rank_main, .arg = mode,
                        .budget = 25, .timeout = timeout, .actions = action,
                        .nactions = action != NULL ? 1 : 0, .on_error = H_DIAG};

    return h_run_ring(&rs);
}

static void check_correct(int n, const char *algo, const char *transport)
{
    rd_mode_t mode = M_CORRECT;
    h_setting_t settings[] = {{-1, "algo", algo}, {-1, "transport", transport}, {0, NULL, NULL}};
    h_run_t *run = run_ring(n, &mode, settings, NULL, NULL);
    int all_ok = run != NULL, same = run != NULL, close = run != NULL, counted = run != NULL;
    uint64_t want_rd = strcmp(algo, "rd") == 0 ? NCOUNTS * 4 : 0;

    for (int r = 0; run != NULL && r < n; r++) {
        const h_result_t *res = &run->r[r];

        all_ok &= res->exited && res->code == 0 && h_val(res, V_WRONG, 1) == 0;
        same &= h_val(res, V_HASH, 0) == h_val(&run->r[0], V_HASH, 1);
        close &= h_val_double(res, V_ERR, 1) < 1e-6;
        counted &= h_val(res, V_RD, 99) == want_rd && h_val(res, V_ALL, 0) == NCOUNTS * 4;
    }
    if (!ok(all_ok, "N=%d --algo %s over %s: integer sums exact, bit for bit, on every rank", n,
            algo, transport) && run != NULL)
        h_diag(run);
    ok(same, "N=%d --algo %s over %s: every rank holds the same bits of random sums and "
       "averages", n, algo, transport);
    ok(close, "N=%d --algo %s over %s: within 1e-6 of the double-precision sums (relative to "
       "the terms' magnitudes)", n, algo, transport);
    if (!ok(counted, "N=%d --algo %s over %s: stats count %llu of %zu allreduces as recursive "
            "doubling", n, algo, transport, (unsigned long long)want_rd, NCOUNTS * 4) &&
        run != NULL)
        diag("rank 0: rd_allreduces %llu, allreduces %llu",
             (unsigned long long)h_val(&run->r[0], V_RD, 0),
             (unsigned long long)h_val(&run->r[0], V_ALL, 0));
}

static void check_select(int n)
{
    rd_mode_t mode = M_SELECT;
    /* over tcp: on one host over shm, auto gives these calls to direct.c (t-direct.c) */
    static const h_setting_t settings[] = {{-1, "algo", "auto"}, {-1, "rd-max-bytes", "4K"},
                                           {-1, "rd-fit", "off"}, {-1, "codec", "fp16"},
                                           {-1, "transport", "tcp"}, {0, NULL, NULL}};
    h_run_t *run = run_ring(n, &mode, settings, NULL, NULL);
    int all = run != NULL;

    for (int r = 0; run != NULL && r < n; r++)
        all &= run->r[r].exited && run->r[r].code == 0 && h_val(&run->r[r], V_SEL, 0) == 0x11;
    if (!ok(all, "N=%d --algo auto --rd-max-bytes 4K --codec fp16 over tcp: rd takes exact fp32 "
            "calls of 4 bytes and 4096 bytes; 4100 bytes, codec calls and fp16 buffers stay on "
            "the ring", n) &&
        run != NULL) {
        h_diag(run);
        diag("rank 0: selected calls (bits) 0x%llx, want 0x11",
             (unsigned long long)h_val(&run->r[0], V_SEL, 0));
    }
}

/* --rd-fit on or off (the default), --rd-max-bytes 4K, over tcp: every rank
 * reports the same limit, 4K x 2^k (k <= 4; exactly 4K when off); every call
 * is exact, and rd ran exactly the calls of at most that limit (each of
 * fit_main's counts is run 4 times) */
static void check_fit(int n, const char *fit)
{
    rd_mode_t mode = M_FIT;
    h_setting_t settings[] = {{-1, "algo", "auto"}, {-1, "rd-max-bytes", "4K"},
                              {-1, "rd-fit", fit}, {-1, "transport", "tcp"}, {0, NULL, NULL}};
    h_run_t *run = run_ring(n, &mode, settings, NULL, NULL);
    int all = run != NULL, valid = run != NULL;
    uint64_t limit = run != NULL ? h_val(&run->r[0], V_LIMIT, 0) : 0, want_rd = 0;

    for (size_t i = 0; i < NFIT; i++)
        want_rd += fit_counts[i] * sizeof(float) <= limit ? 4 : 0;
    valid &= strcmp(fit, "on") == 0 ? (limit == 4096 || limit == 8192 || limit == 16384 ||
                                       limit == 32768 || limit == 65536)
                                    : limit == 4096;
    for (int r = 0; run != NULL && r < n; r++)
        all &= run->r[r].exited && run->r[r].code == 0 && h_val(&run->r[r], V_WRONG, 1) == 0 &&
               h_val(&run->r[r], V_HASH, 0) == h_val(&run->r[0], V_HASH, 1) &&
               h_val(&run->r[r], V_LIMIT, 0) == limit && h_val(&run->r[r], V_RD, 99) == want_rd;
    if (!ok(all && valid, "N=%d --rd-max-bytes 4K --rd-fit %s over tcp: every rank runs with "
            "the same limit (%llu bytes), rd ran exactly the calls up to it, every sum exact "
            "and the same on every rank", n, fit, (unsigned long long)limit) && run != NULL) {
        h_diag(run);
        diag("rank 0: limit %llu, rd_allreduces %llu (want %llu)", (unsigned long long)limit,
             (unsigned long long)h_val(&run->r[0], V_RD, 0), (unsigned long long)want_rd);
    }
}

static void check_failure(int n, int victim, int sig)
{
    rd_mode_t mode = M_LOOP;
    static const h_setting_t settings[] = {{-1, "algo", "rd"}, {0, NULL, NULL}};
    h_action_t act = {.after_ready = 0, .at = 0.3, .target = victim, .sig = sig};
    h_run_t *run = run_ring(n, &mode, settings, &act, "2s");
    char want[32];
    int all = run != NULL, named = run != NULL;
    const char *what = sig == SIGKILL ? "killed" : "stopped";

    snprintf(want, sizeof(want), "rank %d (", victim);
    for (int r = 0; run != NULL && r < n; r++) {
        if (r == victim)
            continue;
        /* stopped: the timeout (2 s) and at most 3 levels of grace */
        all &= run->r[r].exited && run->r[r].code != 0 && run->r[r].t_end < 12;
        named &= strstr(run->r[r].msg, want) != NULL;
    }
    if (!ok(all, "N=%d rank %d %s mid-loop (--algo rd): every other rank fails, no hang", n,
            victim, what) && run != NULL)
        h_diag(run);
    if (!ok(all && named, "N=%d rank %d %s: every other rank names it", n, victim, what) &&
        run != NULL)
        h_diag(run);
    else if (run != NULL)
        diag("rank 0: %s", run->r[victim == 0 ? 1 : 0].msg);
}

/* The same call run by recursive doubling on one peer and by the ring on the
 * others (RING_CALL_EXACT on one peer only; with --codec fp16 the others' call
 * stays on the ring): the waiting rd call's notice
 * reaches its left neighbour, which runs the ring: every peer fails at once
 * with a mismatch that says the algorithms differ, not after the timeout. */
static void check_exact_one(int n, int auth)
{
    rd_mode_t mode = M_EXACT_ONE;
    static const h_setting_t settings[] = {{-1, "algo", "auto"}, {-1, "codec", "fp16"},
                                           {-1, "transport", "tcp"}, {0, NULL, NULL}};
    /* --auth frames: the notice carries a tag like every frame, checked first */
    static const h_setting_t tagged[] = {{-1, "algo", "auto"}, {-1, "codec", "fp16"},
                                         {-1, "transport", "tcp"}, {-1, "auth", "frames"},
                                         {-1, "secret", "t-rd notice secret, 32 bytes long"},
                                         {0, NULL, NULL}};
    h_run_t *run = run_ring(n, &mode, auth ? tagged : settings, NULL, "20s");
    int all = run != NULL;

    for (int r = 0; run != NULL && r < n; r++)
        all &= run->r[r].exited && run->r[r].code != 0 && run->r[r].t_end < 8 &&
               h_val(&run->r[r], V_STATUS, 0) == RING_ERR_MISMATCH &&
               strstr(run->r[r].msg, "RING_CALL_EXACT on some peers only") != NULL;
    if (!ok(all, "N=%d rank 1 alone passes RING_CALL_EXACT (rd there, the ring elsewhere)%s: "
            "every rank fails with a mismatch saying the algorithms differ, well before the "
            "timeout", n, auth ? ", --auth frames" : "") && run != NULL)
        h_diag(run);
    else if (run != NULL)
        diag("rank 0: %s", run->r[0].msg);
}

/* One rank with another setting: both ranks fail at open (the hello), naming
 * it. (On larger rings only its neighbours see the hello; the others time out
 * at start-up waiting for them, as with any setting the hello checks.) */
static void check_disagree(const char *name, const char *value, const char *flag)
{
    rd_mode_t mode = M_CORRECT;
    h_setting_t settings[] = {{1, name, value}, {0, NULL, NULL}};
    h_run_t *run = run_ring(2, &mode, settings, NULL, NULL);
    int all = run != NULL;

    for (int r = 0; run != NULL && r < 2; r++)
        all &= run->r[r].exited && run->r[r].code != 0 && run->r[r].t_end < 8 &&
               strstr(run->r[r].msg, flag) != NULL && strstr(run->r[r].msg, "differs") != NULL;
    if (!ok(all, "rank 1 --%s %s, rank 0 the default: both fail at open, saying %s differs",
            name, value, flag) && run != NULL)
        h_diag(run);
    else if (run != NULL)
        diag("rank 0: %s", run->r[0].msg);
}

int main(void)
{
    static const int ns[] = {2, 3, 4, 5, 7, 8};

    plan(10 * 4 + 3 + 3 + 4 * 2 + 5 + 3);
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        check_correct(ns[i], "rd", "auto");
    check_correct(4, "rd", "tcp");
    check_correct(7, "rd", "tcp");
    check_correct(4, "ring", "auto");
    check_correct(7, "ring", "auto");
    check_fit(4, "on");
    check_fit(3, "on");
    check_fit(4, "off");
    check_select(2);
    check_select(3);
    check_select(4);
    check_failure(4, 1, SIGKILL);
    check_failure(3, 2, SIGKILL); /* the place above the power of two */
    check_failure(4, 2, SIGSTOP);
    check_failure(5, 0, SIGSTOP);
    check_exact_one(2, 0);
    check_exact_one(3, 0);
    check_exact_one(4, 0);
    check_exact_one(5, 0);
    check_exact_one(4, 1);
    check_disagree("algo", "ring", "--algo");
    check_disagree("rd-max-bytes", "8K", "--rd-max-bytes");
    check_disagree("rd-fit", "on", "--rd-fit");
    return done_testing();
}
