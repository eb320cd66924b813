/* shm.h - the shared-memory transport: tcp endpoints that move their messages
 * through shared memory when the peer is on the same host (shm_int.h says how). */
#ifndef RING_SHM_H
#define RING_SHM_H

#include "transport.h"

extern const ring_tp_ops_t ring_shm_ops;

#endif /* RING_SHM_H */
