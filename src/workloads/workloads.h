/*
 * workloads.h - the workloads compiled into libringd_workloads, for the
 * registry behind workload_find()/workload_list() (workload.h).
 */
#ifndef RING_WORKLOADS_H
#define RING_WORKLOADS_H

#include "workload.h"

extern const workload_ops_t wl_fmnist_mlp;   /* mlp.c: 784-H1-...-10 MLP on Fashion-MNIST */
extern const workload_ops_t wl_fmnist_cnn;   /* cnn.c: small CNN on Fashion-MNIST */
extern const workload_ops_t wl_synthetic;    /* synthetic.c: no data, tunable size and compute */

/* evaluate.c: the evaluate op of a workload with a test set, from its evaluate_part */
int wl_evaluate_whole(workload_t *w, double *loss, double *accuracy, char *err, size_t errlen);

#endif /* RING_WORKLOADS_H */
