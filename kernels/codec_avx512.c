/*
 * codec_avx512.c - the codec on AVX-512F/BW/VL, 16 fp32 lanes per vector;
 * the tail (n % 16) is one more masked vector, so there is no scalar loop.
 *
 * As in codec_avx2.c: per-function target attributes (the library runs on
 * CPUs without AVX-512; codec_dispatch.c decides), -ffp-contract=off, and
 * unaligned, masked loads and stores. A masked-off lane is never read or
 * written, so a tail next to an unmapped page is safe.
 *
 * fp16: _mm512_cvtps_ph with an explicit round-to-nearest-even immediate
 * and _mm512_cvtph_ps. bf16: integer round to nearest even, NOT AVX512_BF16's
 * vcvtneps2bf16: that instruction treats fp32 denormal inputs as zero
 * (Intel SDM: "input denormals are always treated as zero", whatever MXCSR
 * says), so it is not bit-exact with the oracle, which keeps bf16
 * subnormals; its NaN and normal-number results do agree. The integer
 * path costs a few ALU ops per 16 elements and stays memory-bound.
 */
#include "ring_build.h"

#include "codec.h"
#include "half.h"
#include "sum_n.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl")))
#define AVX512_INLINE static inline __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline))
#define AVX512_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* the lanes of the last, partial vector: 0 < rest < 16 */
static inline __mmask16 avx512_tail_mask(size_t rest)
{
    return (__mmask16)((1u << rest) - 1u);
}

/* x / s == x * (1 / s) for every x when 1 / s is exact, i.e. s a normal power of two */
static int avx512_exact_inverse(float s)
{
    uint32_t b = ring_f32_bits(s) & 0x7fffffffu;

    return (b & 0x7fffffu) == 0 && b >= 0x00800000u && b < 0x7f800000u;
}

/* ---- fp16 -------------------------------------------------------------------------- */

AVX512_FN static void avx512_encode_f16(uint16_t *dst, const float *src, float scale, size_t n)
{
    const __m512 s = _mm512_set1_ps(scale);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_mul_ps(_mm512_loadu_ps(src + i), s);

        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(a, AVX512_RNE));
    }
    if (i < n) {
        __mmask16 m = avx512_tail_mask(n - i);
        __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, src + i), s);

        _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtps_ph(a, AVX512_RNE));
    }
}

AVX512_FN static void avx512_decode_f16(float *dst, const uint16_t *src, float scale, size_t n)
{
    const __m512 s = _mm512_set1_ps(scale);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i)));

        _mm512_storeu_ps(dst + i, _mm512_mul_ps(a, s));
    }
    if (i < n) {
        __mmask16 m = avx512_tail_mask(n - i);
        __m512 a = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i));

        _mm512_mask_storeu_ps(dst + i, m, _mm512_mul_ps(a, s));
    }
}

/* ---- bf16 -------------------------------------------------------------------------- */

/* 16 fp32 -> 16 bf16 in the low halves of the 32-bit lanes (half.h's ring_f32_to_bf16) */
AVX512_INLINE __m512i avx512_bf16_round(__m512 v)
{
    const __m512i x = _mm512_castps_si512(v);
    const __m512i hi = _mm512_srli_epi32(x, 16);
    __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                    _mm512_and_si512(hi, _mm512_set1_epi32(1)));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));

    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
}

AVX512_INLINE __m512 avx512_bf16_widen(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512_FN static void avx512_encode_bf16(uint16_t *dst, const float *src, float scale, size_t n)
{
    const __m512 s = _mm512_set1_ps(scale);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m512i r = avx512_bf16_round(_mm512_mul_ps(_mm512_loadu_ps(src + i), s));

        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
    if (i < n) {
        __mmask16 m = avx512_tail_mask(n - i);
        __m512i r = avx512_bf16_round(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, src + i), s));

        _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtepi32_epi16(r));
    }
}

