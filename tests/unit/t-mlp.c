/*
 * t-mlp.c - the fmnist-mlp workload (mlp.h) and the synthetic workload
 * (t-dense.c tests the layers they are built from).
 *
 * Gradients are checked against central finite differences of references
 * written here in double precision, sharing no code with dense.c: the
 * float analytic gradient is then the only single-precision side, and the
 * tolerances below come from float rounding alone. The MLP runs on a
 * dataset built in memory; training on the real Fashion-MNIST runs when
 * dataset-fashion-mnist is installed and is skipped otherwise.
 * About 1.5 s on 2 cores (4 s under ASan/UBSan). Unit test: no network.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "grad_check.h"
#include "tap.h"
#include "workloads/dense.h"
#include "workloads/fmnist.h"
#include "workloads/mlp.h"
#include "workloads/rng.h"
#include "workloads/workloads.h"

#define MAX_LAYERS (WL_MAX_HIDDEN + 1)

static char err[WL_ERR_MAX];

/* ---- the MLP: a dataset in memory, a double reference ------------------- */

static void make_dataset(fmnist_t *d, size_t ntrain, size_t ntest, uint64_t seed)
{
    rng_t r;

    rng_seed(&r, seed, 0xda7a, 0);
    d->ntrain = ntrain;
    d->ntest = ntest;
    d->train_images = malloc(ntrain * FMNIST_PIXELS);
    d->train_labels = malloc(ntrain);
    d->test_images = malloc(ntest * FMNIST_PIXELS);
    d->test_labels = malloc(ntest);
    if (!d->train_images || !d->train_labels || !d->test_images || !d->test_labels)
        bail("out of memory for a dataset of %zu + %zu images", ntrain, ntest);
    for (size_t i = 0; i < ntrain * FMNIST_PIXELS; i++)
        d->train_images[i] = (uint8_t)rng_uniform_u32_below(&r, 256);
    for (size_t i = 0; i < ntest * FMNIST_PIXELS; i++)
        d->test_images[i] = (uint8_t)rng_uniform_u32_below(&r, 256);
    for (size_t i = 0; i < ntrain; i++)
        d->train_labels[i] = (uint8_t)rng_uniform_u32_below(&r, FMNIST_CLASSES);
    for (size_t i = 0; i < ntest; i++)
        d->test_labels[i] = (uint8_t)rng_uniform_u32_below(&r, FMNIST_CLASSES);
}

static void free_dataset(fmnist_t *d)
{
    free(d->train_images);
    free(d->train_labels);
    free(d->test_images);
    free(d->test_labels);
}

typedef struct ref_mlp {
    int nlayers;
    int widths[MAX_LAYERS + 1];
    size_t offset[MAX_LAYERS];    /* of each layer's W, as mlp.h documents the layout */
    size_t nparams;
} ref_mlp_t;

static void ref_mlp_init(ref_mlp_t *m, const int *widths, int nwidths)
{
    m->nlayers = nwidths - 1;
    m->nparams = 0;
    for (int l = 0; l < nwidths; l++)
        m->widths[l] = widths[l];
    for (int l = 0; l < m->nlayers; l++) {
        m->offset[l] = m->nparams;
        m->nparams += (size_t)widths[l] * widths[l + 1] + widths[l + 1];
    }
}

/*
 * Logits of the MLP at p for one sample x (FMNIST_PIXELS floats), in
 * double. If mask is not NULL it gets one byte per hidden pre-activation
 * (> 0 or not); returns how many bytes that is.
 */
static size_t ref_mlp_logits(const ref_mlp_t *m, const double *p, const float *x,
                             double logits[FMNIST_CLASSES], unsigned char *mask)
{
    double a[2][1024];
    size_t nm = 0;
    int cur = 0;

    for (int j = 0; j < FMNIST_PIXELS; j++)
        a[0][j] = x[j];
    for (int l = 0; l < m->nlayers; l++) {
        int win = m->widths[l], wout = m->widths[l + 1];
        const double *w = p + m->offset[l], *b = w + (size_t)win * wout;
        const double *in = a[cur];
        double *out = l + 1 < m->nlayers ? a[1 - cur] : logits;

        for (int o = 0; o < wout; o++) {
            double s = b[o];

            for (int j = 0; j < win; j++)
                s += w[(size_t)o * win + j] * in[j];
            if (l + 1 < m->nlayers) {
                if (mask)
                    mask[nm] = s > 0.0;
                nm++;
                s = s > 0.0 ? s : 0.0;
            }
            out[o] = s;
        }
        cur = 1 - cur;
    }
    return nm;
}

