/*
 * ring-bench-cuda.c - ring-bench --device cuda[:N]: the allreduce's buffers
 * in GPU memory. The CUDA runtime is opened at run time (dlopen of
 * libcudart), so ring-bench builds without CUDA and runs on a GPU host that
 * has only a runtime: the toolkit's, or pip's nvidia-cuda-runtime on
 * LD_LIBRARY_PATH. Values are made and checked on the host, as without
 * --device, and copied to and from the device outside the timed calls.
 */
#include "ring_build.h"

#include <dlfcn.h>
#include <stdio.h>

#include "ring-bench.h"

/* the runtime's entry points, by their C signatures (cudaError_t is an int enum) */
static struct {
    int (*set_device)(int device);
    int (*malloc_)(void **p, size_t bytes);
    int (*free_)(void *p);
    int (*memcpy_)(void *dst, const void *src, size_t bytes, int kind);
    const char *(*error_string)(int err);
} cuda;

enum { CUDA_H2D = 1, CUDA_D2H = 2 }; /* cudaMemcpyKind */

int bench_cuda_open(int device, char *why, size_t len)
{
    static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                        "libcudart.so.11.0"};
    void *lib = NULL;
    int err;

    for (size_t i = 0; lib == NULL && i < sizeof(names) / sizeof(names[0]); i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(why, len, "--device cuda: no CUDA runtime (libcudart.so) on the library path; "
                 "add the toolkit's lib64 or pip's nvidia/cuda_runtime/lib to LD_LIBRARY_PATH");
        return -1;
    }
    *(void **)&cuda.set_device = dlsym(lib, "cudaSetDevice");
    *(void **)&cuda.malloc_ = dlsym(lib, "cudaMalloc");
    *(void **)&cuda.free_ = dlsym(lib, "cudaFree");
    *(void **)&cuda.memcpy_ = dlsym(lib, "cudaMemcpy");
    *(void **)&cuda.error_string = dlsym(lib, "cudaGetErrorString");
    if (cuda.set_device == NULL || cuda.malloc_ == NULL || cuda.free_ == NULL ||
        cuda.memcpy_ == NULL || cuda.error_string == NULL) {
        snprintf(why, len, "--device cuda: the CUDA runtime found lacks cudaMalloc and friends");
        return -1;
    }
    if ((err = cuda.set_device(device)) != 0) {
        snprintf(why, len, "--device cuda:%d: %s", device, cuda.error_string(err));
        return -1;
    }
    return 0;
}

void *bench_cuda_alloc(size_t bytes, char *why, size_t len)
{
    void *p = NULL;
    int err = cuda.malloc_(&p, bytes);

    if (err != 0) {
        snprintf(why, len, "--device cuda: cudaMalloc of %zu bytes: %s", bytes,
                 cuda.error_string(err));
        return NULL;
    }
    return p;
}

int bench_cuda_put(void *dev, const void *host, size_t bytes)
{
    return cuda.memcpy_(dev, host, bytes, CUDA_H2D) == 0 ? 0 : -1;
}

int bench_cuda_get(void *host, const void *dev, size_t bytes)
{
    return cuda.memcpy_(host, dev, bytes, CUDA_D2H) == 0 ? 0 : -1;
}

void bench_cuda_free(void *dev)
{
    if (dev != NULL && cuda.free_ != NULL)
        (void)cuda.free_(dev);
}
