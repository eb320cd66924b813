/*
 * fail.h - sticky errors, the ABORT/CLOSE/WAITING frames that tell the
 * neighbours, the timeout and its probe of the left neighbour (fail.c).
 */
#ifndef RING_FAIL_H
#define RING_FAIL_H

#include "comm_int.h"

/* What went wrong, as the peers are told in an ABORT frame. */
typedef struct ring_fault {
    ring_status_t status;
    int culprit;             /* the rank blamed, -1 when none */
    int sys_errno;           /* errno behind it; RING_CAUSE_CLOSED for a peer that left */
    int step;                /* ring step, -1 when not in one */
    const ring_frame_t *theirs; /* MISMATCH: the culprit's frame header */
    /* rd.c: a ring's failure passed on through one of its pairs, whose ranks are
     * not the ring's: who saw it and whom it blames, as ring ranks + 1 (0: none);
     * the ABORT carries them in its detail field */
    int relay_origin, relay_culprit;
} ring_fault_t;

void ring_phase_format(const ring_comm_t *comm, const ring_request_t *req, int step, char *buf,
                       size_t len);
void ring_phase_format_round(const ring_comm_t *comm, uint64_t round, ring_coll_t coll, int step,
                             char *buf, size_t len);
ring_status_t ring_comm_fail(ring_comm_t *comm, const ring_fault_t *fault, const char *fmt, ...)
    RING_PRINTF(3, 4);
ring_status_t ring_comm_fail_from_frame(ring_comm_t *comm, const ring_frame_t *f, int from_rank);
void ring_comm_send_close(ring_comm_t *comm);
/* rd.c's question and answer on a pair: an ABORT with relay_origin and
 * relay_culprit (ring ranks + 1) sent to the peers of comm whatever its state,
 * without failing it here: a question leaves the pair up for the answer, and
 * the answer goes out on a pair that the question failed. hops (a question's
 * count of passes, in the step field; -1: none) */
void ring_comm_send_relay(ring_comm_t *comm, ring_status_t status, int relay_origin,
                          int relay_culprit, int hops);
/* fail.c: a control frame (ABORT, CLOSE, WAITING, a notice) with req's header,
 * and its send on ep through slot (0: slot still busy with the one before) */
void ring_ctrl_fill(const ring_comm_t *comm, const ring_request_t *req, ring_frame_type_t type,
                    ring_frame_t *f);
int ring_ctrl_post(ring_comm_t *comm, ring_slot_t *slot, ring_tp_ep_t *ep, const ring_frame_t *f);
/* Give the ABORTs posted on abort_left/abort_right a moment (0.2 s) to leave. */
void ring_abort_flush(ring_comm_t *comm);
/* An ABORT of a user's call that came during the set-up: kept, and applied
 * once the set-up is over (comm_open.c: the first call fails with it). */
void ring_comm_defer_abort(ring_comm_t *comm, const ring_frame_t *f);
const char *ring_rank_addr(const ring_comm_t *comm, int rank, char *buf, size_t len);
ring_request_t *ring_comm_active_request(ring_comm_t *comm);
int ring_comm_current_step(const ring_comm_t *comm);

/* fail.c: fail with what this peer waits for; or, when the timeout has passed
 * (idle seconds without progress), ask the left neighbour first: returns 1
 * once the comm has failed */
ring_status_t ring_comm_fail_timeout(ring_comm_t *comm, ring_request_t *req, double waited);
int ring_comm_check_timeout(ring_comm_t *comm, double idle);
/* fail.c, probe mode (timeout_probe_deadline != 0): the left neighbour said it
 * waits too (WAITING, with when it will decide), so wait longer; and whether
 * the wait is over (returns 1 once the comm has failed, blaming the left one) */
void ring_comm_probe_extend(ring_comm_t *comm, const ring_frame_t *waiting);
int ring_comm_probe_check(ring_comm_t *comm);
/* fail.c: ring_comm_fail for a fault that names a peer: the message is the phase
 * of req at fault->step, ": ", then fmt, in which "{peer}" stands for "rank N
 * (its address)" of fault->culprit */
ring_status_t ring_comm_fail_peer(ring_comm_t *comm, const ring_request_t *req,
                                  const ring_fault_t *fault, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* fail.c, --auth frames: fail because what came from peer on a connection does
 * not carry a valid tag (altered or injected there) */
ring_status_t ring_comm_fail_tag(ring_comm_t *comm, ring_request_t *req, int step, int peer,
                                 const char *what);

#endif /* RING_FAIL_H */
