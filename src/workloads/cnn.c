/*
 * cnn.c - the fmnist-cnn workload (model and layout in cnn.h): on the CPU
 * through conv.h and dense.h, or on a GPU through cuda/cnn_gpu.h.
 */
#include "cnn.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv.h"
#include "cuda/cnn_gpu.h"
#include "dense.h"
#include "rng.h"
#include "workloads.h"

#define CNN_KERNEL 5
/* evaluate's batch when the training batch is smaller */
#define CNN_EVAL_ROWS 64
/* bounds that keep every buffer size far from overflow */
#define CNN_MAX_WIDTH 4096
#define CNN_MAX_BATCH 65536
/* the initialisation stream's purpose word: "cnn-init" */
#define CNN_INIT_TAG 0x636e6e2d696e6974ULL

typedef struct cnn {
    workload_t wl;            /* first: the daemon holds a workload_t * */
    conv_layer_t conv1, conv2;
    dense_t fc1, fc2;
    int max_batch;            /* the largest n train_step accepts (s->batch_size) */
    int rows;                 /* forward scratch rows: max(max_batch, CNN_EVAL_ROWS) */
    uint32_t *idx;            /* rows: evaluate's sample indices */
    int *y;                   /* rows: labels of the current batch */
    float *x;                 /* rows x 784: the images */
    /* CPU forward, rows each: a = after conv+ReLU, p = after pooling */
    float *a1, *p1, *a2, *p2, *h, *logits;
    int32_t *arg1, *arg2;     /* where each pooled value came from */
    float *col;               /* im2col of one image, the larger layer's size */
    /* CPU backward, max_batch rows each: dLoss/d(the activation named) */
    float *d_logits, *d_h, *d_p2, *d_a2, *d_p1, *d_a1;
    cnn_gpu_t *gpu;           /* the GPU path, or NULL for the CPU */
    const fmnist_t *data;
    fmnist_t owned;           /* what create loaded (unused with cnn_create_with_data) */
    int owns_data;
} cnn_t;

static void cnn_destroy(workload_t *w)
{
    cnn_t *m = (cnn_t *)w;

    if (!m)
        return;
    float *bufs[] = {m->x,        m->a1,  m->p1,   m->a2,   m->p2,   m->h,    m->logits,
                     m->col,      m->d_h, m->d_p2, m->d_a2, m->d_p1, m->d_a1, m->d_logits};

    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]);
    free(m->arg1);
    free(m->arg2);
    free(m->idx);
    free(m->y);
    cnn_gpu_destroy(m->gpu);
    free(m->wl.params);
    free(m->wl.grads);
    if (m->owns_data)
        fmnist_free(&m->owned);
    free(m);
}

/* One width from the settings: 0 is the default, else 1..CNN_MAX_WIDTH. */
static int cnn_width(int asked, int dflt, const char *what, int *out, char *err, size_t errlen)
{
    if (asked == 0) {
        *out = dflt;
        return 0;
    }
    if (asked < 1 || asked > CNN_MAX_WIDTH) {
        snprintf(err, errlen, "fmnist-cnn: %s width %d, between 1 and %d allowed (0: %d)", what,
                 asked, CNN_MAX_WIDTH, dflt);
        return -1;
    }
    *out = asked;
    return 0;
}

static void *cnn_alloc(size_t count, size_t size, int *failed)
{
    void *p = malloc(count * size);

    if (!p)
        *failed = 1;
    return p;
}

