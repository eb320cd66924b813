/*
 * rd.c - recursive doubling for small allreduces (--algo rd|auto), and
 * Rabenseifner's algorithm for mid-size ones (--rh-max-bytes), over pairs.
 *
 * The ring takes 2(N-1) dependent steps, each moving 1/N of the buffer: at
 * a few KiB every step is a message's latency. Recursive doubling takes
 * log2 N: at stage k a peer swaps its running sum with the peer whose ring
 * place differs in bit k, and both add the two halves of the swap in the
 * same order (the lower place's first), so both hold the same bits; after
 * the last stage every peer holds the same sum. With N not a power of two,
 * the places P2..N-1 above the largest power of two P2 first hand their
 * buffer to place i - P2 (which adds it) and get the result back at the
 * end: two steps more (MPICH's "fold" for recursive doubling). Between
 * --rd-max-bytes and --rh-max-bytes, on N a power of two of at least 4, the
 * same pairs run Rabenseifner's reduce-scatter by recursive halving and
 * allgather by recursive doubling instead: the ring's bytes in 2 log2 N steps
 * (rd_plan.c has both schedules); a call larger than --rh-piece-bytes runs in
 * pieces, one after the other, each the whole schedule over its part.
 *
 * Each pair is a communicator of two peers (subcomm.c), opened once the ring
 * is up: over shm within a host, tcp or verbs across. A swap is an allgather
 * of the pair, the result going back a broadcast. Only fp32 allreduces that
 * travel uncompressed run here (codec none, or RING_CALL_EXACT): with fp16 or
 * bf16 on the wire, the ring's codec semantics apply and the ring runs them.
 *
 * A peer that called something else (another count or dtype, a broadcast,
 * RING_CALL_EXACT alone) runs the ring or another pair schedule: the pairs'
 * headers tell the second, and for the first a call that waits long sends
 * its header to its left neighbour as a "notice" frame (notice.c), which a
 * neighbour on the ring reads as the mismatch it is.
 *
 * A stopped peer: the pair's request makes no progress; after the timeout
 * (plus a grace per level of the schedule) the peer asks its partner what it
 * waits for (rd_ask), and blames it if no answer comes. A ring failure is
 * passed on through the pairs too (rd_on_fail): a call here reads nothing
 * from its left neighbour, so ABORTs only travel backwards around the ring,
 * and not past a stopped peer.
 */
#include "ring_build.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "clock.h"
#include "log.h"
#include "rd.h"
#include "rd_int.h"
#include "rd_state.h"
#include "reduce.h"
#include "subcomm.h"

#define RD_GRACE_S 1.0         /* per step: how much longer a later step waits */
/* how long a partner asked what it waits for has to answer (less than
 * RD_GRACE_S: the next level asks after that). A partner that waits too
 * passes the question on, to be answered sooner: RD_HOP_S less per hop, so
 * the answer from the end of the chain (the peer that asks the stopped one)
 * is back at each asker before its own time is up. In Rabenseifner's at N =
 * 8, a peer stopped after its last gather lets half the peers start the next
 * round; they ask, a level earlier, live peers stuck in this one, which wait
 * on each other before the stopped one (t-rh, 1 run in 10 before) */
#define RD_ANSWER_S 0.9
#define RD_HOP_S 0.11
#define RD_ANSWER_MIN_S 0.05
#define RD_LOOK_S 0.005        /* rd_wait looks at the pairs not under way this often */

enum rd_algo { RD_AUTO, RD_RING, RD_FORCED };

/* What every peer tells the others at open (the hello made sure that they
 * agree on --algo and --rd-max-bytes). */
typedef struct rd_record {
    int32_t ports[RD_SLOTS];   /* 0: no pair in this slot */
} rd_record_t;

static const ring_algo_ops_t rd_ops;

static enum rd_algo rd_algo_of(ring_cfg_algo_t algo)
{
    return algo == RING_CFG_ALGO_RING ? RD_RING : algo == RING_CFG_ALGO_RD ? RD_FORCED : RD_AUTO;
}


