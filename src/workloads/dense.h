/*
 * dense.h - fully connected layers, ReLU and softmax cross-entropy on the
 * CPU (CBLAS, row-major), for workloads that keep every parameter in one
 * flat array (workload.h).
 *
 * Layout of one layer inside the flat array, starting at l->offset:
 *
 *   W: out x in floats, row-major (row o holds the weights into output o,
 *      as in PyTorch's nn.Linear), then
 *   b: out floats.
 *
 * The gradient array has the same layout, so dW and db sit at the same
 * offset in w->grads. A layer holds no pointers: every call takes the base
 * of the array, so a checkpoint loaded into w->params or a params array
 * swapped by the daemon is seen at once.
 *
 * Activations are row-major batches: x is n x in, y is n x out. Nothing
 * here allocates; the caller sizes every buffer. Arguments are trusted
 * (these are our own invariants, checked by the workload that calls).
 */
#ifndef RING_DENSE_H
#define RING_DENSE_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"

typedef struct dense {
    int in, out;
    size_t offset;            /* of W in the flat array; b follows W */
} dense_t;

/* Parameters of a layer of in -> out (W and b). */
static inline size_t dense_nparams(int in, int out)
{
    return (size_t)in * (size_t)out + (size_t)out;
}

static inline float *dense_weights(const dense_t *l, float *base)
{
    return base + l->offset;
}

static inline float *dense_bias(const dense_t *l, float *base)
{
    return base + l->offset + (size_t)l->in * (size_t)l->out;
}

/* He normal initialisation: W ~ N(0, 2/in) drawn row by row from r, b = 0. */
void dense_init_he(const dense_t *l, float *params, rng_t *r);

/* y = x W^T + b for the n rows of x. */
void dense_forward(const dense_t *l, const float *params, const float *x, int n, float *y);

/*
 * Given dy = dLoss/dy for the batch that produced y from x: writes dW and
 * db into grads (overwritten, not accumulated), and dx = dy W into dx
 * unless dx is NULL (the first layer needs no input gradient).
 */
void dense_backward(const dense_t *l, const float *params, const float *x, const float *dy, int n,
                    float *grads, float *dx);

/* x = max(x, 0), in place. */
void dense_relu_forward(float *x, size_t count);

/*
 * dy *= (y > 0), in place, where y is the ReLU's output: y > 0 exactly
 * where the input was > 0, so the input need not be kept. The derivative
 * at 0 is taken as 0.
 */
void dense_relu_backward(const float *y, float *dy, size_t count);

/*
 * Softmax cross-entropy of the n x classes logits against labels y (each
 * 0..classes-1). *loss_p gets the MEAN loss over the n rows, *correct_p
 * the rows whose argmax is the label (either may be NULL). If dlogits is
 * not NULL it gets the gradient of the mean loss: (softmax - onehot) / n.
 * Stable for any finite logits: each row's maximum is subtracted first.
 */
void dense_softmax_xent(const float *logits, const int *y, int n, int classes, float *dlogits,
                        double *loss_p, int *correct_p);

/* Index of the largest of row[0..count) (the first one on ties). */
int dense_argmax(const float *row, int count);

#endif /* RING_DENSE_H */
