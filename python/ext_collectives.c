/*
 * ext_collectives.c - the Comm methods that start a collective: check the
 * buffers' sizes and dtypes here, where a wrong size would become a write
 * past the end, then start the request under the comm's lock.
 *
 * Sizes follow comm.h: allreduce in place or into a buffer of the same
 * size; reduce-scatter from size*count elements into count (block `rank`);
 * broadcast in place from root; allgather from bytes into size*bytes (rank r
 * at r*bytes), or allgatherv with per-rank byte counts.
 */
#include "ext.h"

#include <string.h>

typedef struct start_args {
    const void *send;
    void *recv;
    size_t count;  /* elements (reductions) or bytes (the others) */
    int dtype, op, root;
    unsigned flags;
    uint32_t tensor_id;
} start_args_t;

static int check_op(int op, const char *what)
{
    if (op == RING_SUM || op == RING_AVG)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s: op %d is not RING_SUM (0) or RING_AVG (1)", what, op);
    return -1;
}

/* The input and output of a reduction: same float dtype; in place when recv is None. */
static int get_reduce_bufs(ringpy_request_t *r, PyObject *send, PyObject *recv, const char *op)
{
    char what[64];

    snprintf(what, sizeof(what), "%s: tensor", op);
    if (recv == Py_None || recv == send) {
        if (ringpy_buf_get(send, what, 1, &r->bufs[0]) < 0)
            return -1;
        r->nbufs = 1;
        return ringpy_buf_check_float(&r->bufs[0], what);
    }
    if (ringpy_buf_get(send, what, 0, &r->bufs[0]) < 0)
        return -1;
    r->nbufs = 1;
    if (ringpy_buf_check_float(&r->bufs[0], what) < 0)
        return -1;
    snprintf(what, sizeof(what), "%s: out", op);
    if (ringpy_buf_get(recv, what, 1, &r->bufs[1]) < 0)
        return -1;
    r->nbufs = 2;
    if (r->bufs[1].kind != r->bufs[0].kind) {
        PyErr_Format(PyExc_TypeError, "%s: out has dtype %s, the tensor %s: they must match", op,
                     r->bufs[1].dtype, r->bufs[0].dtype);
        return -1;
    }
    return ringpy_buf_check_overlap(&r->bufs[0], &r->bufs[1], op, 1);
}

static ring_status_t start_allreduce(ring_comm_t *comm, ringpy_request_t *r, void *arg)
{
    const start_args_t *a = arg;

    if (r->has_stream)
        return ring_allreduce_start_stream(comm, a->send, a->recv, a->count,
                                           (ring_dtype_t)a->dtype, (ring_op_t)a->op,
                                           a->tensor_id, a->flags, r->stream, &r->req);
    return ring_allreduce_start_flags(comm, a->send, a->recv, a->count, (ring_dtype_t)a->dtype,
                                      (ring_op_t)a->op, a->tensor_id, a->flags, &r->req);
}

PyObject *ringpy_comm_allreduce_start(ringpy_comm_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"send", "recv", "op", "exact", "tensor_id", "stream", NULL};
    PyObject *send, *recv = Py_None, *stream = Py_None;
    int op = RING_SUM, exact = 0;
    unsigned int tensor_id = 0;
    ringpy_request_t *r;
    start_args_t a;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OipIO:allreduce_start", kwlist, &send, &recv,
                                     &op, &exact, &tensor_id, &stream))
        return NULL;
    if (check_op(op, "allreduce") < 0 || ringpy_comm_check_free(self) < 0)
        return NULL;
    r = ringpy_request_new(self, "allreduce");
    if (r == NULL)
        return NULL;
    /* a CUDA stream (device buffers): libringd waits on the device for the work queued on it
     * before the call, and wait() orders the result on it (comm.h) */
    if (ringpy_request_set_stream(r, stream, "allreduce") < 0)
        goto fail;
    if (get_reduce_bufs(r, send, recv, "allreduce") < 0)
        goto fail;
    if (r->nbufs == 2 && r->bufs[1].nbytes != r->bufs[0].nbytes) {
        PyErr_Format(PyExc_ValueError, "allreduce: out has %zu bytes, the tensor %zu: they must "
                     "match", r->bufs[1].nbytes, r->bufs[0].nbytes);
        goto fail;
    }
    memset(&a, 0, sizeof(a));
    a.send = r->bufs[0].ptr;
    a.recv = r->bufs[r->nbufs - 1].ptr;
    a.count = r->bufs[0].nbytes / r->bufs[0].itemsize;
    a.dtype = r->bufs[0].kind;
    a.op = op;
    a.flags = exact ? RING_CALL_EXACT : 0;
    a.tensor_id = tensor_id;
    return ringpy_request_start(r, start_allreduce, &a);