ring_status_t ring_rd_open(ring_comm_t *comm, ring_sub_open_fn open_fn,
                           ring_sub_close_fn close_fn)
{
    enum rd_algo algo = rd_algo_of(comm->cfg.algo);
    int wanted = algo == RD_FORCED || (algo == RD_AUTO && rd_pays(comm->size));
    rd_record_t mine, *all = NULL;
    int *ports = NULL, nheld = 0, held_slot[RD_SLOTS], held_port[RD_SLOTS];
    ring_port_hold_t ph = {0};
    struct ring_rd *rd;
    ring_status_t st = RING_OK;
    const char *over = "";

    if (comm->size < 2 || !wanted)
        return RING_OK;
    rd = calloc(1, sizeof(*rd));
    all = calloc((size_t)comm->size, sizeof(*all));
    ports = calloc((size_t)comm->size * RD_SLOTS, sizeof(int));
    if (rd == NULL || all == NULL || ports == NULL) {
        st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for recursive doubling");
        goto out;
    }
    rd->close_fn = close_fn;
    rd->forced = algo == RD_FORCED;
    rd->max_bytes = comm->cfg.rd_max_bytes;
    rd->rh_max_bytes = rh_pays(comm->size) ? comm->cfg.rh_max_bytes : 0;
    rd_plan(&rd->plan_of[RD_DOUBLING], RD_DOUBLING, comm->topo.pos, comm->size);
    rd_plan(&rd->plan_of[RD_HALVING], RD_HALVING, comm->topo.pos, comm->size);
    rd->plan = &rd->plan_of[RD_DOUBLING];
    if (comm->cfg.rh_piece_bytes > 0) { /* whole multiples of P2: only the last is padded */
        size_t p2 = (size_t)rd->plan_of[RD_HALVING].p2;

        rd->piece_max = comm->cfg.rh_piece_bytes / sizeof(float) / p2 * p2;
        rd->piece_max = rd->piece_max > 0 ? rd->piece_max : p2;
    }
    memset(&mine, 0, sizeof(mine));
    for (int s = 0; s < RD_SLOTS; s++)
        if (rd_partner(rd->plan, comm->topo.pos, comm->size, s) >= 0)
            held_slot[nheld++] = s;
    st = ring_port_hold(&ph, comm->topo.peers[comm->rank].host, nheld, held_port);
    for (int i = 0; st == RING_OK && i < nheld; i++)
        mine.ports[held_slot[i]] = held_port[i];
    if (st == RING_OK)
        st = ring_allgather(comm, &mine, all, sizeof(mine));
    if (st != RING_OK)
        goto out;
    for (int r = 0; r < comm->size; r++)
        for (int s = 0; s < RD_SLOTS; s++)
            ports[r * RD_SLOTS + s] = all[r].ports[s];
    /* in slot order on every peer: a peer only ever waits for a pair of a slot
     * at or below its own, so the opens cannot wait on each other in a circle */
    for (int i = 0; i < nheld; i++) {
        int s = held_slot[i], other = rd_partner(rd->plan, comm->topo.pos, comm->size, s);
        int lo = comm->topo.pos < other ? comm->topo.pos : other;
        int hi = comm->topo.pos < other ? other : comm->topo.pos;
        int members[2] = {comm->topo.order[lo], comm->topo.order[hi]};
        const char *pair_settings[] = {"channels", "1", "tcp-streams", "1", "codec", "none",
                                       "lz4", "off", "error-feedback", "off", NULL, NULL, NULL};
        char what[48], tag[64];

        /* a pair across hosts runs what the ring chose for those (Rabenseifner's
         * moves megabytes over it): left to choose again from its peer list, which
         * drops --host-id, it would take one machine standing in for several hosts
         * for one host (as hier.c's cross rings) */
        if (comm->cfg.transport == RING_CFG_TRANSPORT_AUTO &&
            strcmp(comm->topo.hosts[members[0]], comm->topo.hosts[members[1]]) != 0) {
            pair_settings[10] = "transport";
            pair_settings[11] = strcmp(ring_comm_transport(comm), "shm") == 0
                                    ? "tcp" : ring_comm_transport(comm);
        }

        if (s == 0)
            snprintf(what, sizeof(what), "pair of places %d and %d", lo, hi);
        else
            snprintf(what, sizeof(what), "pair of stage %d", s - 1);
        snprintf(tag, sizeof(tag), "rd%d-%d-%d", s, lo, hi);
        ring_port_hold_release(&ph, i);
        st = ring_sub_open(comm, &rd_owner, open_fn, &rd->pair[s], what, members, 2,
                           comm->topo.pos == lo ? 0 : 1, ports, RD_SLOTS, s, tag, pair_settings);
        if (st != RING_OK)
            goto out;
        over = ring_comm_transport(rd->pair[s].comm);
    }
    if (rd->forced)
        ring_log(RING_LOG_INFO, "recursive doubling (--algo rd): %d steps over pairs (%s) for "
                 "every fp32 allreduce without a codec; those with one stay on the ring",
                 rd->plan->nsteps, over);
    else
        ring_log(RING_LOG_INFO, "recursive doubling: %d steps over pairs (%s) for fp32 "
                 "allreduces without a codec of at most %zu bytes", rd->plan->nsteps, over,
                 rd->max_bytes);
    if (!rd->forced && rd->rh_max_bytes > rd->max_bytes)
        ring_log(RING_LOG_INFO, "Rabenseifner's algorithm: %d steps over the same pairs for "
                 "those of %zu to %zu bytes", rd->plan_of[RD_HALVING].nsteps,
                 rd->max_bytes + 1, rd->rh_max_bytes);
    comm->algo.rd = rd;
    comm->algo.ops[RING_ALGO_RD] = &rd_ops;
    rd = NULL;
out:
    if (rd != NULL) {
        for (int s = 0; s < RD_SLOTS; s++)
            ring_sub_close(&rd->pair[s], close_fn);
        free(rd);
    }
    ring_port_hold_release(&ph, -1);
    free(all);
    free(ports);
    return st;
}

