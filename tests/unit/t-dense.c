/*
 * t-dense.c - the workloads' building blocks: the random numbers (rng.h),
 * dense layers, ReLU and softmax cross-entropy (dense.h). t-mlp.c tests the
 * fmnist-mlp and synthetic workloads built from them.
 *
 * Gradients are checked against central finite differences of references
 * written here in double precision, sharing no code with dense.c: the
 * float analytic gradient is then the only single-precision side, and the
 * tolerances below come from float rounding alone. Unit test: no I/O.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad_check.h"
#include "tap.h"
#include "workloads/dense.h"
#include "workloads/rng.h"

static void fill_uniform(rng_t *r, float *v, size_t count, float lo, float hi)
{
    for (size_t i = 0; i < count; i++)
        v[i] = lo + (hi - lo) * rng_uniform_float(r);
}

/* ---- rng.h ---------------------------------------------------------------- */

static void test_rng(void)
{
    enum { DRAWS = 100000, BUCKETS = 10 };
    rng_t a, b;
    int same = 1, counts[BUCKETS] = {0}, in_range = 1, balanced = 1;
    double sum = 0.0, sum2 = 0.0, mean, std;

    rng_seed(&a, 1, 2, 3);
    rng_seed(&b, 1, 2, 3);
    for (int i = 0; i < 100; i++)
        same &= rng_next_u64(&a) == rng_next_u64(&b);
    rng_seed(&b, 2, 1, 3);
    ok(same && rng_next_u64(&a) != rng_next_u64(&b),
       "rng: the same seed words give the same stream, swapped words another");

    for (int i = 0; i < DRAWS; i++) {
        uint32_t v = rng_uniform_u32_below(&a, BUCKETS);
        float u = rng_uniform_float(&a);

        if (v >= BUCKETS || u < 0.0f || u >= 1.0f)
            in_range = 0;
        else
            counts[v]++;
    }
    /* 10000 expected per bucket, std 95: 5% is over 5 sigma */
    for (int k = 0; k < BUCKETS; k++)
        balanced &= abs(counts[k] - DRAWS / BUCKETS) < DRAWS / BUCKETS / 20;
    ok(in_range && balanced, "rng: uniform_u32_below(10) and uniform_float stay in range, buckets even");

    for (int i = 0; i < DRAWS; i++) {
        double x = rng_normal(&a);

        sum += x;
        sum2 += x * x;
    }
    mean = sum / DRAWS;
    std = sqrt(sum2 / DRAWS - mean * mean);
    /* standard errors: 0.003 for the mean, 0.0022 for the std */
    ok(fabs(mean) < 0.02 && fabs(std - 1.0) < 0.02, "rng: normal mean %.4f, std %.4f", mean, std);
}

/* ---- dense layer -------------------------------------------------------- */

/* sum over the batch of dy . (x W^T + b), in double: linear in W, b and x */
static double ref_dense_dot(const double *p, size_t off, int in, int out, const double *x,
                            const float *dy, int n)
{
    const double *w = p + off, *b = w + (size_t)in * out;
    double sum = 0.0;

    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) {
            double y = b[o];

            for (int j = 0; j < in; j++)
                y += w[(size_t)o * in + j] * x[(size_t)i * in + j];
            sum += dy[i * out + o] * y;
        }
    return sum;
}

static void test_dense(void)
{
    enum { IN = 7, OUT = 5, N = 4, OFF = 3, TAIL = 2 };
    const size_t np = dense_nparams(IN, OUT), total = OFF + np + TAIL;
    dense_t l = {.in = IN, .out = OUT, .offset = OFF};
    float params[OFF + IN * OUT + OUT + TAIL], grads[OFF + IN * OUT + OUT + TAIL];
    float x[N * IN], dy[N * OUT], y[N * OUT], dx[N * IN];
    double pd[OFF + IN * OUT + OUT + TAIL], xd[N * IN];
    double worst_y = 0.0, worst_p = 0.0, worst_x = 0.0;
    const double eps = 1e-3;
    int outside_ok = 1;
    rng_t r;

    rng_seed(&r, 1, 2, 3);
    fill_uniform(&r, params, total, -1.0f, 1.0f);
    fill_uniform(&r, x, N * IN, -1.0f, 1.0f);
    fill_uniform(&r, dy, N * OUT, -1.0f, 1.0f);
    for (size_t i = 0; i < total; i++) {
        pd[i] = params[i];
        grads[i] = 12345.0f;      /* sentinel: must survive outside the layer */
    }
    for (int i = 0; i < N * IN; i++)
        xd[i] = x[i];

    dense_forward(&l, params, x, N, y);
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OUT; o++) {
            double ref = pd[OFF + IN * OUT + o];

            for (int j = 0; j < IN; j++)
                ref += pd[OFF + o * IN + j] * xd[i * IN + j];
            worst_y = fmax(worst_y, rel_err(y[i * OUT + o], ref, 1.0));
        }
    /* inputs and weights are O(1), a sum of 8 float terms: a few ulp */
    ok(worst_y < 1e-5, "dense forward matches x W^T + b (W out x in, row-major; b after W): max err %.2g",
       worst_y);

    dense_backward(&l, params, x, dy, N, grads, dx);
    for (size_t i = 0; i < total; i++)
        if ((i < OFF || i >= OFF + np) && grads[i] != 12345.0f)
            outside_ok = 0;
    ok(outside_ok, "dense backward writes its own slice of the flat gradient only");

    /*
     * The loss is linear in every parameter, so central differences are
     * exact up to double rounding (1e-16 / eps); the float side is a sum
     * of at most 5 O(1) terms: 1e-5 relative (floor 1: entries are O(1))
     * is ~100 float ulps of margin and far below any real bug. The same
     * differences for the parameters (dW, db) and for the input (dx).
     */
    {
        struct { double *v; const float *got; size_t n; double *worst; } wrt[] = {
            {pd + OFF, grads + OFF, np, &worst_p}, {xd, dx, N * IN, &worst_x}};

        for (size_t t = 0; t < sizeof(wrt) / sizeof(wrt[0]); t++)
            for (size_t k = 0; k < wrt[t].n; k++) {
                double save = wrt[t].v[k], lp, lm;

                wrt[t].v[k] = save + eps;
                lp = ref_dense_dot(pd, OFF, IN, OUT, xd, dy, N);
                wrt[t].v[k] = save - eps;
                lm = ref_dense_dot(pd, OFF, IN, OUT, xd, dy, N);
                wrt[t].v[k] = save;
                *wrt[t].worst = fmax(*wrt[t].worst,
                                     rel_err(wrt[t].got[k], (lp - lm) / (2 * eps), 1.0));
            }
    }
    ok(worst_p < 1e-5, "dense dW and db match finite differences: max err %.2g", worst_p);
    ok(worst_x < 1e-5, "dense dx matches finite differences: max err %.2g", worst_x);
}

