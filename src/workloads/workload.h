/*
 * workload.h - what the daemon trains, behind one small interface.
 *
 * A workload owns a model and its data and knows nothing of the ring: the
 * daemon asks it for the gradient of a batch, averages that gradient over
 * the peers, and applies the update itself (src/base/sgd.c). So
 * every workload keeps all of its parameters in ONE contiguous float array
 * (w->params) and writes its gradient to a second array of the same layout
 * (w->grads): one allreduce per step, one optimizer loop, one checkpoint
 * blob. Layers address their part of these arrays by offset.
 *
 * Errors: functions return 0 on success and -1 on failure, with a message
 * in err (naming the file, the shape or whatever the user must fix). A
 * workload never prints and never exits.
 */
#ifndef RING_WORKLOAD_H
#define RING_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#define WL_MAX_HIDDEN 8
#define WL_ERR_MAX 512
#define WL_SHAPE_MAX 160

/* What a workload is created from (the daemon's flags). */
typedef struct wl_settings {
    const char *data_dir;     /* Fashion-MNIST directory (train-images-idx3-ubyte.gz, ...) */
    int hidden[WL_MAX_HIDDEN]; /* fmnist-mlp: hidden layer widths */
    int nhidden;
    int conv[2];              /* fmnist-cnn: output channels of its two conv layers */
    int dense;                /* fmnist-cnn: width of its dense layer */
    uint64_t seed;            /* deterministic initialisation: same seed, same parameters */
    int batch_size;           /* the largest n train_step will be called with */
    uint64_t params;          /* synthetic: number of parameters */
    double compute_ms;        /* synthetic: time one step's gradient takes */
    int compute_on;           /* synthetic: WL_COMPUTE_CPU or WL_COMPUTE_ACCELERATOR */
    int device;               /* WL_DEVICE_CPU or WL_DEVICE_CUDA */
    int cuda_device;          /* WL_DEVICE_CUDA: the GPU, or -1 = by local rank */
    int local_rank;           /* this peer's rank on its host, -1 = unknown */
} wl_settings_t;

enum { WL_DEVICE_CPU = 0, WL_DEVICE_CUDA = 1 };

/* synthetic: how --compute-ms is spent: busy on a core, or waiting as a host waits on a GPU */
enum { WL_COMPUTE_CPU = 0, WL_COMPUTE_ACCELERATOR = 1 };

typedef struct workload_ops workload_ops_t;

/* The common head of every workload; each one's own state follows it. */
typedef struct workload {
    const workload_ops_t *ops;
    size_t nparams;
    float *params;            /* every parameter, one array (host memory) */
    float *grads;             /* gradient of the last train_step, same layout */
    size_t ntrain;            /* training samples (indices 0..ntrain-1) */
    size_t ntest;             /* test samples evaluate() uses (0: no evaluation) */
    /* "fmnist-mlp 784-256-128-10": a checkpoint of another shape is refused */
    char shape[WL_SHAPE_MAX];
} workload_t;

struct workload_ops {
    const char *name;         /* "fmnist-mlp" */
    const char *doc;          /* one line for --help */
    /* Build the model (parameters initialised from s->seed) and load its data. */
    int (*create)(const wl_settings_t *s, workload_t **out, char *err, size_t errlen);
    /*
     * Gradient of the MEAN loss over the training samples idx[0..n) into
     * w->grads (overwritten, not accumulated), at the current w->params.
     * *loss gets the mean loss of the batch and *correct the number of
     * samples predicted right (both may be NULL).
     */
    int (*train_step)(workload_t *w, const uint32_t *idx, int n, double *loss, int *correct,
                      char *err, size_t errlen);
    /* Mean loss and accuracy (0..1) over the whole test set at w->params. */
    int (*evaluate)(workload_t *w, double *loss, double *accuracy, char *err, size_t errlen);
    /*
     * One part of the test set, for peers that evaluate together: the test
     * samples i with i mod nparts == part. *loss_sum gets the sum of their
     * losses, *correct the number predicted right, *count how many there were.
     */
    int (*evaluate_part)(workload_t *w, size_t part, size_t nparts, double *loss_sum,
                         size_t *correct, size_t *count, char *err, size_t errlen);
    void (*destroy)(workload_t *w);
};

/* The workload called name, or NULL. */
const workload_ops_t *workload_find(const char *name);

/* Every workload, NULL-terminated (for --help and error messages). */
const workload_ops_t *const *workload_list(void);

#endif /* RING_WORKLOAD_H */
