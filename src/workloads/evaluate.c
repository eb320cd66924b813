/*
 * evaluate.c - the whole-test-set evaluation every workload with a test set
 * offers as its evaluate op, built on its evaluate_part (part 0 of 1): one
 * loop over the samples per workload, not two.
 */
#include "ring_build.h"

#include <stdio.h>

#include "workloads.h"

int wl_evaluate_whole(workload_t *w, double *loss, double *accuracy, char *err, size_t errlen)
{
    double loss_sum;
    size_t correct, count;

    if (w->ntest == 0) {
        snprintf(err, errlen, "%s: the dataset has no test samples", w->ops->name);
        return -1;
    }
    if (w->ops->evaluate_part(w, 0, 1, &loss_sum, &correct, &count, err, errlen) != 0)
        return -1;
    if (loss)
        *loss = loss_sum / (double)count;
    if (accuracy)
        *accuracy = (double)correct / (double)count;
    return 0;
}
