/* mlp.c - the fmnist-mlp workload: a ReLU MLP on Fashion-MNIST, on the CPU through CBLAS. */
#include "ring_build.h"

#include "mlp.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dense.h"
#include "rng.h"
#include "workloads.h"

/* evaluate's batch when the training batch is smaller: fewer, larger GEMMs */
#define MLP_EVAL_ROWS 256
/* bounds that keep every buffer size far from overflow */
#define MLP_MAX_WIDTH 65536
#define MLP_MAX_BATCH 65536
/* the initialisation stream's purpose word: "mlp-init" */
#define MLP_INIT_TAG 0x6d6c702d696e6974ULL

typedef struct mlp {
    workload_t wl;            /* first: the daemon holds a workload_t * */
    int nlayers;
    dense_t layer[WL_MAX_HIDDEN + 1];
    int max_batch;            /* the largest n train_step accepts (s->batch_size) */
    int rows;                 /* scratch rows: max(max_batch, MLP_EVAL_ROWS) */
    uint32_t *idx;            /* rows: evaluate's sample indices */
    int *y;                   /* rows: labels of the current batch */
    /* act[0]: input batch; act[l + 1]: output of layer l (after its ReLU) */
    float *act[WL_MAX_HIDDEN + 2];
    float *delta[2];          /* dLoss/d(activation), ping-pong, rows x widest layer */
    const fmnist_t *data;
    fmnist_t owned;           /* what create loaded (unused with mlp_create_with_data) */
    int owns_data;
} mlp_t;

static void mlp_destroy(workload_t *w)
{
    mlp_t *m = (mlp_t *)w;

    if (!m)
        return;
    for (int i = 0; i <= m->nlayers; i++)
        free(m->act[i]);
    free(m->delta[0]);
    free(m->delta[1]);
    free(m->idx);
    free(m->y);
    free(m->wl.params);
    free(m->wl.grads);
    if (m->owns_data)
        fmnist_free(&m->owned);
    free(m);
}

/* The layer widths from the settings into widths[0..nhidden+2), or -1 with a message. */
static int mlp_widths(const wl_settings_t *s, int *widths, int *nwidths_p, char *err, size_t errlen)
{
    int nhidden = s->nhidden;

    if (nhidden < 0 || nhidden > WL_MAX_HIDDEN) {
        snprintf(err, errlen, "fmnist-mlp: %d hidden layers asked, between 0 and %d allowed",
                 nhidden, WL_MAX_HIDDEN);
        return -1;
    }
    widths[0] = FMNIST_PIXELS;
    if (nhidden == 0) {
        widths[1] = MLP_DEFAULT_HIDDEN_1;
        widths[2] = MLP_DEFAULT_HIDDEN_2;
        nhidden = 2;
    } else {
        for (int i = 0; i < nhidden; i++) {
            if (s->hidden[i] < 1 || s->hidden[i] > MLP_MAX_WIDTH) {
                snprintf(err, errlen, "fmnist-mlp: hidden layer %d has width %d, between 1 and %d allowed",
                         i + 1, s->hidden[i], MLP_MAX_WIDTH);
                return -1;
            }
            widths[i + 1] = s->hidden[i];
        }
    }
    widths[nhidden + 1] = FMNIST_CLASSES;
    *nwidths_p = nhidden + 2;
    return 0;
}

static float *mlp_alloc_floats(size_t count)
{
    return malloc(count * sizeof(float));
}

/* Scratch for a batch of m->rows: allocated once, so no step allocates. */
static int mlp_alloc_scratch(mlp_t *m, const int *widths, char *err, size_t errlen)
{
    size_t rows = (size_t)m->rows;
    int widest = 0;

    for (int i = 0; i <= m->nlayers; i++) {
        m->act[i] = mlp_alloc_floats(rows * (size_t)widths[i]);
        if (!m->act[i])
            goto nomem;
        if (widths[i] > widest)
            widest = widths[i];
    }
    m->delta[0] = mlp_alloc_floats(rows * (size_t)widest);
    m->delta[1] = mlp_alloc_floats(rows * (size_t)widest);
    m->idx = malloc(rows * sizeof(*m->idx));
    m->y = malloc(rows * sizeof(*m->y));
    if (!m->delta[0] || !m->delta[1] || !m->idx || !m->y)
        goto nomem;
    return 0;
nomem:
    snprintf(err, errlen, "fmnist-mlp: out of memory for the scratch of a batch of %d", m->rows);
    return -1;
}

