/*
 * half.h - the element math of the codec (codec.h): fp32 <-> fp16 and
 * fp32 <-> bf16 conversions and the fused ring step, one element at a time.
 *
 * This is the definition every variant is checked against: the scalar
 * oracle (codec_scalar.c) is these functions in a loop, and the SIMD
 * variants use them for their tails. Everything is integer bit
 * manipulation except the fp32 products, sums and quotients the contract
 * asks for, so the results do not depend on the rounding mode or on the
 * compiler's choice of instructions; kernel files are built with
 * -ffp-contract=off so those products and sums are never fused.
 *
 * NaN results are the ones x86 hardware (F16C, SSE/AVX) gives, so that the
 * SIMD variants are bit-exact with these functions on every input:
 *   fp32 -> fp16   quiet NaN, sign kept, top 9 payload bits kept:
 *                  sign | 0x7e00 | mantissa >> 13
 *   fp16 -> fp32   quiet NaN, sign and payload kept: sign | 0x7fc00000 | m << 13
 *   fp32 -> bf16   quiet NaN, sign kept, top payload bits kept: x >> 16 | 0x0040
 *   bf16 -> fp32   x << 16 (exact; a signalling NaN stays one until the
 *                  multiplication by the scale quiets it)
 *
 * Every function is RING_HD so that a .cu file can include this header:
 * __host__ __device__ under nvcc, nothing otherwise. On the device the
 * fp32 operations use the _rn intrinsics, which nvcc never contracts.
 * (NaN payloads of fp32 arithmetic differ on GPUs, which return a
 * canonical NaN; finite results are the same bits.)
 */
#ifndef RING_HALF_H
#define RING_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define RING_HD __host__ __device__
#else
#define RING_HD
#endif

/* ---- bit casts and the three fp32 operations ------------------------------------ */

RING_HD static inline uint32_t ring_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;

    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

RING_HD static inline float ring_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;

    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

RING_HD static inline float ring_fmul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

RING_HD static inline float ring_fadd(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

RING_HD static inline float ring_fdiv(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

RING_HD static inline int ring_f32_isnan(float f)
{
    return (ring_f32_bits(f) & 0x7fffffffu) > 0x7f800000u;
}

/* ---- fp16 (IEEE binary16) ---------------------------------------------------------- */

/* fp32 -> fp16, round to nearest, ties to even; subnormals kept, overflow to inf. */
RING_HD static inline uint16_t ring_f32_to_f16(float f)
{
    uint32_t x = ring_f32_bits(f);
    uint32_t ax = x & 0x7fffffffu;
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);

    if (ax > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (halfway between 65504 and 2^16, to even): inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* >= 2^-14: normal fp16 */
        /* rebias the exponent, then round the 13 dropped bits; a carry out of
         * the mantissa correctly bumps the exponent */
        uint32_t r = ax - ((127u - 15u) << 23);

        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (ax < 0x33000000u) /* < 2^-25: below half the smallest subnormal (2^-25 ties to 0) */
        return sign;
    {
        /* subnormal fp16: units of 2^-24; value = m * 2^(e - 150), e in [102, 112] */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - (ax >> 23); /* 14..24 */
        uint32_t h = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);

        if (rem > half || (rem == half && (h & 1u)))
            h++; /* may carry into the smallest normal, which is right */
        return (uint16_t)(sign | h);
    }
}

/* fp16 -> fp32, exact. */
RING_HD static inline float ring_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t x;

    if (e == 0x1fu)
        x = sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u);
    else if (e != 0)
        x = sign | ((e + (127u - 15u)) << 23) | (m << 13);
    else if (m != 0) {
        /* subnormal: m * 2^-24, normalise */
        e = 113u; /* the biased fp32 exponent of 2^-14 */
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    } else
        x = sign;
    return ring_bits_f32(x);
}

/* ---- bf16 (the top half of fp32) --------------------------------------------------- */

/* fp32 -> bf16, round to nearest, ties to even (subnormals kept, overflow to inf). */
RING_HD static inline uint16_t ring_f32_to_bf16(float f)
{
    uint32_t x = ring_f32_bits(f);

    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x0040u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* bf16 -> fp32, exact. */
RING_HD static inline float ring_bf16_to_f32(uint16_t h)
{
    return ring_bits_f32((uint32_t)h << 16);
}

/* ---- the fused ring step (codec.h, fused_f16 / fused_bf16) ------------------------- */

/*
 * sum = wire * in_scale + local * local_scale, each product rounded to fp32,
 * then one fp32 add. When both products are NaN the sum is the first one
 * (the wire value's): x86 returns the first operand's NaN, but compilers
 * may swap the operands of a commutative add, so the choice is made here.
 */
RING_HD static inline float ring_fused_sum(float wire, float local, float in_scale,
                                           float local_scale)
{
    float t1 = ring_fmul(wire, in_scale);
    float t2 = ring_fmul(local, local_scale);

    return ring_f32_isnan(t1) ? t1 : ring_fadd(t1, t2);
}

/* out = fp16(sum * out_scale); *final_p (when not NULL) = fp32(out) / out_scale */
RING_HD static inline uint16_t ring_fused_f16_elem(uint16_t in, float local, float in_scale,
                                                   float local_scale, float out_scale,
                                                   float *final_p)
{
    float sum = ring_fused_sum(ring_f16_to_f32(in), local, in_scale, local_scale);
    uint16_t out = ring_f32_to_f16(ring_fmul(sum, out_scale));

    if (final_p)
        *final_p = ring_fdiv(ring_f16_to_f32(out), out_scale);
    return out;
}

RING_HD static inline uint16_t ring_fused_bf16_elem(uint16_t in, float local, float in_scale,
                                                    float local_scale, float out_scale,
                                                    float *final_p)
{
    float sum = ring_fused_sum(ring_bf16_to_f32(in), local, in_scale, local_scale);
    uint16_t out = ring_f32_to_bf16(ring_fmul(sum, out_scale));

    if (final_p)
        *final_p = ring_fdiv(ring_bf16_to_f32(out), out_scale);
    return out;
}

/* ---- absmax ------------------------------------------------------------------------ */

/*
 * One step of max |x| over fp32 bit patterns: |x| of a non-NaN orders like
 * its bits, so the running maximum is kept as bits (exact in any order).
 * NaN and inf set *nonfinite_p; NaN is left out of the maximum.
 */
RING_HD static inline void ring_absmax_elem(uint32_t *max_bits_p, int *nonfinite_p, float f)
{
    uint32_t a = ring_f32_bits(f) & 0x7fffffffu;

    if (a >= 0x7f800000u) {
        *nonfinite_p = 1;
        if (a > 0x7f800000u)
            return;
    }
    if (a > *max_bits_p)
        *max_bits_p = a;
}

#endif /* RING_HALF_H */
