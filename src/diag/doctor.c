/*
 * doctor.c - the ring doctor: measure every edge of the ring (bandwidth and
 * latency from each peer to its right neighbour) one edge at a time, so a
 * slow link shows as itself instead of slowing every measurement the way a
 * whole-ring allreduce would; then every peer learns every result.
 *
 * Protocol. Every message is a 64-byte frame header (wire.h) of type
 * RING_FRAME_DOCTOR with its kind in `step`, on the ring's own connections:
 * nothing new is connected, and every doctor message is read by the doctor,
 * so the engine's frame stream afterwards starts clean. An ABORT, CLOSE or
 * allreduce frame arriving instead is reported as what it is.
 *
 *   S (place p) -> R (place p+1), on S's right connections, R's left ones:
 *     PING    round = seq         R answers PONG seq at once
 *     BURST   round = seq,        then `chunk` DATA frames of at most
 *             count = bytes,      chunk-size bytes (frame q with chunk = q on
 *             chunk = frames      connection q mod channels x streams); R
 *                                 answers ACK seq, count = bytes, once it has
 *                                 all of them
 *     TURN    payload: results    the edge is done: R measures its edge next
 *     RESULTS payload: results    after the last lap, once round the ring
 *   R -> S, on connection 0 the other way (S's back channel, where ABORT and
 *   CLOSE from the right neighbour arrive too): PONG, ACK.
 *
 * Order. Place 0 measures edge 0 (to place 1) and hands the TURN to place 1,
 * which measures edge 1, and so on; place N-1 measures edge N-1 (to place 0)
 * and hands the turn back to place 0: one lap. One edge is busy at a time;
 * the other peers wait for their turn. DOCTOR_LAPS laps, so a moment of
 * noise from other processes falls on one lap of an edge, not all of it.
 * The TURN carries every sender's results so far (DOCTOR_ENTRY bytes per
 * edge: bytes/s, burst bytes, latency in ns, bursts; little-endian), so
 * after the last lap place 0 holds them all and sends RESULTS round the ring
 * once more, to place N-1.
 *
 * What is measured, per edge and lap, by its sender:
 * - latency: DOCTOR_PINGS round trips of a 64-byte frame on the sender's
 *   clock. The peers' clocks are not synchronised, so a one-way time cannot
 *   be read off two of them; half a round trip can, and the path is the same
 *   both ways (one TCP connection or QP carries the ping and its answer).
 *   Reported: half the median round trip over all laps.
 * - bandwidth: bursts, each ended by its ACK. Lap 0 first probes with
 *   bursts growing from 64 KiB, so an edge too slow to move `bytes` in
 *   DOCTOR_REP_S gets smaller bursts instead of a long wait. Each lap starts
 *   with an untimed warm-up burst (TCP windows, a token bucket's burst
 *   allowance), then runs at least DOCTOR_MIN_REPS bursts back to back, more
 *   while the lap has run less than DOCTOR_LAP_S, at most DOCTOR_MAX_REPS,
 *   timed as a whole: bytes over the lap's time less one smallest round trip
 *   per burst (the link idles while an ACK comes back; at most a tenth of
 *   the lap, since a token bucket refills meanwhile). Timing the lap, not
 *   each burst, charges any pause between bursts to the link, so a token
 *   bucket that refilled meanwhile cannot make it look faster. Reported: the
 *   best lap. Other processes only ever slow a lap down, so the best one is
 *   the edge's capacity, which is what a diagnosis of the link wants and
 *   what stays put on a busy host.
 *
 * Waits are bounded like the engine's, by timeout_s without progress; a peer
 * waiting for its turn allows DOCTOR_TURN_S more for each edge before it.
 * Failures go through fail.c: sticky, an ABORT to both neighbours, passed on
 * round the ring, naming the peer and the edge.
 */
#include "ring_build.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "clock.h"
#include "comm_int.h"
#include "doctor.h"
#include "fail.h"
#include "frame_check.h"
#include "le.h"
#include "log.h"
#include "notice.h"

#define DOCTOR_MIN_BYTES ((size_t)4 << 10)
#define DOCTOR_MAX_BYTES ((size_t)1 << 36)
#define DOCTOR_PINGS 8            /* round trips per lap */
#define DOCTOR_PROBE_BYTES ((size_t)64 << 10)
#define DOCTOR_PROBE_S 0.02       /* a probe this long tells the edge's speed */
#define DOCTOR_REP_S 0.2          /* longest intended burst */
#define DOCTOR_MIN_REPS 2         /* timed bursts per lap, at least ... */
#define DOCTOR_MAX_REPS 16        /* ... and at most */
#define DOCTOR_LAP_S 0.05         /* keep timing bursts for this long per lap */
#define DOCTOR_TURN_S 10.0        /* allowance per edge measured before a peer's turn */

