/*
 * codec.h - the gradient codec kernels: fp32 <-> fp16 (IEEE binary16) and
 * fp32 <-> bf16 conversions, and the fused ring kernels, as a table of
 * function pointers chosen once at run time from the CPU's features
 * (RING_KERNEL=scalar|avx2|avx512 forces one). Pure functions over
 * buffers; every variant is bit-exact with the scalar oracle.
 *
 * Rounding: round to nearest, ties to even, in every encode. fp16 keeps
 * subnormals (no flush to zero), overflows to +-inf, and NaN stays NaN
 * (quiet). bf16 is the top half of fp32 rounded RNE; NaN stays NaN.
 *
 * Scales: every encode multiplies by `scale` before rounding and every
 * decode multiplies by `scale` after widening. The ring passes powers of
 * two, so scaling is exact (barring under/overflow of fp32 itself).
 * Buffers may have any alignment and any length, including 0.
 *
 * The element math is kernels/half.h, which the scalar oracle is built
 * from. NaN results are quiet NaNs with the sign and top payload bits of
 * their source, as x86 (F16C, SSE/AVX) produces them, so that variants agree
 * bit for bit on NaNs too. A NaN scale gives NaN results whose payload is
 * not specified. The kernels leave MXCSR alone: under FTZ/DAZ the fp32
 * products flush fp32 subnormals, in every variant alike.
 * Overlap: fused_* may run in place (out == in, final == local, element for
 * element); no other overlap between arguments is allowed.
 */
#ifndef RING_CODEC_H
#define RING_CODEC_H

#include <stddef.h>
#include <stdint.h>

typedef struct ring_codec_ops {
    const char *name; /* "scalar", "avx2", "avx512" */

    /* dst[i] = fp16(src[i] * scale) */
    void (*encode_f16)(uint16_t *dst, const float *src, float scale, size_t n);
    /* dst[i] = fp32(src[i]) * scale */
    void (*decode_f16)(float *dst, const uint16_t *src, float scale, size_t n);
    void (*encode_bf16)(uint16_t *dst, const float *src, float scale, size_t n);
    void (*decode_bf16)(float *dst, const uint16_t *src, float scale, size_t n);

    /*
     * The reduce-scatter step, in one pass:
     *   sum     = fp32(in[i]) * in_scale + local[i] * local_scale   (fp32 arithmetic)
     *   out[i]  = fp16(sum * out_scale)
     * and, when final != NULL (the last reduce-scatter step, where this
     * peer becomes the owner), final[i] = fp32(out[i]) / out_scale: the
     * decoded wire value, so that every peer ends with the same bits.
     * The order of operations is exactly the above (two roundings of fp32
     * products and one fp32 add per element), in every variant. When both
     * products are NaN, sum is the first (the wire value's).
     */
    void (*fused_f16)(uint16_t *out, float *final, const uint16_t *in, const float *local,
                      float in_scale, float local_scale, float out_scale, size_t n);
    void (*fused_bf16)(uint16_t *out, float *final, const uint16_t *in, const float *local,
                       float in_scale, float local_scale, float out_scale, size_t n);

    /*
     * max over i of |src[i]| (0 for n == 0); sets *nonfinite_p to 1 when
     * some src[i] is inf or NaN (and leaves it alone otherwise). NaNs do not
     * count towards the maximum; an inf does. nonfinite_p may be NULL.
     */
    float (*absmax_f32)(const float *src, size_t n, int *nonfinite_p);

    /*
     * reduce.h's n-input sum (ring_reduce_sum_n_f32, and its streamed twin
     * when stream is 1): not a codec kernel, but chosen with them, so that
     * RING_KERNEL picks every kernel a ring runs. Same bits in every variant.
     */
    int (*sum_n_f32)(float *dst, float *dst2, const float *const *src, int nsrc, float scale,
                     size_t n, int stream);
} ring_codec_ops_t;

/*
 * The variant for this CPU: AVX-512 (F/BW/VL) > F16C/AVX2 > scalar, unless
 * RING_KERNEL names one (an unknown name or a variant the CPU cannot run
 * falls back to the best available, and ring_codec_ops_choice() says why).
 * Thread-safe; chosen once.
 * AVX512_BF16 is not used: vcvtneps2bf16 flushes fp32 denormals to zero,
 * which round-to-nearest-even does not; bf16 is integer SIMD rounding.
 */
const ring_codec_ops_t *ring_codec_ops(void);

/* One line for logs and --print-config: "avx2 (RING_KERNEL=avx512 not supported by this CPU)". */
const char *ring_codec_ops_choice(void);

/* A specific variant, or NULL when this build or CPU cannot run it (tests, benchmarks). */
const ring_codec_ops_t *ring_codec_ops_get(const char *name);

#endif /* RING_CODEC_H */
