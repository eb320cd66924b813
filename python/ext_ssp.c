/*
 * ext_ssp.c - _ringd.SSP: a bounded-staleness session (include/ringd/ssp.h)
 * over a Comm and one flat float32 parameter buffer (a numpy array or a
 * torch tensor descriptor, held until close).
 *
 * While the session is open its engine thread owns the communicator: the
 * Comm refuses collectives (ringpy_comm_check_free) and closing the Comm
 * closes the session first. Every call that may wait runs with the GIL
 * released; the session is used by one Python thread (the trainer).
 */
#include "ext.h"

#include <stdio.h>
#include <string.h>

typedef struct ringpy_ssp {
    PyObject_HEAD
    ringpy_comm_t *comm;   /* strong reference */
    ring_ssp_t *s;         /* NULL once closed */
    ringpy_buf_t params;   /* held while open */
    int has_params;
    size_t count;
} ringpy_ssp_t;

static int lookup(const char *word, const char *const *names, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        if (strcmp(word, names[i]) == 0)
            return i;
    PyErr_Format(PyExc_ValueError, "SSP: %s '%s' is not one of the choices", what, word);
    return -1;
}

/* Raise the session's failure (ring_last_error was copied with the GIL released). */
static PyObject *raise_st(ring_status_t st, const char *msg)
{
    return ringpy_raise(st, msg, RINGPY_IN_CALL);
}

static int check_open(const ringpy_ssp_t *self)
{
    if (self->s != NULL && self->comm->ssp == self->s)
        return 0;
    ringpy_raise(RING_ERR_INVALID, "the SSP session is closed (close(), or its communicator "
                 "was closed)", RINGPY_IN_CALL);
    return -1;
}

static PyObject *ssp_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"comm", "params", "staleness", "lr", "momentum", "weight_decay",
                             "warmup_steps", "total_steps", "lr_schedule", "update",
                             "momentum_compensation", "stale_lr_scale", "staleness_scale",
                             "delay_compensation", "round_idle", "start_clock", "stop_at_steps",
                             "fresh_wait", "warmup_late", "round_gather", "fresh_late",
                             NULL};
    static const char *const schedules[] = {"constant", "cosine"};
    static const char *const updates[] = {"sum", "mean", "steps"};
    ring_ssp_options_t o;
    ringpy_comm_t *comm;
    PyObject *params;
    const char *schedule = "constant", *update = "sum";
    unsigned long long warmup = 0, total = 0, start = 0, stop_at = 0;
    int mc = 1, slr = 0, ss = 0, k;
    ringpy_ssp_t *self;
    ring_status_t st;
    char msg[RINGPY_MSG_MAX] = "";

    ring_ssp_options_init(&o);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O|ldddKKsspppddKKdddd", kwlist,
                                     &ringpy_comm_type, &comm, &params, &o.staleness, &o.lr,
                                     &o.momentum, &o.weight_decay, &warmup, &total, &schedule,
                                     &update, &mc, &slr, &ss, &o.delay_compensation,
                                     &o.round_idle_s, &start, &stop_at, &o.fresh_wait_s,
                                     &o.warmup_late, &o.gather_s, &o.fresh_late))
        return NULL;
    if ((k = lookup(schedule, schedules, 2, "lr_schedule")) < 0)
        return NULL;
    o.lr_schedule = (ring_lr_schedule_t)k;
    if ((k = lookup(update, updates, 3, "update")) < 0)
        return NULL;
    o.update = (ring_ssp_update_t)k;
    o.warmup_steps = warmup;
    o.total_steps = total;
    o.start_clock = start;
    o.stop_at_steps = stop_at;
    o.momentum_compensation = mc;
    o.stale_lr_scale = slr;
    o.staleness_scale = ss;
    if (ringpy_comm_check_free(comm) < 0)
        return NULL;
    self = (ringpy_ssp_t *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(comm);
    self->comm = comm;
    if (ringpy_buf_get(params, "SSP: params", 1, &self->params) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->has_params = 1;
    if (self->params.kind != RINGPY_F32) {
        PyErr_Format(PyExc_TypeError, "SSP: params must be float32, not %s (one flat buffer "
                     "of every parameter)", self->params.dtype);
        Py_DECREF(self);
        return NULL;
    }
    self->count = self->params.nbytes / sizeof(float);
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&comm->lock);
    st = comm->comm == NULL ? RING_ERR_INVALID
                            : ring_ssp_open(comm->comm, (float *)self->params.ptr, self->count,
                                            &o, &self->s);
    if (st != RING_OK)
        snprintf(msg, sizeof(msg), "%s", comm->comm == NULL ? "the communicator is closed"
                                                            : ring_last_error());
    else
        comm->ssp = self->s;
    pthread_mutex_unlock(&comm->lock);
    Py_END_ALLOW_THREADS
    if (st != RING_OK) {
        Py_DECREF(self);
        return raise_st(st, msg);
    }
    return (PyObject *)self;
}

