/*
 * ssp_engine.c - the engine thread of an SSP session (include/ringd/ssp.h):
 * it runs the rounds, and applies them to the master parameters.
 *
 * A round is
 *   1. an exact allreduce of control values: every peer's clock (the steps
 *      its contribution covers up to), its step count and staleness sum,
 *      its done/stop flags, its idle time, whether its step is about to
 *      land and whether it is late, each peer in its own slots, so every peer
 *      learns all of them exactly;
 *   2. when any peer contributed, an allreduce-average of the accumulators
 *      (the sum of each peer's local gradients not yet sent), with the codec;
 *   3. the same SGD update on every peer's master copy of the parameters.
 * A round that would carry some peers' steps while the others' are all about
 * to land stops after step 1, on every peer alike, and its steps wait for
 * the next round, which waits for those (gather).
 * Every peer applies the same rounds in the same order, so the master
 * parameters are bitwise identical everywhere after every round. With S = 0
 * the engine also waits for its own step before a round, so each round holds
 * exactly one step of every peer: the arithmetic of lockstep, bit for bit.
 */
#include "ring_build.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "cond_wait.h"
#include "errors.h"
#include "ssp_options.h"
#include "ssp_session.h"

/* Under mu, the engine of a bounded or async session in its lockstep warm-up:
 * the seconds until its trainer's open step is late (warmup_late times the
 * recent step time), <= 0 once it is, or a large value when no step can be
 * (alone in the ring, a late step holds no one). */
static double late_in(const ring_ssp_t *s)
{
    if (s->o.warmup_late <= 0 || s->o.staleness == 0 || s->world < 2 ||
        s->clock >= s->o.warmup_steps || s->computing_since <= 0 || s->step_time <= 0)
        return 1e9;
    return s->computing_since + s->o.warmup_late * s->step_time - ring_now();
}

/* Under mu: how long the trainer's open step has been computing, or -1 when none is,
 * no step is timed yet, or the step is lockstep's (S = 0, the warm-up), whose rounds
 * wait for every step anyway: neither "due" nor "late" means anything there. */
static double open_step_elapsed(const ring_ssp_t *s)
{
    if (s->computing_since <= 0 || s->step_time <= 0 || bound_at(s, s->clock) == 0)
        return -1;
    return ring_now() - s->computing_since;
}

/* Under mu: how far from its recent step time a step counts as about to land */
static double gather_window(const ring_ssp_t *s)
{
    double w = s->o.gather_s;

    if (w >= 0)
        return w;
    w = s->step_time / 4; /* auto: steps of peers in phase land well within it */
    return w == 0 ? 0 : w < 0.0005 ? 0.0005 : w > 0.05 ? 0.05 : w;
}

/* Under mu, the engine about to join a round with nothing to send: its trainer's
 * open step is about to land (within the gather window of the recent step time),
 * so a round carrying the other peers' steps had better wait for it. Never in
 * lockstep (S = 0, or the warm-up), whose rounds wait for every step anyway. */
static int step_due(const ring_ssp_t *s)
{
    double w = gather_window(s), elapsed = open_step_elapsed(s);

    return w > 0 && elapsed >= 0 && elapsed >= s->step_time - w && elapsed <= s->step_time + w;
}

/* Under mu: the trainer's open step has run past fresh_late times its recent step time (a
 * transient straggler, a jittered step): the peers' fresh waits for it had better
 * end (ssp_session.c). */