void ring_rd_close(ring_comm_t *comm)
{
    struct ring_rd *rd = comm->algo.rd;

    if (rd == NULL)
        return;
    for (int s = 0; s < RD_SLOTS; s++)
        ring_sub_close(&rd->pair[s], rd->close_fn);
    free(rd->swap);
    free(rd->pad);
    free(rd);
    comm->algo.rd = NULL;
    comm->algo.ops[RING_ALGO_RD] = NULL;
}

size_t ring_rd_max_bytes(const ring_comm_t *comm)
{
    return comm->algo.rd != NULL ? comm->algo.rd->max_bytes : 0;
}

void ring_rd_set_max_bytes(ring_comm_t *comm, size_t bytes)
{
    if (comm->algo.rd != NULL)
        comm->algo.rd->max_bytes = bytes;
}

size_t ring_rh_max_bytes(const ring_comm_t *comm)
{
    return comm->algo.rd != NULL ? comm->algo.rd->rh_max_bytes : 0;
}

void ring_rh_set_max_bytes(ring_comm_t *comm, size_t bytes)
{
    if (comm->algo.rd != NULL && rh_pays(comm->size))
        comm->algo.rd->rh_max_bytes = bytes;
}

static int rd_takes(const ring_comm_t *comm, const ring_request_t *req)
{
    const struct ring_rd *rd = comm->algo.rd;

    return rd != NULL && req->coll == RING_COLL_ALLREDUCE && req->dtype == RING_FLOAT32 &&
           req->dev_recvbuf == NULL && req->count > 0 &&
           ring_enc_wire(comm, req) == RING_CODEC_NONE &&
           (rd->forced || req->count * sizeof(float) <= rd->max_bytes ||
            req->count * sizeof(float) <= rd->rh_max_bytes);
}

