/*
 * t-codec-fit.c - --codec auto and the codec's timing at open
 * (src/diag/codec_fit.c), across real processes on 127.0.0.1.
 *
 * - --codec auto over shm (N = 3) and tcp (N = 2): every rank reports the
 *   same choice (fp32 or fp16) and rank 0's times of both; the calls that
 *   follow travel as the choice on every rank (every rank holds the same
 *   bits; integer sums exact when fp32 was chosen, within fp16's rounding
 *   when fp16 was).
 * - --codec fp16 over shm and tcp, --codec none over shm: nothing timed at
 *   open; ring_comm_time_codec (what ringd's summary reports) gives every
 *   rank rank 0's two times, and the codec stays.
 * - A peer with --codec auto and one with fp16 fail at open, naming --codec.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tap.h"

enum { V_CODEC, V_FP32_US, V_CODEC_US, V_BYTES, V_HASH, V_WRONG, V_MAXERR, V_T32, V_TC };

#define COUNT 100000

/* integer data, summed: exact in fp32; fp16 rounds each peer's share */
static int rank_main(int rank, int n, const ring_config_t *cfg, void *arg)
{
    static float buf[COUNT];
    ring_comm_t *comm;
    ring_comm_stats_t s;
    ring_status_t st = ring_comm_open(cfg, &comm);
    uint64_t hash = 1469598103934665603ull, wrong = 0;
    double maxerr = 0;

    if (st != RING_OK)
        return h_fail(st, "ring_comm_open");
    if (*(const int *)arg) { /* on demand, before the checked call */
        double t32 = 0, tc = 0;

        st = ring_comm_time_codec(comm, (size_t)1 << 20, &t32, &tc);
        h_put_double(V_T32, t32);
        h_put_double(V_TC, tc);
    }
    for (size_t i = 0; i < COUNT; i++)
        buf[i] = (float)((i * 7 + (size_t)rank) % 1000);
    /* 30 small calls first: under auto over shm the fit's calls ran on the direct
     * allreduce's boards at the set-up's rounds, which the user's rounds must not
     * take for their own (direct.c's rebase) */
    for (int k = 0; k < 30 && st == RING_OK; k++) {
        float small[64];

        for (int i = 0; i < 64; i++)
            small[i] = (float)(rank + k);
        st = ring_allreduce(comm, small, small, 64, RING_FLOAT32, RING_SUM);
        for (int i = 0; st == RING_OK && i < 64; i++)
            wrong += small[i] != (float)(n * (n - 1) / 2 + n * k);
    }
    if (st == RING_OK)
        st = ring_allreduce(comm, buf, buf, COUNT, RING_FLOAT32, RING_SUM);
    for (size_t i = 0; st == RING_OK && i < COUNT; i++) {
        double want = 0;
        uint32_t bits;

        for (int r = 0; r < n; r++)
            want += (double)((i * 7 + (size_t)r) % 1000);
        wrong += (double)buf[i] != want;
        maxerr = fabs(buf[i] - want) / (want > 1 ? want : 1) > maxerr
                     ? fabs(buf[i] - want) / (want > 1 ? want : 1) : maxerr;
        memcpy(&bits, &buf[i], sizeof(bits));
        hash = (hash ^ bits) * 1099511628211ull;
    }
    if (ring_comm_get_stats(comm, &s) == RING_OK) {
        h_put(V_CODEC, s.codec);
        h_put(V_FP32_US, s.codec_fit_fp32_us);
        h_put(V_CODEC_US, s.codec_fit_codec_us);
        h_put(V_BYTES, s.codec_fit_bytes);
    }
    h_put(V_HASH, hash);
    h_put(V_WRONG, wrong);
    h_put_double(V_MAXERR, maxerr);
    ring_comm_close(comm);
    return st == RING_OK ? 0 : h_fail(st, "ring_allreduce");
}

static h_run_t *run_ring(int n, const h_setting_t *settings, int *timecall)
{
    h_ring_spec_t rs = {.n = n, .settings = settings, .fn = rank_main, .arg = timecall,
                        .budget = 30, .timeout = NULL, .actions = NULL, .nactions = 0,
                        .on_error = H_DIAG};

    return h_run_ring(&rs);
}