AVX512_FN static void avx512_decode_bf16(float *dst, const uint16_t *src, float scale, size_t n)
{
    const __m512 s = _mm512_set1_ps(scale);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m512 a = avx512_bf16_widen(_mm256_loadu_si256((const __m256i *)(src + i)));

        _mm512_storeu_ps(dst + i, _mm512_mul_ps(a, s));
    }
    if (i < n) {
        __mmask16 m = avx512_tail_mask(n - i);
        __m512 a = avx512_bf16_widen(_mm256_maskz_loadu_epi16(m, src + i));

        _mm512_mask_storeu_ps(dst + i, m, _mm512_mul_ps(a, s));
    }
}

/* ---- fused ------------------------------------------------------------------------- */

/* half.h's ring_fused_sum: the products rounded, one add, the wire's NaN first */
AVX512_INLINE __m512 avx512_fused_sum(__m512 wire, __m512 local, __m512 in_s, __m512 local_s)
{
    __m512 t1 = _mm512_mul_ps(wire, in_s);
    __m512 t2 = _mm512_mul_ps(local, local_s);

    return _mm512_mask_mov_ps(_mm512_add_ps(t1, t2), _mm512_cmp_ps_mask(t1, t1, _CMP_UNORD_Q),
                              t1);
}

/* final = fp32(out) / out_scale, as a multiplication when that is exact */
AVX512_INLINE __m512 avx512_final(__m512 f, __m512 out_s, __m512 inv, int exact)
{
    return exact ? _mm512_mul_ps(f, inv) : _mm512_div_ps(f, out_s);
}

AVX512_FN static void avx512_fused_f16(uint16_t *out, float *final, const uint16_t *in,
                                       const float *local, float in_scale, float local_scale,
                                       float out_scale, size_t n)
{
    const __m512 in_s = _mm512_set1_ps(in_scale), local_s = _mm512_set1_ps(local_scale);
    const __m512 out_s = _mm512_set1_ps(out_scale);
    const int exact = avx512_exact_inverse(out_scale);
    const __m512 inv = _mm512_set1_ps(exact ? 1.0f / out_scale : 1.0f);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(in + i)));
        __m512 sum = avx512_fused_sum(w, _mm512_loadu_ps(local + i), in_s, local_s);
        __m256i o = _mm512_cvtps_ph(_mm512_mul_ps(sum, out_s), AVX512_RNE);

        _mm256_storeu_si256((__m256i *)(out + i), o);
        if (final)
            _mm512_storeu_ps(final + i, avx512_final(_mm512_cvtph_ps(o), out_s, inv, exact));
    }
    if (i < n) {
        __mmask16 m = avx512_tail_mask(n - i);
        __m512 w = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, in + i));
        __m512 sum = avx512_fused_sum(w, _mm512_maskz_loadu_ps(m, local + i), in_s, local_s);
        __m256i o = _mm512_cvtps_ph(_mm512_mul_ps(sum, out_s), AVX512_RNE);

        _mm256_mask_storeu_epi16(out + i, m, o);
        if (final)
            _mm512_mask_storeu_ps(final + i, m,
                                  avx512_final(_mm512_cvtph_ps(o), out_s, inv, exact));
    }
}