/* Room for n floats in *buf (of *have): 0, or the failure. */
static ring_status_t rd_room(ring_comm_t *comm, float **buf, size_t *have, size_t n)
{
    float *grown;

    if (n <= *have)
        return RING_OK;
    if ((grown = realloc(*buf, n * sizeof(float))) == NULL)
        return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_NO_MEMORY,
                                                    .culprit = comm->rank, .step = -1},
                              "recursive doubling: out of memory for %zu elements", n);
    *buf = grown;
    *have = n;
    return RING_OK;
}

/* Where the piece under way lands: the request's recvbuf at piece_off. */
static float *rd_out(const struct ring_rd *rd)
{
    return (float *)rd->req->recvbuf + rd->piece_off;
}

/* The piece at piece_off: the rest of the call, or piece_max of it (Rabenseifner's). */
static ring_status_t rd_begin_piece(ring_comm_t *comm)
{
    struct ring_rd *rd = comm->algo.rd;
    const ring_request_t *req = rd->req;
    size_t left = req->count - rd->piece_off, p2 = (size_t)rd->plan->p2;

    rd->piece_n = rd_halving(rd) && rd->piece_max > 0 && left > rd->piece_max ? rd->piece_max
                                                                                : left;
    /* the fold's swap gathers two buffers, in both algorithms */
    RING_CHECK(rd_room(comm, &rd->swap, &rd->swap_count, rd->piece_n * 2));
    rd->padded = (rd->piece_n + p2 - 1) / p2 * p2;
    rd->work = rd_out(rd);
    if (rd_halving(rd) && rd->padded != rd->piece_n) {
        RING_CHECK(rd_room(comm, &rd->pad, &rd->pad_count, rd->padded));
        rd->work = rd->pad;
    }
    /* Rabenseifner's without a fold scatters straight from the user's buffer
     * (no copy of it first: its first step reads and writes every byte anyway) */
    rd->src0 = rd_halving(rd) && rd->plan->steps[0].kind == RH_SCATTER
                   ? (const float *)req->sendbuf + rd->piece_off : NULL;
    if (req->recvbuf != req->sendbuf && rd->src0 == NULL)
        memcpy(rd_out(rd), (const float *)req->sendbuf + rd->piece_off,
               rd->piece_n * sizeof(float));
    rd->step = 0;
    rd->sub_req = NULL;
    return RING_OK;
}

static ring_status_t rd_begin(ring_comm_t *comm, ring_request_t *req)
{
    struct ring_rd *rd = comm->algo.rd;
    /* every peer picks the same: the same count, the same limits (the hello) */
    enum rd_algo_kind kind = !rd->forced && req->count * sizeof(float) > rd->max_bytes
                                 ? RD_HALVING : RD_DOUBLING;

    rd->plan = &rd->plan_of[kind];
    rd->req = req;
    rd->piece_off = 0;
    rd->nonfinite = 0;
    RING_CHECK(rd_begin_piece(comm));
    rd->last_move = ring_now();
    rd->asked_at = 0;
    memset(rd->questioned, 0, sizeof(rd->questioned));
    return RING_OK;
}

/* The pair's frames carry the call's tensor id, in bit 31 the op and in bit 30
 * whether more pieces follow: a peer that calls with another tensor id or op
 * (or count: the sizes, and a call of fewer pieces ending where the other's
 * goes on) is a mismatch the pair sees, as the ring would. */
static uint32_t rd_pair_tid(const struct ring_rd *rd)
{
    const ring_request_t *req = rd->req;

    return (req->tensor_id & RD_TID_MASK) | (req->op == RING_AVG ? 0x80000000u : 0) |
           (rd->piece_off + rd->piece_n < req->count ? RD_TID_MORE : 0);
}


