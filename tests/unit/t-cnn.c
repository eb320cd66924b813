/*
 * t-cnn.c - the fmnist-cnn workload (category unit; gpu part skips without
 * a device): src/workloads/cnn.c (its layers, conv.c, are t-conv's).
 *
 *   - the whole CNN's train_step (loss and every gradient) against central
 *     finite differences of a double-precision forward pass written here
 *     from cnn.h, on a tiny network and random in-memory images;
 *   - determinism (seed -> params, batch -> grads, bit for bit) and the
 *     mean-loss contract (a batch's gradient is the mean of its halves');
 *   - settings that must be refused, and the shape string;
 *   - on the real Fashion-MNIST when installed: 120 SGD steps with the
 *     default widths reach > 70% on 2000 test images, ~5 s (else skipped);
 *   - --device cuda: with a GPU, one train_step and evaluate against the
 *     CPU path; without, create's error says why and the rest is skipped.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tap.h"
#include "workloads/cnn.h"
#include "workloads/cuda/cnn_gpu.h"
#include "workloads/rng.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the whole CNN ------------------------------------------------------------------- */

/* n random images (bytes) with random labels, as the training and the test set */
static void fake_data(fmnist_t *d, size_t n, uint64_t seed)
{
    rng_t r;

    rng_seed(&r, seed, 0, 0);
    d->ntrain = d->ntest = n;
    d->train_images = malloc(n * FMNIST_PIXELS);
    d->train_labels = malloc(n);
    if (!d->train_images || !d->train_labels)
        bail("out of memory");
    for (size_t i = 0; i < n * FMNIST_PIXELS; i++)
        d->train_images[i] = (uint8_t)rng_uniform_u32_below(&r, 256);
    for (size_t i = 0; i < n; i++)
        d->train_labels[i] = (uint8_t)rng_uniform_u32_below(&r, FMNIST_CLASSES);
    d->test_images = d->train_images;
    d->test_labels = d->train_labels;
}

static void free_fake(fmnist_t *d)
{
    free(d->train_images);
    free(d->train_labels);
    memset(d, 0, sizeof(*d));
}

static wl_settings_t tiny_settings(void)
{
    wl_settings_t s = {.conv = {2, 3}, .dense = 8, .seed = 42, .batch_size = 8};

    return s;
}

static workload_t *must_create(const wl_settings_t *s, const fmnist_t *d)
{
    char err[WL_ERR_MAX];
    workload_t *w;

    if (cnn_create_with_data(s, d, &w, err, sizeof(err)) < 0)
        bail("cnn_create_with_data: %s", err);
    return w;
}

static double step_loss(workload_t *w, const uint32_t *idx, int n)
{
    char err[WL_ERR_MAX];
    double loss;

    if (w->ops->train_step(w, idx, n, &loss, NULL, err, sizeof(err)) < 0)
        bail("train_step: %s", err);
    return loss;
}

/*
 * The tiny CNN's gradient against central differences of its loss.
 *
 * Differences of the float network's own loss do not work here: its
 * rounding noise (~1e-7) wants a step of 1e-2 or more, while each conv1
 * weight moves thousands of ReLU and max-pool inputs, so that any such
 * step crosses dozens of kinks (measured: 10% off). So the differences are
 * taken of an independent double-precision forward pass written here from
 * cnn.h's description (layout, NCHW flattening, 'same' padding, floor
 * pooling) at the same float parameters: with a step of 1e-5 its rounding
 * noise is ~1e-11 and truncation ~1e-10, and a step crosses a kink with
 * probability ~1e-3 per parameter. Where it does, the quotient with half
 * the step disagrees, and that parameter is left out (the test says how
 * many; at most 1%). Every parameter is checked.
 *
 * The analytic side is float: sums of up to ~6000 terms whose rounding
 * (2^-24 each, mostly cancelling) stays below ~1e-5 of the tensor's largest
 * gradient. Tolerance: 1e-4 of max(|g|, 1e-2 * max|g| of its tensor); a
 * wrong index, transposition or missing term is off by O(1).
 */
#define REF_STEP 1e-5
#define REF_TOL 1e-4
#define REF_FLOOR 1e-2