fail:
    r->finished = 1;
    Py_DECREF(r);
    return NULL;
}

static ring_status_t start_reduce_scatter(ring_comm_t *comm, ringpy_request_t *r, void *arg)
{
    const start_args_t *a = arg;

    return ring_reduce_scatter_start(comm, a->send, a->recv, a->count, (ring_dtype_t)a->dtype,
                                     (ring_op_t)a->op, a->tensor_id, a->flags, &r->req);
}

PyObject *ringpy_comm_reduce_scatter_start(ringpy_comm_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"send", "recv", "op", "exact", "tensor_id", NULL};
    PyObject *send, *recv;
    int op = RING_SUM, exact = 0;
    unsigned int tensor_id = 0;
    ringpy_request_t *r;
    start_args_t a;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|ipI:reduce_scatter_start", kwlist, &send,
                                     &recv, &op, &exact, &tensor_id))
        return NULL;
    if (check_op(op, "reduce_scatter") < 0 || ringpy_comm_check_free(self) < 0)
        return NULL;
    if (recv == Py_None || recv == send) {
        PyErr_SetString(PyExc_ValueError, "reduce_scatter: the result needs its own tensor "
                        "(size times smaller than the input)");
        return NULL;
    }
    r = ringpy_request_new(self, "reduce_scatter");
    if (r == NULL)
        return NULL;
    if (get_reduce_bufs(r, send, recv, "reduce_scatter") < 0)
        goto fail;
    if (r->bufs[0].nbytes != (size_t)self->size * r->bufs[1].nbytes) {
        PyErr_Format(PyExc_ValueError, "reduce_scatter: the tensor has %zu bytes, out %zu: the "
                     "tensor must be world size (%d) times out", r->bufs[0].nbytes,
                     r->bufs[1].nbytes, self->size);
        goto fail;
    }
    memset(&a, 0, sizeof(a));
    a.send = r->bufs[0].ptr;
    a.recv = r->bufs[1].ptr;
    a.count = r->bufs[1].nbytes / r->bufs[1].itemsize;
    a.dtype = r->bufs[0].kind;
    a.op = op;
    a.flags = exact ? RING_CALL_EXACT : 0;
    a.tensor_id = tensor_id;
    return ringpy_request_start(r, start_reduce_scatter, &a);
fail:
    r->finished = 1;
    Py_DECREF(r);
    return NULL;
}

static ring_status_t start_broadcast(ring_comm_t *comm, ringpy_request_t *r, void *arg)
{
    const start_args_t *a = arg;

    return ring_broadcast_start(comm, a->recv, a->count, a->root, a->tensor_id, &r->req);
}

PyObject *ringpy_comm_broadcast_start(ringpy_comm_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"buf", "root", "tensor_id", NULL};
    PyObject *buf;
    int root;
    unsigned int tensor_id = 0;
    ringpy_request_t *r;
    start_args_t a;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|I:broadcast_start", kwlist, &buf, &root,
                                     &tensor_id))
        return NULL;
    if (ringpy_comm_check_free(self) < 0)
        return NULL;
    if (root < 0 || root >= self->size) {
        PyErr_Format(PyExc_ValueError, "broadcast: root %d is not a rank of this ring (0..%d)",
                     root, self->size - 1);
        return NULL;
    }
    r = ringpy_request_new(self, "broadcast");
    if (r == NULL)
        return NULL;
    if (ringpy_buf_get(buf, "broadcast: tensor", 1, &r->bufs[0]) < 0) {
        r->finished = 1;
        Py_DECREF(r);
        return NULL;
    }
    r->nbufs = 1;
    memset(&a, 0, sizeof(a));
    a.recv = r->bufs[0].ptr;
    a.count = r->bufs[0].nbytes;
    a.root = root;
    a.tensor_id = tensor_id;
    return ringpy_request_start(r, start_broadcast, &a);
}

