/*
 * t-codec-layout.c - the codec kernels (kernels/codec.h) on real buffers:
 * every alignment, length and scale of the conversions and of the fused
 * step, with no byte written outside its buffer; the fused step against its
 * element op and that op against a volatile composition of the scalar
 * oracle (kernels/half.h); absmax and its non-finite flag. t-codec.c tests
 * dispatch, decoding and encoding element by element.
 *
 * Every variant this build has is tested; one the CPU cannot run is
 * reported as skipped. Unit test: pure, no I/O.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "codec_test.h"
#include "half.h"
#include "tap.h"

/* ---- random values ------------------------------------------------------------------ */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* a gradient-like value: random sign, mantissa, and an exponent in [lo, hi] */
static float rand_grad(int lo, int hi)
{
    uint64_t r = rng();
    uint32_t e = (uint32_t)(127 + lo + (int)((r >> 32) % (uint64_t)(hi - lo + 1)));

    return bits_f((uint32_t)(r & 0x807fffffu) | (e << 23));
}

/* mostly realistic values, some arbitrary bit patterns (NaN, inf, subnormal, huge) */
static float rand_f32(void)
{
    uint64_t r = rng();

    if ((r & 15) == 0)
        return bits_f((uint32_t)(r >> 32));
    if ((r & 15) == 1)
        return rand_grad(-149, -120);
    return rand_grad(-30, 10);
}

static uint16_t rand_wire(int bf)
{
    uint64_t r = rng();

    if ((r & 7) == 0)
        return (uint16_t)(r >> 48);
    return bf ? ring_f32_to_bf16(rand_grad(-30, 10)) : ring_f32_to_f16(rand_grad(-20, 12));
}


/* ---- references --------------------------------------------------------------------- */


/*
 * The fused step composed from half.h's conversions, every intermediate
 * forced through a volatile fp32 so nothing is contracted or kept wider.
 */
static uint16_t ref_fused(int bf, uint16_t in, float local, float is, float ls, float os,
                          float *final_p)
{
    volatile float w = bf ? ring_bf16_to_f32(in) : ring_f16_to_f32(in);
    volatile float t1 = w * is;
    volatile float t2 = local * ls;
    volatile float sum = isnan(t1) ? t1 : t1 + t2;
    volatile float o = sum * os;
    uint16_t out = bf ? ring_f32_to_bf16(o) : ring_f32_to_f16(o);
    volatile float back = bf ? ring_bf16_to_f32(out) : ring_f16_to_f32(out);

    *final_p = back / os;
    return out;
}

static float ref_absmax(const float *x, size_t n, int *nonfinite_p)
{
    float m = 0.0f;

    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) {
            *nonfinite_p = 1;
            continue;
        }
        if (isinf(x[i]))
            *nonfinite_p = 1;
        if (fabsf(x[i]) > m)
            m = fabsf(x[i]);
    }
    return m;
}
/* ---- alignment, lengths, scales ------------------------------------------------------- */

#define MAXLEN 257
#define PAD 128 /* bytes of canary around every region */
static const float sweep_scales[] = {1.0f, 0x1p-20f, 0x1p20f, 0.1f};
#define NSCALE (sizeof sweep_scales / sizeof sweep_scales[0])

/* a buffer of PAD + 64 + len bytes + PAD, canary-filled, the region at byte offset off */
typedef struct region {
    unsigned char *base;
    size_t size;
} region_t;

static void region_init(region_t *r, size_t bytes)
{
    r->size = PAD + 64 + bytes + PAD;
    r->base = xalloc(r->size);
}

static void *region_at(region_t *r, size_t off)
{
    memset(r->base, 0xa5, r->size);
    return r->base + PAD + off;
}

/* the canary is intact outside [off, off + bytes) */
static int region_clean(const region_t *r, size_t off, size_t bytes)
{
    for (size_t i = 0; i < r->size; i++)
        if ((i < PAD + off || i >= PAD + off + bytes) && r->base[i] != 0xa5)
            return 0;
    return 1;
}

