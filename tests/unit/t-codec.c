/*
 * t-codec.c - the codec kernels (kernels/codec.h) against the scalar oracle
 * (kernels/half.h), and the oracle against references that share no code
 * with it: ldexp-built values, a table-and-midpoint round-to-nearest-even,
 * the F16C instructions themselves, and round trips. Dispatch, decoding,
 * encoding's edge cases and its sweep; t-codec-layout.c has the buffers'
 * layouts, the fused step and absmax.
 *
 * Every variant this build has is tested; one the CPU cannot run is
 * reported as skipped. About 3 s (6 s under ASan/UBSan); RING_TEST_SLOW=1
 * adds the full 2^32 fp32 sweep, every variant and the independent
 * reference on every pattern (about 5 minutes). Unit test: pure, no I/O.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codec.h"
#include "codec_test.h"
#include "half.h"
#include "tap.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TEST_X86 1
#else
#define TEST_X86 0
#endif

static int slow_mode(void)
{
    const char *s = getenv("RING_TEST_SLOW");

    return s && strcmp(s, "1") == 0;
}


/* ---- independent references ------------------------------------------------------- */

/* |value| of the non-negative finite fp16 patterns 0 .. 0x7bff, built with ldexp */
static double f16_tab[0x7c00];

static double ref_f16_mag(uint32_t h)
{
    uint32_t e = h >> 10, m = h & 0x3ff;

    return e == 0 ? ldexp((double)m, -24) : ldexp((double)(m + 1024), (int)e - 25);
}

static double ref_bf16_mag(uint32_t h)
{
    uint32_t e = h >> 7, m = h & 0x7f;

    return e == 0 ? ldexp((double)m, -133) : ldexp((double)(m + 128), (int)e - 134);
}

/* fp16 -> fp32 bits. NaN: quiet, sign and payload kept, as F16C's vcvtph2ps does. */
static uint32_t ref_f16_decode(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, mag = h & 0x7fffu;

    if (mag > 0x7c00)
        return sign | 0x7fc00000u | (mag & 0x3ffu) << 13;
    if (mag == 0x7c00)
        return sign | 0x7f800000u;
    return f_bits((float)(sign ? -f16_tab[mag] : f16_tab[mag]));
}

/* bf16 -> fp32 bits, after the decode's multiplication (which quiets a NaN) */
static uint32_t ref_bf16_decode(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, mag = h & 0x7fffu;

    if (mag > 0x7f80)
        return (uint32_t)h << 16 | 0x00400000u;
    if (mag == 0x7f80)
        return sign | 0x7f800000u;
    return f_bits((float)(sign ? -ref_bf16_mag(mag) : ref_bf16_mag(mag)));
}

/* round to nearest even by search and midpoint: the largest fp16 <= |x|, then
 * compare |x| with the exact midpoint to the next one */
static uint16_t ref_f16_encode(float x)
{
    uint32_t u = f_bits(x);
    uint16_t s = (uint16_t)(u >> 16 & 0x8000);
    double a = fabs((double)x);
    uint32_t lo = 0, hi = 0x7bff;
    double mid;

    if (isnan(x))
        return (uint16_t)(s | 0x7e00 | ((u & 0x7fffff) >> 13));
    if (a >= 65520.0) /* the midpoint of 65504 and 2^16, which is "even" */
        return s | 0x7c00;
    if (a >= 65504.0)
        return s | 0x7bff;
    while (hi - lo > 1) {
        uint32_t m = (lo + hi) / 2;

        if (f16_tab[m] <= a)
            lo = m;
        else
            hi = m;
    }
    if (f16_tab[lo] == a)
        return (uint16_t)(s | lo);
    mid = (f16_tab[lo] + f16_tab[lo + 1]) / 2; /* exact in double */
    if (a < mid)
        return (uint16_t)(s | lo);
    if (a > mid)
        return (uint16_t)(s | (lo + 1));
    return (uint16_t)(s | ((lo & 1) ? lo + 1 : lo));
}

