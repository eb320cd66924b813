/*
 * stream.cu - the CUDA runtime calls of the device data path (ring_cuda.h):
 * the current device, streams, events, asynchronous copies and page-locked
 * host memory, as C functions on void * handles, so that no C file of
 * libringd needs a CUDA header. Every failure clears the runtime's last
 * error and returns -1, as in codec.cu; nothing here prints or aborts.
 * Without a device (ring_cuda_available() == 0) each call fails at once and
 * never initialises the runtime.
 */
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "ring_cuda.h"

/* 0 when the call succeeded; otherwise clear the runtime's last error and return -1. */
static int stream_result(cudaError_t err)
{
    if (err == cudaSuccess)
        return 0;
    (void)cudaGetLastError();
    return -1;
}

extern "C" int ring_cuda_set_device(int device)
{
    if (!ring_cuda_available() || device < 0)
        return -1;
    return stream_result(cudaSetDevice(device));
}

extern "C" int ring_cuda_stream_create(void **stream_p)
{
    cudaStream_t s = NULL;

    if (stream_p == NULL || !ring_cuda_available())
        return -1;
    if (stream_result(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != 0)
        return -1;
    *stream_p = (void *)s;
    return 0;
}

extern "C" int ring_cuda_stream_destroy(void *stream)
{
    if (stream == NULL || !ring_cuda_available())
        return -1;
    return stream_result(cudaStreamDestroy((cudaStream_t)stream));
}

extern "C" int ring_cuda_event_create(void **event_p)
{
    cudaEvent_t e = NULL;

    if (event_p == NULL || !ring_cuda_available())
        return -1;
    if (stream_result(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)) != 0)
        return -1;
    *event_p = (void *)e;
    return 0;
}

extern "C" int ring_cuda_event_destroy(void *event)
{
    if (event == NULL || !ring_cuda_available())
        return -1;
    return stream_result(cudaEventDestroy((cudaEvent_t)event));
}

extern "C" int ring_cuda_event_record(void *event, void *stream)
{
    if (event == NULL || !ring_cuda_available())
        return -1;
    return stream_result(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
}

extern "C" int ring_cuda_stream_wait_event(void *stream, void *event)
{
    if (event == NULL || !ring_cuda_available())
        return -1;
    return stream_result(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0));
}

extern "C" int ring_cuda_event_query(void *event)
{
    cudaError_t err;

    if (event == NULL || !ring_cuda_available())
        return -1;
    err = cudaEventQuery((cudaEvent_t)event);
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* not an error: not finished yet */
        return 0;
    }
    return stream_result(err) == 0 ? 1 : -1;
}

extern "C" int ring_cuda_event_sync(void *event)
{
    if (event == NULL || !ring_cuda_available())
        return -1;
    return stream_result(cudaEventSynchronize((cudaEvent_t)event));
}

static int stream_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                       void *stream)
{
    if (!ring_cuda_available())
        return -1;
    if (bytes == 0)
        return 0;
    return stream_result(cudaMemcpyAsync(dst, src, bytes, kind, (cudaStream_t)stream));
}

extern "C" int ring_cuda_memcpy_d2h_async(void *dst, const void *dev_src, size_t bytes,
                                          void *stream)
{
    return stream_copy(dst, dev_src, bytes, cudaMemcpyDeviceToHost, stream);
}

extern "C" int ring_cuda_memcpy_h2d_async(void *dev_dst, const void *src, size_t bytes,
                                          void *stream)
{
    return stream_copy(dev_dst, src, bytes, cudaMemcpyHostToDevice, stream);
}

extern "C" int ring_cuda_memcpy_d2d_async(void *dev_dst, const void *dev_src, size_t bytes,
                                          void *stream)
{
    return stream_copy(dev_dst, dev_src, bytes, cudaMemcpyDeviceToDevice, stream);
}

extern "C" int ring_cuda_host_register(void *p, size_t bytes)
{
    if (p == NULL || bytes == 0 || !ring_cuda_available())
        return -1;
    return stream_result(cudaHostRegister(p, bytes, cudaHostRegisterPortable));
}

extern "C" int ring_cuda_host_unregister(void *p)
{
    if (p == NULL || !ring_cuda_available())
        return -1;
    return stream_result(cudaHostUnregister(p));
}
