/*
 * fail.c - the first error on a communicator: recorded once with its
 * phase, peer and cause, made sticky, and told to both neighbours in an
 * ABORT frame so that every peer fails promptly with the same diagnosis
 * instead of waiting for its own timeout. A received ABORT is passed on
 * unchanged, so the last peer to hear of it still names the origin, the
 * culprit and what differed.
 */
#include "ring_build.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "collectives.h"
#include "algo.h"
#include "comm_int.h"
#include "fail.h"
#include "handshake.h"
#include "log.h"

#define NOTICE_LINGER_S 0.2
#define PROBE_GRACE_MAX_S 0.5


const char *ring_rank_addr(const ring_comm_t *comm, int rank, char *buf, size_t len)
{
    if (rank < 0 || rank >= comm->size || comm->topo.peers == NULL)
        snprintf(buf, len, "?");
    else
        ring_peer_format(&comm->topo.peers[rank], buf, len);
    return buf;
}

ring_request_t *ring_comm_active_request(ring_comm_t *comm)
{
    /* the oldest request that started and has not finished */
    for (unsigned i = 0; i < comm->requests.count; i++) {
        ring_request_t *req = &comm->requests.slots[(comm->requests.head + i) % RING_MAX_REQUESTS];
        if (req->started && !req->done)
            return req;
    }
    return NULL;
}

int ring_comm_current_step(const ring_comm_t *comm)
{
    int step = -1;

    /* the earliest step any channel still has work in */
    for (int c = 0; c < comm->nchannels; c++) {
        const ring_channel_t *ch = &comm->channels[c];
        uint32_t oldest;
        int s;

        /* the oldest frame not yet done, either way (a broadcast's root only sends) */
        if (ch->sched.nchunks == 0 ||
            (ch->recvs_done >= ch->sched.nrecv && ch->sends_done >= ch->sched.nsend))
            continue;
        oldest = ch->recvs_done >= ch->sched.nrecv ? ch->sends_done
                 : ch->sends_done >= ch->sched.nsend ? ch->recvs_done
                 : ch->recvs_done < ch->sends_done   ? ch->recvs_done
                                                     : ch->sends_done;
        s = ch->sched.first_step + (int)(oldest / (uint32_t)ch->sched.nchunks);
        if (step < 0 || s < step)
            step = s;
    }
    return step;
}

void ring_phase_format_round(const ring_comm_t *comm, uint64_t round, ring_coll_t coll, int step,
                             char *buf, size_t len)
{
    const char *name = coll < RING_COLL_COUNT ? ring_coll_names[coll] : "?";

    if (coll == RING_COLL_BROADCAST || (coll != RING_COLL_ALLREDUCE && step < 0))
        snprintf(buf, len, "round %llu (%s)", (unsigned long long)round, name);
    else if (coll != RING_COLL_ALLREDUCE) /* allgather's steps count from 0, as in messages */
        snprintf(buf, len, "round %llu (%s), step %d", (unsigned long long)round, name,
                 coll == RING_COLL_ALLGATHER ? step - (comm->size - 1) : step);
    else if (step < 0)
        snprintf(buf, len, "round %llu", (unsigned long long)round);
    else if (step < comm->size - 1)
        snprintf(buf, len, "round %llu, reduce-scatter step %d", (unsigned long long)round, step);
    else
        snprintf(buf, len, "round %llu, allgather step %d", (unsigned long long)round,
                 step - (comm->size - 1));
}

void ring_phase_format(const ring_comm_t *comm, const ring_request_t *req, int step, char *buf,
                       size_t len)
{
    if (req == NULL)
        snprintf(buf, len, "between allreduces");
    else
        ring_phase_format_round(comm, req->round, req->coll, step, buf, len);
}

