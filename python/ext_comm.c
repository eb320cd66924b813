/*
 * ext_comm.c - _ringd.Comm: a connected ring_comm_t behind a mutex.
 *
 * Opening blocks until the ring is up (bounded by connect-timeout) with the
 * GIL released. Every later call into the communicator takes self->lock
 * without the GIL (ext.h says why in that order); the collectives that start
 * requests are in ext_collectives.c, the requests in ext_request.c, and what
 * those and the SSP session check of a Comm (open, free) in ext_comm_state.c.
 */
#include "ext.h"

#include <stdio.h>
#include <string.h>

static PyObject *comm_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"config", NULL};
    ringpy_config_t *cfg;
    ringpy_comm_t *self;
    ring_comm_t *comm = NULL;
    ring_status_t st;
    char msg[RINGPY_MSG_MAX] = "";
    char word[8] = "";
    int thread_on;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!:Comm", kwlist, &ringpy_config_type, &cfg))
        return NULL;
    /* by name, as a binding reads a config (config.h): not the struct's field */
    thread_on = ring_config_get(cfg->cfg, "progress-thread", word, sizeof(word)) == RING_OK &&
                strcmp(word, "on") == 0;
    self = ringpy_comm_alloc(type);
    if (self == NULL)
        return NULL;
    Py_INCREF(cfg); /* nobody frees it while the GIL is released */
    Py_BEGIN_ALLOW_THREADS
    st = ring_comm_open(cfg->cfg, &comm);
    if (st != RING_OK)
        snprintf(msg, sizeof(msg), "%s", ring_last_error());
    Py_END_ALLOW_THREADS
    Py_DECREF(cfg);
    if (st != RING_OK) {
        Py_DECREF(self);
        return ringpy_raise(st, msg, RINGPY_IN_OPEN);
    }
    ringpy_comm_adopt(self, comm, thread_on);
    return (PyObject *)self;
}

/* Close with the GIL released (the goodbye to the neighbours may linger a moment),
 * once the waits in flight outside the mutex have returned (within the timeout). */
static void comm_close_now(ringpy_comm_t *self)
{
    Py_BEGIN_ALLOW_THREADS
    if (self->ssp != NULL)
        ringpy_comm_end_session(self); /* its engine thread uses the ring: stop it first */
    pthread_rwlock_wrlock(&self->closing);
    pthread_mutex_lock(&self->lock);
    ring_comm_close(self->comm); /* cancels what is still pending */
    self->comm = NULL;
    self->live = 0;
    pthread_cond_broadcast(&self->done);
    pthread_mutex_unlock(&self->lock);
    pthread_rwlock_unlock(&self->closing);
    Py_END_ALLOW_THREADS
}

