/*
 * t-direct.c - the direct allreduce (--algo direct, src/core/direct.c):
 * peers on one host adding each other's buffers from one shared segment,
 * across real processes on 127.0.0.1 over shm, N = 2, 3, 4, 7.
 *
 * - Integer-valued data sums exactly in any order: every rank's result must
 *   equal the exact sum bit for bit, with --algo direct as with --algo ring,
 *   so the two agree bitwise; random data: every rank holds the same bits.
 * - Sizes: up to --rd-max-bytes every peer adds every slot (small calls);
 *   above, in pieces, each peer a slice of each (direct_big.c): one piece,
 *   two with an odd tail, three.
 * - Selection: --algo direct takes fp32 calls without a codec (counted by
 *   ring_comm_get_stats' direct_allreduces); auto does too on one host over
 *   shm (large calls at N = 2 too); --algo direct over tcp is an
 *   error that says what to do.
 * - Failures: a peer killed or stopped mid-loop, small or large calls, is
 *   named by every other, no hang; a peer that calls another count, or
 *   another collective, or alone passes RING_CALL_EXACT (so runs the call
 *   here while the others run the ring), is a mismatch naming it, also in
 *   the first call, with rank 0 the last out of ring_comm_open (RING_FAULT=
 *   slow-send: its neighbour's notice reaches it during the set-up calls);
 *   and no segment is left in /dev/shm.
 */
#include "ring_build.h"

#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev_shm.h"
#include "harness.h"
#include "sum_check.h"
#include "tap.h"

enum { V_STATUS, V_WRONG, V_HASH, V_DIRECT, V_ALL, V_ERR, V_SEL };

typedef enum mode {
    M_CORRECT, M_SELECT, M_LOOP, M_LOOP_BIG, M_OTHER_COUNT, M_OTHER_COUNT_BIG, M_OTHER_COLL,
    M_EXACT_ONE, M_EXACT_FIRST, M_NONFINITE
} mode_t_;

/* 512 and 1024: the small form's limits at N = 2 (--rd-max-bytes 32K / 16) and
 * N = 4 (x 2/N^2) exactly, 513 and 1025 one float over (one piece);
 * 4097: one piece; 262161: 1 MiB and an odd tail (two pieces at N = 7);
 * 1500000: three pieces or more (pieces are 2.6 MiB at N = 2, 2 MiB at N = 3,
 * 1.6 MiB at N = 4, 1 MiB at N = 7); 2200003: 8.8 MB, whose result is written
 * with non-temporal stores */
static const size_t counts[] = {1, 7, 512, 513, 1023, 1024, 1025, 4097, 262161, 1500000, 2200003};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))
#define MAXCOUNT 2200003
#define BIG 700000 /* floats: two pieces at N = 3 and 4 */

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

/* --algo direct or auto, --rd-max-bytes 4K, --codec fp16: bit k of V_SEL is set when
 * call k ran through the segment. 4100 bytes go there in pieces; codec calls, fp16
 * buffers and a broadcast stay on the ring. */
static int select_main(ring_comm_t *comm)
{
    static const sum_check_call_t calls[] = {SEL_EXACT_4096, SEL_EXACT_4100, SEL_CODEC, SEL_FP16,
                                             SEL_BROADCAST, SEL_TINY_EXACT_AVG};
    uint64_t sel = 0;
    ring_status_t st = sum_check_select(comm, calls, sizeof(calls) / sizeof(calls[0]),
                                        offsetof(ring_comm_stats_t, direct_allreduces), &sel);

    h_put(V_SEL, sel);
    return st == RING_OK ? 0 : h_fail(st, "select");
}

/* allreduces of 1024 floats (BIG: two pieces) for up to 8 s, ready after the 21st;
 * the harness kills or stops a peer */
static int loop_main(ring_comm_t *comm, size_t count)
{
    static float buf[BIG];
    ring_status_t st = h_allreduce_loop(comm, buf, count, 1000000, 8, 20, NULL);

    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

/* ten good calls (none for M_EXACT_FIRST), then the last rank calls another count
 * or a broadcast */
static int other_main(ring_comm_t *comm, int rank, int n, mode_t_ mode)
{
    static float buf[BIG + 1];
    size_t count = mode == M_OTHER_COUNT_BIG ? BIG : 100;
    ring_status_t st = RING_OK;

    for (int i = 0; i < (mode == M_EXACT_FIRST ? 0 : 10) && st == RING_OK; i++)
        st = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_SUM);
    if (st == RING_OK) {
        if (rank != n - 1)
            st = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_SUM);
        else if (mode == M_EXACT_ONE || mode == M_EXACT_FIRST) {
            /* with --codec fp16: direct here, the ring elsewhere */
            ring_request_t *req;

            st = ring_allreduce_start_flags(comm, buf, buf, count, RING_FLOAT32, RING_SUM, 0,
                                            RING_CALL_EXACT, &req);
            if (st == RING_OK)
                st = ring_request_wait(req);
        } else if (mode != M_OTHER_COLL)
            st = ring_allreduce(comm, buf, buf, count + 1, RING_FLOAT32, RING_SUM);
        else
            st = ring_broadcast(comm, buf, 400, 0);
    }
    h_put(V_STATUS, (uint64_t)st);
    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