static const char *const kind_names[] = {"?", "PING", "PONG", "BURST", "DATA", "ACK", "TURN",
                                         "RESULTS"};

#define DOCTOR_SLOTS (RING_WINDOW * RING_MAX_CHANNELS)

struct ring_doctor {
    ring_slot_t ctl;        /* R: the next control message from the left (left[0]) */
    ring_slot_t reply;      /* R: PONG and ACK to the left (left[0]) */
    ring_slot_t out;        /* S: PING, BURST, TURN, RESULTS to the right (right[0]) */
    ring_tp_ep_t *send_ep[DOCTOR_SLOTS], *recv_ep[DOCTOR_SLOTS]; /* data slot w's connection */
    unsigned char *vec;     /* the results, DOCTOR_ENTRY bytes per edge */
    size_t vec_bytes;
    double rtt[DOCTOR_LAPS * DOCTOR_PINGS];
    int nrtt;
    double rtt_min;
    double best_bps;
    size_t limit_bytes;     /* the caller's burst size */
    size_t rep_bytes;       /* bursts of this edge after lap 0's probe */
    int reps;
    uint32_t seq;
    int lap;
    int sending;            /* 1: this peer's edge, 0: its left neighbour's */
    int right_done;         /* nothing more to send to the right: it may close */
};

typedef struct ring_doctor doctor_t;

void ring_doctor_free(ring_comm_t *comm)
{
    if (comm->doctor.state == NULL)
        return;
    free(comm->doctor.state->vec);
    free(comm->doctor.state);
    comm->doctor.state = NULL;
}

/* ---- where we are, for messages ------------------------------------------ */

static void doctor_where(const ring_comm_t *comm, char *buf, size_t len)
{
    const doctor_t *d = comm->doctor.state;
    int from = d->sending ? comm->rank : comm->topo.left_rank;
    int to = d->sending ? comm->topo.right_rank : comm->rank;

    snprintf(buf, len, "ring doctor, lap %d, edge rank %d -> rank %d", d->lap + 1, from, to);
}

static ring_status_t doctor_fail_link(ring_comm_t *comm, int peer, const ring_tp_ep_t *ep,
                                      const ring_tp_req_t *treq)
{
    ring_fault_t fault = {.status = RING_ERR_REMOTE, .culprit = peer,
                          .sys_errno = treq->sys_errno, .step = -1};
    char where[160], addr[300];

    doctor_where(comm, where, sizeof(where));
    ring_rank_addr(comm, peer, addr, sizeof(addr));
    return ring_comm_fail(comm, &fault, "%s: %s by rank %d (%s)", where,
                          ring_tp_ep_cause(comm->tp_ops, ep, treq), peer, addr);
}

static ring_status_t doctor_fail_protocol(ring_comm_t *comm, int peer, const char *what)
{
    ring_fault_t fault = {.status = RING_ERR_PROTOCOL, .culprit = peer, .step = -1};
    char where[160], addr[300];

    doctor_where(comm, where, sizeof(where));
    ring_rank_addr(comm, peer, addr, sizeof(addr));
    return ring_comm_fail(comm, &fault, "%s: rank %d (%s) sent %s", where, peer, addr, what);
}

/* peer sent an allreduce's frame (data, or the notice of a call that waits). */
static ring_status_t doctor_fail_data(ring_comm_t *comm, int peer, uint64_t round)
{
    /* PROTOCOL, not MISMATCH: the peers' ABORT of a mismatch reads as differing
     * allreduce arguments */
    ring_fault_t fault = {.status = RING_ERR_PROTOCOL, .culprit = peer, .step = -1};
    char where[160], addr[300];

    doctor_where(comm, where, sizeof(where));
    ring_rank_addr(comm, peer, addr, sizeof(addr));
    return ring_comm_fail(comm, &fault, "%s: rank %d (%s) sent allreduce data (round %llu) "
                          "instead of the doctor's frames: every peer must run the ring doctor "
                          "at the same point (ringd --doctor, ring-bench --doctor), or none",
                          where, peer, addr, (unsigned long long)round);
}

/*
 * A receive from `peer` finished: its doctor frame in *f, or the failure it
 * means (a broken connection, an ABORT passed on, a CLOSE, an allreduce).
 */
