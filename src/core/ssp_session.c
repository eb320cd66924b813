/*
 * ssp_session.c - bounded-staleness (SSP) and asynchronous sessions
 * (include/ringd/ssp.h): the trainer's calls (wait, push, finish) and the
 * engine thread that runs the rounds.
 *
 * A round is
 *   1. an exact allreduce of control values: every peer's clock (the steps
 *      its contribution covers up to), its step count and staleness sum,
 *      its done/stop flags and its idle time, each peer in its own slots,
 *      so every peer learns all of them exactly;
 *   2. when any peer contributed, an allreduce-average of the accumulators
 *      (the sum of each peer's local gradients not yet sent), with the codec;
 *   3. the same SGD update on every peer's master copy of the parameters.
 * Every peer applies the same rounds in the same order, so the master
 * parameters are bitwise identical everywhere after every round. With S = 0
 * the engine also waits for its own step before a round, so each round holds
 * exactly one step of every peer: the arithmetic of lockstep, bit for bit.
 *
 * Locking: the trainer and the engine share the accumulator, the master
 * parameters and the counters under one mutex; the engine alone calls
 * libringd on the communicator.
 */
#include "ring_build.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/ssp.h>

#include "clock.h"
#include "cond_wait.h"
#include "errors.h"
#include "sgd.h"
#include "ssp_options.h"

#define TENSOR_GRADIENT 1u
#define TENSOR_CONTROL 2u
/* give up after this many consecutive rounds with an inf/NaN average */
#define NONFINITE_STREAK_MAX 5
#define ERR_MAX 640 /* the session message: "SSP round N: " and a libringd error */

enum { CTL_CLOCK, CTL_COUNT, CTL_TAU, CTL_DONE, CTL_STOP, CTL_WAIT, CTL_SLOTS };

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
    double step_ema;          /* the trainer's recent step time (s, moving average) */

    /* engine -> trainer (under mu) */
    float *master;            /* parameters after the applied rounds */
    sgd_t sgd;                /* its velocity belongs with master */
    uint64_t version;         /* bumped when the trainer's view must be rebuilt */
    uint64_t min_clock;       /* M */
    uint64_t total_clock;     /* the sum of the peers' clocks: the schedule follows it / N */
    uint64_t own_applied;     /* this peer's clock in the last applied round */
    int in_flight;            /* send holds this peer's steps, in a round not yet applied */
    int stop_all, engine_done;
    ring_status_t failed;
    char err[ERR_MAX];
    ring_ssp_stats_t st;
    float *peer_wait;

    /* trainer only */
    uint64_t seen_version;
    uint64_t step_clock, step_min;
    int step_open;            /* wait allowed a step, push not called yet */
    double step_t0;
    float *dc_base;           /* delay compensation: master as the step started */

    /* engine only */
    float *send, *avg, *ctl;
    int nonfinite_streak;
    uint64_t wire_base;
};

/* S for a step at clock c: lockstep during the warm-up */
static long bound_at(const ring_ssp_t *s, uint64_t c)
{
    return c < s->o.warmup_steps ? 0 : s->o.staleness;
}

/* Under mu, the engine of a bounded or async session in its lockstep warm-up:
 * the seconds until its trainer's open step is late (warmup_late times the
 * recent step time), <= 0 once it is, or a large value when no step can be
 * (alone in the ring, a late step holds no one). */
static double late_in(const ring_ssp_t *s)
{
    if (s->o.warmup_late <= 0 || s->o.staleness == 0 || s->world < 2 ||
        s->clock >= s->o.warmup_steps || s->computing_since <= 0 || s->step_ema <= 0)
        return 1e9;
    return s->computing_since + s->o.warmup_late * s->step_ema - ring_now();
}

static double lr_now(const ring_ssp_t *s)
{
    /* the peers' mean clock: identical on every peer, M itself when they are in step
     * (S = 0), and it moves on while a slow peer is behind */
    return lr_at(s->o.lr_schedule == RING_LR_COSINE, s->o.lr,
                 s->total_clock / (uint64_t)s->world, s->o.total_steps);
}