/* Scratch for the CPU path, allocated once so that no step allocates. */
static int cnn_alloc_cpu(cnn_t *m, char *err, size_t errlen)
{
    const size_t r = (size_t)m->rows, b = (size_t)m->max_batch, f = sizeof(float);
    const size_t a1 = (size_t)m->conv1.cout * FMNIST_PIXELS, q1 = a1 / 4;
    const size_t a2 = (size_t)m->conv2.cout * m->conv2.h * m->conv2.w, q2 = (size_t)m->fc1.in;
    const size_t col1 = conv_col_floats(&m->conv1), col2 = conv_col_floats(&m->conv2);
    int failed = 0;

    m->a1 = cnn_alloc(r * a1, f, &failed);
    m->p1 = cnn_alloc(r * q1, f, &failed);
    m->a2 = cnn_alloc(r * a2, f, &failed);
    m->p2 = cnn_alloc(r * q2, f, &failed);
    m->h = cnn_alloc(r * (size_t)m->fc1.out, f, &failed);
    m->logits = cnn_alloc(r * FMNIST_CLASSES, f, &failed);
    m->arg1 = cnn_alloc(r * q1, sizeof(int32_t), &failed);
    m->arg2 = cnn_alloc(r * q2, sizeof(int32_t), &failed);
    m->col = cnn_alloc(col1 > col2 ? col1 : col2, f, &failed);
    m->d_logits = cnn_alloc(b * FMNIST_CLASSES, f, &failed);
    m->d_h = cnn_alloc(b * (size_t)m->fc1.out, f, &failed);
    m->d_p2 = cnn_alloc(b * q2, f, &failed);
    m->d_a2 = cnn_alloc(b * a2, f, &failed);
    m->d_p1 = cnn_alloc(b * q1, f, &failed);
    m->d_a1 = cnn_alloc(b * a1, f, &failed);
    if (failed) {
        snprintf(err, errlen, "fmnist-cnn: out of memory for the scratch of a batch of %d",
                 m->rows);
        return -1;
    }
    return 0;
}

int cnn_pick_cuda_device(int requested, int local_rank, int ndev)
{
    if (requested >= 0)
        return requested;
    return local_rank >= 0 && ndev > 0 ? local_rank % ndev : 0;
}

/* The GPU path in place of the CPU scratch, or -1 with "--device cuda: why". */
static int cnn_open_gpu(cnn_t *m, const wl_settings_t *s, char *err, size_t errlen)
{
    cnn_gpu_layout_t lay = {
        .h = FMNIST_ROWS, .w = FMNIST_COLS, .k = CNN_KERNEL,
        .c1 = m->conv1.cout, .c2 = m->conv2.cout, .dense = m->fc1.out,
        .nclasses = FMNIST_CLASSES,
        .conv1_w = m->conv1.w_off, .conv1_b = m->conv1.b_off,
        .conv2_w = m->conv2.w_off, .conv2_b = m->conv2.b_off,
        .fc1_w = m->fc1.offset, .fc1_b = m->fc1.offset + (size_t)m->fc1.in * m->fc1.out,
        .fc2_w = m->fc2.offset, .fc2_b = m->fc2.offset + (size_t)m->fc2.in * m->fc2.out,
        .nparams = m->wl.nparams,
    };
    char why[WL_ERR_MAX];
    int ndev = cnn_gpu_device_count(why, sizeof(why));

    if (ndev == 0) {
        if (cnn_gpu_built())
            snprintf(err, errlen, "--device cuda: no usable CUDA device: %s. Run on a machine "
                     "with a GPU, or train on the CPU with --device cpu", why);
        else
            snprintf(err, errlen, "--device cuda: ringd was %s", why);
        return -1;
    }
    lay.device = cnn_pick_cuda_device(s->cuda_device, s->local_rank, ndev);
    if (lay.device >= ndev) {
        snprintf(err, errlen, "--cuda-device %d: this process sees %d CUDA device%s (0..%d; "
                 "CUDA_VISIBLE_DEVICES narrows them)", lay.device, ndev, ndev > 1 ? "s" : "",
                 ndev - 1);
        return -1;
    }
    if (cnn_gpu_create(&lay, m->rows, &m->gpu, why, sizeof(why)) < 0) {
        snprintf(err, errlen, "--device cuda: %s", why);
        return -1;
    }
    return 0;
}

static void cnn_format_shape(cnn_t *m)
{
    snprintf(m->wl.shape, sizeof(m->wl.shape), "fmnist-cnn c%d-c%d-d%d", m->conv1.cout,
             m->conv2.cout, m->fc1.out);
}

