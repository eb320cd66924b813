/* hier.h - hierarchical allreduce over a host's peers and across hosts (hier.c). */
#ifndef RING_HIER_H
#define RING_HIER_H

#include "algo.h"
#include "subcomm.h"

/*
 * After the ring is up: open the local and cross rings when --hierarchical and
 * the hosts allow it (>= 2 hosts with the same number >= 2 of peers each), and
 * set comm->algo.ops[RING_ALGO_HIER], through which the engine runs large allreduces over them.
 * hier.c sits above the engine: the engine reaches it only through algo_ops,
 * and it opens its rings with the constructor comm_open.c lends it.
 */
ring_status_t ring_hier_open(ring_comm_t *comm, ring_sub_open_fn open_fn,
                             ring_sub_close_fn close_fn);
void ring_hier_close(ring_comm_t *comm);

#endif /* RING_HIER_H */
