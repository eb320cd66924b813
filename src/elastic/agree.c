/*
 * agree.c - the survivors of a failure agree on who is left (agree.h says
 * how, agree_wire.h what goes on the wire). It runs over the tcp transport
 * whatever the ring ran on, on each survivor's own port (the ring closed its
 * listener once it was up), and with the job's secret every connection
 * proves it first (purpose RING_AUTH_FOR_AGREE) and every message carries a
 * tag (frame_mac.h), so a stranger can neither vote nor be told anything.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "clock.h"
#include "hash.h"
#include "log.h"
#include "transport.h"

#define AGREE_PENDING 16       /* accepted connections not introduced yet */
#define AGREE_HELLO_WAIT_S 5.0 /* an accepted connection that says nothing is dropped */
#define AGREE_LINGER_S 0.3     /* a REJECT or the last DONE gets this long to leave */

/* A message on its way out: its bytes stay put until the transport is done. */
typedef struct agree_out {
    struct agree_out *next;
    ring_tp_req_t req;
    unsigned char buf[];
} agree_out_t;

typedef enum { LINK_AUTH = 1, LINK_HELLO, LINK_UP, LINK_CLOSING } link_state_t;

typedef struct agree_link {
    link_state_t state;
    ring_tp_ep_t *ep;
    int rank;                      /* the other side's old rank; -1 not known yet */
    int acceptor;                  /* 1: it called us (our left, or a candidate) */
    ring_auth_t auth;
    ring_tp_req_t rreq;
    unsigned char rbuf[RING_AGREE_MSG_MAX + 8];
    agree_out_t *out;
    double since;                  /* when it was made (or started closing) */
} agree_link_t;

typedef struct agree {
    const ring_agree_params_t *p;
    const ring_tp_ops_t *ops;
    ring_tp_t *tp;
    ring_tp_listener_t *listener;
    ring_frame_macs_t *macs;       /* with a secret: each connection's tag keys */
    uint64_t job_hash;
    char auth_job[RING_CONFIG_STR_MAX + 32];
    size_t msg_bytes, set_bytes;
    unsigned char lost[RING_AGREE_SET_BYTES];
    unsigned char answered[RING_AGREE_SET_BYTES]; /* ranks that said hello to us here */
    /* the right neighbour: whom we call, since when, and the link. Links live on
     * the heap and move by pointer: the transport holds their requests. */
    agree_link_t *right;
    int target;
    double target_since, retry_at, backoff;
    agree_link_t *left;
    agree_link_t *pending[AGREE_PENDING];
    agree_link_t *closing[AGREE_PENDING];
    /* the round: its number, whether our own token left, who was seen, the union */
    uint32_t round;
    int need_own;
    unsigned char seen[RING_AGREE_SET_BYTES], heard[RING_AGREE_SET_BYTES];
    int decided;
    double decided_at;
    unsigned char members[RING_AGREE_SET_BYTES], done_from[RING_AGREE_SET_BYTES];
    int rounds;
    int timed_out;                 /* we counted a rank lost because it did not answer */
    int finished;
    ring_status_t fail;            /* an error that ends it at once */
} agree_t;

static int is_lost(const agree_t *a, int r) { return ring_agree_set_has(a->lost, r); }

/* The rank at the place after (dir 1) or before (dir -1) ours, skipping the lost. */
static int neighbour(const agree_t *a, int dir)
{
    int n = a->p->world, pos = 0;

    for (int i = 0; i < n; i++)
        if (a->p->order[i] == a->p->me)
            pos = i;
    for (int k = 1; k < n; k++) {
        int r = a->p->order[(pos + dir * k + n * k) % n];
        if (!is_lost(a, r))
            return r;
    }
    return a->p->me;
}

static agree_link_t *link_new(double now, int rank, int acceptor)
{
    agree_link_t *l = calloc(1, sizeof(*l));

    if (l != NULL) {
        l->rank = rank;
        l->acceptor = acceptor;
        l->since = now;
    }
    return l;
}

/* Close *lp's connection (which cancels what is pending, so every request is
 * done), free it and clear the pointer. */
static void link_free(agree_t *a, agree_link_t **lp)
{
    agree_link_t *l = *lp;

    if (l == NULL)
        return;
    if (l->ep != NULL)
        a->ops->ep_close(l->ep);
    while (l->out != NULL) {
        agree_out_t *o = l->out;
        l->out = o->next;
        free(o);
    }
    ring_auth_hs_wipe(&l->auth.hs);
    free(l);
    *lp = NULL;
}