int ring_ctrl_post(ring_comm_t *comm, ring_slot_t *slot, ring_tp_ep_t *ep, const ring_frame_t *f)
{
    if (ep == NULL || (slot->posted && !slot->req.done))
        return 0;
    ring_frame_encode(f, slot->hdr);
    if (comm->auth.macs != NULL)
        (void)ring_frame_macs_seal(comm->auth.macs, ep, slot->hdr, NULL, NULL, 0);
    slot->req.iov[0].iov_base = slot->hdr;
    slot->req.iov[0].iov_len = comm->auth.hdr_bytes;
    slot->req.iovcnt = 1;
    /* ahead of the data this peer gives up; a CLOSE comes after all of it */
    slot->req.urgent = f->type == RING_FRAME_ABORT || f->type == RING_FRAME_WAITING;
    slot->posted = comm->tp_ops->post_send(ep, &slot->req) == RING_OK;
    return 1;
}

void ring_comm_defer_abort(ring_comm_t *comm, const ring_frame_t *f)
{
    comm->fail.abort_deferred = *f;
    comm->fail.abort_deferred_valid = 1;
}

void ring_abort_flush(ring_comm_t *comm)
{
    double until = ring_now() + NOTICE_LINGER_S;

    /* best effort: give the notices a moment to leave, never wait for a dead peer */
    while (ring_now() < until &&
           ((comm->fail.abort_right.posted && !comm->fail.abort_right.req.done) ||
            (comm->fail.abort_left.posted && !comm->fail.abort_left.req.done))) {
        if (comm->tp_ops->progress(comm->tp) == 0)
            comm->tp_ops->wait(comm->tp, 5);
    }
}

/* Send f to the right neighbour (it reads it in place of data) and to the
 * left one (on its back channel); skip_rank already knows. */
static void notice_send(ring_comm_t *comm, const ring_frame_t *f, int skip_rank)
{
    /* two peers: the one it came from is the only one, and failed already (an
     * echo would fail rd.c's pair that asked a question, which waits for the answer) */
    if (comm->size < 2 || comm->tp == NULL || (comm->size == 2 && skip_rank >= 0))
        return;
    if (comm->topo.right_rank != skip_rank || comm->size == 2)
        (void)ring_ctrl_post(comm, &comm->fail.abort_right, comm->channels[0].right[0], f);
    if (comm->topo.left_rank != skip_rank || comm->size == 2)
        (void)ring_ctrl_post(comm, &comm->fail.abort_left, comm->channels[0].left[0], f);
    ring_abort_flush(comm);
}

void ring_ctrl_fill(const ring_comm_t *comm, const ring_request_t *req, ring_frame_type_t type,
                    ring_frame_t *f)
{
    memset(f, 0, sizeof(*f));
    f->type = (uint8_t)type;
    f->channel = type == RING_FRAME_ABORT && comm->open_done ? RING_ABORT_AFTER_OPEN : 0;
    f->origin_rank = (uint32_t)comm->rank;
    f->culprit_rank = UINT32_MAX;
    if (req != NULL) {
        f->round = req->round;
        f->count = req->count;
        f->tensor_id = req->tensor_id;
        f->dtype = (uint8_t)req->dtype;
        f->op = (uint8_t)req->op;
        f->coll = (uint8_t)req->coll;
    }
}

void ring_comm_send_close(ring_comm_t *comm)
{
    ring_frame_t f;

    ring_ctrl_fill(comm, NULL, RING_FRAME_CLOSE, &f);
    notice_send(comm, &f, -1);
}

/* hook: rd.c's request under way names whom it waits for itself (its
 * fail_timeout); the ring's timeout and probe, which know only the
 * neighbours, stay out of it */
static int algo_owns_timeout(const ring_comm_t *comm, const ring_request_t *req)
{
    return req != NULL && req->algo != NULL && req->algo->fail_timeout != NULL &&
           req->algo->busy(comm);
}

/* hook: rd.c passes the failure on through its pairs */
static void algo_on_fail(ring_comm_t *comm)
{
    for (int a = 0; a < RING_ALGO_HOOKS; a++)
        if (comm->algo.ops[a] != NULL && comm->algo.ops[a]->on_fail != NULL)
            comm->algo.ops[a]->on_fail(comm);
}

