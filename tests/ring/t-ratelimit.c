/*
 * t-ratelimit.c - the TCP transport's bandwidth cap (--rate-limit,
 * RING_RATE_LIMIT): the strict rate parser (src/parse.c) and its config
 * entry; the token bucket seen straight through the transport API in one
 * process (the rate, the burst, control messages that never wait, a wait()
 * that sleeps instead of spinning); and a real ring of 2 processes on
 * 127.0.0.1 whose bus bandwidth must come out at the cap, with correct
 * results, far below the unlimited speed and without burning the CPU.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ringd/config.h>

#include "harness.h"
#include "parse.h"
#include "tap.h"
#include "tcp_pair.h"
#include "token_bucket.h"
#include "transport.h"

static double cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- ring_parse_rate ----------------------------------------------------------------- */

static void test_parse_rate(void)
{
    static const struct {
        const char *text;
        double want; /* bytes/s */
    } good[] = {
        {"1gbit", 125e6},      {"500mbit", 62.5e6},   {"100kbit", 12500},  {"1000bit", 125},
        {"125mbps", 125e6},    {"1gbps", 1e9},        {"10kbps", 1e4},     {"20mbps", 20e6},
        {"1000", 1000},        {"0", 0},              {"0mbit", 0},        {"0.0", 0},
        {"1.5gbit", 187.5e6},  {"2.5mbps", 2.5e6},    {".5kbps", 500},     {"7.", 7},
        {"1Gbit", 125e6},      {"10MBPS", 10e6},      {"64bps", 64},       {"1tbit", 125e9},
        {"2tbps", 2e12},       {"1kibit", 128},       {"1mibps", 1048576}, {"8gibit", 1073741824},
        {"007mbit", 875000},   {"1000000000000000000", 1e18},
    };
    static const char *const bad[] = {
        "",       "-1",     "-1mbit",   "+5mbit", " 1mbit", "1mbit ", "1 mbit", "mbit",
        "1.2.3",  ".",      "1e6",      "1e3bit", "0x10",   "inf",    "nan",    "1mb",
        "1m",     "1k",     "1Mbits",   "1gbitx", "1bitbit", "1,5mbit", "10kbpss", "1 ",
        "1000000000000001000", "2000000000000000000", "9000000tbps", "99999999999999999999tbit",
        "1" "00000000000000000000000000000000000000000000000000000000000000000000000000000"
        "000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "000000000000000000000000000000000000000000000000000000000000000000000000000000000",
    };
    int failed = 0;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        double v = -1;

        if (ring_parse_rate(good[i].text, &v) != 0 || fabs(v - good[i].want) > 1e-9 * good[i].want) {
            diag("ring_parse_rate(\"%s\"): %s %.17g, want %.17g", good[i].text,
                 ring_parse_rate(good[i].text, &v) != 0 ? "refused" : "got", v, good[i].want);
            failed++;
        }
    }
    ok(!failed, "ring_parse_rate reads %zu tc-style rates (bit = bits/s, bps = bytes/s, "
       "plain = bytes/s)", sizeof(good) / sizeof(good[0]));

    failed = 0;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        double v = 12345;

        if (ring_parse_rate(bad[i], &v) != -1 || v != 12345) {
            diag("ring_parse_rate(\"%.40s\") was accepted (%.17g) or touched the output",
                 bad[i], v);
            failed++;
        }
    }
    ok(!failed, "ring_parse_rate refuses %zu malformed, negative or overflowing rates, leaving "
       "the output alone", sizeof(bad) / sizeof(bad[0]));
    {
        double v = 1;
        ok(ring_parse_rate(NULL, &v) == -1 && v == 1, "ring_parse_rate(NULL) is refused");
    }

    /* ring_format_rate: the whole-number form with the fewest digits; it reads back exactly */
    {
        static const struct {
            double bps;
            const char *want;
        } fmt[] = {
            {0, "0"},           {125e6, "1gbit"},   {20e6, "20mbps"},   {62.5e6, "500mbit"},
            {12500, "100kbit"}, {125, "1kbit"},     {1000, "1kbps"},     {187.5, "1500bit"},
            {1e9, "1gbps"},     {7, "7"},           {0.125, "1bit"},    {1048576, "1048576"},
        };
        char buf[64];
        int bad_fmt = 0;

        for (size_t i = 0; i < sizeof(fmt) / sizeof(fmt[0]); i++) {
            double back = -1;

            ring_format_rate(fmt[i].bps, buf, sizeof(buf));
            if (strcmp(buf, fmt[i].want) != 0 || ring_parse_rate(buf, &back) != 0 ||
                back != fmt[i].bps) {
                diag("ring_format_rate(%.17g) = \"%s\", want \"%s\" (reads back as %.17g)",
                     fmt[i].bps, buf, fmt[i].want, back);
                bad_fmt++;
            }
        }
        ok(!bad_fmt, "ring_format_rate picks the exact form with the fewest digits and it reads back");
    }
}

