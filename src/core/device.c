/*
 * device.c - CUDA device buffers behind the allreduce API (device.h has the
 * design): what a communicator keeps for them, the caller's stream, and
 * the staging path. A request with a device buffer that the codec path
 * (device_codec.c) does not take is staged whole: its input is copied to
 * page-locked host memory when it begins, the ring runs on host buffers
 * exactly as for any other allreduce (same wire, same codec, same bits),
 * and the result is copied to the device recvbuf when it finishes.
 *
 * Streams: at start, in the caller's thread, an event is recorded on the
 * caller's stream; every copy and kernel of the request runs on the
 * communicator's own stream after waiting for that event on the device. At
 * the end a done event is recorded there; the waiter's host waits for it,
 * or the waiter's stream does (ring_request_wait_stream).
 *
 * The host staging lives in one buffer owned by the communicator, grown
 * when a larger device request comes: requests run one after the other,
 * and each begins by waiting for the stream (so the previous result has
 * left it). Device in, host out: the input is copied straight into the
 * user's recvbuf and the ring runs in place there.
 *
 * Host buffers never initialise CUDA: ring_cuda_is_device_ptr answers 0
 * without it where the process has not loaded the driver. A failed copy
 * fails the communicator like any other local error (RING_ERR_IO, this
 * rank to blame), so the peers stop too.
 */
#include "ring_build.h"

#include <stdlib.h>

#include "comm_int.h"
#include "cuda/ring_cuda.h"
#include "fail.h"

static size_t dev_request_bytes(const ring_request_t *req)
{
    return req->count * (req->dtype == RING_FLOAT32 ? 4u : 2u);
}

static unsigned dev_slot(const ring_comm_t *comm, const ring_request_t *req)
{
    return (unsigned)(req - comm->requests.slots);
}

static ring_status_t dev_fail(ring_comm_t *comm, const ring_request_t *req, ring_status_t status,
                              const char *what)
{
    return ring_comm_fail(comm, &(ring_fault_t){.status = status, .culprit = comm->rank,
                                                .step = -1},
                          "round %llu (tensor id %u): %s (%zu bytes of a CUDA device buffer "
                          "on rank %d's GPU %d)", (unsigned long long)req->round, req->tensor_id,
                          what, dev_request_bytes(req), comm->rank, comm->dev->device);
}

/* ---- the communicator's device state --------------------------------------- */

static void dev_free(ring_dev_t *dev)
{
    for (int r = 0; r < RING_MAX_REQUESTS; r++) {
        if (dev->in_event[r] != NULL)
            (void)ring_cuda_event_destroy(dev->in_event[r]);
        if (dev->done_event[r] != NULL)
            (void)ring_cuda_event_destroy(dev->done_event[r]);
    }
    if (dev->stream != NULL)
        (void)ring_cuda_stream_destroy(dev->stream);
    if (dev->stage != NULL)
        (void)ring_cuda_host_unregister(dev->stage);
    free(dev->stage);
    free(dev);
}

