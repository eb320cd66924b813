/*
 * codec_avx2.c - the codec on F16C + AVX2, 8 fp32 lanes per vector.
 *
 * Every function carries its own target attribute instead of a global
 * -mavx2, so the library still loads and runs (scalar) on older CPUs;
 * codec_dispatch.c only hands this table out when the CPU has AVX2 and
 * F16C. FMA is deliberately not in the target list, and the file is built
 * with -ffp-contract=off: the fused kernel must round each product and the
 * sum separately, like the scalar oracle. Unaligned loads and stores
 * throughout; the last n % 8 elements go through half.h, the oracle's own
 * element functions.
 *
 * fp16: _mm256_cvtps_ph with an explicit round-to-nearest-even immediate
 * (MXCSR is not consulted) and _mm256_cvtph_ps; their NaN results are what
 * half.h defines. bf16: integer round to nearest even, NaN blended in.
 */
#include "ring_build.h"

#include "codec.h"
#include "half.h"
#include "sum_n.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define AVX2_FN __attribute__((target("avx2,f16c")))
#define AVX2_INLINE static inline __attribute__((target("avx2,f16c"), always_inline))
#define AVX2_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* x / s == x * (1 / s) for every x when 1 / s is exact, i.e. s a normal power of two */
static int avx2_exact_inverse(float s)
{
    uint32_t b = ring_f32_bits(s) & 0x7fffffffu;

    return (b & 0x7fffffu) == 0 && b >= 0x00800000u && b < 0x7f800000u;
}

/* ---- fp16 -------------------------------------------------------------------------- */

AVX2_FN static void avx2_encode_f16(uint16_t *dst, const float *src, float scale, size_t n)
{
    const __m256 s = _mm256_set1_ps(scale);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_mul_ps(_mm256_loadu_ps(src + i), s);
        __m256 b = _mm256_mul_ps(_mm256_loadu_ps(src + i + 8), s);

        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(a, AVX2_RNE));
        _mm_storeu_si128((__m128i *)(dst + i + 8), _mm256_cvtps_ph(b, AVX2_RNE));
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_mul_ps(_mm256_loadu_ps(src + i), s);

        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(a, AVX2_RNE));
    }
    for (; i < n; i++)
        dst[i] = ring_f32_to_f16(ring_fmul(src[i], scale));
}

AVX2_FN static void avx2_decode_f16(float *dst, const uint16_t *src, float scale, size_t n)
{
    const __m256 s = _mm256_set1_ps(scale);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i)));
        __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i + 8)));

        _mm256_storeu_ps(dst + i, _mm256_mul_ps(a, s));
        _mm256_storeu_ps(dst + i + 8, _mm256_mul_ps(b, s));
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i)));

        _mm256_storeu_ps(dst + i, _mm256_mul_ps(a, s));
    }
    for (; i < n; i++)
        dst[i] = ring_fmul(ring_f16_to_f32(src[i]), scale);
}

/* ---- bf16 -------------------------------------------------------------------------- */

/* 8 fp32 -> 8 bf16 in the low halves of the 32-bit lanes (half.h's ring_f32_to_bf16) */
AVX2_INLINE __m256i avx2_bf16_round(__m256 v)
{
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                    _mm256_and_si256(hi, _mm256_set1_epi32(1)));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));

    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}

/* the 8 low halves, in order (values are < 2^16, so unsigned saturation is exact) */
AVX2_INLINE __m128i avx2_pack16(__m256i r)
{
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

AVX2_INLINE __m256 avx2_bf16_widen(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

AVX2_FN static void avx2_encode_bf16(uint16_t *dst, const float *src, float scale, size_t n)
{
    const __m256 s = _mm256_set1_ps(scale);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m256i a = avx2_bf16_round(_mm256_mul_ps(_mm256_loadu_ps(src + i), s));
        __m256i b = avx2_bf16_round(_mm256_mul_ps(_mm256_loadu_ps(src + i + 8), s));
        /* packus works per 128-bit lane: a0-3 b0-3 | a4-7 b4-7, then put the
         * 64-bit quarters back in order */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);

        _mm256_storeu_si256((__m256i *)(dst + i), p);
    }
    for (; i + 8 <= n; i += 8) {
        __m256i a = avx2_bf16_round(_mm256_mul_ps(_mm256_loadu_ps(src + i), s));

        _mm_storeu_si128((__m128i *)(dst + i), avx2_pack16(a));
    }
    for (; i < n; i++)
        dst[i] = ring_f32_to_bf16(ring_fmul(src[i], scale));
}