/* Keep *lp open a moment so what it sends last (a REJECT) can leave. */
static void link_linger(agree_t *a, agree_link_t **lp)
{
    for (int i = 0; i < AGREE_PENDING; i++)
        if (a->closing[i] == NULL) {
            a->closing[i] = *lp;
            a->closing[i]->state = LINK_CLOSING;
            a->closing[i]->since = ring_now();
            *lp = NULL;
            return;
        }
    link_free(a, lp);
}

static void link_post_recv(agree_t *a, agree_link_t *l)
{
    memset(&l->rreq, 0, sizeof(l->rreq));
    l->rreq.iov[0].iov_base = l->rbuf;
    l->rreq.iov[0].iov_len = sizeof(l->rbuf);
    l->rreq.iovcnt = 1;
    (void)a->ops->post_recv(l->ep, &l->rreq); /* a failure completes it: seen as a break */
}

static void agree_send(agree_t *a, agree_link_t *l, uint16_t type, uint32_t round, int origin,
                       uint32_t detail, const unsigned char *set)
{
    agree_out_t *o = calloc(1, sizeof(*o) + a->msg_bytes);
    ring_agree_msg_t m;

    if (o == NULL) {
        a->fail = ring_error_set(RING_ERR_NO_MEMORY, "out of memory in the survivors' agreement");
        return;
    }
    memset(&m, 0, sizeof(m));
    m.type = type;
    m.job_hash = a->job_hash;
    m.generation = a->p->generation;
    m.world = (uint32_t)a->p->world;
    m.round = round;
    m.origin = (uint32_t)origin;
    m.detail = detail;
    if (set != NULL)
        memcpy(m.set, set, a->set_bytes);
    ring_agree_encode(&m, o->buf);
    if (a->macs != NULL &&
        ring_frame_macs_seal(a->macs, l->ep, o->buf, o->buf + RING_AGREE_HDR_BYTES +
                             RING_FRAME_TRAILER_BYTES, NULL, a->set_bytes) != 0) {
        free(o);
        a->fail = ring_error_set(RING_ERR_INTERNAL, "cannot tag an agreement message");
        return;
    }
    o->req.iov[0].iov_base = o->buf;
    o->req.iov[0].iov_len = a->msg_bytes;
    o->req.iovcnt = 1;
    o->next = l->out;
    l->out = o;
    (void)a->ops->post_send(l->ep, &o->req);
}

/* Free what has left; 1 while something is still on its way. */
static int link_reap_sends(agree_link_t *l)
{
    agree_out_t **pp = &l->out;
    int busy = 0;

    while (*pp != NULL) {
        agree_out_t *o = *pp;
        if (o->req.done) {
            *pp = o->next;
            free(o);
        } else {
            busy = 1;
            pp = &o->next;
        }
    }
    return busy;
}

/* The message that arrived on l, checked (and its tag): 0, or -1 with why. */
static int link_read(agree_t *a, agree_link_t *l, ring_agree_msg_t *m, char *why, size_t len)
{
    if (l->rreq.status != RING_OK) {
        snprintf(why, len, "%s", ring_tp_cause(l->rreq.status, l->rreq.sys_errno));
        return -1;
    }
    if (ring_agree_decode(l->rbuf, l->rreq.bytes, (uint32_t)a->p->world, a->job_hash,
                          a->p->generation, m, why, len) != 0)
        return -1;
    if (a->macs != NULL &&
        ring_frame_macs_open(a->macs, l->ep, l->rbuf, l->rbuf + RING_AGREE_HDR_BYTES +
                             RING_FRAME_TRAILER_BYTES, a->set_bytes, 0) != 0) {
        snprintf(why, len, "a message whose tag does not verify (altered, replayed or injected)");
        return -1;
    }
    /* with a secret, the rank it proved is the only one it may speak for */
    if (l->rank >= 0 && (m->type == RING_AGREE_HELLO || m->type == RING_AGREE_REJECT) &&
        (int)m->origin != l->rank) {
        snprintf(why, len, "speaks for rank %u but is rank %d", m->origin, l->rank);
        return -1;
    }
    return 0;
}