/*
 * Mean loss of the MLP at p over (x, y), in double. mask gets one byte per
 * hidden pre-activation (> 0 or not), to tell when a difference quotient
 * straddles a ReLU kink.
 */
static double ref_mlp_loss(const ref_mlp_t *m, const double *p, const float *x, const int *y, int n,
                           unsigned char *mask)
{
    double logits[FMNIST_CLASSES];
    double loss = 0.0;
    size_t nm = 0;

    for (int i = 0; i < n; i++) {
        nm += ref_mlp_logits(m, p, x + (size_t)i * FMNIST_PIXELS, logits, mask + nm);
        loss += ref_xent(logits, &y[i], 1, FMNIST_CLASSES);
    }
    return loss / n;
}

/*
 * How many test samples have their top two logits (the double reference at
 * params) within tie * max|logit| of each other: the only samples whose
 * predicted class two float evaluations that round differently may disagree on.
 */
static size_t ref_mlp_near_ties(const ref_mlp_t *m, const float *params, const fmnist_t *data,
                                double tie)
{
    double *p = malloc(m->nparams * sizeof(*p)), z[FMNIST_CLASSES];
    float x[FMNIST_PIXELS];
    size_t ties = 0;
    int y;

    if (!p)
        bail("out of memory");
    for (size_t i = 0; i < m->nparams; i++)
        p[i] = params[i];
    for (size_t i = 0; i < data->ntest; i++) {
        uint32_t idx = (uint32_t)i;
        double top = -INFINITY, second = -INFINITY, scale = 0.0;

        fmnist_batch(data->test_images, data->test_labels, &idx, 1, x, &y);
        ref_mlp_logits(m, p, x, z, NULL);
        for (int k = 0; k < FMNIST_CLASSES; k++) {
            scale = fmax(scale, fabs(z[k]));
            if (z[k] > top) {
                second = top;
                top = z[k];
            } else if (z[k] > second) {
                second = z[k];
            }
        }
        ties += top - second < tie * scale;
    }
    free(p);
    return ties;
}

static double max_abs(const float *v, size_t lo, size_t hi)
{
    double m = 0.0;

    for (size_t i = lo; i < hi; i++)
        m = fmax(m, fabs(v[i]));
    return m;
}

