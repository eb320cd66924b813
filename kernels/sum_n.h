/*
 * sum_n.h - the n-input fp32 sum of reduce.h in each variant; the codec
 * table (codec.h) holds the one this CPU runs, chosen with the codec's
 * kernels (RING_KERNEL). Same contract as ring_reduce_sum_n_f32; stream:
 * dst2 (not NULL) written with non-temporal stores.
 */
#ifndef RING_SUM_N_H
#define RING_SUM_N_H

#include <stddef.h>

int ring_sum_n_scalar(float *dst, float *dst2, const float *const *src, int nsrc, float scale,
                      size_t n, int stream); /* sum_n_scalar.c: plain loops (SSE2 on x86-64) */
#if defined(__x86_64__) || defined(__i386__)
int ring_sum_n_avx2(float *dst, float *dst2, const float *const *src, int nsrc, float scale,
                    size_t n, int stream); /* sum_n_simd.c */
int ring_sum_n_avx512(float *dst, float *dst2, const float *const *src, int nsrc, float scale,
                      size_t n, int stream);
#endif

#endif /* RING_SUM_N_H */