/* The model without its data: layers, initialised parameters, scratch or GPU. */
static int cnn_new(const wl_settings_t *s, cnn_t **out, char *err, size_t errlen)
{
    int c1, c2, d, failed = 0;
    size_t off = 0;
    cnn_t *m;

    if (cnn_width(s->conv[0], CNN_DEFAULT_CONV1, "first conv", &c1, err, errlen) < 0 ||
        cnn_width(s->conv[1], CNN_DEFAULT_CONV2, "second conv", &c2, err, errlen) < 0 ||
        cnn_width(s->dense, CNN_DEFAULT_DENSE, "dense", &d, err, errlen) < 0)
        return -1;
    if (s->batch_size < 1 || s->batch_size > CNN_MAX_BATCH) {
        snprintf(err, errlen, "fmnist-cnn: batch size %d, between 1 and %d allowed",
                 s->batch_size, CNN_MAX_BATCH);
        return -1;
    }
    if (s->device != WL_DEVICE_CPU && s->device != WL_DEVICE_CUDA) {
        snprintf(err, errlen, "fmnist-cnn: unknown device %d", s->device);
        return -1;
    }
    m = calloc(1, sizeof(*m));
    if (!m) {
        snprintf(err, errlen, "fmnist-cnn: out of memory");
        return -1;
    }
    m->wl.ops = &wl_fmnist_cnn;
    m->conv1 = conv_same(1, c1, FMNIST_ROWS, FMNIST_COLS, CNN_KERNEL, &off);
    m->conv2 = conv_same(c1, c2, FMNIST_ROWS / 2, FMNIST_COLS / 2, CNN_KERNEL, &off);
    m->fc1 = (dense_t){.in = c2 * (FMNIST_ROWS / 4) * (FMNIST_COLS / 4), .out = d, .offset = off};
    off += dense_nparams(m->fc1.in, d);
    m->fc2 = (dense_t){.in = d, .out = FMNIST_CLASSES, .offset = off};
    off += dense_nparams(d, FMNIST_CLASSES);
    m->wl.nparams = off;
    m->max_batch = s->batch_size;
    m->rows = s->batch_size > CNN_EVAL_ROWS ? s->batch_size : CNN_EVAL_ROWS;
    m->wl.params = cnn_alloc(off, sizeof(float), &failed);
    m->wl.grads = calloc(off, sizeof(float));
    m->x = cnn_alloc((size_t)m->rows * FMNIST_PIXELS, sizeof(float), &failed);
    m->idx = cnn_alloc((size_t)m->rows, sizeof(uint32_t), &failed);
    m->y = cnn_alloc((size_t)m->rows, sizeof(int), &failed);
    if (failed || !m->wl.grads) {
        snprintf(err, errlen, "fmnist-cnn: out of memory for %zu parameters", off);
        cnn_destroy(&m->wl);
        return -1;
    }
    if ((s->device == WL_DEVICE_CUDA ? cnn_open_gpu(m, s, err, errlen)
                                     : cnn_alloc_cpu(m, err, errlen)) < 0) {
        cnn_destroy(&m->wl);
        return -1;
    }
    /* one stream per layer: a layer's initial weights depend on the seed and its index only */
    rng_t r;

    rng_seed(&r, s->seed, CNN_INIT_TAG, 0);
    conv_init_he(&m->conv1, m->wl.params, &r);
    rng_seed(&r, s->seed, CNN_INIT_TAG, 1);
    conv_init_he(&m->conv2, m->wl.params, &r);
    rng_seed(&r, s->seed, CNN_INIT_TAG, 2);
    dense_init_he(&m->fc1, m->wl.params, &r);
    rng_seed(&r, s->seed, CNN_INIT_TAG, 3);
    dense_init_he(&m->fc2, m->wl.params, &r);
    cnn_format_shape(m);
    /* one BLAS thread: peers share the cores, and a GEMM split over a
     * varying number of threads would not give the same bits twice */
    openblas_set_num_threads(1);
    *out = m;
    return 0;
}

