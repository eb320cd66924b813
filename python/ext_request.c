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
    r->op = op;
    r->waiting = 0;
    r->finished = 0;
    r->status = RING_OK;
    r->msg[0] = '\0';
    return r;
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
static void request_finish_nogil(ringpy_request_t *r)
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
        st = ring_request_wait(r->req);
        request_done_locked(r, st, st != RING_OK ? ring_last_error() : "");
    } else if (!r->finished) {
        r->waiting = 1;
        pthread_mutex_unlock(&c->lock);
        st = ring_request_wait(r->req);
        if (st != RING_OK)
            snprintf(msg, sizeof(msg), "%s", ring_last_error());
        pthread_mutex_lock(&c->lock);
        r->waiting = 0;
        request_done_locked(r, st, msg);
    }
    pthread_mutex_unlock(&c->lock);
    pthread_rwlock_unlock(&c->closing);
}

/* Wait for r (GIL released), keep its result, release its buffers. */
static void request_finish(ringpy_request_t *r)
{
    if (!r->finished) {
        Py_BEGIN_ALLOW_THREADS
        request_finish_nogil(r);
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

static PyObject *request_wait(ringpy_request_t *self, PyObject *unused)
{
    request_finish(self);
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
     * handles alive until they are waited for, so this is for direct users of _ringd) */
    request_finish(self);
    Py_CLEAR(self->comm);
    PyObject_Free(self);
}

static PyObject *request_get_finished(ringpy_request_t *self, void *closure)
{
    return PyBool_FromLong(self->finished);
}

static PyObject *request_get_op(ringpy_request_t *self, void *closure)
{
    return PyUnicode_FromString(self->op);
}

static PyMethodDef request_methods[] = {
    {"wait", (PyCFunction)request_wait, METH_NOARGS,
     "Block (GIL released, bounded by the timeout setting) until the request finishes; "
     "raise its error if it failed."},
    {"test", (PyCFunction)request_test, METH_NOARGS,
     "Make progress without blocking; True once finished (its error, if any, is raised by "
     "wait()); False while another thread is inside a call on the communicator."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef request_getset[] = {
    {"finished", (getter)request_get_finished, NULL, "True once waited for", NULL},
    {"op", (getter)request_get_op, NULL, "the collective's name", NULL},
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