static ring_status_t rd_start_step(ring_comm_t *comm)
{
    struct ring_rd *rd = comm->algo.rd;
    const rd_step_t *s = &rd->plan->steps[rd->step];
    ring_sub_t *pair = &rd->pair[s->slot];
    size_t bytes = rd->piece_n * sizeof(float);
    float *out = rd_out(rd);
    ring_status_t st;

    if (s->kind == RH_SCATTER || s->kind == RH_GATHER) {
        int stage = s->slot - 1, upper = (comm->topo.pos >> stage) & 1;
        const float *from = rd->work;
        size_t off, len;

        rh_window(comm->topo.pos, stage, rd->padded, &off, &len);
        if (s->kind == RH_SCATTER && stage == 0) {
            const float *in = rd->src0 != NULL ? rd->src0 : out;

            if (rd->work != out) { /* the first scatter: from a padded copy */
                memcpy(rd->work, in, rd->piece_n * sizeof(float));
                memset(rd->work + rd->piece_n, 0, (rd->padded - rd->piece_n) * sizeof(float));
            } else {
                from = in;
            }
        }
        /* the pair's rank 0 is the lower place, whose bit is 0: it keeps the lower half */
        if (s->kind == RH_SCATTER) {
            st = ring_reduce_scatter_start(pair->comm, from + off,
                                           rd->work + off + (size_t)upper * (len / 2), len / 2,
                                           RING_FLOAT32, RING_SUM, rd_pair_tid(rd),
                                           RING_CALL_EXACT, &rd->sub_req);
            /* only the last scatter's sums are final: it alone looks for inf and NaN
             * (an earlier one may have looked already; that is no harm) */
            if (st == RING_OK && stage + 1 < rd->plan->stages)
                rd->sub_req->skip_nonfinite = 1;
        } else { /* what this place knows of its half travels on the gather's frames */
            st = ring_allgather_start_flagged(pair->comm,
                                              rd->work + off + (size_t)upper * (len / 2),
                                              rd->work + off, len / 2 * sizeof(float),
                                              rd_pair_tid(rd), rd->nonfinite, &rd->sub_req);
        }
    } else if (s->kind == RD_SWAP)
        st = ring_allgather_start(pair->comm, out, rd->swap, bytes, rd_pair_tid(rd),
                                  &rd->sub_req);
    else /* the lower place (the pair's 0) has the result */
        st = ring_broadcast_start(pair->comm, out, bytes, 0, rd_pair_tid(rd),
                                  &rd->sub_req);
    if (st != RING_OK) {
        rd->sub_req = NULL;
        return pair->comm->fail.error != RING_OK ? rd_pair_failed(comm, pair)
                                            : ring_sub_fail(comm, &rd_owner, pair, st);
    }
    rd->last_move = ring_now();
    return RING_OK;
}


/* Where the step under way sits in everyone's schedule: the fold 0, stage k
 * 1 + k (Rabenseifner's gathers then count on, backwards), the result last.
 * A peer waits the longer the later its step, so that the first to time out
 * is the one that waits on a stopped peer itself, not one that waits on a
 * peer that waits. */
static int rd_level(const struct ring_rd *rd)
{
    const rd_step_t *s = &rd->plan->steps[rd->step];
    int stages = rd->plan->stages, halving = rd_halving(rd);

    if (s->kind == RD_GIVE_RESULT || s->kind == RD_TAKE_RESULT)
        return (halving ? 2 * stages : stages) + 1;
    return s->kind == RH_GATHER ? 2 * stages + 1 - s->slot : s->slot;
}

