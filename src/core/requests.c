/*
 * requests.c - what a user does with an open communicator: ask about it,
 * register buffers, and queue allreduce requests for the engine
 * (allreduce.c), then test or wait for them. The diagnostics (autotune,
 * the doctor) use these calls too; opening and closing is comm_open.c.
 */
#include "ring_build.h"

#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "comm_int.h"
#include "log.h"
#include "progress_thread.h"
#include "requests.h"
#include "timeline.h"

int ring_comm_rank(const ring_comm_t *comm)
{
    return comm->rank;
}

int ring_comm_size(const ring_comm_t *comm)
{
    return comm->size;
}

const char *ring_comm_transport(const ring_comm_t *comm)
{
    return comm->tp_ops->name;
}

const char *ring_comm_ring_order(const ring_comm_t *comm)
{
    return comm->topo.order_desc;
}

const char *ring_comm_autotune_report(const ring_comm_t *comm)
{
    return comm->tune.desc;
}

ring_status_t ring_comm_register(ring_comm_t *comm, void *buf, size_t bytes)
{
    if (comm == NULL || buf == NULL || bytes == 0)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_register: a communicator, a buffer "
                              "and a size are needed");
    return comm->tp == NULL ? RING_OK : comm->tp_ops->reg_mem(comm->tp, buf, bytes);
}

ring_status_t ring_comm_deregister(ring_comm_t *comm, void *buf)
{
    if (comm == NULL || buf == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_deregister: a communicator and a "
                              "buffer are needed");
    return comm->tp == NULL ? RING_OK : comm->tp_ops->dereg_mem(comm->tp, buf);
}

ring_status_t ring_allreduce_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, ring_dtype_t dtype, ring_op_t op,
                                   uint32_t tensor_id, ring_request_t **req_p)
{
    return ring_allreduce_start_flags(comm, sendbuf, recvbuf, count, dtype, op, tensor_id, 0,
                                      req_p);
}

ring_status_t ring_request_next(ring_comm_t *comm, ring_request_t **slot_p)
{
    ring_request_t *req;
    size_t *offsets;

    if (comm->fail.error != RING_OK)
        return ring_error_copy(comm->fail.error, comm->fail.error_msg);
    if (comm->requests.count == RING_MAX_REQUESTS)
        return ring_error_set(RING_ERR_NO_RESOURCE, "%d requests already started and not "
                              "waited for", RING_MAX_REQUESTS);
    req = &comm->requests.slots[(comm->requests.head + comm->requests.count) % RING_MAX_REQUESTS];
    offsets = req->offsets; /* the slot's own table (collectives.c) */
    memset(req, 0, sizeof(*req));
    req->offsets = offsets;
    *slot_p = req;
    return RING_OK;
}

ring_status_t ring_request_push(ring_comm_t *comm, ring_request_t *req, ring_request_t **req_p)
{
    req->comm = comm;
    req->round = comm->requests.next_round++;
    req->in_use = 1;
    comm->requests.count++;
    if (comm->progress != NULL)
        ring_progress_kick(comm);
    else
        (void)ring_comm_progress(comm);
    *req_p = req;
    return RING_OK;
}

ring_status_t ring_allreduce_start_flags(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         size_t count, ring_dtype_t dtype, ring_op_t op,
                                         uint32_t tensor_id, unsigned flags,
                                         ring_request_t **req_p)
{
    return ring_allreduce_start_stream(comm, sendbuf, recvbuf, count, dtype, op, tensor_id, flags,
                                       NULL, req_p);
}

ring_status_t ring_allreduce_start_stream(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                          size_t count, ring_dtype_t dtype, ring_op_t op,
                                          uint32_t tensor_id, unsigned flags,
                                          ring_stream_t stream, ring_request_t **req_p)
{
    ring_request_t *req;
    ring_status_t status;

    if (comm == NULL || req_p == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_allreduce_start: comm and req_p must not "
                              "be NULL");
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        return ring_error_set(RING_ERR_INVALID, "allreduce of %zu elements with a NULL buffer",
                              count);
    if ((unsigned)op >= RING_OP_COUNT)
        return ring_error_set(RING_ERR_INVALID, "allreduce: unknown op %d", (int)op);
    if ((unsigned)dtype >= RING_DTYPE_COUNT)
        return ring_error_set(RING_ERR_INVALID, "allreduce: unknown dtype %d", (int)dtype);
    if ((flags & ~RING_CALL_EXACT) != 0)
        return ring_error_set(RING_ERR_INVALID, "allreduce: unknown flags 0x%x", flags);
    if (count > ((size_t)1 << 40))
        return ring_error_set(RING_ERR_INVALID, "allreduce of %zu elements is too large", count);
    ring_comm_lock(comm);
    status = ring_request_next(comm, &req);
    if (status == RING_OK) {
        req->coll = RING_COLL_ALLREDUCE;
        req->sendbuf = sendbuf;
        req->recvbuf = recvbuf;
        req->count = count;
        req->dtype = dtype;
        req->op = op;
        req->tensor_id = tensor_id;
        req->exact = (flags & RING_CALL_EXACT) != 0;
        /* hook: device.c captures the caller's stream (nothing for host buffers) */
        status = ring_dev_request_start(comm, req, stream);
        if (status == RING_OK)
            status = ring_request_push(comm, req, req_p);
    }
    ring_comm_unlock(comm);
    return status;
}