AVX512_FN static void avx512_fused_bf16(uint16_t *out, float *final, const uint16_t *in,
                                        const float *local, float in_scale, float local_scale,
                                        float out_scale, size_t n)
{
    const __m512 in_s = _mm512_set1_ps(in_scale), local_s = _mm512_set1_ps(local_scale);
    const __m512 out_s = _mm512_set1_ps(out_scale);
    const int exact = avx512_exact_inverse(out_scale);
    const __m512 inv = _mm512_set1_ps(exact ? 1.0f / out_scale : 1.0f);
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        __m512 w = avx512_bf16_widen(_mm256_loadu_si256((const __m256i *)(in + i)));
        __m512 sum = avx512_fused_sum(w, _mm512_loadu_ps(local + i), in_s, local_s);
        __m512i r = avx512_bf16_round(_mm512_mul_ps(sum, out_s));

        _mm256_storeu_si256((__m256i *)(out + i), _mm512_cvtepi32_epi16(r));
        if (final)
            _mm512_storeu_ps(final + i, avx512_final(_mm512_castsi512_ps(_mm512_slli_epi32(r, 16)),
                                                     out_s, inv, exact));
    }
    if (i < n) {
        __mmask16 m = avx512_tail_mask(n - i);
        __m512 w = avx512_bf16_widen(_mm256_maskz_loadu_epi16(m, in + i));
        __m512 sum = avx512_fused_sum(w, _mm512_maskz_loadu_ps(m, local + i), in_s, local_s);
        __m512i r = avx512_bf16_round(_mm512_mul_ps(sum, out_s));

        _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(r));
        if (final)
            _mm512_mask_storeu_ps(
                final + i, m,
                avx512_final(_mm512_castsi512_ps(_mm512_slli_epi32(r, 16)), out_s, inv, exact));
    }
}

/* ---- absmax ------------------------------------------------------------------------ */

/* |x| as bits orders like |x| for non-NaN x; NaN lanes (bits > inf) are left out */
AVX512_FN static float avx512_absmax_f32(const float *src, size_t n, int *nonfinite_p)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    const __m512i inf = _mm512_set1_epi32(0x7f800000);
    __m512i m0 = _mm512_setzero_si512(), m1 = _mm512_setzero_si512();
    __mmask16 nf = 0;
    size_t i = 0;

    for (; i + 32 <= n; i += 32) {
        __m512i a = _mm512_and_si512(_mm512_loadu_si512(src + i), abs_mask);
        __m512i b = _mm512_and_si512(_mm512_loadu_si512(src + i + 16), abs_mask);

        nf |= _mm512_cmpge_epu32_mask(a, inf) | _mm512_cmpge_epu32_mask(b, inf);
        m0 = _mm512_mask_max_epu32(m0, _mm512_cmple_epu32_mask(a, inf), m0, a);
        m1 = _mm512_mask_max_epu32(m1, _mm512_cmple_epu32_mask(b, inf), m1, b);
    }
    for (; i + 16 <= n; i += 16) {
        __m512i a = _mm512_and_si512(_mm512_loadu_si512(src + i), abs_mask);

        nf |= _mm512_cmpge_epu32_mask(a, inf);
        m0 = _mm512_mask_max_epu32(m0, _mm512_cmple_epu32_mask(a, inf), m0, a);
    }
    if (i < n) {
        /* masked-off lanes load as 0, which changes neither the max nor the flag */
        __m512i a = _mm512_and_si512(_mm512_maskz_loadu_epi32(avx512_tail_mask(n - i), src + i),
                                     abs_mask);

        nf |= _mm512_cmpge_epu32_mask(a, inf);
        m0 = _mm512_mask_max_epu32(m0, _mm512_cmple_epu32_mask(a, inf), m0, a);
    }
    if (nf && nonfinite_p)
        *nonfinite_p = 1;
    return ring_bits_f32(_mm512_reduce_max_epu32(_mm512_max_epu32(m0, m1)));
}

/* declared in codec_dispatch.c, which hands it out only when the CPU has AVX-512F/BW/VL */
extern const ring_codec_ops_t ring_codec_avx512_ops;
const ring_codec_ops_t ring_codec_avx512_ops = {
    .name = "avx512",
    .encode_f16 = avx512_encode_f16,
    .decode_f16 = avx512_decode_f16,
    .encode_bf16 = avx512_encode_bf16,
    .decode_bf16 = avx512_decode_bf16,
    .fused_f16 = avx512_fused_f16,
    .fused_bf16 = avx512_fused_bf16,
    .absmax_f32 = avx512_absmax_f32,
    .sum_n_f32 = ring_sum_n_avx512,
};

#endif /* x86 */
