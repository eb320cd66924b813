/*
 * ringd/ssp.h - bounded-staleness (SSP) and asynchronous data parallelism
 * over a communicator: a session trains one flat fp32 parameter buffer.
 *
 *   ring_ssp_options_t o;
 *   ring_ssp_options_init(&o);
 *   o.staleness = 4; o.lr = 0.05; o.momentum = 0.9;
 *   ring_ssp_t *s;
 *   ring_ssp_open(comm, params, n, &o, &s);     // every peer, the same n and options
 *   for (;;) {
 *       ring_ssp_step_t step;
 *       if (ring_ssp_wait(s, 60, &step) != RING_OK)   // the bound; params = this step's view
 *           break;                                    // (RING_ERR_CANCELED: the peers stopped)
 *       compute_gradient(params, grad);
 *       ring_ssp_push(s, grad);
 *   }
 *   ring_ssp_finish(s, 600);      // every peer's steps applied; params identical everywhere
 *   ring_ssp_close(s);
 *
 * Semantics (DESIGN.md, "Rounds, clocks and staleness"). A peer's clock is
 * the number of steps it has pushed. An engine thread runs rounds in the
 * background; each round is an exact allreduce of every peer's clock and
 * counters, then, when any peer has pushed, an allreduce-average of the
 * peers' accumulated gradients (with the communicator's codec), then the
 * same update of the master parameters on every peer: SGD with momentum
 * and weight decay (PyTorch's), the learning rate a pure function of M.
 * M, the minimum over peers of the clock each has contributed up to, counts
 * the steps of every peer that are in the master parameters; they are
 * bitwise identical on every peer after every round.
 *
 * The bound: ring_ssp_wait for step c returns once M >= c - S. S = 0 is
 * lockstep (every round holds one step of every peer, the arithmetic of a
 * synchronous allreduce per step); staleness RING_SSP_ASYNC has no bound.
 * Fresh reads: beyond the bound, wait holds a step a little (fresh_wait_s)
 * for the round that brings its peers' last steps, when those are about to
 * land, so that without stragglers a step sees what lockstep's would.
 * A peer's recent step time, which the options below scale, is the median
 * of the times between its last 9 waits and pushes (one jittered step does
 * not move it).
 * Read-my-writes: the parameters wait writes are the master copy minus this
 * peer's own pushed gradients that no applied round holds yet (lr / N each),
 * so a fast peer does not take several steps from the same point.
 *
 * Threads: the session owns the communicator while it is open: its engine
 * thread alone calls libringd on it, so run other collectives (a broadcast
 * of the initial parameters) before ring_ssp_open or after ring_ssp_close.
 * wait, push and finish are called from one trainer thread. The parameter
 * buffer is written only by wait, push and finish, on the caller's thread.
 *
 * Failure: a peer that dies or fails fails the engine on every peer (named,
 * as every libringd error); wait, push and finish then return its status
 * and ring_last_error() its message. Every wait is bounded by its timeout
 * and by the communicator's timeout_s.
 */
#ifndef RINGD_SSP_H
#define RINGD_SSP_H

#include <stddef.h>
#include <stdint.h>
#include <ringd/status.h>
#include <ringd/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ring_ssp ring_ssp_t;

#define RING_SSP_ASYNC (-1L)  /* staleness: no bound */
#define RING_SSP_TAU_BINS 17  /* staleness histogram: tau 0..15, and 16 or more */

/* A round holding K steps of N peers, K > N (fast peers ran ahead, or rounds
 * are slower than steps): how the average of the K steps updates the master
 * parameters. With K <= N every rule is lockstep's single update. */
typedef enum ring_ssp_update {
    RING_SSP_UPDATE_SUM = 0, /* one update with the round's average as it is (sum / N):
                                every step counts as in lockstep, in one larger step */
    RING_SSP_UPDATE_MEAN,    /* one update with the mean of the K steps (sum / K): a
                                bigger batch, each step counting N/K */
    RING_SSP_UPDATE_STEPS,   /* round(K/N) updates, each with 1/round(K/N) of the average:
                                momentum sees as many updates as in lockstep */
    RING_SSP_UPDATE_COUNT
} ring_ssp_update_t;

typedef enum ring_lr_schedule {
    RING_LR_CONSTANT = 0,
    RING_LR_COSINE,          /* lr * (1 + cos(pi * M / total_steps)) / 2 */
    RING_LR_SCHEDULE_COUNT
} ring_lr_schedule_t;

/* Called on the engine thread after every round that changed the master
 * parameters (the daemon writes checkpoints and metrics from it). */
