/*
 * connect.c - bringing the ring up: listen on this peer's one port, connect
 * to the right neighbour (channels x streams connections) and accept the
 * left neighbour's, each starting with a hello both ways. Connection
 * refused is retried with backoff until the start-up deadline (the
 * neighbour may not be listening yet); a stranger on the port is ignored
 * with a warning; a settings mismatch fails naming the field. Peers that met
 * at a file store may hold a crashed earlier run's address for the right
 * neighbour: a refusal or a stranger's answer there reads its record again
 * (a stranger's answer is an error only after RING_RDZV_STALE_GRACE_S).
 */
#include "ring_build.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "clock.h"
#include "comm_int.h"
#include "connect.h"
#include "fail.h"
#include "handshake.h"
#include "le.h"
#include "log.h"
#include "one_host.h"
#include "rendezvous.h"
#include "verbs_record.h"

#define CONNECT_MAX (RING_MAX_CHANNELS * RING_MAX_STREAMS)
#define PENDING_SPARE 16
#define PENDING_MAX (CONNECT_MAX + PENDING_SPARE)
#define STRANGER_TIMEOUT_S 10.0
#define RING_TELL_LINGER_S 5.0 /* a mismatch: how long to wait for the other neighbour */

typedef struct hello_conn {
    ring_tp_ep_t *ep;
    ring_auth_t auth;          /* with a secret, before the hello (auth.h) */
    int authing;               /* 1 while the challenge-response runs */
    ring_tp_req_t sreq, rreq;
    unsigned char out[RING_HELLO_BYTES], in[RING_HELLO_BYTES];
    double started, retry_at, backoff;
    int state; /* 0 idle (retry pending), 1 in flight, 2 established */
} hello_conn_t;

typedef struct connect_state {
    ring_comm_t *comm;
    hello_conn_t out[CONNECT_MAX];   /* to the right, index channel * streams + stream */
    hello_conn_t in[PENDING_MAX];    /* accepted, hello not seen yet */
    int nout, accepted;
    /* authentication failures, for the start-up timeout's message */
    int auth_failed_in, auth_failed_out;
    char auth_why[600];
    ring_status_t last_refusal;
    int last_errno;
    /* file store: when the right address first answered as another peer (0:
     * never), and what was wrong; an error once RING_RDZV_STALE_GRACE_S passed */
    double stranger_since;
    ring_status_t stranger_status;
    char stranger_error[512];
    /* a settings mismatch: with whom, and the first setting that differs */
    int culprit;
    unsigned field;
} connect_state_t;

static void hello_post(connect_state_t *cs, hello_conn_t *hc, int channel, int stream,
                       int send_first)
{
    ring_hello_t h;

    ring_hello_fill(cs->comm, channel, stream, &h);
    ring_hello_encode(&h, hc->out);
    hc->sreq.iov[0].iov_base = hc->out;
    hc->sreq.iov[0].iov_len = RING_HELLO_BYTES;
    hc->sreq.iovcnt = 1;
    hc->rreq.iov[0].iov_base = hc->in;
    hc->rreq.iov[0].iov_len = RING_HELLO_BYTES;
    hc->rreq.iovcnt = 1;
    if (send_first)
        (void)cs->comm->tp_ops->post_send(hc->ep, &hc->sreq);
    (void)cs->comm->tp_ops->post_recv(hc->ep, &hc->rreq);
}

static ring_status_t connect_start(connect_state_t *cs, int i)
{
    ring_comm_t *comm = cs->comm;
    hello_conn_t *hc = &cs->out[i];
    const ring_peer_addr_t *right = &comm->topo.peers[comm->topo.right_rank];

    RING_CHECK(comm->tp_ops->connect(comm->tp, right->host, right->port, &hc->ep));
    hc->state = 1;
    hc->started = ring_now();
    hc->authing = comm->auth.key.on;
    if (hc->authing) { /* the hello waits until the neighbour has proven the secret */
        ring_auth_party_t me;

        /* this rank calls its right neighbour on this channel and stream: the
         * neighbour refuses a challenge that names another (a relay) */
        ring_auth_party_init(&me, &comm->auth.key, comm->cfg.job_id, RING_AUTH_FOR_RING,
                             comm->rank, comm->topo.right_rank);
        me.channel = (uint16_t)(i / comm->nstreams);
        me.stream = (uint16_t)(i % comm->nstreams);
        return ring_auth_begin(&hc->auth, &me, comm->tp_ops, hc->ep, 0);
    }
    hello_post(cs, hc, i / comm->nstreams, i % comm->nstreams, 1);
    return RING_OK;
}