AVX2_FN static void avx2_decode_bf16(float *dst, const uint16_t *src, float scale, size_t n)
{
    const __m256 s = _mm256_set1_ps(scale);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m256 a = avx2_bf16_widen(_mm_loadu_si128((const __m128i *)(src + i)));
        __m256 b = avx2_bf16_widen(_mm_loadu_si128((const __m128i *)(src + i + 8)));

        _mm256_storeu_ps(dst + i, _mm256_mul_ps(a, s));
        _mm256_storeu_ps(dst + i + 8, _mm256_mul_ps(b, s));
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a = avx2_bf16_widen(_mm_loadu_si128((const __m128i *)(src + i)));

        _mm256_storeu_ps(dst + i, _mm256_mul_ps(a, s));
    }
    for (; i < n; i++)
        dst[i] = ring_fmul(ring_bf16_to_f32(src[i]), scale);
}

/* ---- fused ------------------------------------------------------------------------- */

/* half.h's ring_fused_sum: the products rounded, one add, the wire's NaN first */
AVX2_INLINE __m256 avx2_fused_sum(__m256 wire, __m256 local, __m256 in_s, __m256 local_s)
{
    __m256 t1 = _mm256_mul_ps(wire, in_s);
    __m256 t2 = _mm256_mul_ps(local, local_s);

    return _mm256_blendv_ps(_mm256_add_ps(t1, t2), t1, _mm256_cmp_ps(t1, t1, _CMP_UNORD_Q));
}

AVX2_FN static void avx2_fused_f16(uint16_t *out, float *final, const uint16_t *in,
                                   const float *local, float in_scale, float local_scale,
                                   float out_scale, size_t n)
{
    const __m256 in_s = _mm256_set1_ps(in_scale), local_s = _mm256_set1_ps(local_scale);
    const __m256 out_s = _mm256_set1_ps(out_scale);
    size_t i = 0;

    if (!final) {
        for (; i + 8 <= n; i += 8) {
            __m256 w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i)));
            __m256 sum = avx2_fused_sum(w, _mm256_loadu_ps(local + i), in_s, local_s);

            _mm_storeu_si128((__m128i *)(out + i),
                             _mm256_cvtps_ph(_mm256_mul_ps(sum, out_s), AVX2_RNE));
        }
    } else if (avx2_exact_inverse(out_scale)) {
        const __m256 inv = _mm256_set1_ps(1.0f / out_scale);

        for (; i + 8 <= n; i += 8) {
            __m256 w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i)));
            __m256 sum = avx2_fused_sum(w, _mm256_loadu_ps(local + i), in_s, local_s);
            __m128i o = _mm256_cvtps_ph(_mm256_mul_ps(sum, out_s), AVX2_RNE);

            _mm_storeu_si128((__m128i *)(out + i), o);
            _mm256_storeu_ps(final + i, _mm256_mul_ps(_mm256_cvtph_ps(o), inv));
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            __m256 w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i)));
            __m256 sum = avx2_fused_sum(w, _mm256_loadu_ps(local + i), in_s, local_s);
            __m128i o = _mm256_cvtps_ph(_mm256_mul_ps(sum, out_s), AVX2_RNE);

            _mm_storeu_si128((__m128i *)(out + i), o);
            _mm256_storeu_ps(final + i, _mm256_div_ps(_mm256_cvtph_ps(o), out_s));
        }
    }
    for (; i < n; i++)
        out[i] = ring_fused_f16_elem(in[i], local[i], in_scale, local_scale, out_scale,
                                     final ? &final[i] : NULL);
}