static ring_status_t doctor_frame(ring_comm_t *comm, const ring_slot_t *slot, int peer,
                                  const ring_tp_ep_t *ep, ring_frame_t *f)
{
    char what[200], where[160], addr[300];

    if (slot->req.status != RING_OK && slot->req.status != RING_ERR_MISMATCH)
        return doctor_fail_link(comm, peer, ep, &slot->req);
    if (slot->req.bytes < RING_FRAME_BYTES || ring_frame_decode(slot->hdr, f) != 0) {
        snprintf(what, sizeof(what), "something that is not a ringd frame (%zu bytes)",
                 slot->req.bytes);
        return doctor_fail_protocol(comm, peer, what);
    }
    if (slot->req.status != RING_ERR_MISMATCH && ring_slot_tag_ok(comm, ep, slot) != 0)
        return ring_comm_fail_tag(comm, NULL, -1, peer, "a ring doctor frame");
    if (f->type == RING_FRAME_ABORT)
        return ring_comm_fail_from_frame(comm, f, peer);
    if (f->type == RING_FRAME_CLOSE) {
        ring_fault_t fault = {.status = RING_ERR_REMOTE, .culprit = peer,
                              .sys_errno = RING_CAUSE_CLOSED, .step = -1};

        doctor_where(comm, where, sizeof(where));
        ring_rank_addr(comm, peer, addr, sizeof(addr));
        return ring_comm_fail(comm, &fault, "%s: rank %d (%s) closed its communicator during "
                              "the ring doctor", where, peer, addr);
    }
    if (f->type == RING_FRAME_DATA)
        return doctor_fail_data(comm, peer, f->round);
    if (f->type != RING_FRAME_DOCTOR || slot->req.status != RING_OK) {
        snprintf(what, sizeof(what), "a frame of type %u and %zu bytes; expected a ring doctor "
                 "frame", f->type, slot->req.bytes);
        return doctor_fail_protocol(comm, peer, what);
    }
    return RING_OK;
}

/* A doctor frame of another kind or sequence than expected. */
static ring_status_t doctor_unexpected(ring_comm_t *comm, int peer, const ring_frame_t *f,
                                       const char *expected)
{
    char what[200];

    snprintf(what, sizeof(what), "doctor frame %s (seq %llu, %llu bytes); expected %s",
             f->step < sizeof(kind_names) / sizeof(kind_names[0]) ? kind_names[f->step] : "?",
             (unsigned long long)f->round, (unsigned long long)f->count, expected);
    return doctor_fail_protocol(comm, peer, what);
}

/* ---- slots and waiting ----------------------------------------------------- */

static ring_slot_t *data_slot(ring_comm_t *comm, int send, uint32_t q)
{
    uint32_t w = q % (uint32_t)(RING_WINDOW * comm->nchannels);
    ring_channel_t *ch = &comm->channels[w / RING_WINDOW];

    return send ? &ch->send[w % RING_WINDOW] : &ch->recv[w % RING_WINDOW];
}

static ring_tp_ep_t *conn(ring_comm_t *comm, int right, uint32_t q)
{
    uint32_t k = q % (uint32_t)(comm->nchannels * comm->nstreams);
    ring_channel_t *ch = &comm->channels[k / (uint32_t)comm->nstreams];

    return right ? ch->right[k % (uint32_t)comm->nstreams] : ch->left[k % (uint32_t)comm->nstreams];
}

/*
 * A right neighbour that has all it needs from us may go on: its CLOSE, or the
 * notice of its next allreduce, which waits for us (notice.c), is the engine's,
 * read once the doctor returns.
 */
static int right_moved_on(const doctor_t *d, const ring_slot_t *back, ring_frame_t *f)
{
    return d->right_done && back->req.status == RING_OK && ring_frame_decode(back->hdr, f) == 0 &&
           (f->type == RING_FRAME_CLOSE ||
            (f->type == RING_FRAME_DATA && (f->flags & RING_FRAME_NOTICE) != 0));
}

/*
 * Everything the doctor has posted, except `awaited`: a receive that brought
 * a notice or failed, or a send that failed, ends the doctor now, whatever
 * it waits for. Doctor frames that came early stay for their owner.
 */
static ring_status_t doctor_scan(ring_comm_t *comm, const ring_slot_t *awaited)
{
    doctor_t *d = comm->doctor.state;
    ring_channel_t *ch0 = &comm->channels[0];
    int nslots = RING_WINDOW * comm->nchannels;
    ring_frame_t f;

    if (ch0->back.posted && ch0->back.req.done && &ch0->back != awaited &&
        !right_moved_on(d, &ch0->back, &f))
        RING_CHECK(doctor_frame(comm, &ch0->back, comm->topo.right_rank, ch0->right[0], &f));
    if (d->ctl.posted && d->ctl.req.done && &d->ctl != awaited)
        RING_CHECK(doctor_frame(comm, &d->ctl, comm->topo.left_rank, ch0->left[0], &f));
    if (d->out.posted && d->out.req.done && d->out.req.status != RING_OK && &d->out != awaited)
        return doctor_fail_link(comm, comm->topo.right_rank, ch0->right[0], &d->out.req);
    if (d->reply.posted && d->reply.req.done && d->reply.req.status != RING_OK &&
        &d->reply != awaited)
        return doctor_fail_link(comm, comm->topo.left_rank, ch0->left[0], &d->reply.req);
    for (int w = 0; w < nslots; w++) {
        ring_slot_t *s = data_slot(comm, 1, (uint32_t)w), *r = data_slot(comm, 0, (uint32_t)w);

        if (s->posted && s->req.done && s->req.status != RING_OK && s != awaited)
            return doctor_fail_link(comm, comm->topo.right_rank, d->send_ep[w], &s->req);
        if (r->posted && r->req.done && r != awaited)
            RING_CHECK(doctor_frame(comm, r, comm->topo.left_rank, d->recv_ep[w], &f));
    }
    return RING_OK;
}