/* Add set to what we count lost (fails when it names us); 1 when it told us something new. */
static int absorb(agree_t *a, const unsigned char *set, int from)
{
    int news = 0;

    for (size_t i = 0; i < a->set_bytes; i++) {
        news |= (set[i] & ~a->lost[i]) != 0;
        a->lost[i] |= set[i];
    }
    if (is_lost(a, a->p->me) && a->fail == RING_OK)
        a->fail = ring_error_set(RING_ERR_REMOTE, "shrink: rank %d counts this peer (rank %d) "
                                 "lost: it did not answer in time, so the ring goes on without "
                                 "it", from, a->p->me);
    return news;
}

static void new_round(agree_t *a, uint32_t round)
{
    a->round = round;
    a->need_own = 1;
    memset(a->seen, 0, sizeof(a->seen));
    memset(a->heard, 0, sizeof(a->heard));
    a->rounds++;
}

static int link_up(const agree_link_t *l) { return l != NULL && l->state == LINK_UP; }

/* Our own token of this round, then (on_token) what we pass on: in that order,
 * so a token that comes back to its origin has every member's before it. */
static void send_own_token(agree_t *a)
{
    agree_send(a, a->right, RING_AGREE_TOKEN, a->round, a->p->me, 0, a->lost);
    for (size_t i = 0; i < a->set_bytes; i++)
        a->heard[i] |= a->lost[i];
    a->need_own = 0;
}

/* Decided (by our round, or told by a member that decided): say so both ways,
 * with the members, so a member whose own round cannot close any more (a
 * member lost after others decided) learns the decision all the same. */
static void decide(agree_t *a, const unsigned char *members, uint32_t round)
{
    memcpy(a->members, members, sizeof(a->members));
    a->decided = 1;
    a->decided_at = ring_now();
    a->round = round;
    memset(a->done_from, 0, sizeof(a->done_from));
    ring_agree_set_add(a->done_from, a->p->me);
    if (link_up(a->right))
        agree_send(a, a->right, RING_AGREE_DONE, round, a->p->me, 0, members);
    if (link_up(a->left))
        agree_send(a, a->left, RING_AGREE_DONE, round, a->p->me, 0, members);
}

/* A member's decision reached us: ours too when we are in it; else we are out. */
static void adopt(agree_t *a, const ring_agree_msg_t *m, int from)
{
    if (!ring_agree_set_has(m->set, a->p->me)) {
        if (a->fail == RING_OK)
            a->fail = ring_error_set(RING_ERR_REMOTE, "shrink: rank %d and the other survivors "
                                     "decided without this peer (it answered too late): it must "
                                     "leave the ring", from);
        return;
    }
    decide(a, m->set, m->round);
}

/* Our own token came back: every member's token of this round has passed here. */
static void round_complete(agree_t *a)
{
    int clash = 0, gap = 0;

    ring_agree_set_add(a->seen, a->p->me);
    for (int r = 0; r < a->p->world; r++) {
        int member = ring_agree_set_has(a->seen, r), lost = ring_agree_set_has(a->heard, r);
        clash |= member && lost;
        gap |= !member && !lost;
    }
    if (clash || gap) {
        /* someone on the ring is counted lost by someone: all saw the same, all
         * drop it, and its left neighbour calls past it (a new round) */
        absorb(a, a->heard, a->p->me);
        for (int r = 0; r < a->p->world; r++)
            if (!ring_agree_set_has(a->seen, r))
                ring_agree_set_add(a->lost, r);
        return;
    }
    decide(a, a->seen, a->round);
}

static void on_token(agree_t *a, const ring_agree_msg_t *m)
{
    if (a->decided)
        return;
    /* what any member counts lost, we count lost at once: a left neighbour that
     * calls a dead rank moves on without waiting for it (round_complete decides
     * from the tokens alone, so this changes no decision) */
    absorb(a, m->set, (int)m->origin);
    if (m->round < a->round)
        return;
    if (m->round > a->round) {
        new_round(a, m->round);
        if (link_up(a->right))
            send_own_token(a);
    }
    if (a->need_own)
        return; /* our right neighbour is not up: this round cannot close */
    if ((int)m->origin == a->p->me) {
        round_complete(a);
        return;
    }
    ring_agree_set_add(a->seen, (int)m->origin);
    for (size_t i = 0; i < a->set_bytes; i++)
        a->heard[i] |= m->set[i];
    agree_send(a, a->right, RING_AGREE_TOKEN, m->round, (int)m->origin, 0, m->set);
}