/* ---- the config entry ---------------------------------------------------------------- */

static void test_config(void)
{
    ring_config_t cfg;
    char *text = NULL;
    size_t len = 0;
    FILE *out;

    ring_config_init(&cfg);
    ok(cfg.rate_limit_bps == 0, "rate-limit defaults to 0 (unlimited)");
    ok(ring_config_set(&cfg, "--rate-limit", "160mbit", RING_SRC_FLAG) == RING_OK &&
           cfg.rate_limit_bps == 20e6,
       "--rate-limit 160mbit is 20e6 bytes/s");
    ok(ring_config_set(&cfg, "rate-limit", "fast", RING_SRC_FLAG) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "--rate-limit") != NULL &&
           strstr(ring_last_error(), "RING_RATE_LIMIT") != NULL &&
           strstr(ring_last_error(), "'fast'") != NULL && cfg.rate_limit_bps == 20e6,
       "--rate-limit fast is RING_ERR_INVALID naming flag, variable and value; the old value "
       "stays");
    out = open_memstream(&text, &len);
    ring_config_print(&cfg, out);
    fclose(out);
    like(text, "20mbps", "ring_config_print shows the rate as 20mbps");
    like(text, "(flag, RING_RATE_LIMIT)", "... set by a flag");
    free(text);
    ring_config_free(&cfg);

    setenv("RING_RATE_LIMIT", "1gbit", 1);
    ring_config_init(&cfg);
    ok(ring_config_load_env(&cfg) == RING_OK && cfg.rate_limit_bps == 125e6,
       "RING_RATE_LIMIT=1gbit is read (125e6 bytes/s)");
    ring_config_free(&cfg);
    setenv("RING_RATE_LIMIT", "-5mbit", 1);
    ring_config_init(&cfg);
    ok(ring_config_load_env(&cfg) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "RING_RATE_LIMIT") != NULL,
       "RING_RATE_LIMIT=-5mbit is RING_ERR_INVALID naming the variable");
    ring_config_free(&cfg);
    unsetenv("RING_RATE_LIMIT");

    text = NULL;
    out = open_memstream(&text, &len);
    ring_config_print_help(out);
    fclose(out);
    like(text, "--rate-limit RATE (e.g. 1gbit, 125mbps)", "--help shows --rate-limit RATE");
    like(text, "per connection, sending side; tc-style units", "--help says what it caps");
    free(text);
}

/* ---- the bucket through the transport API, in one process ---------------------------- */