static void test_mlp_gradient(const fmnist_t *data)
{
    enum { N = 8, PER_LAYER = 16 };
    const int widths[] = {FMNIST_PIXELS, 16, 12, FMNIST_CLASSES};
    wl_settings_t s = {.hidden = {16, 12}, .nhidden = 2, .seed = 7, .batch_size = N};
    uint32_t idx[N] = {3, 14, 15, 9, 26, 5, 35, 8};
    float x[N * FMNIST_PIXELS];
    int y[N], checked = 0, sampled = 0;
    unsigned char *mask0, *maskp, *maskm;
    size_t nmask = (size_t)N * (16 + 12);
    double loss, ref_loss, *pd, worst = 0.0;
    const double eps = 1e-4;
    workload_t *w;
    ref_mlp_t ref;
    rng_t r;

    ref_mlp_init(&ref, widths, 4);
    if (mlp_create_with_data(&s, data, &w, err, sizeof(err)) < 0)
        bail("mlp_create_with_data: %s", err);
    is_int((long long)w->nparams, (long long)ref.nparams,
           "fmnist-mlp 784-16-12-10 has the documented parameter count");
    is_str(w->shape, "fmnist-mlp 784-16-12-10", "fmnist-mlp shape names the widths");
    if (w->ops->train_step(w, idx, N, &loss, NULL, err, sizeof(err)) < 0)
        bail("train_step: %s", err);

    fmnist_batch(data->train_images, data->train_labels, idx, N, x, y);
    pd = malloc(ref.nparams * sizeof(*pd));
    mask0 = malloc(nmask);
    maskp = malloc(nmask);
    maskm = malloc(nmask);
    if (!pd || !mask0 || !maskp || !maskm)
        bail("out of memory");
    for (size_t i = 0; i < ref.nparams; i++)
        pd[i] = w->params[i];
    ref_loss = ref_mlp_loss(&ref, pd, x, y, N, mask0);
    /* 800-term float dot products against a double reference: 1e-5 relative is generous */
    ok(rel_err(loss, ref_loss, 1e-3) < 1e-5, "fmnist-mlp train_step loss %.6f = reference %.6f", loss,
       ref_loss);

    /*
     * PER_LAYER parameters of every layer (the last few of each are
     * biases), each against a double central difference (eps 1e-4:
     * truncation ~1e-8, rounding ~1e-12). A parameter whose difference
     * straddles a ReLU kink is not differentiable there and is skipped.
     * The float backward pass sums up to 784 products: its error is
     * absolute, about 1e-6 of the layer's largest gradient entry, so
     * entries are compared relatively with that floor (1e-3 of the
     * layer's largest) and must agree to 1e-3: 1000 times the float
     * noise, and far from any real bug (which shows as O(1) errors).
     */
    rng_seed(&r, 11, 12, 13);
    for (int l = 0; l < ref.nlayers; l++) {
        int win = ref.widths[l], wout = ref.widths[l + 1];
        size_t wstart = ref.offset[l], bstart = wstart + (size_t)win * wout;
        double grad_floor = 1e-3 * max_abs(w->grads, wstart, bstart + wout);

        for (int t = 0; t < PER_LAYER; t++) {
            size_t k = t < PER_LAYER - 4 ? wstart + rng_uniform_u32_below(&r, (uint32_t)(win * wout))
                                         : bstart + rng_uniform_u32_below(&r, (uint32_t)wout);
            double save = pd[k], lp, lm;

            sampled++;
            pd[k] = save + eps;
            lp = ref_mlp_loss(&ref, pd, x, y, N, maskp);
            pd[k] = save - eps;
            lm = ref_mlp_loss(&ref, pd, x, y, N, maskm);
            pd[k] = save;
            if (memcmp(maskp, mask0, nmask) || memcmp(maskm, mask0, nmask))
                continue;
            checked++;
            worst = fmax(worst, rel_err(w->grads[k], (lp - lm) / (2 * eps), grad_floor));
        }
    }
    ok(checked >= sampled * 3 / 4 && worst < 1e-3,
       "fmnist-mlp train_step gradient matches finite differences in every layer, weights and biases "
       "(%d of %d away from kinks): max err %.2g", checked, sampled, worst);
    free(pd);
    free(mask0);
    free(maskp);
    free(maskm);
    w->ops->destroy(w);
}

/* ---- the MLP: determinism, the mean-loss contract, errors --------------- */