/* Writes "fmnist-mlp 784-256-128-10" into the workload's shape. */
static void mlp_format_shape(mlp_t *m, const int *widths, int nwidths)
{
    size_t len = (size_t)snprintf(m->wl.shape, sizeof(m->wl.shape), "fmnist-mlp ");

    for (int i = 0; i < nwidths && len < sizeof(m->wl.shape); i++)
        len += (size_t)snprintf(m->wl.shape + len, sizeof(m->wl.shape) - len, "%s%d",
                                i ? "-" : "", widths[i]);
}

/* The model without its data: layers, initialised parameters, scratch. */
static int mlp_new(const wl_settings_t *s, mlp_t **out, char *err, size_t errlen)
{
    int widths[WL_MAX_HIDDEN + 2], nwidths;
    mlp_t *m;
    size_t offset = 0;

    if (mlp_widths(s, widths, &nwidths, err, errlen) < 0)
        return -1;
    if (s->batch_size < 1 || s->batch_size > MLP_MAX_BATCH) {
        snprintf(err, errlen, "fmnist-mlp: batch size %d, between 1 and %d allowed", s->batch_size,
                 MLP_MAX_BATCH);
        return -1;
    }
    m = calloc(1, sizeof(*m));
    if (!m) {
        snprintf(err, errlen, "fmnist-mlp: out of memory");
        return -1;
    }
    m->wl.ops = &wl_fmnist_mlp;
    m->nlayers = nwidths - 1;
    for (int l = 0; l < m->nlayers; l++) {
        m->layer[l] = (dense_t){.in = widths[l], .out = widths[l + 1], .offset = offset};
        offset += dense_nparams(widths[l], widths[l + 1]);
    }
    m->wl.nparams = offset;
    m->max_batch = s->batch_size;
    m->rows = s->batch_size > MLP_EVAL_ROWS ? s->batch_size : MLP_EVAL_ROWS;
    m->wl.params = mlp_alloc_floats(offset);
    m->wl.grads = calloc(offset, sizeof(float));
    if (!m->wl.params || !m->wl.grads) {
        snprintf(err, errlen, "fmnist-mlp: out of memory for %zu parameters", offset);
        mlp_destroy(&m->wl);
        return -1;
    }
    if (mlp_alloc_scratch(m, widths, err, errlen) < 0) {
        mlp_destroy(&m->wl);
        return -1;
    }
    /* one stream per layer: a layer's initial weights depend on the seed and its index only */
    for (int l = 0; l < m->nlayers; l++) {
        rng_t r;

        rng_seed(&r, s->seed, MLP_INIT_TAG, (uint64_t)l);
        dense_init_he(&m->layer[l], m->wl.params, &r);
    }
    mlp_format_shape(m, widths, nwidths);
    /*
     * One BLAS thread: several peers share the machine's cores, and a
     * GEMM split over a varying number of threads would not give the same
     * bits twice. This is process-wide; every workload wants the same.
     */
    openblas_set_num_threads(1);
    *out = m;
    return 0;
}

static void mlp_attach(mlp_t *m, const fmnist_t *data)
{
    m->data = data;
    m->wl.ntrain = data->ntrain;
    m->wl.ntest = data->ntest;
}

int mlp_create_with_data(const wl_settings_t *s, const fmnist_t *data, workload_t **out, char *err,
                         size_t errlen)
{
    mlp_t *m;

    if (mlp_new(s, &m, err, errlen) < 0)
        return -1;
    mlp_attach(m, data);
    *out = &m->wl;
    return 0;
}

static int mlp_create(const wl_settings_t *s, workload_t **out, char *err, size_t errlen)
{
    mlp_t *m;

    /* the settings first: a typo in a width should not cost a dataset load */
    if (mlp_new(s, &m, err, errlen) < 0)
        return -1;
    if (fmnist_load(s->data_dir, &m->owned, err, errlen) < 0) {
        mlp_destroy(&m->wl);
        return -1;
    }
    m->owns_data = 1;
    mlp_attach(m, &m->owned);
    *out = &m->wl;
    return 0;
}