/* The bucket's arithmetic alone (transport/token_bucket.c), at made-up times. */
static void test_bucket_math(void)
{
    ring_bucket_t b, off;

    ring_bucket_init(&b, 1e6, 100.0); /* 1 MB/s: 10 ms = 10 KB < the 64 KiB smallest bucket */
    ok(b.burst == 65536 && b.quantum == 32768 && b.tokens == 65536 && b.refilled == 100.0,
       "1 MB/s: a 64 KiB bucket, full, sends of half a bucket (burst %.0f, quantum %.0f)",
       b.burst, b.quantum);
    ok(ring_bucket_delay(&b, 100) == 0 && ring_bucket_delay(&b, 1e9) == 0,
       "a full bucket lets a small queue and a large one start at once");
    ring_bucket_take(&b, 65536 + 32768); /* a control message ran it into debt */
    ok(fabs(ring_bucket_delay(&b, 1000) - (32768 + 1000) / 1e6) < 1e-12 &&
           fabs(ring_bucket_delay(&b, 1e9) - (32768 + 32768) / 1e6) < 1e-12,
       "in debt: a short queue waits for the debt plus itself, a long one plus a quantum");
    ring_bucket_refill(&b, 100.05);
    ok(fabs(b.tokens - (-32768 + 50000)) < 1e-6, "50 ms at 1 MB/s adds 50000 tokens (%.0f)",
       b.tokens);
    ring_bucket_refill(&b, 101.0);
    ok(b.tokens == 65536 && b.refilled == 101.0, "a long pause fills the bucket, no more");
    ring_bucket_refill(&b, 100.5);
    ok(b.tokens == 65536 && b.refilled == 101.0, "a clock that seems to go back changes nothing");
    ring_bucket_init(&off, 0, 5.0);
    ring_bucket_take(&off, 1e12);
    ok(!ring_bucket_on(&off) && ring_bucket_delay(&off, 1e12) == 0 && off.tokens == 0,
       "rate 0 is no limit: never a delay, nothing counted");
}