static void test_mlp_determinism(const fmnist_t *data)
{
    wl_settings_t s = {.seed = 42, .batch_size = 16};
    uint32_t idx[16];
    workload_t *a = NULL, *b = NULL, *c = NULL;   /* bail() exits, but is not noreturn */
    float *g;
    size_t differ = 0;
    double sum2 = 0.0, std;
    int zero_bias = 1;

    for (int i = 0; i < 16; i++)
        idx[i] = (uint32_t)(i * 3 + 1);
    if (mlp_create_with_data(&s, data, &a, err, sizeof(err)) < 0 ||
        mlp_create_with_data(&s, data, &b, err, sizeof(err)) < 0)
        bail("mlp_create_with_data: %s", err);
    s.seed = 43;
    if (mlp_create_with_data(&s, data, &c, err, sizeof(err)) < 0)
        bail("mlp_create_with_data: %s", err);
    is_str(a->shape, "fmnist-mlp 784-256-128-10", "fmnist-mlp default widths 256, 128");
    ok(memcmp(a->params, b->params, a->nparams * sizeof(float)) == 0,
       "same seed: bitwise identical parameters");
    for (size_t i = 0; i < a->nparams; i++)
        differ += a->params[i] != c->params[i];
    /* biases start at 0 in both: only the weights differ */
    ok(differ > a->nparams * 99 / 100, "another seed: other parameters (%zu of %zu differ)", differ,
       a->nparams);

    for (size_t i = 0; i < 784 * 256; i++)
        sum2 += (double)a->params[i] * a->params[i];
    std = sqrt(sum2 / (784 * 256));
    for (size_t i = 784 * 256; i < 784 * 256 + 256; i++)
        zero_bias &= a->params[i] == 0.0f;
    /* 200704 samples: the estimate of the std is within 0.5% with overwhelming odds */
    ok(fabs(std / sqrt(2.0 / 784) - 1.0) < 0.02 && zero_bias,
       "He initialisation: first layer std %.5f (want %.5f), zero biases", std, sqrt(2.0 / 784));

    g = malloc(a->nparams * sizeof(float));
    if (!g)
        bail("out of memory");
    if (a->ops->train_step(a, idx, 16, NULL, NULL, err, sizeof(err)) < 0)
        bail("train_step: %s", err);
    memcpy(g, a->grads, a->nparams * sizeof(float));
    if (a->ops->train_step(a, idx, 16, NULL, NULL, err, sizeof(err)) < 0 ||
        b->ops->train_step(b, idx, 16, NULL, NULL, err, sizeof(err)) < 0)
        bail("train_step: %s", err);
    ok(memcmp(g, a->grads, a->nparams * sizeof(float)) == 0 &&
       memcmp(g, b->grads, a->nparams * sizeof(float)) == 0,
       "same batch twice, and on a second instance: bitwise identical gradients");
    free(g);
    a->ops->destroy(a);
    b->ops->destroy(b);
    c->ops->destroy(c);
}

static void test_mlp_mean_loss(const fmnist_t *data)
{
    enum { N = 32 };
    wl_settings_t s = {.hidden = {64, 32}, .nhidden = 2, .seed = 5, .batch_size = N};
    uint32_t idx[N];
    double loss_all, loss_1, loss_2, worst = 0.0, scale;
    float *g_all, *g_1;
    workload_t *w;

    for (int i = 0; i < N; i++)
        idx[i] = (uint32_t)((i * 7 + 2) % data->ntrain);
    if (mlp_create_with_data(&s, data, &w, err, sizeof(err)) < 0)
        bail("mlp_create_with_data: %s", err);
    g_all = malloc(w->nparams * sizeof(float));
    g_1 = malloc(w->nparams * sizeof(float));
    if (!g_all || !g_1)
        bail("out of memory");
    if (w->ops->train_step(w, idx, N, &loss_all, NULL, err, sizeof(err)) < 0)
        bail("train_step: %s", err);
    memcpy(g_all, w->grads, w->nparams * sizeof(float));
    if (w->ops->train_step(w, idx, N / 2, &loss_1, NULL, err, sizeof(err)) < 0)
        bail("train_step: %s", err);
    memcpy(g_1, w->grads, w->nparams * sizeof(float));
    if (w->ops->train_step(w, idx + N / 2, N / 2, &loss_2, NULL, err, sizeof(err)) < 0)
        bail("train_step: %s", err);
    scale = max_abs(g_all, 0, w->nparams);
    for (size_t i = 0; i < w->nparams; i++)
        worst = fmax(worst, fabs(g_all[i] - 0.5 * ((double)g_1[i] + w->grads[i])));
    /*
     * Both sides add the same 32 per-sample terms in different orders:
     * the difference is float rounding, a few ulp of the sums of |terms|,
     * well under 1e-4 of the largest entry. A sum instead of a mean would
     * be off by 50% of it.
     */
    ok(worst < 1e-4 * scale,
       "gradient of 32 samples = mean of the gradients of its halves: max diff %.2g (largest entry %.2g)",
       worst, scale);
    ok(fabs(loss_all - 0.5 * (loss_1 + loss_2)) < 1e-6 * loss_all,
       "loss of 32 samples = mean of its halves' losses: %.7f vs %.7f", loss_all,
       0.5 * (loss_1 + loss_2));
    free(g_all);
    free(g_1);
    w->ops->destroy(w);
}

