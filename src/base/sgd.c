/*
 * sgd.c - SGD with momentum and weight decay (see sgd.h).
 * Compiled with -ffp-contract=off (Makefile.am, libringd_base): an FMA here would round
 * differently from a peer built by another compiler.
 */
#include "ring_build.h"

#include "sgd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


int sgd_init(sgd_t *o, size_t n, double lr, double momentum, double weight_decay)
{
    o->lr = (float)lr;
    o->momentum = (float)momentum;
    o->weight_decay = (float)weight_decay;
    o->n = n;
    o->velocity = calloc(n > 0 ? n : 1, sizeof(float));
    return o->velocity != NULL ? 0 : -1;
}

/* Four floats as one value (GCC and clang vector extensions): the compiler
 * emits one vector instruction per operation on any x86-64 (SSE2) or arm64. */
typedef float sgd_v4 __attribute__((vector_size(16)));

void sgd_step(sgd_t *o, float *params, const float *grad)
{
    const float lr = o->lr, mu = o->momentum, wd = o->weight_decay;
    float *v = o->velocity;
    size_t i = 0, n = o->n;

    /* four at a time: this loop runs over every parameter each step (scalar, it
     * was 8 % of a 4-peer fmnist-mlp profile). The same operations in the same
     * order on each element, no FMA: the same bits as one at a time. memcpy:
     * the arrays need no alignment */
    for (; i + 4 <= n; i += 4) {
        sgd_v4 g, w, m;

        memcpy(&g, grad + i, sizeof(g));
        memcpy(&w, params + i, sizeof(w));
        memcpy(&m, v + i, sizeof(m));
        g = g + wd * w;
        m = mu * m + g;
        w -= lr * m;
        memcpy(v + i, &m, sizeof(m));
        memcpy(params + i, &w, sizeof(w));
    }
    for (; i < n; i++) {
        float g = grad[i] + wd * params[i];
        v[i] = mu * v[i] + g;
        params[i] -= lr * v[i];
    }
}

void sgd_free(sgd_t *o)
{
    free(o->velocity);
    o->velocity = NULL;
}

double lr_at(int cosine, double base, uint64_t step, uint64_t total)
{
    if (!cosine || total == 0)
        return base;
    if (step >= total)
        return 0;
    return base * 0.5 * (1.0 + cos(M_PI * (double)step / (double)total));
}