typedef struct ref_net {
    int c1, c2, d;
    size_t c1w, c1b, c2w, c2b, f1w, f1b, f2w, f2b, total;
} ref_net_t;

static ref_net_t ref_layout(int c1, int c2, int d)
{
    ref_net_t n = {.c1 = c1, .c2 = c2, .d = d};

    n.c1w = 0;
    n.c1b = n.c1w + (size_t)c1 * 25;
    n.c2w = n.c1b + c1;
    n.c2b = n.c2w + (size_t)c2 * c1 * 25;
    n.f1w = n.c2b + c2;
    n.f1b = n.f1w + (size_t)d * c2 * 49;
    n.f2w = n.f1b + d;
    n.f2b = n.f2w + (size_t)10 * d;
    n.total = n.f2b + 10;
    return n;
}

/* 'same' 5x5 convolution + ReLU, then 2x2 max-pool: in (cin x hw x hw) -> out */
static void ref_conv_relu_pool(const double *p, size_t w_off, size_t b_off, const double *in,
                               int cin, int cout, int hw, double *out)
{
    double a[32 * 28 * 28];

    for (int o = 0; o < cout; o++)
        for (int y = 0; y < hw; y++)
            for (int x = 0; x < hw; x++) {
                double s = p[b_off + o];

                for (int c = 0; c < cin; c++)
                    for (int ky = 0; ky < 5; ky++)
                        for (int kx = 0; kx < 5; kx++) {
                            int sy = y + ky - 2, sx = x + kx - 2;

                            if (sy >= 0 && sy < hw && sx >= 0 && sx < hw)
                                s += p[w_off + (((size_t)o * cin + c) * 5 + ky) * 5 + kx] *
                                     in[((size_t)c * hw + sy) * hw + sx];
                        }
                a[((size_t)o * hw + y) * hw + x] = s > 0 ? s : 0;
            }
    for (int o = 0; o < cout; o++)
        for (int y = 0; y < hw / 2; y++)
            for (int x = 0; x < hw / 2; x++) {
                const double *q = a + ((size_t)o * hw + 2 * y) * hw + 2 * x;

                out[((size_t)o * (hw / 2) + y) * (hw / 2) + x] =
                    fmax(fmax(q[0], q[1]), fmax(q[hw], q[hw + 1]));
            }
}

/* The logits of one image (784 floats, as fmnist_batch makes them) */
static void ref_logits(const ref_net_t *net, const double *p, const float *x, double z[10])
{
    double in[784], p1[32 * 196], p2[32 * 49], h[128];

    for (int j = 0; j < 784; j++)
        in[j] = x[j];
    ref_conv_relu_pool(p, net->c1w, net->c1b, in, 1, net->c1, 28, p1);
    ref_conv_relu_pool(p, net->c2w, net->c2b, p1, net->c1, net->c2, 14, p2);
    for (int o = 0; o < net->d; o++) {
        double s = p[net->f1b + o];

        for (int j = 0; j < net->c2 * 49; j++)
            s += p[net->f1w + (size_t)o * net->c2 * 49 + j] * p2[j];
        h[o] = s > 0 ? s : 0;
    }
    for (int o = 0; o < 10; o++) {
        z[o] = p[net->f2b + o];
        for (int j = 0; j < net->d; j++)
            z[o] += p[net->f2w + (size_t)o * net->d + j] * h[j];
    }
}

/* The mean cross-entropy of n images (float, as fmnist_batch makes them) */
static double ref_loss(const ref_net_t *net, const double *p, const float *x, const int *y,
                       int n)
{
    double sum = 0.0;

    for (int i = 0; i < n; i++) {
        double z[10], max = -INFINITY, e = 0.0;

        ref_logits(net, p, x + (size_t)i * 784, z);
        for (int o = 0; o < 10; o++)
            max = fmax(max, z[o]);
        for (int o = 0; o < 10; o++)
            e += exp(z[o] - max);
        sum += log(e) - (z[y[i]] - max);
    }
    return sum / n;
}

/*
 * How many of the n images have their top two logits (the double reference
 * at params) within tie * max|logit| of each other: the only images whose
 * predicted class two float forward passes that round differently may
 * disagree on.
 */
