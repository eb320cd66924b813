/*
 * sgd.c - SGD with momentum and weight decay (see sgd.h).
 * Compiled with -ffp-contract=off (Makefile.am, libringd_base): an FMA here would round
 * differently from a peer built by another compiler.
 */
#include "ring_build.h"

#include "sgd.h"

#include <math.h>
#include <stdlib.h>


int sgd_init(sgd_t *o, size_t n, double lr, double momentum, double weight_decay)
{
    o->lr = (float)lr;
    o->momentum = (float)momentum;
    o->weight_decay = (float)weight_decay;
    o->n = n;
    o->velocity = calloc(n > 0 ? n : 1, sizeof(float));
    return o->velocity != NULL ? 0 : -1;
}

void sgd_step(sgd_t *o, float *params, const float *grad)
{
    const float lr = o->lr, mu = o->momentum, wd = o->weight_decay;
    float *restrict v = o->velocity;
    float *restrict p = params;
    const float *restrict g_in = grad;

    /* restrict: the three arrays never overlap, so the loop vectorizes without
     * run-time overlap checks */
    for (size_t i = 0; i < o->n; i++) {
        float g = g_in[i] + wd * p[i];
        v[i] = mu * v[i] + g;
        p[i] -= lr * v[i];
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