static void on_done(agree_t *a, const ring_agree_msg_t *m)
{
    if (!a->decided)
        adopt(a, m, (int)m->origin);
    if (!a->decided || m->round != a->round || (int)m->origin == a->p->me)
        return;
    ring_agree_set_add(a->done_from, (int)m->origin);
    if (link_up(a->right))
        agree_send(a, a->right, RING_AGREE_DONE, m->round, (int)m->origin, 0, m->set);
}

/* A connection that called us said hello: take it as our left, or turn it away. */
static void on_hello_in(agree_t *a, agree_link_t **lp, const ring_agree_msg_t *m)
{
    agree_link_t *l = *lp;
    int from = (int)m->origin;

    l->rank = from;
    ring_agree_set_add(a->answered, from);
    if (a->decided || is_lost(a, from)) {
        /* decided: the members go with it (a late member adopts the decision) */
        agree_send(a, l, RING_AGREE_REJECT, a->round, a->p->me,
                   a->decided ? RING_AGREE_DECIDED : RING_AGREE_EXCLUDED,
                   a->decided ? a->members : a->lost);
        if (!a->decided || !ring_agree_set_has(a->members, from))
            ring_log(RING_LOG_INFO, "shrink: turned rank %d away (%s)", from,
                     a->decided ? "the survivors decided without it" : "it is counted lost");
        link_linger(a, lp);
        return;
    }
    /* news from the left (a peer it knows lost): a new round takes it round the ring */
    if (absorb(a, m->set, from) && !a->decided)
        new_round(a, a->round + 1);
    if (neighbour(a, -1) != from) { /* cannot happen while everyone follows agree.h */
        agree_send(a, l, RING_AGREE_REJECT, a->round, a->p->me, RING_AGREE_EXCLUDED, a->lost);
        link_linger(a, lp);
        return;
    }
    if (a->left != NULL && a->left->rank != from) { /* it is lost by now: tell it so */
        agree_send(a, a->left, RING_AGREE_REJECT, a->round, a->p->me, RING_AGREE_EXCLUDED,
                   a->lost);
        link_linger(a, &a->left);
    }
    link_free(a, &a->left); /* (or the same rank, calling again) */
    agree_send(a, l, RING_AGREE_HELLO, a->round, a->p->me, 0, a->lost);
    l->state = LINK_UP;
    a->left = l;
    *lp = NULL;
    link_post_recv(a, l);
}

static void accept_new(agree_t *a, double now)
{
    for (;;) {
        ring_tp_ep_t *ep = NULL;
        int slot = -1;
        agree_link_t *l;

        if (a->ops->accept(a->listener, &ep) != RING_OK || ep == NULL)
            return;
        for (int i = 0; i < AGREE_PENDING && slot < 0; i++)
            if (a->pending[i] == NULL)
                slot = i;
        if (slot < 0) { /* full of connections that said nothing yet: drop the oldest, so
                         * idle strangers cannot lock a survivor out */
            slot = 0;
            for (int i = 1; i < AGREE_PENDING; i++)
                if (a->pending[i]->since < a->pending[slot]->since)
                    slot = i;
            link_free(a, &a->pending[slot]);
        }
        if ((l = link_new(now, -1, 1)) == NULL) {
            a->ops->ep_close(ep);
            continue;
        }
        l->ep = ep;
        a->pending[slot] = l;
        if (a->p->key->on) {
            ring_auth_party_t me;
            ring_auth_party_init(&me, a->p->key, a->auth_job, RING_AUTH_FOR_AGREE, a->p->me,
                                 RING_AUTH_NO_RANK);
            l->state = LINK_AUTH;
            if (ring_auth_begin(&l->auth, &me, a->ops, ep, 1) != RING_OK)
                link_free(a, &a->pending[slot]);
        } else {
            l->state = LINK_HELLO;
            link_post_recv(a, l);
        }
    }
}

/* Once its proof checked: its keys, and its hello to come (connector: ours first). */
static void link_authed(agree_t *a, agree_link_t *l)
{
    if (a->macs != NULL &&
        ring_frame_macs_attach(a->macs, l->ep, &l->auth.hs, !l->acceptor) != RING_OK) {
        a->fail = ring_error_set(RING_ERR_INTERNAL, "cannot keep an agreement connection's keys");
        return;
    }
    if (l->acceptor && a->p->key->on)
        l->rank = l->auth.hs.their_rank;
    ring_auth_hs_wipe(&l->auth.hs);
    l->state = LINK_HELLO;
    if (!l->acceptor)
        agree_send(a, l, RING_AGREE_HELLO, a->round, a->p->me, 0, a->lost);
    link_post_recv(a, l);
}