/*
 * A peer running the other transport: a verbs peer's first message is its
 * QP record (4-byte magic "RNGV"), and a verbs endpoint that met a tcp
 * hello fails with RING_ERR_PROTOCOL and says so. Either way the ring can
 * never form: fail at once, saying which setting differs.
 */
static ring_status_t check_other_transport(ring_comm_t *comm, hello_conn_t *hc, int rank,
                                           const char *addr)
{
    char who[400];
    uint32_t magic = le_get32(hc->in);

    if (rank >= 0)
        snprintf(who, sizeof(who), "rank %d (%s)", rank, addr);
    else
        snprintf(who, sizeof(who), "the peer at %s", addr);
    if (hc->rreq.status == RING_ERR_PROTOCOL)
        return ring_error_set(RING_ERR_MISMATCH, "settings mismatch with %s: %s", who,
                              ring_tp_ep_cause(comm->tp_ops, hc->ep, &hc->rreq));
    if (hc->rreq.status == RING_OK && hc->rreq.bytes >= 4 && magic == VB_RECORD_MAGIC)
        return ring_error_set(RING_ERR_MISMATCH,
                              "settings mismatch with %s: it runs the verbs transport (RDMA), "
                              "this peer %s: every peer needs the same --transport "
                              "(RING_TRANSPORT)", who, comm->tp_ops->name);
    if (hc->rreq.status == RING_OK && hc->rreq.bytes >= 4 && memcmp(hc->in, "RSHO", 4) == 0)
        return ring_error_set(RING_ERR_MISMATCH,
                              "settings mismatch with %s: it runs the shm transport (shared "
                              "memory), this peer %s: every peer needs the same --transport "
                              "(RING_TRANSPORT)", who, comm->tp_ops->name);
    return RING_OK;
}

/*
 * Met at a file store, the right neighbour's address may be an earlier run's
 * record (a crashed job leaves its files): read it again. *moved = 1 when it
 * changed (comm->topo.right_addr updated).
 */
static ring_status_t connect_right_moved(ring_comm_t *comm, int *moved)
{
    char was[sizeof(comm->topo.right_addr)];

    RING_CHECK(ring_rendezvous_refresh(comm, comm->topo.right_rank, moved));
    if (!*moved)
        return RING_OK;
    snprintf(was, sizeof(was), "%s", comm->topo.right_addr);
    ring_peer_format(&comm->topo.peers[comm->topo.right_rank], comm->topo.right_addr,
                     sizeof(comm->topo.right_addr));
    ring_log(RING_LOG_WARN, "rank %d's rendezvous record changed from %s to %s (the first was "
             "an earlier run's: give each run its own --job-id)", comm->topo.right_rank, was,
             comm->topo.right_addr);
    return RING_OK;
}

/* Drop this attempt and connect again after a backoff. */
static void connect_retry(connect_state_t *cs, hello_conn_t *hc, double now)
{
    cs->comm->tp_ops->ep_close(hc->ep);
    hc->ep = NULL;
    hc->state = 0;
    /* 10 ms at first (a neighbour a moment late), doubling to 200 ms, with
     * jitter so a whole job's retries do not arrive in step */
    hc->backoff = hc->backoff > 0 ? (hc->backoff < 0.1 ? hc->backoff * 2 : 0.2) : 0.01;
    hc->retry_at = now + hc->backoff * (1.0 + 0.01 * (double)(rand() % 50));
}

/* The right address answered as another peer (st, with its error set): at a
 * file store, retry while a fresh record may still come; else the error. */