static void cnn_attach(cnn_t *m, const fmnist_t *data)
{
    m->data = data;
    m->wl.ntrain = data->ntrain;
    m->wl.ntest = data->ntest;
}

int cnn_create_with_data(const wl_settings_t *s, const fmnist_t *data, workload_t **out,
                         char *err, size_t errlen)
{
    cnn_t *m;

    if (cnn_new(s, &m, err, errlen) < 0)
        return -1;
    cnn_attach(m, data);
    *out = &m->wl;
    return 0;
}

static int cnn_create(const wl_settings_t *s, workload_t **out, char *err, size_t errlen)
{
    cnn_t *m;

    /* the settings and the device first: neither should wait for a dataset load */
    if (cnn_new(s, &m, err, errlen) < 0)
        return -1;
    if (fmnist_load(s->data_dir, &m->owned, err, errlen) < 0) {
        cnn_destroy(&m->wl);
        return -1;
    }
    m->owns_data = 1;
    cnn_attach(m, &m->owned);
    *out = &m->wl;
    return 0;
}

/* ---- the CPU path -------------------------------------------------------------------- */

/* Logits of the n images in m->x into m->logits, keeping what backward needs. */
static void cnn_cpu_forward(cnn_t *m, int n)
{
    const float *params = m->wl.params;
    const conv_layer_t *c1 = &m->conv1, *c2 = &m->conv2;

    conv_forward(c1, params, m->x, n, m->a1, m->col);
    dense_relu_forward(m->a1, (size_t)n * c1->cout * c1->h * c1->w);
    pool_forward(n, c1->cout, c1->h, c1->w, m->a1, m->p1, m->arg1);
    conv_forward(c2, params, m->p1, n, m->a2, m->col);
    dense_relu_forward(m->a2, (size_t)n * c2->cout * c2->h * c2->w);
    pool_forward(n, c2->cout, c2->h, c2->w, m->a2, m->p2, m->arg2);
    /* p2 is n x c2 x 7 x 7 in NCHW: already the n x (c2*49) rows fc1 takes */
    dense_forward(&m->fc1, params, m->p2, n, m->h);
    dense_relu_forward(m->h, (size_t)n * m->fc1.out);
    dense_forward(&m->fc2, params, m->h, n, m->logits);
}

/* From m->d_logits back to every gradient in w->grads. ReLU backward uses
 * the ReLU's output (dense.h), which the forward pass kept in a1, a2, h. */
static void cnn_cpu_backward(cnn_t *m, int n)
{
    const float *params = m->wl.params;
    float *grads = m->wl.grads;
    const conv_layer_t *c1 = &m->conv1, *c2 = &m->conv2;

    dense_backward(&m->fc2, params, m->h, m->d_logits, n, grads, m->d_h);
    dense_relu_backward(m->h, m->d_h, (size_t)n * m->fc1.out);
    dense_backward(&m->fc1, params, m->p2, m->d_h, n, grads, m->d_p2);
    pool_backward(n, c2->cout, c2->h, c2->w, m->d_p2, m->arg2, m->d_a2);
    dense_relu_backward(m->a2, m->d_a2, (size_t)n * c2->cout * c2->h * c2->w);
    conv_backward(c2, params, m->p1, m->d_a2, n, grads, m->d_p1, m->col);
    pool_backward(n, c1->cout, c1->h, c1->w, m->d_p1, m->arg1, m->d_a1);
    dense_relu_backward(m->a1, m->d_a1, (size_t)n * c1->cout * c1->h * c1->w);
    /* the images need no gradient */
    conv_backward(c1, params, m->x, m->d_a1, n, grads, NULL, m->col);
}

/* ---- the ops ------------------------------------------------------------------------- */

