/*
 * connect.h - bringing the ring's connections up (connect.c).
 */
#ifndef RING_CONNECT_H
#define RING_CONNECT_H

#include "comm_int.h"

ring_status_t ring_connect_ring(ring_comm_t *comm);

#endif /* RING_CONNECT_H */