static void mismatch_note(ring_comm_t *comm, int rank, ring_coll_t coll, uint64_t count,
                          uint32_t tensor_id, unsigned dtype, unsigned op, int cause)
{
    comm->fail.mismatch.cause = cause == RING_CAUSE_ALGO ? cause : 0;
    comm->fail.mismatch.dtype = dtype;
    comm->fail.mismatch.op = op;
    comm->fail.mismatch.rank = rank;
    comm->fail.mismatch.coll = coll;
    comm->fail.mismatch.count = count;
    comm->fail.mismatch.tensor_id = tensor_id;
}

ring_status_t ring_comm_fail(ring_comm_t *comm, const ring_fault_t *fault, const char *fmt, ...)
{
    ring_frame_t f;
    va_list ap;

    if (comm->fail.error != RING_OK)
        return ring_error_copy(comm->fail.error, comm->fail.error_msg);
    va_start(ap, fmt);
    vsnprintf(comm->fail.error_msg, sizeof(comm->fail.error_msg), fmt, ap);
    va_end(ap);
    comm->fail.error = fault->status;
    comm->fail.error_culprit = fault->culprit;
    ring_log(RING_LOG_ERROR, "%s", comm->fail.error_msg);
    ring_ctrl_fill(comm, ring_comm_active_request(comm), RING_FRAME_ABORT, &f);
    f.culprit_rank = fault->culprit >= 0 ? (uint32_t)fault->culprit : UINT32_MAX;
    f.status = (uint32_t)fault->status;
    f.sys_errno = fault->sys_errno;
    f.step = (uint16_t)(fault->step >= 0 ? fault->step : UINT16_MAX);
    if (fault->theirs != NULL) {
        mismatch_note(comm, fault->culprit, (ring_coll_t)fault->theirs->coll,
                      fault->theirs->count, fault->theirs->tensor_id, fault->theirs->dtype,
                      fault->theirs->op, fault->sys_errno);
        f.detail = fault->theirs->count;
        f.chunk = fault->theirs->tensor_id;
        f.flags = (uint16_t)(fault->theirs->dtype |
                             (fault->theirs->op | fault->theirs->coll << 4) << 8);
    } else if (fault->relay_origin > 0) {
        f.detail = (uint64_t)(uint32_t)fault->relay_origin << 32 | (uint32_t)fault->relay_culprit;
    }
    notice_send(comm, &f, -1);
    algo_on_fail(comm);
    return ring_error_copy(fault->status, comm->fail.error_msg);
}

void ring_comm_send_relay(ring_comm_t *comm, ring_status_t status, int relay_origin,
                          int relay_culprit, int hops)
{
    ring_frame_t f;

    ring_ctrl_fill(comm, ring_comm_active_request(comm), RING_FRAME_ABORT, &f);
    f.status = (uint32_t)status;
    f.step = (uint16_t)(hops >= 0 ? hops : UINT16_MAX);
    f.detail = (uint64_t)(uint32_t)relay_origin << 32 | (uint32_t)relay_culprit;
    notice_send(comm, &f, -1);
}

static int channel_waiting_left(const ring_comm_t *comm);

static double probe_grace(const ring_comm_t *comm)
{
    double grace = comm->cfg.timeout_s * 0.25;

    return grace < PROBE_GRACE_MAX_S ? grace : PROBE_GRACE_MAX_S;
}

/* Probe mode: ask the left neighbour whether it lives (an ABORT naming it,
 * which a live peer answers) before blaming it. Returns 1 once asked, 0 when
 * there is no one to ask (2 peers, or not waiting for the left one). */