static int ref_near_ties(const ref_net_t *net, const float *params, const float *x, int n,
                         double tie)
{
    double *p = malloc(net->total * sizeof(double)), z[10];
    int ties = 0;

    if (!p)
        bail("out of memory");
    for (size_t i = 0; i < net->total; i++)
        p[i] = params[i];
    for (int i = 0; i < n; i++) {
        double top = -INFINITY, second = -INFINITY, scale = 0.0;

        ref_logits(net, p, x + (size_t)i * 784, z);
        for (int o = 0; o < 10; o++) {
            scale = fmax(scale, fabs(z[o]));
            if (z[o] > top) {
                second = top;
                top = z[o];
            } else if (z[o] > second) {
                second = z[o];
            }
        }
        ties += top - second < tie * scale;
    }
    free(p);
    return ties;
}

static double ref_fd(const ref_net_t *net, double *p, const float *x, const int *y, int n,
                     size_t i, double step)
{
    const double keep = p[i];

    p[i] = keep + step;
    double lp = ref_loss(net, p, x, y, n);
    p[i] = keep - step;
    double lm = ref_loss(net, p, x, y, n);
    p[i] = keep;
    return (lp - lm) / (2 * step);
}

static void test_cnn_grad(void)
{
    wl_settings_t s = tiny_settings();
    const ref_net_t net = ref_layout(2, 3, 8);
    const size_t start[8] = {net.c1w, net.c1b, net.c2w, net.c2b,
                             net.f1w, net.f1b, net.f2w, net.f2b};
    const size_t end[8] = {net.c1b, net.c2w, net.c2b, net.f1w,
                           net.f1b, net.f2w, net.f2b, net.total};
    static const char *const names[8] = {"conv1 W", "conv1 b", "conv2 W", "conv2 b",
                                         "fc1 W",   "fc1 b",   "fc2 W",   "fc2 b"};
    const int n = 4;
    const uint32_t idx[4] = {3, 0, 5, 2};
    float x[4 * 784];
    int y[4];
    fmnist_t d;
    rng_t r;

    fake_data(&d, 8, 11);
    workload_t *w = must_create(&s, &d);
    is_int((long long)w->nparams, (long long)net.total, "c2-c3-d8 has %zu parameters", net.total);
    /* biases start at 0; move them so that their part of the layout is exercised too */
    rng_seed(&r, 9, 9, 9);
    for (int t = 1; t < 8; t += 2)
        for (size_t i = start[t]; i < end[t]; i++)
            w->params[i] = 0.1f * (float)rng_normal(&r);
    double loss = step_loss(w, idx, n);
    double *p = malloc(net.total * sizeof(double));
    for (size_t i = 0; i < net.total; i++)
        p[i] = w->params[i];
    fmnist_batch(d.train_images, d.train_labels, idx, n, x, y);
    double ref = ref_loss(&net, p, x, y, n);
    ok(fabs(loss - ref) < 1e-5 * ref, "train_step's loss %.7f = a double forward pass's %.7f",
       loss, ref);

    for (int t = 0; t < 8; t++) {
        double gmax = 0.0, worst = 0.0;
        size_t kinks = 0;

        for (size_t i = start[t]; i < end[t]; i++)
            gmax = fmax(gmax, fabs(w->grads[i]));
        for (size_t i = start[t]; i < end[t]; i++) {
            double a = w->grads[i], scale = fmax(fabs(a), REF_FLOOR * gmax);
            double full = ref_fd(&net, p, x, y, n, i, REF_STEP);

            if (fabs(full - a) > REF_TOL * scale &&
                fabs(full - ref_fd(&net, p, x, y, n, i, REF_STEP / 2)) > REF_TOL * scale) {
                kinks++;
                continue;
            }
            worst = fmax(worst, fabs(full - a) / scale);
        }
        ok(worst < REF_TOL && kinks * 100 <= end[t] - start[t],
           "train_step's %s gradient = central differences, all %zu (worst %.1e; %zu at a "
           "kink)", names[t], end[t] - start[t], worst, kinks);
    }
    free(p);
    w->ops->destroy(w);
    free_fake(&d);
}

