/*
 * sgd.h - SGD with momentum and weight decay over one flat array,
 * applied identically on every peer to the averaged gradient, so the
 * parameters stay bitwise identical across the ring.
 *
 *   g = grad + wd * w;   v = momentum * v + g;   w = w - lr * v
 *
 * (PyTorch's SGD; v starts at zero.) Plain float arithmetic, no FMA, in a
 * fixed order: same inputs, same bits on every peer. Shared by the daemon's
 * lockstep trainer and libringd's SSP sessions (src/core/ssp_session.c).
 */
#ifndef RING_BASE_SGD_H
#define RING_BASE_SGD_H

#include <stddef.h>
#include <stdint.h>

typedef struct sgd {
    float lr, momentum, weight_decay;
    size_t n;
    float *velocity;          /* n floats, owned */
} sgd_t;

/* 0, or -1 when the velocity cannot be allocated. */
int sgd_init(sgd_t *o, size_t n, double lr, double momentum, double weight_decay);
/* One step over o->n parameters; params, grad and the velocity must not overlap. */
void sgd_step(sgd_t *o, float *params, const float *grad);
void sgd_free(sgd_t *o);

/* The learning rate of step (0-based) of total: base, or with cosine set,
 * base * (1 + cos(pi * step / total)) / 2. A pure function of the step, so
 * every peer, and a resumed run, uses the same one. */
double lr_at(int cosine, double base, uint64_t step, uint64_t total);

#endif /* RING_BASE_SGD_H */
