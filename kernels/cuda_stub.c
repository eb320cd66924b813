/*
 * cuda_stub.c - ring_cuda.h when libringd is built without CUDA (configure
 * did not find nvcc, or --without-cuda): there is never a device, so no
 * pointer is a device pointer and every device operation fails. The rest of
 * the library calls these functions unconditionally and needs no #if.
 */
#include "ring_build.h"

#include "cuda/ring_cuda.h"

int ring_cuda_built(void)
{
    return 0;
}

int ring_cuda_available(void)
{
    return 0;
}

int ring_cuda_is_device_ptr(const void *p)
{
    return 0;
}

int ring_cuda_memcpy_d2h(void *dst, const void *dev_src, size_t bytes)
{
    return -1;
}

int ring_cuda_dmabuf_fd(const void *dev_ptr, size_t bytes, int *fd, uintptr_t *base,
                        size_t *len)
{
    return -1;
}

int ring_cuda_memcpy_h2d(void *dev_dst, const void *src, size_t bytes)
{
    return -1;
}

int ring_cuda_malloc(size_t bytes, void **dev_p)
{
    return -1;
}

int ring_cuda_free(void *dev_p)
{
    return -1;
}

int ring_cuda_stream_sync(void *stream)
{
    return -1;
}

int ring_cuda_encode_f16(uint16_t *dev_dst, const float *dev_src, float scale, size_t n,
                         void *stream)
{
    return -1;
}

int ring_cuda_decode_f16(float *dev_dst, const uint16_t *dev_src, float scale, size_t n,
                         void *stream)
{
    return -1;
}

int ring_cuda_encode_bf16(uint16_t *dev_dst, const float *dev_src, float scale, size_t n,
                          void *stream)
{
    return -1;
}

int ring_cuda_decode_bf16(float *dev_dst, const uint16_t *dev_src, float scale, size_t n,
                          void *stream)
{
    return -1;
}

int ring_cuda_fused_f16(uint16_t *dev_out, float *dev_final, const uint16_t *dev_in,
                        const float *dev_local, float in_scale, float local_scale,
                        float out_scale, size_t n, void *stream)
{
    return -1;
}

int ring_cuda_fused_bf16(uint16_t *dev_out, float *dev_final, const uint16_t *dev_in,
                         const float *dev_local, float in_scale, float local_scale,
                         float out_scale, size_t n, void *stream)
{
    return -1;
}

int ring_cuda_absmax_f32(const float *dev_src, size_t n, float *max_p, int *nonfinite_p,
                         void *stream)
{
    return -1;
}

int ring_cuda_absmax_ranges(const float *dev_src, const size_t *offs, const size_t *lens,
                            size_t nranges, float *max_out, int *nonfinite_out, void *stream)
{
    return -1;
}

/* ---- streams, events and asynchronous copies: there is no device ---- */

int ring_cuda_ptr_device(const void *p)
{
    return -1;
}

int ring_cuda_set_device(int device)
{
    return -1;
}

int ring_cuda_stream_create(void **stream_p)
{
    return -1;
}

int ring_cuda_stream_destroy(void *stream)
{
    return -1;
}

int ring_cuda_event_create(void **event_p)
{
    return -1;
}

int ring_cuda_event_destroy(void *event)
{
    return -1;
}

int ring_cuda_event_record(void *event, void *stream)
{
    return -1;
}

int ring_cuda_stream_wait_event(void *stream, void *event)
{
    return -1;
}

int ring_cuda_event_query(void *event)
{
    return -1;
}

int ring_cuda_event_sync(void *event)
{
    return -1;
}

int ring_cuda_memcpy_d2h_async(void *dst, const void *dev_src, size_t bytes, void *stream)
{
    return -1;
}

int ring_cuda_memcpy_h2d_async(void *dev_dst, const void *src, size_t bytes, void *stream)
{
    return -1;
}

int ring_cuda_memcpy_d2d_async(void *dev_dst, const void *dev_src, size_t bytes, void *stream)
{
    return -1;
}

int ring_cuda_host_register(void *p, size_t bytes)
{
    return -1;
}

int ring_cuda_host_unregister(void *p)
{
    return -1;
}
