/*
 * sum_n_simd.c - reduce.h's n-input fp32 sum on AVX2 and AVX-512, written
 * with intrinsics: the compiler's own vectorisation of sum_n_scalar.c's loops
 * spills its 64-float accumulator to the stack. Two-input sums on the 2-core
 * AVX-512 VM, GB/s of reads and writes: 4096 floats (L1) 44 for those loops
 * (SSE2 at -O3; -mavx2 no better), 145 for AVX2 and 230 for AVX-512 here;
 * 128K floats (L2, where the ring's chunks are added) 31, 65 and 82; from
 * memory all about 27.
 *
 * Every lane does what sum_n_scalar.c's loop does to its element, in the same
 * order: the first input, plus each further input in source order, then
 * times the scale when it is not 1; no FMA (-ffp-contract=off, and no "fma"
 * in the targets), so the bits are the scalar variant's. The inf/NaN check
 * is the same too: acc * 0 added into a check that stays +-0 while every sum
 * is finite. Each function carries its target attribute, as in the codec
 * files: codec_dispatch.c hands them out only on CPUs that have them.
 */
#include "ring_build.h"

#include <stdint.h>

#include "sum_n.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define AVX2_FN __attribute__((target("avx2")))
#define AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl")))

/* lanes of dst2 before its first address aligned to `bytes` (streamed stores need one) */
static size_t lanes_to_aligned(const float *p, size_t bytes, size_t n)
{
    size_t head = ((bytes - ((uintptr_t)p & (bytes - 1))) & (bytes - 1)) / sizeof(float);

    return head < n ? head : n;
}

/* ---- AVX-512: 16 lanes a vector, 4 vectors a block -------------------------------- */

static inline __mmask16 avx512_mask(size_t rest)
{
    return rest >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << rest) - 1u);
}

/* one vector of up to 16 lanes (the head before an aligned dst2, the tail): plain stores */
AVX512_FN static __m512 avx512_sum_part(float *dst, float *dst2, const float *const *src,
                                        int nsrc, __m512 scale, int scaled, size_t i,
                                        __mmask16 m)
{
    __m512 a = _mm512_maskz_loadu_ps(m, src[0] + i);

    for (int s = 1; s < nsrc; s++)
        a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(m, src[s] + i));
    if (scaled)
        a = _mm512_mul_ps(a, scale);
    _mm512_mask_storeu_ps(dst + i, m, a);
    if (dst2 != NULL)
        _mm512_mask_storeu_ps(dst2 + i, m, a);
    return a; /* masked-off lanes are 0, which the check ignores */
}

AVX512_FN int ring_sum_n_avx512(float *dst, float *dst2, const float *const *src, int nsrc,
                                float scale, size_t n, int stream)
{
    const __m512 sc = _mm512_set1_ps(scale), zero = _mm512_setzero_ps();
    const int scaled = scale != 1.0f;
    __m512 c0 = zero, c1 = zero, c2 = zero, c3 = zero; /* four checks: no chain of adds */
    size_t i, head;

    stream = stream && dst2 != NULL;
    head = stream ? lanes_to_aligned(dst2, 64, n) : 0;
    if (head > 0)
        c0 = _mm512_add_ps(c0, _mm512_mul_ps(avx512_sum_part(dst, dst2, src, nsrc, sc, scaled,
                                                             0, avx512_mask(head)), zero));
    for (i = head; i + 64 <= n; i += 64) {
        const float *p = src[0] + i;
        __m512 a0 = _mm512_loadu_ps(p), a1 = _mm512_loadu_ps(p + 16);
        __m512 a2 = _mm512_loadu_ps(p + 32), a3 = _mm512_loadu_ps(p + 48);

        for (int s = 1; s < nsrc; s++) {
            p = src[s] + i;
            a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p));
            a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + 16));
            a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + 32));
            a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + 48));
        }
        if (scaled) {
            a0 = _mm512_mul_ps(a0, sc), a1 = _mm512_mul_ps(a1, sc);
            a2 = _mm512_mul_ps(a2, sc), a3 = _mm512_mul_ps(a3, sc);
        }
        c0 = _mm512_add_ps(c0, _mm512_mul_ps(a0, zero));
        c1 = _mm512_add_ps(c1, _mm512_mul_ps(a1, zero));
        c2 = _mm512_add_ps(c2, _mm512_mul_ps(a2, zero));
        c3 = _mm512_add_ps(c3, _mm512_mul_ps(a3, zero));
        _mm512_storeu_ps(dst + i, a0), _mm512_storeu_ps(dst + i + 16, a1);
        _mm512_storeu_ps(dst + i + 32, a2), _mm512_storeu_ps(dst + i + 48, a3);
        if (stream) {
            _mm512_stream_ps(dst2 + i, a0), _mm512_stream_ps(dst2 + i + 16, a1);
            _mm512_stream_ps(dst2 + i + 32, a2), _mm512_stream_ps(dst2 + i + 48, a3);
        } else if (dst2 != NULL) {
            _mm512_storeu_ps(dst2 + i, a0), _mm512_storeu_ps(dst2 + i + 16, a1);
            _mm512_storeu_ps(dst2 + i + 32, a2), _mm512_storeu_ps(dst2 + i + 48, a3);
        }
    }
    for (; i < n; i += 16)
        c1 = _mm512_add_ps(c1, _mm512_mul_ps(avx512_sum_part(dst, dst2, src, nsrc, sc, scaled,
                                                             i, avx512_mask(n - i)), zero));
    if (stream)
        _mm_sfence(); /* the streamed lines are visible before anything after */
    c0 = _mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3));
    return _mm512_cmp_ps_mask(c0, c0, _CMP_UNORD_Q) != 0;
}

