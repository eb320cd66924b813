/*
 * ring-bench-overlap.c - ring-bench --overlap: does an allreduce move while
 * the caller computes? Per size and per step: ring_allreduce_start, C ms of
 * computation on this thread, ring_request_wait. Without the progress
 * thread nothing moves until the wait (the step is about compute +
 * allreduce); with it the thread moves the data meanwhile (ideally the step
 * is max(compute, allreduce)), if it has a core to run on.
 *
 * The computation is a fixed amount of real work (64x64 float matrix
 * products), calibrated to C ms per size with the ring idle and every peer
 * computing, not a timed spin: when the progress thread takes the core from
 * it, the compute part of the step gets longer, and the table shows that as
 * "compute in step". Both modes run the same amount.
 *
 * The two modes run on two communicators, opened one after the other from
 * the same settings with progress-thread off, then on.
 */
#include "ring_build.h"

#include <sched.h> /* CPU_COUNT: _GNU_SOURCE comes from config.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ring-bench.h"

#define OV_DIM 64
#define OV_HOST_MAX 64
#define OV_STEPS_DEFAULT 10

/* The work: c += a * b, OV_DIM^3 multiply-adds per block. */
typedef struct ov_work {
    float a[OV_DIM * OV_DIM], b[OV_DIM * OV_DIM], c[OV_DIM * OV_DIM];
    double blocks_per_s;
    volatile float sink; /* keeps the products observable */
} ov_work_t;

static void ov_work_init(ov_work_t *w)
{
    for (int i = 0; i < OV_DIM * OV_DIM; i++) {
        w->a[i] = (float)((i * 7 % 13) - 6) * 0.01f;
        w->b[i] = (float)((i * 5 % 11) - 5) * 0.01f;
    }
}

static void ov_compute(ov_work_t *w, long blocks)
{
    memset(w->c, 0, sizeof(w->c));
    for (long k = 0; k < blocks; k++) {
        for (int i = 0; i < OV_DIM; i++) {
            for (int l = 0; l < OV_DIM; l++) {
                float x = w->a[i * OV_DIM + l];
                for (int j = 0; j < OV_DIM; j++)
                    w->c[i * OV_DIM + j] += x * w->b[l * OV_DIM + j];
            }
        }
        w->a[k % (OV_DIM * OV_DIM)] += w->c[k % (OV_DIM * OV_DIM)] * 1e-9f; /* no hoisting */
    }
    w->sink = w->c[OV_DIM + 1];
}

/* Blocks per second on this core while every peer computes too (as in the
 * steps: peers on one host may share more than the caches), the median of
 * three runs of at least 50 ms that start together. */
static ring_status_t ov_calibrate(ring_comm_t *comm, ov_work_t *w)
{
    double rate[3], t;

    for (int run = 0; run < 3; run++) {
        ring_status_t st = ring_barrier(comm);
        if (st != RING_OK)
            return st;
        for (long blocks = 1;; blocks *= 2) {
            double t0 = bench_now(), dt;
            ov_compute(w, blocks);
            dt = bench_now() - t0;
            if (dt >= 0.05) {
                rate[run] = blocks / dt;
                break;
            }
        }
    }
    if (rate[0] > rate[1]) { t = rate[0]; rate[0] = rate[1]; rate[1] = t; }
    if (rate[1] > rate[2]) { t = rate[1]; rate[1] = rate[2]; rate[2] = t; }
    if (rate[0] > rate[1]) { t = rate[0]; rate[0] = rate[1]; rate[1] = t; }
    w->blocks_per_s = rate[1];
    return RING_OK;
}

static long ov_blocks(const ov_work_t *w, double ms)
{
    double b = ms * 1e-3 * w->blocks_per_s;

    return b < 1 ? 1 : (long)(b + 0.5);
}

/* Where the peers run: how many share rank 0's host, and its cores. */
typedef struct ov_host {
    int peers_here;  /* peers on rank 0's host */
    long cores;      /* online on rank 0's host */
    int affinity;    /* in rank 0's affinity mask */
} ov_host_t;