AVX2_FN static void avx2_fused_bf16(uint16_t *out, float *final, const uint16_t *in,
                                    const float *local, float in_scale, float local_scale,
                                    float out_scale, size_t n)
{
    const __m256 in_s = _mm256_set1_ps(in_scale), local_s = _mm256_set1_ps(local_scale);
    const __m256 out_s = _mm256_set1_ps(out_scale);
    const int exact = avx2_exact_inverse(out_scale);
    const __m256 inv = _mm256_set1_ps(exact ? 1.0f / out_scale : 1.0f);
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        __m256 w = avx2_bf16_widen(_mm_loadu_si128((const __m128i *)(in + i)));
        __m256 sum = avx2_fused_sum(w, _mm256_loadu_ps(local + i), in_s, local_s);
        __m256i r = avx2_bf16_round(_mm256_mul_ps(sum, out_s));

        _mm_storeu_si128((__m128i *)(out + i), avx2_pack16(r));
        if (final) {
            __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(r, 16));

            _mm256_storeu_ps(final + i, exact ? _mm256_mul_ps(f, inv) : _mm256_div_ps(f, out_s));
        }
    }
    for (; i < n; i++)
        out[i] = ring_fused_bf16_elem(in[i], local[i], in_scale, local_scale, out_scale,
                                      final ? &final[i] : NULL);
}

/* ---- absmax ------------------------------------------------------------------------ */

/* |x| as bits orders like |x| for non-NaN x; NaN lanes (bits > inf) become 0 */
AVX2_FN static float avx2_absmax_f32(const float *src, size_t n, int *nonfinite_p)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256i max_finite = _mm256_set1_epi32(0x7f7fffff);
    __m256i m0 = _mm256_setzero_si256(), m1 = _mm256_setzero_si256();
    __m256i nf = _mm256_setzero_si256();
    uint32_t lanes[8], max_bits = 0;
    int nonfinite = 0;
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(src + i)), abs_mask);
        __m256i b =
            _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(src + i + 8)), abs_mask);

        nf = _mm256_or_si256(nf, _mm256_or_si256(_mm256_cmpgt_epi32(a, max_finite),
                                                 _mm256_cmpgt_epi32(b, max_finite)));
        m0 = _mm256_max_epi32(m0, _mm256_andnot_si256(_mm256_cmpgt_epi32(a, inf), a));
        m1 = _mm256_max_epi32(m1, _mm256_andnot_si256(_mm256_cmpgt_epi32(b, inf), b));
    }
    for (; i + 8 <= n; i += 8) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(src + i)), abs_mask);

        nf = _mm256_or_si256(nf, _mm256_cmpgt_epi32(a, max_finite));
        m0 = _mm256_max_epi32(m0, _mm256_andnot_si256(_mm256_cmpgt_epi32(a, inf), a));
    }
    _mm256_storeu_si256((__m256i *)lanes, _mm256_max_epi32(m0, m1));
    for (int k = 0; k < 8; k++)
        if (lanes[k] > max_bits)
            max_bits = lanes[k];
    if (!_mm256_testz_si256(nf, nf))
        nonfinite = 1;
    for (; i < n; i++)
        ring_absmax_elem(&max_bits, &nonfinite, src[i]);
    if (nonfinite && nonfinite_p)
        *nonfinite_p = 1;
    return ring_bits_f32(max_bits);
}

/* declared in codec_dispatch.c, which hands it out only when the CPU has AVX2 and F16C */
extern const ring_codec_ops_t ring_codec_avx2_ops;
const ring_codec_ops_t ring_codec_avx2_ops = {
    .name = "avx2",
    .encode_f16 = avx2_encode_f16,
    .decode_f16 = avx2_decode_f16,
    .encode_bf16 = avx2_encode_bf16,
    .decode_bf16 = avx2_decode_bf16,
    .fused_f16 = avx2_fused_f16,
    .fused_bf16 = avx2_fused_bf16,
    .absmax_f32 = avx2_absmax_f32,
    .sum_n_f32 = ring_sum_n_avx2,
};

#endif /* x86 */