static void test_mlp_errors(const fmnist_t *data)
{
    wl_settings_t s = {.hidden = {16}, .nhidden = 1, .seed = 1, .batch_size = 4};
    uint32_t idx[5] = {0, 1, 2, 3, 4};
    double loss = -1.0, acc = -1.0;
    workload_t *w;
    int rc;

    if (mlp_create_with_data(&s, data, &w, err, sizeof(err)) < 0)
        bail("mlp_create_with_data: %s", err);
    is_int((long long)w->ntrain, (long long)data->ntrain, "fmnist-mlp ntrain from the dataset");
    is_int((long long)w->ntest, (long long)data->ntest, "fmnist-mlp ntest from the dataset");
    err[0] = 0;
    ok(w->ops->train_step(w, idx, 5, NULL, NULL, err, sizeof(err)) < 0 &&
       strstr(err, "batch of 5") != NULL, "a batch larger than batch_size is refused: %s", err);
    idx[0] = (uint32_t)data->ntrain;
    err[0] = 0;
    ok(w->ops->train_step(w, idx, 4, NULL, NULL, err, sizeof(err)) < 0 && strstr(err, "sample") != NULL,
       "a sample index past the training set is refused: %s", err);
    rc = w->ops->evaluate(w, &loss, &acc, err, sizeof(err));
    ok(rc == 0 && isfinite(loss) && loss > 0 && acc >= 0.0 && acc <= 1.0,
       "evaluate over %zu test samples (not a multiple of the batch): loss %.3f, accuracy %.3f",
       w->ntest, loss, acc);
    {
        /*
         * Peers evaluating together: the parts add up to the whole test set.
         * The sample counts add up exactly. The rest is not bitwise: a part
         * runs its samples through BLAS in other batches (100 rows, not 256
         * then 44), where OpenBLAS may take other kernels - and each CPU its
         * own - so a logit may round otherwise: by up to 2e-6 of the sample's
         * largest |logit| (~32 float ulp), measured between batches of 300 and
         * of 1 with OpenBLAS's Haswell and Prescott kernels.
         *  - Loss: 2-Lipschitz in the logits, so the mean moves by less than 5e-7
         *    of itself even if every sample's rounding pushed the same way
         *    (2e-8 seen: they cancel). 1e-5 leaves room for kernels not
         *    measured here (AVX-512), while one sample lost, repeated or taken
         *    from another part moves the mean by ~2e-3.
         *  - Accuracy: a prediction can change only where the top two logits
         *    are within that rounding of each other, so the counts of right
         *    answers may differ by the near ties (gap < 1e-4 of max|logit|,
         *    50 times the rounding), which the double reference counts: here
         *    none (the closest top two are 1.3e-3 of max|logit| apart), so the
         *    counts must be equal.
         */
        const int widths[] = {FMNIST_PIXELS, 16, FMNIST_CLASSES};
        double sum = 0, part_loss;
        size_t right = 0, count = 0, part_right, part_count, ties;
        long whole_right = lround(acc * (double)w->ntest);
        int parts_ok = 1;
        ref_mlp_t ref;

        for (size_t p = 0; p < 3; p++) {
            parts_ok &= w->ops->evaluate_part(w, p, 3, &part_loss, &part_right, &part_count, err,
                                              sizeof(err)) == 0;
            sum += part_loss;
            right += part_right;
            count += part_count;
        }
        ref_mlp_init(&ref, widths, 3);
        ties = ref_mlp_near_ties(&ref, w->params, data, 1e-4);
        ok(parts_ok && count == w->ntest && fabs(sum / (double)count - loss) < 1e-5 * loss &&
               labs((long)right - whole_right) <= (long)ties,
           "3 parts of the test set: %zu samples, loss %.7f (evaluate's %.7f), %zu right "
           "(evaluate's %ld, %zu near ties)",
           count, sum / (double)(count ? count : 1), loss, right, whole_right, ties);
        err[0] = 0;
        ok(w->ops->evaluate_part(w, 3, 3, &part_loss, &part_right, &part_count, err,
                                 sizeof(err)) < 0 && strstr(err, "part 3 of 3") != NULL,
           "a part beyond the parts is refused: %s", err);
    }
    w->ops->destroy(w);

    s.nhidden = WL_MAX_HIDDEN + 1;
    err[0] = 0;
    ok(mlp_create_with_data(&s, data, &w, err, sizeof(err)) < 0 && strstr(err, "hidden") != NULL,
       "too many hidden layers are refused: %s", err);
    s.nhidden = 2;
    s.hidden[1] = 0;
    err[0] = 0;
    ok(mlp_create_with_data(&s, data, &w, err, sizeof(err)) < 0 && strstr(err, "width 0") != NULL,
       "a hidden width of 0 is refused: %s", err);
    s.nhidden = 0;
    s.batch_size = 0;
    err[0] = 0;
    ok(mlp_create_with_data(&s, data, &w, err, sizeof(err)) < 0 && strstr(err, "batch size") != NULL,
       "batch size 0 is refused: %s", err);
    s.batch_size = 4;
    s.data_dir = "/nonexistent/fashion-mnist";
    err[0] = 0;
    ok(wl_fmnist_mlp.create(&s, &w, err, sizeof(err)) < 0 && err[0] != 0,
       "a missing dataset directory is an error: %s", err);
}

