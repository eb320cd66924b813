/*
 * reduce.c - fp32 reductions. Plain loops that the compiler vectorises
 * (this file is built with -O3); they run at memory speed, which is all a
 * ring needs from them. Order of operations is fixed, so results are the
 * same on every peer.
 */
#include "ring_build.h"

#include <string.h>

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

/* A block of elements at a time, every input added into a register-sized
 * accumulator in source order: one read of each input and one write of each
 * output per element, where pairwise passes read and write the result again
 * for every input. */
#define SUM_N_BLOCK 64

void ring_reduce_sum_n_f32(float *dst, float *dst2, const float *const *src, int nsrc,
                           float scale, size_t n)
{
    for (size_t base = 0; base < n; base += SUM_N_BLOCK) {
        size_t len = n - base < SUM_N_BLOCK ? n - base : SUM_N_BLOCK;
        float acc[SUM_N_BLOCK];

        for (size_t i = 0; i < len; i++)
            acc[i] = src[0][base + i];
        for (int s = 1; s < nsrc; s++) {
            const float *in = src[s] + base;

            for (size_t i = 0; i < len; i++)
                acc[i] += in[i];
        }
        if (scale != 1.0f)
            for (size_t i = 0; i < len; i++)
                acc[i] *= scale;
        memcpy(dst + base, acc, len * sizeof(float));
        if (dst2 != NULL)
            memcpy(dst2 + base, acc, len * sizeof(float));
    }
}

void ring_scale_f32(float *dst, const float *a, float scale, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] * scale;
}
