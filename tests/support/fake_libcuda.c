/*
 * fake_libcuda.c - a stand-in for the CUDA driver (built as libcuda.so.1,
 * soname and all), for t-cuda-driver: only cuPointerGetAttributes, answering
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

/* as the driver's: unknown memory succeeds with zeroed attributes */
CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attributes, void **data,
                                CUdeviceptr p)
{
    int device = in_range(FAKE_DEVICE, p), managed = in_range(FAKE_MANAGED, p);

    if (in_range(FAKE_ERROR, p))
        return CUDA_ERROR_NOT_INITIALIZED;
    for (unsigned int i = 0; i < n; i++) {
        if (attributes[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
            *(unsigned int *)data[i] = device || managed ? CU_MEMORYTYPE_DEVICE : 0;
        else if (attributes[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED)
            *(int *)data[i] = managed; /* 4 bytes: the caller must not read more than it zeroed */
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
