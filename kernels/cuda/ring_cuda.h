/*
 * ring_cuda.h - the CUDA part of the codec (kernels/cuda/codec.cu) as plain
 * C functions: no CUDA header is needed to call them, and no C file of
 * libringd includes one. When the library is built without CUDA,
 * kernels/cuda_stub.c provides the same functions: ring_cuda_built() and
 * ring_cuda_available() return 0, ring_cuda_is_device_ptr() returns 0 and
 * everything else returns -1. So callers never need #if.
 *
 * The kernels are the codec of kernels/codec.h over device buffers, with
 * the element math of kernels/half.h (the same functions the CPU oracle is
 * made of), so their results are the scalar oracle's bits, except NaN
 * payloads (a GPU's fp32 multiply returns a canonical NaN; see half.h).
 * Same contract as codec.h otherwise: any length including 0, fused_* may
 * run in place (out == in, final == local element for element).
 *
 * Pointers named dev_* are device pointers. `stream` is a cudaStream_t
 * passed as void * (NULL: the legacy default stream). Kernel wrappers are
 * asynchronous like any CUDA launch: they return once the kernel is queued
 * on the stream, and report launch errors only; ring_cuda_stream_sync()
 * waits for them and reports what went wrong on the device.
 *
 * Errors: every int-returning function returns 0 on success and -1 on any
 * failure (no device, no driver, bad pointer, launch failure). Nothing here
 * prints, logs or aborts; the CUDA error is cleared so it does not show up
 * in the caller's own CUDA calls later.
 *
 * Threads: every function may be called from any thread.
 */
#ifndef RING_CUDA_H
#define RING_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this library was built with the CUDA kernels (configure found nvcc). */
int ring_cuda_built(void);

/*
 * 1 when at least one CUDA device can be used: cudaGetDeviceCount succeeded
 * and found one. Any failure (no driver, driver too old for the runtime, no
 * device, CUDA_VISIBLE_DEVICES empty) is 0. Asked once per process and
 * cached; cheap after that. With a device, the first call initialises the
 * driver, and CUDA then cannot be used in children forked afterwards (a
 * CUDA rule): fork first, or let each process ask for itself.
 */
int ring_cuda_available(void);

/*
 * 1 when p is device memory (CU_MEMORYTYPE_DEVICE), which the host cannot
 * read. Host memory, pinned host memory and managed memory are 0 (the host
 * can read them), and so is everything when the query fails. Never
 * initialises CUDA: in a process that has not loaded the driver (libcuda)
 * it is 0 at once, and otherwise one driver call, with no context needed,
 * so any thread may ask.
 */
int ring_cuda_is_device_ptr(const void *p);

/* Blocking copies between host memory and device memory (bytes may be 0). */
int ring_cuda_memcpy_d2h(void *dst, const void *dev_src, size_t bytes);
int ring_cuda_memcpy_h2d(void *dev_dst, const void *src, size_t bytes);

/*
 * GPUDirect RDMA: a dma-buf file descriptor for [dev_ptr, dev_ptr + bytes)
 * of device memory (cuMemGetHandleForAddressRange, reached through
 * cudaGetDriverEntryPointByVersion so the library does not link libcuda),
 * for ibv_reg_dmabuf_mr. The range is widened to the page that holds it:
 * *fd covers [*base, *base + *len), dev_ptr sits at *base + (dev_ptr - *base).
 * -1 without a device, a driver too old, or memory the driver cannot export.
 */
int ring_cuda_dmabuf_fd(const void *dev_ptr, size_t bytes, int *fd, uintptr_t *base,
                        size_t *len);

/* Device memory for tests and callers without CUDA headers: cudaMalloc / cudaFree. */
int ring_cuda_malloc(size_t bytes, void **dev_p);
int ring_cuda_free(void *dev_p);

/* Wait for everything queued on stream; -1 if something on it failed. */
int ring_cuda_stream_sync(void *stream);

/* dst[i] = fp16(src[i] * scale), as codec.h encode_f16 */
int ring_cuda_encode_f16(uint16_t *dev_dst, const float *dev_src, float scale, size_t n,
                         void *stream);
/* dst[i] = fp32(src[i]) * scale */
int ring_cuda_decode_f16(float *dev_dst, const uint16_t *dev_src, float scale, size_t n,
                         void *stream);
int ring_cuda_encode_bf16(uint16_t *dev_dst, const float *dev_src, float scale, size_t n,
                          void *stream);
int ring_cuda_decode_bf16(float *dev_dst, const uint16_t *dev_src, float scale, size_t n,
                          void *stream);

