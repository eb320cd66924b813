/*
 * t-cuda-kernels.c - the CUDA codec kernels (kernels/cuda/codec.cu) against
 * the CPU's scalar oracle (category gpu).
 *
 * Built without CUDA: 1..0 # SKIP built without CUDA.
 *
 * Everywhere, GPU or not: on the CPU, half.h's element math driven the way
 * the kernels drive it (fused: read both inputs, then write, also in place;
 * absmax folded per thread, per warp, per block and by atomics) gives the
 * oracle's bits. With a device, and only then (reported as "ok # SKIP no
 * CUDA device" otherwise): every kernel against ring_codec_ops_get("scalar")
 * bit for bit (NaN results only as NaN: a GPU's fp32 multiply makes
 * canonical NaNs). Allreduce of device buffers is t-cuda's.
 */
#include "ring_build.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "cuda/ring_cuda.h"
#include "half.h"
#include "tap.h"

#define NO_DEVICE "no CUDA device"

/* ---- inputs for the kernels ------------------------------------------------ */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint32_t rng32(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 32);
}

/* fp32 inputs: specials, fp16 and bf16 boundaries, then random bits of every magnitude */
static void gen_f32(float *x, size_t n)
{
    static const uint32_t special[] = {
        0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001,
        0x00000001, 0x007fffff, 0x00800000, 0x33000000, 0x33000001, 0x33800000, 0x387fc000,
        0x38800000, 0x477fe000, 0x477fefff, 0x477ff000, 0x47800000, 0x3f800000, 0x3f808000,
        0x3f818000, 0x7f7fffff, 0xc77ff000, 0x3effffff};
    size_t ns = sizeof special / sizeof special[0];

    for (size_t i = 0; i < n; i++) {
        uint32_t bits;

        if (i < ns)
            bits = special[i];
        else if (i % 4 == 0)
            bits = rng32(); /* anything, NaNs included */
        else /* magnitudes near fp16's range */
            bits = (rng32() & 0x807fffffu) | ((uint32_t)(100 + rng32() % 60) << 23);
        x[i] = ring_bits_f32(bits);
    }
}

static void gen_u16(uint16_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h[i] = (uint16_t)(i < 65536 ? i : rng32());
}

static int f16_is_nan(uint16_t h)
{
    return (h & 0x7fffu) > 0x7c00u;
}

static int bf16_is_nan(uint16_t h)
{
    return (h & 0x7fffu) > 0x7f80u;
}

/* Same bits, or both NaN (a GPU's fp32 arithmetic makes canonical NaNs). */
static size_t diff_u16(const uint16_t *got, const uint16_t *want, size_t n, int bf16)
{
    size_t bad = 0;

    for (size_t i = 0; i < n; i++) {
        int gn = bf16 ? bf16_is_nan(got[i]) : f16_is_nan(got[i]);
        int wn = bf16 ? bf16_is_nan(want[i]) : f16_is_nan(want[i]);

        if (gn || wn ? gn != wn : got[i] != want[i]) {
            if (bad++ < 3)
                diag("    [%zu] got %04x want %04x", i, got[i], want[i]);
        }
    }
    return bad;
}

static size_t diff_f32(const float *got, const float *want, size_t n)
{
    size_t bad = 0;

    for (size_t i = 0; i < n; i++) {
        uint32_t g = ring_f32_bits(got[i]), w = ring_f32_bits(want[i]);
        int gn = ring_f32_isnan(got[i]), wn = ring_f32_isnan(want[i]);

        if (gn || wn ? gn != wn : g != w) {
            if (bad++ < 3)
                diag("    [%zu] got %08x want %08x", i, g, w);
        }
    }
    return bad;
}

/* ---- on the CPU: the element math driven as the kernels drive it ---------- */

/* The body of cuda_fused_*_kernel, element by element. */
static void emu_fused(int bf16, uint16_t *out, float *final, const uint16_t *in, const float *local,
                      float in_scale, float local_scale, float out_scale, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float fin = 0.0f;
        uint16_t o = bf16 ? ring_fused_bf16_elem(in[i], local[i], in_scale, local_scale,
                                                 out_scale, final ? &fin : NULL)
                          : ring_fused_f16_elem(in[i], local[i], in_scale, local_scale,
                                                out_scale, final ? &fin : NULL);

        out[i] = o;
        if (final)
            final[i] = fin;
    }
}

