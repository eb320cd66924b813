/*
 * collectives.c - broadcast, allgather, reduce-scatter and barrier: requests
 * of the same engine as allreduce (allreduce.c), over the same frames, each
 * a part of the ring schedule (schedule.h says which). What is theirs lives
 * here: checking the call, laying each rank's block out as the schedule's
 * segments, and the few buffers they need (coll_plan.c); here, the
 * calls users make: checking them and queueing the request.
 *
 *  - broadcast and allgather move bytes (dtype RING_DTYPE_BYTES), never
 *    encoded, so they are bit-exact whatever --codec says;
 *  - allgather copies this peer's block into place first (unless it is
 *    there already), then runs the allgather half of the ring;
 *  - reduce-scatter runs the reduce-scatter half into the communicator's
 *    scratch (the partial sums are forwarded from there) and copies this
 *    peer's block out at the end;
 *  - barrier is an allgather of one byte per rank: a peer's byte reaches
 *    every other only through all of them.
 */
#include "ring_build.h"

#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "comm_int.h"
#include "cuda/ring_cuda.h"
#include "progress_thread.h"
#include "requests.h"

/* ---- the public calls ------------------------------------------------------ */

static ring_status_t host_only(const char *what, const void *a, const void *b)
{
    if ((a != NULL && ring_cuda_is_device_ptr(a)) || (b != NULL && ring_cuda_is_device_ptr(b)))
        return ring_error_set(RING_ERR_UNSUPPORTED, "%s: CUDA device buffers are not supported "
                              "(only allreduce stages them); copy to host memory first", what);
    return RING_OK;
}

/* Queue tmpl's call; the blocks of allgather and reduce-scatter are sizes[r] elements
 * for rank r, or `each` for every rank when sizes is NULL. */
static ring_status_t coll_start(ring_comm_t *comm, ring_request_t *tmpl, const size_t *sizes,
                                size_t each, ring_request_t **req_p)
{
    ring_request_t *req;
    ring_status_t status;

    ring_comm_lock(comm);
    status = ring_request_next(comm, &req);
    if (status != RING_OK) {
        ring_comm_unlock(comm);
        return status;
    }
    {
        size_t *offsets = req->offsets;

        *req = *tmpl;
        req->offsets = offsets;
        offsets[0] = 0;
        for (int r = 0; r < comm->size; r++)
            offsets[r + 1] = offsets[r] + (sizes != NULL ? sizes[r] : each);
        if (tmpl->coll != RING_COLL_BROADCAST)
            req->count = offsets[comm->size];
    }
    status = ring_request_push(comm, req, req_p);
    ring_comm_unlock(comm);
    return status;
}

static ring_status_t check_comm(const char *what, ring_comm_t *comm, ring_request_t **req_p)
{
    if (comm == NULL || req_p == NULL)
        return ring_error_set(RING_ERR_INVALID, "%s: comm and req_p must not be NULL", what);
    return RING_OK;
}

ring_status_t ring_broadcast_start(ring_comm_t *comm, void *buf, size_t bytes, int root,
                                   uint32_t tensor_id, ring_request_t **req_p)
{
    RING_CHECK(check_comm("ring_broadcast_start", comm, req_p));
    if (bytes > 0 && buf == NULL)
        return ring_error_set(RING_ERR_INVALID, "broadcast of %zu bytes with a NULL buffer", bytes);
    if (root < 0 || root >= comm->size)
        return ring_error_set(RING_ERR_INVALID, "broadcast: root %d is not a rank of this ring "
                              "(0..%d)", root, comm->size - 1);
    RING_CHECK(host_only("broadcast", buf, NULL));
    return coll_start(comm, &(ring_request_t){.coll = RING_COLL_BROADCAST, .sendbuf = buf,
                                              .recvbuf = buf, .count = bytes, .root = root,
                                              .dtype = RING_DTYPE_BYTES, .exact = 1,
                                              .tensor_id = tensor_id},
                      NULL, 0, req_p);
}

ring_status_t ring_allgatherv_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    const size_t *bytes, uint32_t tensor_id,
                                    ring_request_t **req_p)
{
    size_t total = 0;

    RING_CHECK(check_comm("ring_allgatherv_start", comm, req_p));
    if (bytes == NULL)
        return ring_error_set(RING_ERR_INVALID, "allgather: the sizes per rank must not be NULL");
    for (int r = 0; r < comm->size; r++)
        total += bytes[r];
    if ((total > 0 && recvbuf == NULL) || (bytes[comm->rank] > 0 && sendbuf == NULL))
        return ring_error_set(RING_ERR_INVALID, "allgather of %zu bytes with a NULL buffer", total);
    RING_CHECK(host_only("allgather", sendbuf, recvbuf));
    return coll_start(comm, &(ring_request_t){.coll = RING_COLL_ALLGATHER, .sendbuf = sendbuf,
                                              .recvbuf = recvbuf, .dtype = RING_DTYPE_BYTES,
                                              .exact = 1, .tensor_id = tensor_id},
                      bytes, 0, req_p);
}

