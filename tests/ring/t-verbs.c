/*
 * t-verbs.c - the ring over the RDMA verbs transport, across real processes:
 * allreduce correctness for N=2 and N=4 with each codec (none, fp16, bf16),
 * a 16 MiB message (many chunks, larger than a slot), the same bits as over
 * tcp, transport auto (shm with every peer on 127.0.0.1: no RDMA traffic)
 * and the ib-dev setting, an unknown device, a size
 * mismatch (small, and larger than a slot) and a peer killed mid-round.
 *
 * The job's secret (transport/verbs_boot.c): two peers with the same secret
 * form the ring and sum right; a peer with another secret, or none, is
 * refused and every peer's error names the secret; a stranger on rank 0's
 * bootstrap port that sends garbage, a fake queue-pair record, or a real
 * challenge and then a fake record reads nothing but rank 0's challenge (no
 * record byte), is dropped, and the ring forms and sums afterwards (the
 * stranger process is stranger_probe.c; the devices and their counters,
 * rdma_devices.c; what each rank does, verbs_rank.c).
 *
 * It needs an active RDMA device: on a host without one it prints
 * "1..0 # SKIP no active RDMA device (run under tools/lab/rxe-vm)". tests/lab/verbs.test
 * boots a QEMU guest with four Soft-RoCE devices (rxe0..rxe3, one per rank
 * with N=4) and runs it there. The bootstrap goes over 127.0.0.1 (harness.c),
 * the data over verbs.
 *
 * Every correctness case also checks that the data really went through the
 * RDMA devices: the packet counters (/sys/class/infiniband/DEV/ports/P/
 * hw_counters/sent_pkts on rxe, counters/port_xmit_packets otherwise) must grow by at least the packets the ring has to
 * move, and with at least as many devices as ranks, rank r's traffic must
 * leave through the (r mod k)-th active device and through no other.
 *
 * Error bound (as in t-codec-ring.c): |err| <= N (u + 2^-24) S + N 2^-39 B,
 * u = 2^-11 for fp16, 2^-8 for bf16 and 0 for fp32 on the wire, S = sum over
 * ranks of |x_r,i| and B >= the chunk's bound; an average divides it by N and
 * adds 2^-24 S / N.
 *
 * Env T_VERBS_TRANSPORT (default verbs) runs the same cases over another
 * transport; it exists to check this test itself (over tcp, the traffic checks
 * must fail).
 */
#include "ring_build.h"

#include <regex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ring_cuda.h"
#include "harness.h"
#include "rdma_devices.h"
#include "stranger_probe.h"
#include "tap.h"
#include "verbs_rank.h"

/* ---- RDMA devices and their packet counters (rdma_devices.c) --------------- */

static rdma_dev_t devs[RDMA_MAX_DEVS];
static int ndevs;
static const char *transport = "verbs";

static void read_counters(long long *c)
{
    rdma_counters_read(devs, ndevs, c);
}

/* ---- parent side ------------------------------------------------------- */

#define SECRET "0123456789abcdef-t-verbs" /* the job's secret (secret_cases) */

/* bytes per element on the wire */
static size_t codec_size(const char *codec)
{
    return strcmp(codec, "none") == 0 ? 4 : 2;
}

static h_run_t the_run;
static long long cnt_before[RDMA_MAX_DEVS], cnt_after[RDMA_MAX_DEVS];
static const char *connect_timeout = "30s"; /* TCG guests are slow to register memory and
                                              * connect QPs */

/* Run a ring over `tp` with settings `extra` (ends with name NULL; may be NULL). */
static const h_run_t *run_ring(int n, const vcase_t *c, const char *tp, const h_setting_t *extra,
                               const char *timeout, const h_action_t *act, int nact,
                               double budget)
{
    h_setting_t settings[12];
    int ns = 0;
    h_ring_spec_t rs = {.n = n, .fn = v_child, .arg = (void *)c, .settings = settings,
                        .timeout = timeout, .connect_timeout = connect_timeout,
                        .actions = act, .nactions = nact, .budget = budget, .grace = 5,
                        .run = &the_run};

    settings[ns++] = (h_setting_t){-1, "transport", tp};
    if (c->codec != NULL)
        settings[ns++] = (h_setting_t){-1, "codec", c->codec};
    for (int i = 0; extra != NULL && extra[i].name != NULL && ns < 11; i++)
        settings[ns++] = extra[i];
    settings[ns] = (h_setting_t){0, NULL, NULL};
    read_counters(cnt_before);
    h_run_ring(&rs);
    read_counters(cnt_after);
    return &the_run;
}

