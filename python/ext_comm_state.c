/*
 * ext_comm_state.c - what the parts of _ringd that use a Comm check and
 * change of its state: is it open, is it free (no SSP session owns the
 * ring), and ending the SSP session it holds.
 *
 * It sits under the Comm type (ext_comm.c, whose method table reaches the
 * collectives) and under its users (ext_collectives.c, ext_request.c,
 * ext_ssp.c, ext_elastic.c), so none of them needs another's code for these
 * facts: the session is ended here both when the SSP object closes and when
 * its Comm closes first; and a Comm object is made here, both by Comm() and
 * by shrink().
 */
#include "ext.h"

int ringpy_comm_check_open(const ringpy_comm_t *comm)
{
    if (comm->comm != NULL)
        return 0;
    ringpy_raise(RING_ERR_INVALID,
                 "the communicator is closed (ringd.shutdown() was called): call ringd.init() "
                 "first",
                 RINGPY_IN_CALL);
    return -1;
}

int ringpy_comm_check_free(const ringpy_comm_t *comm)
{
    if (ringpy_comm_check_open(comm) < 0)
        return -1;
    if (comm->ssp == NULL)
        return 0;
    ringpy_raise(RING_ERR_INVALID,
                 "an SSP session owns the communicator (its rounds run on it): finish and "
                 "close the session before other collectives",
                 RINGPY_IN_CALL);
    return -1;
}

/* Close the session (the engine stops after its current round); with the GIL released. */
void ringpy_comm_end_session(ringpy_comm_t *comm)
{
    ring_ssp_t *s = comm->ssp;

    comm->ssp = NULL;
    ring_ssp_close(s);
}

ringpy_comm_t *ringpy_comm_alloc(PyTypeObject *type)
{
    ringpy_comm_t *self = (ringpy_comm_t *)type->tp_alloc(type, 0);

    if (self == NULL)
        return NULL;
    if (pthread_mutex_init(&self->lock, NULL) != 0) {
        Py_TYPE(self)->tp_free((PyObject *)self);
        return (ringpy_comm_t *)PyErr_NoMemory();
    }
    if (pthread_cond_init(&self->done, NULL) != 0) {
        pthread_mutex_destroy(&self->lock);
        Py_TYPE(self)->tp_free((PyObject *)self);
        return (ringpy_comm_t *)PyErr_NoMemory();
    }
    if (pthread_rwlock_init(&self->closing, NULL) != 0) {
        pthread_cond_destroy(&self->done);
        pthread_mutex_destroy(&self->lock);
        Py_TYPE(self)->tp_free((PyObject *)self);
        return (ringpy_comm_t *)PyErr_NoMemory();
    }
    return self;
}

void ringpy_comm_adopt(ringpy_comm_t *self, ring_comm_t *comm, int thread_on)
{
    self->comm = comm;
    self->thread_on = thread_on;
    self->rank = ring_comm_rank(comm);
    self->size = ring_comm_size(comm);
    /* comm.h: the setting starts the thread; a ring of one has none (nothing to drive),
     * and its waits must keep the mutex */
    self->threaded = thread_on && self->size > 1;
}
