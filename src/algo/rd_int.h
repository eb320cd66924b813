/* rd_int.h - the schedules of the pair algorithms (rd_plan.c), shared with
 * rd.c, which runs them: recursive doubling and Rabenseifner's
 * reduce-scatter by recursive halving, then allgather by recursive doubling. */
#ifndef RING_RD_INT_H
#define RING_RD_INT_H

#include <stddef.h>

#define RD_SLOTS 32            /* pair slots: 0 = the fold, 1 + k = stage k */

enum rd_kind {
    RD_SWAP,                   /* allgather of the pair, then add (the fold's: only the
                                * lower place adds) */
    RD_GIVE_RESULT,            /* broadcast the result to the place above P2 */
    RD_TAKE_RESULT,            /* ... and receive it there */
    RH_SCATTER,                /* reduce-scatter of the pair over this stage's window:
                                * each keeps the sum of its half */
    RH_GATHER                  /* allgather of the pair: the two halves of the window */
};

typedef struct rd_step {
    enum rd_kind kind;
    int slot;                  /* which pair */
} rd_step_t;

/* One place's part of a schedule (rd_plan). */
typedef struct rd_sched {
    int p2, stages;            /* the largest power of two <= N, and its log2 */
    rd_step_t steps[2 * RD_SLOTS + 2];
    int nsteps;
    /* step after which the sum is complete (AVG scales): rd's last swap, or
     * Rabenseifner's last scatter (this place's block only) */
    int last_sum;
} rd_sched_t;

/* The two schedules over the same pairs. */
enum rd_algo_kind { RD_DOUBLING, RD_HALVING };

/* This place's steps of algorithm `kind` on a ring of size peers. */
void rd_plan(rd_sched_t *plan, enum rd_algo_kind kind, int place, int size);
/* The place this place pairs with in slot s, or -1 (both schedules use the same pairs). */
int rd_partner(const rd_sched_t *plan, int place, int size, int slot);
/* 1 when recursive doubling takes fewer dependent steps than the ring (N >= 2) */
int rd_pays(int size);
/* 1 when Rabenseifner's algorithm can beat the ring under --algo auto: N a
 * power of two of at least 4 (the same bytes as the ring in 2 log2 N steps
 * against 2(N-1); N = 2 is the ring itself, and a fold moves the whole
 * buffer twice) */
int rh_pays(int size);
/* Rabenseifner: the elements (of a buffer padded to a multiple of P2) that
 * stage k's scatter splits, and its gather joins, at this place: [*off,
 * *off + *len); this place keeps the half at *off + bit k of place x *len/2. */
void rh_window(int place, int stage, size_t padded, size_t *off, size_t *len);

#endif /* RING_RD_INT_H */