static int like_re(const char *text, const char *pattern, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int like_re(const char *text, const char *pattern, const char *fmt, ...)
{
    va_list ap;
    regex_t re;
    int m = 0, r;

    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) == 0) {
        m = regexec(&re, text, 0, NULL, 0) == 0;
        regfree(&re);
    }
    va_start(ap, fmt);
    r = tap_vok(m, fmt, ap);
    va_end(ap);
    if (!r)
        diag("    '%s'\n#   does not match /%s/", text, pattern);
    return r;
}

/* sent_pkts growth of device d in the last run, -1 if unknown */
static long long grew(int d)
{
    if (cnt_before[d] < 0 || cnt_after[d] < 0)
        return -1;
    return cnt_after[d] - cnt_before[d];
}

/*
 * The data went over the RDMA devices: the packets sent on all of them grew by
 * at least wire_bytes / 4096 (RoCE MTU <= 4096), and when there are at least
 * as many devices as ranks (and no ib-dev setting), exactly the devices of
 * ranks 0..n-1, (r mod k)-th for rank r, carried it.
 */
static void check_traffic(const char *label, int n, double wire_bytes, int per_rank)
{
    long long total = 0, need = (long long)(wire_bytes / 4096);
    char seen[256] = "";
    size_t off = 0;

    for (int d = 0; d < ndevs; d++) {
        long long g = grew(d);

        total += g > 0 ? g : 0;
        off += (size_t)snprintf(seen + off, sizeof(seen) - off, "%s%s +%lld", d ? "," : "",
                                devs[d].name, g);
        if (off >= sizeof(seen))
            off = sizeof(seen) - 1;
    }
    ok(total >= need && need > 0,
       "%s: the data went over RDMA: %lld packets sent on the rxe devices, at least %lld "
       "needed (%s)", label, total, need, seen);
    if (!per_rank)
        return;
    if (ndevs < n) {
        skip("fewer active devices than ranks: ranks share devices");
        return;
    }
    {
        int good = 1;

        for (int d = 0; d < ndevs; d++) {
            int used = d < n; /* rank r uses device r mod k = r */
            long long g = grew(d);

            good &= used ? g > 0 : g == 0;
        }
        ok(good, "%s: rank r sent through the r-th active device, one device per rank, the "
           "others idle (%s)", label, seen);
    }
}

/* The ops of c on n ranks over the transport under test: results, bits, bounds, traffic. */
static void run_check(const char *label, int n, const vcase_t *c, const h_setting_t *extra,
                      int per_rank)
{
    const h_run_t *run = run_ring(n, c, transport, extra, "20s", NULL, 0, 240);
    double wire = 0;
    int all_ok = 1;

    for (int r = 0; r < n; r++) {
        char d[96];

        all_ok &= h_outcome(&run->r[r]) == 0;
        if (!ok(h_outcome(&run->r[r]) == 0, "%s: rank %d exits 0 (%s)", label, r,
                h_describe(&run->r[r], d, sizeof(d))))
            h_diag(run);
    }
    for (int k = 0; k < c->nops; k++) {
        const vop_t *o = &c->ops[k];
        int same = 1, status_ok = 1, within = 1;
        double worst = 0;

        for (int r = 0; r < n; r++) {
            same &= h_val(&run->r[r], V_HASH + k, 1) == h_val(&run->r[0], V_HASH + k, 2);
            status_ok &= h_val(&run->r[r], V_STATUS + k, 99) == RING_OK;
            within &= h_val(&run->r[r], V_WRONG + k, 1) == 0;
            if (h_val_double(&run->r[r], V_RATIO + k, 0) > worst)
                worst = h_val_double(&run->r[r], V_RATIO + k, 0);
        }
        ok(status_ok && same && within,
           "%s: #%d count %zu %s: ok on every rank, bitwise identical, every element within "
           "the bound (worst err/bound %.3f)", label, k, o->count,
           o->op == RING_AVG ? "avg" : "sum", worst);
        /* each rank sends 2 (n-1)/n of the buffer */
        wire += 2.0 * (n - 1) * (double)o->count * (double)codec_size(c->codec);
    }
    if (all_ok)
        check_traffic(label, n, wire, per_rank);
    else
        ok(0, "%s: the data went over RDMA (not checked: a rank failed)", label);
}

