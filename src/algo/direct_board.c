/*
 * direct_board.c - what the direct allreduce's peers read on each other's boards:
 * how far each got (whom a peer waits for, and whom it names after the timeout),
 * a failure written there (relayed with its words), and the call in a slot
 * (another call is a mismatch naming both).
 *
 * The segment's contents come from the other peers, which have proved they
 * belong (the hello), but are still only read within bounds: ranks are
 * checked, messages are cut to their field and stripped of control bytes.
 */
#include "ring_build.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "algo.h"
#include "clock.h"
#include "direct_int.h"

/* looks at the counters before a sleep: a few microseconds (one reads N lines) */
#define DIRECT_SLEEP_LOOKS 64

/* The time of the last move, read now if it was not yet. */
static double last_move(struct ring_direct *d, double now)
{
    if (d->moved) {
        d->last_move = now;
        d->moved = 0;
    }
    return d->last_move;
}

void ring_direct_ring(struct ring_direct *d)
{
    atomic_fetch_add(&direct_hdr(d)->bell, 1);
    if (atomic_load(&direct_hdr(d)->sleepers) > 0)
        (void)syscall(SYS_futex, &direct_hdr(d)->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void ring_direct_set(struct ring_direct *d, int place, enum direct_counter c, uint64_t v)
{
    /* a release store and a plain look at sleepers: no fence, no contended atomic
     * on the fast path (a seq_cst store stalls until the peers polling this line
     * give it up: 5 % of a 4 KiB allreduce at N = 2). Our look may come before
     * the store leaves this core's store buffer, and miss a peer that just went
     * to sleep: ring_direct_sleep covers that window by looking again for a
     * while before it sleeps (and sleeps DIRECT_WAIT_MS at most) */
    atomic_store_explicit(&d->boards[place].ctr[c].v, v, memory_order_release);
    if (atomic_load_explicit(&direct_hdr(d)->sleepers, memory_order_relaxed) > 0)
        ring_direct_ring(d);
}

void ring_direct_sleep(ring_comm_t *comm, int timeout_ms)
{
    struct ring_direct *d = comm->algo.direct;
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    uint32_t seq;

    atomic_fetch_add(&direct_hdr(d)->sleepers, 1);
    atomic_thread_fence(memory_order_seq_cst); /* before the counters are read */
    seq = atomic_load(&direct_hdr(d)->bell); /* a ring after this makes FUTEX_WAIT return */
    /* a counter stored just before a poster saw sleepers at 0 is still on its
     * way out of the poster's store buffer (well under a microsecond): look
     * again for longer than that before sleeping */
    for (int i = 0; i < DIRECT_SLEEP_LOOKS; i++)
        if (ring_direct_lagging(comm, d->wait_ctr, d->wait_want) < 0)
            break;
    /* a shared futex (the segment is mapped by every peer): not FUTEX_PRIVATE */
    if (ring_direct_lagging(comm, d->wait_ctr, d->wait_want) >= 0 &&
        atomic_load_explicit(&d->boards[comm->topo.pos].failed, memory_order_relaxed) == 0)
        (void)syscall(SYS_futex, &direct_hdr(d)->bell, FUTEX_WAIT, seq, &ts, NULL, 0);
    atomic_fetch_sub(&direct_hdr(d)->sleepers, 1);
}

int ring_direct_lagging(ring_comm_t *comm, enum direct_counter c, uint64_t want)
{
    struct ring_direct *d = comm->algo.direct;

    d->wait_ctr = c;
    d->wait_want = want;
    for (int p = 0; p < comm->size; p++) {
        uint64_t have = atomic_load_explicit(&d->boards[p].ctr[c].v, memory_order_acquire);

        if (p != comm->topo.pos && have < want)
            return p;
    }
    return -1;
}

/* 1 when a board's call is req's (the board keeps tensor ids in 31 bits) */
static int call_is(const direct_call_t *c, const ring_request_t *req)
{
    return req != NULL && c->coll == (uint32_t)req->coll && c->count == req->count &&
           c->dtype == (uint32_t)req->dtype && c->op == (uint32_t)req->op &&
           c->tensor_id == (req->tensor_id & 0x7fffffffu);
}

ring_status_t ring_direct_relay_failure(ring_comm_t *comm)
{
    struct ring_direct *d = comm->algo.direct;

    for (int p = 0; p < comm->size; p++) {
        direct_board_t *b = &d->boards[p];
        int32_t status = atomic_load_explicit(&b->failed, memory_order_acquire);
        char why[DIRECT_WHY_BYTES];
        int culprit;

        if (p == comm->topo.pos || status == 0)
            continue;
        memcpy(why, b->why, sizeof(why));
        why[sizeof(why) - 1] = '\0';
        for (char *c = why; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f)
                *c = ' ';
        culprit = b->culprit >= -1 && b->culprit < comm->size ? b->culprit : -1;
        if (status <= 0 || status >= RING_STATUS_COUNT)
            status = RING_ERR_REMOTE;
        if (status == RING_ERR_MISMATCH && b->other.rank >= 0 && b->other.rank < comm->size) {
            /* the call that differs from ours: the other one, or, when the other
             * was ours or is the same as ours, the failed peer's own */
            const ring_request_t *req = ring_comm_active_request(comm);
            direct_call_t c = (b->other.rank == comm->rank || call_is(&b->other, req)) &&
                                      b->own.rank >= 0 && b->own.rank < comm->size
                                  ? b->own
                                  : b->other;
            ring_frame_t theirs;

            memset(&theirs, 0, sizeof(theirs));
            theirs.coll = (uint8_t)(c.coll & 0x0f);
            theirs.count = c.count;
            theirs.tensor_id = c.tensor_id;
            theirs.dtype = (uint8_t)c.dtype;
            theirs.op = (uint8_t)(c.op & 0x0f);
            return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_MISMATCH,
                                                        .culprit = c.rank, .step = -1,
                                                        .sys_errno = b->mm_cause == RING_CAUSE_ALGO
                                                                         ? RING_CAUSE_ALGO : 0,
                                                        .theirs = &theirs},
                                  "%s (reported on rank %d's board in the direct allreduce's "
                                  "segment)", why, comm->topo.order[p]);
        }
        return ring_comm_fail(comm, &(ring_fault_t){.status = (ring_status_t)status,
                                                    .culprit = culprit, .step = -1},
                              "%s (reported on rank %d's board in the direct allreduce's "
                              "segment)", why, comm->topo.order[p]);
    }
    return RING_OK;
}