/* Under mu: the session fails with status and message (the first one stays). */
static void fail_locked(ring_ssp_t *s, ring_status_t status, const char *msg)
{
    if (s->failed == RING_OK) {
        s->failed = status == RING_OK ? RING_ERR_INTERNAL : status;
        snprintf(s->err, sizeof(s->err), "SSP round %" PRIu64 ": %.*s", s->st.rounds,
                 ERR_MAX - 64, msg);
    }
    pthread_cond_broadcast(&s->cv);
}

/* A libringd call of the engine failed: its message, with what it was. */
static void engine_fail(ring_ssp_t *s, ring_status_t status, const char *what)
{
    char msg[ERR_MAX - 64];

    snprintf(msg, sizeof(msg), "%s: %s", what, ring_last_error());
    pthread_mutex_lock(&s->mu);
    fail_locked(s, status, msg);
    pthread_mutex_unlock(&s->mu);
}

/* Under mu: the session's error as this thread's, or RING_OK. */
static ring_status_t failed_status(const ring_ssp_t *s)
{
    return s->failed == RING_OK ? RING_OK : ring_error_copy(s->failed, s->err);
}

/*
 * Under mu: apply a round's average (sum of its `total` steps / N) to the
 * master parameters, as the update rule says for rounds holding more than N
 * steps (ssp.h, ring_ssp_update_t).
 */
static void apply_round(ring_ssp_t *s, uint64_t total, uint64_t tau_total)
{
    uint64_t n = (uint64_t)s->world, m = 1;
    double lr = lr_now(s), tau = (double)tau_total / (double)total;
    float k = 1.0f;

    if (total > n && s->o.update == RING_SSP_UPDATE_MEAN)
        k = (float)n / (float)total;
    if (total > n && s->o.update == RING_SSP_UPDATE_STEPS) {
        m = (total + n / 2) / n;
        k = 1.0f / (float)m;
    }
    if (k != 1.0f)
        for (size_t i = 0; i < s->n; i++)
            s->avg[i] *= k;
    if (s->o.stale_lr_scale)
        lr /= 1.0 + tau;
    s->sgd.momentum = (float)s->o.momentum;
    if (s->o.momentum_compensation && tau_total > 0) {
        double mu = 1.0 - (1.0 - s->o.momentum) * (1.0 + tau);
        s->sgd.momentum = (float)(mu > 0 ? mu : 0);
    }
    s->sgd.lr = (float)lr;
    for (uint64_t j = 0; j < m; j++)
        sgd_step(&s->sgd, s->master, s->avg);
}

/* Under mu, the engine: wait for this peer's contribution. Lockstep (S = 0, or no
 * step timed yet) waits for the trainer's step; otherwise an engine with nothing
 * waits at most the round idle time, since a round is collective: joining at
 * once only spins empty rounds while the others compute. A trainer held by wait
 * has no step coming, so its engine joins at once: the round it waits for then
 * starts as soon as the peer it needs is ready. */
static int engine_take(ring_ssp_t *s)
{
    double t0 = ring_now(), idle = s->o.round_idle_s, late;

    if (idle < 0) {
        /* auto: a tenth of a step, so a round rarely waits long for a step that is
         * about to land, and the peers' views stay fresh */
        idle = s->step_ema / 10;
        idle = idle < 0.0005 ? 0.0005 : idle > 0.02 ? 0.02 : idle;
    }
    for (;;) {
        int lock = bound_at(s, s->clock) == 0 || s->step_ema == 0;
        double left = t0 + idle - ring_now();
        if (s->abandon)
            return -1;
        if (s->acc_count > 0 || s->trainer_done)
            return 0;
        if (lock && (late = late_in(s)) < 1e9) {
            if (late <= 0) {
                /* the round goes on without the late step, whose clock counts as
                 * done: the trainer's push drops it (ring_ssp_push) */
                s->clock++;
                return 0;
            }
            (void)ring_cond_wait_s(&s->cv, &s->mu, late < 0.05 ? late : 0.05);
            continue;
        }
        if (!lock && (s->trainer_waiting || left <= 0))
            return 0;
        (void)ring_cond_wait_s(&s->cv, &s->mu, lock ? 0.05 : left);
    }
}