static ring_status_t ov_host_census(ring_comm_t *comm, ov_host_t *h)
{
    int n = ring_comm_size(comm);
    char *names = calloc((size_t)n, OV_HOST_MAX), mine[OV_HOST_MAX] = "";
    cpu_set_t set;
    ring_status_t st;

    if (names == NULL)
        return RING_ERR_NO_MEMORY;
    (void)gethostname(mine, sizeof(mine) - 1);
    st = ring_allgather(comm, mine, names, OV_HOST_MAX);
    h->peers_here = 0;
    for (int r = 0; st == RING_OK && r < n; r++)
        h->peers_here += strncmp(names + (size_t)r * OV_HOST_MAX, names, OV_HOST_MAX) == 0;
    free(names);
    h->cores = sysconf(_SC_NPROCESSORS_ONLN);
    h->affinity = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : -1;
    return st;
}

/* One size's figures, the slowest rank's mean of each (seconds). */
typedef struct ov_row {
    double compute, allreduce, step, compute_in_step, wrong;
} ov_row_t;

/* The overlapped step, timed: the whole step and its compute part, this rank's means. */
static ring_status_t ov_steps(ring_comm_t *comm, ov_work_t *w, long blocks, int steps,
                              float *sbuf, float *rbuf, size_t count, double *step_p,
                              double *compute_p)
{
    double step = 0, in = 0;

    for (int i = 0; i < steps; i++) {
        ring_request_t *req;
        double t0 = bench_now(), t1;
        ring_status_t st = ring_allreduce_start(comm, sbuf, rbuf, count, RING_FLOAT32, RING_SUM,
                                                (uint32_t)i, &req);
        if (st != RING_OK)
            return st;
        t1 = bench_now();
        ov_compute(w, blocks);
        in += bench_now() - t1;
        st = ring_request_wait(req);
        if (st != RING_OK)
            return st;
        step += bench_now() - t0;
    }
    *step_p = step / steps;
    *compute_p = in / steps;
    return RING_OK;
}

/* Measure one size on comm. *blocks_p is the computation of a step: 0 the
 * first time (with the progress thread off), then set to C ms of it, C being
 * --compute-ms or the allreduce alone; the same blocks serve the other mode. */
static ring_status_t ov_size(ring_comm_t *comm, const bench_opts_t *o, ov_work_t *w,
                             size_t bytes, float *sbuf, float *rbuf, float *slots,
                             long *blocks_p, ov_row_t *row)
{
    size_t count = bytes / sizeof(float);
    int steps = o->iters > 0 ? o->iters : OV_STEPS_DEFAULT, rank = ring_comm_rank(comm);
    double t0, mine, mine_in, unused;
    long blocks;

#define OV_CHECK(call) do { ring_status_t st_ = (call); if (st_ != RING_OK) return st_; } while (0)
    bench_fill_timed(sbuf, count, rank, o->sparsity, o->sparse_shared);
    /* the allreduce alone, started and waited for as in the steps */
    for (int i = 0; i < o->warmup; i++)
        OV_CHECK(ring_allreduce(comm, sbuf, rbuf, count, RING_FLOAT32, RING_SUM));
    t0 = bench_now();
    for (int i = 0; i < steps; i++)
        OV_CHECK(ring_allreduce(comm, sbuf, rbuf, count, RING_FLOAT32, RING_SUM));
    OV_CHECK(bench_max(comm, slots, (bench_now() - t0) / steps, &row->allreduce));
    if (*blocks_p == 0) {
        double ms = o->compute_ms > 0 ? o->compute_ms : row->allreduce * 1e3;
        /* the calibration's estimate, corrected by one timed run of it */
        blocks = ov_blocks(w, ms);
        OV_CHECK(ring_barrier(comm));
        t0 = bench_now();
        ov_compute(w, blocks);
        mine = (bench_now() - t0) * 1e3;
        if (mine > 0)
            blocks = (long)((double)blocks * ms / mine + 0.5);
        *blocks_p = blocks < 1 ? 1 : blocks;
    }
    blocks = *blocks_p;
    OV_CHECK(ring_barrier(comm));
    /* the compute alone, with every peer doing the same (as in the steps) */
    ov_compute(w, blocks);
    t0 = bench_now();
    for (int i = 0; i < steps; i++)
        ov_compute(w, blocks);
    OV_CHECK(bench_max(comm, slots, (bench_now() - t0) / steps, &row->compute));
    /* the overlapped steps */
    OV_CHECK(ov_steps(comm, w, blocks, o->warmup, sbuf, rbuf, count, &mine, &mine_in));
    OV_CHECK(ov_steps(comm, w, blocks, steps, sbuf, rbuf, count, &mine, &mine_in));
    OV_CHECK(bench_max(comm, slots, mine, &row->step));
    OV_CHECK(bench_max(comm, slots, mine_in, &row->compute_in_step));
    row->wrong = 0;
    if (o->check) {
        /* one overlapped step on integer data, exact sums */
        bench_fill(sbuf, count, rank);
        for (size_t i = 0; i < count; i++)
            rbuf[i] = -1.0f;
        OV_CHECK(ov_steps(comm, w, blocks, 1, sbuf, rbuf, count, &unused, &unused));
        OV_CHECK(bench_sum(comm, slots,
                           (double)bench_verify(rbuf, count, 0, ring_comm_size(comm), RING_SUM,
                                                o->tolerance),
                           &row->wrong));
    }
#undef OV_CHECK
    return RING_OK;
}