static void test_bucket(void)
{
    enum { NMSG = 16, MSG = 256 * 1024 };
    static unsigned char src[NMSG][MSG], dst[NMSG][MSG];
    ring_tp_req_t sreq[NMSG], rreq[NMSG], s_ctrl, r_ctrl, s_late, r_late;
    unsigned char ctrl_out[64] = "ABORT", ctrl_in[256], late_out[1000], late_in[1000];
    const double rate = 2e6; /* bytes/s: burst max(64K, 20K) = 64K; 4 MiB take ~2 s */
    pair_t p;
    double t0, c0, t_last = 0, wall, cpu;
    long loops = 0;
    int all = 0, bad = 0;

    if (pair_open(&p, rate) != 0) {
        bail("cannot open a tcp pair on 127.0.0.1: %s", ring_last_error());
    }
    for (int m = 0; m < NMSG; m++)
        for (int i = 0; i < MSG; i++)
            src[m][i] = (unsigned char)(m * 31 + i * 7);
    memset(dst, 0, sizeof(dst));

    /* 1. 16 x 256 KiB at 2 MB/s: (4 MiB + prefixes - 64 KiB of burst) / rate = 2.07 s: the
     *    cap holds within 10 % over 2 s */
    for (int m = 0; m < NMSG; m++) {
        memset(&rreq[m], 0, sizeof(rreq[m]));
        rreq[m].iov[0] = (struct iovec){dst[m], MSG};
        rreq[m].iovcnt = 1;
        p.ops->post_recv(p.rx, &rreq[m]);
    }
    t0 = h_now();
    c0 = cpu_now();
    for (int m = 0; m < NMSG; m++) {
        memset(&sreq[m], 0, sizeof(sreq[m]));
        sreq[m].iov[0] = (struct iovec){src[m], MSG};
        sreq[m].iovcnt = 1;
        p.ops->post_send(p.tx, &sreq[m]);
    }
    while (!all && h_now() < t0 + 10) {
        all = 1;
        for (int m = 0; m < NMSG; m++)
            all &= rreq[m].done;
        if (!all && p.ops->progress(p.tp) == 0)
            p.ops->wait(p.tp, 100);
        loops++;
    }
    wall = h_now() - t0;
    cpu = cpu_now() - c0;
    for (int m = 0; m < NMSG; m++)
        bad += rreq[m].status != RING_OK || rreq[m].bytes != MSG || memcmp(src[m], dst[m], MSG);
    ok(all && !bad, "transport at 2 MB/s: 16 x 256 KiB arrive whole and intact");
    {
        double want = (NMSG * (MSG + 4.0) - 65536) / rate;
        ok(wall > 0.9 * want && wall < 1.1 * want,
           "transport at 2 MB/s: 4 MiB take %.3f s, want %.3f s +-10%% (%.2f MB/s)", wall, want,
           NMSG * (double)MSG / wall / 1e6);
    }
    ok(cpu < 0.2 * wall && loops < 2000,
       "transport at 2 MB/s: no busy loop (CPU %.3f s of %.3f s, %ld progress/wait rounds)", cpu,
       wall, loops);

    /* 2. the bucket is empty now (nothing sent since): a 64-byte control message
     *    goes at once, and so does a big one queued ahead of it */
    {
        int done_ctrl = 0;

        memset(&r_ctrl, 0, sizeof(r_ctrl));
        r_ctrl.iov[0] = (struct iovec){ctrl_in, sizeof(ctrl_in)};
        r_ctrl.iovcnt = 1;
        p.ops->post_recv(p.rx, &r_ctrl);
        memset(&s_ctrl, 0, sizeof(s_ctrl));
        s_ctrl.iov[0] = (struct iovec){ctrl_out, sizeof(ctrl_out)};
        s_ctrl.iovcnt = 1;
        t0 = h_now();
        p.ops->post_send(p.tx, &s_ctrl);
        while (!done_ctrl && h_now() < t0 + 5) {
            done_ctrl = r_ctrl.done;
            if (!done_ctrl && p.ops->progress(p.tp) == 0)
                p.ops->wait(p.tp, 100);
        }
        t_last = h_now() - t0;
        ok(done_ctrl && r_ctrl.status == RING_OK && r_ctrl.bytes == 64 &&
               memcmp(ctrl_in, "ABORT", 6) == 0 && t_last < 0.05,
           "a 64-byte control message with an empty bucket arrives at once (%.1f ms)",
           t_last * 1e3);
    }
    {
        /* 1 MiB at 4 MB/s would take 0.25 s; queued ahead of a notice it must not delay it */
        int done_ctrl = 0;

        for (int m = 0; m < 4; m++) {
            memset(&rreq[m], 0, sizeof(rreq[m]));
            rreq[m].iov[0] = (struct iovec){dst[m], MSG};
            rreq[m].iovcnt = 1;
            p.ops->post_recv(p.rx, &rreq[m]);
        }
        memset(&r_ctrl, 0, sizeof(r_ctrl));
        r_ctrl.iov[0] = (struct iovec){ctrl_in, sizeof(ctrl_in)};
        r_ctrl.iovcnt = 1;
        p.ops->post_recv(p.rx, &r_ctrl);
        t0 = h_now();
        for (int m = 0; m < 4; m++) {
            memset(&sreq[m], 0, sizeof(sreq[m]));
            sreq[m].iov[0] = (struct iovec){src[m], MSG};
            sreq[m].iovcnt = 1;
            p.ops->post_send(p.tx, &sreq[m]);
        }
        memset(&s_ctrl, 0, sizeof(s_ctrl));
        s_ctrl.iov[0] = (struct iovec){ctrl_out, sizeof(ctrl_out)};
        s_ctrl.iovcnt = 1;
        p.ops->post_send(p.tx, &s_ctrl);
        pair_run_until(&p, &r_ctrl.done, t0 + 5, NULL);
        done_ctrl = r_ctrl.done && r_ctrl.status == RING_OK;
        t_last = h_now() - t0;
        ok(done_ctrl && rreq[3].done && t_last < 0.1,
           "a notice queued behind 1 MiB of data pulls it through: %.1f ms, not 500", t_last * 1e3);
    }
    {
        /* ... but what it pulled is owed: 1000 bytes now wait for the debt (~0.5 s) */
        int arrived;

        memset(&r_late, 0, sizeof(r_late));
        r_late.iov[0] = (struct iovec){late_in, sizeof(late_in)};
        r_late.iovcnt = 1;
        p.ops->post_recv(p.rx, &r_late);
        memset(late_out, 0x5a, sizeof(late_out));
        memset(&s_late, 0, sizeof(s_late));
        s_late.iov[0] = (struct iovec){late_out, sizeof(late_out)};
        s_late.iovcnt = 1;
        t0 = h_now();
        p.ops->post_send(p.tx, &s_late);
        pair_run_until(&p, &r_late.done, t0 + 0.3, NULL);
        arrived = r_late.done;
        pair_run_until(&p, &r_late.done, t0 + 5, NULL);
        t_last = h_now() - t0;
        ok(!arrived && r_late.done && r_late.status == RING_OK && t_last > 0.3 && t_last < 1.0,
           "the debt is paid: 1000 bytes after the pulled 1 MiB arrive after %.0f ms "
           "(~500 expected)", t_last * 1e3);
    }
    pair_close(&p);

    /* 3. rate 0: no bucket at all, 4 MiB goes at loopback speed */
    if (pair_open(&p, 0) != 0)
        bail("cannot open a tcp pair on 127.0.0.1: %s", ring_last_error());
    for (int m = 0; m < NMSG; m++) {
        memset(&rreq[m], 0, sizeof(rreq[m]));
        rreq[m].iov[0] = (struct iovec){dst[m], MSG};
        rreq[m].iovcnt = 1;
        p.ops->post_recv(p.rx, &rreq[m]);
    }
    t0 = h_now();
    for (int m = 0; m < NMSG; m++) {
        memset(&sreq[m], 0, sizeof(sreq[m]));
        sreq[m].iov[0] = (struct iovec){src[m], MSG};
        sreq[m].iovcnt = 1;
        p.ops->post_send(p.tx, &sreq[m]);
    }
    pair_run_until(&p, &rreq[NMSG - 1].done, t0 + 10, NULL);
    wall = h_now() - t0;
    ok(rreq[NMSG - 1].done && wall < 0.25,
       "rate 0 is unlimited: 4 MiB in %.1f ms", wall * 1e3);
    pair_close(&p);

    /* 4. an urgent send (an ABORT notice) overtakes queued sends not yet begun */
    if (pair_open(&p, 0) != 0)
        bail("cannot open a tcp pair on 127.0.0.1: %s", ring_last_error());
    for (int m = 0; m < 3; m++) {
        memset(&rreq[m], 0, sizeof(rreq[m]));
        rreq[m].iov[0] = (struct iovec){dst[m], MSG};
        rreq[m].iovcnt = 1;
        p.ops->post_recv(p.rx, &rreq[m]);
    }
    for (int m = 0; m < 3; m++) {
        memset(&sreq[m], 0, sizeof(sreq[m]));
        sreq[m].iov[0] = (struct iovec){src[m], m < 2 ? MSG : 8};
        sreq[m].iovcnt = 1;
        sreq[m].urgent = m == 2; /* posted last, before any progress: goes first */
        p.ops->post_send(p.tx, &sreq[m]);
    }
    pair_run_until(&p, &rreq[2].done, h_now() + 10, NULL);
    ok(rreq[0].done && rreq[0].bytes == 8 && memcmp(dst[0], src[2], 8) == 0 &&
           rreq[1].bytes == MSG && memcmp(dst[1], src[0], MSG) == 0 && rreq[2].bytes == MSG,
       "an urgent message overtakes the queued ones (arrived as message 1: %zu bytes)",
       rreq[0].bytes);
    pair_close(&p);
}

