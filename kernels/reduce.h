/*
 * reduce.h - reduction kernels: pure functions over buffers.
 * The codec issue adds fp16/bf16 conversion and fused kernels with a scalar
 * oracle and SIMD variants chosen at run time.
 */
#ifndef RING_REDUCE_H
#define RING_REDUCE_H

#include <stddef.h>

/* dst[i] = a[i] + b[i]; dst may alias a. */
void ring_reduce_sum_f32(float *dst, const float *a, const float *b, size_t n);

/* dst[i] = (a[i] + b[i]) * scale; dst may alias a. Used for the average. */
void ring_reduce_sum_scale_f32(float *dst, const float *a, const float *b, float scale, size_t n);

/* dst[i] = a[i] * scale; dst may alias a. */
void ring_scale_f32(float *dst, const float *a, float scale, size_t n);

#endif /* RING_REDUCE_H */
