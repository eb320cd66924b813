/*
 * cnn_cudnn.cu - the fmnist-cnn model on a GPU: cuDNN for convolutions,
 * pooling, ReLU and the log-softmax, cuBLAS for the dense layers, one
 * small kernel for the cross-entropy. Exported as the C functions of
 * cnn_gpu.h only.
 *
 * Numbers: convolutions run with CUDNN_FMA_MATH and cuBLAS in its default
 * math mode (FP32, no TF32 tensor cores), so a GPU's gradient matches the CPU
 * path's to FP32 rounding and peers on CPUs and GPUs can train together.
 * Only deterministic cuDNN algorithms are picked: the same batch gives the
 * same gradient, as on the CPU.
 *
 * cuDNN 9 marks these "legacy" descriptor APIs deprecated (warnings only
 * with CUDNN_WARN_DEPRECATED) but still ships them; the graph API would be
 * ten times the code for this model.
 *
 * Every CUDA, cuDNN and cuBLAS call is checked; the first failure returns
 * -1 with "<call>: <library's error string>" in err, and the CUDA error is
 * cleared so later calls do not inherit it. Nothing is printed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "cnn_gpu.h"

/* ---- error checking ------------------------------------------------------------------ */

static int gpu_fail(const char *what, const char *why, char *err, size_t errlen)
{
    if (errlen > 0)
        snprintf(err, errlen, "%s: %s", what, why);
    return -1;
}

static int gpu_cuda(cudaError_t e, const char *what, char *err, size_t errlen)
{
    if (e == cudaSuccess)
        return 0;
    (void)cudaGetLastError(); /* clear it: the next call must not see it */
    return gpu_fail(what, cudaGetErrorString(e), err, errlen);
}

static int gpu_dnn(cudnnStatus_t s, const char *what, char *err, size_t errlen)
{
    return s == CUDNN_STATUS_SUCCESS ? 0 : gpu_fail(what, cudnnGetErrorString(s), err, errlen);
}

static int gpu_blas(cublasStatus_t s, const char *what, char *err, size_t errlen)
{
    return s == CUBLAS_STATUS_SUCCESS ? 0 : gpu_fail(what, cublasGetStatusString(s), err, errlen);
}

/* TRY_DNN(cudnnFoo, (a, b)): call it; on failure return -1 naming cudnnFoo.
 * Every function using these has err and errlen in scope. */
