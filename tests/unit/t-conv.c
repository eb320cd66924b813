/*
 * t-conv.c - the layers of the fmnist-cnn workload (category unit):
 * src/workloads/conv.c.
 *
 *   - im2col convolution against a direct loop, within the worst-case
 *     rounding bound of a float dot product;
 *   - conv weights, bias and input, and max-pool, against central finite
 *     differences of a linear probe loss.
 *
 * The whole network is t-cnn's.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "workloads/conv.h"
#include "workloads/rng.h"

#define U 0x1.0p-24 /* unit roundoff of float */

static float *random_floats(rng_t *r, size_t n)
{
    float *p = malloc(n * sizeof(*p));

    if (!p)
        bail("out of memory");
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rng_normal(r);
    return p;
}

/* ---- conv against a direct loop ----------------------------------------------------- */

/* y and, per element, the sum of |terms| (for the rounding bound), in double */
static void naive_conv(const conv_layer_t *l, const float *params, const float *x, int n,
                       double *y, double *mag)
{
    const float *wt = params + l->w_off, *b = params + l->b_off;

    for (int i = 0; i < n; i++)
        for (int o = 0; o < l->cout; o++)
            for (int py = 0; py < l->h; py++)
                for (int px = 0; px < l->w; px++) {
                    double s = b[o], m = fabs(b[o]);

                    for (int c = 0; c < l->cin; c++)
                        for (int ky = 0; ky < l->k; ky++)
                            for (int kx = 0; kx < l->k; kx++) {
                                int sy = py + ky - l->pad, sx = px + kx - l->pad;

                                if (sy < 0 || sy >= l->h || sx < 0 || sx >= l->w)
                                    continue;
                                double t = (double)wt[((o * l->cin + c) * l->k + ky) * l->k + kx] *
                                           x[((size_t)(i * l->cin + c) * l->h + sy) * l->w + sx];
                                s += t;
                                m += fabs(t);
                            }
                    size_t j = ((size_t)(i * l->cout + o) * l->h + py) * l->w + px;
                    y[j] = s;
                    mag[j] = m;
                }
}

static void test_conv_vs_naive(void)
{
    /* non-square images (a swapped h and w shows), k 3 and 5, an image smaller than k */
    static const int cfg[][5] = {{3, 4, 7, 6, 5}, {2, 3, 5, 9, 3}, {1, 2, 4, 3, 5}};

    for (size_t t = 0; t < sizeof(cfg) / sizeof(cfg[0]); t++) {
        size_t off = 0;
        conv_layer_t l = conv_same(cfg[t][0], cfg[t][1], cfg[t][2], cfg[t][3], cfg[t][4], &off);
        const int n = 2, kk = l.cin * l.k * l.k;
        const size_t ny = (size_t)n * l.cout * l.h * l.w;
        rng_t r;

        rng_seed(&r, 1, 2, t);
        float *params = random_floats(&r, off);
        float *x = random_floats(&r, (size_t)n * l.cin * l.h * l.w);
        float *y = malloc(ny * sizeof(*y)), *col = malloc(conv_col_floats(&l) * sizeof(float));
        double *ref = malloc(ny * sizeof(*ref)), *mag = malloc(ny * sizeof(*mag));
        double worst = 0.0;

        conv_forward(&l, params, x, n, y, col);
        naive_conv(&l, params, x, n, ref, mag);
        /*
         * A float sum of K products, in any order, is within gamma_K * sum|terms|
         * (gamma_K = K u / (1 - K u), Higham, Accuracy and Stability, 3.1): here
         * K = cin k k + 1 with the bias. Worst case, never flaky, and tight enough
         * to catch a wrong tap (an error of a whole term).
         */
        const double gamma = (kk + 1) * U / (1 - (kk + 1) * U);
        for (size_t j = 0; j < ny; j++) {
            double ratio = fabs(y[j] - ref[j]) / (gamma * mag[j] + 1e-30);
            worst = ratio > worst ? ratio : worst;
        }
        ok(worst <= 1.0, "conv %dx%dx%d -> %d, k %d: im2col+sgemm within the rounding bound of "
           "a direct loop (worst %.3f of the bound)", l.cin, l.h, l.w, l.cout, l.k, worst);
        free(params);
        free(x);
        free(y);
        free(col);
        free(ref);
        free(mag);
    }
}

/* ---- conv and pool gradients --------------------------------------------------------- */

/*
 * Probe loss L = sum_j g_j y_j (g fixed random), so dL/dy = g. L is linear
 * in each weight, bias and input element alone: a central difference has
 * no truncation error, whatever the step. A step of 1/4 makes the float
 * rounding of y (relative 2^-24 per operation, a few dozen operations per
 * element) negligible: the two sides differ by ~1e-7 of |L| and the
 * gradient is O(1..10), so a relative 1e-4 leaves a wide margin while a
 * wrong index or a missing term is off by O(1).
 */
#define LIN_STEP 0.25f
#define LIN_TOL 1e-4

static double probe_loss(const conv_layer_t *l, const float *params, const float *x, int n,
                         const float *g, float *y, float *col)
{
    const size_t ny = (size_t)n * l->cout * l->h * l->w;
    double s = 0.0;

    conv_forward(l, params, x, n, y, col);
    for (size_t j = 0; j < ny; j++)
        s += (double)g[j] * y[j];
    return s;
}

