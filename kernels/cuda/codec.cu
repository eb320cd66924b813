/*
 * codec.cu - the codec of kernels/codec.h on device buffers: fp16 and bf16
 * encode/decode with a scale, the fused reduce-scatter step and absmax,
 * plus the few runtime calls libringd needs (is there a device, is this a
 * device pointer, copies). Exported as C functions only (ring_cuda.h); no
 * CUDA type crosses the boundary, so no C file needs a CUDA header.
 *
 * The element math is kernels/half.h, the header the CPU's scalar oracle
 * is made of: one thread per element (grid-stride), so every result is the
 * oracle's bits except NaN payloads (see half.h). nvcc is run with
 * --fmad=false and half.h uses the _rn intrinsics on the device, so no
 * product and sum is ever fused into an FMA, as on the CPU.
 *
 * The CUDA runtime is linked statically (libcudart_static): a library built
 * with CUDA still loads and runs where there is no driver and no GPU. There
 * every cudaGetDeviceCount failure means "no device", answered once and
 * cached, and nothing else here touches the runtime.
 *
 * Telling device from host pointers (what every allreduce asks) touches
 * neither the runtime nor a driver the process has not loaded: see
 * ring_cuda_is_device_ptr.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "half.h"
#include "ring_cuda.h"

#define CUDA_THREADS 256u      /* threads per block; absmax relies on a multiple of 32 */
#define CUDA_MAX_BLOCKS 65535u /* grid-stride loops cover the rest */

/* i over [0, n) with a grid-stride loop: any n, any grid */
#define CUDA_FOR_EACH(_i, _n)                                                           \
    for (size_t _i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; _i < (_n);          \
         _i += (size_t)gridDim.x * blockDim.x)

/* ---- kernels ------------------------------------------------------------------------ */

__global__ void cuda_encode_f16_kernel(uint16_t *dst, const float *src, float scale, size_t n)
{
    CUDA_FOR_EACH(i, n)
        dst[i] = ring_f32_to_f16(ring_fmul(src[i], scale));
}

__global__ void cuda_decode_f16_kernel(float *dst, const uint16_t *src, float scale, size_t n)
{
    CUDA_FOR_EACH(i, n)
        dst[i] = ring_fmul(ring_f16_to_f32(src[i]), scale);
}

__global__ void cuda_encode_bf16_kernel(uint16_t *dst, const float *src, float scale, size_t n)
{
    CUDA_FOR_EACH(i, n)
        dst[i] = ring_f32_to_bf16(ring_fmul(src[i], scale));
}

__global__ void cuda_decode_bf16_kernel(float *dst, const uint16_t *src, float scale, size_t n)
{
    CUDA_FOR_EACH(i, n)
        dst[i] = ring_fmul(ring_bf16_to_f32(src[i]), scale);
}

/* The fused step, with (FINAL) or without the decoded copy. Both inputs of
 * element i are read before either output of element i is written, so it
 * runs in place (out == in, final == local) as the contract allows. */
template <bool FINAL>
__global__ void cuda_fused_f16_kernel(uint16_t *out, float *final, const uint16_t *in,
                                      const float *local, float in_scale, float local_scale,
                                      float out_scale, size_t n)
{
    CUDA_FOR_EACH(i, n)
    {
        float fin = 0.0f;
        uint16_t o = ring_fused_f16_elem(in[i], local[i], in_scale, local_scale, out_scale,
                                         FINAL ? &fin : NULL);

        out[i] = o;
        if (FINAL)
            final[i] = fin;
    }
}

template <bool FINAL>
__global__ void cuda_fused_bf16_kernel(uint16_t *out, float *final, const uint16_t *in,
                                       const float *local, float in_scale, float local_scale,
                                       float out_scale, size_t n)
{
    CUDA_FOR_EACH(i, n)
    {
        float fin = 0.0f;
        uint16_t o = ring_fused_bf16_elem(in[i], local[i], in_scale, local_scale, out_scale,
                                          FINAL ? &fin : NULL);

        out[i] = o;
        if (FINAL)
            final[i] = fin;
    }
}

/*
 * absmax: each thread folds its elements with ring_absmax_elem (maximum as
 * fp32 bits, exact in any order), the block folds its threads (warp
 * shuffles, then one warp over the warps' results), and one atomic per
 * block folds the blocks into result[0] (max bits) and result[1] (nonfinite).
 * Every thread of the block calls cuda_block_fold: it synchronises.
 */