/* ---- synthetic ------------------------------------------------------------ */

static void test_synthetic(void)
{
    wl_settings_t s = {.seed = 3, .params = 100000, .compute_ms = 40.0, .batch_size = 8};
    uint32_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    double loss[6], t0, dt, sum_abs = 0.0, acc;
    workload_t *w, *v;
    float *g;
    size_t distinct = 0;
    int decreasing = 1;

    if (wl_synthetic.create(&s, &w, err, sizeof(err)) < 0)
        bail("synthetic create: %s", err);
    is_int((long long)w->nparams, 100000, "synthetic has the asked parameter count");
    is_str(w->shape, "synthetic 100000", "synthetic shape names the count");
    ok(w->ntrain == 60000 && w->ntest == 0, "synthetic: nominal 60000 training samples, no test set");
    err[0] = 0;
    ok(w->ops->evaluate(w, &loss[0], &acc, err, sizeof(err)) < 0 && strstr(err, "no test set") != NULL,
       "synthetic evaluate says there is no test set: %s", err);

    t0 = ring_now();
    if (w->ops->train_step(w, idx, 8, &loss[0], NULL, err, sizeof(err)) < 0)
        bail("synthetic train_step: %s", err);
    dt = (ring_now() - t0) * 1e3;
    /* no upper bound: the machine is shared, and contention only makes a step longer */
    ok(dt >= 0.5 * s.compute_ms, "synthetic step took %.1f ms for a compute time of %.0f ms", dt,
       s.compute_ms);

    for (size_t i = 0; i < w->nparams; i++) {
        sum_abs += fabs(w->grads[i]);
        distinct += i > 0 && w->grads[i] != w->grads[i - 1];
    }
    sum_abs /= (double)w->nparams;
    ok(sum_abs > 2e-4 && sum_abs < 5e-3 && distinct > w->nparams / 2,
       "synthetic gradient looks like one: mean |g| %.2g, %zu changes between neighbours", sum_abs,
       distinct);

    /* a second instance with the same seed at the same step: the same gradient */
    s.compute_ms = 0.0;
    if (wl_synthetic.create(&s, &v, err, sizeof(err)) < 0)
        bail("synthetic create: %s", err);
    if (v->ops->train_step(v, idx, 8, NULL, NULL, err, sizeof(err)) < 0)
        bail("synthetic train_step: %s", err);
    ok(memcmp(v->grads, w->grads, w->nparams * sizeof(float)) == 0,
       "synthetic: same seed and step, bitwise identical gradient");
    v->ops->destroy(v);

    g = w->grads;
    for (int step = 1; step < 6; step++) {
        for (size_t i = 0; i < w->nparams; i++)
            w->params[i] -= 0.5f * g[i];
        if (w->ops->train_step(w, idx, 8, &loss[step], NULL, err, sizeof(err)) < 0)
            bail("synthetic train_step: %s", err);
        decreasing &= loss[step] < loss[step - 1];
    }
    ok(decreasing && loss[5] < 0.1 * loss[0], "synthetic loss goes down under SGD: %.4f -> %.4f",
       loss[0], loss[5]);
    w->ops->destroy(w);

    s.params = 0;
    if (wl_synthetic.create(&s, &w, err, sizeof(err)) < 0)
        bail("synthetic create: %s", err);
    ok(w->nparams == 1000000 && strcmp(w->shape, "synthetic 1000000") == 0,
       "synthetic defaults to 1M parameters (%s)", w->shape);
    w->ops->destroy(w);
}