ring_status_t ring_direct_timed_out(ring_comm_t *comm, int place)
{
    static const char *const what[DIRECT_COUNTERS] = {
        [DIRECT_POSTED] = "has not posted its buffer",
        [DIRECT_READ] = "has not read the last one",
        [DIRECT_BIG_POSTED] = "has not posted its piece of the buffer",
        [DIRECT_BIG_REDUCED] = "has not added its slice of the piece",
    };
    struct ring_direct *d = comm->algo.direct;
    double now = ring_now();

    return ring_comm_fail_peer(comm, d->req,
                               &(ring_fault_t){.status = RING_ERR_TIMED_OUT,
                                               .culprit = comm->topo.order[place],
                                               .sys_errno = ETIMEDOUT, .step = -1},
                               "direct allreduce: timed out after %.1f s waiting for {peer}, "
                               "which %s: it stopped or is stuck, or it called another "
                               "collective or count than this peer (every peer must make the "
                               "same calls in the same order); its own log says which",
                               now - last_move(d, now), what[d->wait_ctr]);
}

ring_status_t ring_direct_check_wait(ring_comm_t *comm, int place)
{
    double now;

    if (atomic_load_explicit(&comm->algo.direct->boards[place].closed, memory_order_acquire)) {
        struct ring_direct *d = comm->algo.direct;

        /* it may have done what this peer waits for, then closed, after this peer
         * looked (seen under ASan in t-verbs-dl): its counter was set before closed */
        if (atomic_load_explicit(&d->boards[place].ctr[d->wait_ctr].v, memory_order_acquire) >=
            d->wait_want)
            return RING_OK;

        /* a peer that failed wrote why on its board before it closed: pass its
         * words on (a mismatch it found), not only that it left */
        RING_CHECK(ring_direct_relay_failure(comm));

        return ring_comm_fail_peer(comm, d->req,
                                   &(ring_fault_t){.status = RING_ERR_REMOTE,
                                                   .culprit = comm->topo.order[place],
                                                   .sys_errno = RING_CAUSE_CLOSED, .step = -1},
                                   "{peer} closed its communicator during this allreduce "
                                   "(direct allreduce): every peer must make the same calls "
                                   "before closing");
    }
    now = ring_now();
    if (now - last_move(comm->algo.direct, now) > comm->cfg.timeout_s) {
        int fresh = 0, culprit = ring_direct_culprit(comm, &fresh);

        /* every peer we wait for is alive, stuck in a call of its own (waiting for
         * the one that stopped, which its own timeout will name): wait on, up to
         * DIRECT_PATIENCE timeouts, rather than blame a live peer */
        if (fresh && now - last_move(comm->algo.direct, now) <
                         DIRECT_PATIENCE * comm->cfg.timeout_s)
            return RING_OK;
        return ring_direct_timed_out(comm, culprit >= 0 ? culprit : place);
    }
    return RING_OK;
}