static int probe_start(ring_comm_t *comm, ring_request_t *req, double idle)
{
    ring_frame_t f;
    double now;

    if (comm->fail.timeout_probe_deadline != 0)
        return 1;
    if (comm->size <= 2 || req == NULL || channel_waiting_left(comm) < 0 ||
        comm->channels[0].left[0] == NULL)
        return 0;
    ring_ctrl_fill(comm, req, RING_FRAME_ABORT, &f);
    f.culprit_rank = (uint32_t)comm->topo.left_rank;
    f.status = RING_ERR_TIMED_OUT;
    f.sys_errno = ETIMEDOUT;
    f.step = (uint16_t)ring_comm_current_step(comm);
    (void)ring_ctrl_post(comm, &comm->fail.probe_left, comm->channels[0].left[0], &f);
    now = ring_now();
    comm->fail.probe_started = now;
    comm->fail.probe_idle = idle > 0 ? idle : comm->cfg.timeout_s;
    comm->fail.timeout_probe_deadline = now + probe_grace(comm);
    return 1;
}

/* Tell the right neighbour that asked us that we wait too, and how long
 * until we decide (ms, in detail), so it waits for our answer instead of
 * blaming us. */
static void tell_right_waiting(ring_comm_t *comm)
{
    ring_frame_t f;
    double left_s = comm->fail.timeout_probe_deadline - ring_now();

    if (!comm->fail.probed_by_right)
        return;
    ring_ctrl_fill(comm, ring_comm_active_request(comm), RING_FRAME_WAITING, &f);
    f.detail = left_s > 0 ? (uint64_t)(left_s * 1000) + 1 : 0;
    (void)ring_ctrl_post(comm, &comm->fail.waiting_right, comm->channels[0].right[0], &f);
}

void ring_comm_probe_extend(ring_comm_t *comm, const ring_frame_t *waiting)
{
    /* wait for the asked peer's answer, which comes when it decides (and has
     * waited for its own left neighbour's); never past our own timeout more,
     * so a ring of live but stuck peers, all asking, still fails */
    double theirs = waiting->detail < 3600000 ? (double)waiting->detail / 1000 : 3600;
    double until = ring_now() + theirs + probe_grace(comm);
    double cap = comm->fail.probe_started + comm->cfg.timeout_s;

    if (comm->fail.timeout_probe_deadline == 0)
        return;
    if (until > cap)
        until = cap;
    if (until > comm->fail.timeout_probe_deadline) {
        comm->fail.timeout_probe_deadline = until;
        tell_right_waiting(comm); /* whoever asked us waits as long */
    }
}

int ring_comm_probe_check(ring_comm_t *comm)
{
    double now = ring_now();

    if (comm->fail.error != RING_OK)
        return 1;
    if (comm->fail.timeout_probe_deadline == 0 || now < comm->fail.timeout_probe_deadline)
        return 0;
    ring_comm_fail_timeout(comm, ring_comm_active_request(comm),
                           comm->fail.probe_idle + (now - comm->fail.probe_started));
    return 1;
}

ring_status_t ring_comm_fail_peer(ring_comm_t *comm, const ring_request_t *req,
                                  const ring_fault_t *fault, const char *fmt, ...)
{
    char phase[96], who[340], msg[900], out[1024];
    const char *at, *rest = msg;
    size_t n = 0;
    va_list ap;

    ring_phase_format(comm, req, fault->step, phase, sizeof(phase));
    snprintf(who, sizeof(who), "rank %d (", fault->culprit);
    ring_rank_addr(comm, fault->culprit, who + strlen(who), sizeof(who) - strlen(who) - 1);
    strcat(who, ")");
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    n = (size_t)snprintf(out, sizeof(out), "%s: ", phase);
    while (n < sizeof(out) && (at = strstr(rest, "{peer}")) != NULL) {
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%.*s%s", (int)(at - rest), rest, who);
        rest = at + strlen("{peer}");
    }
    if (n < sizeof(out))
        snprintf(out + n, sizeof(out) - n, "%s", rest);
    return ring_comm_fail(comm, fault, "%s", out);
}

ring_status_t ring_comm_fail_tag(ring_comm_t *comm, ring_request_t *req, int step, int peer,
                                 const char *what)
{
    ring_fault_t fault = {.status = RING_ERR_PROTOCOL, .culprit = peer, .step = step,
                          .sys_errno = RING_CAUSE_BAD_TAG};

    return ring_comm_fail_peer(comm, req, &fault,
                               "%s from {peer} does not carry a valid tag (--auth frames): it "
                               "was altered, replayed or injected on the connection, or that "
                               "peer does not hold this job's secret", what);
}

