/*
 * blas_core.c - which OpenBLAS kernels this CPU can run (see blas_core.h).
 */
#include "ring_build.h"

#include <stddef.h>
#include <strings.h>

#include "blas_core.h"

ring_cpu_level_t ring_cpu_level_detect(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    /* the builtins also ask the OS (xgetbv) whether it saves the wide registers */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return __builtin_cpu_supports("avx512bf16") ? RING_CPU_AVX512_BF16 : RING_CPU_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return RING_CPU_AVX2;
    if (__builtin_cpu_supports("avx"))
        return RING_CPU_AVX;
#endif
    return RING_CPU_SSE;
}

const char *ring_cpu_level_name(ring_cpu_level_t level)
{
    switch (level) {
    case RING_CPU_AVX:
        return "AVX";
    case RING_CPU_AVX2:
        return "AVX2";
    case RING_CPU_AVX512:
        return "AVX-512";
    case RING_CPU_AVX512_BF16:
        return "AVX-512 with BF16";
    case RING_CPU_SSE:
        break;
    }
    return "SSE";
}

/* OpenBLAS's names (openblas_get_corename) for its kernel sets without AVX: what a
 * DYNAMIC_ARCH build falls back to on a CPU model it does not know. */
static const char *const pre_avx_cores[] = {
    "Unknown", "Katmai", "Coppermine", "Northwood", "Prescott", "Banias",
    "Atom", "Core2", "Penryn", "Dunnington", "Nehalem", "Athlon",
    "Opteron", "Opteron_SSE3", "Barcelona", "Nano", "Bobcat",
};

const char *ring_blas_coretype_advice(const char *corename, ring_cpu_level_t level)
{
    int pre_avx = 0;

    /* below AVX2 there is little to gain (and below AVX nothing better to run) */
    if (corename == NULL || level < RING_CPU_AVX2)
        return NULL;
    for (size_t i = 0; i < sizeof(pre_avx_cores) / sizeof(pre_avx_cores[0]); i++)
        if (strcasecmp(corename, pre_avx_cores[i]) == 0)
            pre_avx = 1;
    if (!pre_avx)
        return NULL;
    switch (level) {
    case RING_CPU_AVX512_BF16:
        return "Cooperlake";
    case RING_CPU_AVX512:
        return "SkylakeX";
    default:
        return "Haswell";
    }
}