static void add_op(vcase_t *c, size_t count, ring_op_t op)
{
    c->ops[c->nops++] = (vop_t){count, op};
}

/* rank status checks, as in t-fault.c */
static int rank_status_in(const h_run_t *run, int rank, int want1, int want2, const char *label)
{
    char d[96];
    int got = h_outcome(&run->r[rank]);

    if (!ok(got == want1 || got == want2, "%s: rank %d fails with %s%s%s (%s)", label, rank,
            ring_status_str((ring_status_t)want1), want2 != want1 ? " or " : "",
            want2 != want1 ? ring_status_str((ring_status_t)want2) : "",
            h_describe(&run->r[rank], d, sizeof(d)))) {
        h_diag(run);
        return 0;
    }
    return 1;
}

static void size_mismatch(int n, int odd_rank, size_t count, size_t odd_count)
{
    vcase_t c = {.kind = K_SIZE, .codec = "none", .count = count, .odd_rank = odd_rank,
                 .odd_count = odd_count};
    const h_run_t *run = run_ring(n, &c, transport, NULL, "20s", NULL, 0, 90);
    char label[128], a[32], b[32];

    snprintf(label, sizeof(label), "size mismatch N=%d (rank %d: %zu floats, others %zu)", n,
             odd_rank, odd_count, count);
    snprintf(a, sizeof(a), "%zu", count);
    snprintf(b, sizeof(b), "%zu", odd_count);
    for (int r = 0; r < n; r++) {
        rank_status_in(run, r, RING_ERR_MISMATCH, RING_ERR_MISMATCH, label);
        ok(run->r[r].t_end < 15.0, "%s: rank %d fails in %.2f s, before the 20 s timeout", label,
           r, run->r[r].t_end);
        like(run->r[r].msg, "count", "%s: rank %d's message says the count differs", label, r);
        ok(strstr(run->r[r].msg, a) != NULL && strstr(run->r[r].msg, b) != NULL,
           "%s: rank %d's message names both counts, %s and %s", label, r, a, b);
    }
}

/* Rank 1 with another codec: its neighbours refuse it at start-up and tell the ring,
 * so rank 3, which never met it, fails at once too, naming it and the setting. The
 * news travels as an ABORT over RDMA; a neighbour that closes right after sending it
 * must not lose it to its own leaving (transport/verbs.c, vb_check_alive). */
static void settings_mismatch(void)
{
    static const h_setting_t odd[] = {{1, "codec", "fp16"}, {0, NULL, NULL}};
    static const vcase_t c = {.kind = K_CHECK, .codec = "none", .nops = 1,
                              .ops = {{1009, RING_SUM}}};
    const h_run_t *run = run_ring(4, &c, transport, odd, "20s", NULL, 0, 90);
    const char *label = "codec mismatch N=4 (rank 1: fp16)";

    for (int r = 0; r < 4; r++) {
        rank_status_in(run, r, RING_ERR_MISMATCH, RING_ERR_MISMATCH, label);
        ok(run->r[r].t_end < 15.0, "%s: rank %d fails in %.2f s, before the 20 s timeout", label,
           r, run->r[r].t_end);
        like(run->r[r].msg, "codec (RING_CODEC)", "%s: rank %d's message names the codec", label,
             r);
    }
    like_re(run->r[3].msg, "rank 1[^0-9]", "%s: rank 3, no neighbour of rank 1, names it", label);
}

static void kill_mid_round(void)
{
    /* 4 MiB allreduces, timeout 8 s; rank 2 is killed 0.5 s after its first one finished */
    static const vcase_t c = {.kind = K_LOOP, .codec = "none", .count = 1u << 20,
                              .max_iters = 500, .max_time = 60};
    static const h_action_t act[] = {{2, 0.5, 2, SIGKILL}};
    const char *label = "SIGKILL rank 2 of 4 mid-round (timeout 8 s)";
    const h_run_t *run = run_ring(4, &c, transport, NULL, "8s", act, 1, 90);
    double t_kill = run->t_signal[2];
    char addr[80];

    h_addr(run, 2, addr, sizeof(addr));
    if (!ok(t_kill > 0 && run->r[2].signo == SIGKILL, "%s: rank 2 was killed at %.2f s", label,
            t_kill))
        h_diag(run);
    for (int r = 0; r < 4; r++) {
        double after = run->r[r].t_end - t_kill;

        if (r == 2)
            continue;
        rank_status_in(run, r, RING_ERR_REMOTE, RING_ERR_TIMED_OUT, label);
        /* 8 s of timeout plus slack for a TCG guest */
        ok(t_kill > 0 && after < 8.0 + 4.0, "%s: rank %d fails %.2f s after the kill, within "
           "the timeout, no hang", label, r, after);
        like(run->r[r].msg, "rank 2", "%s: rank %d's message names rank 2", label, r);
        like_re(run->r[r].msg, "round [0-9]+", "%s: rank %d's message names the round", label,
                r);
    }
    diag("%s: rank 0 did %llu allreduces; its message: %s", label,
         (unsigned long long)h_val(&run->r[0], V_ITERS, 0), run->r[0].msg);
}