static void test_convert_layout(int bf)
{
    float *src = xalloc(MAXLEN * sizeof *src);
    uint16_t *wire = xalloc(MAXLEN * sizeof *wire);
    uint16_t enc_ref[NSCALE][MAXLEN];
    float dec_ref[NSCALE][MAXLEN];
    region_t rs, rd, rw, rf;

    for (size_t i = 0; i < MAXLEN; i++) {
        src[i] = rand_f32();
        wire[i] = rand_wire(bf);
    }
    for (size_t k = 0; k < NSCALE; k++)
        for (size_t i = 0; i < MAXLEN; i++) {
            float x = ring_fmul(src[i], sweep_scales[k]);

            enc_ref[k][i] = bf ? ring_f32_to_bf16(x) : ring_f32_to_f16(x);
            dec_ref[k][i] = ring_fmul(bf ? ring_bf16_to_f32(wire[i]) : ring_f16_to_f32(wire[i]),
                                      sweep_scales[k]);
        }
    region_init(&rs, MAXLEN * 4);
    region_init(&rd, MAXLEN * 2);
    region_init(&rw, MAXLEN * 2);
    region_init(&rf, MAXLEN * 4);
    for (int v = 0; v < NVAR; v++) {
        long bad = 0, calls = 0;

        if (!vars[v]) {
            skip_var(v);
            continue;
        }
        for (size_t off = 0; off < 64; off++) {
            /* every byte offset an element type allows, for each pointer, with
             * the source and destination offsets mixed */
            size_t o32 = 4 * (off % 16), o16 = 2 * ((off * 7 + 3) % 32);
            size_t o16b = 2 * (off % 32), o32b = 4 * ((off * 5 + 1) % 16);

            for (size_t n = 0; n <= MAXLEN; n++) {
                size_t k = (n + off) % NSCALE;
                float s = sweep_scales[k];
                float *in32 = region_at(&rs, o32);
                uint16_t *out16, *in16;
                float *out32;

                memcpy(in32, src, n * 4);
                out16 = region_at(&rd, o16);
                (bf ? vars[v]->encode_bf16 : vars[v]->encode_f16)(out16, in32, s, n);
                if (memcmp(out16, enc_ref[k], n * 2) != 0 || !region_clean(&rd, o16, n * 2) ||
                    !region_clean(&rs, o32, n * 4) || memcmp(in32, src, n * 4) != 0) {
                    if (bad++ < 3)
                        diag("%s: encode_%s n=%zu src+%zu dst+%zu scale %g wrong", var_names[v],
                             bf ? "bf16" : "f16", n, o32, o16, (double)s);
                }
                in16 = region_at(&rw, o16b);
                memcpy(in16, wire, n * 2);
                out32 = region_at(&rf, o32b);
                (bf ? vars[v]->decode_bf16 : vars[v]->decode_f16)(out32, in16, s, n);
                if (memcmp(out32, dec_ref[k], n * 4) != 0 || !region_clean(&rf, o32b, n * 4)) {
                    if (bad++ < 3)
                        diag("%s: decode_%s n=%zu src+%zu dst+%zu scale %g wrong", var_names[v],
                             bf ? "bf16" : "f16", n, o16b, o32b, (double)s);
                }
                calls += 2;
            }
        }
        ok(bad == 0,
           "%s: encode_%s/decode_%s, lengths 0..%d x 64 mixed offsets, scales 1, 2^-20, "
           "2^20, 0.1, no write outside (%ld calls)",
           var_names[v], bf ? "bf16" : "f16", bf ? "bf16" : "f16", MAXLEN, calls);
    }
    free(rs.base);
    free(rd.base);
    free(rw.base);
    free(rf.base);
    free(src);
    free(wire);
}

/* ---- fused ------------------------------------------------------------------------- */

static const struct fscale {
    float in, local, out;
} fused_scales[] = {
    {1.0f, 1.0f, 1.0f},
    {0x1p-20f, 1.0f, 0x1p20f},
    {0x1p20f, 0x1p-3f, 0x1p-20f},
    {0x1p-20f, 0x1p-20f, 0x1p-20f},
    {0x1p20f, 0x1p20f, 0x1p20f},
    {1.0f, 1.0f, 3.0f},     /* final by a true division */
    {0.3f, 0.7f, 1.1f},     /* rounded products: fails if anything contracts to FMA */
    {0x1p-126f, 1.0f, 0x1p127f},
};
#define NFSCALE (sizeof fused_scales / sizeof fused_scales[0])

typedef void (*fused_fn)(uint16_t *, float *, const uint16_t *, const float *, float, float,
                         float, size_t);

static fused_fn fused_of(const ring_codec_ops_t *ops, int bf)
{
    return bf ? ops->fused_bf16 : ops->fused_f16;
}