/* ---- the real Fashion-MNIST ----------------------------------------------- */

#define REAL_TESTS 2

static void test_real_data(void)
{
    enum { BATCH = 64, STEPS = 400 };
    const char *dir = FMNIST_DEFAULT_DIR;
    char path[512];
    wl_settings_t s = {.data_dir = dir, .seed = 1, .batch_size = BATCH};
    uint32_t *perm, idx[BATCH];
    double t0, loss, acc, t_train;
    workload_t *w;
    rng_t r;

    snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", dir);
    if (access(path, R_OK) != 0) {
        for (int i = 0; i < REAL_TESTS; i++)
            skip("no Fashion-MNIST in " FMNIST_DEFAULT_DIR " (apt-get install dataset-fashion-mnist)");
        return;
    }
    t0 = ring_now();
    if (wl_fmnist_mlp.create(&s, &w, err, sizeof(err)) < 0)
        bail("fmnist-mlp create: %s", err);
    ok(w->ntrain == 60000 && w->ntest == 10000 && strcmp(w->shape, "fmnist-mlp 784-256-128-10") == 0,
       "fmnist-mlp on the real data: %zu training, %zu test samples, %s", w->ntrain, w->ntest,
       w->shape);

    /* one shuffled pass over part of the training set, plain SGD */
    perm = malloc(w->ntrain * sizeof(*perm));
    if (!perm)
        bail("out of memory");
    for (size_t i = 0; i < w->ntrain; i++)
        perm[i] = (uint32_t)i;
    rng_seed(&r, 1, 2, 3);
    for (size_t i = w->ntrain - 1; i > 0; i--) {
        size_t j = rng_uniform_u32_below(&r, (uint32_t)(i + 1));
        uint32_t tmp = perm[i];

        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int step = 0; step < STEPS; step++) {
        memcpy(idx, perm + (size_t)step * BATCH, sizeof(idx));
        if (w->ops->train_step(w, idx, BATCH, NULL, NULL, err, sizeof(err)) < 0)
            bail("fmnist-mlp train_step: %s", err);
        for (size_t i = 0; i < w->nparams; i++)
            w->params[i] -= 0.05f * w->grads[i];
    }
    t_train = ring_now() - t0;
    if (w->ops->evaluate(w, &loss, &acc, err, sizeof(err)) < 0)
        bail("fmnist-mlp evaluate: %s", err);
    ok(acc > 0.75, "%d SGD steps of %d (lr 0.05) reach %.1f%% test accuracy (loss %.3f) in %.2f s "
       "(load and train), %.2f s with evaluation", STEPS, BATCH, 100.0 * acc, loss, t_train,
       ring_now() - t0);
    free(perm);
    w->ops->destroy(w);
}

int main(void)
{
    fmnist_t data;

    make_dataset(&data, 200, 300, 99);
    test_mlp_gradient(&data);
    test_mlp_determinism(&data);
    test_mlp_mean_loss(&data);
    test_mlp_errors(&data);
    free_dataset(&data);
    test_synthetic();
    test_real_data();
    return done_testing();
}