static ring_status_t start_allgather(ring_comm_t *comm, ringpy_request_t *r, void *arg)
{
    const start_args_t *a = arg;

    if (r->counts != NULL)
        return ring_allgatherv_start(comm, a->send, a->recv, r->counts, a->tensor_id, &r->req);
    return ring_allgather_start(comm, a->send, a->recv, a->count, a->tensor_id, &r->req);
}

/* allgatherv's byte counts, one per rank, into r->counts; their sum in *total_p. */
static int get_counts(ringpy_request_t *r, PyObject *counts, int size, size_t *total_p)
{
    PyObject *seq = PySequence_Fast(counts, "allgather: counts must be a sequence of byte "
                                    "counts, one per rank");
    size_t total = 0;

    if (seq == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != size) {
        PyErr_Format(PyExc_ValueError, "allgather: %zd counts for a ring of %d: one per rank",
                     PySequence_Fast_GET_SIZE(seq), size);
        goto fail;
    }
    r->counts = PyMem_RawCalloc((size_t)size, sizeof(size_t));
    if (r->counts == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < size; i++) {
        Py_ssize_t c = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), PyExc_OverflowError);
        if (c == -1 && PyErr_Occurred())
            goto fail;
        if (c < 0) {
            PyErr_Format(PyExc_ValueError, "allgather: counts[%d] is %zd, below 0", i, c);
            goto fail;
        }
        r->counts[i] = (size_t)c;
        total += (size_t)c;
    }
    Py_DECREF(seq);
    *total_p = total;
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

PyObject *ringpy_comm_allgather_start(ringpy_comm_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"send", "recv", "counts", "tensor_id", NULL};
    PyObject *send, *recv, *counts = Py_None;
    unsigned int tensor_id = 0;
    ringpy_request_t *r;
    start_args_t a;
    size_t total;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OI:allgather_start", kwlist, &send, &recv,
                                     &counts, &tensor_id))
        return NULL;
    if (ringpy_comm_check_free(self) < 0)
        return NULL;
    r = ringpy_request_new(self, "allgather");
    if (r == NULL)
        return NULL;
    if (ringpy_buf_get(send, "allgather: tensor", 0, &r->bufs[0]) < 0)
        goto fail;
    r->nbufs = 1;
    if (ringpy_buf_get(recv, "allgather: out", 1, &r->bufs[1]) < 0)
        goto fail;
    r->nbufs = 2;
    /* in place (comm.h): the tensor is this rank's block of out */
    if (!(counts == Py_None && r->bufs[0].ptr == r->bufs[1].ptr + self->rank * r->bufs[0].nbytes &&
          r->bufs[1].nbytes == (size_t)self->size * r->bufs[0].nbytes) &&
        ringpy_buf_check_overlap(&r->bufs[0], &r->bufs[1], "allgather", 0) < 0)
        goto fail;
    if (counts == Py_None) {
        total = (size_t)self->size * r->bufs[0].nbytes;
    } else {
        if (get_counts(r, counts, self->size, &total) < 0)
            goto fail;
        if (r->counts[self->rank] != r->bufs[0].nbytes) {
            PyErr_Format(PyExc_ValueError, "allgather: counts[%d] (this rank) is %zu bytes, the "
                         "tensor has %zu", self->rank, r->counts[self->rank], r->bufs[0].nbytes);
            goto fail;
        }
    }
    if (r->bufs[1].nbytes != total) {
        PyErr_Format(PyExc_ValueError, "allgather: out has %zu bytes, the gathered tensors %zu",
                     r->bufs[1].nbytes, total);
        goto fail;
    }
    memset(&a, 0, sizeof(a));
    a.send = r->bufs[0].ptr;
    a.recv = r->bufs[1].ptr;
    a.count = r->bufs[0].nbytes;
    a.tensor_id = tensor_id;
    return ringpy_request_start(r, start_allgather, &a);
fail:
    r->finished = 1;
    Py_DECREF(r);
    return NULL;
}

static ring_status_t start_barrier(ring_comm_t *comm, ringpy_request_t *r, void *arg)
{
    return ring_barrier_start(comm, &r->req);
}

PyObject *ringpy_comm_barrier_start(ringpy_comm_t *self, PyObject *unused)
{
    ringpy_request_t *r;

    if (ringpy_comm_check_free(self) < 0)
        return NULL;
    r = ringpy_request_new(self, "barrier");
    if (r == NULL)
        return NULL;
    return ringpy_request_start(r, start_barrier, NULL);
}