/* ---- a real ring: N=2, 16 MiB fp32 ----------------------------------------------------- */

#define RING_COUNT ((size_t)4 << 20) /* 4M floats = 16 MiB */
#define V_WALL 0
#define V_CPU 1
#define V_BAD 2
#define V_ITERS 3

typedef struct ring_case {
    int iters;
} ring_case_t;

static int ring_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const ring_case_t *c = arg;
    ring_comm_t *comm;
    ring_status_t st;
    float *send, *recv, warm[1024];
    double t0, c0;
    uint64_t bad = 0;

    send = malloc(RING_COUNT * sizeof(float));
    recv = malloc(RING_COUNT * sizeof(float));
    if (send == NULL || recv == NULL) {
        h_msg("out of memory");
        return 99;
    }
    /* small integers: every sum is exact in fp32 */
    for (size_t i = 0; i < RING_COUNT; i++)
        send[i] = (float)(i % 1021) + (float)rank;
    st = ring_comm_open(cfg, &comm);
    if (st != RING_OK)
        return h_fail(st, "ring_comm_open");
    /* a small allreduce first: both ranks start the timed part together */
    for (size_t i = 0; i < 1024; i++)
        warm[i] = 1;
    st = ring_allreduce(comm, warm, warm, 1024, RING_FLOAT32, RING_SUM);
    if (st != RING_OK)
        return h_fail(st, "warm-up ring_allreduce");
    t0 = h_now();
    c0 = cpu_now();
    for (int it = 0; it < c->iters; it++) {
        for (size_t i = 0; i < RING_COUNT; i += 4096)
            recv[i] = NAN; /* a stale result must not pass */
        st = ring_allreduce(comm, send, recv, RING_COUNT, RING_FLOAT32, RING_SUM);
        if (st != RING_OK)
            return h_fail(st, "ring_allreduce");
        for (size_t i = 0; i < RING_COUNT; i++)
            bad += recv[i] != (float)(2 * (i % 1021)) + (float)(n * (n - 1) / 2);
    }
    h_put_double(V_WALL, h_now() - t0);
    h_put_double(V_CPU, cpu_now() - c0);
    h_put(V_BAD, bad);
    h_put(V_ITERS, (uint64_t)c->iters);
    ring_comm_close(comm);
    free(send);
    free(recv);
    return 0;
}