static int step_late(const ring_ssp_t *s)
{
    return s->o.fresh_late > 0 && open_step_elapsed(s) > s->o.fresh_late * s->step_time;
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

/*
 * Under mu: apply a round's average (sum of its `total` steps / N) to the
 * master parameters, as the update rule says for rounds holding more than N
 * steps (ssp.h, ring_ssp_update_t). A warm-up round that went on without a
 * late step (warm) applies the mean of the steps it holds instead: that step
 * is dropped, never sent later, so sum / N would shrink lockstep's step by a
 * peer's share (backup workers average what they receive, Chen et al. 2016).
 */
static void apply_round(ring_ssp_t *s, uint64_t total, uint64_t tau_total, int warm)
{
    uint64_t n = (uint64_t)s->world, m = 1;
    double lr = lr_now(s), tau = (double)tau_total / (double)total;
    float k = 1.0f;

    if (warm && total < n)
        k = (float)n / (float)total;

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
        idle = s->step_time / 10;
        idle = idle < 0.0005 ? 0.0005 : idle > 0.02 ? 0.02 : idle;
    }
    if (s->due_wait_s > idle)
        idle = s->due_wait_s; /* the last round waited for this step: so does this one */
    s->due_wait_s = 0;
    for (;;) {
        int lock = bound_at(s, s->clock) == 0 || s->step_time == 0;
        double left = t0 + idle - ring_now();
        if (s->abandon)
            return -1;
        if (s->acc_count > 0 || s->held_count > 0 || s->trainer_done)
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
    return c[CTL_DONE] <= 1.0f && c[CTL_STOP] <= 1.0f && c[CTL_DUE] <= 1.0f &&
           c[CTL_LATE] <= 1.0f;
}

/* Under mu: move this peer's pushed steps into send for a round, after any that a
 * gathering round held back there; returns their count, *tau their staleness. */
static uint64_t take_steps(ring_ssp_t *s, uint64_t *tau)
{
    uint64_t count = s->held_count + s->acc_count;

    *tau = s->held_tau + s->acc_tau;
    if (s->acc_count > 0 && s->held_count > 0) {
        const float *a = s->acc;
        float *f = s->send;
        for (size_t i = 0; i < s->n; i++)
            f[i] += a[i];
    } else if (s->acc_count > 0) {
        float *t = s->send;
        s->send = s->acc;
        s->acc = t;
    }
    if (count > 0)
        s->in_flight = 1;
    s->acc_count = s->acc_tau = s->held_count = s->held_tau = 0;
    return count;
}

/* Under mu: the round carries steps, and every peer still training without one said
 * its step is about to land, so the next round can hold a step of every peer: on
 * every peer alike (the same control values), this round sends no gradient, changes
 * nothing, and holds this peer's steps for the next one, which waits for those steps.
 * Not when a peer without a step is not due (a straggler, a jittered step): holding
 * would only delay the others' steps, and make the views staler. Once: a step that
 * does not land then is not waited for again. */
static int gather(ring_ssp_t *s, uint64_t total, int missing, int due, uint64_t my_count,
                  uint64_t my_tau, int my_due)
{
    if (total == 0 || missing == 0 || due < missing || s->gathered_last) {
        s->gathered_last = 0;
        return 0;
    }
    s->gathered_last = 1;
    s->held_count = my_count;
    s->held_tau = my_tau;
    s->due_wait_s = my_due ? gather_window(s) : 0;
    s->st.gather_rounds++;
    return 1;
}

/* One round. Returns 1 when every peer is done (the last round), 0 to go on, -1 on failure. */
static int engine_round(ring_ssp_t *s)
{
    int n = s->world, me = s->rank, any_stop = 0, all_done = 1, skipped = 0;
    int my_due, missing = 0, due = 0;
    uint64_t my_count, my_tau, total = 0, tau_total = 0, new_min = UINT64_MAX, own = 0;
    uint64_t sum_clock = 0, live_min = UINT64_MAX, late_min = UINT64_MAX, max_clock = 0;
    int done = 0;
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
    my_count = take_steps(s, &my_tau);
    my_due = my_count == 0 && step_due(s);
    memset(s->ctl, 0, (size_t)n * CTL_SLOTS * sizeof(float));
    s->ctl[me * CTL_SLOTS + CTL_CLOCK] = (float)s->clock;
    s->ctl[me * CTL_SLOTS + CTL_COUNT] = (float)my_count;
    s->ctl[me * CTL_SLOTS + CTL_TAU] = (float)my_tau;
    s->ctl[me * CTL_SLOTS + CTL_DUE] = my_due ? 1.0f : 0.0f;
    s->ctl[me * CTL_SLOTS + CTL_LATE] = my_count == 0 && step_late(s) ? 1.0f : 0.0f;
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
        if ((uint64_t)c[CTL_CLOCK] > max_clock)
            max_clock = (uint64_t)c[CTL_CLOCK];
        done += c[CTL_DONE] > 0;
        all_done &= c[CTL_DONE] > 0;
        s->peer_wait[p] = c[CTL_WAIT];
        any_stop |= c[CTL_STOP] > 0;
        missing += c[CTL_COUNT] == 0 && c[CTL_DONE] == 0;
        due += c[CTL_COUNT] == 0 && c[CTL_DONE] == 0 && c[CTL_DUE] > 0;
        if (c[CTL_LATE] > 0 && (uint64_t)c[CTL_CLOCK] < late_min)
            late_min = (uint64_t)c[CTL_CLOCK];
    }
    if (late_min != UINT64_MAX) {
        /* the round's number as counted below: a fresh wait begun before it heeds it */
        pthread_mutex_lock(&s->mu);
        s->late_clock = late_min;
        s->late_round = s->st.rounds + 1;
        pthread_mutex_unlock(&s->mu);
    }
    if (!any_stop) {
        pthread_mutex_lock(&s->mu);
        if (gather(s, total, missing, due, my_count, my_tau, my_due)) {
            s->st.comm_s += ring_now() - t0;
            s->st.rounds++;
            s->trainer_waiting = 0; /* a trainer still held sets it again */
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            return 0;
        }
        pthread_mutex_unlock(&s->mu);
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
        /* the same control values on every peer: each sees the same warm-up round */
        apply_round(s, total, tau_total, s->o.staleness > 0 && s->o.warmup_late > 0 &&
                                         max_clock <= s->o.warmup_steps && done == 0);
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

void *ssp_engine_main(void *arg)
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
