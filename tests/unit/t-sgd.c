/*
 * t-sgd.c - the optimizer every peer applies (src/base/sgd.c): four
 * parameters at a time must give the same bits as the rule one at a time
 * (sgd.h), for every length (the remainder too), unaligned arrays, weight
 * decay and several steps; a peer built with another compiler or without
 * the vector path computes the reference below.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mix64.h"
#include "sgd.h"
#include "tap.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng32(void)
{
    return xorshift64_u32(&rng_state);
}

/* mostly gradient-like values, some zeros, signed zeros, tiny and large ones */
static float rand_value(void)
{
    uint32_t k = rng32() % 16, u = rng32();
    float f;

    if (k == 0)
        return 0.0f;
    if (k == 1)
        return -0.0f;
    if (k == 2) { /* any finite bit pattern */
        u &= 0xff7fffffu;
        memcpy(&f, &u, sizeof(f));
        return isfinite(f) ? f : 1.0f;
    }
    f = (float)(u % 2000001) / 1e6f - 1.0f;
    return k == 3 ? f * 1e-30f : k == 4 ? f * 1e20f : f;
}

/* the rule, one parameter at a time, as written in sgd.h */
static void ref_step(float lr, float mu, float wd, size_t n, float *w, float *v, const float *g)
{
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + wd * w[i];
        v[i] = mu * v[i] + d;
        w[i] -= lr * v[i];
    }
}

static int same_bits(const float *a, const float *b, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            *at = i;
            return 0;
        }
    return 1;
}

/* n parameters at offset off (floats) into their buffers, 3 steps */
static void check(size_t n, size_t off, double wd)
{
    size_t bytes = (n + off + 1) * sizeof(float), at = 0;
    float *w = malloc(bytes), *g = malloc(bytes), *rw = malloc(bytes), *rv = calloc(n + 1, sizeof(float));
    sgd_t o;
    int same = 1;

    if (w == NULL || g == NULL || rw == NULL || rv == NULL || sgd_init(&o, n, 0.05, 0.9, wd) != 0)
        bail("out of memory");
    for (size_t i = 0; i < n; i++)
        rw[off + i] = w[off + i] = rand_value();
    for (int step = 0; step < 3 && same; step++) {
        for (size_t i = 0; i < n; i++)
            g[off + i] = rand_value();
        sgd_step(&o, w + off, g + off);
        ref_step(o.lr, o.momentum, o.weight_decay, n, rw + off, rv, g + off);
        same = same_bits(w + off, rw + off, n, &at) && same_bits(o.velocity, rv, n, &at);
    }
    ok(same, "n = %zu at offset %zu, weight decay %g: parameters and velocity bit for bit as "
       "one at a time%s", n, off, wd, same ? "" : " (first difference below)");
    if (!same)
        diag("index %zu: %a against %a", at, (double)w[off + at], (double)rw[off + at]);
    sgd_free(&o);
    free(w);
    free(g);
    free(rw);
    free(rv);
}

int main(void)
{
    static const size_t lengths[] = {0, 1, 3, 4, 5, 7, 8, 63, 1001, 235146};

    plan(2 * (int)(sizeof(lengths) / sizeof(lengths[0])) + 1);
    for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++) {
        check(lengths[k], k % 4, 0.0);
        check(lengths[k], 1, 5e-4);
    }
    {
        /* lr_at: cosine from base to 0 */
        double mid = lr_at(1, 0.1, 50, 100), end = lr_at(1, 0.1, 100, 100);
        ok(fabs(lr_at(1, 0.1, 0, 100) - 0.1) < 1e-12 && fabs(mid - 0.05) < 1e-12 && end == 0 &&
           lr_at(0, 0.1, 70, 100) == 0.1, "lr_at: cosine 0.1 -> %g (half way) -> %g; constant",
           mid, end);
    }
    return done_testing();
}