/*
 * Progress until slot's request is done; fail after limit_s without
 * progress, blaming peer, which we wait for `what`.
 */
static ring_status_t doctor_wait(ring_comm_t *comm, ring_slot_t *slot, double limit_s, int peer,
                                 const char *what)
{
    double now = ring_now();
    double last = now, spin_until = now + comm->cfg.spin_us * 1e-6;

    for (;;) {
        int moved = comm->tp_ops->progress(comm->tp);

        if (comm->fail.error != RING_OK)
            return ring_error_copy(comm->fail.error, comm->fail.error_msg);
        RING_CHECK(doctor_scan(comm, slot));
        if (slot->req.done)
            return RING_OK;
        now = ring_now();
        if (moved > 0) {
            last = now;
            spin_until = now + comm->cfg.spin_us * 1e-6;
        } else if (now < spin_until) {
            sched_yield();
        } else if (now - last > limit_s) {
            ring_fault_t fault = {.status = RING_ERR_TIMED_OUT, .culprit = peer,
                                  .sys_errno = ETIMEDOUT, .step = -1};
            char where[160], addr[300];

            doctor_where(comm, where, sizeof(where));
            ring_rank_addr(comm, peer, addr, sizeof(addr));
            return ring_comm_fail(comm, &fault, "%s: timed out after %.0f s waiting for rank %d "
                                  "(%s) %s (stopped, overloaded or unreachable?)", where,
                                  now - last, peer, addr, what);
        } else {
            double left = limit_s - (now - last);
            comm->tp_ops->wait(comm->tp, left > 0.1 ? 100 : (int)(left * 1000) + 1);
        }
    }
}

static ring_status_t doctor_wait_send(ring_comm_t *comm, ring_slot_t *slot, ring_tp_ep_t *ep,
                                      int peer, const char *what)
{
    if (!slot->posted)
        return RING_OK;
    RING_CHECK(doctor_wait(comm, slot, comm->cfg.timeout_s, peer, what));
    slot->posted = 0;
    if (slot->req.status != RING_OK)
        return doctor_fail_link(comm, peer, ep, &slot->req);
    return RING_OK;
}

static ring_status_t doctor_wait_recv(ring_comm_t *comm, ring_slot_t *slot, ring_tp_ep_t *ep,
                                      int peer, double limit_s, const char *what,
                                      ring_frame_t *f)
{
    RING_CHECK(doctor_wait(comm, slot, limit_s, peer, what));
    slot->posted = 0;
    return doctor_frame(comm, slot, peer, ep, f);
}

static void doctor_fill(const ring_comm_t *comm, int kind, ring_frame_t *f)
{
    memset(f, 0, sizeof(*f));
    f->type = RING_FRAME_DOCTOR;
    f->step = (uint16_t)kind;
    f->origin_rank = (uint32_t)comm->rank;
}

/* Post f (and payload) on ep from slot; a failure shows when the slot is waited for. */
static void doctor_post_send(ring_comm_t *comm, ring_slot_t *slot, ring_tp_ep_t *ep,
                             const ring_frame_t *f, const void *payload, size_t bytes)
{
    ring_frame_encode(f, slot->hdr);
    /* --auth frames (and encrypt: the doctor's probes carry no training data, so
     * they are tagged, not encrypted) */
    if (comm->auth.macs != NULL)
        (void)ring_frame_macs_seal(comm->auth.macs, ep, slot->hdr, payload, NULL, bytes);
    slot->req.iov[0].iov_base = slot->hdr;
    slot->req.iov[0].iov_len = comm->auth.hdr_bytes;
    slot->req.iov[1].iov_base = (void *)payload;
    slot->req.iov[1].iov_len = bytes;
    slot->req.iovcnt = bytes > 0 ? 2 : 1;
    slot->req.urgent = 0;
    slot->posted = 1;
    (void)comm->tp_ops->post_send(ep, &slot->req);
}