typedef struct ring_ssp_round {
    uint64_t round;           /* rounds run so far, this one included */
    uint64_t steps;           /* steps of all peers this round applied */
    uint64_t min_clock;       /* M after it */
    double comm_s;            /* the round's time in the two allreduces */
    double idle_s;            /* of which idle, waiting for a neighbour */
    const float *params;      /* the master parameters and the momentum buffer after the */
    const float *velocity;    /* round: read-only, valid during the call only */
    size_t count;
} ring_ssp_round_t;

typedef struct ring_ssp_options {
    long staleness;           /* S >= 0, or RING_SSP_ASYNC; default 4 */
    uint64_t warmup_steps;    /* steps below this run lockstep (S = 0); default 0 */
    double warmup_late;       /* in that warm-up of a bounded or async session: a step still
                                 computing after this many times the recent step time is
                                 left out, so a transient straggler does not hold every
                                 peer (the backup workers of Chen et al. 2016): the round
                                 goes on without it, its clock counts as done and its push
                                 is dropped (stats.late_steps), and in a bounded session
                                 that round applies the mean of the steps it holds
                                 (lockstep's step size, not (N-1)/N of it; async: sum/N); 0 = wait for it, as
                                 lockstep does; 1..1000; default 1.5. S = 0 and a ring
                                 of one never drop */
    uint64_t start_clock;     /* resuming: the steps every peer has done; default 0 */
    uint64_t total_steps;     /* the cosine schedule's length, in steps of one peer; its
                                 position is the peers' mean clock; default 0 (constant) */
    uint64_t stop_at_steps;   /* all peers' steps together: when their clocks add up to it,
                                 every peer stops (wait returns RING_ERR_CANCELED), so fast
                                 peers train on while a slow one is behind, as asynchronous
                                 SGD does; 0 = no such limit (default) */
    double lr;                /* default 0.01 */
    double momentum;          /* default 0.9 */
    double weight_decay;      /* default 0 */
    ring_lr_schedule_t lr_schedule;
    ring_ssp_update_t update; /* default RING_SSP_UPDATE_SUM */
    int momentum_compensation; /* staleness acts as implicit momentum (Mitliagkas et al.
                                  2016): each round uses 1 - (1 - momentum)(1 + tau), tau
                                  its mean staleness, floored at 0; default on (with SUM,
                                  the best rule in repeated runs; SUM alone diverged) */
    int stale_lr_scale;       /* divide each round's lr by 1 + its mean staleness; default off */
    int staleness_scale;      /* scale each step's gradient by 1 / (1 + tau); default off */
    double delay_compensation; /* DC-ASGD's lambda (Zheng et al. 2017): a step's gradient
                                  g += lambda * g * g * (master now - master it started
                                  from); 0 = off (default) */
    double round_idle_s;      /* how long an engine with nothing to send waits for its
                                 trainer's step before joining a round; < 0 = auto (a tenth
                                 of the recent step time, 0.5..20 ms); default auto */
    const float *velocity;    /* resuming: the momentum buffer to start from (copied), or NULL */
    double fresh_wait_s;      /* bounded/async: how long wait may hold step c, beyond the
                                 bound, for fresher parameters: until every peer's steps
                                 before c are applied (M >= c), when the slowest peer is one
                                 step behind (M = c - 1; a straggler further behind is not
                                 waited for); < 0 = auto (the recent step time, 0.5 to
                                 100 ms), 0 = off; default auto */
    double fresh_late;        /* a fresh wait ends early once a round says that a peer it
                                 waits for is late: its step has run past this many times
                                 its recent step time (a jittered step, which will not land
                                 within the limit; stats.fresh_cut); 0 = wait out the
                                 limit; 1..1000; default 1.25 */
    double gather_s;          /* bounded/async: when a round would carry some peers' steps
                                 while every other peer's trainer is within this many
                                 seconds of its recent step time, the round waits for
                                 those steps (once), so steps of peers in phase travel in
                                 one allreduce, as in lockstep (not when a peer without a
                                 step is not due: a straggler); < 0 = auto (a quarter of
                                 the recent step time, 0.5 to 50 ms), 0 = off; default
                                 auto */
    /* engine thread, after each round with updates; non-zero fails the session */
    int (*on_round)(const ring_ssp_round_t *round, void *arg);
    /* engine thread, before each round; non-zero asks every peer to stop (each
     * finishes its current step, then wait returns RING_ERR_CANCELED) */
    int (*should_stop)(void *arg);
    void *arg;
} ring_ssp_options_t;