static PyObject *ssp_wait(ringpy_ssp_t *self, PyObject *args)
{
    double timeout = 600;
    ring_ssp_step_t step;
    ring_status_t st;
    char msg[RINGPY_MSG_MAX] = "";

    if (!PyArg_ParseTuple(args, "|d", &timeout) || check_open(self) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ring_ssp_wait(self->s, timeout, &step);
    if (st != RING_OK)
        snprintf(msg, sizeof(msg), "%s", ring_last_error());
    Py_END_ALLOW_THREADS
    if (st != RING_OK)
        return raise_st(st, msg);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:d,s:d}", "clock", (unsigned long long)step.clock,
                         "min_clock", (unsigned long long)step.min_clock, "tau",
                         (unsigned long long)step.tau, "lag", (unsigned long long)step.lag,
                         "blocked_s", step.blocked_s, "fresh_s", step.fresh_s);
}

static PyObject *ssp_push(ringpy_ssp_t *self, PyObject *grad)
{
    ringpy_buf_t g;
    ring_status_t st;
    char msg[RINGPY_MSG_MAX] = "";

    if (check_open(self) < 0 || ringpy_buf_get(grad, "SSP.push: grad", 0, &g) < 0)
        return NULL;
    if (g.kind != RINGPY_F32 || g.nbytes != self->count * sizeof(float)) {
        PyErr_Format(PyExc_ValueError, "SSP.push: grad must be float32 with %zu elements, as "
                     "the parameters (got %s, %zu bytes)", self->count, g.dtype, g.nbytes);
        ringpy_buf_release(&g);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = ring_ssp_push(self->s, (const float *)g.ptr);
    if (st != RING_OK)
        snprintf(msg, sizeof(msg), "%s", ring_last_error());
    Py_END_ALLOW_THREADS
    ringpy_buf_release(&g);
    if (st != RING_OK)
        return raise_st(st, msg);
    Py_RETURN_NONE;
}

static PyObject *ssp_request_stop(ringpy_ssp_t *self, PyObject *unused)
{
    if (check_open(self) < 0)
        return NULL;
    (void)ring_ssp_request_stop(self->s);
    Py_RETURN_NONE;
}

static PyObject *ssp_finish(ringpy_ssp_t *self, PyObject *args)
{
    double timeout = 600;
    ring_status_t st;
    char msg[RINGPY_MSG_MAX] = "";

    if (!PyArg_ParseTuple(args, "|d", &timeout) || check_open(self) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ring_ssp_finish(self->s, timeout);
    if (st != RING_OK)
        snprintf(msg, sizeof(msg), "%s", ring_last_error());
    Py_END_ALLOW_THREADS
    if (st != RING_OK)
        return raise_st(st, msg);
    Py_RETURN_NONE;
}

/* read(params=None, velocity=None): copy the master parameters / momentum buffer */
static PyObject *ssp_read(ringpy_ssp_t *self, PyObject *args)
{
    PyObject *po = Py_None, *vo = Py_None;
    ringpy_buf_t b[2];
    int have[2] = {0, 0};
    PyObject *objs[2];

    if (!PyArg_ParseTuple(args, "|OO", &po, &vo) || check_open(self) < 0)
        return NULL;
    objs[0] = po;
    objs[1] = vo;
    for (int i = 0; i < 2; i++) {
        if (objs[i] == Py_None)
            continue;
        if (ringpy_buf_get(objs[i], "SSP.read", 1, &b[i]) < 0)
            goto fail;
        have[i] = 1;
        if (b[i].kind != RINGPY_F32 || b[i].nbytes != self->count * sizeof(float)) {
            PyErr_Format(PyExc_ValueError, "SSP.read: buffers must be float32 with %zu "
                         "elements", self->count);
            goto fail;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    (void)ring_ssp_read(self->s, have[0] ? (float *)b[0].ptr : NULL,
                        have[1] ? (float *)b[1].ptr : NULL);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 2; i++)
        if (have[i])
            ringpy_buf_release(&b[i]);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < 2; i++)
        if (have[i])
            ringpy_buf_release(&b[i]);
    return NULL;
}

static PyObject *hist_list(const uint64_t *h)
{
    PyObject *l = PyList_New(RING_SSP_TAU_BINS);

    for (int k = 0; l != NULL && k < RING_SSP_TAU_BINS; k++)
        PyList_SET_ITEM(l, k, PyLong_FromUnsignedLongLong(h[k]));
    return l;
}

static PyObject *ssp_stats(ringpy_ssp_t *self, PyObject *unused)
{
    ring_ssp_stats_t st;

    if (check_open(self) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    (void)ring_ssp_get_stats(self->s, &st);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:d,s:d,s:N,s:N,s:K,s:K,s:K}",
                         "clock",
                         (unsigned long long)st.clock, "min_clock",
                         (unsigned long long)st.min_clock, "total_clock",
                         (unsigned long long)st.total_clock, "rounds",
                         (unsigned long long)st.rounds, "rounds_applied",
                         (unsigned long long)st.rounds_applied, "contributions",
                         (unsigned long long)st.contributions, "nonfinite_steps",
                         (unsigned long long)st.nonfinite_steps, "wire_bytes",
                         (unsigned long long)st.wire_bytes, "comm_s", st.comm_s, "blocked_s",
                         st.blocked_s, "fresh_s", st.fresh_s, "tau_hist", hist_list(st.tau_hist),
                         "lag_hist", hist_list(st.lag_hist), "late_steps",
                         (unsigned long long)st.late_steps, "gather_rounds",
                         (unsigned long long)st.gather_rounds, "fresh_cut",
                         (unsigned long long)st.fresh_cut);
}

static void ssp_close_now(ringpy_ssp_t *self)
{
    if (self->s != NULL && self->comm->ssp == self->s) {
        ringpy_comm_t *comm = self->comm;
        Py_BEGIN_ALLOW_THREADS
        ringpy_comm_end_session(comm);
        Py_END_ALLOW_THREADS
    }
    self->s = NULL;
    if (self->has_params) {
        ringpy_buf_release(&self->params);
        self->has_params = 0;
    }
}

static PyObject *ssp_close(ringpy_ssp_t *self, PyObject *unused)
{
    ssp_close_now(self);
    Py_RETURN_NONE;
}

static void ssp_dealloc(ringpy_ssp_t *self)
{
    ssp_close_now(self);
    Py_XDECREF(self->comm);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ssp_get_count(ringpy_ssp_t *self, void *closure)
{
    return PyLong_FromSize_t(self->count);
}

static PyObject *ssp_get_closed(ringpy_ssp_t *self, void *closure)
{
    return PyBool_FromLong(self->s == NULL || self->comm->ssp != self->s);
}

static PyMethodDef ssp_methods[] = {
    {"wait", (PyCFunction)ssp_wait, METH_VARARGS,
     "wait(timeout=600) -> {'clock', 'min_clock', 'tau', 'lag', 'blocked_s', 'fresh_s'}: "
     "block until the next step may start, then write its parameters into the buffer "
     "(CanceledError: the peers stopped)."},
    {"push", (PyCFunction)ssp_push, METH_O, "push(grad): hand over the step's gradient."},
    {"request_stop", (PyCFunction)ssp_request_stop, METH_NOARGS,
     "Ask every peer to stop after its current step."},
    {"finish", (PyCFunction)ssp_finish, METH_VARARGS,
     "finish(timeout=600): serve rounds until every peer is done; the buffer then holds the "
     "final parameters, bitwise the same on every peer."},
    {"read", (PyCFunction)ssp_read, METH_VARARGS,
     "read(params=None, velocity=None): copy the master parameters and momentum buffer."},
    {"stats", (PyCFunction)ssp_stats, METH_NOARGS, "The session's counters (a dict)."},
    {"close", (PyCFunction)ssp_close, METH_NOARGS,
     "Free the session (without finish, this peer leaves the rounds: close the Comm too)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ssp_getset[] = {
    {"count", (getter)ssp_get_count, NULL, "the number of parameters", NULL},
    {"closed", (getter)ssp_get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ringpy_ssp_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringd._ringd.SSP",
    .tp_basicsize = sizeof(ringpy_ssp_t),
    .tp_dealloc = (destructor)ssp_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SSP(comm, params, staleness=4, lr=0.01, momentum=0.9, weight_decay=0, "
              "warmup_steps=0, total_steps=0, lr_schedule='constant', update='sum', "
              "momentum_compensation=True, stale_lr_scale=False, staleness_scale=False, "
              "delay_compensation=0, round_idle=-1, start_clock=0, stop_at_steps=0, "
              "fresh_wait=-1, warmup_late=1.5, round_gather=-1, fresh_late=1.25): a "
              "bounded-staleness session "
              "(ring_ssp_open); staleness -1 is async.",
    .tp_methods = ssp_methods,
    .tp_getset = ssp_getset,
    .tp_new = ssp_new,
};