/*
 * The fused reduce-scatter step of codec.h (fused_f16 / fused_bf16), one
 * thread per element through half.h's ring_fused_*_elem:
 *   out[i] = fp16((fp32(in[i]) * in_scale + local[i] * local_scale) * out_scale)
 * and, when dev_final != NULL, final[i] = fp32(out[i]) / out_scale.
 */
int ring_cuda_fused_f16(uint16_t *dev_out, float *dev_final, const uint16_t *dev_in,
                        const float *dev_local, float in_scale, float local_scale,
                        float out_scale, size_t n, void *stream);
int ring_cuda_fused_bf16(uint16_t *dev_out, float *dev_final, const uint16_t *dev_in,
                         const float *dev_local, float in_scale, float local_scale,
                         float out_scale, size_t n, void *stream);

/*
 * max over i of |src[i]| into *max_p (0 for n == 0), as codec.h absmax_f32:
 * NaNs do not count, an inf does; *nonfinite_p (may be NULL) is set to 1
 * when some element is inf or NaN and left alone otherwise. Blocking: it
 * waits for the stream, since the answer is needed on the host.
 */
int ring_cuda_absmax_f32(const float *dev_src, size_t n, float *max_p, int *nonfinite_p,
                         void *stream);

/*
 * absmax of many ranges of one buffer in one launch (the device data path
 * asks for every chunk this peer encodes or reduces at once, when a request
 * begins): for r < nranges, max_out[r] = absmax of dev_src[offs[r] ..
 * offs[r] + lens[r]) as ring_cuda_absmax_f32 computes it, and
 * nonfinite_out[r] = 1 when that range holds an inf or NaN, else 0. offs,
 * lens and the outputs are host arrays. Blocking: it waits for the stream.
 */
int ring_cuda_absmax_ranges(const float *dev_src, const size_t *offs, const size_t *lens,
                            size_t nranges, float *max_out, int *nonfinite_out, void *stream);

/* ---- streams, events and asynchronous copies (kernels/cuda/stream.cu) ----------------
 *
 * The device data path (src/core/device_codec.c) queues its copies and
 * kernels on a stream of its own and tells when they are done with events,
 * so that the host never waits for the whole device. `stream` and `event`
 * are cudaStream_t and cudaEvent_t passed as void *. Streams and events
 * belong to the device that was current when they were made: call
 * ring_cuda_set_device first in any thread that uses them.
 */

/* The ordinal of the device that holds device memory p, or -1 (not device
 * memory, or the query failed). Never initialises CUDA for host memory. */
int ring_cuda_ptr_device(const void *p);

/* Make `device` the calling thread's current device (its primary context). */
int ring_cuda_set_device(int device);

/* A stream that does not wait for the legacy default stream
 * (cudaStreamNonBlocking), on the current device. */
int ring_cuda_stream_create(void **stream_p);
int ring_cuda_stream_destroy(void *stream);

/* An event without timing (cudaEventDisableTiming), on the current device. */
int ring_cuda_event_create(void **event_p);
int ring_cuda_event_destroy(void *event);

/* Capture, in event, the work queued on stream so far. */
int ring_cuda_event_record(void *event, void *stream);

/* Work queued on stream after this call starts only once event's captured
 * work has finished. The device waits, the host does not. */
int ring_cuda_stream_wait_event(void *stream, void *event);

/* 1 when event's captured work has finished (or the event was never
 * recorded), 0 while it has not, -1 when something in it failed. Never
 * blocks. */
int ring_cuda_event_query(void *event);

/* Block the calling thread until event's captured work has finished; -1
 * when something in it failed. */
int ring_cuda_event_sync(void *event);

/* Copies queued on stream, returning at once. Host memory should be
 * page-locked (ring_cuda_host_register): pageable memory makes the copy
 * wait for the host. The host memory must stay untouched until an event
 * recorded after the copy has completed. */
int ring_cuda_memcpy_d2h_async(void *dst, const void *dev_src, size_t bytes, void *stream);
int ring_cuda_memcpy_h2d_async(void *dev_dst, const void *src, size_t bytes, void *stream);
int ring_cuda_memcpy_d2d_async(void *dev_dst, const void *dev_src, size_t bytes, void *stream);

/* Page-lock host memory that is already allocated (cudaHostRegister,
 * portable to every device), so copies to and from it go by DMA and do not
 * wait for the host; unregister before it is freed or moved. */
int ring_cuda_host_register(void *p, size_t bytes);
int ring_cuda_host_unregister(void *p);

#ifdef __cplusplus
}
#endif
#endif /* RING_CUDA_H */