static void doctor_post_recv(ring_comm_t *comm, ring_slot_t *slot, ring_tp_ep_t *ep, void *payload,
                             size_t bytes)
{
    slot->req.iov[0].iov_base = slot->hdr;
    slot->req.iov[0].iov_len = comm->auth.hdr_bytes;
    slot->req.iov[1].iov_base = payload;
    slot->req.iov[1].iov_len = bytes;
    slot->req.iovcnt = bytes > 0 ? 2 : 1;
    slot->posted = 1;
    (void)comm->tp_ops->post_recv(ep, &slot->req);
}

/* ---- the sender: this peer's edge ------------------------------------------ */

/* The right neighbour's answer on the back channel: kind with sequence seq. */
static ring_status_t doctor_answer(ring_comm_t *comm, int kind, uint32_t seq, const char *what)
{
    ring_channel_t *ch0 = &comm->channels[0];
    char expected[64];
    ring_frame_t f;

    RING_CHECK(doctor_wait_recv(comm, &ch0->back, ch0->right[0], comm->topo.right_rank,
                                comm->cfg.timeout_s, what, &f));
    if (f.step != kind || f.round != seq) {
        snprintf(expected, sizeof(expected), "%s seq %u", kind_names[kind], seq);
        return doctor_unexpected(comm, comm->topo.right_rank, &f, expected);
    }
    ring_channel_post_back(comm, ch0);
    return RING_OK;
}

/* One burst of `bytes` to the right neighbour; *secs_p from BURST to ACK. */
static ring_status_t doctor_burst(ring_comm_t *comm, size_t bytes, double *secs_p)
{
    doctor_t *d = comm->doctor.state;
    size_t chunk = comm->cfg.chunk_bytes;
    uint32_t nframes = (uint32_t)((bytes + chunk - 1) / chunk);
    uint32_t nslots = (uint32_t)(RING_WINDOW * comm->nchannels);
    uint32_t seq = ++d->seq;
    ring_frame_t f;
    double t0 = ring_now();

    doctor_fill(comm, DOC_BURST, &f);
    f.round = seq;
    f.count = bytes;
    f.chunk = nframes;
    doctor_post_send(comm, &d->out, comm->channels[0].right[0], &f, NULL, 0);
    for (uint32_t q = 0; q < nframes; q++) {
        ring_slot_t *slot = data_slot(comm, 1, q);
        size_t len = q + 1 < nframes ? chunk : bytes - (size_t)q * chunk;

        RING_CHECK(doctor_wait_send(comm, slot, d->send_ep[q % nslots], comm->topo.right_rank,
                                    "to take the burst's data"));
        doctor_fill(comm, DOC_DATA, &f);
        f.round = seq;
        f.chunk = q;
        f.payload_bytes = (uint32_t)len;
        d->send_ep[q % nslots] = conn(comm, 1, q);
        /* the payload is channel 0's staging chunk: its bytes do not matter */
        doctor_post_send(comm, slot, d->send_ep[q % nslots], &f, comm->channels[0].stage, len);
    }
    RING_CHECK(doctor_answer(comm, DOC_ACK, seq, "to acknowledge a burst"));
    *secs_p = ring_now() - t0;
    for (uint32_t w = 0; w < nslots; w++)
        RING_CHECK(doctor_wait_send(comm, data_slot(comm, 1, w), d->send_ep[w],
                                    comm->topo.right_rank, "to take the burst's data"));
    return doctor_wait_send(comm, &d->out, comm->channels[0].right[0], comm->topo.right_rank,
                            "to take a burst");
}