/* ---- AVX2: 8 lanes a vector, 4 vectors a block ------------------------------------ */

/* lanes below rest on (the sign bit, which maskload and maskstore read) */
static inline __attribute__((target("avx2"))) __m256i avx2_mask(size_t rest)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);

    return _mm256_cmpgt_epi32(_mm256_set1_epi32(rest >= 8 ? 8 : (int)rest), lane);
}

AVX2_FN static __m256 avx2_sum_part(float *dst, float *dst2, const float *const *src, int nsrc,
                                    __m256 scale, int scaled, size_t i, __m256i m)
{
    __m256 a = _mm256_maskload_ps(src[0] + i, m);

    for (int s = 1; s < nsrc; s++)
        a = _mm256_add_ps(a, _mm256_maskload_ps(src[s] + i, m));
    if (scaled)
        a = _mm256_mul_ps(a, scale);
    _mm256_maskstore_ps(dst + i, m, a);
    if (dst2 != NULL)
        _mm256_maskstore_ps(dst2 + i, m, a);
    return a;
}

AVX2_FN int ring_sum_n_avx2(float *dst, float *dst2, const float *const *src, int nsrc,
                            float scale, size_t n, int stream)
{
    const __m256 sc = _mm256_set1_ps(scale), zero = _mm256_setzero_ps();
    const int scaled = scale != 1.0f;
    __m256 c0 = zero, c1 = zero, c2 = zero, c3 = zero;
    size_t i, head;

    stream = stream && dst2 != NULL;
    head = stream ? lanes_to_aligned(dst2, 32, n) : 0;
    if (head > 0)
        c0 = _mm256_add_ps(c0, _mm256_mul_ps(avx2_sum_part(dst, dst2, src, nsrc, sc, scaled, 0,
                                                           avx2_mask(head)), zero));
    for (i = head; i + 32 <= n; i += 32) {
        const float *p = src[0] + i;
        __m256 a0 = _mm256_loadu_ps(p), a1 = _mm256_loadu_ps(p + 8);
        __m256 a2 = _mm256_loadu_ps(p + 16), a3 = _mm256_loadu_ps(p + 24);

        for (int s = 1; s < nsrc; s++) {
            p = src[s] + i;
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + 8));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + 16));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + 24));
        }
        if (scaled) {
            a0 = _mm256_mul_ps(a0, sc), a1 = _mm256_mul_ps(a1, sc);
            a2 = _mm256_mul_ps(a2, sc), a3 = _mm256_mul_ps(a3, sc);
        }
        c0 = _mm256_add_ps(c0, _mm256_mul_ps(a0, zero));
        c1 = _mm256_add_ps(c1, _mm256_mul_ps(a1, zero));
        c2 = _mm256_add_ps(c2, _mm256_mul_ps(a2, zero));
        c3 = _mm256_add_ps(c3, _mm256_mul_ps(a3, zero));
        _mm256_storeu_ps(dst + i, a0), _mm256_storeu_ps(dst + i + 8, a1);
        _mm256_storeu_ps(dst + i + 16, a2), _mm256_storeu_ps(dst + i + 24, a3);
        if (stream) {
            _mm256_stream_ps(dst2 + i, a0), _mm256_stream_ps(dst2 + i + 8, a1);
            _mm256_stream_ps(dst2 + i + 16, a2), _mm256_stream_ps(dst2 + i + 24, a3);
        } else if (dst2 != NULL) {
            _mm256_storeu_ps(dst2 + i, a0), _mm256_storeu_ps(dst2 + i + 8, a1);
            _mm256_storeu_ps(dst2 + i + 16, a2), _mm256_storeu_ps(dst2 + i + 24, a3);
        }
    }
    for (; i < n; i += 8)
        c1 = _mm256_add_ps(c1, _mm256_mul_ps(avx2_sum_part(dst, dst2, src, nsrc, sc, scaled, i,
                                                           avx2_mask(n - i)), zero));
    if (stream)
        _mm_sfence();
    c0 = _mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3));
    return _mm256_movemask_ps(_mm256_cmp_ps(c0, c0, _CMP_UNORD_Q)) != 0;
}

#endif /* x86 */
