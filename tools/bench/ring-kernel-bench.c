/*
 * ring-kernel-bench - throughput of the codec kernels (kernels/codec.h)
 * against the loops they must match: the raw F16C loop of
 * shared/bench/f16c_bw.c and an fp32 add c = a + b.
 *
 * For 256 KiB (L2-resident) and 256 MiB (DRAM) of fp32 data it times, in
 * one run: the raw F16C loops (fp32->fp16, fp16->fp32), every variant this
 * CPU runs (encode_f16, decode_f16, encode_bf16, decode_bf16, fused_f16
 * without and with final, sum_n_f32 of two inputs: the ring's fp32 add),
 * and the add. Figures are GB/s of fp32 data,
 * 4 bytes per element, in both directions (as f16c_bw.c counts them;
 * 1 GB = 1e9 B); the median of -r reps, with min and max. The fused kernel
 * and the add are also given in elements/s. Then the ratios: each variant
 * over raw F16C, and fused_f16 over add.
 *
 * Run (from a build directory):
 *   ./ring-kernel-bench              # everything, 5 reps, 15-20 s
 *   ./ring-kernel-bench -r 9 -k avx2 # one variant, more reps
 *   ./ring-kernel-bench -S           # 256 KiB only, a few seconds
 * Pin it (taskset -c 1) and keep the machine otherwise idle for stable
 * DRAM figures; the 256 KiB ones show the compute cost.
 */
#include "ring_build.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KB_X86 1
#else
#define KB_X86 0
#endif

#define KB_MAX_REPS 64

typedef struct kb_buffers {
    float *src, *dst, *sum; /* fp32: input, decoded output, add output */
    uint16_t *half, *wire;  /* encoded output, encoded input of fused */
    size_t n;
} kb_buffers_t;

typedef struct kb_result {
    double med, min, max; /* GB/s of fp32 data */
} kb_result_t;

typedef void (*kb_fn)(const kb_buffers_t *b, size_t n, const void *arg);

static double kb_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int kb_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* ---- the reference loops ------------------------------------------------------------ */

#if KB_X86
/* f16c_bw.c's to16_avx2 / to32_avx2, unchanged but for the target attribute */
__attribute__((noinline, target("avx2,f16c"))) static void raw_to16(uint16_t *o, const float *in,
                                                                    size_t n)
{
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(in + i);

        _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++)
        o[i] = _cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT);
}

__attribute__((noinline, target("avx2,f16c"))) static void raw_to32(float *o, const uint16_t *in,
                                                                    size_t n)
{
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(in + i));

        _mm256_storeu_ps(o + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++)
        o[i] = _cvtsh_ss(in[i]);
}

/* c = a + b as gcc -O3 -march=native makes it on an AVX2 machine */
__attribute__((noinline, target("avx2"))) static void add_avx2(float *restrict c,
                                                               const float *restrict a,
                                                               const float *restrict b, size_t n)
{
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(c + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
        _mm256_storeu_ps(c + i + 8,
                         _mm256_add_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8)));
    }
    for (; i < n; i++)
        c[i] = a[i] + b[i];
}
#endif

__attribute__((noinline)) static void add_plain(float *restrict c, const float *restrict a,
                                                const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}

/* ---- what is timed --------------------------------------------------------------- */

#if KB_X86
static void run_raw16(const kb_buffers_t *b, size_t n, const void *arg)
{
    (void)arg;
    raw_to16(b->half, b->src, n);
}

static void run_raw32(const kb_buffers_t *b, size_t n, const void *arg)
{
    (void)arg;
    raw_to32(b->dst, b->half, n);
}

static void run_add_avx2(const kb_buffers_t *b, size_t n, const void *arg)
{
    (void)arg;
    add_avx2(b->sum, b->src, b->dst, n);
}
#endif

static void run_add_plain(const kb_buffers_t *b, size_t n, const void *arg)
{
    (void)arg;
    add_plain(b->sum, b->src, b->dst, n);
}

static void run_enc16(const kb_buffers_t *b, size_t n, const void *arg)
{
    ((const ring_codec_ops_t *)arg)->encode_f16(b->half, b->src, 0x1p-3f, n);
}

static void run_dec16(const kb_buffers_t *b, size_t n, const void *arg)
{
    ((const ring_codec_ops_t *)arg)->decode_f16(b->dst, b->half, 0x1p3f, n);
}

static void run_encbf(const kb_buffers_t *b, size_t n, const void *arg)
{
    ((const ring_codec_ops_t *)arg)->encode_bf16(b->half, b->src, 0x1p-3f, n);
}

static void run_decbf(const kb_buffers_t *b, size_t n, const void *arg)
{
    ((const ring_codec_ops_t *)arg)->decode_bf16(b->dst, b->half, 0x1p3f, n);
}

static void run_fused(const kb_buffers_t *b, size_t n, const void *arg)
{
    ((const ring_codec_ops_t *)arg)->fused_f16(b->half, NULL, b->wire, b->src, 0x1p-1f, 0x1p-1f,
                                               0x1p1f, n);
}