/* lane 0 gets the warp's fold of (max_bits, nonfinite) */
__device__ void cuda_warp_fold(uint32_t *max_bits, int *nonfinite)
{
    for (unsigned off = 16; off > 0; off >>= 1) {
        uint32_t m = __shfl_down_sync(0xffffffffu, *max_bits, off);
        int f = __shfl_down_sync(0xffffffffu, *nonfinite, off);

        *max_bits = m > *max_bits ? m : *max_bits;
        *nonfinite |= f;
    }
}

__device__ void cuda_block_fold(unsigned int *result, uint32_t max_bits, int nonfinite)
{
    __shared__ unsigned int warp_max[CUDA_THREADS / 32u];
    __shared__ int warp_nonfinite[CUDA_THREADS / 32u];
    unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;

    cuda_warp_fold(&max_bits, &nonfinite);
    if (lane == 0) {
        warp_max[warp] = max_bits;
        warp_nonfinite[warp] = nonfinite;
    }
    __syncthreads();
    if (warp == 0) {
        max_bits = lane < blockDim.x / 32u ? warp_max[lane] : 0u;
        nonfinite = lane < blockDim.x / 32u ? warp_nonfinite[lane] : 0;
        cuda_warp_fold(&max_bits, &nonfinite);
        if (lane == 0) {
            if (max_bits != 0)
                atomicMax(&result[0], max_bits);
            if (nonfinite)
                atomicOr(&result[1], 1u);
        }
    }
    __syncthreads(); /* the shared words are used again by the caller's next range */
}

__global__ void cuda_absmax_kernel(unsigned int *result, const float *src, size_t n)
{
    uint32_t max_bits = 0;
    int nonfinite = 0;

    CUDA_FOR_EACH(i, n)
        ring_absmax_elem(&max_bits, &nonfinite, src[i]);
    cuda_block_fold(result, max_bits, nonfinite);
}

/* absmax of ranges: blockIdx.y picks ranges (grid-stride over them), blockIdx.x
 * strides within one; result[2r], result[2r + 1] are range r's two words */
__global__ void cuda_absmax_ranges_kernel(unsigned int *result, const float *src,
                                          const size_t *offs, const size_t *lens, size_t nranges)
{
    for (size_t r = blockIdx.y; r < nranges; r += gridDim.y) {
        const float *at = src + offs[r];
        uint32_t max_bits = 0;
        int nonfinite = 0;

        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < lens[r];
             i += (size_t)gridDim.x * blockDim.x)
            ring_absmax_elem(&max_bits, &nonfinite, at[i]);
        cuda_block_fold(result + 2 * r, max_bits, nonfinite);
    }
}

/* ---- host side ---------------------------------------------------------------------- */

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static int cuda_devices;

/* Any failure is "no device": no driver, a driver older than the runtime,
 * no GPU, or CUDA_VISIBLE_DEVICES hiding them all. */
static void cuda_probe(void)
{
    int n = 0;

    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 0;
    }
    cuda_devices = n > 0 ? n : 0;
}

/* 0 when the call succeeded; otherwise clear the runtime's last error and return -1. */
static int cuda_result(cudaError_t err)
{
    if (err == cudaSuccess)
        return 0;
    (void)cudaGetLastError();
    return -1;
}

/* After a launch: 0 when it was queued. */
static int cuda_launched(void)
{
    return cuda_result(cudaGetLastError());
}

static unsigned cuda_blocks(size_t n)
{
    size_t blocks = (n + CUDA_THREADS - 1) / CUDA_THREADS;

    return blocks > CUDA_MAX_BLOCKS ? CUDA_MAX_BLOCKS : (unsigned)blocks;
}

extern "C" int ring_cuda_built(void)
{
    return 1;
}

extern "C" int ring_cuda_available(void)
{
    pthread_once(&cuda_once, cuda_probe);
    return cuda_devices > 0;
}

/* cuPointerGetAttributes' signature (cuda.h) */
typedef CUresult (*ring_cu_ptr_attrs_fn)(unsigned int n, CUpointer_attribute *attributes,
                                         void **data, CUdeviceptr p);

/* dl_iterate_phdr's callback: how many objects the process has loaded so far
 * (the same count in every entry, so the first is enough) */