static ring_status_t connect_stranger(connect_state_t *cs, hello_conn_t *hc, double now,
                                      ring_status_t st)
{
    ring_comm_t *comm = cs->comm;
    int moved;

    RING_CHECK(connect_right_moved(comm, &moved));
    if (!moved && !ring_rendezvous_file(comm))
        return st;
    if (!moved && cs->stranger_since == 0) {
        cs->stranger_since = now;
        cs->stranger_status = st;
        snprintf(cs->stranger_error, sizeof(cs->stranger_error), "%s", ring_last_error());
        ring_log(RING_LOG_DEBUG, "%s (waiting up to %g s for a newer rendezvous record)",
                 cs->stranger_error, RING_RDZV_STALE_GRACE_S);
    }
    if (moved)
        cs->stranger_since = 0;
    connect_retry(cs, hc, now);
    return RING_OK;
}

/* A hello reply came back (or the attempt failed) on an outgoing connection. */
static ring_status_t connect_out_progress(connect_state_t *cs, int i, double now)
{
    ring_comm_t *comm = cs->comm;
    hello_conn_t *hc = &cs->out[i];
    ring_hello_t mine, theirs;
    ring_status_t st = RING_OK;
    int moved;

    /* the address answered as another peer, and no newer record came in time */
    if (cs->stranger_since > 0 && now - cs->stranger_since >= RING_RDZV_STALE_GRACE_S)
        return ring_error_copy(cs->stranger_status, cs->stranger_error);
    if (hc->state == 0) {
        if (now >= hc->retry_at)
            RING_CHECK(connect_start(cs, i));
        return RING_OK;
    }
    if (hc->state == 1 && hc->authing) {
        ring_auth_state_t as = ring_auth_step(&hc->auth);

        if (as == RING_AUTH_PENDING)
            return RING_OK;
        if (as == RING_AUTH_FAILED) {
            if (hc->auth.unreachable) { /* not listening yet: as a refused hello */
                cs->last_refusal = hc->auth.r_challenge.status;
                cs->last_errno = hc->auth.r_challenge.sys_errno;
            } else {
                /* a stranger on the address, or a neighbour with another secret: try
                 * again until the start-up deadline, which then says why */
                cs->auth_failed_out++;
                snprintf(cs->auth_why, sizeof(cs->auth_why), "rank %d (%s) %s",
                         comm->topo.right_rank, comm->topo.right_addr, hc->auth.why);
                /* an answer that failed a check is a security notice; a close once
                 * or twice can be a neighbour restarting its listener (a
                 * sub-communicator opening): debug level; from the third, a warning */
                if (hc->auth.bad_message)
                    ring_log_security("refused the answer of %s; closed the connection, "
                                      "told it nothing, retrying", cs->auth_why);
                else
                    ring_log(cs->auth_failed_out >= 3 ? RING_LOG_WARN : RING_LOG_DEBUG,
                             "authentication with %s failed (%d times); retrying",
                             cs->auth_why, cs->auth_failed_out);
            }
            /* either way the address may be an earlier run's record: read it again */
            RING_CHECK(connect_right_moved(comm, &moved));
            if (moved)
                cs->stranger_since = 0;
            connect_retry(cs, hc, now);
            return RING_OK;
        }
        hc->authing = 0;
        hello_post(cs, hc, i / comm->nstreams, i % comm->nstreams, 1);
        return RING_OK;
    }
    if (hc->state != 1 || !hc->rreq.done)
        return RING_OK;
    RING_CHECK(check_other_transport(comm, hc, comm->topo.right_rank, comm->topo.right_addr));
    if (hc->rreq.status != RING_OK || hc->rreq.bytes != RING_HELLO_BYTES) {
        /* not listening yet, or it went away during the hello: try again */
        cs->last_refusal = hc->rreq.status;
        cs->last_errno = hc->rreq.sys_errno;
        RING_CHECK(connect_right_moved(comm, &moved));
        if (moved)
            cs->stranger_since = 0;
        connect_retry(cs, hc, now);
        return RING_OK;
    }
    if (ring_hello_decode(hc->in, &theirs) != 0) {
        st = ring_error_set(RING_ERR_PROTOCOL,
                            "rank %d (%s) answered with something that is not a ringd hello: "
                            "is another program listening on that port?",
                            comm->topo.right_rank, comm->topo.right_addr);
    } else {
        ring_hello_fill(comm, i / comm->nstreams, i % comm->nstreams, &mine);
        st = ring_hello_check(comm, &mine, &theirs, comm->topo.right_addr);
        if (st != RING_OK && (int)theirs.rank == comm->topo.right_rank) {
            cs->culprit = comm->topo.right_rank;
            cs->field = ring_hello_first_diff(&mine, &theirs);
        }
        if (st == RING_OK && (int)theirs.rank != comm->topo.right_rank)
            st = ring_error_set(RING_ERR_MISMATCH,
                                "%s answered as rank %u, but rank %d's right neighbour is rank "
                                "%d: the peers disagree on RING_PEERS", comm->topo.right_addr,
                                theirs.rank, comm->rank, comm->topo.right_rank);
    }
    if (st != RING_OK) /* an earlier run's address, now another job's port? */
        return connect_stranger(cs, hc, now, st);
    /* --auth frames, encrypt: this connection's keys, from its handshake */
    if (comm->auth.macs != NULL)
        RING_CHECK(ring_frame_macs_attach(comm->auth.macs, hc->ep, &hc->auth.hs, 1));
    ring_auth_hs_wipe(&hc->auth.hs);
    comm->channels[i / comm->nstreams].right[i % comm->nstreams] = hc->ep;
    hc->state = 2;
    cs->nout++;
    return RING_OK;
}