static void comm_dealloc(ringpy_comm_t *self)
{
    if (self->comm != NULL)
        comm_close_now(self);
    pthread_rwlock_destroy(&self->closing);
    pthread_cond_destroy(&self->done);
    pthread_mutex_destroy(&self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *comm_close(ringpy_comm_t *self, PyObject *unused)
{
    if (self->comm != NULL)
        comm_close_now(self);
    Py_RETURN_NONE;
}

/* One of the communicator's strings, read under the lock. */
static PyObject *comm_string(ringpy_comm_t *self, const char *(*fn)(const ring_comm_t *))
{
    char buf[1024] = "";

    if (ringpy_comm_check_open(self) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    if (self->comm != NULL)
        snprintf(buf, sizeof(buf), "%s", fn(self->comm));
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    return PyUnicode_FromString(buf);
}

static PyObject *comm_transport(ringpy_comm_t *self, PyObject *unused)
{
    return comm_string(self, ring_comm_transport);
}

static PyObject *comm_ring_order(ringpy_comm_t *self, PyObject *unused)
{
    return comm_string(self, ring_comm_ring_order);
}

static PyObject *comm_autotune_report(ringpy_comm_t *self, PyObject *unused)
{
    return comm_string(self, ring_comm_autotune_report);
}

static PyObject *comm_stats(ringpy_comm_t *self, PyObject *unused)
{
    ring_comm_stats_t s;
    ring_status_t st = RING_ERR_INVALID;

    if (ringpy_comm_check_open(self) < 0)
        return NULL;
    memset(&s, 0, sizeof(s));
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    if (self->comm != NULL)
        st = ring_comm_get_stats(self->comm, &s);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    if (st != RING_OK)
        return ringpy_raise(st, "ring_comm_get_stats failed", RINGPY_IN_CALL);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d}", "allreduces",
                         (unsigned long long)s.allreduces, "rd_allreduces",
                         (unsigned long long)s.rd_allreduces, "rh_allreduces",
                         (unsigned long long)s.rh_allreduces, "rh_max_bytes",
                         (unsigned long long)s.rh_max_bytes, "direct_allreduces",
                         (unsigned long long)s.direct_allreduces, "rd_max_bytes",
                         (unsigned long long)s.rd_max_bytes, "frames_sent",
                         (unsigned long long)s.frames_sent, "payload_bytes",
                         (unsigned long long)s.payload_bytes, "raw_bytes",
                         (unsigned long long)s.raw_bytes, "frames_lz4",
                         (unsigned long long)s.frames_lz4, "wait_s", s.wait_s);
}

static PyObject *edge_dict(const ring_edge_report_t *e)
{
    return Py_BuildValue("{s:i,s:i,s:s,s:s,s:s,s:s,s:d,s:d,s:d,s:n,s:i,s:O}", "from_rank",
                         e->from_rank, "to_rank", e->to_rank, "from_host", e->from_host,
                         "to_host", e->to_host, "from_addr", e->from_addr, "to_addr", e->to_addr,
                         "bytes_per_s", e->bytes_per_s, "latency_s", e->latency_s,
                         "median_ratio", e->median_ratio, "burst_bytes",
                         (Py_ssize_t)e->burst_bytes, "bursts", e->bursts, "slow",
                         e->slow ? Py_True : Py_False);
}

/* The ring doctor (ring_comm_doctor): a collective, every peer at the same point. */
static PyObject *comm_doctor(ringpy_comm_t *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"bytes", NULL};
    Py_ssize_t bytes = 0;
    ring_edge_report_t *edges;
    ring_status_t st = RING_ERR_CANCELED;
    char msg[RINGPY_MSG_MAX] = "the communicator was closed";
    PyObject *list;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|n:doctor", kwlist, &bytes))
        return NULL;
    if (bytes < 0) {
        PyErr_SetString(PyExc_ValueError, "doctor: bytes must be >= 0 (0 = the default)");
        return NULL;
    }
    if (ringpy_comm_check_free(self) < 0)
        return NULL;
    edges = PyMem_RawCalloc((size_t)self->size, sizeof(*edges));
    if (edges == NULL)
        return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    if (self->comm != NULL) {
        st = ring_comm_doctor(self->comm, (size_t)bytes, edges);
        if (st != RING_OK)
            snprintf(msg, sizeof(msg), "%s", ring_last_error());
    }
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    if (st != RING_OK) {
        PyMem_RawFree(edges);
        return ringpy_raise(st, msg, RINGPY_IN_CALL);
    }
    list = PyList_New(self->size);
    for (int i = 0; list != NULL && i < self->size; i++) {
        PyObject *d = edge_dict(&edges[i]);
        if (d == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, d);
    }
    PyMem_RawFree(edges);
    return list;
}

static PyObject *comm_get_rank(ringpy_comm_t *self, void *closure)
{
    return PyLong_FromLong(self->rank);
}

static PyObject *comm_get_size(ringpy_comm_t *self, void *closure)
{
    return PyLong_FromLong(self->size);
}

static PyObject *comm_get_closed(ringpy_comm_t *self, void *closure)
{
    return PyBool_FromLong(self->comm == NULL);
}

static PyObject *comm_get_threaded(ringpy_comm_t *self, void *closure)
{
    return PyBool_FromLong(self->threaded);
}

static PyObject *comm_get_live(ringpy_comm_t *self, void *closure)
{
    return PyLong_FromUnsignedLong(self->live);
}

/* The ring_comm_t * as an int, for C code in the same process that calls libringd on this
 * ring itself (tools/experiments/tf-bridge.py's TensorFlow custom op). Not locked: only
 * while no other call is in flight on the ring. */
static PyObject *comm_address(ringpy_comm_t *self, PyObject *unused)
{
    if (ringpy_comm_check_free(self) < 0)
        return NULL;
    return PyLong_FromVoidPtr(self->comm);
}

