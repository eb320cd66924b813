/*
 * tp_lend.h - what the engine lends the transport (tp_lend.c).
 */
#ifndef RING_TP_LEND_H
#define RING_TP_LEND_H

#include "comm_int.h"

/* tp_lend.c: the hooks the transport gets in params (after comm->auth.key is loaded) */
void ring_comm_tp_lend(ring_comm_t *comm, ring_tp_params_t *params);

#endif /* RING_TP_LEND_H */
