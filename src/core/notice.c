/*
 * notice.c - notice frames: how a call that rd.c or direct.c runs off the
 * ring still shows its header to a neighbour, so that a peer that called
 * something else (another count or dtype, a broadcast, RING_CALL_EXACT
 * alone) fails with a mismatch that says so, as if both ran the ring.
 *
 * Only a call that waits sends one. Such a call cannot finish while any peer
 * runs another call in its place (each peer's result needs every peer's
 * data), so in a mismatch it waits, and after RING_NOTICE_AFTER_S of that it
 * sends its header, once, as an empty DATA frame with RING_FRAME_NOTICE, to
 * its left neighbour, which reads it on its back channel (allreduce.c). A
 * call that does not wait sends nothing: at 4 KiB over tcp a notice per call
 * cost a fifth of the call (a send and a receive more than the pairs' own).
 *
 * The left neighbour checks the notice against its call of the same round:
 * run by the ring, or with other arguments: a mismatch, named; the same
 * call: nothing to say. A notice of a round it has finished is old news (a
 * peer that waited for its last swap while this one finished); one of a round
 * it has not begun is kept and checked when that call begins. In a mismatch
 * where some peers run the ring and some do not, there is a ring peer whose
 * right neighbour does not: it hears of it as soon as the notice comes.
 *
 * Calls inside ring_comm_open (rd_fit.c's, direct.c's set-up) send none:
 * every peer runs the same ones there, and their rounds are numbered again
 * from 0 once it returns, so a late notice of one could be taken for a user's
 * call. For the same reason a notice that comes while this peer is still in
 * ring_comm_open (its neighbour got out first) is kept for the user's calls:
 * checked against the set-up's rounds it was dropped as old news, and both
 * peers waited for each other until their timeouts.
 */
#include "ring_build.h"

#include "clock.h"
#include "collectives.h"
#include "algo.h"
#include "comm_int.h"
#include "fail.h"
#include "frame_check.h"
#include "notice.h"

#define RING_NOTICE_AFTER_S 0.002 /* how long a call waits before it sends its notice */
#define RING_NOTICE_IDLE_PASSES 64 /* idle passes before the clock is read at all */

void ring_notice_idle(ring_comm_t *comm, ring_request_t *req)
{
    double now;
    ring_frame_t f;

    if (req->notice_sent || comm->size < 2 || !comm->open_done ||
        ++req->notice_idle < RING_NOTICE_IDLE_PASSES)
        return;
    now = ring_now();
    if (req->notice_since == 0) {
        req->notice_since = now;
        return;
    }
    if (now - req->notice_since < RING_NOTICE_AFTER_S)
        return;
    ring_ctrl_fill(comm, req, RING_FRAME_DATA, &f);
    f.flags = RING_FRAME_NOTICE;
    /* a notice before still on its way: try again on a later pass */
    req->notice_sent = ring_ctrl_post(comm, &comm->notice.left, comm->channels[0].left[0], &f);
}

static int runs_off_ring(const ring_request_t *req)
{
    return req->algo != NULL && req->algo->notice;
}

/* The notice f of the right neighbour against req, the call of the same round. */
static ring_status_t notice_check(ring_comm_t *comm, ring_request_t *req, const ring_frame_t *f)
{
    ring_fault_t fault = {.status = RING_ERR_MISMATCH, .culprit = comm->topo.right_rank,
                          .step = ring_comm_current_step(comm), .theirs = f};

    if (!ring_frame_matches_call(req, f)) {
        char mine[160], theirs[160];

        ring_coll_describe(req->coll, req->round, req->count, req->dtype, req->op,
                           req->tensor_id, req->root, mine, sizeof(mine));
        ring_coll_describe((ring_coll_t)f->coll, f->round, f->count, f->dtype, f->op,
                           f->tensor_id, (int)f->detail, theirs, sizeof(theirs));
        return ring_comm_fail_peer(comm, req, &fault,
                                   "collective arguments differ between rank %d and {peer}: "
                                   "rank %d called %s; rank %d called %s", comm->rank,
                                   comm->rank, mine, comm->topo.right_rank, theirs);
    }
    if (runs_off_ring(req))
        return RING_OK;
    fault.sys_errno = RING_CAUSE_ALGO; /* the ABORT says so: the calls agree */
    return ring_comm_fail_peer(comm, req, &fault,
                               "{peer} runs this allreduce by recursive doubling or the direct "
                               "allreduce and this peer on the ring: the calls differ in what "
                               "decides the algorithm (RING_CALL_EXACT on some peers only, or "
                               "--algo, --rd-max-bytes or --codec)");
}

ring_status_t ring_notice_received(ring_comm_t *comm, const ring_frame_t *f)
{
    int queued = 0;

    /* the neighbour is past ring_comm_open and this peer is not: the notice is of
     * a user's call, and the rounds here are still the set-up's (checked at the
     * user's call of its round, once they are numbered from 0 again) */
    if (!comm->open_done) {
        comm->notice.early = *f;
        comm->notice.early_valid = 1;
        return RING_OK;
    }

    for (unsigned i = 0; i < comm->requests.count && !queued; i++) {
        ring_request_t *req = &comm->requests.slots[(comm->requests.head + i) % RING_MAX_REQUESTS];

        if (req->round != f->round)
            continue;
        if (req->done) /* finished here: the neighbour waited while this peer did not */
            return RING_OK;
        if (req->started)
            return notice_check(comm, req, f);
        queued = 1; /* called, not begun */
    }
    if (!queued && f->round < comm->requests.next_round)
        return RING_OK; /* finished and retired here: old news */
    comm->notice.early = *f; /* checked when the call of its round begins */
    comm->notice.early_valid = 1;
    return RING_OK;
}

int ring_notice_take_early(ring_comm_t *comm, uint64_t *round_p)
{
    if (!comm->notice.early_valid)
        return 0;
    comm->notice.early_valid = 0;
    *round_p = comm->notice.early.round;
    return 1;
}

ring_status_t ring_notice_begin(ring_comm_t *comm, ring_request_t *req)
{
    if (!comm->open_done || !comm->notice.early_valid || comm->notice.early.round > req->round)
        return RING_OK;
    comm->notice.early_valid = 0;
    if (comm->notice.early.round < req->round)
        return RING_OK;
    return notice_check(comm, req, &comm->notice.early);
}
