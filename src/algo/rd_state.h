/* rd_state.h - the state of rd.c's pairs and of the request under way, shared
 * by rd.c (which runs the schedules) and rd_blame.c (which says, in the ring's
 * terms, why a pair failed). */
#ifndef RING_RD_STATE_H
#define RING_RD_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "algo.h"
#include "rd_int.h"
#include "subcomm.h"

/* rd_pair_tid: bit 31 the op, bit 30 more pieces of this call follow, the
 * rest the tensor id's low bits */
#define RD_TID_MORE 0x40000000u
#define RD_TID_MASK 0x3fffffffu

struct ring_rd {
    ring_sub_t pair[RD_SLOTS];
    ring_sub_close_fn close_fn;
    int forced;                /* --algo rd: every eligible size */
    size_t max_bytes;
    size_t rh_max_bytes;       /* Rabenseifner takes what rd does not up to this; 0: never */
    rd_sched_t plan_of[2];     /* by enum rd_algo_kind */
    const rd_sched_t *plan;    /* the request's */
    /* the request under way */
    ring_request_t *req;
    int step;
    ring_request_t *sub_req;
    double last_move;
    double next_look;          /* rd_wait: when to look at the other pairs next */
    double asked_at;           /* rd_ask: when the partner of this step was asked, 0: not */
    double answer_by;          /* and when its answer is due: after that, it is blamed */
    uint8_t questioned[RD_SLOTS]; /* pairs failed by a question passed on (rd_ask) */
    float *swap;               /* 2 x count: what a swap gathered */
    size_t swap_count;
    /* Rabenseifner: the buffer it halves, recvbuf or (when P2 does not divide
     * count) a copy padded with zeros to padded elements */
    float *work, *pad;
    size_t padded, pad_count;
    const float *src0;         /* what the first scatter reads, NULL: work */
    /* Rabenseifner's runs a call larger than piece_max floats (--rh-piece-bytes, a
     * multiple of P2; 0: none) in pieces, one after the other, each the whole
     * schedule: [piece_off, piece_off + piece_n) is the one under way */
    size_t piece_max, piece_off, piece_n;
    int nonfinite;             /* Rabenseifner's: an inf or NaN in this place's block (its
                                * last scatter) or in a window gathered since, in this
                                * piece or an earlier one of the call */
};

extern const ring_sub_owner_t rd_owner;

/* 1 when the request under way runs Rabenseifner's algorithm */
int rd_halving(const struct ring_rd *rd);
/* What runs the request under way, for messages. */
const char *rd_name(const struct ring_rd *rd);
/* A pair failed: the ring fails, saying why in the ring's terms (rd_blame.c). */
ring_status_t rd_pair_failed(ring_comm_t *comm, const ring_sub_t *pair);

#endif /* RING_RD_STATE_H */
