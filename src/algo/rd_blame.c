/*
 * rd_blame.c - what rd.c's algorithms are called in messages, and what the
 * ring says when one of its pairs failed: a ring failure passed on through
 * the pair is adopted as its ABORT would be; a partner that died, left or
 * timed out is named as the ring's rank; peers that called different things
 * are a mismatch described as the ring would describe the user's calls, the
 * other peer's count read back from the frames of the step it ran instead
 * (and, in Rabenseifner's pieces, from where its call ends).
 */
#include "ring_build.h"

#include <stdio.h>
#include <string.h>

#include "rd_state.h"

const ring_sub_owner_t rd_owner = {"recursive doubling", "--algo ring"};

int rd_halving(const struct ring_rd *rd)
{
    return rd->plan == &rd->plan_of[RD_HALVING];
}

const char *rd_name(const struct ring_rd *rd)
{
    return rd_halving(rd) ? "Rabenseifner's algorithm" : "recursive doubling";
}

/* A pair failed, not over the call's arguments: a ring failure some peer passed
 * on through it (rd_on_fail) is adopted as the ring's own ABORT would be;
 * else the pair's partner died, left or timed out, and is named as the ring's
 * rank (the pair's own words number the pair's ranks). */
static ring_status_t rd_pair_left(ring_comm_t *comm, const ring_sub_t *pair)
{
    const ring_comm_t *pc = pair->comm;
    const ring_frame_t *a = &pc->fail.abort_seen;
    int other = pair->members[0] == comm->rank ? pair->members[1] : pair->members[0];
    int culprit = pc->fail.error_culprit >= 0 && pc->fail.error_culprit < 2
                      ? pair->members[pc->fail.error_culprit] : -1;
    uint64_t origin = a->detail >> 32, c = a->detail & 0xffffffffu; /* ranks + 1 */

    if (pc->fail.abort_seen_valid && a->status != RING_ERR_MISMATCH && origin != 0 &&
        origin <= (uint64_t)comm->size && c <= (uint64_t)comm->size) {
        ring_frame_t f = *a;

        f.origin_rank = (uint32_t)origin - 1;
        f.culprit_rank = c == 0 ? UINT32_MAX : (uint32_t)c - 1;
        f.detail = 0;
        f.coll = RING_COLL_ALLREDUCE;
        f.round = comm->algo.rd->req != NULL ? comm->algo.rd->req->round : f.round;
        f.step = UINT16_MAX;
        return ring_comm_fail_from_frame(comm, &f, other);
    }
    if (culprit < 0)
        return ring_sub_fail(comm, &rd_owner, pair,
                             pc->fail.error != RING_OK ? pc->fail.error : RING_ERR_REMOTE);
    return ring_comm_fail_peer(comm, comm->algo.rd->req,
                               &(ring_fault_t){.status = pc->fail.error, .culprit = culprit,
                                               .step = -1},
                               "%s, %s: {peer} failed or left (%s; in the "
                               "pair's own words, where %s: %s)", rd_name(comm->algo.rd),
                               pair->what,
                               ring_status_str(pc->fail.error), pair->map, pc->fail.error_msg);
}

/* The count of the allreduce the pair's other peer called, from the step of
 * the pair it ran instead of ours (its frames' count): a whole buffer in
 * recursive doubling's steps (a swap gathers two), a window of it in
 * Rabenseifner's, whose count is then rounded up to a multiple of P2 (which
 * of the two it ran follows from the size, as in rd_begin). */
static uint64_t rd_their_count(const struct ring_rd *rd, const ring_comm_t *pc, int slot)
{
    uint64_t c = pc->fail.mismatch.count;
    int stage = slot > 0 ? slot - 1 : 0;

    switch (pc->fail.mismatch.coll) {
    case RING_COLL_BROADCAST: /* a result: the whole buffer */
        return c / sizeof(float);
    case RING_COLL_REDUCE_SCATTER: /* Rabenseifner's scatter of a window of c floats */
        return c << stage;
    case RING_COLL_ALLGATHER:
        if (slot == 0 || rd->forced || c / 2 <= rd->max_bytes)
            return c / sizeof(float) / 2; /* a swap of two whole buffers */
        return c / sizeof(float) << stage; /* a gather of a window */
    default:
        return c;
    }
}

/* A pair failed: the ring fails, saying why in the ring's terms. When the pair
 * saw the peers call different things, as the ring would say it of the user's
 * call (the other peer's frames turned back into the allreduce that sent
 * them); the ring's other peers learn it from the ABORT. */
ring_status_t rd_pair_failed(ring_comm_t *comm, const ring_sub_t *pair)
{
    struct ring_rd *rd = comm->algo.rd;
    const ring_comm_t *pc = pair->comm;
    ring_request_t *req = rd->req;
    ring_frame_t theirs;
    char mine[160], other[160], pieces[160] = "";
    uint32_t their_tid = pc->fail.mismatch.tensor_id;
    int peer, my_more = rd->piece_off + rd->piece_n < req->count;

    if (comm->fail.error != RING_OK)
        return comm->fail.error; /* the pair's failure already failed the ring */
    if (pc->fail.error != RING_ERR_MISMATCH || pc->fail.mismatch.rank < 0 ||
        pc->fail.mismatch.rank > 1)
        return rd_pair_left(comm, pair);
    peer = pair->members[pc->fail.mismatch.rank];
    memset(&theirs, 0, sizeof(theirs));
    theirs.coll = RING_COLL_ALLREDUCE;
    theirs.round = req->round;
    theirs.dtype = RING_FLOAT32;
    theirs.op = their_tid >> 31 ? RING_AVG : RING_SUM;
    /* bit 30 says whether more pieces follow: the id's own bit 30 is taken as ours */
    theirs.tensor_id = (their_tid & RD_TID_MASK) | (req->tensor_id & RD_TID_MORE);
    ring_coll_describe(req->coll, req->round, req->count, req->dtype, req->op,
                       req->tensor_id & 0x7fffffffu, -1, mine, sizeof(mine));
    theirs.count = rd_their_count(rd, pc, (int)(pair - rd->pair));
    if (rd->piece_off > 0 || my_more || (their_tid & RD_TID_MORE)) { /* in pieces */
        theirs.count += rd->piece_off; /* at least that many when its call goes on */
        snprintf(pieces, sizeof(pieces), " (Rabenseifner's in pieces of %zu floats: at the "
                 "one from element %zu, rank %d's call %s, rank %d's %s)", rd->piece_max,
                 rd->piece_off, comm->rank, my_more ? "goes on" : "ends", peer,
                 their_tid & RD_TID_MORE ? "goes on" : "ends");
    }
    ring_coll_describe(RING_COLL_ALLREDUCE, req->round, theirs.count, RING_FLOAT32, theirs.op,
                       theirs.tensor_id, -1, other, sizeof(other));
    if (pieces[0] != '\0' && (their_tid & RD_TID_MORE)) /* its count: only a lower bound */
        snprintf(other, sizeof(other), "allreduce #%llu with count over %llu, float32, %s, "
                 "tensor id %u", (unsigned long long)req->round,
                 (unsigned long long)theirs.count, theirs.op == RING_AVG ? "avg" : "sum",
                 theirs.tensor_id);
    return ring_comm_fail_peer(comm, req, &(ring_fault_t){.status = RING_ERR_MISMATCH,
                                                          .culprit = peer, .step = -1,
                                                          .theirs = &theirs},
                               "collective arguments differ between rank %d and {peer} "
                               "(%s, %s): rank %d called %s; rank %d called %s%s", comm->rank,
                               rd_name(rd), pair->what, comm->rank, mine, peer, other, pieces);
}