/* Worst |numeric - analytic| / max(1, |analytic|) over every element of v. */
static double fd_worst(const conv_layer_t *l, float *params, float *x, int n, const float *g,
                       float *y, float *col, float *v, size_t count, const float *analytic)
{
    double worst = 0.0;

    for (size_t i = 0; i < count; i++) {
        const float keep = v[i];
        float plus = keep + LIN_STEP, minus = keep - LIN_STEP;

        v[i] = plus;
        double lp = probe_loss(l, params, x, n, g, y, col);
        v[i] = minus;
        double lm = probe_loss(l, params, x, n, g, y, col);
        v[i] = keep;
        /* the step actually taken, as stored in float */
        double num = (lp - lm) / ((double)plus - (double)minus);
        double e = fabs(num - analytic[i]) / fmax(1.0, fabs(analytic[i]));
        worst = e > worst ? e : worst;
    }
    return worst;
}

static void test_conv_grad(void)
{
    size_t off = 0;
    conv_layer_t l = conv_same(2, 3, 5, 6, 3, &off);
    const int n = 2;
    const size_t nx = (size_t)n * l.cin * l.h * l.w, ny = (size_t)n * l.cout * l.h * l.w;
    rng_t r;

    rng_seed(&r, 3, 4, 5);
    float *params = random_floats(&r, off), *x = random_floats(&r, nx);
    float *g = random_floats(&r, ny), *grads = random_floats(&r, off);
    float *dx = malloc(nx * sizeof(float)), *y = malloc(ny * sizeof(float));
    float *col = malloc(conv_col_floats(&l) * sizeof(float));

    /* grads start as garbage: backward must overwrite, not accumulate */
    conv_backward(&l, params, x, g, n, grads, dx, col);
    double ew = fd_worst(&l, params, x, n, g, y, col, params + l.w_off,
                         (size_t)l.cout * l.cin * l.k * l.k, grads + l.w_off);
    double eb = fd_worst(&l, params, x, n, g, y, col, params + l.b_off, (size_t)l.cout,
                         grads + l.b_off);
    double ex = fd_worst(&l, params, x, n, g, y, col, x, nx, dx);
    ok(ew < LIN_TOL, "conv weight gradient = central differences (worst relative %.2e)", ew);
    ok(eb < LIN_TOL, "conv bias gradient = central differences (worst relative %.2e)", eb);
    ok(ex < LIN_TOL, "conv input gradient = central differences (worst relative %.2e)", ex);

    /* dx NULL: the weight gradient alone, the same bits */
    float *grads2 = calloc(off, sizeof(float));
    conv_backward(&l, params, x, g, n, grads2, NULL, col);
    ok(memcmp(grads, grads2, off * sizeof(float)) == 0,
       "conv backward without dx gives the same weight and bias gradient");
    free(params);
    free(x);
    free(g);
    free(grads);
    free(grads2);
    free(dx);
    free(y);
    free(col);
}

static void test_pool(void)
{
    /* odd sizes: the last row and column are dropped and get no gradient */
    const int n = 2, c = 2, h = 5, w = 7, oh = h / 2, ow = w / 2;
    const size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * oh * ow;
    float x[2 * 2 * 5 * 7], y[2 * 2 * 2 * 3], dx[2 * 2 * 5 * 7], g[2 * 2 * 2 * 3];
    int32_t arg[2 * 2 * 2 * 3];
    rng_t r;

    /* distinct values 0.01 apart: a step of 1e-3 never changes which one is largest,
     * so L = sum g y is linear around x and central differences are exact but for
     * rounding of x +- step (the actual step is used) */
    rng_seed(&r, 6, 7, 8);
    for (size_t i = 0; i < nx; i++)
        x[i] = 0.01f * (float)i;
    for (size_t i = nx - 1; i > 0; i--) {
        size_t j = rng_uniform_u32_below(&r, (uint32_t)i + 1);
        float t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
    for (size_t j = 0; j < ny; j++)
        g[j] = (float)rng_normal(&r);
    pool_forward(n, c, h, w, x, y, arg);
    pool_backward(n, c, h, w, g, arg, dx);
    double worst = 0.0;
    for (size_t i = 0; i < nx; i++) {
        const float keep = x[i], plus = keep + 1e-3f, minus = keep - 1e-3f;
        double lp = 0.0, lm = 0.0;

        x[i] = plus;
        pool_forward(n, c, h, w, x, y, arg);
        for (size_t j = 0; j < ny; j++)
            lp += (double)g[j] * y[j];
        x[i] = minus;
        pool_forward(n, c, h, w, x, y, arg);
        for (size_t j = 0; j < ny; j++)
            lm += (double)g[j] * y[j];
        x[i] = keep;
        double e = fabs((lp - lm) / ((double)plus - (double)minus) - dx[i]);
        worst = e > worst ? e : worst;
    }
    ok(worst < 1e-6, "max-pool gradient = central differences, odd sizes (worst %.2e)", worst);

    /* ties: the first in row-major order wins */
    float flat[4 * 4], out[4];
    int32_t where[4];
    for (int i = 0; i < 16; i++)
        flat[i] = 1.0f;
    pool_forward(1, 1, 4, 4, flat, out, where);
    ok(where[0] == 0 && where[1] == 2 && where[2] == 8 && where[3] == 10,
       "max-pool ties keep the first maximum in row-major order");
}

int main(void)
{
    plan(9);
    test_conv_vs_naive();
    test_conv_grad();
    test_pool();
    return done_testing();
}