static PyMethodDef comm_methods[] = {
    {"_address", (PyCFunction)comm_address, METH_NOARGS,
     "The ring_comm_t * as an int (for C in this process; unlocked)."},
    {"close", (PyCFunction)comm_close, METH_NOARGS,
     "Leave the ring: tell the neighbours, cancel pending requests, free it."},
    {"transport", (PyCFunction)comm_transport, METH_NOARGS, "'tcp' or 'verbs'."},
    {"ring_order", (PyCFunction)comm_ring_order, METH_NOARGS, "The ring's order by host."},
    {"autotune_report", (PyCFunction)comm_autotune_report, METH_NOARGS,
     "What --autotune chose ('' when it did not run)."},
    {"stats", (PyCFunction)comm_stats, METH_NOARGS, "Counters since the ring opened (a dict)."},
    {"doctor", (PyCFunction)(void (*)(void))comm_doctor, METH_VARARGS | METH_KEYWORDS,
     "doctor(bytes=0) -> one dict per ring edge (ring_comm_doctor); every peer calls it."},
    {"allreduce_start", (PyCFunction)(void (*)(void))ringpy_comm_allreduce_start,
     METH_VARARGS | METH_KEYWORDS,
     "allreduce_start(send, recv=None, op=0, exact=False, tensor_id=0) -> Request"},
    {"reduce_scatter_start", (PyCFunction)(void (*)(void))ringpy_comm_reduce_scatter_start,
     METH_VARARGS | METH_KEYWORDS,
     "reduce_scatter_start(send, recv, op=0, exact=False, tensor_id=0) -> Request"},
    {"broadcast_start", (PyCFunction)(void (*)(void))ringpy_comm_broadcast_start,
     METH_VARARGS | METH_KEYWORDS, "broadcast_start(buf, root, tensor_id=0) -> Request"},
    {"allgather_start", (PyCFunction)(void (*)(void))ringpy_comm_allgather_start,
     METH_VARARGS | METH_KEYWORDS,
     "allgather_start(send, recv, counts=None, tensor_id=0) -> Request; counts: bytes per "
     "rank (allgatherv)"},
    {"barrier_start", (PyCFunction)ringpy_comm_barrier_start, METH_NOARGS,
     "barrier_start() -> Request"},
    {"shrink", (PyCFunction)ringpy_comm_shrink, METH_NOARGS,
     "shrink() -> Comm: after a call failed naming a lost peer, every survivor calls it; the "
     "new ring of the survivors, renumbered 0..k-1 in ring order (ring_comm_shrink). This "
     "one must then only be closed (its requests still wait, failing at once)."},
    {"parent_rank", (PyCFunction)ringpy_comm_parent_rank, METH_O,
     "parent_rank(rank) -> the rank `rank` had in the ring this one was shrunk (or grown) "
     "from; -1 when it was not, or for a peer that joined (ring_comm_parent_rank)."},
    {"grow", (PyCFunction)ringpy_comm_grow, METH_NOARGS,
     "grow() -> Comm: at a commit point of an elastic ring every member calls it, with no "
     "request in flight; itself when nobody joined, else the ring with the joiners after "
     "the members (ring_comm_grow), and this one must then only be closed."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef comm_getset[] = {
    {"rank", (getter)comm_get_rank, NULL, "this peer's rank", NULL},
    {"size", (getter)comm_get_size, NULL, "the number of peers", NULL},
    {"closed", (getter)comm_get_closed, NULL, "True after close()", NULL},
    {"live", (getter)comm_get_live, NULL, "requests started and not waited for", NULL},
    {"threaded", (getter)comm_get_threaded, NULL,
     "True when libringd's progress thread drives the requests", NULL},
    {"shrink_report", (getter)ringpy_comm_get_shrink_report, NULL,
     "how this ring came to be (ring_comm_shrink_report): '' unless made by shrink()", NULL},
    {"joined", (getter)ringpy_comm_get_joined, NULL,
     "True when this peer joined a running ring (ring_comm_joined): it has no state yet", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ringpy_comm_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringd._ringd.Comm",
    .tp_basicsize = sizeof(ringpy_comm_t),
    .tp_dealloc = (destructor)comm_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Comm(config): this peer's place in the ring (ring_comm_open); blocks until "
              "the ring is connected.",
    .tp_methods = comm_methods,
    .tp_getset = comm_getset,
    .tp_new = comm_new,
};
