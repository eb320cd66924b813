/*
 * t-blas-core.c - which OpenBLAS kernel set to ask for (src/base/blas_core.c):
 * the advice for each fallback name and CPU level, none for a kernel set the
 * CPU is meant to run or one this table does not know, and the detected level
 * agreeing with the compiler's own view of this CPU. The table is checked with
 * given levels, so the result does not depend on the host; the public
 * ring_launch_blas_advice against the table, for this program's OpenBLAS.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <ringd/launch.h>

#include "blas_core.h"
#include "tap.h"

/* advice as a string ("-" for none), for is_str */
static const char *advice(const char *core, ring_cpu_level_t level)
{
    const char *a = ring_blas_coretype_advice(core, level);

    return a != NULL ? a : "-";
}

/* ring_launch_blas_advice (public, launch_blas.c) finds this program's OpenBLAS and
 * says what the table says, unless OPENBLAS_CORETYPE was set; the Python tests check
 * it on an OpenBLAS loaded the way frameworks load it (RTLD_LOCAL, through numpy) */
static void launch_advice_checks(const char *want, const char *core)
{
    char *saved = getenv("OPENBLAS_CORETYPE") != NULL ? strdup(getenv("OPENBLAS_CORETYPE"))
                                                      : NULL;
    char coretype[32] = "", why[400] = "";
    int got;

    unsetenv("OPENBLAS_CORETYPE"); /* read at load time: unsetting it changes only the check */
    got = ring_launch_blas_advice(coretype, sizeof(coretype), why, sizeof(why));
    ok(got == (want != NULL) && strcmp(coretype, want != NULL ? want : "") == 0,
       "ring_launch_blas_advice agrees with the table for this OpenBLAS (%d, '%s')", got,
       coretype);
    if (want != NULL)
        ok(strstr(why, core) != NULL && strstr(why, "OPENBLAS_CORETYPE=") != NULL &&
               strstr(why, want) != NULL,
           "its sentence names the kernels and the value to set: %s", why);
    else
        ok(why[0] == '\0', "no advice: no sentence either");
    setenv("OPENBLAS_CORETYPE", "Prescott", 1);
    ok(ring_launch_blas_advice(coretype, sizeof(coretype), why, sizeof(why)) == 0,
       "with OPENBLAS_CORETYPE set (someone chose), no advice");
    if (saved != NULL)
        setenv("OPENBLAS_CORETYPE", saved, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
    free(saved);
}

int main(void)
{
    static const char *const fallbacks[] = {"Prescott", "Core2", "Nehalem", "Katmai",
                                            "Penryn", "Atom", "Barcelona", "Unknown"};
    static const char *const fine[] = {"Haswell", "SkylakeX", "Cooperlake", "Zen",
                                       "SapphireRapids", "Sandybridge", "Excavator"};
    ring_cpu_level_t level;
    const char *core;

    plan(21);
    /* the host this was written on: Emerald Rapids, Debian 12's OpenBLAS 0.3.21 */
    is_str(advice("Prescott", RING_CPU_AVX512_BF16), "Cooperlake",
           "Prescott kernels on an AVX-512 BF16 CPU: ask for Cooperlake");
    is_str(advice("Prescott", RING_CPU_AVX512), "SkylakeX",
           "on AVX-512 without BF16: SkylakeX (Cooperlake's bf16 kernels need BF16)");
    is_str(advice("Prescott", RING_CPU_AVX2), "Haswell", "on AVX2 with FMA: Haswell");
    is_str(advice("PRESCOTT", RING_CPU_AVX2), "Haswell", "the name's case does not matter");
    is_str(advice("Prescott", RING_CPU_AVX), "-", "an AVX-only CPU: no advice");
    is_str(advice("Prescott", RING_CPU_SSE), "-", "an SSE CPU: Prescott is right");
    {
        int all = 1;

        for (size_t i = 0; i < sizeof(fallbacks) / sizeof(fallbacks[0]); i++)
            if (strcmp(advice(fallbacks[i], RING_CPU_AVX512), "SkylakeX") != 0) {
                diag("no advice for %s", fallbacks[i]);
                all = 0;
            }
        ok(all, "every pre-AVX fallback (Prescott, Core2, Nehalem, ...) gets advice");
    }
    {
        int none = 1;

        for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
            for (int l = RING_CPU_SSE; l <= RING_CPU_AVX512_BF16; l++)
                if (ring_blas_coretype_advice(fine[i], (ring_cpu_level_t)l) != NULL) {
                    diag("advice for %s at level %d", fine[i], l);
                    none = 0;
                }
        ok(none, "a vector kernel set (Haswell, SkylakeX, Zen, ...) is never second-guessed");
    }
    is_str(advice("Zen5", RING_CPU_AVX512_BF16), "-", "a name from a newer OpenBLAS: no advice");
    is_str(advice("", RING_CPU_AVX512), "-", "an empty name: no advice");
    is_str(advice(NULL, RING_CPU_AVX512), "-", "no name: no advice");
    is_str(advice("Prescottx", RING_CPU_AVX512), "-", "only whole names match");

    is_str(ring_cpu_level_name(RING_CPU_AVX512_BF16), "AVX-512 with BF16", "level names");
    is_str(ring_cpu_level_name(RING_CPU_SSE), "SSE", "the lowest level's name");

    /* the detected level against the builtins directly */
    level = ring_cpu_level_detect();
    diag("this CPU: %s; OpenBLAS runs %s (OPENBLAS_CORETYPE=%s)", ring_cpu_level_name(level),
         openblas_get_corename(), getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "");
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    ok((level >= RING_CPU_AVX2) == (__builtin_cpu_supports("avx2") &&
                                    __builtin_cpu_supports("fma")),
       "the level is AVX2 or more exactly when the CPU has AVX2 and FMA");
    ok((level >= RING_CPU_AVX512) == (__builtin_cpu_supports("avx512f") &&
                                      __builtin_cpu_supports("avx512bw") &&
                                      __builtin_cpu_supports("avx512vl") &&
                                      __builtin_cpu_supports("avx512dq") &&
                                      __builtin_cpu_supports("avx512cd")),
       "AVX-512 exactly when F, CD, BW, DQ and VL are there");
#else
    skip("not x86: the level is SSE");
    skip("not x86");
#endif
    /* what OpenBLAS runs here: a vector kernel set, or advice that names one */
    core = openblas_get_corename();
    ok(core != NULL && core[0] != '\0', "OpenBLAS names its kernel set (%s)", core ? core : "");
    {
        const char *a = ring_blas_coretype_advice(core, level);

        ok(a == NULL || level >= RING_CPU_AVX2,
           "advice is only given on an AVX2 CPU (here: %s)", a ? a : "none");
        launch_advice_checks(a, core);
    }
    return done_testing();
}
