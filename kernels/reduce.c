/*
 * reduce.c - fp32 reductions. The sums run the variant of the codec table
 * (codec_dispatch.c): sum_n_scalar.c's plain loops, or sum_n_simd.c's AVX2
 * and AVX-512 ones where the CPU has them (out of the caches, where chunks
 * are added, those are 2-5x faster). Order of operations is fixed, so
 * results are the same on every peer and in every variant.
 */
#include "ring_build.h"

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "codec.h"
#include "reduce.h"

/* the n-input sum's kernel, which runs faster than a plain loop here */
void ring_reduce_sum_f32(float *dst, const float *a, const float *b, size_t n)
{
    const float *src[2] = {a, b};

    (void)ring_codec_ops()->sum_n_f32(dst, NULL, src, 2, 1.0f, n, 0);
}

void ring_copy_f32_stream(float *dst, const float *src, size_t n)
{
#if defined(__SSE2__)
    size_t i = 0;

    for (; i < n && ((uintptr_t)(dst + i) & 15) != 0; i++) /* to a 16-byte boundary */
        dst[i] = src[i];
    for (; i + 16 <= n; i += 16) {
        __m128 a = _mm_loadu_ps(src + i), b = _mm_loadu_ps(src + i + 4);
        __m128 c = _mm_loadu_ps(src + i + 8), d = _mm_loadu_ps(src + i + 12);

        _mm_stream_ps(dst + i, a);
        _mm_stream_ps(dst + i + 4, b);
        _mm_stream_ps(dst + i + 8, c);
        _mm_stream_ps(dst + i + 12, d);
    }
    for (; i < n; i++)
        dst[i] = src[i];
    _mm_sfence(); /* the streamed lines are visible before anything after */
#else
    memcpy(dst, src, n * sizeof(float));
#endif
}

/* the variant the codec runs (codec_dispatch.c): sum_n_simd.c's where the CPU has AVX2 */
int ring_reduce_sum_n_f32(float *dst, float *dst2, const float *const *src, int nsrc,
                          float scale, size_t n)
{
    return ring_codec_ops()->sum_n_f32(dst, dst2, src, nsrc, scale, n, 0);
}

int ring_reduce_sum_n_f32_stream(float *dst, float *dst2, const float *const *src, int nsrc,
                                 float scale, size_t n)
{
    return ring_codec_ops()->sum_n_f32(dst, dst2, src, nsrc, scale, n, 1);
}

void ring_scale_f32(float *dst, const float *a, float scale, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] * scale;
}