/* A peer's control slots hold counts: whole, finite, below 2^24 (wait: seconds >= 0).
 * Checked before any is converted to an integer: nothing from the wire is trusted. */
static int control_valid(const float *c)
{
    for (int k = 0; k < CTL_SLOTS; k++) {
        float v = c[k];
        if (!(v >= 0.0f && v < (float)CLOCK_MAX * (k == CTL_TAU ? 64.0f : 1.0f)))
            return 0; /* also NaN */
        if (k != CTL_WAIT && v != floorf(v))
            return 0;
    }
    return c[CTL_DONE] <= 1.0f && c[CTL_STOP] <= 1.0f;
}

/* One round. Returns 1 when every peer is done (the last round), 0 to go on, -1 on failure. */
static int engine_round(ring_ssp_t *s)
{
    int n = s->world, me = s->rank, any_stop = 0, all_done = 1, skipped = 0;
    uint64_t my_count, total = 0, tau_total = 0, new_min = UINT64_MAX, own = 0, sum_clock = 0;
    uint64_t live_min = UINT64_MAX;
    double t0, idle_before;
    ring_request_t *req;
    ring_comm_stats_t cs;
    ring_status_t st;
    int want_stop = s->o.should_stop != NULL && s->o.should_stop(s->o.arg) != 0;

    pthread_mutex_lock(&s->mu);
    if (engine_take(s) != 0) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    my_count = s->acc_count;
    memset(s->ctl, 0, (size_t)n * CTL_SLOTS * sizeof(float));
    s->ctl[me * CTL_SLOTS + CTL_CLOCK] = (float)s->clock;
    s->ctl[me * CTL_SLOTS + CTL_COUNT] = (float)my_count;
    s->ctl[me * CTL_SLOTS + CTL_TAU] = (float)s->acc_tau;
    if (my_count > 0) {
        float *t = s->send;
        s->send = s->acc;
        s->acc = t;
        s->acc_count = s->acc_tau = 0;
        s->in_flight = 1;
    }
    (void)ring_comm_get_stats(s->comm, &cs);
    idle_before = cs.wait_s;
    s->ctl[me * CTL_SLOTS + CTL_WAIT] = (float)cs.wait_s;
    s->ctl[me * CTL_SLOTS + CTL_DONE] = s->trainer_done && my_count == 0 ? 1.0f : 0.0f;
    s->ctl[me * CTL_SLOTS + CTL_STOP] = want_stop || s->stop_asked ? 1.0f : 0.0f;
    pthread_mutex_unlock(&s->mu);

    t0 = ring_now();
    st = ring_allreduce_start_flags(s->comm, s->ctl, s->ctl, (size_t)n * CTL_SLOTS, RING_FLOAT32,
                                    RING_SUM, TENSOR_CONTROL, RING_CALL_EXACT, &req);
    if (st == RING_OK)
        st = ring_request_wait(req);
    if (st != RING_OK) {
        engine_fail(s, st, "control allreduce");
        return -1;
    }
    for (int p = 0; p < n; p++) {
        const float *c = s->ctl + p * CTL_SLOTS;
        if (!control_valid(c)) {
            char msg[160];
            snprintf(msg, sizeof(msg), "rank %d sent control values that are not counts "
                     "(clock %g, steps %g, staleness %g): a peer of another version, or a bug",
                     p, (double)c[CTL_CLOCK], (double)c[CTL_COUNT], (double)c[CTL_TAU]);
            pthread_mutex_lock(&s->mu);
            fail_locked(s, RING_ERR_PROTOCOL, msg);
            pthread_mutex_unlock(&s->mu);
            return -1;
        }
        total += (uint64_t)c[CTL_COUNT];
        tau_total += (uint64_t)c[CTL_TAU];
        if ((uint64_t)c[CTL_CLOCK] < new_min)
            new_min = (uint64_t)c[CTL_CLOCK];
        if (c[CTL_DONE] == 0 && (uint64_t)c[CTL_CLOCK] < live_min)
            live_min = (uint64_t)c[CTL_CLOCK];
        sum_clock += (uint64_t)c[CTL_CLOCK];
        all_done &= c[CTL_DONE] > 0;
        s->peer_wait[p] = c[CTL_WAIT];
        any_stop |= c[CTL_STOP] > 0;
    }
    own = (uint64_t)s->ctl[me * CTL_SLOTS + CTL_CLOCK];
    if (total > 0) {
        /* a peer with nothing to send contributes zeros */
        if (my_count == 0)
            memset(s->send, 0, s->n * sizeof(float));
        /* out of place: the trainer may read send (its in-flight steps) meanwhile */
        st = ring_allreduce_start_flags(s->comm, s->send, s->avg, s->n, RING_FLOAT32, RING_AVG,
                                        TENSOR_GRADIENT, 0, &req);
        if (st == RING_OK)
            st = ring_request_wait(req);
        if (st == RING_ERR_NONFINITE) {
            /* skipped on every peer: all of them saw the flag */
            skipped = 1;
        } else if (st != RING_OK) {
            engine_fail(s, st, "gradient allreduce");
            return -1;
        }
    }
    (void)ring_comm_get_stats(s->comm, &cs);

    pthread_mutex_lock(&s->mu);
    s->st.comm_s += ring_now() - t0;
    s->st.wire_bytes = cs.payload_bytes - s->wire_base;
    if (skipped) {
        s->st.nonfinite_steps += total;
        /* the trainer's view holds its own dropped steps: rebuild it from master */
        s->version++;
        if (++s->nonfinite_streak >= NONFINITE_STREAK_MAX) {
            char msg[ERR_MAX - 64];
            snprintf(msg, sizeof(msg), "the averaged gradient held inf or NaN %d rounds in a "
                     "row: training diverged (try a smaller learning rate)",
                     NONFINITE_STREAK_MAX);
            fail_locked(s, RING_ERR_NONFINITE, msg);
            pthread_mutex_unlock(&s->mu);
            return -1;
        }
        total = 0;
    } else if (total > 0) {
        apply_round(s, total, tau_total);
        s->version++;
        s->st.rounds_applied++;
        s->st.contributions += total;
        s->nonfinite_streak = 0;
    }
    /* a peer done with its steps holds no one: late warm-up steps move a clock past
     * the steps its trainer pushed, so the peers' clocks may end apart */
    if (live_min != UINT64_MAX)
        new_min = live_min;
    s->min_clock = new_min;
    s->total_clock = sum_clock;
    if (s->o.stop_at_steps > 0 && sum_clock >= s->o.stop_at_steps && !s->stop_all) {
        /* the same control values on every peer: every peer stops after this round */
        s->st.stop_at_reached = 1;
        any_stop = 1;
    }
    s->own_applied = own;
    s->in_flight = 0;
    s->trainer_waiting = 0; /* a trainer still held sets it again */
    s->st.rounds++;
    s->stop_all |= any_stop;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    /* only this thread changes master, so the hook reads it without the lock */
    if (total > 0 && s->o.on_round != NULL) {
        ring_ssp_round_t info = {s->st.rounds, total, new_min, ring_now() - t0,
                                 cs.wait_s - idle_before, s->master, s->sgd.velocity, s->n};
        if (s->o.on_round(&info, s->o.arg) != 0) {
            pthread_mutex_lock(&s->mu);
            fail_locked(s, RING_ERR_CANCELED, "the round callback (on_round) failed");
            pthread_mutex_unlock(&s->mu);
            return -1;
        }
    }
    return all_done && total == 0 && !skipped ? 1 : 0;
}

