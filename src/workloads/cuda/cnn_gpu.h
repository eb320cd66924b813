/*
 * cnn_gpu.h - the GPU path of the fmnist-cnn workload (cuDNN + cuBLAS in
 * cnn_cudnn.cu) as plain C functions: no CUDA type crosses this header, so
 * cnn.c needs no CUDA header and no #if. Built without cuDNN,
 * cnn_gpu_stub.c provides the same functions: no device, and create fails
 * saying why.
 *
 * The model is the CPU path's (cnn.c), on the same flat parameter array
 * whose layout the caller describes in cnn_gpu_layout_t: parameters and
 * gradients live on the device, and are copied from the host's w->params
 * (cnn_gpu_load_params) and back to w->grads (cnn_gpu_backward), since the
 * daemon averages gradients and updates parameters on the host.
 *
 * Errors: 0 on success, -1 with a message in err naming the failed call and
 * the CUDA, cuDNN or cuBLAS error string. Nothing here prints or exits.
 * Every call blocks until the device is done (the copies back synchronise).
 * One cnn_gpu_t is used by one thread at a time. The device is the calling
 * thread's current CUDA device (device 0 unless the process chose another,
 * e.g. through CUDA_VISIBLE_DEVICES). As always with CUDA, a process that
 * has used it cannot use it in children it forks afterwards.
 */
#ifndef RING_CNN_GPU_H
#define RING_CNN_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The network and where each tensor lives in the flat parameter array
 * (offsets in floats). Input 1 x h x w; conv 'same' k x k + ReLU, max-pool
 * 2x2; conv + ReLU, max-pool; dense + ReLU; dense to nclasses logits.
 * Conv weights are [cout][cin][k][k]; dense weights are [out][in]
 * (row-major), biases [out].
 */
typedef struct cnn_gpu_layout {
    int h, w, k;                  /* input image and kernel size */
    int c1, c2, dense, nclasses;  /* widths */
    size_t conv1_w, conv1_b, conv2_w, conv2_b;
    size_t fc1_w, fc1_b, fc2_w, fc2_b;
    size_t nparams;
    int device;                   /* the CUDA device to run on (cudaSetDevice) */
} cnn_gpu_layout_t;

typedef struct cnn_gpu cnn_gpu_t;

/*
 * How many CUDA devices this process can use. ANY failure (no driver, a
 * driver older than the runtime, no device, built without cuDNN) counts as
 * none: 0, with the reason in reason (the CUDA runtime's message, e.g.
 * "CUDA driver version is insufficient for CUDA runtime version").
 */
int cnn_gpu_device_count(char *reason, size_t reasonlen);

/* 1 when this build has the cuDNN path (cnn_cudnn.cu), 0 for the stub. */
int cnn_gpu_built(void);

/* Handles, descriptors and device buffers for batches of up to max_batch. */
int cnn_gpu_create(const cnn_gpu_layout_t *layout, int max_batch, cnn_gpu_t **out, char *err,
                   size_t errlen);

/* Copy the host's parameter array (layout->nparams floats) to the device. */
int cnn_gpu_load_params(cnn_gpu_t *g, const float *params, char *err, size_t errlen);

/*
 * Forward pass of n <= max_batch images x (n x h x w, host) with labels y
 * (host, 0..nclasses-1), at the loaded parameters. *loss_sum gets the SUM of
 * the n cross-entropy losses, *correct the number predicted right. The
 * softmax gradient is kept for cnn_gpu_backward, scaled by grad_scale
 * (1/n: the gradient of the mean loss).
 */
int cnn_gpu_forward(cnn_gpu_t *g, const float *x, const int *y, int n, float grad_scale,
                    double *loss_sum, int *correct, char *err, size_t errlen);

/* Backward pass of the last forward: every gradient, into grads (host). */
int cnn_gpu_backward(cnn_gpu_t *g, float *grads, char *err, size_t errlen);

void cnn_gpu_destroy(cnn_gpu_t *g);

#ifdef __cplusplus
}
#endif

#endif /* RING_CNN_GPU_H */
