/*
 * conv.c - convolution by im2col + one sgemm per image, and 2x2 max
 * pooling (layouts in conv.h).
 *
 * One image at a time keeps the col buffer small (conv2 of the default CNN:
 * 400 x 196 floats, 313 KB) instead of batch-sized, and the backward pass
 * rebuilds the col matrix rather than keeping the forward one: im2col is a
 * copy, cheap next to the three sgemms that use it.
 */
#include "conv.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

conv_layer_t conv_same(int cin, int cout, int h, int w, int k, size_t *off)
{
    conv_layer_t l = {.cin = cin, .cout = cout, .h = h, .w = w, .k = k, .pad = k / 2};

    l.w_off = *off;
    l.b_off = l.w_off + (size_t)cout * cin * k * k;
    *off = l.b_off + (size_t)cout;
    return l;
}

size_t conv_nparams(const conv_layer_t *l)
{
    return (size_t)l->cout * l->cin * l->k * l->k + (size_t)l->cout;
}

void conv_init_he(const conv_layer_t *l, float *params, rng_t *r)
{
    const size_t nw = (size_t)l->cout * l->cin * l->k * l->k;
    const double std = sqrt(2.0 / (double)(l->cin * l->k * l->k));

    for (size_t i = 0; i < nw; i++)
        params[l->w_off + i] = (float)(std * rng_normal(r));
    memset(params + l->b_off, 0, (size_t)l->cout * sizeof(float));
}

size_t conv_col_floats(const conv_layer_t *l)
{
    return (size_t)l->cin * l->k * l->k * l->h * l->w;
}

/* Output columns x whose input column x + dx lies in [0, w): [*lo, *hi). */
static void conv_valid_range(int w, int dx, int *lo, int *hi)
{
    *lo = dx < 0 ? -dx : 0;
    *hi = dx > 0 ? w - dx : w;
    if (*hi < *lo)
        *hi = *lo;
}

void conv_im2col(const conv_layer_t *l, const float *x, float *col)
{
    const int h = l->h, w = l->w, k = l->k;

    for (int c = 0; c < l->cin; c++) {
        const float *plane = x + (size_t)c * h * w;

        for (int ky = 0; ky < k; ky++) {
            for (int kx = 0; kx < k; kx++) {
                const int dy = ky - l->pad, dx = kx - l->pad;
                int lo, hi;

                conv_valid_range(w, dx, &lo, &hi);
                for (int y = 0; y < h; y++, col += w) {
                    const int sy = y + dy;

                    if (sy < 0 || sy >= h) {
                        memset(col, 0, (size_t)w * sizeof(*col));
                        continue;
                    }
                    memset(col, 0, (size_t)lo * sizeof(*col));
                    memcpy(col + lo, plane + (size_t)sy * w + lo + dx,
                           (size_t)(hi - lo) * sizeof(*col));
                    memset(col + hi, 0, (size_t)(w - hi) * sizeof(*col));
                }
            }
        }
    }
}

/* The adjoint of im2col: every col entry added back to the input pixel it
 * was copied from (dx must start at 0). */
static void conv_col2im_add(const conv_layer_t *l, const float *col, float *dx_img)
{
    const int h = l->h, w = l->w, k = l->k;

    for (int c = 0; c < l->cin; c++) {
        float *plane = dx_img + (size_t)c * h * w;

        for (int ky = 0; ky < k; ky++) {
            for (int kx = 0; kx < k; kx++) {
                const int dy = ky - l->pad, dx = kx - l->pad;
                int lo, hi;

                conv_valid_range(w, dx, &lo, &hi);
                for (int y = 0; y < h; y++, col += w) {
                    const int sy = y + dy;

                    if (sy < 0 || sy >= h)
                        continue;
                    float *row = plane + (size_t)sy * w + dx;
                    for (int x = lo; x < hi; x++)
                        row[x] += col[x];
                }
            }
        }
    }
}

void conv_forward(const conv_layer_t *l, const float *params, const float *x, int n, float *y,
                  float *col)
{
    const int kk = l->cin * l->k * l->k, hw = l->h * l->w;
    const float *wt = params + l->w_off, *bias = params + l->b_off;

    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * l->cin * hw;
        float *yi = y + (size_t)i * l->cout * hw;

        /* the bias first, so the sgemm accumulates onto it (beta = 1) */
        for (int o = 0; o < l->cout; o++)
            for (int p = 0; p < hw; p++)
                yi[(size_t)o * hw + p] = bias[o];
        conv_im2col(l, xi, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, l->cout, hw, kk, 1.0f, wt, kk, col,
                    hw, 1.0f, yi, hw);
    }
}

void conv_backward(const conv_layer_t *l, const float *params, const float *x, const float *dy,
                   int n, float *grads, float *dx, float *col)
{
    const int kk = l->cin * l->k * l->k, hw = l->h * l->w;
    const float *wt = params + l->w_off;
    float *dw = grads + l->w_off, *db = grads + l->b_off;

    for (int o = 0; o < l->cout; o++) {
        /* a sum of n * h * w terms: double keeps it from drifting with n */
        double s = 0.0;

        for (int i = 0; i < n; i++) {
            const float *d = dy + ((size_t)i * l->cout + o) * hw;

            for (int p = 0; p < hw; p++)
                s += d[p];
        }
        db[o] = (float)s;
    }
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * l->cin * hw;
        const float *dyi = dy + (size_t)i * l->cout * hw;

        /* dW (+)= dy_i col^T: beta 0 for the first image overwrites */
        conv_im2col(l, xi, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, l->cout, kk, hw, 1.0f, dyi, hw, col,
                    hw, i == 0 ? 0.0f : 1.0f, dw, kk);
        if (dx == NULL)
            continue;
        /* dcol = W^T dy_i, reusing col, then scattered back onto the pixels */
        float *dxi = dx + (size_t)i * l->cin * hw;

        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kk, hw, l->cout, 1.0f, wt, kk, dyi,
                    hw, 0.0f, col, hw);
        memset(dxi, 0, (size_t)l->cin * hw * sizeof(*dxi));
        conv_col2im_add(l, col, dxi);
    }
}

void pool_forward(int n, int c, int h, int w, const float *x, float *y, int32_t *argmax)
{
    const int oh = h / 2, ow = w / 2;

    for (size_t pl = 0; pl < (size_t)n * c; pl++) {
        const float *xp = x + pl * h * w;
        float *yp = y + pl * oh * ow;
        int32_t *ap = argmax + pl * oh * ow;

        for (int oy = 0; oy < oh; oy++) {
            for (int ox = 0; ox < ow; ox++) {
                int32_t best = (2 * oy) * w + 2 * ox;
                const int32_t cand[3] = {best + 1, best + w, best + w + 1};

                /* strictly greater: ties keep the first in row-major order */
                for (int j = 0; j < 3; j++)
                    if (xp[cand[j]] > xp[best])
                        best = cand[j];
                yp[oy * ow + ox] = xp[best];
                ap[oy * ow + ox] = best;
            }
        }
    }
}

void pool_backward(int n, int c, int h, int w, const float *dy, const int32_t *argmax,
                   float *dx)
{
    const size_t osz = (size_t)(h / 2) * (w / 2), isz = (size_t)h * w;

    memset(dx, 0, (size_t)n * c * isz * sizeof(*dx));
    for (size_t pl = 0; pl < (size_t)n * c; pl++)
        for (size_t j = 0; j < osz; j++)
            dx[pl * isz + argmax[pl * osz + j]] += dy[pl * osz + j];
}