static void run_fused_final(const kb_buffers_t *b, size_t n, const void *arg)
{
    ((const ring_codec_ops_t *)arg)->fused_f16(b->half, b->sum, b->wire, b->src, 0x1p-1f,
                                               0x1p-1f, 0x1p1f, n);
}

/* the fp32 ring's add of a received chunk to this peer's (kernels/sum_n_simd.c) */
static void run_sum2(const kb_buffers_t *b, size_t n, const void *arg)
{
    const float *src[2] = {b->src, b->dst};

    (void)((const ring_codec_ops_t *)arg)->sum_n_f32(b->sum, NULL, src, 2, 1.0f, n, 0);
}

/* median/min/max GB/s of fp32 data over reps; inner calls per rep for short buffers */
static kb_result_t kb_time(kb_fn fn, const kb_buffers_t *b, size_t n, const void *arg, int reps,
                           int inner)
{
    double g[KB_MAX_REPS];
    kb_result_t r;

    fn(b, n, arg); /* warm: page faults, caches */
    for (int k = 0; k < reps; k++) {
        double t0 = kb_now();

        for (int j = 0; j < inner; j++) {
            fn(b, n, arg);
            __asm__ volatile("" ::: "memory");
        }
        g[k] = 4.0 * (double)n * inner / (kb_now() - t0) / 1e9;
    }
    qsort(g, (size_t)reps, sizeof g[0], kb_cmp);
    r.min = g[0];
    r.max = g[reps - 1];
    r.med = reps % 2 ? g[reps / 2] : (g[reps / 2 - 1] + g[reps / 2]) / 2;
    return r;
}

static void kb_print(const char *size, const char *name, kb_result_t r, int elems)
{
    printf("%-8s %-28s %8.2f %8.2f %8.2f", size, name, r.med, r.min, r.max);
    if (elems)
        printf("   %6.2f Gelem/s", r.med / 4.0);
    printf("\n");
    fflush(stdout);
}

static void kb_usage(FILE *out)
{
    fprintf(out,
            "Usage: ring-kernel-bench [-r REPS] [-k VARIANT] [-S]\n"
            "Throughput of the codec kernels against raw F16C loops and an fp32 add,\n"
            "for 256 KiB and 256 MiB of fp32 data (GB/s = 1e9 B/s of fp32, 4 B per element).\n"
            "\n"
            "  -r, --reps N        repetitions, the median is reported (default 5, max %d)\n"
            "  -k, --kernel NAME   only this variant: scalar, avx2 or avx512 (default: all\n"
            "                      this CPU runs)\n"
            "  -S, --small         256 KiB only\n"
            "  -h, --help          this text\n"
            "      --version       print the version and exit\n",
            KB_MAX_REPS);
}

typedef struct kb_row {
    const char *name;
    kb_fn fn;
    int elems;
} kb_row_t;

