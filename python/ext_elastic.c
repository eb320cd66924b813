/*
 * ext_elastic.c - the Comm methods of elastic membership (ringd/elastic.h):
 * shrink() after a lost peer, grow() at a commit point of an elastic ring,
 * parent_rank(), shrink_report and joined.
 *
 * shrink() makes a second Comm object around the new ring_comm_t; the old
 * object stays valid to close (and its requests to wait for: they fail at
 * once with the sticky error, or CanceledError once it is closed). The
 * shrink itself blocks (bounded: ringd/elastic.h) with the
 * GIL released and the old Comm held as close holds it: the write side of
 * `closing` (so no thread is inside a wait on it) and its mutex. grow() is
 * the same, on a healthy ring with no request in flight (ringd/elastic.py
 * finishes the handles first); when nobody joined it returns the same Comm.
 */
#include "ext.h"

#include <stdio.h>
#include <string.h>

/* change(self->comm, &nc), held as close holds the Comm (the write side of `closing`:
 * no thread is inside a wait on it; then its mutex), with the GIL released. RING_OK,
 * or the status with its message in msg. */
static ring_status_t comm_change(ringpy_comm_t *self,
                                 ring_status_t (*change)(ring_comm_t *, ring_comm_t **),
                                 ring_comm_t **nc, char *msg, size_t len)
{
    ring_status_t st = RING_ERR_INVALID;

    Py_BEGIN_ALLOW_THREADS
    pthread_rwlock_wrlock(&self->closing);
    pthread_mutex_lock(&self->lock);
    if (self->comm != NULL) {
        st = change(self->comm, nc);
        if (st != RING_OK)
            snprintf(msg, len, "%s", ring_last_error());
    }
    pthread_mutex_unlock(&self->lock);
    pthread_rwlock_unlock(&self->closing);
    Py_END_ALLOW_THREADS
    return st;
}

PyObject *ringpy_comm_shrink(ringpy_comm_t *self, PyObject *unused)
{
    ringpy_comm_t *made;
    ring_comm_t *nc = NULL;
    ring_status_t st;
    char msg[RINGPY_MSG_MAX] = "shrink: the communicator was closed meanwhile";

    if (ringpy_comm_check_open(self) < 0)
        return NULL;
    if (self->ssp != NULL)
        return ringpy_raise(RING_ERR_INVALID,
                            "shrink: an SSP session owns the communicator: close the session "
                            "(it fails with the ring's error) before shrinking the ring",
                            RINGPY_IN_CALL);
    made = ringpy_comm_alloc(Py_TYPE(self));
    if (made == NULL)
        return NULL;
    st = comm_change(self, ring_comm_shrink, &nc, msg, sizeof(msg));
    if (st != RING_OK) {
        Py_DECREF(made);
        return ringpy_raise(st, msg, RINGPY_IN_CALL);
    }
    /* the new ring has the old one's settings: progress-thread among them */
    ringpy_comm_adopt(made, nc, self->thread_on);
    return (PyObject *)made;
}

PyObject *ringpy_comm_grow(ringpy_comm_t *self, PyObject *unused)
{
    ringpy_comm_t *made;
    ring_comm_t *nc = NULL;
    ring_status_t st;
    char msg[RINGPY_MSG_MAX] = "grow: the communicator was closed meanwhile";

    if (ringpy_comm_check_free(self) < 0)
        return NULL;
    made = ringpy_comm_alloc(Py_TYPE(self));
    if (made == NULL)
        return NULL;
    st = comm_change(self, ring_comm_grow, &nc, msg, sizeof(msg));
    if (st != RING_OK) {
        Py_DECREF(made);
        return ringpy_raise(st, msg, RINGPY_IN_CALL);
    }
    if (nc == self->comm) { /* nobody joined: the same ring */
        Py_DECREF(made);
        Py_INCREF(self);
        return (PyObject *)self;
    }
    ringpy_comm_adopt(made, nc, self->thread_on);
    return (PyObject *)made;
}

PyObject *ringpy_comm_get_joined(ringpy_comm_t *self, void *closure)
{
    int joined = 0;

    if (ringpy_comm_check_open(self) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    if (self->comm != NULL)
        joined = ring_comm_joined(self->comm);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(joined);
}

PyObject *ringpy_comm_parent_rank(ringpy_comm_t *self, PyObject *arg)
{
    long rank = PyLong_AsLong(arg);
    int parent = -1;

    if (rank == -1 && PyErr_Occurred())
        return NULL;
    if (ringpy_comm_check_open(self) < 0)
        return NULL;
    if (rank < 0 || rank >= self->size) {
        PyErr_Format(PyExc_ValueError, "parent_rank: rank %ld is not in this ring of %d",
                     rank, self->size);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    if (self->comm != NULL)
        parent = ring_comm_parent_rank(self->comm, (int)rank);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(parent);
}

PyObject *ringpy_comm_get_shrink_report(ringpy_comm_t *self, void *closure)
{
    char buf[512] = "";

    if (ringpy_comm_check_open(self) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    if (self->comm != NULL)
        snprintf(buf, sizeof(buf), "%s", ring_comm_shrink_report(self->comm));
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    return PyUnicode_FromString(buf);
}
