/*
 * cnn_gpu_stub.c - cuda/cnn_gpu.h when ringd is built without cuDNN
 * (configure found no CUDA or no cuDNN/cuBLAS, or --without-cudnn): there
 * is never a device, and creating the GPU model fails saying why, so that
 * `--device cuda` is refused with a reason instead of silently training on
 * the CPU.
 */
#include <stdio.h>

#include "cuda/cnn_gpu.h"

#define CNN_GPU_NOT_BUILT "built without cuDNN (configure found no CUDA toolkit with cuDNN and " \
                          "cuBLAS, or was run with --without-cuda or --without-cudnn)"

int cnn_gpu_built(void)
{
    return 0;
}

int cnn_gpu_device_count(char *reason, size_t reasonlen)
{
    if (reasonlen > 0)
        snprintf(reason, reasonlen, "%s", CNN_GPU_NOT_BUILT);
    return 0;
}

int cnn_gpu_create(const cnn_gpu_layout_t *layout, int max_batch, cnn_gpu_t **out, char *err,
                   size_t errlen)
{
    if (errlen > 0)
        snprintf(err, errlen, "%s", CNN_GPU_NOT_BUILT);
    return -1;
}

int cnn_gpu_load_params(cnn_gpu_t *g, const float *params, char *err, size_t errlen)
{
    if (errlen > 0)
        snprintf(err, errlen, "%s", CNN_GPU_NOT_BUILT);
    return -1;
}

int cnn_gpu_forward(cnn_gpu_t *g, const float *x, const int *y, int n, float grad_scale,
                    double *loss_sum, int *correct, char *err, size_t errlen)
{
    if (errlen > 0)
        snprintf(err, errlen, "%s", CNN_GPU_NOT_BUILT);
    return -1;
}

int cnn_gpu_backward(cnn_gpu_t *g, float *grads, char *err, size_t errlen)
{
    if (errlen > 0)
        snprintf(err, errlen, "%s", CNN_GPU_NOT_BUILT);
    return -1;
}

void cnn_gpu_destroy(cnn_gpu_t *g)
{
}
