/*
 * collectives.h - the collectives other than allreduce (collectives.c) and
 * their descriptions in messages (coll_describe.c).
 */
#ifndef RING_COLLECTIVES_H
#define RING_COLLECTIVES_H

#include "comm_int.h"

/* collectives.c: what is not allreduce */
extern const char *const ring_coll_names[RING_COLL_COUNT];
size_t ring_dtype_size(ring_dtype_t dtype); /* 1 for RING_DTYPE_BYTES */
ring_status_t ring_coll_comm_alloc(ring_comm_t *comm);
void ring_coll_comm_free(ring_comm_t *comm);
void ring_coll_channel_layout(ring_comm_t *comm, ring_channel_t *ch, const ring_request_t *req);
ring_status_t ring_coll_request_begin(ring_comm_t *comm, ring_request_t *req);
void ring_coll_request_finish(ring_comm_t *comm, ring_request_t *req, ring_status_t status);
/* ring_allgather_start whose frames say "inf or NaN" from the start when
 * nonfinite is 1 (rd.c: a block that holds one); the request ends with
 * RING_ERR_NONFINITE when its own or a received frame says so */
ring_status_t ring_allgather_start_flagged(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                           size_t bytes, uint32_t tensor_id, int nonfinite,
                                           ring_request_t **req_p);
/* Rank 0's *value on every peer, through one exact allreduce in which the others
 * add 0 (the autotuner's and the fits' way to make every peer choose alike; a
 * float carries integers up to 2^24 exactly). A collective: every peer calls it. */
ring_status_t ring_coll_rank0_value(ring_comm_t *comm, float *value, uint32_t tensor_id);
size_t ring_coll_describe(ring_coll_t coll, uint64_t round, uint64_t count, unsigned dtype,
                          unsigned op, uint32_t tensor_id, int root, char *buf, size_t len);

#endif /* RING_COLLECTIVES_H */