/* What a finished step leaves in recvbuf. */
static void rd_apply_step(ring_comm_t *comm)
{
    struct ring_rd *rd = comm->algo.rd;
    const rd_step_t *s = &rd->plan->steps[rd->step];
    ring_request_t *req = rd->req;
    float *out = rd_out(rd);

    if (s->kind == RH_SCATTER) {
        /* the pair added this place's half in place; the last one is its block */
        size_t off, len;

        if (rd->step != rd->plan->last_sum || req->op != RING_AVG)
            return;
        rh_window(comm->topo.pos, rd->plan->stages, rd->padded, &off, &len);
        ring_scale_f32(rd->work + off, rd->work + off, 1.0f / (float)comm->size, len);
        return;
    }
    if (s->kind == RH_GATHER) { /* the last gather completes the (padded) copy */
        if (s->slot == 1 && rd->work != out)
            memcpy(out, rd->work, rd->piece_n * sizeof(float));
        return;
    }
    if (s->kind != RD_SWAP || comm->topo.pos >= rd->plan->p2)
        return; /* the result came in place; a place above P2 only gave its buffer */
    /* both of the pair add the same two halves in the same order: the same bits */
    ring_reduce_sum_f32(out, rd->swap, rd->swap + rd->piece_n, rd->piece_n);
    if (rd->step == rd->plan->last_sum && req->op == RING_AVG)
        ring_scale_f32(out, out, 1.0f / (float)comm->size, rd->piece_n);
}

/* Nothing moved on the pair for the timeout (and this step's grace): name the
 * peer this one waits for. */
static ring_status_t rd_timed_out(ring_comm_t *comm, double idle)
{
    struct ring_rd *rd = comm->algo.rd;
    const ring_sub_t *pair = &rd->pair[rd->plan->steps[rd->step].slot];
    int other = pair->members[0] == comm->rank ? pair->members[1] : pair->members[0];

    return ring_comm_fail_peer(comm, rd->req,
                               &(ring_fault_t){.status = RING_ERR_TIMED_OUT, .culprit = other,
                                               .sys_errno = ETIMEDOUT, .step = -1},
                               "%s, %s: no word from {peer} for %.1f s: it "
                               "stopped or is stuck, or it called another collective or count "
                               "than this peer (every peer must make the same calls in the same "
                               "order); its own log says which", rd_name(rd), pair->what, idle);
}

/* The timeout passed with no word from the partner. It may itself wait for a
 * peer that stopped: ask it first, the way the ring asks its left neighbour
 * (fail.c's probe). The question is this peer's timeout, naming the partner,
 * sent on the pair, which stays up here for the answer; a live partner
 * answers by failing its ring, naming whom it waits for (rd_fail_timeout),
 * and sends that back on the pair it was asked on (rd_on_fail), whatever
 * round it is stuck in. No answer within RD_ANSWER_S: the partner is the one
 * that stopped (rd_progress). */
static void rd_ask(ring_comm_t *comm, ring_sub_t *pair, int hops)
{
    struct ring_rd *rd = comm->algo.rd;
    int other = pair->members[0] == comm->rank ? pair->members[1] : pair->members[0];
    double window = RD_ANSWER_S - RD_HOP_S * hops;

    rd->asked_at = ring_now();
    rd->answer_by = rd->asked_at + (window > RD_ANSWER_MIN_S ? window : RD_ANSWER_MIN_S);
    ring_log(RING_LOG_DEBUG, "%s, %s: no word from rank %d for %.1f s: asking it what it "
             "waits for (%d hops from the first question)", rd_name(rd), pair->what, other,
             rd->asked_at - rd->last_move, hops);
    ring_comm_send_relay(pair->comm, RING_ERR_TIMED_OUT, comm->rank + 1, other + 1, hops);
}

/* Whether what failed pair comm pc is a question to this peer (rank): a relayed
 * timeout that names it (rd_ask) */
static int rd_asked_me(const ring_comm_t *pc, int rank)
{
    const ring_frame_t *q = &pc->fail.abort_seen;

    return pc->fail.abort_seen_valid && q->status == RING_ERR_TIMED_OUT &&
           (q->detail & 0xffffffffu) == (uint64_t)rank + 1;
}

/* A partner asked this peer what it waits for (its rd_ask failed pair s here).
 * Waiting in a step of its own, this peer passes the question on to the
 * partner of that step, one hop further (or shortens its own question's
 * time to that), and answers once it knows (rd_on_fail); returns 0 then.
 * Otherwise (not waiting, or waiting on the asker) returns 1: answer now. */