/* lengths 0..MAXLEN at 64 mixed offsets of the four pointers, with and without final */
static void test_fused_layout(int bf)
{
    uint16_t *in = xalloc(MAXLEN * 2);
    float *local = xalloc(MAXLEN * 4);
    static const int pick[] = {1, 6}; /* a power-of-two set and a rounding one */
    uint16_t out_ref[2][MAXLEN];
    float fin_ref[2][MAXLEN];
    region_t ri, rl, ro, rf;

    for (size_t i = 0; i < MAXLEN; i++) {
        in[i] = rand_wire(bf);
        local[i] = rand_f32();
    }
    for (int k = 0; k < 2; k++) {
        const struct fscale *s = &fused_scales[pick[k]];

        for (size_t i = 0; i < MAXLEN; i++)
            out_ref[k][i] = ref_fused(bf, in[i], local[i], s->in, s->local, s->out, &fin_ref[k][i]);
    }
    region_init(&ri, MAXLEN * 2);
    region_init(&rl, MAXLEN * 4);
    region_init(&ro, MAXLEN * 2);
    region_init(&rf, MAXLEN * 4);
    for (int v = 0; v < NVAR; v++) {
        long bad = 0, calls = 0;

        if (!vars[v]) {
            skip_var(v);
            continue;
        }
        for (size_t off = 0; off < 64; off++) {
            size_t oi = 2 * (off % 32), ol = 4 * ((off * 3 + 1) % 16);
            size_t oo = 2 * ((off * 7 + 5) % 32), of = 4 * ((off * 5 + 2) % 16);

            for (size_t n = 0; n <= MAXLEN; n++) {
                int k = (int)((n + off) & 1), with_final = (int)((n / 2 + off) & 1);
                const struct fscale *s = &fused_scales[pick[k]];
                uint16_t *pi = region_at(&ri, oi), *po = region_at(&ro, oo);
                float *pl = region_at(&rl, ol), *pf = region_at(&rf, of);

                memcpy(pi, in, n * 2);
                memcpy(pl, local, n * 4);
                fused_of(vars[v], bf)(po, with_final ? pf : NULL, pi, pl, s->in, s->local,
                                      s->out, n);
                calls++;
                if (memcmp(po, out_ref[k], n * 2) != 0 || !region_clean(&ro, oo, n * 2) ||
                    (with_final ? memcmp(pf, fin_ref[k], n * 4) != 0 ||
                                      !region_clean(&rf, of, n * 4)
                                : !region_clean(&rf, 0, 0)) ||
                    memcmp(pi, in, n * 2) != 0 || memcmp(pl, local, n * 4) != 0) {
                    if (bad++ < 3)
                        diag("%s: fused_%s n=%zu offsets in+%zu local+%zu out+%zu final+%zu "
                             "%s final, scales %g %g %g: wrong",
                             var_names[v], bf ? "bf16" : "f16", n, oi, ol, oo, of,
                             with_final ? "with" : "without", (double)s->in, (double)s->local,
                             (double)s->out);
                }
            }
        }
        ok(bad == 0,
           "%s: fused_%s == element composition, lengths 0..%d x 64 mixed offsets, "
           "with/without final, no write outside (%ld calls)",
           var_names[v], bf ? "bf16" : "f16", MAXLEN, calls);
    }
    free(ri.base);
    free(rl.base);
    free(ro.base);
    free(rf.base);
    free(in);
    free(local);
}