static int loads_so_far(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

/*
 * The driver's cuPointerGetAttributes if the process has loaded libcuda (an
 * application's CUDA, or ours once it allocated), else NULL: a process that
 * never loaded the driver holds no device memory. So host buffers are told
 * apart without initialising CUDA. Asking the runtime first (as before)
 * loaded the driver and opened its devices in every rank of a GPU host,
 * even for CPU-only training (7 /dev/nvidia* descriptors per rank, seen on
 * an H200 host). Found once, then kept (the handle stays open, so the
 * function stays loaded). Every allreduce asks, so "not loaded" is asked
 * again only after the process loaded another library: dlopen(RTLD_NOLOAD)
 * of a name not loaded searches the library path (~22 us here), the load
 * count costs ~25 ns.
 */
static ring_cu_ptr_attrs_fn driver_ptr_attrs(void)
{
    static ring_cu_ptr_attrs_fn found;
    static unsigned long long absent_at = ~0ull; /* the load count when it was not there */
    ring_cu_ptr_attrs_fn fn = __atomic_load_n(&found, __ATOMIC_ACQUIRE);
    unsigned long long loads = 0;
    void *lib;

    if (fn != NULL)
        return fn;
    /* read before the search: a library loaded meanwhile makes the next call look again */
    (void)dl_iterate_phdr(loads_so_far, &loads);
    if (loads == __atomic_load_n(&absent_at, __ATOMIC_ACQUIRE))
        return NULL;
    lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (lib == NULL) {
        __atomic_store_n(&absent_at, loads, __ATOMIC_RELEASE);
        return NULL;
    }
    fn = (ring_cu_ptr_attrs_fn)dlsym(lib, "cuPointerGetAttributes");
    if (fn == NULL) {
        dlclose(lib);
        return NULL;
    }
    __atomic_store_n(&found, fn, __ATOMIC_RELEASE); /* a race stores the same value */
    return fn;
}

/* The runtime's answer: initialises CUDA (the driver, its devices) if it was not. */
static int runtime_is_device_ptr(const void *p)
{
    cudaPointerAttributes attr;

    if (!ring_cuda_available() || cuda_result(cudaPointerGetAttributes(&attr, p)) != 0)
        return 0;
    return attr.type == cudaMemoryTypeDevice;
}

/* The driver answers without a current context (the pointer knows its own, as
 * Open MPI's CUDA support relies on). cuPointerGetAttributes, not the
 * singular cuPointerGetAttribute: for memory it does not know (host memory)
 * it succeeds with zeroed attributes where the other fails with
 * CUDA_ERROR_INVALID_VALUE, which compute-sanitizer reports as an error on
 * every allreduce of a host buffer (83 in t-cuda, seen on an H200). Any
 * error: the runtime decides. */
extern "C" int ring_cuda_is_device_ptr(const void *p)
{
    ring_cu_ptr_attrs_fn attrs;
    unsigned int type = 0;
    unsigned long long managed = 0; /* a bool or an int, by the header's version: room for both */
    CUpointer_attribute which[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *into[2] = {&type, &managed};

    if (p == NULL || (attrs = driver_ptr_attrs()) == NULL)
        return 0;
    if (attrs(2, which, into, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        return runtime_is_device_ptr(p);
    /* managed memory is readable by the host: used in place, as before */
    return type == CU_MEMORYTYPE_DEVICE && managed == 0;
}

/* cuMemGetHandleForAddressRange's signature (cuda.h), called through the entry point */
typedef CUresult (*ring_cu_range_handle_fn)(void *handle, CUdeviceptr dptr, size_t size,
                                            CUmemRangeHandleType type, unsigned long long flags);

extern "C" int ring_cuda_dmabuf_fd(const void *dev_ptr, size_t bytes, int *fd, uintptr_t *base,
                                   size_t *len)
{
    void *fn = NULL;
    cudaDriverEntryPointQueryResult found;
    const uintptr_t page = 65536; /* dma-buf exports whole GPU pages (64 KiB) */
    uintptr_t lo = (uintptr_t)dev_ptr & ~(page - 1);
    uintptr_t hi = ((uintptr_t)dev_ptr + bytes + page - 1) & ~(page - 1);
    int handle = -1;

    if (!ring_cuda_is_device_ptr(dev_ptr))
        return -1;
    if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn, 11070,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || fn == NULL)
        return -1;
    if (((ring_cu_range_handle_fn)fn)(&handle, (CUdeviceptr)lo, hi - lo,
                                      CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) != CUDA_SUCCESS)
        return -1;
    *fd = handle;
    *base = lo;
    *len = hi - lo;
    return 0;
}

extern "C" int ring_cuda_memcpy_d2h(void *dst, const void *dev_src, size_t bytes)
{
    if (!ring_cuda_available())
        return -1;
    if (bytes == 0)
        return 0;
    return cuda_result(cudaMemcpy(dst, dev_src, bytes, cudaMemcpyDeviceToHost));
}

extern "C" int ring_cuda_memcpy_h2d(void *dev_dst, const void *src, size_t bytes)
{
    if (!ring_cuda_available())
        return -1;
    if (bytes == 0)
        return 0;
    return cuda_result(cudaMemcpy(dev_dst, src, bytes, cudaMemcpyHostToDevice));
}

extern "C" int ring_cuda_malloc(size_t bytes, void **dev_p)
{
    void *p = NULL;

    if (dev_p == NULL || !ring_cuda_available())
        return -1;
    if (cuda_result(cudaMalloc(&p, bytes)) != 0)
        return -1;
    *dev_p = p;
    return 0;
}

extern "C" int ring_cuda_free(void *dev_p)
{
    if (!ring_cuda_available())
        return -1;
    return cuda_result(cudaFree(dev_p));
}

extern "C" int ring_cuda_stream_sync(void *stream)
{
    if (!ring_cuda_available())
        return -1;
    return cuda_result(cudaStreamSynchronize((cudaStream_t)stream));
}

/* The four conversions share one shape: check, launch, report the launch. */
#define CUDA_CONVERT_WRAPPER(_name, _kernel, _dst_t, _src_t)                                \
    extern "C" int _name(_dst_t *dev_dst, const _src_t *dev_src, float scale, size_t n,     \
                         void *stream)                                                      \
    {                                                                                       \
        if (!ring_cuda_available())                                                         \
            return -1;                                                                      \
        if (n == 0)                                                                         \
            return 0;                                                                       \
        _kernel<<<cuda_blocks(n), CUDA_THREADS, 0, (cudaStream_t)stream>>>(dev_dst, dev_src, \
                                                                           scale, n);       \
        return cuda_launched();                                                             \
    }

CUDA_CONVERT_WRAPPER(ring_cuda_encode_f16, cuda_encode_f16_kernel, uint16_t, float)
CUDA_CONVERT_WRAPPER(ring_cuda_decode_f16, cuda_decode_f16_kernel, float, uint16_t)
CUDA_CONVERT_WRAPPER(ring_cuda_encode_bf16, cuda_encode_bf16_kernel, uint16_t, float)
CUDA_CONVERT_WRAPPER(ring_cuda_decode_bf16, cuda_decode_bf16_kernel, float, uint16_t)

/* the fused step: with a final fp32 output (the owner's last reduce) or without */
#define CUDA_FUSED_WRAPPER(_name, _kernel)                                                    \
    extern "C" int _name(uint16_t *dev_out, float *dev_final, const uint16_t *dev_in,       \
                         const float *dev_local, float in_scale, float local_scale,         \
                         float out_scale, size_t n, void *stream)                           \
    {                                                                                       \
        cudaStream_t s = (cudaStream_t)stream;                                              \
        if (!ring_cuda_available())                                                         \
            return -1;                                                                      \
        if (n == 0)                                                                         \
            return 0;                                                                       \
        if (dev_final != NULL)                                                              \
            _kernel<true><<<cuda_blocks(n), CUDA_THREADS, 0, s>>>(                          \
                dev_out, dev_final, dev_in, dev_local, in_scale, local_scale, out_scale, n); \
        else                                                                                \
            _kernel<false><<<cuda_blocks(n), CUDA_THREADS, 0, s>>>(                         \
                dev_out, NULL, dev_in, dev_local, in_scale, local_scale, out_scale, n);     \
        return cuda_launched();                                                             \
    }

CUDA_FUSED_WRAPPER(ring_cuda_fused_f16, cuda_fused_f16_kernel)
CUDA_FUSED_WRAPPER(ring_cuda_fused_bf16, cuda_fused_bf16_kernel)

/*
 * The two result words live in stream-ordered device memory (a pool, so no
 * device-wide synchronisation); devices without memory pools fall back to
 * cudaMalloc. The answer is copied back and the stream waited for.
 */
extern "C" int ring_cuda_absmax_f32(const float *dev_src, size_t n, float *max_p, int *nonfinite_p,
                                    void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    unsigned int *dev_result = NULL;
    unsigned int result[2] = {0u, 0u};
    int pooled = 1, rc = -1;

    if (max_p == NULL || !ring_cuda_available())
        return -1;
    if (n == 0) {
        *max_p = 0.0f;
        return 0;
    }
    if (cudaMallocAsync((void **)&dev_result, sizeof result, s) != cudaSuccess) {
        (void)cudaGetLastError();
        pooled = 0;
        if (cuda_result(cudaMalloc((void **)&dev_result, sizeof result)) != 0)
            return -1;
    }
    if (cuda_result(cudaMemsetAsync(dev_result, 0, sizeof result, s)) != 0)
        goto out;
    cuda_absmax_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, s>>>(dev_result, dev_src, n);
    if (cuda_launched() != 0)
        goto out;
    if (cuda_result(cudaMemcpyAsync(result, dev_result, sizeof result, cudaMemcpyDeviceToHost,
                                    s)) != 0)
        goto out;
    rc = 0;
out:
    if (pooled)
        (void)cuda_result(cudaFreeAsync(dev_result, s));
    if (cuda_result(cudaStreamSynchronize(s)) != 0)
        rc = -1;
    if (!pooled)
        (void)cuda_result(cudaFree(dev_result));
    if (rc != 0)
        return -1;
    *max_p = ring_bits_f32(result[0]);
    if (result[1] && nonfinite_p != NULL)
        *nonfinite_p = 1;
    return 0;
}

/*
 * Device memory for the ranges' offsets, lengths and two result words each:
 * one stream-ordered allocation (cudaMalloc where pools are missing).
 */
extern "C" int ring_cuda_absmax_ranges(const float *dev_src, const size_t *offs,
                                       const size_t *lens, size_t nranges, float *max_out,
                                       int *nonfinite_out, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    size_t index_bytes = nranges * sizeof(size_t), result_bytes = 2 * nranges * sizeof(unsigned);
    size_t longest = 0;
    unsigned int *result = NULL;
    char *dev = NULL;
    int pooled = 1, rc = -1;

    if (!ring_cuda_available() || (nranges > 0 && (offs == NULL || lens == NULL ||
                                                   max_out == NULL || nonfinite_out == NULL)))
        return -1;
    if (nranges == 0)
        return 0;
    for (size_t r = 0; r < nranges; r++)
        longest = lens[r] > longest ? lens[r] : longest;
    result = (unsigned int *)malloc(result_bytes);
    if (result == NULL)
        return -1;
    if (cudaMallocAsync((void **)&dev, 2 * index_bytes + result_bytes, s) != cudaSuccess) {
        (void)cudaGetLastError();
        pooled = 0;
        if (cuda_result(cudaMalloc((void **)&dev, 2 * index_bytes + result_bytes)) != 0) {
            free(result);
            return -1;
        }
    }
    if (cuda_result(cudaMemcpyAsync(dev, offs, index_bytes, cudaMemcpyHostToDevice, s)) != 0 ||
        cuda_result(cudaMemcpyAsync(dev + index_bytes, lens, index_bytes, cudaMemcpyHostToDevice,
                                    s)) != 0 ||
        cuda_result(cudaMemsetAsync(dev + 2 * index_bytes, 0, result_bytes, s)) != 0)
        goto out;
    {
        unsigned per_range = cuda_blocks(longest), ranges = nranges > CUDA_MAX_BLOCKS
                                                                ? CUDA_MAX_BLOCKS
                                                                : (unsigned)nranges;
        dim3 grid(per_range > 64u ? 64u : (per_range == 0 ? 1u : per_range), ranges);

        cuda_absmax_ranges_kernel<<<grid, CUDA_THREADS, 0, s>>>(
            (unsigned int *)(dev + 2 * index_bytes), dev_src, (const size_t *)dev,
            (const size_t *)(dev + index_bytes), nranges);
    }
    if (cuda_launched() != 0)
        goto out;
    if (cuda_result(cudaMemcpyAsync(result, dev + 2 * index_bytes, result_bytes,
                                    cudaMemcpyDeviceToHost, s)) != 0)
        goto out;
    rc = 0;
out:
    if (pooled)
        (void)cuda_result(cudaFreeAsync(dev, s));
    if (cuda_result(cudaStreamSynchronize(s)) != 0)
        rc = -1;
    if (!pooled)
        (void)cuda_result(cudaFree(dev));
    for (size_t r = 0; rc == 0 && r < nranges; r++) {
        max_out[r] = ring_bits_f32(result[2 * r]);
        nonfinite_out[r] = result[2 * r + 1] != 0;
    }
    free(result);
    return rc;
}

/* The device that holds p: the runtime's answer, asked only for device memory
 * (ring_cuda_is_device_ptr first, so host memory never initialises CUDA). */
extern "C" int ring_cuda_ptr_device(const void *p)
{
    cudaPointerAttributes attr;

    if (!ring_cuda_is_device_ptr(p) || !ring_cuda_available() ||
        cuda_result(cudaPointerGetAttributes(&attr, p)) != 0)
        return -1;
    return attr.device;
}