static void pending_step(agree_t *a, agree_link_t **lp, double now)
{
    agree_link_t *l = *lp;
    ring_agree_msg_t m;
    char why[300];

    if (now - l->since > AGREE_HELLO_WAIT_S && !(l->state == LINK_HELLO && l->rreq.done)) {
        link_free(a, lp); /* said nothing (or proved nothing) in time */
        return;
    }
    if (l->state == LINK_AUTH) {
        ring_auth_state_t as = ring_auth_step(&l->auth);
        if (as == RING_AUTH_FAILED) {
            if (l->auth.bad_message)
                ring_log_security("shrink: refused a connection to the agreement: %s",
                                  l->auth.why);
            link_free(a, lp);
        } else if (as == RING_AUTH_DONE) {
            link_authed(a, l);
        }
        return;
    }
    if (!l->rreq.done)
        return;
    /* a ring connection of a survivor that has decided and opens the new ring
     * lands here too: it is closed, and its connector tries again */
    if (link_read(a, l, &m, why, sizeof(why)) != 0 || m.type != RING_AGREE_HELLO) {
        ring_log(RING_LOG_DEBUG, "shrink: dropped a connection: %s", why);
        link_free(a, lp);
        return;
    }
    on_hello_in(a, lp, &m);
}

static void right_retry(agree_t *a, double now)
{
    /* it was in the agreement and now refuses or closes: it died (a member that
     * ends its agreement has decided, and so have we by then) */
    if (ring_agree_set_has(a->answered, a->target)) {
        ring_log(RING_LOG_INFO, "shrink: rank %d went away during the agreement", a->target);
        ring_agree_set_add(a->lost, a->target);
    }
    link_free(a, &a->right);
    a->retry_at = now + a->backoff;
    a->backoff = a->backoff * 2 > 0.25 ? 0.25 : a->backoff * 2;
}

static void right_rejected(agree_t *a, int want, const ring_agree_msg_t *m)
{
    if (m->detail == RING_AGREE_DECIDED) { /* its set is the decision: ours, if we are in it */
        adopt(a, m, want);
        return;
    }
    a->fail = ring_error_set(RING_ERR_REMOTE, "shrink: rank %d counts this peer lost: the ring "
                             "goes on without it", want);
}

/* Start calling rank want (its time to answer runs from when we first tried). */
static void right_call(agree_t *a, int want, double now)
{
    agree_link_t *l;

    if (now - a->target_since > a->p->answer_timeout_s) {
        ring_log(RING_LOG_WARN, "shrink: rank %d did not answer within %gs: counted lost", want,
                 a->p->answer_timeout_s);
        ring_agree_set_add(a->lost, want);
        a->timed_out = 1;
        return;
    }
    if (now < a->retry_at || (l = link_new(now, want, 0)) == NULL)
        return;
    if (a->ops->connect(a->tp, a->p->peers[want].host, a->p->peers[want].port, &l->ep) !=
        RING_OK) {
        free(l);
        a->retry_at = now + a->backoff;
        return;
    }
    a->right = l;
    l->state = LINK_AUTH;
    if (!a->p->key->on) {
        link_authed(a, l); /* no proof to make: straight to the hello */
        return;
    }
    ring_auth_party_t me;
    ring_auth_party_init(&me, a->p->key, a->auth_job, RING_AUTH_FOR_AGREE, a->p->me, want);
    if (ring_auth_begin(&l->auth, &me, a->ops, l->ep, 0) != RING_OK)
        right_retry(a, now);
}

