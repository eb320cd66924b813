/*
 * sum_n_scalar.c - the n-input fp32 sum of reduce.h in plain loops that the
 * compiler vectorises for the baseline ISA (SSE2 on x86-64; this file is
 * built with -O3): the scalar variant in the codec table, and the oracle
 * that sum_n_simd.c's AVX2 and AVX-512 variants match bit for bit.
 */
#include "ring_build.h"

#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "sum_n.h"

/* A block of elements at a time, every input added into a small
 * accumulator in source order: one read of each input and one write of each
 * output per element, where pairwise passes read and write the result again
 * for every input. 64 floats: on the 2-core VM blocks of 128 and 256 ran the
 * streamed form at half the speed (16 MiB, n=2: 2.9 GB/s busbw against 6.2),
 * 32 a little slower; the stores are plain loops, not a memcpy call per block */
#define SUM_N_BLOCK 64

/* acc[0..len) = the sum of the nsrc inputs at base, in source order, scaled.
 * Inlined with len a constant for whole blocks, so the loops unroll. */
static inline void sum_n_block(float *acc, const float *const *src, int nsrc, size_t base,
                               size_t len, float scale)
{
    const float *in0 = src[0] + base;

    for (size_t i = 0; i < len; i++)
        acc[i] = in0[i];
    for (int s = 1; s < nsrc; s++) {
        const float *in = src[s] + base;

        for (size_t i = 0; i < len; i++)
            acc[i] += in[i];
    }
    if (scale != 1.0f)
        for (size_t i = 0; i < len; i++)
            acc[i] *= scale;
}

/* out[0..len) = acc (plain stores: the compiler vectorises them) */
static inline void store_block(float *out, const float *acc, size_t len)
{
    for (size_t i = 0; i < len; i++)
        out[i] = acc[i];
}

/* chk[i] += acc[i] * 0: stays +-0 while every sum is finite, becomes NaN for
 * an inf or NaN (0 * inf is NaN): the inf/NaN check of the result, fused into
 * the pass that writes it instead of a second pass over it */
static inline void check_block(float *chk, const float *acc, size_t len)
{
    for (size_t i = 0; i < len; i++)
        chk[i] += acc[i] * 0.0f;
}

static int check_nonfinite(const float *chk)
{
    int bad = 0;

    for (size_t i = 0; i < SUM_N_BLOCK; i++)
        bad |= chk[i] != chk[i];
    return bad;
}

static int sum_n_plain(float *dst, float *dst2, const float *const *src, int nsrc,
                       float scale, size_t n)
{
    float acc[SUM_N_BLOCK], chk[SUM_N_BLOCK] = {0};
    size_t base = 0;

    for (; base + SUM_N_BLOCK <= n; base += SUM_N_BLOCK) {
        sum_n_block(acc, src, nsrc, base, SUM_N_BLOCK, scale);
        store_block(dst + base, acc, SUM_N_BLOCK);
        if (dst2 != NULL)
            store_block(dst2 + base, acc, SUM_N_BLOCK);
        check_block(chk, acc, SUM_N_BLOCK);
    }
    if (base < n) {
        sum_n_block(acc, src, nsrc, base, n - base, scale);
        store_block(dst + base, acc, n - base);
        if (dst2 != NULL)
            store_block(dst2 + base, acc, n - base);
        check_block(chk, acc, n - base);
    }
    return check_nonfinite(chk);
}

static int sum_n_stream(float *dst, float *dst2, const float *const *src, int nsrc,
                        float scale, size_t n)
{
#if defined(__SSE2__)
    if (((uintptr_t)dst2 & 15) == 0) {
        float acc[SUM_N_BLOCK], chk[SUM_N_BLOCK] = {0};
        size_t base = 0;

        for (; base + SUM_N_BLOCK <= n; base += SUM_N_BLOCK) {
            sum_n_block(acc, src, nsrc, base, SUM_N_BLOCK, scale);
            store_block(dst + base, acc, SUM_N_BLOCK);
            for (size_t i = 0; i < SUM_N_BLOCK; i += 4)
                _mm_stream_ps(dst2 + base + i, _mm_loadu_ps(acc + i));
            check_block(chk, acc, SUM_N_BLOCK);
        }
        if (base < n) {
            sum_n_block(acc, src, nsrc, base, n - base, scale);
            store_block(dst + base, acc, n - base);
            store_block(dst2 + base, acc, n - base);
            check_block(chk, acc, n - base);
        }
        _mm_sfence();
        return check_nonfinite(chk);
    }
#endif
    return sum_n_plain(dst, dst2, src, nsrc, scale, n);
}

int ring_sum_n_scalar(float *dst, float *dst2, const float *const *src, int nsrc, float scale,
                      size_t n, int stream)
{
    return (stream && dst2 != NULL ? sum_n_stream : sum_n_plain)(dst, dst2, src, nsrc, scale, n);
}