/* Whether an ABORT is a relay (ring_comm_send_relay, or ring_comm_fail with relay_origin):
 * no culprit of this communicator, the origin and culprit of the one it serves in detail.
 * A mismatch's ABORT uses detail for the other call's count. */
static int frame_is_relay(const ring_frame_t *f)
{
    return f->culprit_rank == UINT32_MAX && f->detail != 0 &&
           (ring_status_t)f->status != RING_ERR_MISMATCH;
}

/* An ABORT from a neighbour: adopt its diagnosis, pass it on unchanged, fail. */
ring_status_t ring_comm_fail_from_frame(ring_comm_t *comm, const ring_frame_t *f, int from_rank)
{
    char phase[96], addr[300], via[64] = "";
    int culprit = f->culprit_rank == UINT32_MAX ? -1 : (int)f->culprit_rank;
    int step = f->step == UINT16_MAX ? -1 : (int)f->step;
    unsigned their_dtype = f->flags & 0xff, their_op = (f->flags >> 8) & 0x0f;
    unsigned their_coll = f->flags >> 12;

    if (comm->fail.error != RING_OK)
        return ring_error_copy(comm->fail.error, comm->fail.error_msg);
    /* A neighbour timed out waiting for this peer, which is alive: so this
     * peer is waiting too, for someone further up the ring. When the right
     * neighbour asks, say so (WAITING) and ask the left one in turn, so the
     * question travels back to the peer that stopped and its answer comes
     * back down the ring; otherwise blame what this peer waits for. */
    if ((ring_status_t)f->status == RING_ERR_TIMED_OUT && culprit == comm->rank &&
        ring_comm_active_request(comm) != NULL) {
        ring_request_t *req = ring_comm_active_request(comm);

        if (from_rank == comm->topo.right_rank && !algo_owns_timeout(comm, req) &&
            probe_start(comm, req, 0)) {
            comm->fail.probed_by_right = 1;
            tell_right_waiting(comm);
            return RING_OK;
        }
        return ring_comm_fail_timeout(comm, req, comm->cfg.timeout_s);
    }
    /* the origin's round and step say where the ring broke, whatever this peer is doing;
     * during the ring doctor (diag/doctor.c) no peer is in a round */
    if (comm->doctor.running)
        snprintf(phase, sizeof(phase), "ring doctor");
    else
        ring_phase_format_round(comm, f->round, (ring_coll_t)f->coll, step, phase, sizeof(phase));
    ring_rank_addr(comm, culprit, addr, sizeof(addr));
    if ((int)f->origin_rank != from_rank)
        snprintf(via, sizeof(via), ", reported through rank %d", from_rank);
    if (frame_is_relay(f)) { /* ranks of the communicator the pair serves (src/algo/rd.c) */
        snprintf(comm->fail.error_msg, sizeof(comm->fail.error_msg),
                 "%s: relayed on this pair: rank %d says \"%s\", naming rank %d", phase,
                 (int)(f->detail >> 32) - 1, ring_status_str((ring_status_t)f->status),
                 (int)(uint32_t)f->detail - 1);
    } else switch ((ring_status_t)f->status) {
    case RING_ERR_REMOTE:
        if (f->sys_errno == RING_CAUSE_CLOSED)
            snprintf(comm->fail.error_msg, sizeof(comm->fail.error_msg),
                     "%s: rank %d (%s) closed its communicator during %s%s (seen by rank %u%s)",
                     phase, culprit, addr, comm->doctor.running ? "" : "this ",
                     comm->doctor.running         ? "the ring doctor"
                     : f->coll < RING_COLL_COUNT ? ring_coll_names[f->coll]
                                                  : "collective",
                     f->origin_rank, via);
        else
            snprintf(comm->fail.error_msg, sizeof(comm->fail.error_msg),
                     "%s: %s by rank %d (%s) (seen by rank %u%s)", phase,
                     ring_tp_cause(RING_ERR_REMOTE, f->sys_errno), culprit, addr, f->origin_rank,
                     via);
        break;
    case RING_ERR_TIMED_OUT:
        snprintf(comm->fail.error_msg, sizeof(comm->fail.error_msg),
                 "%s: rank %u timed out waiting for rank %d (%s)%s", phase, f->origin_rank,
                 culprit, addr, via);
        break;
    case RING_ERR_MISMATCH: {
        char mine[160], theirs[160];

        if (f->sys_errno == RING_CAUSE_SETTINGS) { /* no call differs: not a mismatch note */
            snprintf(comm->fail.error_msg, sizeof(comm->fail.error_msg),
                     "start-up: rank %u and rank %d (%s) have different settings: %s differs; "
                     "they stopped, and their messages say what each has (give every peer "
                     "the same)%s", f->origin_rank, culprit, addr,
                     ring_hello_field_name((unsigned)(f->detail < 64 ? f->detail : 0)), via);
            break;
        }
        if (culprit == comm->rank) /* the origin's call is the other one */
            mismatch_note(comm, (int)f->origin_rank, (ring_coll_t)f->coll, f->count,
                          f->tensor_id, f->dtype, f->op, f->sys_errno);
        else
            mismatch_note(comm, culprit, (ring_coll_t)their_coll, f->detail, f->chunk,
                          their_dtype, their_op, f->sys_errno);
        if (f->sys_errno == RING_CAUSE_ALGO) {
            ring_coll_describe((ring_coll_t)f->coll, f->round, f->count, f->dtype, f->op,
                               f->tensor_id, -1, mine, sizeof(mine));
            snprintf(comm->fail.error_msg, sizeof(comm->fail.error_msg),
                     "%s: rank %u and rank %d (%s) run %s by different algorithms (the ring "
                     "on one, recursive doubling or the direct allreduce on the other): the "
                     "calls differ in what decides the algorithm (RING_CALL_EXACT on some "
                     "peers only, or --algo, --rd-max-bytes or --codec)%s", phase,
                     f->origin_rank, culprit, addr, mine, via);
            break;
        }

        /* the broadcast root of the culprit's call is not in the notice */
        ring_coll_describe((ring_coll_t)f->coll, f->round, f->count, f->dtype, f->op,
                           f->tensor_id, -1, mine, sizeof(mine));
        ring_coll_describe((ring_coll_t)their_coll, f->round, f->detail, their_dtype,
                           their_op, f->chunk, -1, theirs, sizeof(theirs));
        snprintf(comm->fail.error_msg, sizeof(comm->fail.error_msg),
                 "%s: collective arguments differ: rank %u called %s; rank %d (%s) called %s%s",
                 phase, f->origin_rank, mine, culprit, addr, theirs, via);
        break;
    }
    case RING_ERR_PROTOCOL:
        if (f->sys_errno == RING_CAUSE_BAD_TAG) {
            snprintf(comm->fail.error_msg, sizeof(comm->fail.error_msg),
                     "%s: rank %u refused a frame from rank %d (%s) that does not carry a valid "
                     "tag (--auth frames: altered or injected on that connection)%s", phase,
                     f->origin_rank, culprit, addr, via);
            break;
        }
        /* fall through */
    default:
        snprintf(comm->fail.error_msg, sizeof(comm->fail.error_msg),
                 "%s: rank %u failed (%s) and stopped the ring%s", phase, f->origin_rank,
                 ring_status_str((ring_status_t)f->status), via);
        break;
    }
    comm->fail.error_culprit = culprit;
    comm->fail.error = (ring_status_t)f->status == RING_ERR_MISMATCH ? RING_ERR_MISMATCH
                                                                : RING_ERR_REMOTE;
    comm->fail.abort_seen = *f;
    comm->fail.abort_seen_valid = 1;
    /* a relay is a question or an answer: the communicator it serves says what failed */
    ring_log(frame_is_relay(f) ? RING_LOG_INFO : RING_LOG_ERROR, "%s", comm->fail.error_msg);
    notice_send(comm, f, from_rank);
    algo_on_fail(comm);
    return ring_error_copy(comm->fail.error, comm->fail.error_msg);
}

