/*
 * neighbour_probe.h - after a failure, are this peer's two neighbours still
 * there? (neighbour_probe.c; a shrink asks before it agrees)
 */
#ifndef RING_NEIGHBOUR_PROBE_H
#define RING_NEIGHBOUR_PROBE_H

#include "comm_int.h"

typedef struct ring_probe ring_probe_t;

/*
 * Listen on the ring connections to both neighbours for up to `seconds`:
 * *left_lost_p / *right_lost_p become 1 when that connection was closed or
 * reset (the peer is gone: the kernel closed its sockets), else 0 (it is
 * there, or silent). The returned probe holds the receives the transport
 * may still fill: free it with ring_probe_free only after the comm's
 * endpoints are closed. NULL when out of memory (both then 0).
 */
ring_probe_t *ring_comm_probe_neighbours(ring_comm_t *comm, double seconds, int *left_lost_p,
                                         int *right_lost_p);
void ring_probe_free(ring_probe_t *probe);

#endif /* RING_NEIGHBOUR_PROBE_H */