/* An inf on the last rank in a later piece of a large call, then the same call
 * finite, a NaN on rank 0 in a small call, then that call finite: bit k of V_SEL
 * is set when call k returned RING_ERR_NONFINITE (each peer adds a slice of a
 * large call, and must learn of a value outside its own) */
static int nonfinite_main(ring_comm_t *comm, int rank, int n)
{
    static float buf[MAXCOUNT];
    static const size_t count[] = {MAXCOUNT, MAXCOUNT, 100, 100};
    uint64_t got = 0;
    ring_status_t st = RING_OK;

    for (int i = 0; i < 4 && (st == RING_OK || st == RING_ERR_NONFINITE); i++) {
        for (size_t k = 0; k < count[i]; k++)
            buf[k] = (float)(k % 5);
        if (i == 0 && rank == n - 1)
            buf[1000000] = INFINITY;
        if (i == 2 && rank == 0)
            buf[3] = NAN;
        st = ring_allreduce(comm, buf, buf, count[i], RING_FLOAT32, RING_SUM);
        got |= (uint64_t)(st == RING_ERR_NONFINITE) << i;
    }
    h_put(V_SEL, got);
    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

static int rank_main(int rank, int n, const ring_config_t *cfg, void *arg)
{
    mode_t_ mode = *(const mode_t_ *)arg;
    ring_comm_t *comm;
    ring_comm_stats_t s;
    ring_status_t st;
    int rc;

    /* rank 0 the last out of ring_comm_open's set-up calls: its neighbours' notices
     * of the first call reach it there (notice.c) */
    if (mode == M_EXACT_FIRST && rank == 0)
        setenv("RING_FAULT", "slow-send", 1);
    st = ring_comm_open(cfg, &comm);
    if (st != RING_OK)
        return h_fail(st, "ring_comm_open");
    rc = mode == M_CORRECT  ? correct_main(comm, rank, n)
         : mode == M_SELECT ? select_main(comm)
         : mode == M_LOOP   ? loop_main(comm, 1024)
         : mode == M_LOOP_BIG ? loop_main(comm, BIG)
         : mode == M_NONFINITE ? nonfinite_main(comm, rank, n)
                            : other_main(comm, rank, n, mode);
    if (ring_comm_get_stats(comm, &s) == RING_OK) {
        h_put(V_DIRECT, s.direct_allreduces);
        h_put(V_ALL, s.allreduces);
    }
    ring_comm_close(comm);
    return rc;
}

/* the ring of a check: NULL (a diag line says why) when it could not be run */
static h_run_t *run_ring(int n, mode_t_ *mode, const h_setting_t *settings,
                         const h_action_t *action, const char *timeout)
{
    h_ring_spec_t rs = {.n = n, .settings = settings, .fn = rank_main, .arg = mode,
                        .budget = 25, .timeout = timeout, .actions = action,
                        .nactions = action != NULL ? 1 : 0, .on_error = H_DIAG};

    return h_run_ring(&rs);
}

static void check_correct(int n, const char *algo)
{
    mode_t_ mode = M_CORRECT;
    h_setting_t settings[] = {{-1, "algo", algo}, {-1, "transport", "shm"}, {0, NULL, NULL}};
    h_run_t *run = run_ring(n, &mode, settings, NULL, NULL);
    int all_ok = run != NULL, same = run != NULL, close = run != NULL, counted = run != NULL;
    uint64_t want = strcmp(algo, "ring") != 0 ? NCOUNTS * 4 : 0;

    for (int r = 0; run != NULL && r < n; r++) {
        const h_result_t *res = &run->r[r];

        all_ok &= res->exited && res->code == 0 && h_val(res, V_WRONG, 1) == 0;
        same &= h_val(res, V_HASH, 0) == h_val(&run->r[0], V_HASH, 1);
        close &= h_val_double(res, V_ERR, 1) < 1e-6;
        counted &= h_val(res, V_DIRECT, 99) == want && h_val(res, V_ALL, 0) == NCOUNTS * 4;
    }
    if (!ok(all_ok, "N=%d --algo %s over shm: integer sums exact, bit for bit, on every rank", n,
            algo) && run != NULL)
        h_diag(run);
    ok(same, "N=%d --algo %s: every rank holds the same bits of random sums and averages", n,
       algo);
    ok(close, "N=%d --algo %s: within 1e-6 of the double-precision sums", n, algo);
    if (!ok(counted, "N=%d --algo %s: stats count %llu of %zu allreduces as direct", n, algo,
            (unsigned long long)want, NCOUNTS * 4) && run != NULL)
        diag("rank 0: direct_allreduces %llu, allreduces %llu",
             (unsigned long long)h_val(&run->r[0], V_DIRECT, 0),
             (unsigned long long)h_val(&run->r[0], V_ALL, 0));
}

static void check_select(int n, const char *algo, uint64_t want)
{
    mode_t_ mode = M_SELECT;
    const char *transport = "shm";
    h_setting_t settings[] = {{-1, "algo", algo}, {-1, "rd-max-bytes", "4K"},
                              {-1, "codec", "fp16"}, {-1, "transport", transport},
                              {0, NULL, NULL}};
    h_run_t *run = run_ring(n, &mode, settings, NULL, NULL);
    int all = run != NULL;

    for (int r = 0; run != NULL && r < n; r++)
        all &= run->r[r].exited && run->r[r].code == 0 && h_val(&run->r[r], V_SEL, 0) == want;
    if (!ok(all, "N=%d --algo %s --rd-max-bytes 4K --codec fp16 over %s: %s", n, algo,
            transport,
            want & 2 ? "direct takes exact fp32 calls of 4096, 4100 and 4 bytes; codec calls, "
                       "fp16 buffers and a broadcast in between stay on the ring"
                     : "direct takes exact fp32 calls of 4096 and 4 bytes; 4100 bytes (the "
                       "ring is as fast at N = 2), codec calls, fp16 buffers and a broadcast "
                       "in between stay on the ring") &&
        run != NULL) {
        h_diag(run);
        diag("rank 0: selected calls (bits) 0x%llx, want 0x%llx",
             (unsigned long long)h_val(&run->r[0], V_SEL, 0), (unsigned long long)want);
    }
}

static void check_forced_tcp(void)
{
    mode_t_ mode = M_CORRECT;
    static const h_setting_t settings[] = {{-1, "algo", "direct"}, {-1, "transport", "tcp"},
                                           {0, NULL, NULL}};
    h_run_t *run = run_ring(2, &mode, settings, NULL, NULL);
    int all = run != NULL;

    for (int r = 0; run != NULL && r < 2; r++)
        all &= run->r[r].exited && run->r[r].code != 0 &&
               strstr(run->r[r].msg, "--algo direct needs every peer on one host") != NULL &&
               strstr(run->r[r].msg, "--algo auto") != NULL;
    if (!ok(all, "--algo direct over tcp: every rank fails at open, saying it needs shm on one "
            "host and to use --algo auto") && run != NULL)
        h_diag(run);
    else if (run != NULL)
        diag("rank 0: %s", run->r[0].msg);
}

static void check_failure(int n, int victim, int sig, int big)
{
    mode_t_ mode = big ? M_LOOP_BIG : M_LOOP;
    static const h_setting_t settings[] = {{-1, "algo", "direct"}, {-1, "transport", "shm"},
                                           {0, NULL, NULL}};
    h_action_t act = {.after_ready = 0, .at = 0.3, .target = victim, .sig = sig};
    h_run_t *run = run_ring(n, &mode, settings, &act, "2s");
    char want[32];
    int all = run != NULL, named = run != NULL;
    const char *what = sig == SIGKILL ? "killed" : "stopped";

    snprintf(want, sizeof(want), "rank %d", victim);
    for (int r = 0; run != NULL && r < n; r++) {
        if (r == victim)
            continue;
        all &= run->r[r].exited && run->r[r].code != 0 && run->r[r].t_end < 10;
        named &= strstr(run->r[r].msg, want) != NULL;
    }
    if (!ok(all, "N=%d rank %d %s mid-loop of %s allreduces (--algo direct): every other rank "
            "fails, no hang", n, victim, what, big ? "large" : "small") && run != NULL)
        h_diag(run);
    if (!ok(all && named, "N=%d rank %d %s (%s calls): every other rank names it", n, victim,
            what, big ? "large" : "small") &&
        run != NULL)
        h_diag(run);
    else if (run != NULL)
        diag("rank %d: %s", victim == 0 ? 1 : 0, run->r[victim == 0 ? 1 : 0].msg);
}

static void check_other(int n, mode_t_ mode)
{
    /* RING_CALL_EXACT on one rank: with a codec, only that rank runs the call here */
    static const h_setting_t settings[] = {{-1, "algo", "direct"}, {-1, "transport", "shm"},
                                           {0, NULL, NULL}};
    static const h_setting_t codec[] = {{-1, "algo", "auto"}, {-1, "transport", "shm"},
                                        {-1, "codec", "fp16"}, {0, NULL, NULL}};
    int exact = mode == M_EXACT_ONE || mode == M_EXACT_FIRST;
    h_run_t *run = run_ring(n, &mode, exact ? codec : settings, NULL, "2s");
    const char *what = mode == M_OTHER_COUNT      ? "another count"
                       : mode == M_OTHER_COUNT_BIG ? "another count of a large allreduce"
                       : exact ? "the same allreduce with RING_CALL_EXACT, the others "
                                 "without (--codec fp16, --algo auto)"
                               : "a broadcast";
    char want[32];
    int all = run != NULL, named = run != NULL;

    snprintf(want, sizeof(want), "rank %d", n - 1);
    for (int r = 0; run != NULL && r < n; r++) {
        all &= run->r[r].exited && run->r[r].code != 0 && run->r[r].t_end < 6 &&
               h_val(&run->r[r], V_STATUS, 0) == RING_ERR_MISMATCH;
        named &= strstr(run->r[r].msg, want) != NULL;
    }
    if (!ok(all && named, "N=%d rank %d calls %s in round %d%s: every rank fails with a "
            "mismatch naming it, within the timeout", n, n - 1, what,
            mode == M_EXACT_FIRST ? 0 : 10,
            mode == M_EXACT_FIRST ? " (rank 0 the last out of ring_comm_open, RING_FAULT="
                                    "slow-send)"
            : exact ? "" : " (--algo direct)") && run != NULL)
        h_diag(run);
    else if (run != NULL)
        diag("rank 0: %s", run->r[0].msg);
}

static void check_nonfinite(int n, const char *algo)
{
    h_setting_t settings[] = {{-1, "algo", algo}, {-1, "transport", "shm"}, {0, NULL, NULL}};
    mode_t_ mode = M_NONFINITE;
    h_run_t *run = run_ring(n, &mode, settings, NULL, "5s");
    int all = run != NULL;

    for (int r = 0; run != NULL && r < n; r++)
        all &= run->r[r].exited && run->r[r].code == 0 && h_val(&run->r[r], V_SEL, 0) == 0x5 &&
               h_val(&run->r[r], V_DIRECT, 0) == 4;
    if (!ok(all, "N=%d --algo %s: an inf in another peer's slice of a large call, a NaN in a "
            "small one: RING_ERR_NONFINITE on every rank, and the next calls finite", n, algo) &&
        run != NULL)
        h_diag(run);
}

int main(void)
{
    static const int ns[] = {2, 3, 4, 7};
    int before = dev_shm_count("ringd-direct-");

    plan(4 * 4 + 4 + 3 + 1 + 5 * 2 + 8 + 3 + 1);
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        check_correct(ns[i], "direct");
    check_correct(4, "ring");
    check_select(3, "direct", 0x23);
    check_select(3, "auto", 0x23);
    check_select(2, "auto", 0x23);
    check_forced_tcp();
    check_nonfinite(2, "direct");
    check_nonfinite(3, "direct");
    check_nonfinite(4, "auto");
    check_failure(4, 2, SIGKILL, 0);
    check_failure(3, 0, SIGKILL, 0);
    check_failure(4, 1, SIGSTOP, 0);
    check_failure(4, 3, SIGKILL, 1);
    check_failure(3, 1, SIGSTOP, 1);
    check_other(2, M_OTHER_COUNT);
    check_other(4, M_OTHER_COUNT);
    check_other(3, M_OTHER_COUNT_BIG);
    check_other(3, M_OTHER_COLL);
    check_other(2, M_EXACT_ONE);
    check_other(3, M_EXACT_ONE);
    check_other(2, M_EXACT_FIRST);
    check_other(3, M_EXACT_FIRST);
    int after = dev_shm_count_settled("ringd-direct-", before);

    ok(after <= before, "no ringd-direct-* segment left in /dev/shm (%d before, %d after)",
       before, after);
    return done_testing();
}
