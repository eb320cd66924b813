/*
 * t-rh.c - Rabenseifner's algorithm (--rh-max-bytes, src/algo/rd.c and
 * rd_plan.c) across real processes on 127.0.0.1 over tcp (on one host over
 * shm, auto gives these calls to direct.c).
 *
 * - With --rd-max-bytes 4K and --rh-max-bytes 1M on N = 4 and 8: integer
 *   sums exact bit for bit, out of place and in place, random sums and
 *   averages the same bits on every rank and close to a double-precision
 *   reference, for counts that P2 divides and counts it does not (the padded
 *   copy); the stats count exactly the calls between the two limits as
 *   Rabenseifner's and those up to 4K as recursive doubling.
 * - The same in pieces (--rh-piece-bytes 4K: up to 256 a call, the last of one
 *   float padded; and the default 1M with --rh-max-bytes 2M: 1 MiB and 4 bytes).
 * - N = 3 and 5 (not a power of two), and --rh-max-bytes 0: it never runs.
 * - A peer killed or stopped in a loop of its calls is named by every other
 *   one, no hang; a peer whose call has another count (run by recursive
 *   doubling, or by Rabenseifner over another window, or one piece fewer that
 *   ends where the others' calls go on) fails every rank with a mismatch naming
 *   it, and an inf or NaN in any piece is found; peers that disagree on
 *   --rh-max-bytes or --rh-piece-bytes fail at open.
 * - --rd-fit on, and --autotune on with --rd-fit's default (auto): every
 *   rank runs with rank 0's two limits (Rabenseifner's 0, or rd's times 4,
 *   16, 64 or 256), and exactly the calls between them run by Rabenseifner's,
 *   exact and the same on every rank; without --autotune, auto fits nothing.
 */
#include "ring_build.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sum_check.h"
#include "tap.h"

enum {
    V_STATUS, V_WRONG, V_HASH, V_RD, V_RH, V_ALL, V_ERR, V_LIMIT, V_RD_LIMIT, V_FIT_LOG,
    V_LOG_BAD, V_RELAYED
};

/* M_CORRECT_LOG: M_CORRECT, and what the open logged (the fit's lines) is read back;
 * M_LOOP_LOG: M_LOOP, and what the whole run logged */
typedef enum rh_mode {
    M_CORRECT, M_CORRECT_LOG, M_LOOP, M_LOOP_LOG, M_OTHER_COUNT, M_OTHER_SMALL, M_OTHER_PIECES,
    M_NONFINITE
} rh_mode_t;

/* 1024 floats: --rd-max-bytes (4K) exactly; 1025: padded to 1028 at N = 4;
 * 65537: an odd count; 262144: --rh-max-bytes (1M) exactly; 262145: the ring
 * (with --rh-max-bytes 2M, two pieces of the default 1M: the second one float) */
static const size_t counts[] = {7, 1024, 1025, 4096, 65537, 262144, 262145};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))
#define MAXCOUNT 262145
#define LIMIT_RD 4096u
#define LOOP_COUNT 20000 /* 80 KB: between the limits */
#define PIECES_COUNT 20480 /* M_OTHER_PIECES: 20 pieces of 4K; the last rank's call 19 */

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

