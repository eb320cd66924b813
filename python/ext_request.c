/*
 * ext_request.c - _ringd.Request: one started collective and the buffers it uses.
 *
 * The request holds its buffers (numpy views, torch tensors) and its Comm
 * until it has been waited for: libringd writes into them until then. Its
 * result is stored under the comm's lock by the thread that waits, so a
 * second thread waiting on the same request finds it there instead of
 * waiting on a released ring_request_t. ring_request_wait is called with the
 * GIL released; it returns within the timeout setting when a peer dies.
 * ext.h says which locks a wait holds.
 */
#include "ext.h"

#include <stdio.h>
#include <string.h>

ringpy_request_t *ringpy_request_new(ringpy_comm_t *comm, const char *op)
{
    ringpy_request_t *r = PyObject_New(ringpy_request_t, &ringpy_request_type);

    if (r == NULL)
        return NULL;
    Py_INCREF(comm);
    r->comm = comm;
    r->req = NULL;
    memset(r->bufs, 0, sizeof(r->bufs));
    r->nbufs = 0;
    r->counts = NULL;
    r->has_stream = 0;
    r->stream = NULL;
    r->device_pending = 0;
    r->op = op;
    r->waiting = 0;
    r->finished = 0;
    r->status = RING_OK;
    r->msg[0] = '\0';
    return r;
}

int ringpy_request_set_stream(ringpy_request_t *r, PyObject *obj, const char *what)
{
    unsigned long long v;

    if (obj == Py_None)
        return 0;
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: stream must be None or an int (a cudaStream_t's "
                     "value: torch.cuda.Stream.cuda_stream, the CUDA array interface's "
                     "'stream'), not %s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: stream %R is not a pointer-sized unsigned value",
                     what, obj);
        return -1;
    }
    if ((unsigned long long)(uintptr_t)v != v) {
        PyErr_Format(PyExc_ValueError, "%s: stream %R does not fit a pointer", what, obj);
        return -1;
    }
    r->has_stream = 1;
    r->stream = (ring_stream_t)(uintptr_t)v;
    return 0;
}

/* Drop what the finished request held (with the GIL). */
static void request_release(ringpy_request_t *r)
{
    for (int i = 0; i < r->nbufs; i++)
        ringpy_buf_release(&r->bufs[i]);
    r->nbufs = 0;
    PyMem_RawFree(r->counts);
    r->counts = NULL;
}

/* A request that can no longer be waited for: its communicator was closed. */
static void request_cancel_locked(ringpy_request_t *r)
{
    r->status = RING_ERR_CANCELED;
    snprintf(r->msg, sizeof(r->msg),
             "%s canceled: the communicator was closed (ringd.shutdown) before it finished",
             r->op);
    r->req = NULL;
    r->finished = 1;
}

/* Keep the outcome of ring_request_wait (under the comm's lock). */
static void request_done_locked(ringpy_request_t *r, ring_status_t st, const char *msg)
{
    r->status = st;
    if (st != RING_OK)
        snprintf(r->msg, sizeof(r->msg), "%s", msg);
    r->req = NULL;
    r->finished = 1;
    r->comm->live--;
    pthread_cond_broadcast(&r->comm->done);
}

/*
 * Wait for r without the GIL. Without libringd's progress thread the wait
 * drives the ring and holds the comm's lock throughout. With it, the lock
 * is dropped while ring_request_wait sleeps (libringd serialises calls
 * itself), and the read side of `closing` keeps close away meanwhile. A
 * second thread waiting for the same request sleeps until the first is done.
 */
static ring_status_t request_wait_req(ringpy_request_t *r, int blocking)
{
    ring_status_t st;

    if (!r->has_stream || blocking)
        return ring_request_wait(r->req);
    st = ring_request_wait_stream(r->req, r->stream);
    if (st == RING_OK)
        r->device_pending = 1;
    return st;
}

static void request_finish_nogil(ringpy_request_t *r, int blocking)
{
    ringpy_comm_t *c = r->comm;
    char msg[RINGPY_MSG_MAX] = "";
    ring_status_t st;

    pthread_rwlock_rdlock(&c->closing);
    pthread_mutex_lock(&c->lock);
    while (r->waiting && !r->finished)
        pthread_cond_wait(&c->done, &c->lock);
    if (!r->finished && (c->comm == NULL || r->req == NULL)) {
        request_cancel_locked(r);
    } else if (!r->finished && !c->threaded) {
        st = request_wait_req(r, blocking);
        request_done_locked(r, st, st != RING_OK ? ring_last_error() : "");
    } else if (!r->finished) {
        r->waiting = 1;
        pthread_mutex_unlock(&c->lock);
        st = request_wait_req(r, blocking);
        if (st != RING_OK)
            snprintf(msg, sizeof(msg), "%s", ring_last_error());
        pthread_mutex_lock(&c->lock);
        r->waiting = 0;
        request_done_locked(r, st, msg);
    }
    pthread_mutex_unlock(&c->lock);
    pthread_rwlock_unlock(&c->closing);
}

