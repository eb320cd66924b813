/*
 * auth_guard.c - the job's secret as the connection guard the engine lends a
 * transport that runs its own bootstrap connections (verbs; ring_tp_hooks_t
 * in transport.h): the challenge-response of auth.h, one ring_auth_t per
 * connection as the guard's state, this peer's party (auth.h) as its
 * context: a connector calls the party's peer rank, an acceptor takes any
 * rank that calls this one.
 */
#include "ring_build.h"

#include <string.h>

#include "auth.h"

static ring_status_t auth_guard_begin(void *ctx, void *state, const ring_tp_ops_t *ops,
                                      ring_tp_ep_t *ep, int acceptor)
{
    ring_auth_party_t me = *(const ring_auth_party_t *)ctx;

    if (acceptor)
        me.peer_rank = RING_AUTH_NO_RANK;
    return ring_auth_begin(state, &me, ops, ep, acceptor);
}

static ring_tp_guard_state_t auth_guard_step(void *ctx, void *state)
{
    switch (ring_auth_step(state)) {
    case RING_AUTH_DONE: return RING_TP_GUARD_DONE;
    case RING_AUTH_FAILED: return RING_TP_GUARD_FAILED;
    default: return RING_TP_GUARD_PENDING;
    }
}

static void auth_guard_why(void *ctx, const void *state, ring_tp_guard_why_t *why_p)
{
    const ring_auth_t *a = state;
    const ring_tp_req_t *rc = &a->r_challenge;

    memset(why_p, 0, sizeof(*why_p));
    why_p->why = a->why;
    why_p->refused = a->refused;
    why_p->unreachable = a->unreachable;
    why_p->bad_message = a->bad_message;
    why_p->status = rc->status;
    why_p->sys_errno = rc->sys_errno;
    /* the first message, when one came (a hello is larger: MISMATCH, filled) */
    if (rc->done && (rc->status == RING_OK || rc->status == RING_ERR_MISMATCH)) {
        why_p->first_len = rc->bytes < sizeof(why_p->first) ? rc->bytes : sizeof(why_p->first);
        memcpy(why_p->first, a->in_challenge, sizeof(why_p->first));
    }
}

void ring_auth_guard_lend(ring_auth_party_t *party, ring_tp_hooks_t *hooks)
{
    if (party->key == NULL || !party->key->on)
        return;
    party->purpose = RING_AUTH_FOR_VERBS_BOOT;
    hooks->ctx = party;
    hooks->guard_state_bytes = sizeof(ring_auth_t);
    hooks->guard_begin = auth_guard_begin;
    hooks->guard_step = auth_guard_step;
    hooks->guard_why = auth_guard_why;
}
