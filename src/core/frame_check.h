/*
 * frame_check.h - received frames checked against the call (frame_check.c).
 */
#ifndef RING_FRAME_CHECK_H
#define RING_FRAME_CHECK_H

#include "comm_int.h"

/* frame_check.c: check a received frame against the call and what the schedule
 * expects; fails the comm with a message if not */
ring_status_t ring_frame_check(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                               const ring_sched_frame_t *sf, ring_slot_t *slot, ring_tp_ep_t *ep,
                               ring_frame_t *f_out);
/* frame_check.c: 1 when frame f belongs to the same call as req (round,
 * collective and arguments) */
int ring_frame_matches_call(const ring_request_t *req, const ring_frame_t *f);
/* frame_check.c: fail on a transport failure of a connection to rank peer, or
 * because it closed its communicator during req */
ring_status_t ring_comm_fail_link(ring_comm_t *comm, ring_request_t *req, int step, int peer,
                                  const ring_tp_ep_t *ep, const ring_tp_req_t *treq);
ring_status_t ring_comm_fail_closed(ring_comm_t *comm, ring_request_t *req, int step, int peer);
/* frame_check.c, --auth frames: 0 when what slot received on ep carries a valid
 * tag (or frames are not tagged); its payload is what followed the header */
int ring_slot_tag_ok(ring_comm_t *comm, const ring_tp_ep_t *ep, const ring_slot_t *slot);

#endif /* RING_FRAME_CHECK_H */
