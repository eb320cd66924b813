/*
 * compat.h - the collectives besides allreduce, declared weak.
 *
 * The extension is built from the same tree as libringd, but broadcast,
 * allgather, reduce-scatter and barrier arrive in comm.h later than the
 * allreduce. Declared weak (with comm.h's exact prototypes), they resolve
 * to NULL against a libringd without them, and the extension raises
 * ringd.UnsupportedError naming the function instead of failing to load.
 * Redeclaring them once comm.h has them is harmless.
 */
#ifndef RINGPY_COMPAT_H
#define RINGPY_COMPAT_H

#include <ringd/comm.h>

#define RINGPY_WEAK __attribute__((weak))

ring_status_t ring_broadcast_start(ring_comm_t *comm, void *buf, size_t bytes, int root,
                                   uint32_t tensor_id, ring_request_t **req_p) RINGPY_WEAK;
ring_status_t ring_allgather_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t bytes, uint32_t tensor_id,
                                   ring_request_t **req_p) RINGPY_WEAK;
ring_status_t ring_allgatherv_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    const size_t *bytes, uint32_t tensor_id,
                                    ring_request_t **req_p) RINGPY_WEAK;
ring_status_t ring_reduce_scatter_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t count, ring_dtype_t dtype, ring_op_t op,
                                        uint32_t tensor_id, unsigned flags,
                                        ring_request_t **req_p) RINGPY_WEAK;
ring_status_t ring_barrier_start(ring_comm_t *comm, ring_request_t **req_p) RINGPY_WEAK;

#endif /* RINGPY_COMPAT_H */
