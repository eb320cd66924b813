/*
 * synthetic.c - the synthetic workload: no data, a parameter count and a
 * compute time chosen by the user, for measuring the ring under a
 * training-like load (allreduce size and the compute it overlaps with).
 *
 * The model is a quadratic bowl: targets t (uniform in +-SYN_TARGET_SCALE,
 * drawn from the seed) and the gradient p - t plus a little noise. The
 * parameters start at 0, so the first gradients are about 1e-3 and all
 * different, as real ones are, and compressing codecs see realistic data.
 * The loss is the relative squared distance |p - t|^2 / |t|^2: 1 at the
 * start, towards 0 as SGD follows the gradient. (The gradient returned is
 * that of 0.5 |p - t|^2; the loss is a monotone rescaling of it that reads
 * the same whatever the size.)
 *
 * Determinism: targets depend on (seed, index), the noise on (seed, the
 * number of train_step calls so far, index). The sample indices are only
 * checked, not used, so every peer at the same step produces the same
 * gradient, and an allreduce of them must give it back: a check for free.
 *
 * Compute time: real CPU work, not sleep, so that on a shared machine a
 * step slows down the way compute does when cores are contended. create
 * calibrates, on the monotonic clock, how fast this core runs the
 * gradient fill and a cheap dependent integer loop (best of a few runs,
 * i.e. the uncontended speed); every step then does a FIXED amount of
 * work: the fill plus the loop iterations that make up the rest of
 * compute_ms. If the fill alone takes longer than compute_ms, a step takes
 * as long as the fill: about 3 ns a parameter on our 2-core VM, so 75 ms
 * at 25M parameters even with compute_ms 0 (it writes 100 MB of gradient).
 *
 * With compute_on = WL_COMPUTE_ACCELERATOR the step does the fill and then
 * sleeps until compute_ms has passed since it began: the host side of a
 * GPU step, where the cores sit idle while the device computes. That is
 * the case overlapping communication with compute is meant for; on a
 * machine with fewer cores than busy threads, CPU compute and the ring
 * just take turns.
 *
 * Evaluation: there is no test set (ntest = 0, as workload.h allows), and
 * evaluate is an error saying so.
 */
#include "ring_build.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "rng.h"
#include "workloads.h"

#define SYN_DEFAULT_PARAMS 1000000
#define SYN_MAX_PARAMS (1ULL << 31)   /* 8 GiB per array: beyond that it is a typo */
#define SYN_NTRAIN 60000              /* nominal, like Fashion-MNIST, for the daemon's epochs */
#define SYN_TARGET_SCALE 2e-3f
#define SYN_NOISE_SCALE 1e-4f
#define SYN_TARGET_TAG 0x7461726765747300ULL   /* "targets" */
#define SYN_NOISE_TAG 0x6e6f697365000000ULL    /* "noise" */
#define SYN_CALIBRATE_PARAMS 1000000   /* the fill is timed on at most this many parameters */
#define SYN_CALIBRATE_MIN_S 0.002      /* a timed run lasts at least this long */
#define SYN_CALIBRATE_RUNS 3

typedef struct synthetic {
    workload_t wl;            /* first: the daemon holds a workload_t * */
    uint32_t target_key;      /* the targets' stream */
    uint64_t noise_key;       /* mixed with the step into each step's noise stream */
    uint64_t step;            /* train_step calls so far: the noise's step */
    uint64_t spin_iters;      /* busy-loop iterations per step (the rest of compute_ms) */
    double wait_s;            /* accelerator: a step lasts at least this long, sleeping */
    double target_norm2;      /* |t|^2 */
    uint64_t sink;            /* the busy loop's result, stored so it cannot be optimised away */
} synthetic_t;

/*
 * 32-bit integer hash (Wellons' lowbias32): a bijection, two multiplies,
 * cheap enough that generating the gradient runs near memory speed (64-bit
 * mixers made a 25M-parameter step twice as slow).
 */
static inline uint32_t syn_hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* Uniform in [-1, 1) from the top 24 bits of a hash (exact in float). */
static inline float syn_signed_unit(uint32_t h)
{
    return (float)((int32_t)(h >> 8) - (1 << 23)) * 0x1.0p-23f;
}

/* Element i of the stream keyed by key (i < 2^32: SYN_MAX_PARAMS). */
static inline float syn_stream(uint32_t key, size_t i)
{
    return syn_signed_unit(syn_hash32(key ^ (uint32_t)i));
}