/* Call the right neighbour, or call the next one when it does not answer in time. */
static void right_step(agree_t *a, double now)
{
    int want = neighbour(a, 1), bad;
    agree_link_t *l;
    ring_agree_msg_t m;
    char why[300];

    if (want != a->target) {
        link_free(a, &a->right);
        a->target = want;
        a->target_since = now;
        a->retry_at = now;
        a->backoff = 0.01;
    }
    if (want == a->p->me) { /* the last one left */
        /* alone because nobody answered: more likely cut off than the last survivor
         * (the others went on, counting this peer lost, and never told it) */
        if (!a->decided && a->timed_out && a->fail == RING_OK) {
            a->fail = ring_error_set(RING_ERR_REMOTE, "shrink: no other survivor answered within "
                                     "%gs: this peer has lost touch with the ring (the others "
                                     "may have gone on without it, counting it lost); it "
                                     "leaves", a->p->answer_timeout_s);
            return;
        }
        if (!a->decided) {
            unsigned char alone[RING_AGREE_SET_BYTES] = {0};
            ring_agree_set_add(alone, a->p->me);
            decide(a, alone, a->round);
        }
        return;
    }
    if (a->right == NULL) {
        right_call(a, want, now);
        return;
    }
    l = a->right;
    if (l->state == LINK_AUTH) {
        ring_auth_state_t as = ring_auth_step(&l->auth);
        if (as == RING_AUTH_DONE)
            link_authed(a, l);
        else if (as == RING_AUTH_FAILED)
            right_retry(a, now); /* not listening yet, or not it: again until its time is up */
        return;
    }
    if (!l->rreq.done)
        return;
    bad = link_read(a, l, &m, why, sizeof(why)) != 0;
    if (!bad && m.type == RING_AGREE_REJECT) {
        right_rejected(a, want, &m);
        if (a->decided) /* the decision came with it: the link is done */
            link_free(a, &a->right);
        return;
    }
    if (!bad && l->state == LINK_UP && m.type == RING_AGREE_DONE) {
        on_done(a, &m); /* a decision, flooding back against the ring's direction */
        link_post_recv(a, l);
        return;
    }
    if (!bad && l->state == LINK_UP)
        snprintf(why, sizeof(why), "an unexpected message");
    if (l->state == LINK_UP) { /* it sends nothing else on this link: a close */
        if (!a->decided) {
            ring_log(RING_LOG_INFO, "shrink: rank %d went away during the agreement (%s)", want,
                     why);
            ring_agree_set_add(a->lost, want);
        }
        link_free(a, &a->right);
        return;
    }
    if (bad || m.type != RING_AGREE_HELLO) {
        right_retry(a, now); /* not in the agreement yet (or gone): again, until its time is up */
        return;
    }
    absorb(a, m.set, want);
    ring_agree_set_add(a->answered, want);
    l->state = LINK_UP;
    link_post_recv(a, l);
    new_round(a, a->round + 1); /* a new ring: a new round */
}

static void left_step(agree_t *a)
{
    agree_link_t *l = a->left;
    ring_agree_msg_t m;
    char why[300];

    while (link_up(a->left) && l->rreq.done) {
        if (link_read(a, l, &m, why, sizeof(why)) != 0) {
            /* our left is gone: its own left calls us next */
            ring_log(RING_LOG_DEBUG, "shrink: left rank %d: %s", l->rank, why);
            link_free(a, &a->left);
            return;
        }
        link_post_recv(a, l);
        if (m.type == RING_AGREE_TOKEN)
            on_token(a, &m);
        else if (m.type == RING_AGREE_DONE)
            on_done(a, &m);
    }
}

static int all_done(const agree_t *a)
{
    for (size_t i = 0; i < a->set_bytes; i++)
        if ((a->members[i] & ~a->done_from[i]) != 0)
            return 0;
    return 1;
}

static void agree_free(agree_t *a)
{
    link_free(a, &a->right);
    link_free(a, &a->left);
    for (int i = 0; i < AGREE_PENDING; i++) {
        link_free(a, &a->pending[i]);
        link_free(a, &a->closing[i]);
    }
    if (a->listener != NULL)
        a->ops->listener_close(a->listener);
    if (a->tp != NULL)
        a->ops->fini(a->tp);
    ring_frame_macs_free(a->macs);
}

/* What we wait for, for the timeout's message. */
static void waiting_for(const agree_t *a, char *buf, size_t len)
{
    if (!link_up(a->right))
        snprintf(buf, len, "rank %d (%s:%d), the next survivor on the ring, never answered",
                 a->target, a->p->peers[a->target].host, a->p->peers[a->target].port);
    else if (!link_up(a->left))
        snprintf(buf, len, "no survivor called this peer as its right neighbour");
    else
        snprintf(buf, len, "round %u never came back round the ring", a->round);
}