static h_run_t the_run; /* large: not on the stack */

/* Run the ring; fills busbw[] (bytes/s per rank) and cpu_frac[]; 0 when every rank was fine. */
static int run_ring(const char *label, const h_setting_t *settings, int iters, double *busbw,
                    double *cpu_frac)
{
    ring_case_t c = {.iters = iters};
    h_ring_spec_t rs = {.label = label, .n = 2, .settings = settings, .fn = ring_child,
                        .arg = &c, .budget = 20, .run = &the_run};
    int good = 1;

    h_run_ring(&rs);
    for (int r = 0; r < 2; r++) {
        const h_result_t *res = &the_run.r[r];
        double wall = h_val_double(res, V_WALL, 0);

        good &= res->exited && res->code == 0 && res->has_val[V_BAD] &&
                h_val(res, V_BAD, 1) == 0 && wall > 0;
        /* N=2: each rank sends S bytes per allreduce (S/2 reduce-scatter, S/2 allgather) */
        busbw[r] = wall > 0 ? (double)iters * RING_COUNT * sizeof(float) / wall : 0;
        cpu_frac[r] = wall > 0 ? h_val_double(res, V_CPU, 0) / wall : 1;
    }
    if (!ok(good, "%s: both ranks exit 0 with exact results (%d x 16 MiB fp32 sum, %.2f s)",
            label, iters, the_run.t_done))
        h_diag(&the_run);
    return good ? 0 : -1;
}

static void test_ring(void)
{
    static const h_setting_t limited[] = {{-1, "rate-limit", "20mbps"}, {0, NULL, NULL}};
    const double cap = 20e6;
    double bw_lim[2], cpu_lim[2], bw_free[2], cpu_free[2];
    double lim_max, free_min;

    run_ring("N=2 --rate-limit 20mbps", limited, 3, bw_lim, cpu_lim);
    for (int r = 0; r < 2; r++)
        ok(bw_lim[r] >= 0.6 * cap && bw_lim[r] <= 1.05 * cap,
           "N=2 --rate-limit 20mbps: rank %d busbw %.2f MB/s = %.3f x the cap (0.6..1.05)", r,
           bw_lim[r] / 1e6, bw_lim[r] / cap);
    for (int r = 0; r < 2; r++)
        ok(cpu_lim[r] < 0.5, "N=2 --rate-limit 20mbps: rank %d uses %.0f%% of a CPU (< 50%%: "
           "no busy loop)", r, cpu_lim[r] * 100);

    run_ring("N=2 unlimited", NULL, 3, bw_free, cpu_free);
    lim_max = bw_lim[0] > bw_lim[1] ? bw_lim[0] : bw_lim[1];
    free_min = bw_free[0] < bw_free[1] ? bw_free[0] : bw_free[1];
    ok(free_min > 3 * lim_max, "N=2 unlimited: busbw %.0f MB/s is more than 3x the limited "
       "%.2f MB/s (%.1fx)", free_min / 1e6, lim_max / 1e6, lim_max > 0 ? free_min / lim_max : 0);
}

int main(void)
{
    double t0 = h_now();

    setvbuf(stdout, NULL, _IOLBF, 0);
    plan(35);
    test_parse_rate(); /* 4 */
    test_bucket_math(); /* 7 */
    test_config();     /* 9 */
    test_bucket();     /* 8 */
    test_ring();       /* 7 */
    diag("t-ratelimit: %.1f s", h_now() - t0);
    return done_testing();
}