static inline float syn_target(const synthetic_t *m, size_t i)
{
    return SYN_TARGET_SCALE * syn_stream(m->target_key, i);
}

/* grads[0..count) at the current params for step; returns sum (p - t)^2. */
static double syn_fill(synthetic_t *m, size_t count, uint64_t step)
{
    const float *restrict p = m->wl.params;
    float *restrict g = m->wl.grads;
    uint32_t target_key = m->target_key;    /* locals: stores to g cannot change them */
    uint32_t noise_key = (uint32_t)rng_mix64(m->noise_key + step);
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t i = 0;

    /* four sums in a fixed order: no waiting on one chain of adds, same bits every time */
    for (; i + 4 <= count; i += 4) {
        float d0 = p[i] - SYN_TARGET_SCALE * syn_stream(target_key, i);
        float d1 = p[i + 1] - SYN_TARGET_SCALE * syn_stream(target_key, i + 1);
        float d2 = p[i + 2] - SYN_TARGET_SCALE * syn_stream(target_key, i + 2);
        float d3 = p[i + 3] - SYN_TARGET_SCALE * syn_stream(target_key, i + 3);

        s0 += (double)d0 * (double)d0;
        s1 += (double)d1 * (double)d1;
        s2 += (double)d2 * (double)d2;
        s3 += (double)d3 * (double)d3;
        g[i] = d0 + SYN_NOISE_SCALE * syn_stream(noise_key, i);
        g[i + 1] = d1 + SYN_NOISE_SCALE * syn_stream(noise_key, i + 1);
        g[i + 2] = d2 + SYN_NOISE_SCALE * syn_stream(noise_key, i + 2);
        g[i + 3] = d3 + SYN_NOISE_SCALE * syn_stream(noise_key, i + 3);
    }
    for (; i < count; i++) {
        float d = p[i] - SYN_TARGET_SCALE * syn_stream(target_key, i);

        s0 += (double)d * (double)d;
        g[i] = d + SYN_NOISE_SCALE * syn_stream(noise_key, i);
    }
    return (s0 + s1) + (s2 + s3);
}

/* The busy loop: a dependent chain (LCG step then xorshift) no compiler can shortcut. */
static uint64_t syn_spin(uint64_t iters, uint64_t x)
{
    for (uint64_t i = 0; i < iters; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        x ^= x >> 29;
    }
    return x;
}

/* Busy-loop iterations per second on this core, uncontended (best of a few runs). */
static double syn_spin_rate(synthetic_t *m)
{
    uint64_t iters = 1 << 14;
    double t0, dt, best;

    /* double the run until it is long enough for the clock to time it */
    for (;;) {
        t0 = ring_now();
        m->sink ^= syn_spin(iters, m->sink);
        dt = ring_now() - t0;
        if (dt >= SYN_CALIBRATE_MIN_S || iters >= (1ULL << 36))
            break;
        iters *= 2;
    }
    best = (double)iters / dt;
    for (int run = 1; run < SYN_CALIBRATE_RUNS; run++) {
        t0 = ring_now();
        m->sink ^= syn_spin(iters, m->sink + (uint64_t)run);
        dt = ring_now() - t0;
        if ((double)iters / dt > best)
            best = (double)iters / dt;
    }
    return best;
}

/* Seconds one fill of every parameter takes, uncontended (timed on a prefix). */
static double syn_fill_seconds(synthetic_t *m)
{
    size_t count = m->wl.nparams < SYN_CALIBRATE_PARAMS ? m->wl.nparams : SYN_CALIBRATE_PARAMS;
    double best = INFINITY;

    for (int run = 0; run < SYN_CALIBRATE_RUNS; run++) {
        double t0 = ring_now(), dt;

        syn_fill(m, count, 0);     /* grads are scratch until the first step */
        dt = ring_now() - t0;
        if (dt < best)
            best = dt;
    }
    return best * (double)m->wl.nparams / (double)count;
}

static void syn_destroy(workload_t *w)
{
    if (!w)
        return;
    free(w->params);
    free(w->grads);
    free(w);
}

