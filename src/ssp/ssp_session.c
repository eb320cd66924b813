/*
 * ssp_session.c - bounded-staleness (SSP) and asynchronous sessions
 * (include/ringd/ssp.h): the trainer's calls (wait, push, finish), and
 * opening and closing a session; its engine thread is ssp_engine.c.
 *
 * Locking: the trainer and the engine share the accumulator, the master
 * parameters and the counters under one mutex; the engine alone calls
 * libringd on the communicator.
 */
#include "ring_build.h"

#include <inttypes.h>
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
#include "ssp_session.h"

/* Under mu: the session's error as this thread's, or RING_OK. */
static ring_status_t failed_status(const ring_ssp_t *s)
{
    return s->failed == RING_OK ? RING_OK : ring_error_copy(s->failed, s->err);
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
    w = s->step_time;
    return w == 0 ? 0 : w < 0.0005 ? 0.0005 : w > 0.1 ? 0.1 : w;
}

/* Under mu: a round that ended after the fresh wait began (round r0) said that a peer
 * whose steps step c waits for is late (a jittered step): it will not land within the
 * limit, so waiting on only makes this step later, and no fresher. */
static int waits_for_late(const ring_ssp_t *s, uint64_t c, uint64_t r0)
{
    return s->late_round != UINT64_MAX && s->late_round > r0 && s->late_clock < c;
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
    uint64_t r0 = s->st.rounds;

    if (limit <= 0 || fresh_enough(s, c))
        return 0;
    while (s->failed == RING_OK && !s->stop_all && !s->stop_asked && !s->engine_done &&
           !fresh_enough(s, c) && (left = limit - (ring_now() - t0)) > 0) {
        if (waits_for_late(s, c, r0)) {
            s->st.fresh_cut++;
            break;
        }
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
    if (s->version != s->seen_version || s->view_stale) {
        local_view(s, s->params);
        s->seen_version = s->version;
        s->view_stale = 0;
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

/* Under mu: a pushed step took dt seconds; the recent step time is the median of the
 * last STEP_TIMES (of all of them, before there are that many) */
static void note_step_time(ring_ssp_t *s, double dt)
{
    double v[STEP_TIMES];
    int n = s->step_count < STEP_TIMES ? (int)s->step_count + 1 : STEP_TIMES;

    s->step_times[s->step_count++ % STEP_TIMES] = dt;
    for (int i = 0; i < n; i++) {
        /* insertion sort: nine values */
        double x = s->step_times[i];
        int j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
    s->step_time = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

ring_status_t ring_ssp_push(ring_ssp_t *s, const float *g)
{
    uint64_t tau;
    float scale;
    float *acc;
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
    /* into the accumulator; the view (read-my-writes) is rebuilt by the next wait,
     * which rebuilds it anyway when a round lands meanwhile, as it does in lockstep */
    acc = s->acc;
    if (s->dc_base != NULL) {
        /* DC-ASGD: g + lambda g*g*(w_now - w_then) */
        float lam = (float)s->o.delay_compensation;
        const float *m = s->master, *w0 = s->dc_base;
        for (size_t i = 0; i < s->n; i++) {
            float gi = g[i] + lam * g[i] * g[i] * (m[i] - w0[i]);
            acc[i] = (s->acc_count == 0 ? 0.0f : acc[i]) + gi * scale;
        }
    } else if (s->acc_count == 0 && scale == 1.0f) {
        memcpy(acc, g, s->n * sizeof(float)); /* not 0 + g: -0.0 stays -0.0 (S = 0) */
    } else if (s->acc_count == 0) {
        for (size_t i = 0; i < s->n; i++)
            acc[i] = g[i] * scale;
    } else {
        for (size_t i = 0; i < s->n; i++)
            acc[i] += g[i] * scale;
    }
    s->view_stale = 1;
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
    s->late_clock = s->late_round = UINT64_MAX;
    s->total_clock = o->start_clock * (uint64_t)s->world;
    s->seen_version = 0;
    (void)ring_comm_get_stats(comm, &cs);
    s->wire_base = cs.payload_bytes;
    pthread_mutex_init(&s->mu, NULL);
    ring_cond_init_monotonic(&s->cv); /* a stepped wall clock must not stretch waits */
    s->sync_ready = 1;
    if (pthread_create(&s->engine, NULL, ssp_engine_main, s) != 0) {
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