static void test_emu_fused(const ring_codec_ops_t *oracle)
{
    enum { N = 70000 };
    uint16_t *in = malloc(N * 2), *out = malloc(N * 2), *want = malloc(N * 2), *io = malloc(N * 2);
    float *local = malloc(N * 4), *fin = malloc(N * 4), *wfin = malloc(N * 4), *lio = malloc(N * 4);
    size_t bad = 0;

    if (!in || !out || !want || !io || !local || !fin || !wfin || !lio)
        bail("out of memory");
    gen_u16(in, N);
    gen_f32(local, N);
    for (int bf16 = 0; bf16 < 2; bf16++) {
        void (*fused)(uint16_t *, float *, const uint16_t *, const float *, float, float, float,
                      size_t) = bf16 ? oracle->fused_bf16 : oracle->fused_f16;

        for (int with_final = 0; with_final < 2; with_final++) {
            emu_fused(bf16, out, with_final ? fin : NULL, in, local, 0.25f, 1.0f, 64.0f, N);
            fused(want, with_final ? wfin : NULL, in, local, 0.25f, 1.0f, 64.0f, N);
            bad += memcmp(out, want, N * 2) != 0;
            bad += with_final && memcmp(fin, wfin, N * 4) != 0;
        }
        /* in place: out == in, final == local */
        memcpy(io, in, N * 2);
        memcpy(lio, local, N * 4);
        emu_fused(bf16, io, lio, io, lio, 2.0f, 0.5f, 0.125f, N);
        fused(want, wfin, in, local, 2.0f, 0.5f, 0.125f, N);
        bad += memcmp(io, want, N * 2) != 0 || memcmp(lio, wfin, N * 4) != 0;
    }
    ok(bad == 0, "CPU: the fused kernels' element order over half.h (read, then write; in place "
       "too) is the scalar oracle, fp16 and bf16, with and without final");
    free(in), free(out), free(want), free(io), free(local), free(fin), free(wfin), free(lio);
}

/* cuda_absmax_kernel's folds: grid-stride per thread, shuffles down in a warp,
 * warps in a block, atomicMax/atomicOr over blocks. */
static void emu_absmax(const float *src, size_t n, unsigned blocks, uint32_t *max_p, int *nf_p)
{
    enum { T = 256, W = 32 };
    uint32_t result_max = 0;
    int result_nf = 0;

    for (unsigned b = 0; b < blocks; b++) {
        uint32_t tmax[T], wmax[T / W], v[W];
        int tnf[T], wnf[T / W], f[W];

        for (unsigned t = 0; t < T; t++) {
            tmax[t] = 0;
            tnf[t] = 0;
            for (size_t i = (size_t)b * T + t; i < n; i += (size_t)blocks * T)
                ring_absmax_elem(&tmax[t], &tnf[t], src[i]);
        }
        for (unsigned w = 0; w <= T / W; w++) {
            /* w < T / W: warp w of the block; w == T / W: warp 0 over the warps' results */
            for (unsigned l = 0; l < W; l++) {
                v[l] = w < T / W ? tmax[w * W + l] : l < T / W ? wmax[l] : 0;
                f[l] = w < T / W ? tnf[w * W + l] : l < T / W ? wnf[l] : 0;
            }
            for (unsigned off = 16; off > 0; off >>= 1)
                for (unsigned l = 0; l + off < W; l++) { /* lanes past the end keep their own */
                    v[l] = v[l + off] > v[l] ? v[l + off] : v[l];
                    f[l] |= f[l + off];
                }
            if (w < T / W) {
                wmax[w] = v[0];
                wnf[w] = f[0];
            } else {
                result_max = v[0] > result_max ? v[0] : result_max;
                result_nf |= f[0];
            }
        }
    }
    *max_p = result_max;
    *nf_p = result_nf;
}

static void test_emu_absmax(const ring_codec_ops_t *oracle)
{
    enum { N = 40000 };
    float *x = malloc(N * 4);
    int bad = 0;

    if (x == NULL)
        bail("out of memory");
    for (int round = 0; round < 4; round++) {
        size_t n = round == 0 ? N : (size_t)(rng32() % N) + 1;

        gen_f32(x, n);
        if (round >= 2) /* finite only: the maximum must be found, not just the flag */
            for (size_t i = 0; i < n; i++)
                if ((ring_f32_bits(x[i]) & 0x7f800000u) == 0x7f800000u)
                    x[i] = (float)i;
        for (unsigned blocks = 1; blocks <= 5; blocks += 2) {
            uint32_t got;
            int nf = 0, want_nf = 0;
            float want = oracle->absmax_f32(x, n, &want_nf);

            emu_absmax(x, n, blocks, &got, &nf);
            bad += got != ring_f32_bits(want) || nf != want_nf;
        }
    }
    ok(bad == 0, "CPU: absmax folded per thread, warp, block and grid as the kernel does is the "
       "scalar oracle (maximum and non-finite flag)");
    free(x);
}

