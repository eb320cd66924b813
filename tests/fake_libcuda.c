/*
 * fake_libcuda.c - a stand-in for the CUDA driver (built as libcuda.so.1,
 * soname and all), for t-cuda-driver: only cuPointerGetAttribute, answering
 * for address ranges the test names (fake_cuda_set), as the driver answers
 * for device, managed, and unknown (host) memory, or with an error. Never
 * installed, never on a library path: the test dlopens it by its path.
 */
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

enum { FAKE_DEVICE, FAKE_MANAGED, FAKE_ERROR, FAKE_RANGES };

static uintptr_t range_lo[FAKE_RANGES], range_hi[FAKE_RANGES];

/* the test's hook: [p, p + bytes) answers as kind */
void fake_cuda_set(int kind, const void *p, size_t bytes);
void fake_cuda_set(int kind, const void *p, size_t bytes)
{
    range_lo[kind] = (uintptr_t)p;
    range_hi[kind] = (uintptr_t)p + bytes;
}

static int in_range(int kind, CUdeviceptr p)
{
    return (uintptr_t)p >= range_lo[kind] && (uintptr_t)p < range_hi[kind];
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr p)
{
    int device = in_range(FAKE_DEVICE, p), managed = in_range(FAKE_MANAGED, p);

    if (in_range(FAKE_ERROR, p))
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!device && !managed)
        return CUDA_ERROR_INVALID_VALUE; /* memory the driver does not know */
    if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
        *(unsigned int *)data = CU_MEMORYTYPE_DEVICE; /* managed memory too */
        return CUDA_SUCCESS;
    }
    if (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED) {
        *(int *)data = managed; /* 4 bytes: the caller must not read more than it zeroed */
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}
