/*
 * codec_dispatch.c - which codec variant runs: the best one this CPU can
 * run, or the one RING_KERNEL names. Chosen once (pthread_once), so every
 * thread of a process uses the same kernels. Together with the transport
 * registry this is the only place that asks the CPU what it has.
 */
#include "ring_build.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

/* the tables, one per file: codec_scalar.c, codec_avx2.c, codec_avx512.c */
extern const ring_codec_ops_t ring_codec_scalar_ops;
#if defined(__x86_64__) || defined(__i386__)
#define CODEC_X86 1
#include <cpuid.h>
extern const ring_codec_ops_t ring_codec_avx2_ops;
extern const ring_codec_ops_t ring_codec_avx512_ops;
#else
#define CODEC_X86 0
#endif

static pthread_once_t codec_once = PTHREAD_ONCE_INIT;
static const ring_codec_ops_t *codec_chosen;
static char codec_choice[160];

/* the names RING_KERNEL accepts, best first */
static const char *const codec_names[] = {"avx512", "avx2", "scalar"};

#if CODEC_X86
/* F16C from CPUID directly: clang before 16 has no "f16c" for __builtin_cpu_supports.
 * (Its ymm state needs OS support, which the avx2 check already covers.) */
static int codec_cpu_f16c(void)
{
    unsigned int a, b, c, d;

    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

const ring_codec_ops_t *ring_codec_ops_get(const char *name)
{
    if (name == NULL)
        return NULL;
    if (strcmp(name, "scalar") == 0)
        return &ring_codec_scalar_ops;
#if CODEC_X86
    __builtin_cpu_init();
    if (strcmp(name, "avx2") == 0)
        return __builtin_cpu_supports("avx2") && codec_cpu_f16c()
                   ? &ring_codec_avx2_ops
                   : NULL;
    /* AVX512_BF16 is not used: see codec_avx512.c */
    if (strcmp(name, "avx512") == 0)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512vl")
                   ? &ring_codec_avx512_ops
                   : NULL;
#endif
    return NULL;
}

static const ring_codec_ops_t *codec_best(void)
{
    for (size_t i = 0; i < sizeof codec_names / sizeof codec_names[0]; i++) {
        const ring_codec_ops_t *ops = ring_codec_ops_get(codec_names[i]);

        if (ops)
            return ops;
    }
    return &ring_codec_scalar_ops;
}

static int codec_known(const char *name)
{
    for (size_t i = 0; i < sizeof codec_names / sizeof codec_names[0]; i++)
        if (strcmp(name, codec_names[i]) == 0)
            return 1;
    return 0;
}

static void codec_choose(void)
{
    const char *want = getenv("RING_KERNEL");
    const ring_codec_ops_t *ops;

    if (want == NULL || *want == '\0' || strcmp(want, "auto") == 0) {
        codec_chosen = codec_best();
        snprintf(codec_choice, sizeof codec_choice, "%s (best for this CPU)", codec_chosen->name);
    } else if (!codec_known(want)) {
        codec_chosen = codec_best();
        snprintf(codec_choice, sizeof codec_choice,
                 "%s (RING_KERNEL=%.40s unknown: scalar, avx2 or avx512)", codec_chosen->name,
                 want);
    } else if ((ops = ring_codec_ops_get(want)) == NULL) {
        codec_chosen = codec_best();
        snprintf(codec_choice, sizeof codec_choice, "%s (RING_KERNEL=%s not supported by %s)",
                 codec_chosen->name, want, CODEC_X86 ? "this CPU" : "this build");
    } else {
        codec_chosen = ops;
        snprintf(codec_choice, sizeof codec_choice, "%s (RING_KERNEL=%s)", ops->name, want);
    }
}

const ring_codec_ops_t *ring_codec_ops(void)
{
    pthread_once(&codec_once, codec_choose);
    return codec_chosen;
}

const char *ring_codec_ops_choice(void)
{
    pthread_once(&codec_once, codec_choose);
    return codec_choice;
}