/* The channel whose receive from the left neighbour is what this peer waits
 * for (-1 if it waits on a send instead, or on nothing). */
static int channel_waiting_left(const ring_comm_t *comm)
{
    for (int c = 0; c < comm->nchannels; c++) {
        const ring_channel_t *ch = &comm->channels[c];

        if (ch->recvs_done < ch->sched.nrecv &&
            (ch->recvs_done < ch->next_recv || ch->sends_done == ch->next_send))
            return c;
        if (ch->sends_done < ch->sched.nsend)
            return -1;
    }
    return -1;
}

/* Fail with a timeout blaming peer: the left neighbour we wait for data from
 * (receiving), or the right one that does not read what we send. */
static ring_status_t fail_timeout_on(ring_comm_t *comm, ring_request_t *req, int receiving,
                                     int step, double waited)
{
    int peer = receiving ? comm->topo.left_rank : comm->topo.right_rank;
    ring_fault_t fault = {.status = RING_ERR_TIMED_OUT, .culprit = peer, .sys_errno = ETIMEDOUT,
                          .step = step};

    if (receiving)
        return ring_comm_fail_peer(comm, req, &fault,
                                   "timed out after %.0f s waiting for data from {peer} "
                                   "(stopped, overloaded or unreachable?)", waited);
    return ring_comm_fail_peer(comm, req, &fault,
                               "timed out after %.0f s sending to {peer}, which is not reading "
                               "(stopped or overloaded?)", waited);
}