/* ---- on a device ----------------------------------------------------------- */

static void *dev_put(const void *host, size_t bytes)
{
    void *d = NULL;

    if (ring_cuda_malloc(bytes, &d) != 0)
        return NULL;
    if (ring_cuda_memcpy_h2d(d, host, bytes) != 0) {
        (void)ring_cuda_free(d);
        return NULL;
    }
    return d;
}

/* encode (bf16 or not) of n elements at offset `skew`, scale s, against the oracle */
static int dev_encode(const ring_codec_ops_t *oracle, int bf16, size_t n, size_t skew, float s)
{
    float *x = malloc((n + skew) * 4);
    uint16_t *got = malloc(n * 2), *want = malloc(n * 2);
    void *dx, *dy = NULL;
    int good = 0;

    if (!x || !got || !want)
        bail("out of memory");
    gen_f32(x, n + skew);
    dx = dev_put(x, (n + skew) * 4);
    if (dx != NULL && ring_cuda_malloc((n + skew) * 2, &dy) == 0 &&
        (bf16 ? ring_cuda_encode_bf16 : ring_cuda_encode_f16)((uint16_t *)dy + skew,
                                                              (float *)dx + skew, s, n, NULL) == 0 &&
        ring_cuda_stream_sync(NULL) == 0 &&
        ring_cuda_memcpy_d2h(got, (uint16_t *)dy + skew, n * 2) == 0) {
        (bf16 ? oracle->encode_bf16 : oracle->encode_f16)(want, x + skew, s, n);
        good = diff_u16(got, want, n, bf16) == 0;
    }
    if (dx)
        (void)ring_cuda_free(dx);
    if (dy)
        (void)ring_cuda_free(dy);
    free(x), free(got), free(want);
    return good;
}

static int dev_decode(const ring_codec_ops_t *oracle, int bf16, size_t n, float s)
{
    uint16_t *h = malloc(n * 2);
    float *got = malloc(n * 4), *want = malloc(n * 4);
    void *dh, *dy = NULL;
    int good = 0;

    if (!h || !got || !want)
        bail("out of memory");
    gen_u16(h, n);
    dh = dev_put(h, n * 2);
    if (dh != NULL && ring_cuda_malloc(n * 4, &dy) == 0 &&
        (bf16 ? ring_cuda_decode_bf16 : ring_cuda_decode_f16)(dy, dh, s, n, NULL) == 0 &&
        ring_cuda_stream_sync(NULL) == 0 && ring_cuda_memcpy_d2h(got, dy, n * 4) == 0) {
        (bf16 ? oracle->decode_bf16 : oracle->decode_f16)(want, h, s, n);
        good = diff_f32(got, want, n) == 0;
    }
    if (dh)
        (void)ring_cuda_free(dh);
    if (dy)
        (void)ring_cuda_free(dy);
    free(h), free(got), free(want);
    return good;
}

/* fused on the device against the oracle; in_place: out == in, final == local */
static int dev_fused(const ring_codec_ops_t *oracle, int bf16, int with_final, int in_place,
                     size_t n)
{
    uint16_t *in = malloc(n * 2), *out = malloc(n * 2), *want = malloc(n * 2);
    float *local = malloc(n * 4), *fin = malloc(n * 4), *wfin = malloc(n * 4);
    void *din, *dlocal, *dout = NULL, *dfin = NULL;
    const float sc[3] = {0.5f, 2.0f, 1.0f / 1024};
    int good = 0, ran;

    if (!in || !out || !want || !local || !fin || !wfin)
        bail("out of memory");
    gen_u16(in, n);
    gen_f32(local, n);
    din = dev_put(in, n * 2);
    dlocal = dev_put(local, n * 4);
    if (in_place) {
        dout = din;
        dfin = dlocal;
    } else if (ring_cuda_malloc(n * 2, &dout) != 0 || ring_cuda_malloc(n * 4, &dfin) != 0) {
        dout = dfin = NULL;
    }
    ran = din && dlocal && dout && dfin &&
          (bf16 ? ring_cuda_fused_bf16 : ring_cuda_fused_f16)(
              dout, with_final ? dfin : NULL, din, dlocal, sc[0], sc[1], sc[2], n, NULL) == 0 &&
          ring_cuda_stream_sync(NULL) == 0 && ring_cuda_memcpy_d2h(out, dout, n * 2) == 0 &&
          (!with_final || ring_cuda_memcpy_d2h(fin, dfin, n * 4) == 0);
    if (ran) {
        (bf16 ? oracle->fused_bf16 : oracle->fused_f16)(want, with_final ? wfin : NULL, in, local,
                                                         sc[0], sc[1], sc[2], n);
        good = diff_u16(out, want, n, bf16) == 0 && (!with_final || diff_f32(fin, wfin, n) == 0);
    }
    if (!in_place) {
        if (dout)
            (void)ring_cuda_free(dout);
        if (dfin)
            (void)ring_cuda_free(dfin);
    }
    if (din)
        (void)ring_cuda_free(din);
    if (dlocal)
        (void)ring_cuda_free(dlocal);
    free(in), free(out), free(want), free(local), free(fin), free(wfin);
    return good;
}

