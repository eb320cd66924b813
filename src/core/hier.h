/* hier.h - hierarchical allreduce over a host's peers and across hosts (hier.c). */
#ifndef RING_HIER_H
#define RING_HIER_H

#include "comm_int.h"

/* After the ring is up: open the local and cross rings when --hierarchical and
 * the hosts allow it (>= 2 hosts with the same number >= 2 of peers each). */
ring_status_t ring_hier_open(ring_comm_t *comm);
void ring_hier_close(ring_comm_t *comm);
/* 1 when this allreduce runs hierarchically (fp32, host memory, large enough). */
int ring_hier_takes(const ring_comm_t *comm, const ring_request_t *req);
ring_status_t ring_hier_begin(ring_comm_t *comm, ring_request_t *req);
/* Advance the request under way; *finished_p = 1 once its result is in recvbuf. */
ring_status_t ring_hier_progress(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                                 int *finished_p);
/* Sleep in the sub-ring under way instead of the ring (at most timeout_ms): 1 when it did. */
int ring_hier_wait(ring_comm_t *comm, int timeout_ms);

#endif /* RING_HIER_H */