static void ov_header(ring_comm_t *comm, const bench_opts_t *o, const ring_config_t *cfg,
                      const ov_work_t *w, const ov_host_t *h)
{
    int n = ring_comm_size(comm);
    char codec[16];

    if (o->csv) {
        printf("bytes,progress_thread,compute_ms,allreduce_ms,step_ms,compute_in_step_ms,"
               "step_over_max,hidden,wrong,cores,peers_on_host\n");
        return;
    }
    (void)ring_config_get(cfg, "codec", codec, sizeof(codec));
    printf("# ring-bench --overlap (ringd %s): %d peers, transport %s, chunk %zu, channels %d, "
           "codec %s; %d timed steps per row after %d untimed\n", ring_version(), n,
           ring_comm_transport(comm), cfg->chunk_bytes, cfg->channels, codec,
           o->iters > 0 ? o->iters : OV_STEPS_DEFAULT, o->warmup);
    printf("# step = ring_allreduce_start + compute + ring_request_wait; compute = %dx%d float "
           "matrix products on the calling thread, %.2f GFLOP/s alone on rank 0\n", OV_DIM,
           OV_DIM, w->blocks_per_s * 2.0 * OV_DIM * OV_DIM * OV_DIM / 1e9);
    printf("# C = %s\n", o->compute_ms > 0 ? "--compute-ms" :
           "the allreduce alone with the progress thread off (per size)");
    printf("# rank 0's host: %ld cores online (%d in its affinity mask), %d of the %d peers: "
           "%d busy threads with the progress thread on%s\n", h->cores, h->affinity,
           h->peers_here, n, 2 * h->peers_here,
           2L * h->peers_here > h->cores ? " - MORE THAN ITS CORES (oversubscribed): the "
           "progress thread and the computation take turns on a core, so read 'on' as that" : "");
    printf("# step/max = step / max(compute, allreduce): 1.00 = the shorter hidden entirely; "
           "hidden = (compute + allreduce - step) / min(compute, allreduce)\n");
    printf("# %10s %8s %11s %13s %9s %16s %9s %7s %7s\n", "bytes", "progress", "compute(ms)",
           "allreduce(ms)", "step(ms)", "compute-in-step", "step/max", "hidden", "#wrong");
}