static void test_determinism_and_mean(void)
{
    wl_settings_t s = tiny_settings();
    fmnist_t d;
    const uint32_t all[8] = {7, 1, 4, 0, 6, 2, 5, 3};

    fake_data(&d, 8, 12);
    workload_t *a = must_create(&s, &d), *b = must_create(&s, &d);
    ok(memcmp(a->params, b->params, a->nparams * sizeof(float)) == 0,
       "the same seed gives the same parameters, bit for bit");
    s.seed = 43;
    workload_t *c = must_create(&s, &d);
    ok(memcmp(a->params, c->params, a->nparams * sizeof(float)) != 0,
       "another seed gives other parameters");
    c->ops->destroy(c);

    step_loss(a, all, 8);
    step_loss(b, all, 8);
    ok(memcmp(a->grads, b->grads, a->nparams * sizeof(float)) == 0,
       "the same batch gives the same gradient, bit for bit");

    /*
     * Mean-loss contract: the gradient of 8 samples is the mean of the
     * gradients of its two halves. Both are float sums of the same terms
     * in other orders (per image, then over images), so they agree to the
     * rounding of those sums: each element within 1e-5 of the gradient's
     * largest |g| (a 2^-24 rounding per addition over at most ~6000 terms
     * of that size would be 4e-4 worst case; in practice errors cancel
     * and stay below 1e-6), while a sum instead of a mean is off by 100%.
     */
    float *half1 = malloc(a->nparams * sizeof(float)), *full = malloc(a->nparams * sizeof(float));
    double l8 = step_loss(a, all, 8);
    memcpy(full, a->grads, a->nparams * sizeof(float));
    double l4a = step_loss(a, all, 4);
    memcpy(half1, a->grads, a->nparams * sizeof(float));
    double l4b = step_loss(a, all + 4, 4);
    double gmax = 0.0, worst = 0.0;
    for (size_t p = 0; p < a->nparams; p++)
        gmax = fmax(gmax, fabs(full[p]));
    for (size_t p = 0; p < a->nparams; p++)
        worst = fmax(worst, fabs(full[p] - 0.5 * ((double)half1[p] + a->grads[p])) / gmax);
    ok(worst < 1e-5, "the gradient of 8 samples is the mean of its halves' (worst %.2e of max|g|)",
       worst);
    ok(fabs(l8 - 0.5 * (l4a + l4b)) < 1e-6 * l8, "and so is the loss (%.9f vs %.9f)", l8,
       0.5 * (l4a + l4b));
    free(half1);
    free(full);
    a->ops->destroy(a);
    b->ops->destroy(b);
    free_fake(&d);
}

static void test_settings(void)
{
    wl_settings_t s = tiny_settings();
    fmnist_t d;
    char err[WL_ERR_MAX];
    workload_t *w = NULL;
    double loss;

    fake_data(&d, 8, 13);
    s.conv[1] = -1;
    ok(cnn_create_with_data(&s, &d, &w, err, sizeof(err)) < 0 && strstr(err, "second conv"),
       "a negative width is refused, named: %s", err);
    s = tiny_settings();
    s.batch_size = 0;
    ok(cnn_create_with_data(&s, &d, &w, err, sizeof(err)) < 0 && strstr(err, "batch size"),
       "batch size 0 is refused: %s", err);
    s = tiny_settings();
    w = must_create(&s, &d);
    is_str(w->shape, "fmnist-cnn c2-c3-d8", "shape names the widths");
    uint32_t idx[9] = {0};
    ok(w->ops->train_step(w, idx, 9, &loss, NULL, err, sizeof(err)) < 0,
       "a batch above batch_size is refused: %s", err);
    idx[1] = 8;
    ok(w->ops->train_step(w, idx, 2, &loss, NULL, err, sizeof(err)) < 0,
       "a sample past the training set is refused: %s", err);
    w->ops->destroy(w);

    wl_settings_t dflt = {.batch_size = 4};
    w = must_create(&dflt, &d);
    is_str(w->shape, "fmnist-cnn c16-c32-d128", "widths 0 are the defaults");
    w->ops->destroy(w);
    free_fake(&d);
}

/* ---- Fashion-MNIST ------------------------------------------------------------------- */

/*
 * SGD with momentum 0.9, learning rate 0.02, batches of 64, on the real
 * data: 120 steps (7680 images, an eighth of an epoch), ~5 s on one core.
 * Measured with parameter seeds 1..4: 79-84% on the first 2000 test
 * images, so 70% leaves room for other BLAS kernels' rounding. (0.05
 * diverged for one seed in four, 0.1 for all.)
 */