static int syn_create(const wl_settings_t *s, workload_t **out, char *err, size_t errlen)
{
    uint64_t nparams = s->params ? s->params : SYN_DEFAULT_PARAMS;
    synthetic_t *m;

    if (nparams > SYN_MAX_PARAMS) {
        snprintf(err, errlen, "synthetic: %" PRIu64 " parameters asked, at most %llu allowed",
                 nparams, SYN_MAX_PARAMS);
        return -1;
    }
    if (!(s->compute_ms >= 0.0 && s->compute_ms <= 3.6e6)) {
        snprintf(err, errlen, "synthetic: compute time %g ms, between 0 and one hour allowed",
                 s->compute_ms);
        return -1;
    }
    m = calloc(1, sizeof(*m));
    if (!m) {
        snprintf(err, errlen, "synthetic: out of memory");
        return -1;
    }
    m->wl.ops = &wl_synthetic;
    m->wl.nparams = (size_t)nparams;
    m->wl.ntrain = SYN_NTRAIN;
    m->wl.ntest = 0;
    snprintf(m->wl.shape, sizeof(m->wl.shape), "synthetic %" PRIu64, nparams);
    m->wl.params = calloc((size_t)nparams, sizeof(float));   /* p = 0: the gradient is -t */
    m->wl.grads = calloc((size_t)nparams, sizeof(float));
    if (!m->wl.params || !m->wl.grads) {
        snprintf(err, errlen, "synthetic: out of memory for %" PRIu64 " parameters", nparams);
        syn_destroy(&m->wl);
        return -1;
    }
    m->target_key = (uint32_t)rng_mix64(s->seed ^ SYN_TARGET_TAG);
    m->noise_key = rng_mix64(s->seed ^ SYN_NOISE_TAG);
    for (size_t i = 0; i < m->wl.nparams; i++) {
        double t = syn_target(m, i);

        m->target_norm2 += t * t;
    }
    if (s->compute_on == WL_COMPUTE_ACCELERATOR) {
        m->wait_s = s->compute_ms * 1e-3;
    } else if (s->compute_ms > 0.0) {
        double spin_s = s->compute_ms * 1e-3 - syn_fill_seconds(m);

        m->spin_iters = spin_s > 0.0 ? (uint64_t)(spin_s * syn_spin_rate(m)) : 0;
    }
    *out = &m->wl;
    return 0;
}

/* Sleep until the monotonic clock reads `until` (signals do not cut it short). */
static void syn_sleep_until(double until)
{
    for (int i = 0; i < 1000; i++) {   /* bounded: each pass sleeps or returns */
        double left = until - ring_now();
        struct timespec ts;

        if (left <= 0.0)
            return;
        ts.tv_sec = (time_t)left;
        ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
        if (nanosleep(&ts, NULL) == 0)
            return;
        if (errno != EINTR)
            return;
    }
}

static int syn_train_step(workload_t *w, const uint32_t *idx, int n, double *loss, int *correct,
                          char *err, size_t errlen)
{
    synthetic_t *m = (synthetic_t *)w;
    double start = ring_now();
    double dist2;

    if (n < 1) {
        snprintf(err, errlen, "synthetic: batch of %d samples", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (idx[i] >= w->ntrain) {
            snprintf(err, errlen, "synthetic: training sample %u asked, the nominal training set has %zu",
                     idx[i], w->ntrain);
            return -1;
        }
    }
    dist2 = syn_fill(m, w->nparams, m->step);
    m->sink = syn_spin(m->spin_iters, m->sink + m->step);
    if (m->wait_s > 0.0)
        syn_sleep_until(start + m->wait_s);
    m->step++;
    if (loss)
        *loss = m->target_norm2 > 0.0 ? dist2 / m->target_norm2 : 0.0;
    if (correct)
        *correct = 0;
    return 0;
}

static int syn_evaluate(workload_t *w, double *loss, double *accuracy, char *err, size_t errlen)
{
    snprintf(err, errlen, "the synthetic workload has no test set");
    return -1;
}

static int syn_evaluate_part(workload_t *w, size_t part, size_t nparts, double *loss_sum,
                             size_t *correct, size_t *count, char *err, size_t errlen)
{
    return syn_evaluate(w, NULL, NULL, err, errlen);
}

const workload_ops_t wl_synthetic = {
    .name = "synthetic",
    .doc = "no data: a quadratic of a chosen size whose gradient takes a chosen time",
    .create = syn_create,
    .train_step = syn_train_step,
    .evaluate = syn_evaluate,
    .evaluate_part = syn_evaluate_part,
    .destroy = syn_destroy,
};
