/*
 * grad_check.h - what t-dense and t-mlp share to check float gradients:
 * the error measure against a finite difference, and the double-precision
 * softmax cross-entropy the references end in. Header-only.
 */
#ifndef RING_TESTS_GRAD_CHECK_H
#define RING_TESTS_GRAD_CHECK_H

#include <math.h>
#include <stddef.h>

/*
 * |a - b| relative to the larger of the two and of floor: near-zero
 * entries are judged on the absolute error floor_abs allows, the rest on
 * their relative error.
 */
static inline double rel_err(double a, double b, double floor_abs)
{
    double scale = fmax(fmax(fabs(a), fabs(b)), floor_abs);

    return fabs(a - b) / scale;
}

/* mean over rows of -log softmax(z)_y, in double, itself stable (max subtracted) */
static inline double ref_xent(const double *z, const int *y, int n, int k)
{
    double loss = 0.0;

    for (int i = 0; i < n; i++) {
        const double *row = z + (size_t)i * k;
        double max = row[0], sum = 0.0;

        for (int j = 1; j < k; j++)
            max = fmax(max, row[j]);
        for (int j = 0; j < k; j++)
            sum += exp(row[j] - max);
        loss += log(sum) + max - row[y[i]];
    }
    return loss / n;
}

#endif
