/*
 * reduce.h - reduction kernels: pure functions over buffers. The sums run
 * the variant chosen with the codec's kernels (codec.h, RING_KERNEL):
 * scalar, AVX2 or AVX-512, all with the same bits.
 */
#ifndef RING_REDUCE_H
#define RING_REDUCE_H

#include <stddef.h>

/* dst[i] = a[i] + b[i]; dst may alias a or b. */
void ring_reduce_sum_f32(float *dst, const float *a, const float *b, size_t n);

/* dst[i] = (((src[0][i] + src[1][i]) + src[2][i]) + ... + src[nsrc-1][i]) * scale,
 * and dst2[i] the same when dst2 is not NULL: the bits of nsrc - 1 pairwise
 * passes in that order (then a scale, skipped when scale is 1), in one pass
 * over memory. 1 <= nsrc <= RING_REDUCE_MAX_SRC; dst and dst2 may each alias
 * one src exactly (every variant reads a block of all inputs before it
 * writes it). Returns 1 when any sum is inf or NaN (checked in the same
 * pass), else 0. */
#define RING_REDUCE_MAX_SRC 64
int ring_reduce_sum_n_f32(float *dst, float *dst2, const float *const *src, int nsrc,
                          float scale, size_t n);

/* The same, dst2 (not NULL) written with non-temporal stores where the CPU
 * has them (x86: SSE2), past the caches: for results larger than the caches,
 * which would otherwise read each line of dst2 before writing it. */
int ring_reduce_sum_n_f32_stream(float *dst, float *dst2, const float *const *src, int nsrc,
                                 float scale, size_t n);
/* memcpy of n floats with non-temporal stores where the CPU has them. */
void ring_copy_f32_stream(float *dst, const float *src, size_t n);

/* dst[i] = a[i] * scale; dst may alias a. */
void ring_scale_f32(float *dst, const float *a, float scale, size_t n);

#endif /* RING_REDUCE_H */