/* a large misaligned buffer, every scale set, with and without final, and in place */
static void test_fused_large(int bf)
{
    size_t n = (1u << 20) + 13;
    uint16_t *in_buf = xalloc(n * 2 + 64), *out_buf = xalloc(n * 2 + 64);
    float *local_buf = xalloc(n * 4 + 64), *fin_buf = xalloc(n * 4 + 64);
    uint16_t *in = in_buf + 1, *out = out_buf + 3, *out_ref = xalloc(n * 2);
    float *local = local_buf + 1, *fin = fin_buf + 2, *fin_ref = xalloc(n * 4);
    float *local_copy = xalloc(n * 4);
    uint16_t *in_copy = xalloc(n * 2);

    for (size_t i = 0; i < n; i++) {
        in[i] = rand_wire(bf);
        local[i] = rand_f32();
    }
    /* NaN against NaN, inf against -inf, at places that land in vectors */
    for (size_t i = 100; i + 40 < n; i += 100003) {
        in[i] = bf ? 0x7fa1 : 0x7d11;
        local[i] = bits_f(0xffc12345u);
        in[i + 17] = bf ? 0x7f80 : 0x7c00;
        local[i + 17] = bits_f(0xff800000u);
        local[i + 33] = bits_f(0x7f800001u);
    }
    memcpy(local_copy, local, n * 4);
    memcpy(in_copy, in, n * 2);
    for (int v = 0; v < NVAR; v++) {
        long bad = 0, bad_alias = 0;

        if (!vars[v]) {
            skip_var(v);
            skip_var(v);
            continue;
        }
        for (size_t k = 0; k < NFSCALE; k++) {
            const struct fscale *s = &fused_scales[k];

            for (size_t i = 0; i < n; i++)
                out_ref[i] = ref_fused(bf, in[i], local[i], s->in, s->local, s->out, &fin_ref[i]);
            for (int with_final = 0; with_final < 2; with_final++) {
                fused_of(vars[v], bf)(out, with_final ? fin : NULL, in, local, s->in, s->local,
                                      s->out, n);
                if (memcmp(out, out_ref, n * 2) != 0 ||
                    (with_final && memcmp(fin, fin_ref, n * 4) != 0)) {
                    size_t i = 0;

                    while (i < n && out[i] == out_ref[i] &&
                           (!with_final || f_bits(fin[i]) == f_bits(fin_ref[i])))
                        i++;
                    if (bad++ < 3 && i < n)
                        diag("%s: fused_%s scales %g %g %g %s final: first difference at %zu: "
                             "in %04x local %08x: out %04x/%04x final %08x/%08x",
                             var_names[v], bf ? "bf16" : "f16", (double)s->in, (double)s->local,
                             (double)s->out, with_final ? "with" : "without", i, in[i],
                             f_bits(local[i]), out[i], out_ref[i], f_bits(fin[i]),
                             f_bits(fin_ref[i]));
                }
            }
            /* in place, as the owner does it: out over in, final over local */
            fused_of(vars[v], bf)(in, local, in, local, s->in, s->local, s->out, n);
            if (memcmp(in, out_ref, n * 2) != 0 || memcmp(local, fin_ref, n * 4) != 0)
                bad_alias++;
            memcpy(local, local_copy, n * 4);
            memcpy(in, in_copy, n * 2);
        }
        ok(bad == 0,
           "%s: fused_%s == element composition on %zu elements (misaligned), %zu scale sets "
           "incl. 2^-20, 2^20 and non-powers of two, with/without final, NaN/inf mixes",
           var_names[v], bf ? "bf16" : "f16", n, NFSCALE);
        ok(bad_alias == 0, "%s: fused_%s in place (out == in, final == local)", var_names[v],
           bf ? "bf16" : "f16");
    }
    free(in_buf);
    free(out_buf);
    free(local_buf);
    free(fin_buf);
    free(out_ref);
    free(fin_ref);
    free(local_copy);
    free(in_copy);
}

/* the oracle's element op is the documented composition, for the NaN rule too */
static void test_fused_oracle(void)
{
    long bad = 0;

    for (int i = 0; i < 200000; i++) {
        const struct fscale *s = &fused_scales[i % NFSCALE];
        int bf = i & 1;
        uint16_t in = rand_wire(bf);
        float local = rand_f32(), f1, f2;
        uint16_t a, b;

        a = bf ? ring_fused_bf16_elem(in, local, s->in, s->local, s->out, &f1)
               : ring_fused_f16_elem(in, local, s->in, s->local, s->out, &f1);
        b = ref_fused(bf, in, local, s->in, s->local, s->out, &f2);
        if ((a != b || f_bits(f1) != f_bits(f2)) && bad++ < 3)
            diag("%s element op differs: in %04x local %08x", bf ? "bf16" : "fp16", in,
                 f_bits(local));
    }
    ok(bad == 0, "oracle fused element ops == the volatile composition (200000 random)");
}

/* ---- absmax ------------------------------------------------------------------------ */