ring_status_t ring_allgather_start_flagged(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                           size_t bytes, uint32_t tensor_id, int nonfinite,
                                           ring_request_t **req_p)
{
    RING_CHECK(check_comm("ring_allgather_start", comm, req_p));
    if (bytes > 0 && (sendbuf == NULL || recvbuf == NULL))
        return ring_error_set(RING_ERR_INVALID, "allgather of %zu bytes with a NULL buffer", bytes);
    RING_CHECK(host_only("allgather", sendbuf, recvbuf));
    return coll_start(comm, &(ring_request_t){.coll = RING_COLL_ALLGATHER, .sendbuf = sendbuf,
                                              .recvbuf = recvbuf, .dtype = RING_DTYPE_BYTES,
                                              .exact = 1, .tensor_id = tensor_id,
                                              .nonfinite = nonfinite != 0},
                      NULL, bytes, req_p);
}

ring_status_t ring_allgather_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t bytes, uint32_t tensor_id, ring_request_t **req_p)
{
    return ring_allgather_start_flagged(comm, sendbuf, recvbuf, bytes, tensor_id, 0, req_p);
}

ring_status_t ring_reduce_scatter_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t count, ring_dtype_t dtype, ring_op_t op,
                                        uint32_t tensor_id, unsigned flags,
                                        ring_request_t **req_p)
{
    RING_CHECK(check_comm("ring_reduce_scatter_start", comm, req_p));
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        return ring_error_set(RING_ERR_INVALID, "reduce-scatter of %zu elements with a NULL "
                              "buffer", count);
    if ((unsigned)op >= RING_OP_COUNT || (unsigned)dtype >= RING_DTYPE_COUNT ||
        (flags & ~RING_CALL_EXACT) != 0)
        return ring_error_set(RING_ERR_INVALID, "reduce-scatter: unknown op %d, dtype %d or "
                              "flags 0x%x", (int)op, (int)dtype, flags);
    if (count > ((size_t)1 << 40) / (size_t)comm->size)
        return ring_error_set(RING_ERR_INVALID, "reduce-scatter of %zu elements per rank is too "
                              "large", count);
    RING_CHECK(host_only("reduce-scatter", sendbuf, recvbuf));
    /* the offsets count elements here */
    return coll_start(comm, &(ring_request_t){.coll = RING_COLL_REDUCE_SCATTER, .sendbuf = sendbuf,
                                              .recvbuf = recvbuf, .dtype = dtype, .op = op,
                                              .tensor_id = tensor_id,
                                              .exact = (flags & RING_CALL_EXACT) != 0},
                      NULL, count, req_p);
}

ring_status_t ring_barrier_start(ring_comm_t *comm, ring_request_t **req_p)
{
    RING_CHECK(check_comm("ring_barrier_start", comm, req_p));
    /* every barrier may use the same bytes: requests run one after the other */
    return ring_allgather_start(comm, comm->coll.barrier_bytes + comm->rank,
                                comm->coll.barrier_bytes, 1, RING_BARRIER_TENSOR_ID, req_p);
}

ring_status_t ring_coll_rank0_value(ring_comm_t *comm, float *value, uint32_t tensor_id)
{
    float v = comm->rank == 0 ? *value : 0.0f;
    ring_request_t *req;

    RING_CHECK(ring_allreduce_start_flags(comm, &v, &v, 1, RING_FLOAT32, RING_SUM, tensor_id,
                                          RING_CALL_EXACT, &req));
    RING_CHECK(ring_request_wait(req));
    *value = v;
    return RING_OK;
}

/* (the request pointer is read after the start call, never as its sibling argument) */
static ring_status_t wait_started(ring_status_t status, ring_request_t *const *req_p)
{
    return status == RING_OK ? ring_request_wait(*req_p) : status;
}

ring_status_t ring_broadcast(ring_comm_t *comm, void *buf, size_t bytes, int root)
{
    ring_request_t *req = NULL;

    return wait_started(ring_broadcast_start(comm, buf, bytes, root, 0, &req), &req);
}

ring_status_t ring_allgather(ring_comm_t *comm, const void *sendbuf, void *recvbuf, size_t bytes)
{
    ring_request_t *req = NULL;

    return wait_started(ring_allgather_start(comm, sendbuf, recvbuf, bytes, 0, &req), &req);
}

ring_status_t ring_reduce_scatter(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                  size_t count, ring_dtype_t dtype, ring_op_t op)
{
    ring_request_t *req = NULL;

    return wait_started(ring_reduce_scatter_start(comm, sendbuf, recvbuf, count, dtype, op, 0, 0,
                                                  &req), &req);
}

ring_status_t ring_barrier(ring_comm_t *comm)
{
    ring_request_t *req = NULL;

    return wait_started(ring_barrier_start(comm, &req), &req);
}