static uint16_t ref_bf16_encode(float x)
{
    uint32_t u = f_bits(x), mag = u & 0x7fffffffu, t = mag >> 16;
    uint16_t s = (uint16_t)(u >> 16 & 0x8000);
    double a = fabs((double)x), v0, v1, mid;

    if (isnan(x))
        return (uint16_t)(u >> 16 | 0x40);
    if (mag == 0x7f800000u)
        return s | 0x7f80;
    v0 = ref_bf16_mag(t);
    v1 = t + 1 == 0x7f80 ? ldexp(1.0, 128) : ref_bf16_mag(t + 1);
    if (a == v0)
        return (uint16_t)(s | t);
    mid = (v0 + v1) / 2;
    if (a < mid)
        return (uint16_t)(s | t);
    if (a > mid)
        return (uint16_t)(s | (t + 1));
    return (uint16_t)(s | ((t & 1) ? t + 1 : t));
}

/* ---- F16C itself, as a reference for the oracle ------------------------------------ */

#if TEST_X86
/* n a multiple of 8 */
__attribute__((target("avx,f16c"))) static void hw_encode_f16(uint16_t *dst, const float *src,
                                                              size_t n)
{
    for (size_t i = 0; i < n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
}

__attribute__((target("avx,f16c"))) static void hw_decode_f16(float *dst, const uint16_t *src,
                                                              size_t n)
{
    for (size_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
}
#endif

/* F16C is there when the avx2 variant is (the test asks dispatch, not the CPU) */
static int have_f16c(void)
{
    return TEST_X86 && ring_codec_ops_get("avx2") != NULL;
}

/* ---- dispatch ----------------------------------------------------------------------- */

/* what ring_codec_ops() picks in a fresh process with RING_KERNEL=want */
static int dispatch_in_child(const char *want, char *name, char *choice, size_t len)
{
    int fd[2], status;
    pid_t pid;
    char buf[512];
    ssize_t got;

    if (pipe(fd) != 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        const ring_codec_ops_t *ops;
        int k;

        close(fd[0]);
        setenv("RING_KERNEL", want, 1);
        ops = ring_codec_ops();
        k = snprintf(buf, sizeof buf, "%s\n%s", ops->name, ring_codec_ops_choice());
        if (write(fd[1], buf, (size_t)k) != k)
            _exit(1);
        _exit(0);
    }
    close(fd[1]);
    got = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        got <= 0)
        return -1;
    buf[got] = '\0';
    {
        char *nl = strchr(buf, '\n');

        if (!nl)
            return -1;
        *nl = '\0';
        snprintf(name, len, "%s", buf);
        snprintf(choice, len, "%s", nl + 1);
    }
    return 0;
}

/* in children forked before this process picks its own variant (pthread_once) */
static void test_dispatch_env(void)
{
    static const char *const wants[] = {"scalar", "avx2", "avx512", "sse9"};
    const ring_codec_ops_t *best = NULL;

    for (int v = NVAR - 1; v >= 0 && !best; v--)
        best = vars[v];
    for (size_t k = 0; k < sizeof wants / sizeof wants[0]; k++) {
        const ring_codec_ops_t *direct = ring_codec_ops_get(wants[k]);
        char name[512], choice[512];
        int good;

        if (dispatch_in_child(wants[k], name, choice, sizeof name) != 0) {
            ok(0, "RING_KERNEL=%s: child process failed", wants[k]);
            continue;
        }
        if (direct)
            good = strcmp(name, wants[k]) == 0 && strstr(choice, "RING_KERNEL=") != NULL;
        else
            good = strcmp(name, best->name) == 0 &&
                   (strstr(choice, "not supported") != NULL || strstr(choice, "unknown") != NULL);
        ok(good, "RING_KERNEL=%s: runs %s, \"%s\"", wants[k], name, choice);
    }
}

static void test_dispatch(void)
{
    const ring_codec_ops_t *best = NULL, *ops = ring_codec_ops(), *want_ops;
    const char *want = getenv("RING_KERNEL");

    for (int v = NVAR - 1; v >= 0 && !best; v--)
        best = vars[v];
    /* the suite may run with RING_KERNEL set (to take another kernel's path): then
     * this process runs what it names, if this CPU can (test_dispatch_env covers the rest) */
    want_ops = want ? ring_codec_ops_get(want) : NULL;
    if (want_ops)
        ok(ops == want_ops, "ring_codec_ops() runs RING_KERNEL=%s, got %s", want, ops->name);
    else
        ok(ops == best, "ring_codec_ops() picks the best variant (%s), got %s", best->name,
           ops->name);
    ok(strncmp(ring_codec_ops_choice(), ops->name, strlen(ops->name)) == 0,
       "ring_codec_ops_choice(): %s", ring_codec_ops_choice());
    ok(ring_codec_ops_get("sse9") == NULL && ring_codec_ops_get(NULL) == NULL &&
           ring_codec_ops_get("scalar") != NULL,
       "ring_codec_ops_get: scalar always, unknown names and NULL give NULL");
}

/* ---- decode: every pattern ---------------------------------------------------------- */

static const float decode_scales[] = {1.0f, 0x1p-20f, 0x1p20f};

static void test_decode_exhaustive(int bf)
{
    uint16_t *h = xalloc(65536 * sizeof *h);
    float *out = xalloc(65536 * sizeof *out);

    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    for (int v = 0; v < NVAR; v++) {
        long bad = 0;

        if (!vars[v]) {
            skip_var(v);
            continue;
        }
        for (size_t k = 0; k < sizeof decode_scales / sizeof decode_scales[0]; k++) {
            float s = decode_scales[k];

            (bf ? vars[v]->decode_bf16 : vars[v]->decode_f16)(out, h, s, 65536);
            for (uint32_t i = 0; i < 65536; i++) {
                uint32_t want = bf ? ref_bf16_decode((uint16_t)i) : ref_f16_decode((uint16_t)i);
                uint32_t got = f_bits(out[i]);

                if (!isnan(bits_f(want))) /* exact: a power of two times an fp16/bf16 fits */
                    want = f_bits((float)((double)bits_f(want) * (double)s));
                if (got != want && bad++ < 3)
                    diag("%s: %s %04x scale %g: got %08x want %08x", var_names[v],
                         bf ? "bf16" : "fp16", i, (double)s, got, want);
            }
        }
        ok(bad == 0, "%s: decode_%s of all 65536 patterns is exact (scales 1, 2^-20, 2^20)",
           var_names[v], bf ? "bf16" : "f16");
    }
    free(h);
    free(out);
}

static void test_oracle_decode_hw(void)
{
#if TEST_X86
    if (have_f16c()) {
        uint16_t *h = xalloc(65536 * sizeof *h);
        float *hw = xalloc(65536 * sizeof *hw);
        long bad = 0;

        for (uint32_t i = 0; i < 65536; i++)
            h[i] = (uint16_t)i;
        hw_decode_f16(hw, h, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            if (f_bits(ring_f16_to_f32((uint16_t)i)) != f_bits(hw[i]) && bad++ < 3)
                diag("fp16 %04x: oracle %08x, vcvtph2ps %08x", i,
                     f_bits(ring_f16_to_f32((uint16_t)i)), f_bits(hw[i]));
        ok(bad == 0, "oracle fp16->fp32 == vcvtph2ps on all 65536 patterns, NaNs included");
        free(h);
        free(hw);
        return;
    }
#endif
    skip("no F16C on this CPU");
}

static void test_round_trip(void)
{
    long bad16 = 0, bad_bf = 0;

    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        int nan16 = (h & 0x7fff) > 0x7c00, nanbf = (h & 0x7fff) > 0x7f80;
        uint16_t want16 = nan16 ? (uint16_t)(h | 0x200) : h;
        uint16_t wantbf = nanbf ? (uint16_t)(h | 0x40) : h;

        if (ring_f32_to_f16(ring_f16_to_f32(h)) != want16 && bad16++ < 3)
            diag("fp16 %04x does not round-trip", i);
        if (ring_f32_to_bf16(ring_bf16_to_f32(h)) != wantbf && bad_bf++ < 3)
            diag("bf16 %04x does not round-trip", i);
    }
    ok(bad16 == 0, "oracle: fp16 -> fp32 -> fp16 is the identity (NaNs come back quiet)");
    ok(bad_bf == 0, "oracle: bf16 -> fp32 -> bf16 is the identity (NaNs come back quiet)");
}

/* ---- encode: edge cases ------------------------------------------------------------- */

static const struct edge {
    uint32_t f32;
    uint16_t f16, bf16;
    const char *what;
} edges[] = {
    {0x00000000, 0x0000, 0x0000, "+0"},
    {0x80000000, 0x8000, 0x8000, "-0"},
    {0x3f800000, 0x3c00, 0x3f80, "1"},
    {0xbf800000, 0xbc00, 0xbf80, "-1"},
    {0x477fe000, 0x7bff, 0x4780, "65504 (fp16 max)"},
    {0x477fefff, 0x7bff, 0x4780, "65519.99 -> 65504"},
    {0x477ff000, 0x7c00, 0x4780, "65520 -> inf (tie to even)"},
    {0xc77ff000, 0xfc00, 0xc780, "-65520 -> -inf"},
    {0x47800000, 0x7c00, 0x4780, "65536"},
    {0x7f7fffff, 0x7c00, 0x7f80, "fp32 max: inf in both"},
    {0x7f7f7fff, 0x7c00, 0x7f7f, "below the bf16 overflow midpoint"},
    {0x7f7f8000, 0x7c00, 0x7f80, "bf16 overflow midpoint -> inf (tie to even)"},
    {0x7f800000, 0x7c00, 0x7f80, "+inf"},
    {0xff800000, 0xfc00, 0xff80, "-inf"},
    {0x38800000, 0x0400, 0x3880, "2^-14, fp16 min normal"},
    {0x387fc000, 0x03ff, 0x3880, "fp16 max subnormal"},
    {0x387fe000, 0x0400, 0x3880, "fp16 max subnormal + half ulp -> min normal (even)"},
    {0x387fdfff, 0x03ff, 0x3880, "just below that midpoint"},
    {0x33800000, 0x0001, 0x3380, "2^-24, fp16 min subnormal"},
    {0x33000000, 0x0000, 0x3300, "2^-25 -> 0 (tie to even)"},
    {0x33000001, 0x0001, 0x3300, "2^-25 + ulp -> min subnormal"},
    {0xb3000001, 0x8001, 0xb300, "-(2^-25 + ulp)"},
    {0x32ffffff, 0x0000, 0x3300, "below 2^-25 -> 0"},
    {0x33c00000, 0x0002, 0x33c0, "1.5 * 2^-24 -> 2 (tie to even)"},
    {0x34200000, 0x0002, 0x3420, "2.5 * 2^-24 -> 2 (tie to even)"},
    {0x3f801000, 0x3c00, 0x3f80, "1 + 2^-11 -> 1 (tie to even)"},
    {0x3f803000, 0x3c02, 0x3f80, "1 + 3 * 2^-11 -> up (tie to even)"},
    {0x3f801001, 0x3c01, 0x3f80, "1 + 2^-11 + ulp -> up"},
    {0x3f808000, 0x3c04, 0x3f80, "1 + 2^-8: bf16 tie to even -> 1"},
    {0x3f818000, 0x3c0c, 0x3f82, "1 + 3 * 2^-8: bf16 tie to even -> up"},
    {0x3f808001, 0x3c04, 0x3f81, "1 + 2^-8 + ulp: bf16 up"},
    {0x00000001, 0x0000, 0x0000, "fp32 min subnormal"},
    {0x80000001, 0x8000, 0x8000, "-fp32 min subnormal"},
    {0x007fffff, 0x0000, 0x0080, "fp32 max subnormal (bf16 rounds up to min normal)"},
    {0x00008000, 0x0000, 0x0000, "fp32 subnormal bf16 tie -> 0"},
    {0x00018000, 0x0000, 0x0002, "fp32 subnormal bf16 tie -> 2"},
    {0x00012345, 0x0000, 0x0001, "fp32 subnormal (vcvtneps2bf16 would flush it)"},
    {0x00800000, 0x0000, 0x0080, "fp32 min normal"},
    {0x7fc00000, 0x7e00, 0x7fc0, "qNaN"},
    {0xffc00000, 0xfe00, 0xffc0, "-qNaN"},
    {0x7f800001, 0x7e00, 0x7fc0, "sNaN, low payload: still NaN"},
    {0xff800001, 0xfe00, 0xffc0, "-sNaN, low payload"},
    {0x7f802000, 0x7e01, 0x7fc0, "sNaN, payload bit 13"},
    {0x7fbfffff, 0x7fff, 0x7fff, "sNaN, full payload"},
    {0xff81e000, 0xfe0f, 0xffc1, "-sNaN with payload"},
    {0x7fffffff, 0x7fff, 0x7fff, "qNaN, full payload"},
    {0x7fd5a5a5, 0x7ead, 0x7fd5, "qNaN, mixed payload"},
};
#define NEDGE (sizeof edges / sizeof edges[0])

static void test_edges(int bf)
{
    /* long enough for whole vectors of every width, and with each edge at
     * several positions of a vector and of the tail */
    size_t n = NEDGE * 5 + 7;
    float *src = xalloc(n * sizeof *src);
    uint16_t *dst = xalloc(n * sizeof *dst);
    long bad_oracle = 0;

    for (size_t i = 0; i < n; i++)
        src[i] = bits_f(edges[i % NEDGE].f32);
    for (size_t k = 0; k < NEDGE; k++) {
        uint16_t want = bf ? edges[k].bf16 : edges[k].f16;
        uint16_t got = bf ? ring_f32_to_bf16(bits_f(edges[k].f32))
                          : ring_f32_to_f16(bits_f(edges[k].f32));
        uint16_t indep = bf ? ref_bf16_encode(bits_f(edges[k].f32))
                            : ref_f16_encode(bits_f(edges[k].f32));

        if ((got != want || indep != want) && bad_oracle++ < 5)
            diag("%s %08x (%s): oracle %04x reference %04x table %04x", bf ? "bf16" : "fp16",
                 edges[k].f32, edges[k].what, got, indep, want);
    }
    ok(bad_oracle == 0, "oracle and reference encode_%s agree with the table of %zu edge cases",
       bf ? "bf16" : "f16", NEDGE);
    for (int v = 0; v < NVAR; v++) {
        long bad = 0;

        if (!vars[v]) {
            skip_var(v);
            continue;
        }
        memset(dst, 0x5a, n * sizeof *dst);
        (bf ? vars[v]->encode_bf16 : vars[v]->encode_f16)(dst, src, 1.0f, n);
        for (size_t i = 0; i < n; i++) {
            const struct edge *e = &edges[i % NEDGE];
            uint16_t want = bf ? e->bf16 : e->f16;

            if (dst[i] != want && bad++ < 3)
                diag("%s: %08x (%s) at %zu: got %04x want %04x", var_names[v], e->f32, e->what,
                     i, dst[i], want);
        }
        ok(bad == 0, "%s: encode_%s edge cases (%zu, at vector and tail positions)",
           var_names[v], bf ? "bf16" : "f16", NEDGE);
    }
    free(src);
    free(dst);
}

/* ---- encode: the strided sweep -------------------------------------------------------- */

#define SWEEP_BLOCK 65536u

/*
 * Every variant against the oracle on `count` fp32 patterns u = start + k *
 * stride. With count = 2^26 and the odd stride 65 the sample wraps the
 * 2^32 space once: every sign and exponent is hit ~2^17 times, with all
 * low-bit combinations. Every `ref_every`-th element also goes to the
 * independent reference (0 = none; odd, so that its sub-sample still has
 * every low-bit pattern, ties included) and, with F16C, every one to
 * vcvtps2ph.
 */
typedef struct sweep_result {
    long bad16[NVAR], bad_bf[NVAR];
    long ref_bad16, ref_bad_bf, ref_count, hw_bad, hw_count;
} sweep_result_t;

static void sweep(uint64_t start, uint64_t stride, uint64_t count, unsigned ref_every,
                  sweep_result_t *r)
{
    float *src = xalloc(SWEEP_BLOCK * sizeof *src);
    uint16_t *want16 = xalloc(SWEEP_BLOCK * 2), *want_bf = xalloc(SWEEP_BLOCK * 2);
    uint16_t *got = xalloc(SWEEP_BLOCK * 2);
    int hw = have_f16c();

    memset(r, 0, sizeof *r);
    for (uint64_t k0 = 0; k0 < count; k0 += SWEEP_BLOCK) {
        size_t n = (size_t)(count - k0 < SWEEP_BLOCK ? count - k0 : SWEEP_BLOCK);

        for (size_t i = 0; i < n; i++)
            src[i] = bits_f((uint32_t)(start + (k0 + i) * stride));
        vars[0]->encode_f16(want16, src, 1.0f, n);
        vars[0]->encode_bf16(want_bf, src, 1.0f, n);
        for (int v = 1; v < NVAR; v++) {
            if (!vars[v])
                continue;
            vars[v]->encode_f16(got, src, 1.0f, n);
            for (size_t i = 0; i < n; i++)
                if (got[i] != want16[i] && r->bad16[v]++ < 3)
                    diag("%s: fp16 of %08x: got %04x, oracle %04x", var_names[v],
                         f_bits(src[i]), got[i], want16[i]);
            vars[v]->encode_bf16(got, src, 1.0f, n);
            for (size_t i = 0; i < n; i++)
                if (got[i] != want_bf[i] && r->bad_bf[v]++ < 3)
                    diag("%s: bf16 of %08x: got %04x, oracle %04x", var_names[v],
                         f_bits(src[i]), got[i], want_bf[i]);
        }
        /* the scalar table against the element functions it is made of */
        for (size_t i = 0; i < n; i++) {
            if (want16[i] != ring_f32_to_f16(src[i]))
                r->bad16[0]++;
            if (want_bf[i] != ring_f32_to_bf16(src[i]))
                r->bad_bf[0]++;
        }
#if TEST_X86
        if (hw && n % 8 == 0) {
            hw_encode_f16(got, src, n);
            r->hw_count += (long)n;
            for (size_t i = 0; i < n; i++)
                if (got[i] != want16[i] && r->hw_bad++ < 3)
                    diag("fp16 of %08x: oracle %04x, vcvtps2ph %04x", f_bits(src[i]),
                         want16[i], got[i]);
        }
#endif
        if (ref_every) {
            for (size_t i = (size_t)(k0 % ref_every); i < n; i += ref_every) {
                uint16_t a = ref_f16_encode(src[i]), b = ref_bf16_encode(src[i]);

                r->ref_count++;
                if (a != want16[i] && r->ref_bad16++ < 3)
                    diag("fp16 of %08x: oracle %04x, reference %04x", f_bits(src[i]), want16[i],
                         a);
                if (b != want_bf[i] && r->ref_bad_bf++ < 3)
                    diag("bf16 of %08x: oracle %04x, reference %04x", f_bits(src[i]),
                         want_bf[i], b);
            }
        }
    }
    (void)hw;
    free(src);
    free(want16);
    free(want_bf);
    free(got);
}

static void report_sweep(const sweep_result_t *r, const char *what, int with_oracle_checks)
{
    for (int v = 0; v < NVAR; v++) {
        if (!vars[v]) {
            skip_var(v);
            skip_var(v);
            continue;
        }
        ok(r->bad16[v] == 0, "%s: encode_f16 == oracle on %s (%ld differ)", var_names[v], what,
           r->bad16[v]);
        ok(r->bad_bf[v] == 0, "%s: encode_bf16 == oracle on %s (%ld differ)", var_names[v],
           what, r->bad_bf[v]);
    }
    if (!with_oracle_checks)
        return;
    ok(r->ref_bad16 == 0 && r->ref_bad_bf == 0,
       "oracle == search-and-midpoint RNE reference on %ld of them (fp16 %ld, bf16 %ld differ)",
       r->ref_count, r->ref_bad16, r->ref_bad_bf);
    if (r->hw_count)
        ok(r->hw_bad == 0, "oracle fp32->fp16 == vcvtps2ph on all %ld (%ld differ)",
           r->hw_count, r->hw_bad);
    else
        skip("no F16C on this CPU");
}

static void test_sweep(void)
{
    sweep_result_t r;

    sweep(0x00012345u, 65, 1u << 26, 7, &r);
    report_sweep(&r, "2^26 fp32 patterns, stride 65", 1);
}

static void test_sweep_full(void)
{
    sweep_result_t r;

    if (!slow_mode()) {
        for (int k = 0; k < 2 * NVAR + 2; k++)
            skip("the full 2^32 sweep runs with RING_TEST_SLOW=1");
        return;
    }
    sweep(0, 1, 1ull << 32, 1, &r);
    report_sweep(&r, "all 2^32 fp32 patterns", 1);
}

int main(void)
{
    for (uint32_t h = 0; h < 0x7c00; h++)
        f16_tab[h] = ref_f16_mag(h);
    /* dispatch 3 + 4; decode 2 x NVAR + 1 + 2; edges 2 x (1 + NVAR);
     * sweep 2 x NVAR + 2, full sweep the same */
    plan(7 + (2 * NVAR + 3) + 2 * (1 + NVAR) + 2 * (2 * NVAR + 2));
    codec_test_variants();

    test_dispatch_env(); /* first: it needs the variant not chosen yet */
    test_dispatch();
    test_decode_exhaustive(0);
    test_decode_exhaustive(1);
    test_oracle_decode_hw();
    test_round_trip();
    test_edges(0);
    test_edges(1);
    test_sweep();
    test_sweep_full();
    return done_testing();
}
