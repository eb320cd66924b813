/*
 * ext_comm_state.c - what the parts of _ringd that use a Comm check and
 * change of its state: is it open, is it free (no SSP session owns the
 * ring), and ending the SSP session it holds.
 *
 * It sits under the Comm type (ext_comm.c, whose method table reaches the
 * collectives) and under its users (ext_collectives.c, ext_request.c,
 * ext_ssp.c), so none of them needs another's code for these facts: the
 * session is ended here both when the SSP object closes and when its Comm
 * closes first.
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