/* bytes/s of a burst: less one round trip, the first byte's way there and the ACK's back */
static double doctor_rate(const doctor_t *d, size_t bytes, double secs)
{
    if (d->nrtt > 0 && secs > 2 * d->rtt_min)
        secs -= d->rtt_min;
    return secs > 0 ? (double)bytes / secs : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static ring_status_t doctor_pings(ring_comm_t *comm)
{
    doctor_t *d = comm->doctor.state;

    for (int i = 0; i < DOCTOR_PINGS; i++) {
        ring_frame_t f;
        double t0 = ring_now(), rtt;

        doctor_fill(comm, DOC_PING, &f);
        f.round = ++d->seq;
        doctor_post_send(comm, &d->out, comm->channels[0].right[0], &f, NULL, 0);
        RING_CHECK(doctor_answer(comm, DOC_PONG, d->seq, "to answer a ping"));
        rtt = ring_now() - t0;
        RING_CHECK(doctor_wait_send(comm, &d->out, comm->channels[0].right[0],
                                    comm->topo.right_rank, "to take a ping"));
        if (d->nrtt < DOCTOR_LAPS * DOCTOR_PINGS)
            d->rtt[d->nrtt++] = rtt;
        if (d->nrtt == 1 || rtt < d->rtt_min)
            d->rtt_min = rtt;
    }
    return RING_OK;
}

/* Lap 0: bursts growing from 64 KiB until one takes DOCTOR_PROBE_S, to size the rest. */
static ring_status_t doctor_probe(ring_comm_t *comm)
{
    doctor_t *d = comm->doctor.state;
    size_t b = d->limit_bytes < DOCTOR_PROBE_BYTES ? d->limit_bytes : DOCTOR_PROBE_BYTES;
    double secs, rate, want;

    for (;;) {
        RING_CHECK(doctor_burst(comm, b, &secs));
        if (secs >= DOCTOR_PROBE_S || b >= d->limit_bytes)
            break;
        b = b * 8 < d->limit_bytes ? b * 8 : d->limit_bytes;
    }
    rate = doctor_rate(d, b, secs);
    want = rate * DOCTOR_REP_S;
    d->rep_bytes = want >= (double)d->limit_bytes ? d->limit_bytes : (size_t)want;
    if (d->rep_bytes < DOCTOR_PROBE_BYTES)
        d->rep_bytes = d->limit_bytes < DOCTOR_PROBE_BYTES ? d->limit_bytes : DOCTOR_PROBE_BYTES;
    return RING_OK;
}

static void doctor_put_entry(ring_comm_t *comm)
{
    doctor_t *d = comm->doctor.state;
    unsigned char *e = d->vec + (size_t)comm->topo.pos * DOCTOR_ENTRY;
    double sorted[DOCTOR_LAPS * DOCTOR_PINGS], lat_ns;

    memcpy(sorted, d->rtt, (size_t)d->nrtt * sizeof(double));
    qsort(sorted, (size_t)d->nrtt, sizeof(double), cmp_double);
    lat_ns = d->nrtt == 0 ? 0
             : (d->nrtt % 2 ? sorted[d->nrtt / 2]
                            : (sorted[d->nrtt / 2 - 1] + sorted[d->nrtt / 2]) / 2) * 0.5e9;
    le_put64(e, (uint64_t)(d->best_bps + 0.5));
    le_put64(e + 8, d->rep_bytes);
    le_put32(e + 16, lat_ns >= 4294967295.0 ? UINT32_MAX : (uint32_t)(lat_ns + 0.5));
    le_put32(e + 20, (uint32_t)d->reps);
}

/* Measure this peer's edge for one lap, then hand the turn to the right neighbour. */
static ring_status_t doctor_measure(ring_comm_t *comm)
{
    doctor_t *d = comm->doctor.state;
    double secs, lap_t0, bps;
    ring_frame_t f;
    int k;

    d->sending = 1;
    RING_CHECK(doctor_pings(comm));
    if (d->lap == 0)
        RING_CHECK(doctor_probe(comm));
    RING_CHECK(doctor_burst(comm, d->rep_bytes, &secs)); /* warm-up */
    /* the lap's bursts back to back, timed as a whole: a pause between two
     * (this peer descheduled) counts, so a token bucket refilled in it does
     * not pass for a faster link */
    lap_t0 = ring_now();
    k = 0;
    while (k < DOCTOR_MIN_REPS || (k < DOCTOR_MAX_REPS && ring_now() - lap_t0 < DOCTOR_LAP_S)) {
        RING_CHECK(doctor_burst(comm, d->rep_bytes, &secs));
        k++;
    }
    secs = ring_now() - lap_t0;
    /* less one round trip per burst: the link idles while an ACK comes back.
     * At most a tenth of the lap: a token bucket (tc tbf, --rate-limit)
     * refills while the link idles, so a long round trip on a busy host
     * (ms under load) taken off in full would pass for a faster link. */
    if (k * d->rtt_min < 0.1 * secs)
        secs -= k * d->rtt_min;
    else
        secs *= 0.9;
    bps = (double)d->rep_bytes * k / secs;
    if (bps > d->best_bps)
        d->best_bps = bps;
    d->reps += k;
    doctor_put_entry(comm);
    doctor_fill(comm, DOC_TURN, &f);
    f.round = (uint64_t)d->lap;
    f.count = (uint64_t)comm->size;
    doctor_post_send(comm, &d->out, comm->channels[0].right[0], &f, d->vec, d->vec_bytes);
    /* the vector is not ours to overwrite until it has left */
    RING_CHECK(doctor_wait_send(comm, &d->out, comm->channels[0].right[0], comm->topo.right_rank,
                                "to take its turn"));
    ring_log(RING_LOG_DEBUG, "ring doctor, lap %d: edge rank %d -> rank %d: %.1f MB/s, "
             "best lap of %d bursts of %zu bytes", d->lap + 1, comm->rank, comm->topo.right_rank,
             d->best_bps / 1e6, d->reps, d->rep_bytes);
    return RING_OK;
}

/* ---- the receiver: the left neighbour's edge -------------------------------- */

static ring_status_t doctor_reply(ring_comm_t *comm, int kind, uint64_t seq, uint64_t count)
{
    doctor_t *d = comm->doctor.state;
    ring_tp_ep_t *ep = comm->channels[0].left[0];
    ring_frame_t f;

    RING_CHECK(doctor_wait_send(comm, &d->reply, ep, comm->topo.left_rank, "to take an answer"));
    doctor_fill(comm, kind, &f);
    f.round = seq;
    f.count = count;
    doctor_post_send(comm, &d->reply, ep, &f, NULL, 0);
    return RING_OK;
}

/* A BURST's frames, then its ACK. */
static ring_status_t doctor_take_burst(ring_comm_t *comm, const ring_frame_t *b)
{
    doctor_t *d = comm->doctor.state;
    size_t chunk = comm->cfg.chunk_bytes;
    uint32_t nslots = (uint32_t)(RING_WINDOW * comm->nchannels);
    uint32_t nframes = b->chunk;
    size_t bytes = (size_t)b->count;

    if (b->count == 0 || b->count > DOCTOR_MAX_BYTES ||
        (uint64_t)nframes != (b->count + chunk - 1) / chunk)
        return doctor_unexpected(comm, comm->topo.left_rank, b,
                                 "a burst of at most 64 GiB in chunk-size frames");
    for (uint32_t q = 0; q < nframes + nslots; q++) {
        /* post frame q, retire frame q - nslots */
        if (q >= nslots) {
            uint32_t r = q - nslots;
            ring_slot_t *slot = data_slot(comm, 0, r);
            size_t len = r + 1 < nframes ? chunk : bytes - (size_t)r * chunk;
            ring_frame_t f;

            RING_CHECK(doctor_wait_recv(comm, slot, d->recv_ep[r % nslots], comm->topo.left_rank,
                                        comm->cfg.timeout_s, "to send the rest of a burst", &f));
            if (f.step != DOC_DATA || f.round != b->round || f.chunk != r ||
                f.payload_bytes != len || slot->req.bytes != comm->auth.hdr_bytes + len) {
                char expected[96];
                snprintf(expected, sizeof(expected), "DATA seq %llu frame %u of %zu bytes",
                         (unsigned long long)b->round, r, len);
                return doctor_unexpected(comm, comm->topo.left_rank, &f, expected);
            }
        }
        if (q < nframes) {
            uint32_t w = q % nslots;
            ring_channel_t *ch = &comm->channels[w / RING_WINDOW];
            size_t len = q + 1 < nframes ? chunk : bytes - (size_t)q * chunk;

            d->recv_ep[w] = conn(comm, 0, q);
            doctor_post_recv(comm, data_slot(comm, 0, q), d->recv_ep[w],
                             ch->stage + (w % RING_WINDOW) * chunk, len);
        }
    }
    return doctor_reply(comm, DOC_ACK, b->round, b->count);
}

/*
 * Serve the left neighbour's edge until its TURN (or, at the end, the
 * RESULTS): both bring the results vector. The first message may take
 * first_limit_s (the edges before ours), later ones the timeout.
 */
static ring_status_t doctor_receive(ring_comm_t *comm, int expect, double first_limit_s)
{
    doctor_t *d = comm->doctor.state;
    ring_tp_ep_t *ep = comm->channels[0].left[0];
    double limit = first_limit_s;

    d->sending = 0;
    for (;;) {
        ring_frame_t f;

        doctor_post_recv(comm, &d->ctl, ep, d->vec, d->vec_bytes);
        RING_CHECK(doctor_wait_recv(comm, &d->ctl, ep, comm->topo.left_rank, limit,
                                    limit > comm->cfg.timeout_s ? "to hand this peer its turn"
                                                                : "to go on measuring its edge",
                                    &f));
        limit = comm->cfg.timeout_s;
        if (f.step == DOC_PING) {
            RING_CHECK(doctor_reply(comm, DOC_PONG, f.round, 0));
        } else if (f.step == DOC_BURST) {
            RING_CHECK(doctor_take_burst(comm, &f));
        } else if (f.step == expect && d->ctl.req.bytes == comm->auth.hdr_bytes + d->vec_bytes &&
                   f.count == (uint64_t)comm->size) {
            return RING_OK;
        } else {
            return doctor_unexpected(comm, comm->topo.left_rank, &f,
                                     expect == DOC_TURN ? "PING, BURST or TURN with the results"
                                                        : "RESULTS");
        }
    }
}

/* ---- the whole --------------------------------------------------------------- */

static ring_status_t doctor_run(ring_comm_t *comm)
{
    doctor_t *d = comm->doctor.state;
    int n = comm->size, pos = comm->topo.pos;
    double turn_limit = comm->cfg.timeout_s + (n - 1) * DOCTOR_TURN_S;
    ring_frame_t f;

    for (d->lap = 0; d->lap < DOCTOR_LAPS; d->lap++) {
        if (pos != 0)
            RING_CHECK(doctor_receive(comm, DOC_TURN, turn_limit));
        RING_CHECK(doctor_measure(comm));
        if (pos == 0)
            RING_CHECK(doctor_receive(comm, DOC_TURN, turn_limit));
    }
    d->lap = DOCTOR_LAPS - 1;
    d->right_done = pos == n - 1; /* its last TURN was all place 0 needs from it */
    /* place 0 holds every result now: once more round the ring, to place n-1 */
    if (pos != 0)
        RING_CHECK(doctor_receive(comm, DOC_RESULTS, turn_limit));
    d->sending = 1;
    if (pos != n - 1) {
        doctor_fill(comm, DOC_RESULTS, &f);
        f.count = (uint64_t)n;
        doctor_post_send(comm, &d->out, comm->channels[0].right[0], &f, d->vec, d->vec_bytes);
    }
    /* the right neighbour closes once it has the results, perhaps before our send completes */
    d->right_done = 1;
    RING_CHECK(doctor_wait_send(comm, &d->out, comm->channels[0].right[0], comm->topo.right_rank,
                                "to take the results"));
    return doctor_wait_send(comm, &d->reply, comm->channels[0].left[0], comm->topo.left_rank,
                            "to take an answer");
}

ring_status_t ring_comm_doctor(ring_comm_t *comm, size_t bytes, ring_edge_report_t *edges)
{
    doctor_t *d;
    ring_status_t status;
    uint64_t early_round;
    double t0 = ring_now();

    if (comm == NULL || edges == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_doctor: comm and edges must not be "
                              "NULL");
    if (comm->fail.error != RING_OK)
        return ring_error_copy(comm->fail.error, comm->fail.error_msg);
    if (bytes == 0)
        bytes = RING_DOCTOR_DEFAULT_BYTES;
    if (bytes < DOCTOR_MIN_BYTES || bytes > DOCTOR_MAX_BYTES)
        return ring_error_set(RING_ERR_INVALID, "ring doctor: bursts of %zu bytes; it takes "
                              "4 KiB to 64 GiB", bytes);
    if (comm->requests.count > 0)
        return ring_error_set(RING_ERR_INVALID,
                              "ring doctor: %u allreduces started and not "
                              "waited for; the doctor runs between allreduces",
                              comm->requests.count);
    if (comm->size == 1) {
        memset(edges, 0, sizeof(*edges));
        ring_doctor_names(comm, 0, edges[0].from_host, edges[0].from_addr);
        ring_doctor_names(comm, 0, edges[0].to_host, edges[0].to_addr);
        edges[0].median_ratio = 1;
        return RING_OK;
    }
    /* left from a failed run: the transport may still hold its requests */
    if (comm->doctor.state != NULL)
        return ring_error_set(RING_ERR_INVALID, "ring doctor: an earlier run failed");
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the ring doctor");
    d->vec_bytes = (size_t)comm->size * DOCTOR_ENTRY;
    d->vec = calloc(1, d->vec_bytes);
    if (d->vec == NULL) {
        free(d);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the ring doctor");
    }
    d->limit_bytes = bytes;
    d->rep_bytes = bytes;
    comm->doctor.state = d;
    memset(comm->channels[0].stage, 0, comm->cfg.chunk_bytes); /* what the bursts carry */
    comm->doctor.running = 1;
    comm->channels[0].back.req.lazy = 0; /* the answers it times come here (transport.h) */
    if (ring_notice_take_early(comm, &early_round)) {
        /* the right neighbour's notice (notice.c) came while ring_comm_open's set-up
         * calls still ran here, and was kept for a user's call: it waits in an
         * allreduce, and no frame of the doctor's will ever come from it */
        d->sending = 1; /* the edge to it */
        status = doctor_fail_data(comm, comm->topo.right_rank, early_round);
    } else
        status = doctor_run(comm);
    comm->doctor.running = 0;
    if (status != RING_OK)
        return status; /* comm_free frees d, once the endpoints are closed */
    ring_doctor_report_fill(comm, d->vec, edges);
    ring_doctor_free(comm);
    ring_log(RING_LOG_INFO, "ring doctor: %d edges in %.2f s", comm->size, ring_now() - t0);
    return RING_OK;
}
