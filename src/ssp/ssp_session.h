/*
 * ssp_session.h - private to the SSP session (ssp_session.c, the trainer's
 * calls; ssp_engine.c, the engine thread): the session's state and the few
 * rules both sides apply.
 */
#ifndef RING_SSP_SESSION_H
#define RING_SSP_SESSION_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <ringd/ssp.h>

#include "sgd.h"

#define TENSOR_GRADIENT 1u
#define TENSOR_CONTROL 2u
/* give up after this many consecutive rounds with an inf/NaN average */
#define NONFINITE_STREAK_MAX 5
#define ERR_MAX 640 /* the session message: "SSP round N: " and a libringd error */

/* a peer's control slots; DUE: it sends nothing, and its trainer's step is about to land;
 * LATE: its trainer's step has run well past its recent step time (a jittered step) */
enum { CTL_CLOCK, CTL_COUNT, CTL_TAU, CTL_DONE, CTL_STOP, CTL_WAIT, CTL_DUE, CTL_LATE,
       CTL_SLOTS };
/* the recent step time is the median of this many steps: one long step (jitter) moves it
 * as little as one short one, where a moving average stayed inflated for several steps */
#define STEP_TIMES 9

struct ring_ssp {
    ring_comm_t *comm;
    int rank, world;
    size_t n;
    float *params;            /* the caller's buffer: the trainer's view */
    ring_ssp_options_t o;
    pthread_t engine;
    int engine_started, sync_ready;
    pthread_mutex_t mu;
    pthread_cond_t cv;

    /* trainer -> engine (under mu) */
    float *acc;               /* local gradients not yet sent (valid when acc_count > 0) */
    uint64_t acc_count, acc_tau;
    uint64_t clock;           /* steps pushed */
    int trainer_done, abandon, stop_asked;
    int trainer_waiting;      /* wait holds the trainer: no step is coming soon */
    double computing_since;   /* the open step started then (0: no step open) */
    double step_time;         /* the trainer's recent step time (s; 0: no step timed yet) */
    double step_times[STEP_TIMES]; /* the last steps' times, a ring indexed by step_count */
    uint64_t step_count;      /* steps timed */

    /* engine -> trainer (under mu) */
    float *master;            /* parameters after the applied rounds */
    sgd_t sgd;                /* its velocity belongs with master */
    uint64_t version;         /* bumped when the trainer's view must be rebuilt */
    uint64_t min_clock;       /* M */
    uint64_t total_clock;     /* the sum of the peers' clocks: the schedule follows it / N */
    uint64_t own_applied;     /* this peer's clock in the last applied round */
    int in_flight;            /* send holds this peer's steps, in a round not yet applied */
    uint64_t late_clock;      /* the lowest clock of a peer whose step was late in the last */
    uint64_t late_round;      /* round that saw one (UINT64_MAX: none), and that round */
    int stop_all, engine_done;
    ring_status_t failed;
    char err[ERR_MAX];
    ring_ssp_stats_t st;
    float *peer_wait;

    /* trainer only */
    uint64_t seen_version;
    int view_stale;           /* push since the view was built: wait rebuilds it */
    uint64_t step_clock, step_min;
    int step_open;            /* wait allowed a step, push not called yet */
    double step_t0;
    float *dc_base;           /* delay compensation: master as the step started */

    /* engine only */
    float *send, *avg, *ctl;
    int nonfinite_streak;
    uint64_t wire_base;
    uint64_t held_count, held_tau; /* steps in send that a gathering round held back */
    int gathered_last;        /* the last round was held for a peer's step (gather_s) */
    double due_wait_s;        /* this peer's step was due then: wait that long for it */
};

/* S for a step at clock c: lockstep during the warm-up */
static inline long bound_at(const ring_ssp_t *s, uint64_t c)
{
    return c < s->o.warmup_steps ? 0 : s->o.staleness;
}

static inline double lr_now(const ring_ssp_t *s)
{
    /* the peers' mean clock: identical on every peer, M itself when they are in step
     * (S = 0), and it moves on while a slow peer is behind */
    return lr_at(s->o.lr_schedule == RING_LR_COSINE, s->o.lr,
                 s->total_clock / (uint64_t)s->world, s->o.total_steps);
}

/* the engine thread: rounds until every peer is done, or the session fails */
void *ssp_engine_main(void *arg);

#endif