/* The oldest thing we are waiting for, as a timeout message. */
ring_status_t ring_comm_fail_timeout(ring_comm_t *comm, ring_request_t *req, double waited)
{
    char phase[96];
    int c;

    if (algo_owns_timeout(comm, req))
        return req->algo->fail_timeout(comm, req, waited);
    c = channel_waiting_left(comm);

    if (c >= 0) {
        const ring_channel_t *ch = &comm->channels[c];

        return fail_timeout_on(comm, req, 1,
                               ch->sched.first_step +
                                   (int)(ch->recvs_done / (uint32_t)ch->sched.nchunks),
                               waited);
    }
    /* channel_waiting_left stopped at the first channel with sends pending, if any */
    for (c = 0; c < comm->nchannels; c++) {
        const ring_channel_t *ch = &comm->channels[c];

        if (ch->sends_done < ch->sched.nsend)
            return fail_timeout_on(comm, req, 0,
                                   ch->sched.first_step +
                                       (int)(ch->sends_done / (uint32_t)ch->sched.nchunks),
                                   waited);
    }
    ring_phase_format(comm, req, -1, phase, sizeof(phase));
    return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_TIMED_OUT, .culprit = -1,
                                                .sys_errno = ETIMEDOUT, .step = -1},
                          "%s: timed out after %.0f s without progress", phase, waited);
}

/* When a peer stops, every peer downstream starts waiting at the same moment,
 * and one two hops away may time out before the stopped peer's successor and
 * blame its own live neighbour. So before blaming the left neighbour, ask it
 * (probe_start). A live one answers by failing with what it waits for
 * (ring_comm_fail_from_frame), or, when it waits too, with WAITING and a
 * question to its own left neighbour; the answer from the peer next to the
 * stopped one then comes down the ring and wins. A peer that answers nothing
 * within the grace is blamed. */
int ring_comm_check_timeout(ring_comm_t *comm, double idle)
{
    ring_request_t *req;

    if (comm->fail.error != RING_OK)
        return 1;
    if (comm->fail.timeout_probe_deadline != 0)
        return ring_comm_probe_check(comm);
    if (idle <= comm->cfg.timeout_s)
        return 0;
    req = ring_comm_active_request(comm);
    if (algo_owns_timeout(comm, req))
        return 0;
    if (probe_start(comm, req, idle))
        return 0;
    ring_comm_fail_timeout(comm, req, idle);
    return 1;
}
