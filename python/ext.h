/*
 * ext.h - what the parts of the _ringd extension share.
 *
 * _ringd is the thin C layer of the Python package `ringd` (python/ringd/):
 * a Config (ring_config_t by name), a Comm (ring_comm_t behind a mutex), a
 * Request (ring_request_t plus the buffers it uses) and an SSP session. Tensors reach it as
 * objects with the buffer protocol (numpy arrays) or as descriptors the
 * Python layer makes for torch tensors; ringd/_runtime.py keeps the order
 * of requests and the handles. Only libringd's public API is used.
 *
 * Threads: every call into a communicator runs with the GIL released and
 * the Comm's mutex held, so a wait never blocks other Python threads, and
 * two threads never call into one ring_comm_t at once. The mutex is always
 * taken without the GIL and dropped before taking the GIL back (never the
 * other way round), so the two locks cannot deadlock.
 *
 * With libringd's progress thread (progress-thread on, ringd.init's default)
 * a wait does not hold the mutex while it sleeps: libringd serialises calls
 * itself then and its thread drives the requests, so another Python thread
 * can start the next collective meanwhile (a framework's backward pass
 * starting bucket after bucket). A read-write lock keeps close from freeing
 * the communicator under such a wait. Without the progress thread the wait
 * itself drives the ring, and holds the mutex.
 */
#ifndef RINGPY_EXT_H
#define RINGPY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stddef.h>
#include <ringd/ringd.h>
#include <ringd/launch.h>

#define RINGPY_MSG_MAX 1024 /* ring_last_error()'s buffer is this long */

/* ---- ext_errors.c: ring_status_t -> the ringd.Error hierarchy ---- */

/* Where a failure happened; the Python factory picks ConfigError for RING_ERR_INVALID
 * in "config" and "open". */
typedef enum ringpy_where { RINGPY_IN_CONFIG, RINGPY_IN_OPEN, RINGPY_IN_CALL } ringpy_where_t;

/* Raise the ringd exception for status with msg (ring_last_error() text); returns NULL. */
PyObject *ringpy_raise(ring_status_t status, const char *msg, ringpy_where_t where);
/* Add STATUS_NAMES and set_error_factory's state to the module; -1 on error. */
int ringpy_errors_init(PyObject *module);
PyObject *ringpy_set_error_factory(PyObject *self, PyObject *factory);
PyObject *ringpy_status_name(PyObject *self, PyObject *arg);

/* ---- ext_config.c: the settings, by name ---- */
typedef struct ringpy_config {
    PyObject_HEAD
    ring_config_t *cfg; /* ring_config_new(); never NULL once made */
} ringpy_config_t;

extern PyTypeObject ringpy_config_type;
PyObject *ringpy_setting_names(PyObject *self, PyObject *unused);

/* ---- ext_buffer.c: tensors as (pointer, bytes, dtype) ---- */
typedef enum ringpy_kind {
    RINGPY_F32 = RING_FLOAT32,
    RINGPY_F16 = RING_FLOAT16,
    RINGPY_BF16 = RING_BFLOAT16,
    RINGPY_OTHER = -1, /* bytes only: broadcast and allgather */
} ringpy_kind_t;

typedef struct ringpy_buf {
    Py_buffer view;   /* held for numpy arrays and other buffer exporters */
    int has_view;
    PyObject *owner;  /* a torch tensor (strong reference), from a descriptor */
    char *ptr;
    size_t nbytes;
    size_t itemsize;
    ringpy_kind_t kind;
    char dtype[32];   /* for messages: "float32", "int64", "format 'O'" */
} ringpy_buf_t;

/*
 * Get obj's memory for a collective: an object with the buffer protocol
 * (C-contiguous, writable when asked, not of objects), or a descriptor
 * (owner, data_ptr, nbytes, itemsize, dtype name) from ringd/_tensor.py.
 * what names the argument in messages ("allreduce: tensor"). Raises
 * TypeError or ValueError and returns -1; on success b holds a reference
 * until ringpy_buf_release.
 */
int ringpy_buf_get(PyObject *obj, const char *what, int writable, ringpy_buf_t *b);
void ringpy_buf_release(ringpy_buf_t *b);
/* -1 with ValueError when a and b overlap (without being the same bytes when same_ok). */
int ringpy_buf_check_overlap(const ringpy_buf_t *a, const ringpy_buf_t *b, const char *what,
                             int same_ok);
/* -1 with TypeError unless b is float32, float16 or bfloat16. */
int ringpy_buf_check_float(const ringpy_buf_t *b, const char *what);

