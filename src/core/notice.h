/*
 * notice.h - a long wait's header sent to the left neighbour (notice.c).
 */
#ifndef RING_NOTICE_H
#define RING_NOTICE_H

#include "comm_int.h"

/* notice.c: req (an algo with ops->notice) made no progress in a pass: after
 * RING_NOTICE_AFTER_S of that, send its header to the left neighbour */
void ring_notice_idle(ring_comm_t *comm, ring_request_t *req);
/* notice.c: the right neighbour's notice f came on the back channel: check it
 * against the call of its round (now, or when that call begins) */
ring_status_t ring_notice_received(ring_comm_t *comm, const ring_frame_t *f);
/* notice.c: req begins (its algorithm chosen): check a notice that came early */
ring_status_t ring_notice_begin(ring_comm_t *comm, ring_request_t *req);
/* notice.c: take the notice that came early, if one did (1, its round in
 * *round_p; it is gone then), for a caller that will not run that call (the
 * doctor, which the neighbour's user call never reaches); 0 when none came */
int ring_notice_take_early(ring_comm_t *comm, uint64_t *round_p);

#endif /* RING_NOTICE_H */