static void *engine_main(void *arg)
{
    ring_ssp_t *s = arg;
    int rc;

    do
        rc = engine_round(s);
    while (rc == 0);
    pthread_mutex_lock(&s->mu);
    s->engine_done = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/*
 * Under mu: the trainer's view, the master copy minus this peer's own
 * gradients that no applied round holds yet (accumulated, or in the round
 * under way), as SSP's read-my-writes asks. Momentum is left out of this
 * local view. With nothing pending, an exact copy: S = 0 stays bit for bit
 * lockstep.
 */
static void local_view(const ring_ssp_t *s, float *params)
{
    float lr = (float)(lr_now(s) / s->world);
    const float *m = s->master, *a = s->acc, *f = s->send;

    /* one pass over the arrays: for 25M parameters each pass is ~100 MB */
    if (s->acc_count > 0 && s->in_flight)
        for (size_t i = 0; i < s->n; i++)
            params[i] = m[i] - lr * a[i] - lr * f[i];
    else if (s->acc_count > 0)
        for (size_t i = 0; i < s->n; i++)
            params[i] = m[i] - lr * a[i];
    else if (s->in_flight)
        for (size_t i = 0; i < s->n; i++)
            params[i] = m[i] - lr * f[i];
    else
        memcpy(params, m, s->n * sizeof(float));
}

/* Under mu: step c's parameters are as fresh as waiting can make them: every
 * peer's step before c is applied (M >= c), or the slowest peer is two or more
 * steps behind, a straggler, not waited for (nor are the rounds: its engine
 * sets their pace while its trainer computes). */
static int fresh_enough(const ring_ssp_t *s, uint64_t c)
{
    return s->min_clock >= c || s->min_clock + 2 <= c;
}

static double fresh_wait_limit(const ring_ssp_t *s)
{
    double w = s->o.fresh_wait_s;

    if (w >= 0)
        return w;
    /* auto: one step. A peer out of phase by a fraction of a step is waited for
     * once, and the peers are in phase again (a limit of a quarter step took
     * several steps of a quarter each, all stale, to get there); one more than
     * a step behind is a straggler, and is not waited for. */
    w = s->step_ema;
    return w == 0 ? 0 : w < 0.0005 ? 0.0005 : w > 0.1 ? 0.1 : w;
}

/* Under mu: the trainer is about to sleep for what a round brings, so its
 * engine joins rounds at once (no step is coming). The engine clears the flag
 * with every round: a trainer that round satisfied must not, before it has
 * woken, send its engine into an empty round. */
static void trainer_holds(ring_ssp_t *s)
{
    if (!s->trainer_waiting) {
        s->trainer_waiting = 1;
        pthread_cond_broadcast(&s->cv);
    }
}

/* Under mu: hold step c at most the fresh-wait limit for fresher parameters;
 * returns the seconds held. */
static double fresh_wait(ring_ssp_t *s, uint64_t c)
{
    double limit = fresh_wait_limit(s), t0 = ring_now(), left;

    if (limit <= 0 || fresh_enough(s, c))
        return 0;
    while (s->failed == RING_OK && !s->stop_all && !s->stop_asked && !s->engine_done &&
           !fresh_enough(s, c) && (left = limit - (ring_now() - t0)) > 0) {
        trainer_holds(s);
        (void)ring_cond_wait_s(&s->cv, &s->mu, left);
    }
    s->trainer_waiting = 0;
    return ring_now() - t0;
}

ring_status_t ring_ssp_wait(ring_ssp_t *s, double timeout_s, ring_ssp_step_t *step)
{
    double t0 = ring_now();
    uint64_t c;
    long b;
    int waited = 0;

    if (s == NULL || step == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_ssp_wait: NULL session or step");
    if (s->step_open)
        return ring_error_set(RING_ERR_INVALID, "ring_ssp_wait: step %" PRIu64 " was allowed "
                              "and not pushed: call ring_ssp_push first", s->step_clock);
    pthread_mutex_lock(&s->mu);
    c = s->clock;
    if (c + 1 >= CLOCK_MAX) {
        pthread_mutex_unlock(&s->mu);
        return ring_error_set(RING_ERR_INVALID, "step %" PRIu64 ": SSP sessions count clocks up "
                              "to 2^24 steps", c);
    }
    b = bound_at(s, c);
    while (s->failed == RING_OK && !s->stop_all && !s->stop_asked && !s->engine_done && b >= 0 &&
           s->min_clock + (uint64_t)b < c) {
        double left = timeout_s - (ring_now() - t0);
        if (left <= 0) {
            s->trainer_waiting = 0;
            pthread_mutex_unlock(&s->mu);
            return ring_error_set(RING_ERR_TIMED_OUT, "step %" PRIu64 " waited %.1f s for the "
                                  "slowest peer's step %" PRIu64 " (staleness bound %ld)", c,
                                  timeout_s, c - (uint64_t)b - 1, b);
        }
        waited = 1;
        trainer_holds(s);
        (void)ring_cond_wait_s(&s->cv, &s->mu, left < 0.05 ? left : 0.05);
    }
    s->trainer_waiting = 0;
    step->blocked_s = waited ? ring_now() - t0 : 0;
    step->fresh_s = b != 0 ? fresh_wait(s, c) : 0;
    if (s->failed != RING_OK) {
        ring_status_t st = failed_status(s);
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    if (s->stop_all || s->stop_asked || s->engine_done) {
        pthread_mutex_unlock(&s->mu);
        return ring_error_set(RING_ERR_CANCELED, "%s at M = %" PRIu64 ": call ring_ssp_finish",
                              s->stop_asked ? "this peer asked to stop" : "the peers agreed to stop",
                              s->min_clock);
    }
    if (s->version != s->seen_version) {
        local_view(s, s->params);
        s->seen_version = s->version;
    }
    if (s->dc_base != NULL)
        memcpy(s->dc_base, s->master, s->n * sizeof(float));
    s->step_clock = c;
    s->step_min = s->min_clock;
    s->computing_since = ring_now();
    step->clock = c;
    step->min_clock = s->min_clock;
    step->tau = c - s->min_clock;
    step->lag = c - s->own_applied;
    s->st.blocked_s += step->blocked_s;
    s->st.fresh_s += step->fresh_s;
    pthread_mutex_unlock(&s->mu);
    s->step_open = 1;
    s->step_t0 = ring_now();
    return RING_OK;
}

/* Under mu: a pushed step took dt seconds (the recent step time, a moving average) */
static void note_step_time(ring_ssp_t *s, double dt)
{
    s->step_ema = s->step_ema > 0 ? 0.8 * s->step_ema + 0.2 * dt : dt;
}

ring_status_t ring_ssp_push(ring_ssp_t *s, const float *g)
{
    uint64_t tau;
    float scale, lr;
    float *acc, *view;
    double now;

    if (s == NULL || g == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_ssp_push: NULL session or gradient");
    if (!s->step_open)
        return ring_error_set(RING_ERR_INVALID, "ring_ssp_push: no step is open: call "
                              "ring_ssp_wait before each step");
    tau = s->step_clock - s->step_min;
    scale = s->o.staleness_scale ? 1.0f / (1.0f + (float)tau) : 1.0f;
    now = ring_now();
    pthread_mutex_lock(&s->mu);
    if (s->failed != RING_OK) {
        ring_status_t st = failed_status(s);
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    s->computing_since = 0;
    if (s->step_clock < s->clock) {
        /* late in the warm-up: its rounds went on without it (engine_take) */
        s->st.late_steps++;
        note_step_time(s, now - s->step_t0);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        s->step_open = 0;
        return RING_OK;
    }
    acc = s->acc;
    view = s->params;
    lr = (float)(lr_now(s) / s->world) * scale;
    if (s->dc_base != NULL) {
        /* DC-ASGD: g + lambda g*g*(w_now - w_then), into the accumulator */
        float lam = (float)s->o.delay_compensation;
        const float *m = s->master, *w0 = s->dc_base;
        for (size_t i = 0; i < s->n; i++) {
            float gi = g[i] + lam * g[i] * g[i] * (m[i] - w0[i]);
            acc[i] = (s->acc_count == 0 ? 0.0f : acc[i]) + gi * scale;
            view[i] -= lr * gi;
        }
    } else if (s->acc_count == 0 && scale == 1.0f) {
        /* one pass: into the accumulator, and read-my-writes: the next step already
         * sees this one (copy, not 0 + g: -0.0 stays -0.0, S = 0 stays lockstep) */
        for (size_t i = 0; i < s->n; i++) {
            acc[i] = g[i];
            view[i] -= lr * g[i];
        }
    } else if (s->acc_count == 0) {
        for (size_t i = 0; i < s->n; i++) {
            acc[i] = g[i] * scale;
            view[i] -= lr * g[i];
        }
    } else {
        for (size_t i = 0; i < s->n; i++) {
            acc[i] += g[i] * scale;
            view[i] -= lr * g[i];
        }
    }
    s->acc_count++;
    s->acc_tau += tau;
    note_step_time(s, now - s->step_t0);
    s->clock = s->step_clock + 1;
    s->st.tau_hist[tau < RING_SSP_TAU_BINS - 1 ? tau : RING_SSP_TAU_BINS - 1]++;
    {
        uint64_t lag = s->step_clock - s->own_applied;
        s->st.lag_hist[lag < RING_SSP_TAU_BINS - 1 ? lag : RING_SSP_TAU_BINS - 1]++;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    s->step_open = 0;
    return RING_OK;
}

ring_status_t ring_ssp_request_stop(ring_ssp_t *s)
{
    if (s == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_ssp_request_stop: NULL session");
    pthread_mutex_lock(&s->mu);
    s->stop_asked = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return RING_OK;
}

/* Join the engine once it has said it is done (never blocks long). */
static void engine_join(ring_ssp_t *s)
{
    if (s->engine_started) {
        pthread_join(s->engine, NULL);
        s->engine_started = 0;
    }
}

ring_status_t ring_ssp_finish(ring_ssp_t *s, double timeout_s)
{
    double t0 = ring_now();
    ring_status_t st;

    if (s == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_ssp_finish: NULL session");
    pthread_mutex_lock(&s->mu);
    s->trainer_done = 1;
    s->step_open = 0; /* a step allowed and never pushed is dropped */
    pthread_cond_broadcast(&s->cv);
    while (!s->engine_done) {
        double left = timeout_s - (ring_now() - t0);
        if (left <= 0) {
            pthread_mutex_unlock(&s->mu);
            return ring_error_set(RING_ERR_TIMED_OUT, "ring_ssp_finish: the peers were not all "
                                  "done after %.1f s (M = %" PRIu64 "); call it again, or "
                                  "close the session and the communicator", timeout_s,
                                  s->min_clock);
        }
        (void)ring_cond_wait_s(&s->cv, &s->mu, left < 0.05 ? left : 0.05);
    }
    st = failed_status(s);
    if (st == RING_OK)
        memcpy(s->params, s->master, s->n * sizeof(float));
    pthread_mutex_unlock(&s->mu);
    engine_join(s);
    return st;
}

ring_status_t ring_ssp_read(ring_ssp_t *s, float *params, float *velocity)
{
    if (s == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_ssp_read: NULL session");
    pthread_mutex_lock(&s->mu);
    if (params != NULL)
        memcpy(params, s->master, s->n * sizeof(float));
    if (velocity != NULL)
        memcpy(velocity, s->sgd.velocity, s->n * sizeof(float));
    pthread_mutex_unlock(&s->mu);
    return RING_OK;
}

ring_status_t ring_ssp_get_stats(ring_ssp_t *s, ring_ssp_stats_t *out)
{
    if (s == NULL || out == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_ssp_get_stats: NULL argument");
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    out->clock = s->clock;
    out->min_clock = s->min_clock;
    out->total_clock = s->total_clock;
    pthread_mutex_unlock(&s->mu);
    return RING_OK;
}

ring_status_t ring_ssp_peer_wait(ring_ssp_t *s, float *out, int n)
{
    if (s == NULL || out == NULL || n != s->world)
        return ring_error_set(RING_ERR_INVALID, "ring_ssp_peer_wait: needs the session and an "
                              "array of the world size (%d)", s != NULL ? s->world : 0);
    pthread_mutex_lock(&s->mu);
    memcpy(out, s->peer_wait, (size_t)n * sizeof(float));
    pthread_mutex_unlock(&s->mu);
    return RING_OK;
}

ring_status_t ring_ssp_open(ring_comm_t *comm, float *params, size_t count,
                            const ring_ssp_options_t *o, ring_ssp_t **s_p)
{
    ring_ssp_t *s;
    size_t bytes = count * sizeof(float);
    ring_comm_stats_t cs;

    if (s_p == NULL || comm == NULL || params == NULL || o == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_ssp_open: NULL argument");
    *s_p = NULL;
    RING_CHECK(ssp_options_check(o, count));
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for an SSP session");
    s->comm = comm;
    s->rank = ring_comm_rank(comm);
    s->world = ring_comm_size(comm);
    s->n = count;
    s->params = params;
    s->o = *o;
    s->acc = malloc(bytes);
    s->send = malloc(bytes);
    s->avg = malloc(bytes);
    s->master = malloc(bytes);
    s->ctl = malloc((size_t)s->world * CTL_SLOTS * sizeof(float));
    s->peer_wait = calloc((size_t)s->world, sizeof(float));
    if (o->delay_compensation > 0)
        s->dc_base = malloc(bytes);
    if (s->acc == NULL || s->send == NULL || s->avg == NULL || s->master == NULL ||
        s->ctl == NULL || s->peer_wait == NULL || (o->delay_compensation > 0 && !s->dc_base) ||
        sgd_init(&s->sgd, count, o->lr, o->momentum, o->weight_decay) != 0) {
        ring_ssp_close(s);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for an SSP session's buffers "
                              "(5 x %zu bytes)", bytes);
    }
    s->o.velocity = NULL; /* the caller's, copied now */
    if (o->velocity != NULL)
        memcpy(s->sgd.velocity, o->velocity, bytes);
    memcpy(s->master, params, bytes);
    s->clock = s->min_clock = s->own_applied = o->start_clock;
    s->total_clock = o->start_clock * (uint64_t)s->world;
    s->seen_version = 0;
    (void)ring_comm_get_stats(comm, &cs);
    s->wire_base = cs.payload_bytes;
    pthread_mutex_init(&s->mu, NULL);
    ring_cond_init_monotonic(&s->cv); /* a stepped wall clock must not stretch waits */
    s->sync_ready = 1;
    if (pthread_create(&s->engine, NULL, engine_main, s) != 0) {
        ring_ssp_close(s);
        return ring_error_set(RING_ERR_NO_RESOURCE, "cannot start the SSP engine thread");
    }
    s->engine_started = 1;
    *s_p = s;
    return RING_OK;
}

void ring_ssp_close(ring_ssp_t *s)
{
    if (s == NULL)
        return;
    if (s->engine_started) {
        /* not finished: the engine leaves after its current round (bounded by the
         * communicator's timeout) */
        pthread_mutex_lock(&s->mu);
        s->abandon = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        engine_join(s);
    }
    if (s->sync_ready) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
    sgd_free(&s->sgd);
    free(s->acc);
    free(s->send);
    free(s->avg);
    free(s->master);
    free(s->ctl);
    free(s->peer_wait);
    free(s->dc_base);
    free(s);
}
