/*
 * codec_test.h - what t-codec and t-codec-layout share: the codec variants
 * under test, bit casts, aligned buffers, and the skip of a variant this CPU
 * cannot run. Header-only: tap.h's counters live in each program.
 */
#ifndef RING_TESTS_CODEC_TEST_H
#define RING_TESTS_CODEC_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "tap.h"

#define NVAR 3
static const char *const var_names[NVAR] = {"scalar", "avx2", "avx512"};
static const ring_codec_ops_t *vars[NVAR];

/* every variant this build has, NULL where the CPU cannot run it */
static inline void codec_test_variants(void)
{
    for (int v = 0; v < NVAR; v++)
        vars[v] = ring_codec_ops_get(var_names[v]);
    for (int v = 0; v < NVAR; v++)
        diag("variant %s: %s", var_names[v], vars[v] ? "runs here" : "not supported by this CPU");
}

static inline float bits_f(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t f_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof u);
    return u;
}

static inline void *xalloc(size_t n)
{
    void *p = NULL;

    if (posix_memalign(&p, 64, n ? n : 64) != 0)
        bail("out of memory (%zu bytes)", n);
    return p;
}

/* a test of variant v, which this CPU (or build) cannot run */
static inline void skip_var(int v)
{
    char why[96];

    snprintf(why, sizeof why, "%s: not supported by this CPU", var_names[v]);
    skip(why);
}

#endif