static void test_absmax(void)
{
    region_t r;
    float *data = xalloc(MAXLEN * 4);
    size_t big = (1u << 20) + 5;
    float *big_buf = xalloc(big * 4 + 64), *bigp = big_buf + 3;

    region_init(&r, MAXLEN * 4);
    for (size_t i = 0; i < big; i++)
        bigp[i] = rand_grad(-30, 10);
    for (int v = 0; v < NVAR; v++) {
        long bad = 0, bad_flag = 0;
        const ring_codec_ops_t *ops = vars[v];

        if (!ops) {
            skip_var(v);
            skip_var(v);
            continue;
        }
        for (size_t off = 0; off < 16; off++) {
            for (size_t n = 0; n <= MAXLEN; n++) {
                float *p = region_at(&r, off * 4);
                int kind = (int)((n + off) % 5), nf = 7, nf_ref = 7;
                float got, want;

                for (size_t i = 0; i < n; i++)
                    p[i] = rand_grad(-40, 20);
                if (n && kind == 1)
                    p[rng() % n] = bits_f(0x7fc00000u | (uint32_t)(rng() & 0x803fffff));
                if (n && kind == 2)
                    p[rng() % n] = (rng() & 1) ? INFINITY : -INFINITY;
                if (n && kind == 3) /* the largest at the very end: the tail counts */
                    p[n - 1] = -0x1p30f;
                if (kind == 4)
                    for (size_t i = 0; i < n; i++)
                        p[i] = bits_f(0xffc00000u);
                memcpy(data, p, n * 4);
                got = ops->absmax_f32(p, n, &nf);
                want = ref_absmax(data, n, &nf_ref);
                if (f_bits(got) != f_bits(want) && bad++ < 3)
                    diag("%s: absmax n=%zu off=%zu kind %d: got %a want %a", var_names[v], n,
                         off, kind, (double)got, (double)want);
                if (nf != nf_ref && bad_flag++ < 3)
                    diag("%s: absmax n=%zu off=%zu kind %d: flag %d want %d", var_names[v], n,
                         off, kind, nf, nf_ref);
            }
        }
        /* a NaN and an inf at every position of a short buffer (vector and tail) */
        for (size_t n = 1; n <= 40; n++) {
            for (size_t pos = 0; pos < n; pos++) {
                float *p = region_at(&r, 4 * (n % 16));
                int nf = 0;
                float got;

                for (size_t i = 0; i < n; i++)
                    p[i] = (float)(i + 1);
                p[pos] = bits_f(0xffffffffu); /* NaN with the largest bits of all */
                got = ops->absmax_f32(p, n, &nf);
                if ((nf != 1 || got != (float)(pos == n - 1 ? n - 1 : n)) && bad_flag++ < 3)
                    diag("%s: NaN at %zu of %zu: %g flag %d", var_names[v], pos, n, (double)got,
                         nf);
                nf = 0;
                p[pos] = -INFINITY;
                got = ops->absmax_f32(p, n, &nf);
                if ((nf != 1 || !isinf(got) || got < 0) && bad_flag++ < 3)
                    diag("%s: -inf at %zu of %zu: %g flag %d", var_names[v], pos, n,
                         (double)got, nf);
            }
        }
        {
            int nf = 3, nf_ref = 3;
            float got = ops->absmax_f32(bigp, big, &nf), want = ref_absmax(bigp, big, &nf_ref);

            if ((f_bits(got) != f_bits(want) || nf != 3) && bad++ < 3)
                diag("%s: absmax of %zu: %a want %a, flag %d", var_names[v], big, (double)got,
                     (double)want, nf);
            if (ops->absmax_f32(bigp, 0, NULL) != 0.0f || ops->absmax_f32(bigp, big, NULL) != got)
                bad++;
        }
        ok(bad == 0, "%s: absmax_f32 == reference: lengths 0..%d x 16 offsets, NaN/inf/-0/"
                     "all-NaN, %zu elements, NULL flag pointer",
           var_names[v], MAXLEN, big);
        ok(bad_flag == 0,
           "%s: absmax_f32 flags inf and NaN (at every position up to 40), NaN not counted, "
           "flag left alone when all finite",
           var_names[v]);
    }
    free(r.base);
    free(data);
    free(big_buf);
}

int main(void)
{
    /* layout 4 x NVAR; fused large 4 x NVAR, oracle 1; absmax 2 x NVAR */
    plan(4 * NVAR + 4 * NVAR + 1 + 2 * NVAR);
    codec_test_variants();

    test_convert_layout(0);
    test_convert_layout(1);
    test_fused_layout(0);
    test_fused_layout(1);
    test_fused_large(0);
    test_fused_large(1);
    test_fused_oracle();
    test_absmax();
    return done_testing();
}