/* The first device buffer: a stream and the requests' events on its GPU. */
static ring_status_t dev_open(ring_comm_t *comm, int device)
{
    ring_dev_t *dev = calloc(1, sizeof(*dev));
    int bad;

    if (dev == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the CUDA state");
    dev->device = device;
    bad = ring_cuda_set_device(device) != 0 || ring_cuda_stream_create(&dev->stream) != 0;
    for (int r = 0; !bad && r < RING_MAX_REQUESTS; r++)
        bad = ring_cuda_event_create(&dev->in_event[r]) != 0 ||
              ring_cuda_event_create(&dev->done_event[r]) != 0;
    if (bad) {
        dev_free(dev);
        return ring_error_set(RING_ERR_IO, "could not make a CUDA stream and events on GPU %d "
                              "for device buffers", device);
    }
    comm->dev = dev;
    return RING_OK;
}

ring_status_t ring_dev_request_start(ring_comm_t *comm, ring_request_t *req, ring_stream_t stream)
{
    int device, recv_device;

    req->dev = RING_DEV_HOST;
    if (req->count == 0)
        return RING_OK;
    /* is_device_ptr, not ring_cuda_available: host buffers must not initialise CUDA */
    req->dev_send = ring_cuda_is_device_ptr(req->sendbuf);
    req->dev_recv = req->recvbuf == req->sendbuf ? req->dev_send
                                                 : ring_cuda_is_device_ptr(req->recvbuf);
    if (!req->dev_send && !req->dev_recv)
        return RING_OK;
    device = ring_cuda_ptr_device(req->dev_send ? req->sendbuf : req->recvbuf);
    recv_device = req->dev_send && req->dev_recv ? ring_cuda_ptr_device(req->recvbuf) : device;
    if (device < 0 || recv_device < 0)
        return ring_error_set(RING_ERR_IO, "allreduce: CUDA could not say which GPU holds the "
                              "device %s (no usable CUDA runtime or driver?)",
                              device < 0 && req->dev_send ? "sendbuf" : "recvbuf");
    if (recv_device != device)
        return ring_error_set(RING_ERR_INVALID, "allreduce: sendbuf is on GPU %d and recvbuf "
                              "on GPU %d: both must be on the communicator's GPU", device,
                              recv_device);
    if (comm->dev == NULL)
        RING_CHECK(dev_open(comm, device));
    else if (comm->dev->device != device)
        return ring_error_set(RING_ERR_INVALID, "allreduce: a device buffer on GPU %d, but this "
                              "communicator's device buffers are on GPU %d: one GPU per "
                              "communicator (open one per GPU, as with NCCL)", device,
                              comm->dev->device);
    if (ring_cuda_set_device(device) != 0 ||
        ring_cuda_event_record(comm->dev->in_event[dev_slot(comm, req)], stream) != 0)
        return ring_error_set(RING_ERR_IO, "allreduce: could not record an event on the "
                              "caller's CUDA stream (a stream of another GPU than %d?)", device);
    req->dev = RING_DEV_STAGED; /* begin may take the codec path instead */
    return RING_OK;
}

/* A device request begins once the caller's stream has reached the call: its first
 * steps wait for the device (the bounds, the staging copy), and the host must not
 * wait for the caller's work in ring_allreduce_start_stream (which runs the engine
 * when there is no progress thread). Meanwhile the engine polls, never sleeps. */
int ring_dev_begin_ready(ring_comm_t *comm, const ring_request_t *req)
{
    int done;

    if (req->dev == RING_DEV_HOST)
        return 1;
    done = ring_cuda_event_query(comm->dev->in_event[dev_slot(comm, req)]);
    comm->dev->waiting = done == 0;
    return done != 0; /* a failure shows when it begins */
}

/* ---- staging ------------------------------------------------------------------ */

/* The staging buffer, at least `bytes` long and page-locked where possible; its
 * old contents are not kept. The stream was waited for: nothing reads it. */
static void *dev_stage(ring_dev_t *dev, size_t bytes)
{
    if (dev->stage_bytes < bytes) {
        if (dev->stage != NULL)
            (void)ring_cuda_host_unregister(dev->stage);
        free(dev->stage);
        dev->stage = malloc(bytes);
        dev->stage_bytes = dev->stage != NULL ? bytes : 0;
        /* page-locked copies go by DMA; without it (ulimit -l) they still work */
        if (dev->stage != NULL)
            (void)ring_cuda_host_register(dev->stage, bytes);
    }
    return dev->stage;
}

ring_status_t ring_dev_request_begin(ring_comm_t *comm, ring_request_t *req)
{
    ring_dev_t *dev = comm->dev;
    size_t bytes = dev_request_bytes(req);
    void *stage;

    req->dev_recvbuf = NULL;
    if (req->dev == RING_DEV_HOST)
        return RING_OK;
    if (ring_cuda_set_device(dev->device) != 0 ||
        ring_cuda_stream_wait_event(dev->stream, dev->in_event[dev_slot(comm, req)]) != 0)
        return dev_fail(comm, req, RING_ERR_IO, "waiting for the caller's CUDA stream failed");
    if (ring_dev_codec_takes(comm, req)) {
        req->dev = RING_DEV_CODEC; /* allreduce.c calls ring_dev_codec_begin once it is laid out */
        return RING_OK;
    }
    if (!req->dev_recv) {
        /* device in, host out: the user's recvbuf is the staging, in place */
        if (ring_cuda_memcpy_d2h_async(req->recvbuf, req->sendbuf, bytes, dev->stream) != 0 ||
            ring_cuda_stream_sync(dev->stream) != 0)
            return dev_fail(comm, req, RING_ERR_IO, "copying the device sendbuf to the host failed");
        req->sendbuf = req->recvbuf;
        return RING_OK;
    }
    /* the previous request's result may still be leaving the staging */
    if (ring_cuda_stream_sync(dev->stream) != 0)
        return dev_fail(comm, req, RING_ERR_IO, "waiting for the CUDA stream failed");
    stage = dev_stage(dev, bytes);
    if (stage == NULL)
        return dev_fail(comm, req, RING_ERR_NO_MEMORY,
                        "out of host memory for staging a device recvbuf");
    if (req->dev_send) {
        /* device in: its copy is the input, and the ring runs in place on it */
        if (ring_cuda_memcpy_d2h_async(stage, req->sendbuf, bytes, dev->stream) != 0 ||
            ring_cuda_stream_sync(dev->stream) != 0)
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
    ring_dev_t *dev = comm->dev;

    if (req->dev == RING_DEV_HOST)
        return status;
    req->dev_recvbuf = NULL;
    /* a non-finite result is still a result; a failed allreduce leaves recvbuf undefined */
    if (dst != NULL) {
        req->recvbuf = dst;
        if ((status == RING_OK || status == RING_ERR_NONFINITE) &&
            ring_cuda_memcpy_h2d_async(dst, dev->stage, dev_request_bytes(req), dev->stream) != 0)
            status = dev_fail(comm, req, RING_ERR_IO,
                              "copying the result to the device recvbuf failed");
    }
    if (ring_cuda_event_record(dev->done_event[dev_slot(comm, req)], dev->stream) != 0 &&
        (status == RING_OK || status == RING_ERR_NONFINITE))
        status = dev_fail(comm, req, RING_ERR_IO, "recording the result's CUDA event failed");
    return status;
}

ring_status_t ring_dev_request_wait(ring_request_t *req, ring_stream_t stream, int stream_wait)
{
    ring_comm_t *comm = req->comm;
    void *done;

    if (req->dev == RING_DEV_HOST)
        return RING_OK;
    done = comm->dev->done_event[dev_slot(comm, req)];
    if (stream_wait ? ring_cuda_stream_wait_event(stream, done) != 0
                    : ring_cuda_event_sync(done) != 0)
        return ring_error_set(RING_ERR_IO, "round %llu (tensor id %u): %s for the result on GPU "
                              "%d failed", (unsigned long long)req->round, req->tensor_id,
                              stream_wait ? "making the caller's CUDA stream wait"
                                          : "waiting", comm->dev->device);
    return RING_OK;
}

int ring_dev_busy(const ring_comm_t *comm)
{
    return comm->dev != NULL && (comm->dev->pending > 0 || comm->dev->waiting);
}

/* Before the channels' buffers are freed: they may be page-locked. */
void ring_dev_comm_free(ring_comm_t *comm)
{
    if (comm->dev == NULL)
        return;
    (void)ring_cuda_set_device(comm->dev->device);
    (void)ring_cuda_stream_sync(comm->dev->stream); /* nothing may still read or write */
    ring_dev_codec_free(comm);
    dev_free(comm->dev);
    comm->dev = NULL;
}