static ring_status_t request_wait_device(ring_request_t *req, ring_stream_t stream,
                                         int stream_wait);

/* The message for a finished request that failed. */
static ring_status_t request_error(const ring_request_t *req)
{
    if (req->status == RING_ERR_NONFINITE)
        return ring_error_set(RING_ERR_NONFINITE,
                              "round %llu (tensor id %u): the inputs of at least one peer hold "
                              "inf or NaN, or a sum overflowed%s; the result is not finite",
                              (unsigned long long)req->round, req->tensor_id,
                              req->comm->enc.codec == RING_CODEC_FP16 &&
                                      !req->comm->enc.fp16_scaling
                                  ? " (fp16 without scaling overflows above 65504: try "
                                    "--fp16-scaling on)"
                                  : "");
    return ring_error_copy(req->status, req->comm->fail.error_msg);
}

ring_status_t ring_request_test(ring_request_t *req, int *done_p)
{
    ring_status_t status = RING_OK;

    if (req == NULL || done_p == NULL || !req->in_use)
        return ring_error_set(RING_ERR_INVALID, "ring_request_test: not a live request");
    ring_comm_lock(req->comm);
    if (!req->done && req->comm->progress == NULL)
        (void)ring_comm_progress(req->comm);
    *done_p = req->done;
    if (req->done && req->status != RING_OK)
        status = request_error(req);
    ring_comm_unlock(req->comm);
    return status;
}

ring_status_t ring_request_wait(ring_request_t *req)
{
    return request_wait_device(req, NULL, 0);
}

ring_status_t ring_request_wait_stream(ring_request_t *req, ring_stream_t stream)
{
    return request_wait_device(req, stream, 1);
}

/* Wait for the ring, then for the device: the host (stream_wait 0) or `stream` (1). */
static ring_status_t request_wait_device(ring_request_t *req, ring_stream_t stream,
                                         int stream_wait)
{
    ring_comm_t *comm;
    ring_status_t status, dev_status = RING_OK;

    if (req == NULL || !req->in_use)
        return ring_error_set(RING_ERR_INVALID, "ring_request_wait: not a live request");
    comm = req->comm;
    ring_comm_lock(comm);
    /* the progress thread drives it; else earlier requests run first, and
     * waiting on this one drives them too */
    if (ring_progress_wait(comm, req) == 0)
        status = req->status;
    else
        status = ring_comm_wait_until(comm, req);
    req->in_use = 0;
    /* release finished requests from the head, in order */
    while (comm->requests.count > 0 && !comm->requests.slots[comm->requests.head].in_use) {
        comm->requests.head = (comm->requests.head + 1) % RING_MAX_REQUESTS;
        comm->requests.count--;
    }
    /* hook: device.c: the host, or the caller's stream, waits for the device's result */
    if (status == RING_OK || status == RING_ERR_NONFINITE)
        dev_status = ring_dev_request_wait(req, stream, stream_wait);
    if (status != RING_OK)
        status = request_error(req);
    ring_comm_unlock(comm);
    return status != RING_OK ? status : dev_status;
}

ring_status_t ring_allreduce(ring_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             ring_dtype_t dtype, ring_op_t op)
{
    ring_request_t *req;

    RING_CHECK(ring_allreduce_start(comm, sendbuf, recvbuf, count, dtype, op, 0, &req));
    return ring_request_wait(req);
}

ring_status_t ring_comm_get_stats(const ring_comm_t *comm, ring_comm_stats_t *stats_p)
{
    if (comm == NULL || stats_p == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_get_stats: NULL argument");
    ring_comm_lock((ring_comm_t *)comm);
    *stats_p = comm->stats;
    ring_comm_unlock((ring_comm_t *)comm);
    return RING_OK;
}

const char *ring_version(void)
{
    return PACKAGE_VERSION;
}