/* Flush our hello to a peer whose settings differ, so it can say why too. */
static void connect_flush_reply(ring_comm_t *comm, hello_conn_t *hc)
{
    double until = ring_now() + 0.5;

    while (!hc->sreq.done && ring_now() < until) {
        comm->tp_ops->progress(comm->tp);
        comm->tp_ops->wait(comm->tp, 10);
    }
}

static ring_status_t connect_in_progress(connect_state_t *cs, int i, double now)
{
    ring_comm_t *comm = cs->comm;
    hello_conn_t *hc = &cs->in[i];
    ring_hello_t mine, theirs;
    ring_status_t status;
    ring_channel_t *ch;
    char claimed[300];

    if (hc->ep == NULL || hc->state == 2)
        return RING_OK;
    if (hc->authing) {
        ring_auth_state_t as = ring_auth_step(&hc->auth);

        if (as == RING_AUTH_FAILED) {
            /* never fatal, and it is told nothing: who and from where, in the log */
            cs->auth_failed_in++;
            snprintf(cs->auth_why, sizeof(cs->auth_why), "a connection from %s, which %s",
                     comm->tp_ops->ep_peer(hc->ep), hc->auth.why);
            if (hc->auth.bad_message)
                ring_log_security("refused %s; closed it, told it nothing", cs->auth_why);
            else
                ring_log(RING_LOG_WARN, "%s; closed it", cs->auth_why);
            comm->tp_ops->ep_close(hc->ep);
            hc->ep = NULL;
            return RING_OK;
        }
        if (as == RING_AUTH_DONE) {
            hc->authing = 0;
            hello_post(cs, hc, 0, 0, 0);
        }
    }
    if (hc->authing || !hc->rreq.done) {
        if (now - hc->started > STRANGER_TIMEOUT_S) {
            ring_log(RING_LOG_WARN, "connection from %s sent no %s in %.0f s; closed it",
                     comm->tp_ops->ep_peer(hc->ep), hc->authing ? "proof of the secret" : "hello",
                     STRANGER_TIMEOUT_S);
            comm->tp_ops->ep_close(hc->ep);
            hc->ep = NULL;
        }
        return RING_OK;
    }
    status = check_other_transport(comm, hc, -1, comm->tp_ops->ep_peer(hc->ep));
    if (status != RING_OK) {
        /* our hello tells a verbs peer which transport this one runs, before we leave */
        char msg[1024];

        snprintf(msg, sizeof(msg), "%s", ring_last_error());
        ring_hello_fill(comm, 0, 0, &mine);
        ring_hello_encode(&mine, hc->out);
        hc->sreq.iov[0].iov_base = hc->out;
        hc->sreq.iov[0].iov_len = RING_HELLO_BYTES;
        hc->sreq.iovcnt = 1;
        if (comm->tp_ops->post_send(hc->ep, &hc->sreq) == RING_OK)
            connect_flush_reply(comm, hc);
        return ring_error_set(status, "%s", msg);
    }
    if (hc->rreq.status != RING_OK || hc->rreq.bytes != RING_HELLO_BYTES ||
        ring_hello_decode(hc->in, &theirs) != 0) {
        /* a port scanner, a health check or garbage: not fatal, just not ours */
        ring_log(RING_LOG_WARN,
                 "connection from %s did not start with a ringd hello (%s); ignored it",
                 comm->tp_ops->ep_peer(hc->ep),
                 hc->rreq.status == RING_OK ? "wrong magic or size"
                                            : ring_tp_cause(hc->rreq.status, hc->rreq.sys_errno));
        comm->tp_ops->ep_close(hc->ep);
        hc->ep = NULL;
        return RING_OK;
    }
    /* the hello must be the connection's that proved the secret: a peer that
     * proved it calls as rank r on channel c cannot say it is another */
    if (comm->auth.key.on &&
        ((int32_t)theirs.rank != hc->auth.hs.their_rank ||
         theirs.channel != hc->auth.hs.channel || theirs.stream != hc->auth.hs.stream)) {
        ring_log_security("refused a connection from %s: it proved the secret as rank %d "
                          "channel %u stream %u, then said hello as rank %u channel %u stream "
                          "%u; closed it", comm->tp_ops->ep_peer(hc->ep),
                          (int)hc->auth.hs.their_rank, hc->auth.hs.channel, hc->auth.hs.stream,
                          theirs.rank, theirs.channel, theirs.stream);
        comm->tp_ops->ep_close(hc->ep);
        hc->ep = NULL;
        return RING_OK;
    }
    /* answer with our hello whatever we think of theirs */
    ring_hello_fill(comm, (int)theirs.channel, (int)theirs.stream, &mine);
    ring_hello_encode(&mine, hc->out);
    hc->sreq.iov[0].iov_base = hc->out;
    hc->sreq.iov[0].iov_len = RING_HELLO_BYTES;
    hc->sreq.iovcnt = 1;
    (void)comm->tp_ops->post_send(hc->ep, &hc->sreq);
    /* name the peer by its RING_PEERS address, not its ephemeral source port */
    if (theirs.rank < (uint32_t)comm->size && comm->topo.peers != NULL)
        ring_peer_format(&comm->topo.peers[theirs.rank], claimed, sizeof(claimed));
    else
        snprintf(claimed, sizeof(claimed), "%s", comm->tp_ops->ep_peer(hc->ep));
    status = ring_hello_check(comm, &mine, &theirs, claimed);
    if (status != RING_OK && (int)theirs.rank == comm->topo.left_rank) {
        cs->culprit = comm->topo.left_rank;
        cs->field = ring_hello_first_diff(&mine, &theirs);
    }
    if (status == RING_OK && (int)theirs.rank != comm->topo.left_rank)
        status = ring_error_set(RING_ERR_MISMATCH,
                                "rank %u (%s) connected as the left neighbour of rank %d, whose "
                                "left neighbour is rank %d: the peers disagree on RING_PEERS",
                                theirs.rank, comm->tp_ops->ep_peer(hc->ep), comm->rank,
                                comm->topo.left_rank);
    if (status == RING_OK &&
        (theirs.channel >= (uint32_t)comm->nchannels || theirs.stream >= (uint32_t)comm->nstreams ||
         comm->channels[theirs.channel].left[theirs.stream] != NULL))
        status = ring_error_set(RING_ERR_PROTOCOL,
                                "rank %u (%s) opened channel %u stream %u twice or out of range",
                                theirs.rank, comm->tp_ops->ep_peer(hc->ep), theirs.channel,
                                theirs.stream);
    if (status != RING_OK) {
        connect_flush_reply(comm, hc);
        return status;
    }
    /* --auth frames, encrypt: this connection's keys, from its handshake */
    if (comm->auth.macs != NULL)
        RING_CHECK(ring_frame_macs_attach(comm->auth.macs, hc->ep, &hc->auth.hs, 0));
    ring_auth_hs_wipe(&hc->auth.hs);
    ch = &comm->channels[theirs.channel];
    ch->left[theirs.stream] = hc->ep;
    hc->state = 2; /* kept until our reply is flushed: sreq lives here */
    cs->accepted++;
    return RING_OK;
}