/* The job's secret on the verbs bootstrap (transport/verbs_boot.c). */
static void secret_cases(void)
{
    static const h_setting_t same[] = {{-1, "secret", SECRET}, {0, NULL, NULL}};
    static const h_setting_t frames[] = {{-1, "secret", SECRET}, {-1, "auth", "frames"},
                                         {0, NULL, NULL}};
    static const h_setting_t other[] = {{-1, "secret", SECRET}, {1, "secret", SECRET "-other"},
                                        {0, NULL, NULL}};
    static const h_setting_t none[] = {{0, "secret", SECRET}, {0, NULL, NULL}};
    static const h_setting_t *const refused[] = {other, none};
    static const char *const refused_name[] = {"rank 1 has another secret",
                                               "rank 1 has no secret"};
    vcase_t c;
    const h_result_t *r1;

    memset(&c, 0, sizeof(c));
    c.kind = K_CHECK;
    c.codec = "none";
    c.seed = 700;
    add_op(&c, 1009, RING_SUM);
    add_op(&c, 65537, RING_AVG);
    run_check("N=2, both with the job's secret", 2, &c, same, 1);
    /* --auth frames over RDMA: every frame tagged (src/frame_mac.c), the same sums */
    run_check("N=2 with --auth frames", 2, &c, frames, 1);

    /* refused: the ring never forms, and each side's error names the secret */
    connect_timeout = "8s";
    for (int k = 0; k < 2; k++) {
        const h_run_t *run = run_ring(2, &c, transport, refused[k], "20s", NULL, 0, 60);

        for (int r = 0; r < 2; r++) {
            char d[96];

            if (!ok(h_outcome(&run->r[r]) > 0 && run->r[r].t_end < 8.0 + 10.0,
                    "%s: rank %d fails, by the 8 s start-up timeout at the latest (%s at %.2f s)",
                    refused_name[k], r, h_describe(&run->r[r], d, sizeof(d)), run->r[r].t_end))
                h_diag(run);
            like(run->r[r].msg, "secret", "%s: rank %d's message names the secret",
                 refused_name[k], r);
        }
        diag("%s: rank 0: %s", refused_name[k], run->r[0].msg);
        diag("%s: rank 1: %s", refused_name[k], run->r[1].msg);
    }

    /* a stranger probes rank 0's bootstrap port before rank 1 comes: told nothing */
    connect_timeout = "90s";
    c.kind = K_STRANGER;
    c.seed = 701;
    run_check("N=2 with the secret, after a stranger probed rank 0's bootstrap port", 2, &c,
              same, 1);
    connect_timeout = "30s";
    r1 = &the_run.r[1];
    for (int k = 0; k < PROBES; k++) {
        uint64_t got = h_val(r1, V_STRANGER + S_BYTES + k, 999999);

        ok(got == (k == 2 ? CHALLENGE_FRAMED : 0) &&
               h_val(r1, V_STRANGER + S_CLOSED + k, 0) == 1,
           "a stranger sending rank 0 %s reads %s (%llu bytes), then rank 0 drops it",
           stranger_probe_name[k], k == 2 ? "only rank 0's challenge" : "nothing",
           (unsigned long long)got);
    }
    ok(h_val(r1, V_STRANGER + S_CHALLENGE, 0) == 1,
       "... the %d bytes it read are rank 0's framed acceptor challenge", CHALLENGE_FRAMED);
    ok(h_val(r1, V_STRANGER + S_RECORD, 1) == 0,
       "... and no stranger received a byte of a verbs record (magic RNGV)");
}