/* ---- ReLU ---------------------------------------------------------------- */

static void test_relu(void)
{
    enum { COUNT = 64 };
    float x[COUNT], y[COUNT], dy[COUNT], g[COUNT];
    const double eps = 1e-3;
    double worst = 0.0;
    int zeros = 0;
    rng_t r;

    rng_seed(&r, 4, 5, 6);
    fill_uniform(&r, x, COUNT, -1.0f, 1.0f);
    fill_uniform(&r, dy, COUNT, -1.0f, 1.0f);
    /* keep every input 0.05 from the kink, farther than eps: differences stay on one side */
    for (int i = 0; i < COUNT; i++)
        if (fabsf(x[i]) < 0.05f)
            x[i] = x[i] < 0 ? -0.05f : 0.05f;
    memcpy(y, x, sizeof(y));
    dense_relu_forward(y, COUNT);
    memcpy(g, dy, sizeof(g));
    dense_relu_backward(y, g, COUNT);
    for (int i = 0; i < COUNT; i++) {
        /* d/dx_i of sum_j dy_j relu(x_j): only term i moves */
        double fd = (dy[i] * fmax(x[i] + eps, 0.0) - dy[i] * fmax(x[i] - eps, 0.0)) / (2 * eps);

        worst = fmax(worst, rel_err(g[i], fd, 1.0));
        zeros += y[i] == 0.0f;
    }
    ok(worst < 1e-6 && zeros > 0 && zeros < COUNT,
       "ReLU forward/backward match finite differences (%d of %d inputs negative): max err %.2g",
       zeros, COUNT, worst);
}

/* ---- softmax cross-entropy ---------------------------------------------- */

static void test_softmax_xent(void)
{
    enum { N = 5, K = 10 };
    float z[N * K], g[N * K], zs[N * K];
    double zd[N * K], loss, loss_shifted, worst = 0.0;
    const double eps = 1e-4;
    int y[N], correct, want_correct = 0;
    rng_t r;

    rng_seed(&r, 7, 8, 9);
    fill_uniform(&r, z, N * K, -4.0f, 4.0f);
    for (int i = 0; i < N; i++) {
        y[i] = (int)rng_uniform_u32_below(&r, K);
        if (i == 1)
            z[i * K + y[i]] = 10.0f;     /* one row predicted right for sure */
        want_correct += dense_argmax(z + i * K, K) == y[i];
    }
    for (int i = 0; i < N * K; i++)
        zd[i] = z[i];

    dense_softmax_xent(z, y, N, K, g, &loss, &correct);
    ok(rel_err(loss, ref_xent(zd, y, N, K), 1e-3) < 1e-6, "softmax cross-entropy: mean loss %.6f",
       loss);
    is_int(correct, want_correct, "softmax cross-entropy counts the rows whose argmax is the label");

    /*
     * Smooth function, double differences: truncation ~eps^2 = 1e-8 and
     * rounding ~1e-16/eps = 1e-12. The float gradient (p - onehot)/n has
     * entries up to 0.2 computed with one rounding each: an absolute 1e-6
     * is ~100 ulps and far below a wrong formula (a missing /n is x5).
     */
    for (int k = 0; k < N * K; k++) {
        double save = zd[k], lp, lm;

        zd[k] = save + eps;
        lp = ref_xent(zd, y, N, K);
        zd[k] = save - eps;
        lm = ref_xent(zd, y, N, K);
        zd[k] = save;
        worst = fmax(worst, fabs(g[k] - (lp - lm) / (2 * eps)));
    }
    ok(worst < 1e-6, "softmax cross-entropy gradient = (softmax - onehot)/n: max abs err %.2g", worst);

    /* exp(1000) overflows even a double: only the max subtraction survives this */
    memcpy(zs, z, sizeof(zs));
    for (int j = 0; j < K; j++)
        zs[3 * K + j] += 1000.0f;
    dense_softmax_xent(zs, y, N, K, g, &loss_shifted, NULL);
    /* z + 1000 in float moves each logit by up to half an ulp of 1000 (3e-5) */
    ok(isfinite(loss_shifted) && fabs(loss_shifted - loss) < 1e-4,
       "softmax cross-entropy is shift invariant with logits near 1000: %.6f vs %.6f",
       loss_shifted, loss);
}

int main(void)
{
    test_rng();
    test_dense();
    test_relu();
    test_softmax_xent();
    return done_testing();
}
