/*
 * device.c - allreduce of CUDA device buffers behind the same API: the
 * staging path. When sendbuf or recvbuf is device memory, the request's
 * input is copied to host memory when it begins, the ring runs on host
 * buffers exactly as for any other allreduce (same wire, same codec, same
 * bits), and the result is copied to the device recvbuf when it finishes.
 * Direct device kernels (kernels/cuda/codec.cu encoding and reducing on
 * the GPU, so that only the wire bytes cross PCIe) would be the next step;
 * the kernels exist, the engine does not drive them yet.
 *
 * The host copy lives in one buffer owned by the communicator, grown when
 * a larger device request comes and freed at close: requests run one
 * after the other, so one is enough. Host memory on either side is used as
 * it is (device in, host out: the input is copied straight into the user's
 * recvbuf and the ring runs in place there).
 *
 * Host buffers never initialise CUDA: ring_cuda_is_device_ptr answers 0
 * without it where the process has not loaded the driver (and the stub
 * always does). Copies are blocking cudaMemcpy on
 * pageable memory; a failed copy fails the communicator like any other
 * local error (RING_ERR_IO, this rank to blame), so the peers stop too.
 */
#include "ring_build.h"

#include <stdlib.h>

#include "comm_int.h"
#include "cuda/ring_cuda.h"

static size_t dev_request_bytes(const ring_request_t *req)
{
    return req->count * (req->dtype == RING_FLOAT32 ? 4u : 2u);
}

static ring_status_t dev_fail(ring_comm_t *comm, const ring_request_t *req, ring_status_t status,
                              const char *what)
{
    return ring_comm_fail(comm, &(ring_fault_t){.status = status, .culprit = comm->rank,
                                                .step = -1},
                          "round %llu (tensor id %u): %s (%zu bytes of a CUDA device buffer)",
                          (unsigned long long)req->round, req->tensor_id, what,
                          dev_request_bytes(req));
}

/* The staging buffer, at least `bytes` long; its old contents are not kept. */
static void *dev_stage(ring_comm_t *comm, size_t bytes)
{
    if (comm->dev_stage_bytes < bytes) {
        free(comm->dev_stage);
        comm->dev_stage = malloc(bytes);
        comm->dev_stage_bytes = comm->dev_stage != NULL ? bytes : 0;
    }
    return comm->dev_stage;
}

ring_status_t ring_dev_request_begin(ring_comm_t *comm, ring_request_t *req)
{
    size_t bytes = dev_request_bytes(req);
    int send_dev, recv_dev;
    void *stage;

    req->dev_recvbuf = NULL;
    /* is_device_ptr, not ring_cuda_available: host buffers must not initialise CUDA */
    if (req->count == 0)
        return RING_OK;
    send_dev = ring_cuda_is_device_ptr(req->sendbuf);
    recv_dev = req->recvbuf == req->sendbuf ? send_dev : ring_cuda_is_device_ptr(req->recvbuf);
    if (!send_dev && !recv_dev)
        return RING_OK;
    if (!recv_dev) {
        /* device in, host out: the user's recvbuf is the staging, in place */
        if (ring_cuda_memcpy_d2h(req->recvbuf, req->sendbuf, bytes) != 0)
            return dev_fail(comm, req, RING_ERR_IO, "copying the device sendbuf to the host failed");
        req->sendbuf = req->recvbuf;
        return RING_OK;
    }
    stage = dev_stage(comm, bytes);
    if (stage == NULL)
        return dev_fail(comm, req, RING_ERR_NO_MEMORY,
                        "out of host memory for staging a device recvbuf");
    if (send_dev) {
        /* device in: its copy is the input, and the ring runs in place on it */
        if (ring_cuda_memcpy_d2h(stage, req->sendbuf, bytes) != 0)
            return dev_fail(comm, req, RING_ERR_IO, "copying the device sendbuf to the host failed");
        req->sendbuf = stage;
    }
    req->dev_recvbuf = req->recvbuf;
    req->recvbuf = stage;
    return RING_OK;
}

ring_status_t ring_dev_request_finish(ring_comm_t *comm, ring_request_t *req, ring_status_t status)
{
    void *dst = req->dev_recvbuf;

    if (dst == NULL)
        return status;
    req->dev_recvbuf = NULL;
    req->recvbuf = dst;
    /* a non-finite result is still a result; a failed allreduce leaves recvbuf undefined */
    if (status != RING_OK && status != RING_ERR_NONFINITE)
        return status;
    if (ring_cuda_memcpy_h2d(dst, comm->dev_stage, dev_request_bytes(req)) != 0)
        return dev_fail(comm, req, RING_ERR_IO, "copying the result to the device recvbuf failed");
    return status;
}

void ring_dev_comm_free(ring_comm_t *comm)
{
    free(comm->dev_stage);
    comm->dev_stage = NULL;
    comm->dev_stage_bytes = 0;
}
