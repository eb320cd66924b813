/*
 * reduce.c - fp32 reductions. Plain loops that the compiler vectorises
 * (this file is built with -O3); they run at memory speed, which is all a
 * ring needs from them. Order of operations is fixed, so results are the
 * same on every peer.
 */
#include "ring_build.h"

#include "reduce.h"

void ring_reduce_sum_f32(float *dst, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] + b[i];
}

void ring_reduce_sum_scale_f32(float *dst, const float *a, const float *b, float scale, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (a[i] + b[i]) * scale;
}

void ring_scale_f32(float *dst, const float *a, float scale, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] * scale;
}