/* An accepted connection that has not sent a byte of its challenge or hello. */
static int conn_silent(const hello_conn_t *hc)
{
    return hc->state == 1 && (hc->authing ? hc->auth.phase == 0 && !hc->auth.r_challenge.done
                                          : !hc->rreq.done);
}

static ring_status_t connect_accept_new(connect_state_t *cs, double now)
{
    ring_comm_t *comm = cs->comm;

    for (;;) {
        ring_tp_ep_t *ep;
        int slot = -1;

        RING_CHECK(comm->tp_ops->accept(comm->listener, &ep));
        if (ep == NULL)
            return RING_OK;
        /* what the left neighbour opens, and room for a few strangers: the
         * transport must keep endpoints for the outgoing connections too */
        for (int i = 0; i < comm->nchannels * comm->nstreams + PENDING_SPARE && slot < 0; i++)
            if (cs->in[i].ep == NULL)
                slot = i;
        if (slot < 0) {
            /* full of connections that have not finished their hello (a flood, or
             * slow strangers): drop the oldest silent one (a real neighbour speaks
             * at once), so strangers cannot lock the neighbour out */
            for (int i = 0; i < comm->nchannels * comm->nstreams + PENDING_SPARE; i++)
                if (conn_silent(&cs->in[i]) &&
                    (slot < 0 || cs->in[i].started < cs->in[slot].started))
                    slot = i;
            if (slot < 0) {
                comm->tp_ops->ep_close(ep);
                continue;
            }
            ring_log(RING_LOG_DEBUG, "too many connections without a hello; dropped the oldest, "
                     "from %s", comm->tp_ops->ep_peer(cs->in[slot].ep));
            comm->tp_ops->ep_close(cs->in[slot].ep);
        }
        memset(&cs->in[slot], 0, sizeof(cs->in[slot]));
        cs->in[slot].ep = ep;
        cs->in[slot].state = 1;
        cs->in[slot].started = now;
        cs->in[slot].authing = comm->auth.key.on;
        if (cs->in[slot].authing) {
            ring_auth_party_t me;

            /* any rank that proves the secret and calls this one; its hello must
             * then agree with what it proved (connect_in_progress) */
            ring_auth_party_init(&me, &comm->auth.key, comm->cfg.job_id, RING_AUTH_FOR_RING,
                                 comm->rank, RING_AUTH_NO_RANK);
            RING_CHECK(ring_auth_begin(&cs->in[slot].auth, &me, comm->tp_ops, ep, 1));
        } else {
            hello_post(cs, &cs->in[slot], 0, 0, 0);
        }
    }
}