/* One pass over every connection. */
static void agree_step(agree_t *a, double now)
{
    a->ops->progress(a->tp);
    accept_new(a, now);
    for (int i = 0; i < AGREE_PENDING; i++) {
        if (a->pending[i] != NULL)
            pending_step(a, &a->pending[i], now);
        if (a->closing[i] != NULL &&
            (!link_reap_sends(a->closing[i]) || now - a->closing[i]->since > AGREE_LINGER_S))
            link_free(a, &a->closing[i]);
    }
    right_step(a, now);
    if (link_up(a->right) && a->need_own && !a->decided)
        send_own_token(a);
    left_step(a);
    if (a->right != NULL)
        (void)link_reap_sends(a->right);
    if (a->left != NULL)
        (void)link_reap_sends(a->left);
    /* decided: done once every member has decided too (their DONEs came round);
     * until then (at most a timeout: a member lost after the decision never
     * says so) we stay, to tell the decision to a member that calls late */
    if (a->decided && (all_done(a) || a->target == a->p->me ||
                       now - a->decided_at > a->p->answer_timeout_s))
        a->finished = 1;
}

static ring_status_t agree_run(agree_t *a, ring_agree_result_t *res)
{
    const ring_agree_params_t *p = a->p;
    ring_tp_params_t tpp = {.sockbuf = p->sockbuf, .rank = p->me};
    double t0 = ring_now();

    a->ops = ring_tp_find("tcp");
    if (a->ops == NULL)
        return ring_error_set(RING_ERR_INTERNAL, "no tcp transport for the agreement");
    RING_CHECK(a->ops->init(&tpp, &a->tp));
    RING_CHECK(a->ops->listen(a->tp, p->bind, p->peers[p->me].port, &a->listener));
    a->target = -1;
    while (!a->finished && a->fail == RING_OK) {
        double now = ring_now();

        if (now > p->deadline) {
            char what[400];
            if (a->decided)
                break; /* decided: the others' DONEs only let the links go in order */
            waiting_for(a, what, sizeof(what));
            return ring_error_set(RING_ERR_TIMED_OUT, "shrink: the survivors did not agree "
                                  "within %.1fs: %s", now - t0, what);
        }
        agree_step(a, now);
        if (!a->finished)
            a->ops->wait(a->tp, 5);
    }
    if (a->fail != RING_OK)
        return a->fail;
    /* our last DONE, and the REJECTs telling ranks that they are out: a moment
     * to leave before the close (a rank that is out and not told would wait) */
    for (double until = ring_now() + AGREE_LINGER_S; ring_now() < until;) {
        int busy = a->right != NULL && link_reap_sends(a->right);
        for (int i = 0; i < AGREE_PENDING; i++)
            busy |= a->closing[i] != NULL && link_reap_sends(a->closing[i]);
        if (!busy)
            break;
        a->ops->wait(a->tp, 5);
        a->ops->progress(a->tp);
    }
    memcpy(res->members, a->members, sizeof(res->members));
    res->nmembers = 0;
    for (int r = 0; r < p->world; r++)
        res->nmembers += ring_agree_set_has(a->members, r);
    res->rounds = a->rounds;
    res->seconds = ring_now() - t0;
    return RING_OK;
}

ring_status_t ring_agree(const ring_agree_params_t *p, ring_agree_result_t *res)
{
    agree_t *a;
    ring_status_t st;

    if (p->world < 1 || p->world > RING_AGREE_MAX_WORLD)
        return ring_error_set(RING_ERR_UNSUPPORTED, "shrink: a ring of %d peers cannot shrink "
                              "(at most %d)", p->world, RING_AGREE_MAX_WORLD);
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the agreement");
    a->p = p;
    a->set_bytes = ((size_t)p->world + 7) / 8;
    a->msg_bytes = ring_agree_msg_bytes((uint32_t)p->world);
    a->job_hash = ring_hash_bytes(RING_HASH_INIT, p->job_id, strlen(p->job_id));
    snprintf(a->auth_job, sizeof(a->auth_job), "%s/shrink%u", p->job_id, p->generation);
    memcpy(a->lost, p->lost, a->set_bytes);
    if (p->key->on && (a->macs = ring_frame_macs_new()) == NULL) {
        free(a);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the agreement");
    }
    st = agree_run(a, res);
    agree_free(a);
    free(a);
    return st;
}
