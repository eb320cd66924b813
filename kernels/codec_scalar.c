/*
 * codec_scalar.c - the scalar oracle: half.h's element functions in plain
 * loops. Every other variant is tested bit for bit against this table, and
 * it is what runs on CPUs without F16C/AVX2 (and off x86).
 */
#include "ring_build.h"

#include "codec.h"
#include "half.h"
#include "sum_n.h"

static void scalar_encode_f16(uint16_t *dst, const float *src, float scale, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ring_f32_to_f16(ring_fmul(src[i], scale));
}

static void scalar_decode_f16(float *dst, const uint16_t *src, float scale, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ring_fmul(ring_f16_to_f32(src[i]), scale);
}

static void scalar_encode_bf16(uint16_t *dst, const float *src, float scale, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ring_f32_to_bf16(ring_fmul(src[i], scale));
}

static void scalar_decode_bf16(float *dst, const uint16_t *src, float scale, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ring_fmul(ring_bf16_to_f32(src[i]), scale);
}

static void scalar_fused_f16(uint16_t *out, float *final, const uint16_t *in, const float *local,
                             float in_scale, float local_scale, float out_scale, size_t n)
{
    if (final) {
        for (size_t i = 0; i < n; i++)
            out[i] = ring_fused_f16_elem(in[i], local[i], in_scale, local_scale, out_scale,
                                         &final[i]);
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = ring_fused_f16_elem(in[i], local[i], in_scale, local_scale, out_scale, NULL);
    }
}

static void scalar_fused_bf16(uint16_t *out, float *final, const uint16_t *in, const float *local,
                              float in_scale, float local_scale, float out_scale, size_t n)
{
    if (final) {
        for (size_t i = 0; i < n; i++)
            out[i] = ring_fused_bf16_elem(in[i], local[i], in_scale, local_scale, out_scale,
                                          &final[i]);
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = ring_fused_bf16_elem(in[i], local[i], in_scale, local_scale, out_scale, NULL);
    }
}

static float scalar_absmax_f32(const float *src, size_t n, int *nonfinite_p)
{
    uint32_t max_bits = 0;
    int nonfinite = 0;

    for (size_t i = 0; i < n; i++)
        ring_absmax_elem(&max_bits, &nonfinite, src[i]);
    if (nonfinite && nonfinite_p)
        *nonfinite_p = 1;
    return ring_bits_f32(max_bits);
}

/* declared in codec_dispatch.c, the only user */
extern const ring_codec_ops_t ring_codec_scalar_ops;
const ring_codec_ops_t ring_codec_scalar_ops = {
    .name = "scalar",
    .encode_f16 = scalar_encode_f16,
    .decode_f16 = scalar_decode_f16,
    .encode_bf16 = scalar_encode_bf16,
    .decode_bf16 = scalar_decode_bf16,
    .fused_f16 = scalar_fused_f16,
    .fused_bf16 = scalar_fused_bf16,
    .absmax_f32 = scalar_absmax_f32,
    .sum_n_f32 = ring_sum_n_scalar,
};