/* What wait tells about the step it allowed. */
typedef struct ring_ssp_step {
    uint64_t clock;           /* the step's number c (0-based) */
    uint64_t min_clock;       /* M when it started */
    uint64_t tau;             /* c - M: steps of the slowest peer missing from its view */
    uint64_t lag;             /* this peer's own steps not in an applied round yet (its
                                 rounds' delay; tau - lag is how far the slowest peer is
                                 behind this one) */
    double blocked_s;         /* seconds wait held it on the bound */
    double fresh_s;           /* seconds wait held it for fresher parameters (fresh_wait_s) */
} ring_ssp_step_t;

typedef struct ring_ssp_stats {
    uint64_t clock, min_clock;
    uint64_t total_clock;     /* the peers' clocks added up, as of the last round */
    int stop_at_reached;      /* stop_at_steps stopped the session */
    uint64_t rounds;          /* every round, empty ones included */
    uint64_t rounds_applied;  /* rounds that changed the parameters */
    uint64_t contributions;   /* steps of all peers those rounds applied */
    uint64_t nonfinite_steps; /* steps dropped because a round's average held inf/NaN */
    uint64_t wire_bytes;      /* payload bytes this peer sent in the session's rounds */
    double comm_s;            /* the engine's time in allreduces */
    double blocked_s;         /* the trainer's time held on the bound */
    uint64_t tau_hist[RING_SSP_TAU_BINS];
    uint64_t lag_hist[RING_SSP_TAU_BINS];
    double fresh_s;           /* the trainer's time held for fresher parameters */
    uint64_t late_steps;      /* this peer's warm-up steps dropped as late (warmup_late) */
    uint64_t gather_rounds;   /* rounds held for a peer's step about to land (gather_s) */
    uint64_t fresh_cut;       /* fresh waits ended early: a peer they waited for was late
                                 (fresh_late) */
} ring_ssp_stats_t;

RING_API
void ring_ssp_options_init(ring_ssp_options_t *o);

/*
 * Start a session over comm for the count floats of params (the caller's
 * buffer, kept by the session until close; its contents now are the
 * starting point, and must be the same on every peer). Every peer calls it
 * with the same count and options (a peer that differs fails every round
 * with RING_ERR_MISMATCH). Starts the engine thread.
 */
RING_API
ring_status_t ring_ssp_open(ring_comm_t *comm, float *params, size_t count,
                            const ring_ssp_options_t *o, ring_ssp_t **s_p);

/*
 * Wait until the next step may start (M >= c - S), at most timeout_s
 * (RING_ERR_TIMED_OUT: the step may be retried), then write its parameters
 * into the buffer. RING_ERR_CANCELED: a peer asked to stop (or
 * ring_ssp_request_stop); call ring_ssp_finish.
 */
RING_API
ring_status_t ring_ssp_wait(ring_ssp_t *s, double timeout_s, ring_ssp_step_t *step);

/* Hand over the gradient of the step wait allowed (count floats): it joins
 * the next round, and the parameters the next wait writes hold it even before
 * a round has applied it (read-my-writes). The buffer is left as it is. */
RING_API
ring_status_t ring_ssp_push(ring_ssp_t *s, const float *grad);

/* Ask every peer to stop after its current step (the next round carries it);
 * this peer's next wait returns RING_ERR_CANCELED at once. */
RING_API
ring_status_t ring_ssp_request_stop(ring_ssp_t *s);

/*
 * This peer is done: serve rounds until every peer is, then write the final
 * master parameters (bitwise the same on every peer) into the buffer. At most
 * timeout_s; RING_ERR_TIMED_OUT leaves the session open (call again, or close).
 */
RING_API
ring_status_t ring_ssp_finish(ring_ssp_t *s, double timeout_s);

/* Copy the master parameters as of the last applied round and the momentum
 * buffer (count floats each; either may be NULL): a checkpoint's contents. */
RING_API
ring_status_t ring_ssp_read(ring_ssp_t *s, float *params, float *velocity);

RING_API
ring_status_t ring_ssp_get_stats(ring_ssp_t *s, ring_ssp_stats_t *stats);

/* Every peer's seconds idle in allreduces as of the last round (n floats,
 * n = the world size): the peer that waits least is the one the others wait for. */
RING_API
ring_status_t ring_ssp_peer_wait(ring_ssp_t *s, float *out, int n);

/*
 * Free the session. Without a successful finish, the engine is stopped after
 * its current round: this peer leaves the rounds, so the communicator must
 * be closed too (the peers then fail, naming this one). Accepts NULL.
 */
RING_API
void ring_ssp_close(ring_ssp_t *s);

#ifdef __cplusplus
}
#endif
#endif /* RINGD_SSP_H */