/* ---- ext_comm.c: the communicator behind its mutex ---- */
typedef struct ringpy_comm {
    PyObject_HEAD
    ring_comm_t *comm;     /* NULL once closed */
    pthread_mutex_t lock;  /* held (without the GIL) around every call into comm */
    pthread_cond_t done;   /* with lock: a request finished (for a second waiter) */
    pthread_rwlock_t closing; /* read: a wait outside lock; write: close */
    int rank, size;
    int threaded;          /* libringd's progress thread runs (progress-thread on) */
    int thread_on;         /* the progress-thread setting (a shrunk or grown ring keeps it) */
    unsigned live;         /* requests started and not yet waited for */
    ring_ssp_t *ssp;       /* an open SSP session owns the ring (ext_ssp.c), or NULL */
} ringpy_comm_t;

extern PyTypeObject ringpy_comm_type;

/* ---- ext_elastic.c: shrink (and grow) the ring in place (ringd/elastic.h) ---- */
PyObject *ringpy_comm_shrink(ringpy_comm_t *self, PyObject *unused);
PyObject *ringpy_comm_grow(ringpy_comm_t *self, PyObject *unused);
PyObject *ringpy_comm_parent_rank(ringpy_comm_t *self, PyObject *arg);
PyObject *ringpy_comm_get_shrink_report(ringpy_comm_t *self, void *closure);
PyObject *ringpy_comm_get_joined(ringpy_comm_t *self, void *closure);

/* ---- ext_request.c: one started collective and the buffers it uses ---- */
typedef struct ringpy_request {
    PyObject_HEAD
    ringpy_comm_t *comm;   /* strong reference */
    ring_request_t *req;   /* NULL once waited for (or its comm closed) */
    ringpy_buf_t bufs[2];
    int nbufs;
    size_t *counts;        /* allgatherv's per-rank byte counts, alive until done */
    int has_stream;        /* started by ring_allreduce_start_stream (a CUDA stream given) */
    ring_stream_t stream;  /* that stream (a cudaStream_t as an integer from Python) */
    int device_pending;    /* finished by ring_request_wait_stream: the result is ordered on
                            * `stream`, the host did not wait for the device */
    const char *op;        /* "allreduce", "broadcast", ... */
    /* set under the comm's lock by whichever thread waits */
    int waiting;           /* a thread is in ring_request_wait for it (threaded comm) */
    int finished;
    ring_status_t status;
    char msg[RINGPY_MSG_MAX]; /* ring_last_error() when it failed */
} ringpy_request_t;

extern PyTypeObject ringpy_request_type;

/* A new request of comm for op; the caller fills bufs and starts it with ringpy_request_start. */
ringpy_request_t *ringpy_request_new(ringpy_comm_t *comm, const char *op);

/* The start function of one collective, called with the comm's lock held. */
typedef ring_status_t (*ringpy_start_fn)(ring_comm_t *comm, ringpy_request_t *r, void *arg);

/* obj (None, or an int: a cudaStream_t's value) into r->stream; -1 with an error. */
int ringpy_request_set_stream(ringpy_request_t *r, PyObject *obj, const char *what);

/* Start r: fn runs without the GIL under the comm's lock; on failure raises, drops r and
 * returns NULL, else returns r. */
PyObject *ringpy_request_start(ringpy_request_t *r, ringpy_start_fn fn, void *arg);

/* The Comm methods that start collectives (collectives.c). */
PyObject *ringpy_comm_allreduce_start(ringpy_comm_t *self, PyObject *args, PyObject *kw);
PyObject *ringpy_comm_reduce_scatter_start(ringpy_comm_t *self, PyObject *args, PyObject *kw);
PyObject *ringpy_comm_broadcast_start(ringpy_comm_t *self, PyObject *args, PyObject *kw);
PyObject *ringpy_comm_allgather_start(ringpy_comm_t *self, PyObject *args, PyObject *kw);
PyObject *ringpy_comm_barrier_start(ringpy_comm_t *self, PyObject *unused);

/* ---- ext_comm_state.c: what a Comm's users check and change of its state ---- */
/* -1 with ringd's "not initialized" error when comm is closed. */
int ringpy_comm_check_open(const ringpy_comm_t *comm);
/* As check_open, and -1 with InvalidError while an SSP session owns the ring. */
int ringpy_comm_check_free(const ringpy_comm_t *comm);
/* Close comm's open SSP session (comm->ssp, not NULL) with the GIL released: the SSP
 * object is closing, or the Comm is (the session's engine thread must stop first). */
void ringpy_comm_end_session(ringpy_comm_t *comm);
/* A Comm of type with its locks made and no communicator yet (NULL with an error). */
ringpy_comm_t *ringpy_comm_alloc(PyTypeObject *type);
/* Give self the open communicator comm (its rank, size, and whether a thread drives it). */
void ringpy_comm_adopt(ringpy_comm_t *self, ring_comm_t *comm, int thread_on);

/* ---- ext_ssp.c: a bounded-staleness session over a Comm ---- */
extern PyTypeObject ringpy_ssp_type;

#endif /* RINGPY_EXT_H */