static void ov_print(const bench_opts_t *o, size_t bytes, const char *mode, const ov_row_t *r,
                     const ov_host_t *h)
{
    double longer = r->compute > r->allreduce ? r->compute : r->allreduce;
    double shorter = r->compute > r->allreduce ? r->allreduce : r->compute;
    double ratio = longer > 0 ? r->step / longer : 0;
    double hidden = shorter > 0 ? (r->compute + r->allreduce - r->step) / shorter : 0;

    if (o->csv)
        printf("%zu,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.0f,%ld,%d\n", bytes, mode,
               r->compute * 1e3, r->allreduce * 1e3, r->step * 1e3, r->compute_in_step * 1e3,
               ratio, hidden, r->wrong, h->cores, h->peers_here);
    else
        printf("%12zu %8s %11.2f %13.2f %9.2f %16.2f %9.2f %6.0f%% %7.0f\n", bytes, mode,
               r->compute * 1e3, r->allreduce * 1e3, r->step * 1e3, r->compute_in_step * 1e3,
               ratio, hidden * 100, r->wrong);
    fflush(stdout);
}

int bench_overlap(const bench_opts_t *o, ring_config_t *cfg)
{
    static const char *const modes[2] = {"off", "on"};
    int nsizes = 0, rc = 0, failed = 0;
    long *blocks = NULL; /* per size: the computation of a step */
    float *sbuf = NULL, *rbuf = NULL, *slots = NULL;
    ov_work_t *w = NULL;
    ov_host_t host = {0};

    for (double b = (double)o->min_bytes; b <= (double)o->max_bytes; b *= o->factor)
        nsizes++;
    if ((blocks = calloc((size_t)nsizes + 1, sizeof(long))) == NULL ||
        (w = calloc(1, sizeof(*w))) == NULL ||
        (slots = calloc((size_t)cfg->world_size, sizeof(float))) == NULL ||
        posix_memalign((void **)&sbuf, 4096, o->max_bytes + 64) != 0 ||
        posix_memalign((void **)&rbuf, 4096, o->max_bytes + 64) != 0) {
        fprintf(stderr, "ring-bench: rank %d: out of memory for two %zu-byte buffers\n",
                cfg->rank, o->max_bytes);
        rc = 1;
        goto out;
    }
    ov_work_init(w);
    for (int m = 0; m < 2 && rc == 0; m++) {
        ring_config_t c;
        ring_comm_t *comm = NULL;
        int k = 0;

        if (ring_config_copy(&c, cfg) != RING_OK ||
            ring_config_set(&c, "progress-thread", modes[m], RING_SRC_API) != RING_OK ||
            ring_comm_open(&c, &comm) != RING_OK) {
            fprintf(stderr, "ring-bench: rank %d: progress thread %s: %s\n", cfg->rank,
                    modes[m], ring_last_error());
            ring_config_free(&c);
            rc = 1;
            break;
        }
        ring_config_free(&c);
        if (m == 0) {
            if (ov_calibrate(comm, w) != RING_OK || ov_host_census(comm, &host) != RING_OK) {
                rc = 1;
            } else if (cfg->rank == 0) {
                ov_header(comm, o, cfg, w, &host);
            }
        }
        for (double b = (double)o->min_bytes; rc == 0 && b <= (double)o->max_bytes;
             b *= o->factor, k++) {
            size_t bytes = ((size_t)b / sizeof(float)) * sizeof(float);
            ov_row_t row;

            if (ov_size(comm, o, w, bytes, sbuf, rbuf, slots, &blocks[k], &row) != RING_OK) {
                rc = 1;
                break;
            }
            failed |= row.wrong > 0;
            if (cfg->rank == 0)
                ov_print(o, bytes, modes[m], &row, &host);
        }
        if (rc != 0)
            fprintf(stderr, "ring-bench: rank %d: progress thread %s: %s\n", cfg->rank,
                    modes[m], ring_last_error());
        ring_comm_close(comm);
    }
    if (rc == 0 && failed) {
        if (cfg->rank == 0)
            fprintf(stderr, "ring-bench: the correctness check found wrong values\n");
        rc = 1;
    }
out:
    free(blocks);
    free(w);
    free(slots);
    free(sbuf);
    free(rbuf);
    return rc;
}