/* codec: the setting; timed: whether the fit must have run; keep: the codec it
 * must run (-1: whatever the fit chose, the same on every rank) */
static void check(int n, const char *transport, const char *codec, int timed, int keep,
                  int timecall)
{
    h_setting_t settings[] = {{-1, "transport", transport}, {-1, "codec", codec},
                              {0, NULL, NULL}};
    h_run_t *run = run_ring(n, settings, &timecall);
    int all = run != NULL, same = run != NULL, values = run != NULL;
    uint64_t chose = run != NULL ? h_val(&run->r[0], V_CODEC, 9) : 9;

    for (int r = 0; run != NULL && r < n; r++) {
        const h_result_t *res = &run->r[r];

        all &= res->exited && res->code == 0;
        same &= h_val(res, V_CODEC, 8) == chose && h_val(res, V_HASH, 0) ==
                                                       h_val(&run->r[0], V_HASH, 1) &&
                h_val(res, V_FP32_US, 0) == h_val(&run->r[0], V_FP32_US, 1) &&
                h_val(res, V_CODEC_US, 0) == h_val(&run->r[0], V_CODEC_US, 1);
        values &= chose == 0 ? h_val(res, V_WRONG, 1) == 0
                             : h_val(res, V_WRONG, 1) <= COUNT &&
                                   h_val_double(res, V_MAXERR, 1) < 0.002 * n;
        values &= timed ? h_val(res, V_FP32_US, 0) > 0 && h_val(res, V_CODEC_US, 0) > 0 &&
                              h_val(res, V_BYTES, 0) == 4u << 20
                        : h_val(res, V_FP32_US, 1) == 0 && h_val(res, V_CODEC_US, 1) == 0;
        if (timecall)
            values &= h_val_double(res, V_T32, 0) > 0 && h_val_double(res, V_TC, 0) > 0 &&
                      h_val_double(res, V_T32, 0) == h_val_double(&run->r[0], V_T32, 1) &&
                      h_val_double(res, V_TC, 0) == h_val_double(&run->r[0], V_TC, 1);
    }
    if (keep >= 0)
        values &= chose == (uint64_t)keep;
    if (!ok(all && same && values, "N=%d --codec %s over %s: %s%s; every rank runs the same "
            "(chose %s), same bits, %s", n, codec, transport,
            timed ? "fp32 and the codec timed at open, rank 0's times on every rank"
                  : "nothing timed at open",
            timecall ? "; ring_comm_time_codec gives every rank rank 0's times" : "",
            chose == 0 ? "fp32" : chose == 1 ? "fp16" : "?",
            chose == 0 ? "integer sums exact" : "within fp16's rounding") && run != NULL)
        h_diag(run);
    else if (run != NULL && timed)
        diag("rank 0 timed %llu us fp32, %llu us codec",
             (unsigned long long)h_val(&run->r[0], V_FP32_US, 0),
             (unsigned long long)h_val(&run->r[0], V_CODEC_US, 0));
}

static void check_disagree(void)
{
    static const h_setting_t settings[] = {{-1, "transport", "tcp"}, {0, "codec", "fp16"},
                                           {1, "codec", "auto"}, {0, NULL, NULL}};
    int timecall = 0;
    h_run_t *run = run_ring(2, settings, &timecall);
    int all = run != NULL;

    for (int r = 0; run != NULL && r < 2; r++)
        all &= run->r[r].exited && run->r[r].code != 0 && run->r[r].t_end < 8 &&
               strstr(run->r[r].msg, "codec") != NULL;
    if (!ok(all, "rank 0 --codec fp16, rank 1 --codec auto: both fail at open, naming the "
            "codec") && run != NULL)
        h_diag(run);
    else if (run != NULL)
        diag("rank 0: %s", run->r[0].msg);
}

int main(void)
{
    plan(7);
    check(3, "shm", "auto", 1, -1, 0);
    check(2, "tcp", "auto", 1, -1, 0);
    check(4, "tcp", "auto", 1, -1, 0);
    check(2, "shm", "fp16", 0, 1, 1);
    check(2, "tcp", "fp16", 0, 1, 1);
    check(3, "shm", "none", 0, 0, 0);
    check_disagree();
    return done_testing();
}
