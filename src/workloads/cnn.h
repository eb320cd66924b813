/*
 * cnn.h - the fmnist-cnn workload's entry point with a dataset supplied by
 * the caller, so tests can run it on images built in memory.
 *
 * Model (TensorFlow's layers tutorial, "Build a Convolutional Neural
 * Network using Estimators", at smaller default widths):
 *
 *   28x28x1 -> conv 5x5 'same', c1 channels, ReLU -> max-pool 2x2 stride 2
 *           -> conv 5x5 'same', c2 channels, ReLU -> max-pool 2x2 stride 2
 *           -> dense 7*7*c2 -> d, ReLU -> dense d -> 10 logits,
 *   softmax cross-entropy.
 *
 * Widths come from s->conv[0], s->conv[1] and s->dense; 0 means the
 * default 16, 32, 128: 215,370 parameters, ~0.6 ms of one core per
 * training sample. The tutorial's 32, 64, 1024 (set them to get its
 * network) take ~3x the CPU time per sample and have 3.27M parameters, 15x
 * the bytes every step puts through the ring. There is no dropout (the
 * tutorial's 0.4 before the last layer): train_step must be a
 * deterministic function of (params, batch), so that peers and tests can
 * compare gradients bit for bit.
 *
 * Parameter layout (w->params, and w->grads alike), with no padding:
 *   conv1 W [c1][1][5][5], conv1 b [c1],
 *   conv2 W [c2][c1][5][5], conv2 b [c2]   (conv.h),
 *   fc1 W [d][c2*7*7], fc1 b [d],
 *   fc2 W [10][d], fc2 b [10]              (dense.h: W out x in, row-major).
 * fc1's inputs are pool2's output flattened in NCHW order (c, y, x).
 *
 * Initialisation: He normal weights (std sqrt(2 / fan_in)), zero biases,
 * each layer from its own stream of s->seed: the same seed and widths give
 * the same bits in every process.
 *
 * Devices: s->device WL_DEVICE_CPU runs on one BLAS thread (im2col +
 * cblas_sgemm); WL_DEVICE_CUDA runs the same model with cuDNN and cuBLAS
 * (cuda/cnn_gpu.h), parameters and gradients still in the host arrays.
 * Without cuDNN in the build, or without a usable GPU, create fails with
 * "--device cuda: ..." and the reason.
 *
 * w->shape is "fmnist-cnn c16-c32-d128".
 */
#ifndef RING_CNN_H
#define RING_CNN_H

#include <stddef.h>

#include "fmnist.h"
#include "workload.h"

#define CNN_DEFAULT_CONV1 16
#define CNN_DEFAULT_CONV2 32
#define CNN_DEFAULT_DENSE 128

/*
 * Like wl_fmnist_cnn.create, but on the caller's dataset instead of
 * loading s->data_dir. The dataset is borrowed: it must outlive the
 * workload, and destroy does not free it. 0, or -1 with a message in err.
 */
int cnn_create_with_data(const wl_settings_t *s, const fmnist_t *data, workload_t **out,
                         char *err, size_t errlen);

/*
 * The GPU a peer uses among ndev: the one asked for (requested >= 0, which
 * may be out of range: the caller says so), else its local rank modulo the
 * devices (peers of one host spread over its GPUs, as Horovod pins
 * local_rank), else 0.
 */
int cnn_pick_cuda_device(int requested, int local_rank, int ndev);

#endif /* RING_CNN_H */
