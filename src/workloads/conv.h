/*
 * conv.h - the CPU layers of the CNN that dense.h does not have: a 2-D
 * convolution (stride 1, zero padding, im2col + cblas_sgemm) and 2x2 max
 * pooling with stride 2.
 *
 * Layouts, all row-major float:
 *   activations  NCHW: x[((i * C + c) * H + y) * W + x] for image i
 *   weights      [cout][cin][k][k], at params + l->w_off
 *   bias         [cout], at params + l->b_off
 *   im2col       [cin * k * k][H * W] for one image: row (c, ky, kx),
 *                column (y, x) holds x[c][y + ky - pad][x + kx - pad],
 *                0 outside the image
 * The gradients of the weights and the bias go to the same offsets in
 * grads (the workload's flat arrays, see workload.h).
 *
 * A layer only describes shapes and offsets; it owns no memory. Nothing
 * here allocates: the caller passes a col buffer of conv_col_floats()
 * floats, which every call overwrites. Nothing here fails either.
 */
#ifndef RING_CONV_H
#define RING_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"

typedef struct conv_layer {
    int cin, cout;            /* channels in and out */
    int h, w;                 /* input height and width = output's (stride 1) */
    int k;                    /* square kernel, odd */
    int pad;                  /* zero padding per side: k / 2 keeps H x W ('same') */
    size_t w_off, b_off;      /* weights and bias in params and grads */
} conv_layer_t;

/* A 'same' convolution of an h x w input; offsets from *off, which advances. */
conv_layer_t conv_same(int cin, int cout, int h, int w, int k, size_t *off);

/* Parameters of the layer: weights and bias. */
size_t conv_nparams(const conv_layer_t *l);

/* He normal initialisation: W ~ N(0, 2 / (cin k k)) drawn in layout order from r, b = 0. */
void conv_init_he(const conv_layer_t *l, float *params, rng_t *r);

/* Size of the im2col buffer for one image, in floats. */
size_t conv_col_floats(const conv_layer_t *l);

/* The im2col matrix of one image x (cin x h x w) into col. */
void conv_im2col(const conv_layer_t *l, const float *x, float *col);

/* y (n x cout x h x w) = the convolution of x (n x cin x h x w) plus bias. */
void conv_forward(const conv_layer_t *l, const float *params, const float *x, int n, float *y,
                  float *col);

/*
 * Given x and dy = dL/dy of the forward pass: the weight and bias
 * gradients, summed over the n images, OVERWRITE their slices of grads;
 * dx = dL/dx is written when dx is not NULL (the first layer needs none).
 */
void conv_backward(const conv_layer_t *l, const float *params, const float *x, const float *dy,
                   int n, float *grads, float *dx, float *col);

/*
 * 2x2 max pooling, stride 2, of x (n x c x h x w) into y (n x c x h/2 x
 * w/2, rounded down: an odd last row or column is dropped, as with
 * TensorFlow's 'valid' pooling). argmax[j] is where in its h x w plane of
 * x the value y[j] came from (y * w + x; the first maximum in row-major
 * order on ties). Plane indices stay small whatever the batch size.
 */
void pool_forward(int n, int c, int h, int w, const float *x, float *y, int32_t *argmax);

/* dx (n x c x h x w) = dy routed back to the argmax inputs, 0 elsewhere. */
void pool_backward(int n, int c, int h, int w, const float *dy, const int32_t *argmax,
                   float *dx);

#endif /* RING_CONV_H */