int ring_direct_culprit(ring_comm_t *comm, int *fresh_p)
{
    struct ring_direct *d = comm->algo.direct;
    uint64_t now_us = (uint64_t)(ring_now() * 1e6), oldest = UINT64_MAX;
    int culprit = -1;

    /* of the places we wait for, the one whose last sign of life is oldest */
    for (int p = 0; p < comm->size; p++) {
        uint64_t have = atomic_load_explicit(&d->boards[p].ctr[d->wait_ctr].v,
                                             memory_order_acquire);
        uint64_t alive = atomic_load_explicit(&d->boards[p].alive_us, memory_order_relaxed);

        if (p == comm->topo.pos || have >= d->wait_want)
            continue;
        if (culprit < 0 || alive < oldest) {
            culprit = p;
            oldest = alive;
        }
    }
    if (fresh_p != NULL) /* it made a progress pass within half a timeout */
        *fresh_p = culprit >= 0 && oldest <= now_us &&
                   now_us - oldest < (uint64_t)(comm->cfg.timeout_s * 0.5e6);
    return culprit;
}

int ring_direct_same_call(const direct_slot_hdr_t *h, const ring_request_t *req)
{
    return h->round == req->round && h->count == req->count &&
           h->tensor_id == req->tensor_id && h->op == (uint32_t)req->op;
}

ring_status_t ring_direct_mismatch(ring_comm_t *comm, int place, const direct_slot_hdr_t *h)
{
    ring_request_t *req = comm->algo.direct->req;
    int peer = comm->topo.order[place];
    ring_frame_t theirs;
    char mine[160], other[160];

    memset(&theirs, 0, sizeof(theirs));
    theirs.coll = RING_COLL_ALLREDUCE;
    theirs.round = h->round;
    theirs.dtype = RING_FLOAT32;
    theirs.op = h->op == RING_AVG ? RING_AVG : RING_SUM;
    theirs.tensor_id = h->tensor_id & 0x7fffffffu;
    theirs.count = h->count;
    ring_coll_describe(req->coll, req->round, req->count, req->dtype, req->op,
                       req->tensor_id & 0x7fffffffu, -1, mine, sizeof(mine));
    if (h->round == req->round)
        ring_coll_describe(RING_COLL_ALLREDUCE, h->round, h->count, RING_FLOAT32,
                           (ring_op_t)theirs.op, theirs.tensor_id, -1, other, sizeof(other));
    else
        snprintf(other, sizeof(other), "another collective in round %" PRIu64
                 " (not an fp32 allreduce of this size class)", req->round);
    return ring_comm_fail_peer(comm, req, &(ring_fault_t){.status = RING_ERR_MISMATCH,
                                                          .culprit = peer, .step = -1,
                                                          .theirs = &theirs},
                               "collective arguments differ between rank %d and {peer} "
                               "(direct allreduce): rank %d called %s; rank %d called %s",
                               comm->rank, comm->rank, mine, peer, other);
}
