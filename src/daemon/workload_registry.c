/*
 * workload_registry.c - the workloads this daemon offers, by name.
 */
#include "ring_build.h"

#include <stddef.h>
#include <string.h>

#include "workloads/workloads.h"

static const workload_ops_t *const all_workloads[] = {&wl_fmnist_mlp, &wl_fmnist_cnn,
                                                       &wl_synthetic, NULL};

const workload_ops_t *workload_find(const char *name)
{
    for (int i = 0; all_workloads[i] != NULL; i++)
        if (strcmp(all_workloads[i]->name, name) == 0)
            return all_workloads[i];
    return NULL;
}

const workload_ops_t *const *workload_list(void)
{
    return all_workloads;
}