#define TRAIN_STEPS 120
#define TRAIN_BATCH 64
#define TRAIN_LR 0.02f
#define TRAIN_MOMENTUM 0.9f
#define TEST_SUBSET 2000

static void test_train(void)
{
    struct stat st;
    fmnist_t d;
    char err[WL_ERR_MAX];

    if (stat(FMNIST_DEFAULT_DIR, &st) != 0) {
        skip("no " FMNIST_DEFAULT_DIR " (apt-get install dataset-fashion-mnist)");
        skip("no dataset: no training time");
        return;
    }
    if (fmnist_load(NULL, &d, err, sizeof(err)) < 0) {
        ok(0, "fmnist_load: %s", err);
        skip("no dataset: no training time");
        return;
    }
    fmnist_t sub = d;
    sub.ntest = TEST_SUBSET < d.ntest ? TEST_SUBSET : d.ntest;
    wl_settings_t s = {.seed = 1, .batch_size = TRAIN_BATCH};
    workload_t *w = must_create(&s, &sub);
    float *vel = calloc(w->nparams, sizeof(float));
    uint32_t idx[TRAIN_BATCH];
    rng_t r;
    double t0 = now_s(), loss = 0.0, acc = 0.0;

    rng_seed(&r, 5, 0, 0);
    for (int step = 0; step < TRAIN_STEPS; step++) {
        for (int i = 0; i < TRAIN_BATCH; i++)
            idx[i] = rng_uniform_u32_below(&r, (uint32_t)sub.ntrain);
        step_loss(w, idx, TRAIN_BATCH);
        for (size_t p = 0; p < w->nparams; p++) {
            vel[p] = TRAIN_MOMENTUM * vel[p] - TRAIN_LR * w->grads[p];
            w->params[p] += vel[p];
        }
    }
    double t1 = now_s();
    if (w->ops->evaluate(w, &loss, &acc, err, sizeof(err)) < 0)
        bail("evaluate: %s", err);
    double t2 = now_s();
    ok(acc > 0.70, "%d SGD steps of %d reach %.1f%% on %zu test images (loss %.3f)",
       TRAIN_STEPS, TRAIN_BATCH, 100 * acc, sub.ntest, loss);
    diag("training: %.2f s, %.0f samples/s (%.0f us per sample, forward + backward, one core); "
         "evaluation: %.0f samples/s", t1 - t0, TRAIN_STEPS * TRAIN_BATCH / (t1 - t0),
         1e6 * (t1 - t0) / (TRAIN_STEPS * TRAIN_BATCH), (double)sub.ntest / (t2 - t1));
    /* ~5 s on an idle core, ~15 s with ASan, 60 s with ASan on a host busy with
     * other work: the bound is a tripwire for a pathological slowdown (BLAS threads
     * fighting over the cores, 10x and more), not a benchmark */
    ok(t2 - t0 < 120.0, "training and evaluation took %.1f s (< 120)", t2 - t0);
    free(vel);
    w->ops->destroy(w);
    fmnist_free(&d);
}

/* ---- --device cuda ------------------------------------------------------------------- */

#define GPU_CHECKS 2

/* Worst |a - b| over the tensor, relative to its largest |a| */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double m = 0.0, e = 0.0;

    for (size_t i = 0; i < n; i++) {
        m = fmax(m, fabs(a[i]));
        e = fmax(e, fabs((double)a[i] - b[i]));
    }
    return m > 0 ? e / m : e;
}