static int rd_pass_question(ring_comm_t *comm, int s)
{
    struct ring_rd *rd = comm->algo.rd;
    const ring_comm_t *pc = rd->pair[s].comm;
    const ring_frame_t *q = &pc->fail.abort_seen;
    int hops, cur;

    if (!rd_asked_me(pc, comm->rank) || rd->req == NULL ||
        rd->step >= rd->plan->nsteps || rd->sub_req == NULL ||
        (cur = rd->plan->steps[rd->step].slot) == s)
        return 1;
    hops = (q->step < 64 ? q->step : 64) + 1;
    rd->questioned[s] = 1;
    if (rd->asked_at == 0) {
        rd_ask(comm, &rd->pair[cur], hops);
    } else {
        double by = ring_now() + RD_ANSWER_S - RD_HOP_S * hops;

        if (by < rd->answer_by)
            rd->answer_by = by;
    }
    return 0;
}

/* A neighbour on the ring timed out and asks what this peer waits for. */
static ring_status_t rd_fail_timeout(ring_comm_t *comm, ring_request_t *req, double waited)
{
    struct ring_rd *rd = comm->algo.rd;

    (void)req;
    if (rd->req == NULL || rd->step >= rd->plan->nsteps)
        return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_TIMED_OUT, .culprit = -1,
                                                    .sys_errno = ETIMEDOUT, .step = -1},
                              "recursive doubling: timed out after %.0f s", waited);
    return rd_timed_out(comm, ring_now() - rd->last_move);
}

static ring_status_t rd_progress(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                                 int *finished_p)
{
    struct ring_rd *rd = comm->algo.rd;
    int nonfinite = 0;
    ring_status_t st;

    *finished_p = rd->req == NULL;
    if (comm->fail.error != RING_OK)
        return comm->fail.error;
    if (rd->req == NULL)
        return RING_OK;
    for (int s = 0; s < RD_SLOTS; s++) /* a failure passed on, an answer, or a question */
        if (rd->pair[s].comm != NULL && rd->pair[s].comm->fail.error != RING_OK &&
            !rd->questioned[s] && rd_pass_question(comm, s))
            return rd_pair_failed(comm, &rd->pair[s]);
    if (rd->asked_at != 0) { /* the answer comes on the asked pair; none in time: it stopped */
        ring_sub_t *pair = &rd->pair[rd->plan->steps[rd->step].slot];

        (void)ring_comm_progress(pair->comm);
        if (pair->comm->fail.error != RING_OK)
            return rd_pair_failed(comm, pair);
        return ring_now() > rd->answer_by ? rd_timed_out(comm, ring_now() - rd->last_move)
                                          : RING_OK;
    }
    while (rd->step < rd->plan->nsteps ||
           rd->piece_off + rd->piece_n < req->count) { /* the next piece (Rabenseifner's) */
        ring_sub_t *pair;
        ring_request_t *sub;
        int moved;
        double now;

        if (rd->step == rd->plan->nsteps) {
            rd->piece_off += rd->piece_n;
            RING_CHECK(rd_begin_piece(comm));
        }
        pair = &rd->pair[rd->plan->steps[rd->step].slot];
        if (rd->sub_req == NULL)
            RING_CHECK(rd_start_step(comm));
        moved = ring_comm_progress(pair->comm);
        now = ring_now();
        if (moved != 0)
            rd->last_move = now;
        if (!rd->sub_req->done) {
            if (now - rd->last_move > comm->cfg.timeout_s + RD_GRACE_S * rd_level(rd)) {
                rd_ask(comm, pair, 0);
                return RING_OK;
            }
            if (moved > 0)
                *moved_p += moved;
            return RING_OK;
        }
        sub = rd->sub_req;
        rd->sub_req = NULL;
        /* done: waiting releases its slot. An inf or NaN in a scatter's sum (or on a
         * gather's frames) is a result, not a failure: noted, and it reaches every
         * peer, through the gathers' frames or in the buffer the look below reads */
        st = ring_request_wait(sub);
        if (st != RING_OK && !(st == RING_ERR_NONFINITE && pair->comm->fail.error == RING_OK))
            return rd_pair_failed(comm, pair);
        rd->nonfinite |= st == RING_ERR_NONFINITE;
        ring_sub_add_stats(comm, pair); /* its frames count as the ring's */
        rd_apply_step(comm);
        rd->step++;
        *moved_p += 1;
    }
    /* every peer holds the same bits: each finds the same non-finite values.
     * Rabenseifner's (without a fold) knows already: each block's owner looked
     * at it in its last scatter, and the gathers' frames carried what they knew */
    if (rd_halving(rd) && rd->plan->p2 == comm->size)
        nonfinite = rd->nonfinite;
    else
        (void)comm->enc.kops->absmax_f32(req->recvbuf, req->count, &nonfinite);
    req->nonfinite = nonfinite;
    if (rd_halving(rd))
        comm->stats.rh_allreduces++;
    else
        comm->stats.rd_allreduces++;
    rd->req = NULL;
    *finished_p = 1;
    return RING_OK;
}