static int dev_absmax(const ring_codec_ops_t *oracle, size_t n, int finite_only)
{
    float *x = malloc((n ? n : 1) * 4), got = -1;
    void *dx = NULL;
    int nf = 0, want_nf = 0, good = 0;
    float want;

    if (x == NULL)
        bail("out of memory");
    gen_f32(x, n);
    for (size_t i = 0; finite_only && i < n; i++)
        if ((ring_f32_bits(x[i]) & 0x7f800000u) == 0x7f800000u)
            x[i] = -(float)i;
    want = oracle->absmax_f32(x, n, &want_nf);
    if ((n == 0 || (dx = dev_put(x, n * 4)) != NULL) &&
        ring_cuda_absmax_f32(dx, n, &got, &nf, NULL) == 0)
        good = ring_f32_bits(got) == ring_f32_bits(want) && nf == want_nf;
    if (dx)
        (void)ring_cuda_free(dx);
    free(x);
    return good;
}

static void test_device_kernels(int have_device)
{
    const ring_codec_ops_t *oracle = ring_codec_ops_get("scalar");
    const size_t big = (size_t)65535 * 256 + 1001; /* past one grid: the grid-stride loop */

    if (!have_device) {
        for (int i = 0; i < 10; i++)
            skip(NO_DEVICE);
        return;
    }
    ok(dev_encode(oracle, 0, 100003, 0, 1.0f) && dev_encode(oracle, 0, 4097, 1, 1.0f / 64) &&
           dev_encode(oracle, 0, big, 0, 128.0f),
       "device encode_f16 = oracle (scales 1, 2^-6, 2^7; odd offset; past one grid)");
    ok(dev_decode(oracle, 0, 65536, 1.0f) && dev_decode(oracle, 0, 200000, 0.5f),
       "device decode_f16 = oracle (every fp16 value; scale 2^-1)");
    ok(dev_encode(oracle, 1, 100003, 0, 1.0f) && dev_encode(oracle, 1, 4097, 1, 4.0f),
       "device encode_bf16 = oracle");
    ok(dev_decode(oracle, 1, 65536, 1.0f) && dev_decode(oracle, 1, 70001, 1.0f / 8),
       "device decode_bf16 = oracle (every bf16 value)");
    ok(dev_fused(oracle, 0, 1, 0, 100003), "device fused_f16 with final = oracle");
    ok(dev_fused(oracle, 0, 0, 0, 100003), "device fused_f16 without final = oracle");
    ok(dev_fused(oracle, 1, 1, 0, 100003), "device fused_bf16 with final = oracle");
    ok(dev_fused(oracle, 1, 0, 0, 100003), "device fused_bf16 without final = oracle");
    ok(dev_fused(oracle, 0, 1, 1, 70001) && dev_fused(oracle, 1, 1, 1, 70001),
       "device fused in place (out == in, final == local) = oracle");
    ok(dev_absmax(oracle, 0, 0) && dev_absmax(oracle, 100003, 0) &&
           dev_absmax(oracle, 100003, 1) && dev_absmax(oracle, big, 1),
       "device absmax = oracle (n = 0, with inf/NaN, finite only, past one grid)");
}

int main(void)
{
    const ring_codec_ops_t *oracle = ring_codec_ops_get("scalar");
    int have_device;

    if (!ring_cuda_built())
        skip_all("built without CUDA");
    plan(12); /* on the CPU 2, device kernels 10 */
    /* no fork here, so this process may ask (t-cuda asks in a fresh process first) */
    have_device = ring_cuda_available();
    diag("CUDA device: %s", have_device ? "yes" : "none (the device tests are skipped)");
    test_emu_fused(oracle);
    test_emu_absmax(oracle);
    test_device_kernels(have_device);
    return done_testing();
}