static int loop_main(ring_comm_t *comm)
{
    static float buf[LOOP_COUNT];
    ring_status_t st = h_allreduce_loop(comm, buf, LOOP_COUNT, 1000000, 8, 20, NULL);

    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

/* ten good calls of LOOP_COUNT, then the last rank calls another count: one
 * Rabenseifner runs too (M_OTHER_COUNT), or one recursive doubling takes; or
 * (M_OTHER_PIECES, pieces of 4K) ten of PIECES_COUNT, then the last rank one
 * piece fewer: the same pieces, but its last ends where the others go on */
static int other_main(ring_comm_t *comm, int rank, int n, rh_mode_t mode)
{
    static float buf[2 * LOOP_COUNT];
    size_t good = mode == M_OTHER_PIECES ? PIECES_COUNT : LOOP_COUNT;
    ring_status_t st = RING_OK;

    for (int i = 0; i < 10 && st == RING_OK; i++)
        st = ring_allreduce(comm, buf, buf, good, RING_FLOAT32, RING_SUM);
    if (st == RING_OK)
        st = ring_allreduce(comm, buf, buf,
                            rank != n - 1 ? good
                            : mode == M_OTHER_COUNT ? 2 * LOOP_COUNT
                            : mode == M_OTHER_PIECES ? PIECES_COUNT - 1024 : 100,
                            RING_FLOAT32, RING_SUM);
    h_put(V_STATUS, (uint64_t)st);
    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

/* A NaN on the last rank, then an inf on rank 0 in another rank's block, then the
 * same call finite, all of Rabenseifner's size: bit k of V_STATUS is set when call
 * k returned RING_ERR_NONFINITE (a result, not a failure of the pairs) */
static int nonfinite_main(ring_comm_t *comm, int rank, int n)
{
    static float buf[LOOP_COUNT];
    uint64_t got = 0;
    ring_status_t st = RING_OK;

    for (int i = 0; i < 3 && (st == RING_OK || st == RING_ERR_NONFINITE); i++) {
        for (size_t k = 0; k < LOOP_COUNT; k++)
            buf[k] = (float)(k % 5);
        if (i == 0 && rank == n - 1)
            buf[10] = NAN;
        if (i == 1 && rank == 0)
            buf[LOOP_COUNT - 3] = INFINITY;
        st = ring_allreduce(comm, buf, buf, LOOP_COUNT, RING_FLOAT32, RING_AVG);
        got |= (uint64_t)(st == RING_ERR_NONFINITE) << i;
    }
    h_put(V_STATUS, got);
    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

/* Which challenger rd's fit timed, as this peer's fit line in log names it:
 * 1 Rabenseifner's, 2 the ring, 3 none: the gate skipped the fit (a ring call of
 * its first size took over 5 ms: a slow link, or a host too loaded), 0 no line */
#define FIT_GATED 3
static uint64_t fit_challenger(FILE *log)
{
    char line[1024];
    uint64_t found = 0;

    rewind(log);
    while (found == 0 && fgets(line, sizeof(line), log) != NULL)
        found = strstr(line, "too slow for the fit") != NULL      ? FIT_GATED
                : strstr(line, "Rabenseifner's/rd in us") != NULL ? 1
                : strstr(line, "ring/rd in us") != NULL           ? 2 : 0;
    return found;
}

/* The failure's log lines: V_RELAYED, the relayed questions and answers of the
 * pairs, each at info; V_LOG_BAD, lines that name no rank ("rank -1") or a relay
 * at another level (a pair's relay logged as its own failure, at error) */
static void put_failure_log(FILE *log)
{
    char line[2048];
    uint64_t bad = 0, relayed = 0;

    rewind(log);
    while (fgets(line, sizeof(line), log) != NULL) {
        int relay = strstr(line, "relayed on this pair") != NULL;
        int at_info = relay && strstr(line, " info: ") != NULL;

        relayed += at_info;
        bad += strstr(line, "rank -1") != NULL || (relay && !at_info);
    }
    h_put(V_LOG_BAD, bad);
    h_put(V_RELAYED, relayed);
}

/* stderr into log from here (saved: the real one), back with log_end */
static int log_begin(FILE *log)
{
    int saved = log != NULL ? dup(2) : -1;

    if (saved >= 0)
        (void)dup2(fileno(log), 2);
    return saved;
}

static void log_end(int saved)
{
    if (saved >= 0) {
        (void)dup2(saved, 2);
        close(saved);
    }
}

static int rank_main(int rank, int n, const ring_config_t *cfg, void *arg)
{
    rh_mode_t mode = *(const rh_mode_t *)arg;
    ring_comm_t *comm;
    ring_comm_stats_t s;
    FILE *log = mode == M_CORRECT_LOG || mode == M_LOOP_LOG ? tmpfile() : NULL;
    int saved = log_begin(log), rc;
    ring_status_t st = ring_comm_open(cfg, &comm);

    if (mode == M_CORRECT_LOG) { /* the open's log lines (the fit's) */
        log_end(saved);
        saved = -1;
        h_put(V_FIT_LOG, fit_challenger(log));
    }
    if (st != RING_OK) {
        log_end(saved);
        if (log != NULL)
            fclose(log);
        return h_fail(st, "ring_comm_open");
    }
    rc = mode == M_CORRECT || mode == M_CORRECT_LOG ? correct_main(comm, rank, n)
         : mode == M_LOOP || mode == M_LOOP_LOG ? loop_main(comm)
         : mode == M_NONFINITE ? nonfinite_main(comm, rank, n)
                           : other_main(comm, rank, n, mode);
    if (mode == M_LOOP_LOG) {
        log_end(saved);
        put_failure_log(log);
    }
    if (log != NULL)
        fclose(log);
    if (ring_comm_get_stats(comm, &s) == RING_OK) {
        h_put(V_RD, s.rd_allreduces);
        h_put(V_RH, s.rh_allreduces);
        h_put(V_ALL, s.allreduces);
        h_put(V_LIMIT, s.rh_max_bytes);
        h_put(V_RD_LIMIT, s.rd_max_bytes);
    }
    ring_comm_close(comm);
    return rc;
}

static h_run_t *run_ring(int n, rh_mode_t *mode, const h_setting_t *settings,
                         const h_action_t *action, const char *timeout)
{
    h_ring_spec_t rs = {.n = n, .settings = settings, .fn = rank_main, .arg = mode,
                        .budget = 40, .timeout = timeout, .actions = action,
                        .nactions = action != NULL ? 1 : 0, .on_error = H_DIAG};

    return h_run_ring(&rs);
}

/* limit: --rh-max-bytes rh_max in bytes; piece: --rh-piece-bytes, NULL the default */
static void check_correct(int n, const char *rh_max, size_t limit, const char *piece)
{
    rh_mode_t mode = M_CORRECT;
    h_setting_t settings[] = {{-1, "algo", "auto"}, {-1, "transport", "tcp"},
                              {-1, "rd-max-bytes", "4K"}, {-1, "rh-max-bytes", rh_max},
                              {-1, piece != NULL ? "rh-piece-bytes" : NULL, piece},
                              {0, NULL, NULL}};
    h_run_t *run = run_ring(n, &mode, settings, NULL, NULL);
    int runs = (n & (n - 1)) == 0 && n >= 4 && limit > 0;
    char what[64];
    int all_ok = run != NULL, same = run != NULL, close = run != NULL, counted = run != NULL;
    uint64_t want_rd = 0, want_rh = 0;

    for (size_t i = 0; i < NCOUNTS; i++) {
        size_t bytes = counts[i] * sizeof(float);

        want_rd += bytes <= LIMIT_RD ? 4 : 0;
        want_rh += runs && bytes > LIMIT_RD && bytes <= limit ? 4 : 0;
    }
    snprintf(what, sizeof(what), "--rh-max-bytes %s%s%s", rh_max,
             piece != NULL ? " --rh-piece-bytes " : "", piece != NULL ? piece : "");
    for (int r = 0; run != NULL && r < n; r++) {
        const h_result_t *res = &run->r[r];

        all_ok &= res->exited && res->code == 0 && h_val(res, V_WRONG, 1) == 0;
        same &= h_val(res, V_HASH, 0) == h_val(&run->r[0], V_HASH, 1);
        close &= h_val_double(res, V_ERR, 1) < 1e-6;
        counted &= h_val(res, V_RD, 99) == want_rd && h_val(res, V_RH, 99) == want_rh &&
                   h_val(res, V_ALL, 0) == NCOUNTS * 4 &&
                   h_val(res, V_LIMIT, 99) == (runs ? limit : 0);
    }
    if (!ok(all_ok, "N=%d %s over tcp: integer sums exact, bit for bit, out of place and in "
            "place, on every rank", n, what) && run != NULL)
        h_diag(run);
    ok(same, "N=%d %s: every rank holds the same bits of random sums and averages", n, what);
    ok(close, "N=%d %s: within 1e-6 of the double-precision sums", n, what);
    if (!ok(counted, "N=%d %s: stats count %llu of %zu allreduces as Rabenseifner's, %llu "
            "as recursive doubling", n, what,
            (unsigned long long)want_rh, NCOUNTS * 4, (unsigned long long)want_rd) &&
        run != NULL)
        diag("rank 0: rh %llu, rd %llu, all %llu, rh_max_bytes %llu",
             (unsigned long long)h_val(&run->r[0], V_RH, 0),
             (unsigned long long)h_val(&run->r[0], V_RD, 0),
             (unsigned long long)h_val(&run->r[0], V_ALL, 0),
             (unsigned long long)h_val(&run->r[0], V_LIMIT, 0));
}

/* how: "on" (--rd-fit on); "autotune" (--rd-fit's default, auto, with
 * --autotune on: the autotuner fits the limits too); "default" (auto without
 * --autotune: no fit). --rh-max-bytes 3M, a limit no fit gives. */
static void check_fit(int n, const char *how)
{
    rh_mode_t mode = strcmp(how, "on") == 0 ? M_CORRECT_LOG : M_CORRECT;
    int fits = strcmp(how, "default") != 0;
    /* with --rd-fit on, log-level info (the list ends before it otherwise): every
     * peer's fit line must say rd was timed against Rabenseifner's, which takes
     * rd's sizes without it here, not against the ring */
    h_setting_t settings[] = {{-1, "algo", "auto"}, {-1, "transport", "tcp"},
                              {-1, "rd-max-bytes", "4K"}, {-1, "rh-max-bytes", "3M"},
                              {-1, "autotune-chunks", "256K"}, {-1, "autotune-channels", "1"},
                              {-1, strcmp(how, "on") == 0 ? "rd-fit" : "autotune",
                               strcmp(how, "default") == 0 ? "off" : "on"},
                              {-1, mode == M_CORRECT_LOG ? "log-level" : NULL, "info"},
                              {0, NULL, NULL}};
    h_run_t *run = NULL;
    uint64_t rh = 1, rd = 1, want_rh = 0;
    int gated = 0, all, valid;

    /* the gate skips a fit on a host so loaded that a ring call of its first size
     * takes over 5 ms (8 peers on 2 cores beside other tests): then once more */
    for (int attempt = 0; attempt < 2 && (attempt == 0 || gated); attempt++) {
        if (gated)
            diag("N=%d --rd-fit on: the gate skipped the fit (a ring call of 8 KiB took "
                 "over 5 ms): once more", n);
        run = run_ring(n, &mode, settings, NULL, NULL);
        gated = run != NULL && mode == M_CORRECT_LOG &&
                h_val(&run->r[0], V_FIT_LOG, 0) == FIT_GATED;
    }
    if (run != NULL)
        rh = h_val(&run->r[0], V_LIMIT, 1), rd = h_val(&run->r[0], V_RD_LIMIT, 1);
    /* skipped twice: every peer keeps the set limits, and says why */
    all = run != NULL;
    valid = fits && !gated ? rh == 0 : rh == (3u << 20) && rd == 4096;

    for (int k = 1; fits && !gated && k <= 4; k++)
        valid |= rh == rd << (2 * k) && rh <= (4u << 20);
    for (size_t i = 0; i < NCOUNTS; i++)
        want_rh += counts[i] * sizeof(float) > rd && counts[i] * sizeof(float) <= rh ? 4 : 0;
    for (int r = 0; run != NULL && r < n; r++)
        all &= run->r[r].exited && run->r[r].code == 0 && h_val(&run->r[r], V_WRONG, 1) == 0 &&
               h_val(&run->r[r], V_HASH, 0) == h_val(&run->r[0], V_HASH, 1) &&
               h_val(&run->r[r], V_LIMIT, 1) == rh && h_val(&run->r[r], V_RD_LIMIT, 1) == rd &&
               h_val(&run->r[r], V_RH, 99) == want_rh &&
               (mode != M_CORRECT_LOG || h_val(&run->r[r], V_FIT_LOG, 0) ==
                                             (gated ? FIT_GATED : 1));
    if (!ok(all && valid, "N=%d %s over tcp: every rank runs with %s limits (rd %llu, "
            "Rabenseifner's %llu bytes), exactly the calls between them by Rabenseifner's, "
            "exact and the same on every rank%s", n,
            strcmp(how, "on") == 0 ? "--rd-fit on" : strcmp(how, "autotune") == 0
                ? "--autotune on (--rd-fit auto)" : "--rd-fit auto, no --autotune",
            fits && !gated ? "rank 0's measured" : "the set", (unsigned long long)rd,
            (unsigned long long)rh,
            gated ? "; the gate skipped the fit twice (a loaded host), every peer says so"
            : mode == M_CORRECT_LOG ? "; rd was timed against Rabenseifner's, not the ring" : "")
        && run != NULL)
        h_diag(run);
}

/* A stopped peer (sig SIGSTOP) also has every other rank's log read (log-level
 * info): the pairs' relayed questions and answers at info, no line naming rank -1 */
static void check_failure(int n, int victim, int sig)
{
    rh_mode_t mode = sig == SIGSTOP ? M_LOOP_LOG : M_LOOP;
    /* the list ends before log-level when the logs are not read */
    h_setting_t settings[] = {{-1, "algo", "auto"}, {-1, "transport", "tcp"},
                              {-1, mode == M_LOOP_LOG ? "log-level" : NULL, "info"},
                              {0, NULL, NULL}};
    h_action_t act = {.after_ready = 0, .at = 0.3, .target = victim, .sig = sig};
    h_run_t *run = run_ring(n, &mode, settings, &act, "2s");
    char want[32];
    int all = run != NULL, named = run != NULL, logs = run != NULL;
    uint64_t relayed = 0;
    const char *what = sig == SIGKILL ? "killed" : "stopped";

    snprintf(want, sizeof(want), "rank %d (", victim);
    for (int r = 0; run != NULL && r < n; r++) {
        if (r == victim)
            continue;
        /* stopped: the timeout (2 s) and at most 2 log2 N + 1 levels of grace */
        all &= run->r[r].exited && run->r[r].code != 0 && run->r[r].t_end < 15;
        named &= strstr(run->r[r].msg, want) != NULL;
        logs &= mode != M_LOOP_LOG || h_val(&run->r[r], V_LOG_BAD, 1) == 0;
        relayed += mode == M_LOOP_LOG ? h_val(&run->r[r], V_RELAYED, 0) : 0;
    }
    if (!ok(all && named && logs, "N=%d rank %d %s in a loop of 80 KB allreduces "
            "(Rabenseifner's): every other rank fails naming it, no hang%s", n, victim, what,
            mode == M_LOOP_LOG ? "; no log line names rank -1, relays logged at info" : "") &&
        run != NULL)
        h_diag(run);
    else if (run != NULL && mode == M_LOOP_LOG)
        diag("rank %d: %s (relayed lines logged: %llu)", victim == 0 ? 1 : 0,
             run->r[victim == 0 ? 1 : 0].msg, (unsigned long long)relayed);
    else if (run != NULL)
        diag("rank %d: %s", victim == 0 ? 1 : 0, run->r[victim == 0 ? 1 : 0].msg);
}

static void check_other(int n, rh_mode_t mode)
{
    const h_setting_t settings[] = {{-1, "algo", "auto"}, {-1, "transport", "tcp"},
                                    {-1, mode == M_OTHER_PIECES ? "rh-piece-bytes" : NULL, "4K"},
                                    {0, NULL, NULL}};
    h_run_t *run = run_ring(n, &mode, settings, NULL, "2s");
    char want[32];
    int all = run != NULL;

    snprintf(want, sizeof(want), "rank %d", n - 1);
    for (int r = 0; run != NULL && r < n; r++)
        all &= run->r[r].exited && run->r[r].code != 0 && run->r[r].t_end < 12 &&
               h_val(&run->r[r], V_STATUS, 0) == RING_ERR_MISMATCH &&
               strstr(run->r[r].msg, want) != NULL;
    if (!ok(all, "N=%d rank %d calls another count (%s) after 10 calls by Rabenseifner's: "
            "every rank fails with a mismatch naming it", n, n - 1,
            mode == M_OTHER_COUNT ? "Rabenseifner's too, over other windows"
            : mode == M_OTHER_PIECES ? "in pieces of 4K, one fewer: its last ends where the "
                                       "others' go on"
                                     : "recursive doubling's") && run != NULL)
        h_diag(run);
    else if (run != NULL)
        diag("rank 0: %s", run->r[0].msg);
}

/* piece: --rh-piece-bytes, NULL the default (4K: the NaN is in the first of 20
 * pieces, the inf in the last) */
static void check_nonfinite(int n, const char *piece)
{
    rh_mode_t mode = M_NONFINITE;
    const h_setting_t settings[] = {{-1, "algo", "auto"}, {-1, "transport", "tcp"},
                                    {-1, piece != NULL ? "rh-piece-bytes" : NULL, piece},
                                    {0, NULL, NULL}};
    h_run_t *run = run_ring(n, &mode, settings, NULL, "5s");
    int all = run != NULL;
    uint64_t rh_calls = n == 3 ? 0 : 3; /* N = 3: the ring's owners find it as they add */

    for (int r = 0; run != NULL && r < n; r++)
        all &= run->r[r].exited && run->r[r].code == 0 && h_val(&run->r[r], V_STATUS, 0) == 3 &&
               h_val(&run->r[r], V_RH, 0) == rh_calls;
    if (!ok(all, "N=%d a NaN, then an inf in another rank's block, in 80 KB averages "
            "(%s%s): RING_ERR_NONFINITE on every rank, and the next call finite", n,
            n == 3 ? "the ring" : "Rabenseifner's", piece != NULL ? " in pieces of 4K" : "") &&
        run != NULL)
        h_diag(run);
}

/* rank 1 sets option to value, rank 0 keeps the default */
static void check_disagree(const char *option, const char *value)
{
    rh_mode_t mode = M_CORRECT;
    const h_setting_t settings[] = {{1, option, value}, {0, NULL, NULL}};
    h_run_t *run = run_ring(2, &mode, settings, NULL, NULL);
    int all = run != NULL;
    char flag[64];

    snprintf(flag, sizeof(flag), "--%s", option);
    for (int r = 0; run != NULL && r < 2; r++)
        all &= run->r[r].exited && run->r[r].code != 0 && run->r[r].t_end < 8 &&
               strstr(run->r[r].msg, flag) != NULL && strstr(run->r[r].msg, "differs") != NULL;
    if (!ok(all, "rank 1 %s %s, rank 0 the default: both fail at open, saying %s differs",
            flag, value, flag) && run != NULL)
        h_diag(run);
}

int main(void)
{
    plan(4 * 8 + 4 + 4 + 4 + 3 + 2);
    check_correct(4, "1M", 1u << 20, NULL);
    check_correct(8, "1M", 1u << 20, NULL);
    check_correct(3, "1M", 1u << 20, NULL);
    check_correct(5, "1M", 1u << 20, NULL);
    check_correct(4, "0", 0, NULL);
    check_correct(4, "2M", 2u << 20, NULL);
    check_correct(4, "1M", 1u << 20, "4K");
    check_correct(8, "1M", 1u << 20, "4K");
    check_fit(4, "on");
    check_fit(8, "on");
    check_fit(4, "autotune");
    check_fit(4, "default");
    check_nonfinite(4, NULL);
    check_nonfinite(8, NULL);
    check_nonfinite(3, NULL);
    check_nonfinite(4, "4K");
    check_failure(4, 2, SIGKILL);
    check_failure(4, 1, SIGSTOP);
    check_failure(8, 5, SIGKILL);
    check_failure(8, 0, SIGSTOP);
    check_other(4, M_OTHER_COUNT);
    check_other(4, M_OTHER_SMALL);
    check_other(4, M_OTHER_PIECES);
    check_disagree("rh-max-bytes", "2M");
    check_disagree("rh-piece-bytes", "512K");
    return done_testing();
}