/* Wait for r (GIL released), keep its result, release its buffers. blocking: the host
 * waits for the device too (ring_request_wait), else a request started with a stream is
 * waited for with ring_request_wait_stream (the stream waits on the device). */
static void request_finish(ringpy_request_t *r, int blocking)
{
    if (!r->finished) {
        Py_BEGIN_ALLOW_THREADS
        request_finish_nogil(r, blocking);
        Py_END_ALLOW_THREADS
    }
    request_release(r);
}

PyObject *ringpy_request_start(ringpy_request_t *r, ringpy_start_fn fn, void *arg)
{
    ring_status_t st = RING_ERR_CANCELED;
    char msg[RINGPY_MSG_MAX] = "";

    if (ringpy_comm_check_free(r->comm) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&r->comm->lock);
    if (r->comm->comm != NULL) {
        st = fn(r->comm->comm, r, arg);
        if (st != RING_OK)
            snprintf(msg, sizeof(msg), "%s", ring_last_error());
        else
            r->comm->live++;
    } else {
        snprintf(msg, sizeof(msg), "the communicator was closed (ringd.shutdown)");
    }
    pthread_mutex_unlock(&r->comm->lock);
    Py_END_ALLOW_THREADS
    if (st != RING_OK) {
        r->finished = 1; /* nothing to wait for */
        Py_DECREF(r);
        return ringpy_raise(st, msg, RINGPY_IN_CALL);
    }
    return (PyObject *)r;
}

static PyObject *request_wait(ringpy_request_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"blocking", NULL};
    int blocking = 0;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:wait", kwlist, &blocking))
        return NULL;
    request_finish(self, blocking);
    if (self->status != RING_OK)
        return ringpy_raise(self->status, self->msg, RINGPY_IN_CALL);
    Py_RETURN_NONE;
}

/* Progress without blocking; True once the request has finished (well or not). */
static PyObject *request_test(ringpy_request_t *self, PyObject *unused)
{
    int done = 0;

    if (self->finished)
        Py_RETURN_TRUE;
    /* never blocks: while another thread is inside a call (a wait, say) the answer is
     * "not yet" */
    Py_BEGIN_ALLOW_THREADS
    if (pthread_mutex_trylock(&self->comm->lock) == 0) {
        if (self->finished || self->comm->comm == NULL || self->req == NULL)
            done = 1;
        else if (!self->waiting) /* (being waited for: ring_request_wait owns it) */
            (void)ring_request_test(self->req, &done); /* a failure shows in wait() */
        pthread_mutex_unlock(&self->comm->lock);
    }
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(done);
}

static void request_dealloc(ringpy_request_t *self)
{
    /* never free buffers libringd may still write: wait first (ringd/_runtime.py keeps
     * handles alive until they are waited for, so this is for direct users of _ringd);
     * blocking, since the buffers are dropped right after */
    request_finish(self, 1);
    Py_CLEAR(self->comm);
    PyObject_Free(self);
}

static PyObject *request_get_finished(ringpy_request_t *self, void *closure)
{
    return PyBool_FromLong(self->finished);
}

static PyObject *request_get_stream(ringpy_request_t *self, void *closure)
{
    if (!self->has_stream)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)self->stream);
}

static PyObject *request_get_device_pending(ringpy_request_t *self, void *closure)
{
    return PyBool_FromLong(self->device_pending);
}

static PyObject *request_get_op(ringpy_request_t *self, void *closure)
{
    return PyUnicode_FromString(self->op);
}

static PyMethodDef request_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))request_wait, METH_VARARGS | METH_KEYWORDS,
     "wait(blocking=False): block (GIL released, bounded by the timeout setting) until the "
     "request finishes; raise its error if it failed. A request started with a CUDA stream "
     "is waited for with ring_request_wait_stream (the stream waits for the result on the "
     "device, the host does not) unless blocking=True (ring_request_wait: the result is in "
     "the buffer when this returns)."},
    {"test", (PyCFunction)request_test, METH_NOARGS,
     "Make progress without blocking; True once finished (its error, if any, is raised by "
     "wait()); False while another thread is inside a call on the communicator."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef request_getset[] = {
    {"finished", (getter)request_get_finished, NULL, "True once waited for", NULL},
    {"op", (getter)request_get_op, NULL, "the collective's name", NULL},
    {"stream", (getter)request_get_stream, NULL,
     "the CUDA stream it was started with (an int), or None", NULL},
    {"device_pending", (getter)request_get_device_pending, NULL,
     "True once waited for on its stream (the device may still be writing the result; work "
     "queued on that stream afterwards sees it)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ringpy_request_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringd._ringd.Request",
    .tp_basicsize = sizeof(ringpy_request_t),
    .tp_dealloc = (destructor)request_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A started collective (made by Comm.*_start): wait() and test().",
    .tp_methods = request_methods,
    .tp_getset = request_getset,
};