/* Our hello replies have left: cs, which holds them, may be freed, and an ABORT,
 * sent ahead of queued data, cannot overtake one (read as a broken hello). */
static int replies_sent(const connect_state_t *cs)
{
    for (int i = 0; i < PENDING_MAX; i++)
        if (cs->in[i].ep != NULL && cs->in[i].state == 2 && cs->in[i].sreq.iovcnt > 0 &&
            !cs->in[i].sreq.done)
            return 0;
    return 1;
}

/* The hello requests live in cs: every one must be finished before cs is freed. */
static void connect_cleanup(connect_state_t *cs, double deadline)
{
    ring_comm_t *comm = cs->comm;
    int pending = 1;

    while (pending && ring_now() < deadline) {
        pending = !replies_sent(cs);
        if (pending) {
            comm->tp_ops->progress(comm->tp);
            comm->tp_ops->wait(comm->tp, 10);
        }
    }
    for (int i = 0; i < PENDING_MAX; i++)
        if (cs->in[i].ep != NULL && (cs->in[i].state != 2 || !cs->in[i].sreq.done)) {
            /* closing fails its requests; if it was ours, the ring cannot use it */
            if (cs->in[i].state == 2)
                for (int c = 0; c < comm->nchannels; c++)
                    for (int s = 0; s < comm->nstreams; s++)
                        if (comm->channels[c].left[s] == cs->in[i].ep)
                            comm->channels[c].left[s] = NULL;
            comm->tp_ops->ep_close(cs->in[i].ep);
        }
    for (int i = 0; i < comm->nchannels * comm->nstreams; i++)
        if (cs->out[i].state == 1)
            comm->tp_ops->ep_close(cs->out[i].ep);
}

