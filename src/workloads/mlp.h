/*
 * mlp.h - the fmnist-mlp workload's entry point with a dataset supplied by
 * the caller, so tests can run it on images built in memory.
 *
 * Model: 784 -> hidden[0] -> ... -> hidden[nhidden-1] -> 10, ReLU after
 * every hidden layer, softmax cross-entropy on the 10 logits. Default
 * hidden widths (nhidden == 0): 256, 128.
 *
 * Parameter layout (w->params, and w->grads alike): the layers in order
 * from the input, each as dense.h lays it out (W: out x in row-major, then
 * b: out), with no padding between layers.
 *
 * Initialisation: He normal weights, zero biases, drawn from s->seed only,
 * so every process given the same seed and widths gets the same bits.
 */
#ifndef RING_MLP_H
#define RING_MLP_H

#include <stddef.h>

#include "fmnist.h"
#include "workload.h"

#define MLP_DEFAULT_HIDDEN_1 256
#define MLP_DEFAULT_HIDDEN_2 128

/*
 * Like wl_fmnist_mlp.create, but on the caller's dataset instead of
 * loading s->data_dir. The dataset is borrowed: it must outlive the
 * workload, and destroy does not free it. 0, or -1 with a message in err.
 */
int mlp_create_with_data(const wl_settings_t *s, const fmnist_t *data, workload_t **out, char *err,
                         size_t errlen);

#endif /* RING_MLP_H */