static const kb_row_t kb_rows[] = {
    {"encode_f16", run_enc16, 0},  {"decode_f16", run_dec16, 0},
    {"encode_bf16", run_encbf, 0}, {"decode_bf16", run_decbf, 0},
    {"fused_f16", run_fused, 1},   {"fused_f16 +final", run_fused_final, 1},
    {"sum_n_f32 (2 inputs)", run_sum2, 1},
};
#define KB_NROWS (sizeof kb_rows / sizeof kb_rows[0])

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"reps", required_argument, NULL, 'r'},
                                             {"kernel", required_argument, NULL, 'k'},
                                             {"small", no_argument, NULL, 'S'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    static const char *const names[] = {"scalar", "avx2", "avx512"};
    const ring_codec_ops_t *vars[3];
    const char *only = NULL;
    int reps = 5, small_only = 0, c, nsizes, have_f16c, rc = 1;
    size_t sizes[2] = {256u << 10, 256u << 20};
    kb_buffers_t b;
    /* [size][variant][row], and the references per size */
    kb_result_t res[2][3][KB_NROWS], raw16[2], raw32[2], add[2];

    while ((c = getopt_long(argc, argv, "r:k:Sh", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            reps = atoi(optarg);
            if (reps < 1 || reps > KB_MAX_REPS) {
                fprintf(stderr, "ring-kernel-bench: -r wants 1..%d\n", KB_MAX_REPS);
                return 2;
            }
            break;
        case 'k':
            only = optarg;
            break;
        case 'S':
            small_only = 1;
            break;
        case 'h':
            kb_usage(stdout);
            return 0;
        case 'V':
            printf("ring-kernel-bench (ringd) %s\n", PACKAGE_VERSION);
            return 0;
        default:
            kb_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        kb_usage(stderr);
        return 2;
    }
    for (int v = 0; v < 3; v++) {
        vars[v] = ring_codec_ops_get(names[v]);
        if (only && strcmp(only, names[v]) != 0)
            vars[v] = NULL;
    }
    if (only && !ring_codec_ops_get(only)) {
        fprintf(stderr, "ring-kernel-bench: variant '%s' unknown or not supported by this CPU\n",
                only);
        return 2;
    }
    /* F16C comes with the avx2 variant (dispatch is the place that asks the CPU) */
    have_f16c = KB_X86 && ring_codec_ops_get("avx2") != NULL;
    nsizes = small_only ? 1 : 2;

    memset(&b, 0, sizeof b);
    b.n = sizes[nsizes - 1] / 4;
    if (posix_memalign((void **)&b.src, 64, b.n * 4) || posix_memalign((void **)&b.dst, 64, b.n * 4) ||
        posix_memalign((void **)&b.sum, 64, b.n * 4) ||
        posix_memalign((void **)&b.half, 64, b.n * 2) ||
        posix_memalign((void **)&b.wire, 64, b.n * 2)) {
        fprintf(stderr, "ring-kernel-bench: out of memory\n");
        goto out;
    }
    {
        uint64_t s = 12345;

        for (size_t i = 0; i < b.n; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            /* gradient-like, as in f16c_bw.c */
            b.src[i] = ((float)(s >> 40) / (float)(1 << 24) - 0.5f) * 0.02f;
            b.dst[i] = 0.0f;
            b.sum[i] = 0.0f;
        }
        ring_codec_ops_get("scalar")->encode_f16(b.wire, b.src, 1.0f, b.n);
        memcpy(b.half, b.wire, b.n * 2);
    }

    printf("# ring-kernel-bench: GB/s of fp32 data (4 B/element, 1 GB = 1e9 B), median/min/max "
           "of %d reps\n",
           reps);
    printf("# ring_codec_ops(): %s\n", ring_codec_ops_choice());
    printf("%-8s %-28s %8s %8s %8s\n", "size", "kernel", "median", "min", "max");
    for (int z = 0; z < nsizes; z++) {
        size_t n = sizes[z] / 4;
        const char *sz = z == 0 ? "256KiB" : "256MiB";
        int inner = z == 0 ? 1000 : 1;
        char name[64];

        memset(&raw16[z], 0, sizeof raw16[z]);
        memset(&raw32[z], 0, sizeof raw32[z]);
#if KB_X86
        if (have_f16c) {
            raw16[z] = kb_time(run_raw16, &b, n, NULL, reps, inner);
            kb_print(sz, "raw F16C fp32->fp16", raw16[z], 0);
            raw32[z] = kb_time(run_raw32, &b, n, NULL, reps, inner);
            kb_print(sz, "raw F16C fp16->fp32", raw32[z], 0);
            add[z] = kb_time(run_add_avx2, &b, n, NULL, reps, inner);
            kb_print(sz, "add c=a+b (avx2)", add[z], 1);
        } else
#endif
        {
            add[z] = kb_time(run_add_plain, &b, n, NULL, reps, inner);
            kb_print(sz, "add c=a+b (plain C)", add[z], 1);
        }
        for (int v = 0; v < 3; v++) {
            if (!vars[v])
                continue;
            for (size_t k = 0; k < KB_NROWS; k++) {
                /* the scalar variant is ~100x slower in L2: fewer calls per rep */
                int in = v == 0 && z == 0 ? inner / 20 : inner;

                res[z][v][k] = kb_time(kb_rows[k].fn, &b, n, vars[v], reps, in);
                snprintf(name, sizeof name, "%s %s", names[v], kb_rows[k].name);
                kb_print(sz, name, res[z][v][k], kb_rows[k].elems);
            }
        }
    }

    printf("\n# ratios of medians\n");
    for (int z = 0; z < nsizes; z++) {
        const char *sz = z == 0 ? "256KiB" : "256MiB";

        for (int v = 0; v < 3; v++) {
            if (!vars[v])
                continue;
            if (have_f16c) {
                printf("%-8s %-6s encode_f16 / raw F16C   %6.3f\n", sz, names[v],
                       res[z][v][0].med / raw16[z].med);
                printf("%-8s %-6s decode_f16 / raw F16C   %6.3f\n", sz, names[v],
                       res[z][v][1].med / raw32[z].med);
                printf("%-8s %-6s encode_bf16 / raw F16C  %6.3f\n", sz, names[v],
                       res[z][v][2].med / raw16[z].med);
                printf("%-8s %-6s decode_bf16 / raw F16C  %6.3f\n", sz, names[v],
                       res[z][v][3].med / raw32[z].med);
            }
            printf("%-8s %-6s fused_f16 / add         %6.3f\n", sz, names[v],
                   res[z][v][4].med / add[z].med);
            printf("%-8s %-6s fused_f16+final / add   %6.3f\n", sz, names[v],
                   res[z][v][5].med / add[z].med);
            printf("%-8s %-6s sum_n_f32 / add         %6.3f\n", sz, names[v],
                   res[z][v][6].med / add[z].med);
        }
    }
    /* keep the results alive */
    if (b.dst[b.n - 1] != b.dst[b.n - 1] || b.sum[0] != b.sum[0])
        printf("nan\n");
    rc = 0;
out:
    free(b.src);
    free(b.dst);
    free(b.sum);
    free(b.half);
    free(b.wire);
    return rc;
}
