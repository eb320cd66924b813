/*
 * t-codec.c - the codec kernels (kernels/codec.h) against the scalar oracle
 * (kernels/half.h), and the oracle against references that share no code
 * with it: ldexp-built values, a table-and-midpoint round-to-nearest-even,
 * the F16C instructions themselves, and round trips.
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
#include "half.h"
#include "tap.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TEST_X86 1
#else
#define TEST_X86 0
#endif

#define NVAR 3
static const char *const var_names[NVAR] = {"scalar", "avx2", "avx512"};
static const ring_codec_ops_t *vars[NVAR];

/* ---- helpers ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float bits_f(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof u);
    return u;
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

static void *xalloc(size_t n)
{
    void *p = NULL;

    if (posix_memalign(&p, 64, n ? n : 64) != 0)
        bail("out of memory (%zu bytes)", n);
    return p;
}

/* a test of variant v, which this CPU (or build) cannot run */
static void skip_var(int v)
{
    char why[96];

    snprintf(why, sizeof why, "%s: not supported by this CPU", var_names[v]);
    skip(why);
}

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
    int v, tests;

    for (uint32_t h = 0; h < 0x7c00; h++)
        f16_tab[h] = ref_f16_mag(h);
    for (v = 0; v < NVAR; v++)
        vars[v] = ring_codec_ops_get(var_names[v]);
    /* dispatch 3 + 4; decode 2 x NVAR + 1 + 2; edges 2 x (1 + NVAR);
     * sweep 2 x NVAR + 2, full sweep the same; layout 4 x NVAR; fused large 4 x NVAR,
     * oracle 1; absmax 2 x NVAR */
    tests = 7 + (2 * NVAR + 3) + 2 * (1 + NVAR) + 2 * (2 * NVAR + 2) + 4 * NVAR + 4 * NVAR + 1 +
            2 * NVAR;
    plan(tests);
    for (v = 0; v < NVAR; v++)
        diag("variant %s: %s", var_names[v], vars[v] ? "runs here" : "not supported by this CPU");

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