#define TRY_CUDA(_fn, _args)                                                              \
    do {                                                                                  \
        if (gpu_cuda(_fn _args, #_fn, err, errlen))                                       \
            return -1;                                                                    \
    } while (0)
#define TRY_DNN(_fn, _args)                                                               \
    do {                                                                                  \
        if (gpu_dnn(_fn _args, #_fn, err, errlen))                                        \
            return -1;                                                                    \
    } while (0)
#define TRY_BLAS(_fn, _args)                                                              \
    do {                                                                                  \
        if (gpu_blas(_fn _args, #_fn, err, errlen))                                       \
            return -1;                                                                    \
    } while (0)
#define TRY(_call)                                                                        \
    do {                                                                                  \
        if ((_call) != 0)                                                                 \
            return -1;                                                                    \
    } while (0)

/* ---- state --------------------------------------------------------------------------- */

typedef struct gpu_conv {
    int cin, cout, h, w;
    cudnnFilterDescriptor_t wdesc;
    cudnnConvolutionDescriptor_t cdesc;
    cudnnTensorDescriptor_t xdesc, ydesc; /* n x cin x h x w in, n x cout x h x w out */
    cudnnTensorDescriptor_t bdesc;        /* 1 x cout x 1 x 1 */
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
} gpu_conv_t;

/* A dense layer's descriptors: n x out output and its 1 x out bias, for
 * cudnnAddTensor and cudnnConvolutionBackwardBias (as n x out x 1 x 1). */
typedef struct gpu_dense {
    int in, out;
    cudnnTensorDescriptor_t ydesc, bdesc;
} gpu_dense_t;

struct cnn_gpu {
    cnn_gpu_layout_t lay;
    int max_batch;
    int n;                            /* batch the descriptors are set for */
    int last_n;                       /* batch of the last forward (0: none) */
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    cudnnActivationDescriptor_t relu;
    cudnnPoolingDescriptor_t pool;
    gpu_conv_t conv1, conv2;
    cudnnTensorDescriptor_t p2desc;   /* n x c2 x h/4 x w/4: pool2's output */
    gpu_dense_t fc1, fc2;
    void *ws;                         /* convolution workspace */
    size_t ws_bytes;
    void *arena;                      /* every buffer below, one allocation */
    float *params, *grads;
    float *x, *z1, *r1, *p1, *z2, *r2, *p2, *h1, *hr, *logits, *logp, *loss;
    float *dlogits, *dhr, *dh1, *dp2, *dr2, *dz2, *dp1, *dr1, *dz1;
    int *labels, *hit;
    float *host_loss;                 /* max_batch each, for the sums on the host */
    int *host_hit;
};

static const float one = 1.0f, zero = 0.0f;

/* ---- the probe ----------------------------------------------------------------------- */

extern "C" int cnn_gpu_built(void)
{
    return 1;
}

extern "C" int cnn_gpu_device_count(char *reason, size_t reasonlen)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);

    if (e != cudaSuccess) {
        int driver = 0, runtime = 0;

        (void)cudaGetLastError();
        (void)cudaDriverGetVersion(&driver); /* 0: no driver at all */
        (void)cudaRuntimeGetVersion(&runtime);
        if (reasonlen == 0)
            return 0;
        /* the runtime is linked statically, so "insufficient driver" is what a machine
         * without an NVIDIA driver says too: tell the two apart */
        if (e == cudaErrorInsufficientDriver && driver == 0)
            snprintf(reason, reasonlen, "no GPU driver found: the NVIDIA driver (libcuda.so.1) "
                     "is not installed here");
        else if (e == cudaErrorInsufficientDriver)
            snprintf(reason, reasonlen, "the NVIDIA driver supports CUDA %d.%d, older than this "
                     "build's CUDA runtime %d.%d: update the driver", driver / 1000,
                     driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
        else if (e == cudaErrorNoDevice)
            snprintf(reason, reasonlen, "no GPU found: the NVIDIA driver sees no device "
                     "(nvidia-smi lists what it sees; CUDA_VISIBLE_DEVICES may hide them)");
        else
            snprintf(reason, reasonlen, "%s", cudaGetErrorString(e));
        return 0;
    }
    if (count <= 0) {
        if (reasonlen > 0)
            snprintf(reason, reasonlen, "no CUDA device found");
        return 0;
    }
    if (reasonlen > 0)
        reason[0] = '\0';
    return count;
}

/* ---- set-up -------------------------------------------------------------------------- */

static int gpu_conv_init(gpu_conv_t *c, int cin, int cout, int h, int w, int k, char *err,
                         size_t errlen)
{
    c->cin = cin;
    c->cout = cout;
    c->h = h;
    c->w = w;
    TRY_DNN(cudnnCreateFilterDescriptor, (&c->wdesc));
    TRY_DNN(cudnnSetFilter4dDescriptor,
            (c->wdesc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, cout, cin, k, k));
    TRY_DNN(cudnnCreateConvolutionDescriptor, (&c->cdesc));
    /* cross-correlation, as im2col on the CPU: no kernel flip */
    TRY_DNN(cudnnSetConvolution2dDescriptor,
            (c->cdesc, k / 2, k / 2, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    TRY_DNN(cudnnSetConvolutionMathType, (c->cdesc, CUDNN_FMA_MATH));
    TRY_DNN(cudnnCreateTensorDescriptor, (&c->xdesc));
    TRY_DNN(cudnnCreateTensorDescriptor, (&c->ydesc));
    TRY_DNN(cudnnCreateTensorDescriptor, (&c->bdesc));
    TRY_DNN(cudnnSetTensor4dDescriptor,
            (c->bdesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, cout, 1, 1));
    return 0;
}

static int gpu_dense_init(gpu_dense_t *d, int in, int out, char *err, size_t errlen)
{
    d->in = in;
    d->out = out;
    TRY_DNN(cudnnCreateTensorDescriptor, (&d->ydesc));
    TRY_DNN(cudnnCreateTensorDescriptor, (&d->bdesc));
    TRY_DNN(cudnnSetTensor4dDescriptor,
            (d->bdesc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, out, 1, 1));
    return 0;
}

/* The fastest deterministic algorithm of each direction for the current
 * shapes (cuDNN's heuristics, no trial runs), and the workspace they need. */
static int gpu_conv_pick(cnn_gpu_t *g, gpu_conv_t *c, size_t *ws, char *err, size_t errlen)
{
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int nf = 0, nd = 0, nb = 0, i;
    size_t bytes;

    TRY_DNN(cudnnGetConvolutionForwardAlgorithm_v7,
            (g->dnn, c->xdesc, c->wdesc, c->cdesc, c->ydesc, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
             &nf, fwd));
    for (i = 0; i < nf; i++)
        if (fwd[i].status == CUDNN_STATUS_SUCCESS && fwd[i].determinism == CUDNN_DETERMINISTIC)
            break;
    if (i == nf)
        return gpu_fail("cudnnGetConvolutionForwardAlgorithm_v7", "no deterministic algorithm",
                        err, errlen);
    c->fwd = fwd[i].algo;

    TRY_DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7,
            (g->dnn, c->wdesc, c->ydesc, c->cdesc, c->xdesc,
             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, bd));
    for (i = 0; i < nd; i++)
        if (bd[i].status == CUDNN_STATUS_SUCCESS && bd[i].determinism == CUDNN_DETERMINISTIC)
            break;
    if (i == nd)
        return gpu_fail("cudnnGetConvolutionBackwardDataAlgorithm_v7",
                        "no deterministic algorithm", err, errlen);
    c->bwd_data = bd[i].algo;

    TRY_DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7,
            (g->dnn, c->xdesc, c->ydesc, c->cdesc, c->wdesc,
             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nb, bf));
    for (i = 0; i < nb; i++)
        if (bf[i].status == CUDNN_STATUS_SUCCESS && bf[i].determinism == CUDNN_DETERMINISTIC)
            break;
    if (i == nb)
        return gpu_fail("cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                        "no deterministic algorithm", err, errlen);
    c->bwd_filter = bf[i].algo;

    TRY_DNN(cudnnGetConvolutionForwardWorkspaceSize,
            (g->dnn, c->xdesc, c->wdesc, c->cdesc, c->ydesc, c->fwd, &bytes));
    *ws = bytes > *ws ? bytes : *ws;
    TRY_DNN(cudnnGetConvolutionBackwardDataWorkspaceSize,
            (g->dnn, c->wdesc, c->ydesc, c->cdesc, c->xdesc, c->bwd_data, &bytes));
    *ws = bytes > *ws ? bytes : *ws;
    TRY_DNN(cudnnGetConvolutionBackwardFilterWorkspaceSize,
            (g->dnn, c->xdesc, c->ydesc, c->cdesc, c->wdesc, c->bwd_filter, &bytes));
    *ws = bytes > *ws ? bytes : *ws;
    return 0;
}

static int gpu_set4d(cudnnTensorDescriptor_t d, int n, int c, int h, int w, char *err,
                     size_t errlen)
{
    TRY_DNN(cudnnSetTensor4dDescriptor, (d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
    return 0;
}

/* Descriptors and algorithms for batches of n. Called at create with
 * max_batch, then again only when n changes (an evaluation's last, partial
 * batch); the workspace grows then if the new algorithms need more. */
static int gpu_set_batch(cnn_gpu_t *g, int n, char *err, size_t errlen)
{
    const cnn_gpu_layout_t *l = &g->lay;
    size_t ws = 0;

    if (n == g->n)
        return 0;
    g->n = 0; /* until every descriptor below is set */
    TRY(gpu_set4d(g->conv1.xdesc, n, 1, l->h, l->w, err, errlen));
    TRY(gpu_set4d(g->conv1.ydesc, n, l->c1, l->h, l->w, err, errlen));
    TRY(gpu_set4d(g->conv2.xdesc, n, l->c1, l->h / 2, l->w / 2, err, errlen));
    TRY(gpu_set4d(g->conv2.ydesc, n, l->c2, l->h / 2, l->w / 2, err, errlen));
    TRY(gpu_set4d(g->p2desc, n, l->c2, l->h / 4, l->w / 4, err, errlen));
    TRY(gpu_set4d(g->fc1.ydesc, n, l->dense, 1, 1, err, errlen));
    TRY(gpu_set4d(g->fc2.ydesc, n, l->nclasses, 1, 1, err, errlen));
    TRY(gpu_conv_pick(g, &g->conv1, &ws, err, errlen));
    TRY(gpu_conv_pick(g, &g->conv2, &ws, err, errlen));
    if (ws > g->ws_bytes) {
        if (g->ws != NULL)
            TRY_CUDA(cudaFree, (g->ws));
        g->ws = NULL;
        g->ws_bytes = 0;
        TRY_CUDA(cudaMalloc, (&g->ws, ws));
        g->ws_bytes = ws;
    }
    g->n = n;
    return 0;
}

/* Carve the device arena: each buffer 256-byte aligned. With base NULL only
 * counts; returns the bytes needed. */
static size_t gpu_carve(cnn_gpu_t *g, char *base)
{
    const cnn_gpu_layout_t *l = &g->lay;
    const size_t b = (size_t)g->max_batch;
    const size_t a0 = (size_t)l->h * l->w, a1 = a0 * l->c1, q1 = a1 / 4;
    const size_t a2 = (size_t)(l->h / 2) * (l->w / 2) * l->c2;
    const size_t q2 = (size_t)(l->h / 4) * (l->w / 4) * l->c2;
    const size_t d = (size_t)l->dense, k = (size_t)l->nclasses;
    struct {
        void **p;
        size_t bytes;
    } bufs[] = {
        {(void **)&g->params, l->nparams * sizeof(float)},
        {(void **)&g->grads, l->nparams * sizeof(float)},
        {(void **)&g->x, b * a0 * sizeof(float)},
        {(void **)&g->z1, b * a1 * sizeof(float)},
        {(void **)&g->r1, b * a1 * sizeof(float)},
        {(void **)&g->p1, b * q1 * sizeof(float)},
        {(void **)&g->z2, b * a2 * sizeof(float)},
        {(void **)&g->r2, b * a2 * sizeof(float)},
        {(void **)&g->p2, b * q2 * sizeof(float)},
        {(void **)&g->h1, b * d * sizeof(float)},
        {(void **)&g->hr, b * d * sizeof(float)},
        {(void **)&g->logits, b * k * sizeof(float)},
        {(void **)&g->logp, b * k * sizeof(float)},
        {(void **)&g->loss, b * sizeof(float)},
        {(void **)&g->dlogits, b * k * sizeof(float)},
        {(void **)&g->dhr, b * d * sizeof(float)},
        {(void **)&g->dh1, b * d * sizeof(float)},
        {(void **)&g->dp2, b * q2 * sizeof(float)},
        {(void **)&g->dr2, b * a2 * sizeof(float)},
        {(void **)&g->dz2, b * a2 * sizeof(float)},
        {(void **)&g->dp1, b * q1 * sizeof(float)},
        {(void **)&g->dr1, b * a1 * sizeof(float)},
        {(void **)&g->dz1, b * a1 * sizeof(float)},
        {(void **)&g->labels, b * sizeof(int)},
        {(void **)&g->hit, b * sizeof(int)},
    };
    size_t off = 0;

    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) {
        if (base != NULL)
            *bufs[i].p = base + off;
        off += (bufs[i].bytes + 255) & ~(size_t)255;
    }
    return off;
}

static int gpu_create(cnn_gpu_t *g, char *err, size_t errlen)
{
    const cnn_gpu_layout_t *l = &g->lay;
    char reason[256];
    size_t bytes;

    if (cnn_gpu_device_count(reason, sizeof(reason)) == 0)
        return gpu_fail("cudaGetDeviceCount", reason, err, errlen);
    /* before any handle or buffer: they belong to the current device */
    TRY_CUDA(cudaSetDevice, (l->device));
    TRY_DNN(cudnnCreate, (&g->dnn));
    TRY_BLAS(cublasCreate, (&g->blas));
    /* FP32 as on the CPU: no TF32 tensor-core rounding of the inputs */
    TRY_BLAS(cublasSetMathMode, (g->blas, CUBLAS_DEFAULT_MATH));
    TRY_DNN(cudnnCreateActivationDescriptor, (&g->relu));
    TRY_DNN(cudnnSetActivationDescriptor,
            (g->relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    TRY_DNN(cudnnCreatePoolingDescriptor, (&g->pool));
    TRY_DNN(cudnnSetPooling2dDescriptor,
            (g->pool, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2));
    TRY(gpu_conv_init(&g->conv1, 1, l->c1, l->h, l->w, l->k, err, errlen));
    TRY(gpu_conv_init(&g->conv2, l->c1, l->c2, l->h / 2, l->w / 2, l->k, err, errlen));
    TRY_DNN(cudnnCreateTensorDescriptor, (&g->p2desc));
    TRY(gpu_dense_init(&g->fc1, l->c2 * (l->h / 4) * (l->w / 4), l->dense, err, errlen));
    TRY(gpu_dense_init(&g->fc2, l->dense, l->nclasses, err, errlen));
    bytes = gpu_carve(g, NULL);
    TRY_CUDA(cudaMalloc, (&g->arena, bytes));
    gpu_carve(g, (char *)g->arena);
    g->host_loss = (float *)malloc((size_t)g->max_batch * sizeof(float));
    g->host_hit = (int *)malloc((size_t)g->max_batch * sizeof(int));
    if (g->host_loss == NULL || g->host_hit == NULL)
        return gpu_fail("malloc", "out of memory", err, errlen);
    return gpu_set_batch(g, g->max_batch, err, errlen);
}

extern "C" int cnn_gpu_create(const cnn_gpu_layout_t *layout, int max_batch, cnn_gpu_t **out,
                              char *err, size_t errlen)
{
    cnn_gpu_t *g = (cnn_gpu_t *)calloc(1, sizeof(*g));

    if (g == NULL)
        return gpu_fail("calloc", "out of memory", err, errlen);
    g->lay = *layout;
    g->max_batch = max_batch;
    if (gpu_create(g, err, errlen) != 0) {
        cnn_gpu_destroy(g);
        return -1;
    }
    *out = g;
    return 0;
}

static void gpu_conv_free(gpu_conv_t *c)
{
    if (c->wdesc)
        cudnnDestroyFilterDescriptor(c->wdesc);
    if (c->cdesc)
        cudnnDestroyConvolutionDescriptor(c->cdesc);
    if (c->xdesc)
        cudnnDestroyTensorDescriptor(c->xdesc);
    if (c->ydesc)
        cudnnDestroyTensorDescriptor(c->ydesc);
    if (c->bdesc)
        cudnnDestroyTensorDescriptor(c->bdesc);
}

static void gpu_dense_free(gpu_dense_t *d)
{
    if (d->ydesc)
        cudnnDestroyTensorDescriptor(d->ydesc);
    if (d->bdesc)
        cudnnDestroyTensorDescriptor(d->bdesc);
}

/* Teardown errors have no one to report to: each step is still attempted. */
extern "C" void cnn_gpu_destroy(cnn_gpu_t *g)
{
    if (g == NULL)
        return;
    gpu_conv_free(&g->conv1);
    gpu_conv_free(&g->conv2);
    gpu_dense_free(&g->fc1);
    gpu_dense_free(&g->fc2);
    if (g->p2desc)
        cudnnDestroyTensorDescriptor(g->p2desc);
    if (g->pool)
        cudnnDestroyPoolingDescriptor(g->pool);
    if (g->relu)
        cudnnDestroyActivationDescriptor(g->relu);
    if (g->ws)
        cudaFree(g->ws);
    if (g->arena)
        cudaFree(g->arena);
    if (g->blas)
        cublasDestroy(g->blas);
    if (g->dnn)
        cudnnDestroy(g->dnn);
    (void)cudaGetLastError();
    free(g->host_loss);
    free(g->host_hit);
    free(g);
}

/* ---- forward ------------------------------------------------------------------------- */

extern "C" int cnn_gpu_load_params(cnn_gpu_t *g, const float *params, char *err, size_t errlen)
{
    TRY_CUDA(cudaMemcpy,
             (g->params, params, g->lay.nparams * sizeof(float), cudaMemcpyHostToDevice));
    return 0;
}

/* Cross-entropy of each row of log-probabilities against its label, whether
 * the argmax is right, and d(loss)/d(logits) = (softmax - onehot) * scale. */
__global__ void cnn_xent_kernel(const float *logp, const int *labels, int n, int k, float scale,
                                float *dlogits, float *loss, int *hit)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i >= n)
        return;
    const float *lp = logp + (size_t)i * k;
    const int y = labels[i];
    int best = 0;

    for (int j = 0; j < k; j++) {
        if (lp[j] > lp[best])
            best = j;
        dlogits[(size_t)i * k + j] = (expf(lp[j]) - (j == y ? 1.0f : 0.0f)) * scale;
    }
    loss[i] = -lp[y];
    hit[i] = best == y;
}

static int gpu_conv_forward(cnn_gpu_t *g, gpu_conv_t *c, size_t w_off, size_t b_off,
                            const float *x, float *z, float *r, char *err, size_t errlen)
{
    TRY_DNN(cudnnConvolutionForward,
            (g->dnn, &one, c->xdesc, x, c->wdesc, g->params + w_off, c->cdesc, c->fwd, g->ws,
             g->ws_bytes, &zero, c->ydesc, z));
    TRY_DNN(cudnnAddTensor, (g->dnn, &one, c->bdesc, g->params + b_off, &one, c->ydesc, z));
    TRY_DNN(cudnnActivationForward, (g->dnn, g->relu, &one, c->ydesc, z, &zero, c->ydesc, r));
    return 0;
}

/*
 * y (n x out) = x (n x in) W^T + b with W [out][in] row-major. cuBLAS is
 * column-major: there W is an in x out matrix (W^T), x an in x n matrix and
 * y an out x n one, so y = op_T(W) x.
 */
static int gpu_dense_forward(cnn_gpu_t *g, gpu_dense_t *d, size_t w_off, size_t b_off,
                             const float *x, float *y, char *err, size_t errlen)
{
    TRY_BLAS(cublasSgemm, (g->blas, CUBLAS_OP_T, CUBLAS_OP_N, d->out, g->n, d->in, &one,
                           g->params + w_off, d->in, x, d->in, &zero, y, d->out));
    TRY_DNN(cudnnAddTensor, (g->dnn, &one, d->bdesc, g->params + b_off, &one, d->ydesc, y));
    return 0;
}

extern "C" int cnn_gpu_forward(cnn_gpu_t *g, const float *x, const int *y, int n,
                               float grad_scale, double *loss_sum, int *correct, char *err,
                               size_t errlen)
{
    const cnn_gpu_layout_t *l = &g->lay;
    double sum = 0.0;
    int right = 0;

    g->last_n = 0;
    if (n <= 0 || n > g->max_batch)
        return gpu_fail("cnn_gpu_forward", "batch size out of range", err, errlen);
    for (int i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= l->nclasses)
            return gpu_fail("cnn_gpu_forward", "label out of range", err, errlen);
    TRY(gpu_set_batch(g, n, err, errlen));
    TRY_CUDA(cudaMemcpy,
             (g->x, x, (size_t)n * l->h * l->w * sizeof(float), cudaMemcpyHostToDevice));
    TRY_CUDA(cudaMemcpy, (g->labels, y, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));

    TRY(gpu_conv_forward(g, &g->conv1, l->conv1_w, l->conv1_b, g->x, g->z1, g->r1, err, errlen));
    TRY_DNN(cudnnPoolingForward, (g->dnn, g->pool, &one, g->conv1.ydesc, g->r1, &zero,
                                  g->conv2.xdesc, g->p1));
    TRY(gpu_conv_forward(g, &g->conv2, l->conv2_w, l->conv2_b, g->p1, g->z2, g->r2, err,
                         errlen));
    TRY_DNN(cudnnPoolingForward,
            (g->dnn, g->pool, &one, g->conv2.ydesc, g->r2, &zero, g->p2desc, g->p2));
    /* p2 (n x c2 x h/4 x w/4, NCHW) is already the flat n x in input of fc1 */
    TRY(gpu_dense_forward(g, &g->fc1, l->fc1_w, l->fc1_b, g->p2, g->h1, err, errlen));
    TRY_DNN(cudnnActivationForward,
            (g->dnn, g->relu, &one, g->fc1.ydesc, g->h1, &zero, g->fc1.ydesc, g->hr));
    TRY(gpu_dense_forward(g, &g->fc2, l->fc2_w, l->fc2_b, g->hr, g->logits, err, errlen));
    TRY_DNN(cudnnSoftmaxForward, (g->dnn, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE, &one,
                                  g->fc2.ydesc, g->logits, &zero, g->fc2.ydesc, g->logp));
    cnn_xent_kernel<<<(n + 127) / 128, 128>>>(g->logp, g->labels, n, l->nclasses, grad_scale,
                                              g->dlogits, g->loss, g->hit);
    TRY_CUDA(cudaGetLastError, ());
    TRY_CUDA(cudaMemcpy, (g->host_loss, g->loss, (size_t)n * sizeof(float),
                          cudaMemcpyDeviceToHost));
    TRY_CUDA(cudaMemcpy,
             (g->host_hit, g->hit, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        sum += g->host_loss[i];
        right += g->host_hit[i];
    }
    *loss_sum = sum;
    *correct = right;
    g->last_n = n;
    return 0;
}

/* ---- backward ------------------------------------------------------------------------ */

/* Of y = x W^T + b (see gpu_dense_forward): dW = dy^T x, that is W^T's
 * column-major in x out = x dy^T; db = the column sums of dy; dx = dy W,
 * column-major in x n = W^T (col-major in x out) dy. dx NULL: not needed. */
static int gpu_dense_backward(cnn_gpu_t *g, gpu_dense_t *d, size_t w_off, size_t b_off,
                              const float *x, const float *dy, float *dx, char *err,
                              size_t errlen)
{
    TRY_BLAS(cublasSgemm, (g->blas, CUBLAS_OP_N, CUBLAS_OP_T, d->in, d->out, g->n, &one, x, d->in,
                           dy, d->out, &zero, g->grads + w_off, d->in));
    TRY_DNN(cudnnConvolutionBackwardBias,
            (g->dnn, &one, d->ydesc, dy, &zero, d->bdesc, g->grads + b_off));
    if (dx != NULL)
        TRY_BLAS(cublasSgemm, (g->blas, CUBLAS_OP_N, CUBLAS_OP_N, d->in, g->n, d->out, &one,
                               g->params + w_off, d->in, dy, d->out, &zero, dx, d->in));
    return 0;
}

/* Of r = relu(conv(x) + b), given dr: dz, the weight and bias gradients,
 * and dx unless NULL. */
static int gpu_conv_backward(cnn_gpu_t *g, gpu_conv_t *c, size_t w_off, size_t b_off,
                             const float *x, const float *z, const float *r, const float *dr,
                             float *dz, float *dx, char *err, size_t errlen)
{
    TRY_DNN(cudnnActivationBackward, (g->dnn, g->relu, &one, c->ydesc, r, c->ydesc, dr,
                                      c->ydesc, z, &zero, c->ydesc, dz));
    TRY_DNN(cudnnConvolutionBackwardBias,
            (g->dnn, &one, c->ydesc, dz, &zero, c->bdesc, g->grads + b_off));
    TRY_DNN(cudnnConvolutionBackwardFilter,
            (g->dnn, &one, c->xdesc, x, c->ydesc, dz, c->cdesc, c->bwd_filter, g->ws,
             g->ws_bytes, &zero, c->wdesc, g->grads + w_off));
    if (dx != NULL)
        TRY_DNN(cudnnConvolutionBackwardData,
                (g->dnn, &one, c->wdesc, g->params + w_off, c->ydesc, dz, c->cdesc,
                 c->bwd_data, g->ws, g->ws_bytes, &zero, c->xdesc, dx));
    return 0;
}

extern "C" int cnn_gpu_backward(cnn_gpu_t *g, float *grads, char *err, size_t errlen)
{
    const cnn_gpu_layout_t *l = &g->lay;

    if (g->last_n == 0 || g->last_n != g->n)
        return gpu_fail("cnn_gpu_backward", "no forward pass to go back through", err, errlen);
    TRY(gpu_dense_backward(g, &g->fc2, l->fc2_w, l->fc2_b, g->hr, g->dlogits, g->dhr, err,
                           errlen));
    TRY_DNN(cudnnActivationBackward, (g->dnn, g->relu, &one, g->fc1.ydesc, g->hr, g->fc1.ydesc,
                                      g->dhr, g->fc1.ydesc, g->h1, &zero, g->fc1.ydesc, g->dh1));
    TRY(gpu_dense_backward(g, &g->fc1, l->fc1_w, l->fc1_b, g->p2, g->dh1, g->dp2, err, errlen));
    TRY_DNN(cudnnPoolingBackward, (g->dnn, g->pool, &one, g->p2desc, g->p2, g->p2desc, g->dp2,
                                   g->conv2.ydesc, g->r2, &zero, g->conv2.ydesc, g->dr2));
    TRY(gpu_conv_backward(g, &g->conv2, l->conv2_w, l->conv2_b, g->p1, g->z2, g->r2, g->dr2,
                          g->dz2, g->dp1, err, errlen));
    TRY_DNN(cudnnPoolingBackward,
            (g->dnn, g->pool, &one, g->conv2.xdesc, g->p1, g->conv2.xdesc, g->dp1,
             g->conv1.ydesc, g->r1, &zero, g->conv1.ydesc, g->dr1));
    /* the images need no gradient */
    TRY(gpu_conv_backward(g, &g->conv1, l->conv1_w, l->conv1_b, g->x, g->z1, g->r1, g->dr1,
                          g->dz1, NULL, err, errlen));
    TRY_CUDA(cudaMemcpy,
             (grads, g->grads, l->nparams * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}
