/* dense.c - fully connected layers, ReLU and softmax cross-entropy through CBLAS. */
#include "ring_build.h"

#include "dense.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

void dense_init_he(const dense_t *l, float *params, rng_t *r)
{
    float *w = dense_weights(l, params);
    double std = sqrt(2.0 / (double)l->in);
    size_t nw = (size_t)l->in * (size_t)l->out;

    for (size_t i = 0; i < nw; i++)
        w[i] = (float)(std * rng_normal(r));
    memset(dense_bias(l, params), 0, (size_t)l->out * sizeof(float));
}

void dense_forward(const dense_t *l, const float *params, const float *x, int n, float *y)
{
    const float *w = params + l->offset;
    const float *b = w + (size_t)l->in * (size_t)l->out;

    /* y starts as the bias in every row, then beta = 1 adds x W^T to it */
    for (int i = 0; i < n; i++)
        memcpy(y + (size_t)i * (size_t)l->out, b, (size_t)l->out * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, l->out, l->in, 1.0f, x, l->in, w,
                l->in, 1.0f, y, l->out);
}

void dense_backward(const dense_t *l, const float *params, const float *x, const float *dy, int n,
                    float *grads, float *dx)
{
    const float *w = params + l->offset;
    float *dw = grads + l->offset;
    float *db = dw + (size_t)l->in * (size_t)l->out;

    /* dW (out x in) = dy^T (out x n) x (n x in) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, l->out, l->in, n, 1.0f, dy, l->out, x,
                l->in, 0.0f, dw, l->in);
    /* db = column sums of dy, in row order so the result does not depend on BLAS */
    memset(db, 0, (size_t)l->out * sizeof(float));
    for (int i = 0; i < n; i++) {
        const float *row = dy + (size_t)i * (size_t)l->out;

        for (int o = 0; o < l->out; o++)
            db[o] += row[o];
    }
    /* dx (n x in) = dy (n x out) W (out x in) */
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, l->in, l->out, 1.0f, dy, l->out,
                    w, l->in, 0.0f, dx, l->in);
}

void dense_relu_forward(float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void dense_relu_backward(const float *y, float *dy, size_t count)
{
    for (size_t i = 0; i < count; i++)
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

int dense_argmax(const float *row, int count)
{
    int best = 0;

    for (int j = 1; j < count; j++)
        if (row[j] > row[best])
            best = j;
    return best;
}

void dense_softmax_xent(const float *logits, const int *y, int n, int classes, float *dlogits,
                        double *loss_p, int *correct_p)
{
    double loss = 0.0;
    int correct = 0;

    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * (size_t)classes;
        int best = dense_argmax(z, classes);
        float max = z[best];
        double sum = 0.0;

        /* exp(z - max) <= 1: no overflow, and the largest term is exactly 1 so sum >= 1 */
        for (int j = 0; j < classes; j++)
            sum += exp((double)(z[j] - max));
        /* -log softmax(z)_y = log(sum) - (z_y - max) */
        loss += log(sum) - (double)(z[y[i]] - max);
        correct += best == y[i];
        if (dlogits) {
            float *g = dlogits + (size_t)i * (size_t)classes;

            for (int j = 0; j < classes; j++) {
                double p = exp((double)(z[j] - max)) / sum;

                g[j] = (float)((p - (j == y[i] ? 1.0 : 0.0)) / n);
            }
        }
    }
    if (loss_p)
        *loss_p = n > 0 ? loss / n : 0.0;
    if (correct_p)
        *correct_p = correct;
}
