/*
 * allreduce.h - the request engine: progress, waits, sleeps (allreduce.c).
 */
#ifndef RING_ALLREDUCE_H
#define RING_ALLREDUCE_H

#include "comm_int.h"

int ring_comm_progress(ring_comm_t *comm);
ring_status_t ring_comm_wait_until(ring_comm_t *comm, ring_request_t *req);
/* sleep up to ms in whatever the request under way waits on (the ring's transport,
 * or a sub-communicator of hier.c or rd.c) */
void ring_comm_sleep(ring_comm_t *comm, int ms);
void ring_channel_post_back(ring_comm_t *comm, ring_channel_t *ch);

#endif /* RING_ALLREDUCE_H */