static ring_status_t connect_timeout_error(connect_state_t *cs)
{
    ring_comm_t *comm = cs->comm;
    int total = comm->nchannels * comm->nstreams;

    if (cs->nout < total && cs->auth_failed_out > 0)
        return ring_error_set(RING_ERR_TIMED_OUT,
                              "start-up: timed out after %g s connecting to rank %d (%s): "
                              "authentication failed %d time(s), last: %s; does every peer "
                              "have the same --secret-file (RING_SECRET_FILE)?",
                              comm->cfg.connect_timeout_s, comm->topo.right_rank,
                              comm->topo.right_addr, cs->auth_failed_out, cs->auth_why);
    if (cs->nout >= total && cs->auth_failed_in > 0)
        return ring_error_set(RING_ERR_TIMED_OUT,
                              "start-up: timed out after %g s waiting for rank %d (%s) to connect "
                              "(%d of %d connections arrived); %d connection(s) failed "
                              "authentication, last: %s; does every peer have the same "
                              "--secret-file (RING_SECRET_FILE)?", comm->cfg.connect_timeout_s,
                              comm->topo.left_rank, comm->topo.left_addr, cs->accepted, total,
                              cs->auth_failed_in, cs->auth_why);
    if (cs->nout < total)
        return ring_error_set(
            RING_ERR_TIMED_OUT,
            "start-up: timed out after %g s connecting to rank %d (%s): %s; is "
            "rank %d running, and is that its address in RING_PEERS?",
            comm->cfg.connect_timeout_s, comm->topo.right_rank, comm->topo.right_addr,
            cs->last_refusal == RING_OK ? "no answer"
                                        : ring_tp_cause(cs->last_refusal, cs->last_errno),
            comm->topo.right_rank);
    return ring_error_set(RING_ERR_TIMED_OUT,
                          "start-up: timed out after %g s waiting for rank %d (%s) to connect "
                          "(%d of %d connections arrived); is rank %d running with the same "
                          "RING_PEERS?", comm->cfg.connect_timeout_s, comm->topo.left_rank,
                          comm->topo.left_addr, cs->accepted, total, comm->topo.left_rank);
}

/* Listening beyond loopback without a secret: say so, once per process (the
 * one thing libringd prints without being asked, as it is about security). */
static void warn_open_to_strangers(const ring_comm_t *comm, const char *bind)
{
    static int said;

    if (said || comm->auth.key.on || ring_bind_is_loopback(bind))
        return;
    said = 1;
    fprintf(stderr, "ringd[rank %d]: listening on %s without a secret: anyone who can reach "
            "this port can join the ring and read or change its data; give every peer the "
            "same --secret-file (RING_SECRET_FILE; ring-launch makes one per run on one host, "
            "not across nodes)\n",
            comm->rank, bind[0] != '\0' ? bind : "every address");
}

/*
 * This peer's settings differ from a neighbour's: the two of them know why,
 * but a peer further round would only see them leave ("connection closed",
 * or a refused connection retried until its start-up timeout). So before it
 * leaves, this peer finishes the hellos of its other neighbour (it may still
 * be starting), sends it an ABORT naming the culprit and the setting, which
 * every peer passes on round the ring, and waits a moment for it to leave.
 * Bounded by RING_TELL_LINGER_S and the start-up deadline.
 */
static void connect_tell_mismatch(connect_state_t *cs, double deadline)
{
    ring_comm_t *comm = cs->comm;
    int total = comm->nchannels * comm->nstreams;
    double now = ring_now(), until = now + RING_TELL_LINGER_S;
    int told_left = comm->topo.left_rank == cs->culprit,
        told_right = comm->topo.right_rank == cs->culprit;
    ring_frame_t f;

    if (until > deadline)
        until = deadline;
    ring_ctrl_fill(comm, NULL, RING_FRAME_ABORT, &f);
    f.culprit_rank = (uint32_t)cs->culprit;
    f.status = RING_ERR_MISMATCH;
    f.sys_errno = RING_CAUSE_SETTINGS;
    f.step = UINT16_MAX;
    f.detail = cs->field;
    while (!(told_left && told_right) && now < until) {
        /* errors here are the connections' own (the culprit's, strangers'): this peer
         * is failing already, and only tells the others */
        comm->tp_ops->progress(comm->tp);
        (void)connect_accept_new(cs, now);
        for (int i = 0; i < total && !told_right; i++) /* it differs too: it knows */
            told_right = connect_out_progress(cs, i, now) == RING_ERR_MISMATCH;
        for (int i = 0; i < PENDING_MAX && !told_left; i++)
            told_left = connect_in_progress(cs, i, now) == RING_ERR_MISMATCH;
        /* once all its connections are up (a neighbour reads frames only then) */
        if (!told_right && cs->nout == total)
            told_right =
                ring_ctrl_post(comm, &comm->fail.abort_right, comm->channels[0].right[0], &f);
        if (!told_left && cs->accepted == total && replies_sent(cs))
            told_left = ring_ctrl_post(comm, &comm->fail.abort_left, comm->channels[0].left[0], &f);
        comm->tp_ops->wait(comm->tp, 10);
        now = ring_now();
    }
    ring_abort_flush(comm);
}