static void test_gpu(void)
{
    wl_settings_t s = tiny_settings();
    fmnist_t d;
    char err[WL_ERR_MAX], why[WL_ERR_MAX];
    workload_t *gw = NULL;
    const uint32_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};

    fake_data(&d, 8, 14);
    s.device = WL_DEVICE_CUDA;
    int devices = cnn_gpu_device_count(why, sizeof(why));
    int rc = cnn_create_with_data(&s, &d, &gw, err, sizeof(err));
    if (rc < 0) {
        /* the reason must reach the user: "--device cuda: <why>" */
        ok(devices == 0 && strncmp(err, "--device cuda: ", 15) == 0 && strstr(err, why),
           "without a device, --device cuda is refused with the reason: %s", err);
        /* and with what to do: no driver or no GPU said so, and --device cpu offered
         * (a CPU-only build says it was built without CUDA instead) */
        ok(!cnn_gpu_built() || (strstr(err, "--device cpu") != NULL &&
                                (strstr(why, "no GPU") != NULL || strstr(why, "driver") != NULL)),
           "the refusal names the missing driver or GPU and --device cpu: %s", err);
        char msg[WL_ERR_MAX + 32];
        snprintf(msg, sizeof(msg), "no CUDA device: %s", why);
        for (int i = 0; i < GPU_CHECKS; i++)
            skip(msg);
        free_fake(&d);
        return;
    }
    ok(devices > 0, "--device cuda creates on a machine with %d device(s)", devices);
    ok(why[0] == '\0', "with a device the probe gives no reason to refuse ('%s')", why);
    s.device = WL_DEVICE_CPU;
    workload_t *cw = must_create(&s, &d);
    double lg, lc, ag, ac;
    int rg, rcpu;
    memcpy(gw->params, cw->params, cw->nparams * sizeof(float));
    if (gw->ops->train_step(gw, idx, 8, &lg, &rg, err, sizeof(err)) < 0)
        bail("gpu train_step: %s", err);
    cw->ops->train_step(cw, idx, 8, &lc, &rcpu, err, sizeof(err));
    /*
     * Other summation orders (cuDNN's algorithms, cuBLAS) and the GPU's
     * expf: agreement to ~1e-6 of the largest gradient is expected, 1e-4
     * allowed; a layout or transposition bug is off by O(1).
     */
    double e = rel_diff(cw->grads, gw->grads, cw->nparams);
    /*
     * The logits round otherwise too (~1e-6 of their largest), so a predicted
     * class may differ only where the top two are that close: the counts of
     * right answers may differ by the near ties (gap < 1e-4 of max|logit|)
     * the double reference finds among the 8 images (the training and the
     * test set), usually none.
     */
    const ref_net_t net = ref_layout(2, 3, 8);
    float x[8 * 784];
    int y[8];
    fmnist_batch(d.train_images, d.train_labels, idx, 8, x, y);
    int ties = ref_near_ties(&net, cw->params, x, 8, 1e-4);
    ok(e < 1e-4 && fabs(lg - lc) < 1e-5 * lc && abs(rg - rcpu) <= ties,
       "one train_step on cuda = on the CPU (grads within %.2e of max|g|, loss %.7f vs %.7f, "
       "%d vs %d right, %d near ties)",
       e, lg, lc, rg, rcpu, ties);
    gw->ops->evaluate(gw, &lg, &ag, err, sizeof(err));
    cw->ops->evaluate(cw, &lc, &ac, err, sizeof(err));
    ok(fabs(lg - lc) < 1e-5 * lc && lround(fabs(ag - ac) * (double)d.ntest) <= ties,
       "evaluate on cuda = on the CPU (loss %.7f vs %.7f, accuracy %.4f vs %.4f)", lg, lc, ag, ac);
    cw->ops->destroy(cw);
    gw->ops->destroy(gw);
    free_fake(&d);
}

/* Which GPU a peer takes: pure arithmetic, checked without a GPU. */
static void test_pick_cuda_device(void)
{
    ok(cnn_pick_cuda_device(-1, 3, 2) == 1 && cnn_pick_cuda_device(-1, 5, 4) == 1 &&
           cnn_pick_cuda_device(-1, 2, 8) == 2,
       "--cuda-device auto: the local rank modulo the devices");
    ok(cnn_pick_cuda_device(-1, -1, 4) == 0, "auto without a local rank: device 0");
    ok(cnn_pick_cuda_device(2, 5, 4) == 2 && cnn_pick_cuda_device(6, 0, 4) == 6,
       "--cuda-device N wins over the local rank, even out of range (the caller refuses it)");
}

int main(void)
{
    plan(30);
    test_pick_cuda_device();
    test_cnn_grad();
    test_determinism_and_mean();
    test_settings();
    test_train();
    test_gpu();
    return done_testing();
}