int main(void)
{
    static const char *const codecs[] = {"none", "fp16", "bf16"};
    char why[128], label[160];
    const char *env_tp = getenv("T_VERBS_TRANSPORT");
    double t0 = h_now();
    vcase_t c;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (env_tp != NULL && env_tp[0] != '\0')
        transport = env_tp;
#if !RING_HAVE_VERBS
    skip_all("libringd built without verbs (configure --with-verbs, needs libibverbs-dev)");
#endif
    ndevs = rdma_devices_find(devs, RDMA_MAX_DEVS, why, sizeof(why));
    if (ndevs == 0) {
        printf("# %s\n", why);
        skip_all("no active RDMA device (run under tools/lab/rxe-vm)");
    }
    {
        char list[512] = "";
        size_t off = 0;

        for (int d = 0; d < ndevs && off < sizeof(list); d++)
            off += (size_t)snprintf(list + off, sizeof(list) - off, " %s:%d", devs[d].name,
                                    devs[d].port);
        diag("transport %s; active RDMA devices:%s", transport, list);
    }
    if (!rdma_counters_readable(devs, ndevs))
        bail("cannot read /sys/class/infiniband/DEV/ports/P/hw_counters/sent_pkts (rxe) or "
             "counters/port_xmit_packets of every active device: the traffic checks need them");

    /* correctness, N=2 and N=4, each codec */
    for (int ci = 0; ci < 3; ci++) {
        for (int n = 2; n <= 4; n += 2) {
            memset(&c, 0, sizeof(c));
            c.kind = K_CHECK;
            c.codec = codecs[ci];
            c.seed = 300 + (uint64_t)(ci * 10 + n);
            add_op(&c, 1, RING_SUM);
            add_op(&c, 1009, RING_AVG);
            add_op(&c, 65537, RING_SUM);
            add_op(&c, (1u << 18) + 3, RING_AVG);
            snprintf(label, sizeof(label), "%s N=%d codec %s", transport, n, c.codec);
            run_check(label, n, &c, NULL, 1);
        }
    }

    /* 16 MiB: many chunks, larger than any slot; default chunks, then 64K chunks */
    {
        static const h_setting_t small_chunks[] = {{-1, "chunk-size", "64K"}, {0, NULL, NULL}};

        for (int n = 2; n <= 4; n += 2) {
            memset(&c, 0, sizeof(c));
            c.kind = K_CHECK;
            c.codec = "none";
            c.seed = 400 + (uint64_t)n;
            add_op(&c, 4u << 20, RING_SUM);
            snprintf(label, sizeof(label), "%s N=%d 16 MiB", transport, n);
            run_check(label, n, &c, NULL, 1);
        }
        memset(&c, 0, sizeof(c));
        c.kind = K_CHECK;
        c.codec = "fp16";
        c.seed = 410;
        add_op(&c, 4u << 20, RING_AVG);
        snprintf(label, sizeof(label), "%s N=4 16 MiB fp16, 64K chunks (128 per segment)",
                 transport);
        run_check(label, 4, &c, small_chunks, 1);
    }

    /* the same bits as over tcp (fp32: every element is summed in the same order) */
    {
        uint64_t h_tcp, h_v;
        int all = 1;

        memset(&c, 0, sizeof(c));
        c.kind = K_CHECK;
        c.codec = "none";
        c.seed = 500;
        add_op(&c, (1u << 18) + 7, RING_SUM);
        run_ring(4, &c, "tcp", NULL, "20s", NULL, 0, 240);
        for (int r = 0; r < 4; r++)
            all &= h_outcome(&the_run.r[r]) == 0;
        h_tcp = h_val(&the_run.r[0], V_HASH, 1);
        run_ring(4, &c, transport, NULL, "20s", NULL, 0, 240);
        for (int r = 0; r < 4; r++)
            all &= h_outcome(&the_run.r[r]) == 0;
        h_v = h_val(&the_run.r[0], V_HASH, 2);
        if (!ok(all && h_tcp == h_v, "N=4 fp32 262151 floats: %s gives the same bits as tcp",
                transport))
            h_diag(&the_run);
    }

    /* transport auto: shm when the settings show every peer on this host (this
     * test's peer list is 127.0.0.1), verbs otherwise (verbs-guest.sh, peers at
     * the guest's two addresses) */
    memset(&c, 0, sizeof(c));
    c.kind = K_CHECK;
    c.codec = "none";
    c.seed = 600;
    add_op(&c, 65537, RING_SUM);
    {
        static const h_setting_t none[] = {{0, NULL, NULL}};
        const h_run_t *run = run_ring(2, &c, "auto", none, "20s", NULL, 0, 120);
        int good = h_outcome(&run->r[0]) == 0 && h_outcome(&run->r[1]) == 0 &&
                   h_val(&run->r[0], V_WRONG, 1) == 0 && h_val(&run->r[1], V_WRONG, 1) == 0;
        long long sent = 0;

        for (int d = 0; d < ndevs; d++)
            sent += grew(d) > 0 ? grew(d) : 0;
        if (!ok(good && sent < 64, "transport auto N=2, every peer on 127.0.0.1: right results, "
                "and shm carried them (%lld packets on the rxe devices, need < 64)", sent))
            h_diag(run);
    }

    /* ib-dev: one named device carries everything; an unknown one fails at open */
    if (ndevs >= 2) {
        h_setting_t one[] = {{-1, "ib-dev", devs[1].name}, {0, NULL, NULL}};
        const h_run_t *run = run_ring(2, &c, transport, one, "20s", NULL, 0, 120);
        int good = h_outcome(&run->r[0]) == 0 && h_outcome(&run->r[1]) == 0;
        int only = grew(1) > 0;

        for (int d = 0; d < ndevs; d++)
            if (d != 1)
                only &= grew(d) == 0;
        if (!ok(good && only, "ib-dev=%s N=2: both ranks use %s only (sent_pkts %s +%lld, %s "
                "+%lld)", devs[1].name, devs[1].name, devs[0].name, grew(0), devs[1].name,
                grew(1)))
            h_diag(run);
    } else {
        skip("ib-dev with one named device: needs 2 active devices");
    }
    {
        static const h_setting_t bad[] = {{-1, "ib-dev", "mlx5_99"}, {0, NULL, NULL}};
        const h_run_t *run = run_ring(2, &c, transport, bad, "20s", NULL, 0, 60);

        for (int r = 0; r < 2; r++) {
            char d[96];

            if (!ok(h_outcome(&run->r[r]) > 0 && run->r[r].t_end < 10.0,
                    "ib-dev=mlx5_99 (no such device): rank %d fails at once (%s at %.2f s)", r,
                    h_describe(&run->r[r], d, sizeof(d)), run->r[r].t_end))
                h_diag(run);
            like(run->r[r].msg, "mlx5_99", "ib-dev=mlx5_99: rank %d's message names it", r);
        }
    }

    /* GPUDirect RDMA: CUDA device memory registered as a dma-buf (needs a GPU) */
    if (ring_cuda_available()) {
        static vcase_t g = {.kind = K_GPUDIRECT, .count = 1 << 20};
        const h_run_t *run = run_ring(2, &g, transport, NULL, "20s", NULL, 0, 60);

        for (int r = 0; r < 2; r++) {
            char d[96];

            if (!ok(h_outcome(&run->r[r]) == 0, "GPUDirect: rank %d registers 4 MiB of device "
                    "memory with ibv_reg_dmabuf_mr (%s)", r,
                    h_describe(&run->r[r], d, sizeof(d))))
                h_diag(run);
        }
    } else {
        skip("GPUDirect RDMA registration: no CUDA device here");
        skip("GPUDirect RDMA registration: no CUDA device here");
    }

    /* a peer on the other transport: refused at once on both sides, naming the transport */
    if (strcmp(transport, "verbs") == 0) {
        static const h_setting_t mixed[] = {{1, "transport", "tcp"}, {0, NULL, NULL}};
        const h_run_t *run = run_ring(2, &c, transport, mixed, "20s", NULL, 0, 60);

        for (int r = 0; r < 2; r++) {
            char d[96];

            if (!ok(h_outcome(&run->r[r]) > 0 && run->r[r].t_end < 15.0,
                    "rank 0 on verbs, rank 1 on tcp: rank %d fails at once (%s at %.2f s)", r,
                    h_describe(&run->r[r], d, sizeof(d)), run->r[r].t_end))
                h_diag(run);
            like(run->r[r].msg, "--transport", "mixed transports: rank %d's message says so", r);
        }
    } else {
        skip("mixed transports: only over verbs");
        skip("mixed transports: only over verbs");
        skip("mixed transports: only over verbs");
        skip("mixed transports: only over verbs");
    }

    secret_cases();

    /* failures: size mismatch (small, and larger than a slot), a peer killed mid-round */
    size_mismatch(2, 1, 1024, 1000);
    size_mismatch(4, 2, 4u << 20, (4u << 20) + 4096);
    settings_mismatch();
    kill_mid_round();

    diag("t-verbs: %.1f s", h_now() - t0);
    return done_testing();
}