ring_status_t ring_connect_ring(ring_comm_t *comm)
{
    connect_state_t *cs = calloc(1, sizeof(*cs));
    const ring_peer_addr_t *me = &comm->topo.peers[comm->rank];
    const char *bind = comm->cfg.bind[0] != '\0' ? comm->cfg.bind : me->host;
    int total = comm->nchannels * comm->nstreams;
    double deadline = ring_now() + comm->cfg.connect_timeout_s;
    ring_status_t status = RING_OK;

    if (cs == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory connecting the ring");
    cs->comm = comm;
    cs->culprit = -1;
    if (ring_bind_is_any(bind))
        bind = "";
    warn_open_to_strangers(comm, bind);
    /* a verbs bootstrap's guard calls the right neighbour too (tp_lend.c) */
    ring_auth_party_init(&comm->auth.boot_party, &comm->auth.key, comm->cfg.job_id,
                         RING_AUTH_FOR_VERBS_BOOT, comm->rank, comm->topo.right_rank);
    /* a rendezvous listened already, to publish its port */
    if (comm->listener == NULL)
        RING_CHECK_GOTO(comm->tp_ops->listen(comm->tp, bind, me->port, &comm->listener), status,
                        out);
    for (int i = 0; i < total; i++)
        RING_CHECK_GOTO(connect_start(cs, i), status, out);
    while (cs->nout < total || cs->accepted < total) {
        double now = ring_now();

        if (now > deadline) {
            status = connect_timeout_error(cs);
            goto out;
        }
        comm->tp_ops->progress(comm->tp);
        RING_CHECK_GOTO(connect_accept_new(cs, now), status, out);
        for (int i = 0; i < total; i++)
            RING_CHECK_GOTO(connect_out_progress(cs, i, now), status, out);
        for (int i = 0; i < PENDING_MAX; i++)
            RING_CHECK_GOTO(connect_in_progress(cs, i, now), status, out);
        if (cs->nout < total || cs->accepted < total)
            comm->tp_ops->wait(comm->tp, 10);
    }
    ring_log(RING_LOG_INFO, "ring connected: left rank %d (%s), right rank %d (%s), %d channel(s) "
             "x %d stream(s)", comm->topo.left_rank, comm->topo.left_addr, comm->topo.right_rank,
             comm->topo.right_addr, comm->nchannels, comm->nstreams);
out:
    if (status == RING_ERR_MISMATCH && cs->culprit >= 0 && comm->size > 2) {
        char msg[1024];

        snprintf(msg, sizeof(msg), "%s", ring_last_error());
        connect_tell_mismatch(cs, deadline);
        status = ring_error_set(status, "%s", msg);
    }
    connect_cleanup(cs, deadline);
    ring_rendezvous_done(comm);
    /* the ring is up (or failed): nobody else may join, and a stranger's
     * pending connection must not keep waking the data path */
    comm->tp_ops->listener_close(comm->listener);
    comm->listener = NULL;
    if (status == RING_OK)
        for (int c = 0; c < comm->nchannels; c++)
            for (int s = 0; s < comm->nstreams; s++)
                if (comm->channels[c].left[s] == NULL)
                    status = ring_error_set(RING_ERR_TIMED_OUT,
                                            "start-up: could not finish the hello with rank %d (%s)",
                                            comm->topo.left_rank, comm->topo.left_addr);
    free(cs);
    return status;
}