static int cnn_train_step(workload_t *w, const uint32_t *idx, int n, double *loss, int *correct,
                          char *err, size_t errlen)
{
    cnn_t *m = (cnn_t *)w;

    if (n < 1 || n > m->max_batch) {
        snprintf(err, errlen,
                 "fmnist-cnn: batch of %d samples, the workload was created for 1 to %d", n,
                 m->max_batch);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (idx[i] >= w->ntrain) {
            snprintf(err, errlen,
                     "fmnist-cnn: training sample %u asked, the training set has %zu", idx[i],
                     w->ntrain);
            return -1;
        }
    }
    fmnist_batch(m->data->train_images, m->data->train_labels, idx, n, m->x, m->y);
    if (m->gpu) {
        double loss_sum;
        int right;
        char why[WL_ERR_MAX];

        if (cnn_gpu_load_params(m->gpu, w->params, why, sizeof(why)) < 0 ||
            cnn_gpu_forward(m->gpu, m->x, m->y, n, 1.0f / (float)n, &loss_sum, &right, why,
                            sizeof(why)) < 0 ||
            cnn_gpu_backward(m->gpu, w->grads, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "fmnist-cnn on cuda: %s", why);
            return -1;
        }
        if (loss)
            *loss = loss_sum / n;
        if (correct)
            *correct = right;
        return 0;
    }
    cnn_cpu_forward(m, n);
    dense_softmax_xent(m->logits, m->y, n, FMNIST_CLASSES, m->d_logits, loss, correct);
    cnn_cpu_backward(m, n);
    return 0;
}

/* Sum of the losses and the number right of test samples part + (start + i) * nparts, i < n. */
static int cnn_eval_chunk(cnn_t *m, size_t part, size_t nparts, size_t start, int n,
                          double *loss_sum, int *right, char *err, size_t errlen)
{
    double mean;

    for (int i = 0; i < n; i++)
        m->idx[i] = (uint32_t)(part + (start + (size_t)i) * nparts);
    fmnist_batch(m->data->test_images, m->data->test_labels, m->idx, n, m->x, m->y);
    if (m->gpu)
        return cnn_gpu_forward(m->gpu, m->x, m->y, n, 0.0f, loss_sum, right, err, errlen);
    cnn_cpu_forward(m, n);
    dense_softmax_xent(m->logits, m->y, n, FMNIST_CLASSES, NULL, &mean, right);
    *loss_sum = mean * n;
    return 0;
}

static int cnn_evaluate_part(workload_t *w, size_t part, size_t nparts, double *loss_sum,
                             size_t *correct, size_t *count, char *err, size_t errlen)
{
    cnn_t *m = (cnn_t *)w;
    size_t total = w->ntest > part ? (w->ntest - part + nparts - 1) / nparts : 0;
    char why[WL_ERR_MAX];

    *loss_sum = 0.0;
    *correct = 0;
    *count = total;
    if (w->ntest == 0 || nparts == 0 || part >= nparts) {
        snprintf(err, errlen, "fmnist-cnn: no test samples to evaluate (part %zu of %zu of %zu)",
                 part, nparts, w->ntest);
        return -1;
    }
    if (m->gpu && cnn_gpu_load_params(m->gpu, w->params, why, sizeof(why)) < 0)
        goto gpu_failed;
    for (size_t start = 0; start < total; start += (size_t)m->rows) {
        int n = total - start < (size_t)m->rows ? (int)(total - start) : m->rows;
        double chunk_loss;
        int chunk_right;

        if (cnn_eval_chunk(m, part, nparts, start, n, &chunk_loss, &chunk_right, why,
                           sizeof(why)) < 0)
            goto gpu_failed;
        *loss_sum += chunk_loss;
        *correct += (size_t)chunk_right;
    }
    return 0;
gpu_failed:
    snprintf(err, errlen, "fmnist-cnn on cuda: %s", why);
    return -1;
}

const workload_ops_t wl_fmnist_cnn = {
    .name = "fmnist-cnn",
    .doc = "CNN on Fashion-MNIST (conv5x5-pool-conv5x5-pool-dense), c16-c32-d128 unless "
           "widths are given; CPU (BLAS) or --device cuda (cuDNN)",
    .create = cnn_create,
    .train_step = cnn_train_step,
    .evaluate = wl_evaluate_whole,
    .evaluate_part = cnn_evaluate_part,
    .destroy = cnn_destroy,
};