/* Logits of the n samples in act[0] into act[nlayers]. */
static void mlp_forward(mlp_t *m, int n)
{
    for (int l = 0; l < m->nlayers; l++) {
        const dense_t *layer = &m->layer[l];

        dense_forward(layer, m->wl.params, m->act[l], n, m->act[l + 1]);
        if (l + 1 < m->nlayers)
            dense_relu_forward(m->act[l + 1], (size_t)n * (size_t)layer->out);
    }
}

/* Backpropagates delta[0] (dLoss/dlogits) through every layer into w->grads. */
static void mlp_backward(mlp_t *m, int n)
{
    int cur = 0;

    for (int l = m->nlayers - 1; l >= 0; l--) {
        const dense_t *layer = &m->layer[l];
        float *dx = l > 0 ? m->delta[1 - cur] : NULL;

        dense_backward(layer, m->wl.params, m->act[l], m->delta[cur], n, m->wl.grads, dx);
        if (dx) {
            /* act[l] is the ReLU output of layer l - 1 */
            dense_relu_backward(m->act[l], dx, (size_t)n * (size_t)layer->in);
            cur = 1 - cur;
        }
    }
}

static int mlp_train_step(workload_t *w, const uint32_t *idx, int n, double *loss, int *correct,
                          char *err, size_t errlen)
{
    mlp_t *m = (mlp_t *)w;

    if (n < 1 || n > m->max_batch) {
        snprintf(err, errlen, "fmnist-mlp: batch of %d samples, the workload was created for 1 to %d",
                 n, m->max_batch);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (idx[i] >= w->ntrain) {
            snprintf(err, errlen, "fmnist-mlp: training sample %u asked, the training set has %zu",
                     idx[i], w->ntrain);
            return -1;
        }
    }
    fmnist_batch(m->data->train_images, m->data->train_labels, idx, n, m->act[0], m->y);
    mlp_forward(m, n);
    dense_softmax_xent(m->act[m->nlayers], m->y, n, FMNIST_CLASSES, m->delta[0], loss, correct);
    mlp_backward(m, n);
    return 0;
}

static int mlp_evaluate_part(workload_t *w, size_t part, size_t nparts, double *loss_sum,
                             size_t *correct, size_t *count, char *err, size_t errlen)
{
    mlp_t *m = (mlp_t *)w;
    size_t total = w->ntest > part ? (w->ntest - part + nparts - 1) / nparts : 0;

    *loss_sum = 0.0;
    *correct = 0;
    *count = total;
    if (w->ntest == 0 || nparts == 0 || part >= nparts) {
        snprintf(err, errlen, "fmnist-mlp: no test samples to evaluate (part %zu of %zu of %zu)",
                 part, nparts, w->ntest);
        return -1;
    }
    for (size_t start = 0; start < total; start += (size_t)m->rows) {
        int n = total - start < (size_t)m->rows ? (int)(total - start) : m->rows;
        double chunk_loss;
        int chunk_correct;

        for (int i = 0; i < n; i++)
            m->idx[i] = (uint32_t)(part + (start + (size_t)i) * nparts);
        fmnist_batch(m->data->test_images, m->data->test_labels, m->idx, n, m->act[0], m->y);
        mlp_forward(m, n);
        dense_softmax_xent(m->act[m->nlayers], m->y, n, FMNIST_CLASSES, NULL, &chunk_loss,
                           &chunk_correct);
        *loss_sum += chunk_loss * n;
        *correct += (size_t)chunk_correct;
    }
    return 0;
}

const workload_ops_t wl_fmnist_mlp = {
    .name = "fmnist-mlp",
    .doc = "ReLU MLP on Fashion-MNIST, 784-256-128-10 unless hidden widths are given (CPU, BLAS)",
    .create = mlp_create,
    .train_step = mlp_train_step,
    .evaluate = wl_evaluate_whole,
    .evaluate_part = mlp_evaluate_part,
    .destroy = mlp_destroy,
};