/* The ring failed: every pair's partner hears of it through the pair (a ring
 * ABORT reaches a peer running recursive doubling only from its right
 * neighbour, and not at all past a stopped one). */
static void rd_on_fail(ring_comm_t *comm)
{
    struct ring_rd *rd = comm->algo.rd;

    for (int s = 0; rd != NULL && s < RD_SLOTS; s++) {
        ring_comm_t *pc = rd->pair[s].comm;

        /* a mismatch's ABORT carries the calls in the fields a relay would use;
         * it goes round the ring backwards, where nobody is stopped */
        if (pc == NULL || comm->fail.error == RING_ERR_MISMATCH)
            continue;
        /* the partner asked what this peer waits for (rd_ask), which failed the
         * pair here: the answer goes back on it, the one way it waits on */
        if (pc->fail.error != RING_OK) {
            if (rd_asked_me(pc, comm->rank))
                ring_comm_send_relay(pc, comm->fail.error, comm->rank + 1,
                                     comm->fail.error_culprit + 1, -1);
            continue;
        }
        (void)ring_comm_fail(pc, &(ring_fault_t){.status = comm->fail.error, .culprit = -1,
                                                 .step = -1, .relay_origin = comm->rank + 1,
                                                 .relay_culprit = comm->fail.error_culprit + 1},
                             "the ring failed: %s", comm->fail.error_msg);
    }
}

static int rd_busy(const ring_comm_t *comm)
{
    return comm->algo.rd != NULL && comm->algo.rd->req != NULL;
}

static int rd_wait(ring_comm_t *comm, int timeout_ms)
{
    struct ring_rd *rd = comm->algo.rd;
    ring_comm_t *sub;

    if (rd == NULL || rd->req == NULL || rd->sub_req == NULL)
        return 0;
    /* a failure passed on through another pair (rd_progress looks at their errors):
     * looked for now and then, not on every wait (each look polls their sockets) */
    if (ring_now() >= rd->next_look) {
        rd->next_look = ring_now() + RD_LOOK_S;
        for (int s = 0; s < RD_SLOTS; s++)
            if (rd->pair[s].comm != NULL && s != rd->plan->steps[rd->step].slot)
                (void)ring_comm_progress(rd->pair[s].comm);
    }
    /* the ring's own events (an ABORT) are seen within 2 ms; after a question,
     * its answer comes on the pair asked */
    sub = rd->pair[rd->plan->steps[rd->step].slot].comm;
    sub->tp_ops->wait(sub->tp, timeout_ms < 2 ? timeout_ms : 2);
    return 1;
}

static const ring_algo_ops_t rd_ops = {
    .takes = rd_takes,
    .begin = rd_begin,
    .progress = rd_progress,
    .wait = rd_wait,
    .fail_timeout = rd_fail_timeout,
    .busy = rd_busy,
    .notice = 1,
    .on_fail = rd_on_fail,
};
