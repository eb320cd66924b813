/*
 * agree.h - after a failure, the survivors agree on who is left (agree.c).
 *
 * Each survivor starts from the ranks it knows are lost (its error names one;
 * a second failure may be known to some only). It listens on its own port
 * again and connects to the next rank after it on the old ring that it does
 * not count lost. Connections carry each side's lost set, and every set a
 * survivor hears is added to its own, so the ring of survivors closes over
 * the union of what anyone knows. Once it has closed, every survivor sends a
 * token with its view round it; a survivor whose own token came back has seen
 * every member's token of that round, exactly the same tokens as every other
 * member, and so reaches the same decision. A change (a neighbour lost during
 * the agreement, a new right neighbour) starts a new round. A rank that does
 * not answer within answer_timeout_s counts as lost; any rank counted lost by
 * anyone is out, and is told so if it talks. The whole is bounded by deadline.
 */
#ifndef RING_AGREE_H
#define RING_AGREE_H

#include "agree_wire.h"
#include "auth.h"
#include "peers.h"

typedef struct ring_agree_params {
    int world, me;                  /* the old ring's size, this peer's old rank */
    const int *order;               /* order[place] = old rank: the old ring */
    const ring_peer_addr_t *peers;  /* where each old rank listened */
    const char *bind;               /* where this peer listens ("" every address) */
    const char *job_id;
    const ring_auth_key_t *key;     /* the job's secret: proofs and tags (on = 0: none) */
    uint32_t generation;            /* which shrink of the job this is (1, 2 ...) */
    size_t sockbuf;
    double answer_timeout_s;        /* how long a rank not known lost is waited for */
    double open_timeout_s;          /* shrink.c: the new ring's start-up, at most */
    double deadline;                /* ring_now() by which it is decided or failed */
    const unsigned char *lost;      /* set of ranks known lost at the start */
} ring_agree_params_t;

typedef struct ring_agree_result {
    unsigned char members[RING_AGREE_SET_BYTES]; /* the decision: who is left */
    int nmembers;
    int rounds;                     /* token rounds it took */
    double seconds;
} ring_agree_result_t;

/* How long a shrink may take, at most, with timeout T and the new ring's start-up O:
 * an agreement (T), the new ring and its check (O + T), once more after a member
 * lost late (T + O + 1 waiting for the last ones, then O). */
#define RING_SHRINK_BOUND(T, O) (3 * (T) + 3 * (O) + 2)

/* Agree (blocks, bounded by p->deadline). RING_ERR_REMOTE when the others
 * count this peer lost, RING_ERR_TIMED_OUT naming what it waited for. */
ring_status_t ring_agree(const ring_agree_params_t *p, ring_agree_result_t *res);

#endif /* RING_AGREE_H */
