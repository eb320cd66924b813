/*
 * requests.h - the fixed ring of request slots (requests.c).
 */
#ifndef RING_REQUESTS_H
#define RING_REQUESTS_H

#include "comm_int.h"

/* requests.c, with the comm's lock held: the next free request slot (zeroed; fill
 * in the call), then queue it and start it */
ring_status_t ring_request_next(ring_comm_t *comm, ring_request_t **slot_p);
ring_status_t ring_request_push(ring_comm_t *comm, ring_request_t *req, ring_request_t **req_p);

#endif /* RING_REQUESTS_H */
