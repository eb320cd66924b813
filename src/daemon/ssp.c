/*
 * ssp.c - bounded-staleness (SSP) and asynchronous training: the trainer
 * computes gradients while an engine thread runs rounds in the background.
 *
 * Semantics (../DESIGN.md, "Rounds, clocks and staleness"): a peer's clock
 * is the number of steps it has finished. Each round is
 *   1. an exact allreduce of control values: every peer's clock (the steps
 *      its contribution covers up to), its step count and staleness sum,
 *      and its done/stop flags, each peer in its own slots, so every peer
 *      learns all of them exactly;
 *   2. when any peer contributed, an allreduce-average of the accumulators
 *      (the sum of each peer's local gradients not yet sent), with the codec;
 *   3. the same SGD update on every peer's master copy of the parameters.
 * Every peer applies the same rounds in the same order, so the master
 * parameters are bitwise identical everywhere after every round.
 *
 * M, the minimum of the clocks in the last applied round, counts the steps
 * of every peer that are in the parameters. A trainer starts step c only
 * when M >= c - S (S = --staleness; warm-up steps and S = 0 are lockstep;
 * async has no bound). With S = 0 the engine also waits for its own step
 * before a round, so each round holds exactly one step of every peer and
 * the arithmetic is that of --mode lockstep, bit for bit.
 *
 * Threads: the trainer (main thread) and the engine share the accumulator,
 * the master parameters and the counters under one mutex; the engine alone
 * calls libringd.
 */
#include "ring_build.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "daemon/daemon.h"
#include "daemon/straggler.h"

#define TENSOR_GRADIENT 1u
#define TENSOR_CONTROL 2u
#define TAU_BINS 17 /* staleness histogram: 0..15, and 16 or more */
/* give up after this many consecutive rounds with an inf/NaN average */
#define NONFINITE_STREAK_MAX 5

typedef struct ssp {
    run_t *r;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long bound;               /* S, or -1 for async */

    /* trainer -> engine (under mu) */
    float *acc;               /* local gradients not yet sent (valid when acc_count > 0) */
    uint64_t acc_count, acc_tau;
    uint64_t clock;           /* steps the trainer has finished and accumulated */
    int trainer_done;
    int in_flight;            /* send holds this peer's steps, in a round not yet applied */
    double step_ema;          /* the trainer's recent step time (seconds, moving average) */
    int trainer_failed;       /* the engine must stop (and the ring be closed) */

    /* engine -> trainer (under mu) */
    float *master;            /* parameters after the applied rounds */
    uint64_t version;         /* rounds that changed the parameters */
    uint64_t view_gen;        /* bumped when the trainers' views must be rebuilt */
    uint64_t min_clock;       /* M */
    int stop_all;             /* some peer asked to stop: finish the current step */
    int engine_done;
    int failed;
    char err[DAEMON_ERR_MAX];

    /* engine only */
    float *send;              /* the accumulator being sent (read-only during the round) */
    float *avg;               /* the round's average */
    float *ctl;               /* control values: CTL_SLOTS per peer */
    int nonfinite_streak;
    uint64_t ckpt_last_m;     /* rank 0: M of the last periodic checkpoint */
    double ckpt_last_t;
    uint64_t rounds, rounds_nonempty, contributions;
    double comm_s;            /* under mu: the trainer copies it for progress lines */
    uint64_t wire_bytes;      /* under mu */
    uint64_t wire_base;       /* payload bytes sent before the first round */
    uint64_t tau_hist[TAU_BINS];
    float *peer_wait;         /* every peer's idle time in allreduces, as of the last round */
} ssp_t;

enum { CTL_CLOCK, CTL_COUNT, CTL_TAU, CTL_DONE, CTL_STOP, CTL_WAIT, CTL_SLOTS };

/* clocks can pass 2^24, which a float cannot count exactly: two 16-bit halves
 * would do, but 2^24 steps is months of training; we refuse beyond it */
#define CLOCK_MAX ((uint64_t)1 << 24)

static void sleep_until(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts); /* the condition variable's clock (ssp_run) */
    ts.tv_sec += (time_t)seconds;
    ts.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    (void)pthread_cond_timedwait(cv, mu, &ts);
}

/* S for a step at clock c: lockstep during the warm-up */
static long bound_at(const ssp_t *s, uint64_t c)
{
    return c < (uint64_t)s->r->opt->warmup_steps ? 0 : s->bound;
}

static void engine_fail(ssp_t *s, const char *what)
{
    pthread_mutex_lock(&s->mu);
    snprintf(s->err, sizeof(s->err), "round %" PRIu64 ", %s: %s", s->rounds, what,
             ring_last_error());
    s->failed = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/*
 * Apply a round's average (sum of its steps / N) to the master parameters.
 * A round holding K = N steps is lockstep's update. With more (K > N: fast
 * peers ran ahead, or rounds are slower than steps), --round-update says:
 *   mean (default): one update with the mean over the K steps (a bigger
 *         batch: each step counts N/K; the most stable in our runs, but slow
 *         when rounds hold many steps);
 *   steps: m = round(K/N) optimizer updates, each with 1/m of the average,
 *         so momentum sees as many updates as lockstep would and every step
 *         counts fully (unstable with stale gradients unless --stale-lr-scale);
 *   sum: one update with the whole average (each step counts fully, but in
 *         one outsized step; with momentum 0.9 this diverged in our runs).
 */
static void apply_round(ssp_t *s, uint64_t total)
{
    run_t *r = s->r;
    uint64_t n = (uint64_t)r->world, m = 1;
    size_t np = r->w->nparams;
    float k = 1.0f;

    if (total > n && r->opt->round_update == ROUND_MEAN)
        k = (float)n / (float)total;
    if (total > n && r->opt->round_update == ROUND_STEPS) {
        m = (total + n / 2) / n;
        k = 1.0f / (float)m;
    }
    if (k != 1.0f)
        for (size_t i = 0; i < np; i++)
            s->avg[i] *= k;
    for (uint64_t j = 0; j < m; j++)
        sgd_step(&r->sgd, s->master, s->avg);
}

/* Rank 0's engine: a checkpoint when M crossed a --checkpoint-every boundary. */
static int engine_checkpoint(ssp_t *s, uint64_t m)
{
    run_t *r = s->r;
    const daemon_opts_t *o = r->opt;
    uint64_t spe = shard_steps_per_epoch(&r->shard, o->batch_size);
    const every_t *e = &o->checkpoint_every;
    int due = 0;
    char path[CKPT_PATH_MAX];

    if (m <= s->ckpt_last_m || spe == 0)
        return 0;
    if (e->per_epoch)
        due = m / spe > s->ckpt_last_m / spe;
    else if (e->steps > 0)
        due = m / (uint64_t)e->steps > s->ckpt_last_m / (uint64_t)e->steps;
    else if (e->seconds > 0)
        due = ring_now() - s->ckpt_last_t >= e->seconds;
    if (!due)
        return 0;
    {
        ckpt_pos_t pos = {m, m / spe, m % spe, m * (uint64_t)o->batch_size * (uint64_t)r->world};
        if (checkpoint_state(r, &pos, s->master, 0, path, sizeof(path), s->err,
                             sizeof(s->err)) != 0) {
            pthread_mutex_lock(&s->mu);
            s->failed = 1;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            return -1;
        }
    }
    s->ckpt_last_m = m;
    s->ckpt_last_t = ring_now();
    return 0;
}

/* One round. Returns 1 when every peer is done (the last round), 0 to go on, -1 on failure. */
static int engine_round(ssp_t *s)
{
    run_t *r = s->r;
    const daemon_opts_t *o = r->opt;
    int n = r->world, me = r->rank, any_stop = 0, all_done = 1;
    uint64_t my_count, my_clock, my_tau, total = 0, tau_total = 0, new_min = UINT64_MAX;
    double t0, lr, idle;
    ring_request_t *req;
    ring_comm_stats_t stats;
    int skipped = 0;
    double idle_before;

    /* take this peer's contribution: wait for the trainer's step when lockstep
     * applies, or briefly while it is computing one */
    pthread_mutex_lock(&s->mu);
    t0 = ring_now();
    /* auto: a step's time, so that on time peers all make it into the round */
    idle = o->round_idle_s >= 0 ? o->round_idle_s : s->step_ema;
    for (;;) {
        /* lockstep: every round holds one step of every peer, so wait for ours */
        int lock = bound_at(s, s->clock) == 0 || s->step_ema == 0; /* or no step timed yet */
        if (s->trainer_failed) {
            pthread_mutex_unlock(&s->mu);
            return -1;
        }
        if (s->acc_count > 0 || s->trainer_done)
            break;
        /* even when our trainer is blocked on the bound, joining at once would only
         * spin empty rounds: the round it needs comes when the late peer has its step */
        if (!lock && ring_now() - t0 >= idle)
            break;
        sleep_until(&s->cv, &s->mu, lock ? 0.05 : idle);
    }
    my_count = s->acc_count;
    my_clock = s->clock;
    my_tau = s->acc_tau;
    if (my_count > 0) {
        float *t = s->send;
        s->send = s->acc;
        s->acc = t;
        s->acc_count = s->acc_tau = 0;
        s->in_flight = 1;
    }
    memset(s->ctl, 0, (size_t)n * CTL_SLOTS * sizeof(float));
    s->ctl[me * CTL_SLOTS + CTL_CLOCK] = (float)my_clock;
    s->ctl[me * CTL_SLOTS + CTL_COUNT] = (float)my_count;
    s->ctl[me * CTL_SLOTS + CTL_TAU] = (float)my_tau;
    (void)ring_comm_get_stats(r->comm, &stats);
    s->ctl[me * CTL_SLOTS + CTL_WAIT] = (float)stats.wait_s;
    idle_before = stats.wait_s;
    s->ctl[me * CTL_SLOTS + CTL_DONE] = s->trainer_done && my_count == 0 ? 1.0f : 0.0f;
    s->ctl[me * CTL_SLOTS + CTL_STOP] =
        signals_stop_requested() ||
                (o->max_time_s > 0 && ring_now() - r->t_start >= o->max_time_s)
            ? 1.0f
            : 0.0f;
    pthread_mutex_unlock(&s->mu);

    t0 = ring_now();
    if (ring_allreduce_start_flags(r->comm, s->ctl, s->ctl, (size_t)n * CTL_SLOTS, RING_FLOAT32,
                                   RING_SUM, TENSOR_CONTROL, RING_CALL_EXACT, &req) != RING_OK ||
        ring_request_wait(req) != RING_OK) {
        engine_fail(s, "control allreduce");
        return -1;
    }
    for (int p = 0; p < n; p++) {
        const float *c = s->ctl + p * CTL_SLOTS;
        total += (uint64_t)c[CTL_COUNT];
        tau_total += (uint64_t)c[CTL_TAU];
        if ((uint64_t)c[CTL_CLOCK] < new_min)
            new_min = (uint64_t)c[CTL_CLOCK];
        all_done &= c[CTL_DONE] > 0;
        s->peer_wait[p] = c[CTL_WAIT];
        any_stop |= c[CTL_STOP] > 0;
    }
    if (total > 0) {
        ring_status_t st;
        /* a peer with nothing to send contributes zeros */
        if (my_count == 0)
            memset(s->send, 0, r->w->nparams * sizeof(float));
        /* out of place: the trainer may read send (its in-flight steps) meanwhile */
        st = ring_allreduce_start_flags(r->comm, s->send, s->avg, r->w->nparams, RING_FLOAT32,
                                        RING_AVG, TENSOR_GRADIENT, 0, &req);
        if (st == RING_OK)
            st = ring_request_wait(req);
        if (st == RING_ERR_NONFINITE) {
            /* skipped on every peer: all of them saw the flag */
            r->nonfinite_steps += total;
            total = 0;
            skipped = 1;
        } else if (st != RING_OK) {
            engine_fail(s, "gradient allreduce");
            return -1;
        }
    }
    (void)ring_comm_get_stats(r->comm, &stats);

    pthread_mutex_lock(&s->mu);
    s->comm_s += ring_now() - t0;
    s->wire_bytes = stats.payload_bytes - s->wire_base;
    if (total > 0) {
        /* the schedule follows M, the steps every peer has in the parameters */
        lr = lr_at(o->lr_schedule, o->lr, s->min_clock, r->total_steps);
        if (o->stale_lr_scale)
            lr /= 1.0 + (double)tau_total / (double)total;
        if (o->momentum_compensation) {
            double mu = 1.0 - (1.0 - o->momentum) * (1.0 + (double)tau_total / (double)total);
            r->sgd.momentum = (float)(mu > 0 ? mu : 0);
        }
        r->sgd.lr = (float)lr;
        apply_round(s, total);
        s->version++;
        s->rounds_nonempty++;
        s->contributions += total;
    }
    s->min_clock = new_min;
    s->in_flight = 0;
    if (skipped) {
        /* the trainers' views hold their own dropped steps: rebuild them from master */
        s->view_gen++;
        if (++s->nonfinite_streak >= NONFINITE_STREAK_MAX) {
            snprintf(s->err, sizeof(s->err), "round %" PRIu64 ": the averaged gradient held inf "
                     "or NaN %d rounds in a row: training diverged (try a smaller --lr)",
                     s->rounds, NONFINITE_STREAK_MAX);
            s->failed = 1;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            return -1;
        }
    } else if (total > 0) {
        s->nonfinite_streak = 0;
    }
    s->rounds++;
    s->stop_all |= any_stop;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    /* rank 0: periodic checkpoints of the master parameters at M (only this thread
     * changes them, so no lock is needed to read them) */
    if (r->rank == 0 && o->checkpoint_dir[0] != '\0' && engine_checkpoint(s, new_min) != 0)
        return -1;
    if (r->metrics != NULL)
        fprintf(r->metrics,
                "{\"type\":\"round\",\"rank\":%d,\"round\":%" PRIu64 ",\"steps\":%" PRIu64
                ",\"min_clock\":%" PRIu64 ",\"comm_s\":%.6f,\"idle_s\":%.6f}\n",
                r->rank, s->rounds, total, new_min, ring_now() - t0,
                stats.wait_s - idle_before);
    if (r->metrics != NULL)
        fflush(r->metrics);
    return all_done && total == 0 ? 1 : 0;
}

static void *engine_main(void *arg)
{
    ssp_t *s = arg;
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

/* The local learning rate: a peer's own step counts 1/N of a round's average. */
static float local_lr(const ssp_t *s)
{
    return (float)(lr_at(s->r->opt->lr_schedule, s->r->opt->lr, s->min_clock,
                         s->r->total_steps) /
                   s->r->world);
}

/*
 * The trainer's parameters (under mu): the master copy minus this peer's
 * own gradients that no applied round holds yet (accumulated, or in the
 * round under way), as SSP's read-my-writes asks; without it a fast peer
 * would take several steps from the same point and its summed gradients
 * would overshoot. Momentum is left out of this local view. With nothing
 * pending, an exact copy: S = 0 stays bit for bit lockstep.
 */
static void local_view(const ssp_t *s, float *params)
{
    size_t n = s->r->w->nparams;
    float lr = local_lr(s);
    const float *m = s->master, *a = s->acc, *f = s->send;

    /* one pass over the arrays: for 25M parameters each pass is ~100 MB */
    if (s->acc_count > 0 && s->in_flight)
        for (size_t i = 0; i < n; i++)
            params[i] = m[i] - lr * a[i] - lr * f[i];
    else if (s->acc_count > 0)
        for (size_t i = 0; i < n; i++)
            params[i] = m[i] - lr * a[i];
    else if (s->in_flight)
        for (size_t i = 0; i < n; i++)
            params[i] = m[i] - lr * f[i];
    else
        memcpy(params, m, n * sizeof(float));
}

/* The trainer: steps until the epochs are done or the peers agree to stop. */
static int trainer_loop(ssp_t *s, char *err, size_t errlen)
{
    run_t *r = s->r;
    const daemon_opts_t *o = r->opt;
    uint64_t spe = shard_steps_per_epoch(&r->shard, o->batch_size), seen_version = UINT64_MAX;
    uint64_t end = (uint64_t)o->epochs * spe;
    double last_eval = ring_now();

    if (spe == 0) {
        snprintf(err, errlen, "each peer's shard has %zu samples, fewer than --batch-size %d: "
                 "use a smaller batch or fewer peers", r->shard.len, o->batch_size);
        return -1;
    }
    if (o->max_steps > 0 && (uint64_t)o->max_steps < end)
        end = (uint64_t)o->max_steps;
    if (end >= CLOCK_MAX) {
        snprintf(err, errlen, "%" PRIu64 " steps: bounded and async modes count clocks up to "
                 "2^24 steps", end);
        return -1;
    }
    while (r->step < end) {
        uint64_t c = r->step, min_at_start;
        double t0, t1, t2, blocked, loss = 0;
        long b;
        int correct = 0, waited;
        const uint32_t *idx;
        metrics_step_t line;

        if (r->step_in_epoch >= spe) {
            r->epoch++;
            r->step_in_epoch = 0;
            /* rank 0 evaluates its latest copy of the parameters; rounds go on meanwhile */
            if (r->rank == 0 && r->w->ntest > 0 && o->eval_every.per_epoch &&
                r->epoch < (uint64_t)o->epochs && run_evaluate(r, err, errlen) != 0)
                return -1;
        }
        shard_set_epoch(&r->shard, r->epoch);
        /* the bound: every peer's steps below c - S are in the parameters */
        t0 = ring_now();
        pthread_mutex_lock(&s->mu);
        b = bound_at(s, c);
        waited = 0;
        while (!s->failed && !s->stop_all && !s->engine_done && b >= 0 &&
               s->min_clock + (uint64_t)b < c) {
            waited = 1;
            sleep_until(&s->cv, &s->mu, 0.05);
        }
        if (s->failed || s->stop_all || s->engine_done) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        if (s->version + s->view_gen != seen_version) {
            local_view(s, r->w->params);
            seen_version = s->version + s->view_gen;
        }
        min_at_start = s->min_clock;
        pthread_mutex_unlock(&s->mu);
        t1 = ring_now();
        blocked = waited ? t1 - t0 : 0; /* the bound held us, not the lock */

        idx = shard_batch(&r->shard, r->step_in_epoch, o->batch_size);
        if (r->w->ops->train_step(r->w, idx, o->batch_size, &loss, &correct, err, errlen) != 0)
            return -1;
        straggler_step_end(o, r->rank, c, t1); /* --straggler, --jitter, --device-ms */
        t2 = ring_now();

        pthread_mutex_lock(&s->mu);
        {
            /* tau: steps of the slowest peer missing from the parameters this step used */
            uint64_t tau = c - min_at_start;
            float scale = o->staleness_scale ? 1.0f / (1.0f + (float)tau) : 1.0f;
            float *acc = s->acc, *g = r->w->grads;
            size_t n = r->w->nparams;

            float *view = r->w->params, lr = local_lr(s) * scale;

            /* one pass: into the accumulator, and read-my-writes, this peer's next step
             * already sees its own update (for 25M parameters each pass is ~100 MB) */
            if (s->acc_count == 0 && scale == 1.0f)
                for (size_t i = 0; i < n; i++) {
                    acc[i] = g[i]; /* copy, not 0 + g: -0.0 stays -0.0 */
                    view[i] -= lr * g[i];
                }
            else if (s->acc_count == 0)
                for (size_t i = 0; i < n; i++) {
                    acc[i] = g[i] * scale;
                    view[i] -= lr * g[i];
                }
            else
                for (size_t i = 0; i < n; i++) {
                    acc[i] += g[i] * scale;
                    view[i] -= lr * g[i];
                }
            s->acc_count++;
            s->acc_tau += tau;
            s->step_ema = s->step_ema > 0 ? 0.8 * s->step_ema + 0.2 * (t2 - t1) : t2 - t1;
            s->clock = c + 1;
            s->tau_hist[tau < TAU_BINS - 1 ? tau : TAU_BINS - 1]++;
            r->comm_s = s->comm_s;
            r->wire_bytes = s->wire_bytes;
            pthread_cond_broadcast(&s->cv);
            /* the line is written after the lock: the engine thread never waits on a file */
            line = (metrics_step_t){.step = c + 1, .epoch = r->epoch,
                                    .time = r->elapsed_before + (t2 - r->t_start), .loss = loss,
                                    .samples = o->batch_size, .wire_bytes = s->wire_bytes,
                                    .compute_s = t2 - t1, .wait_s = blocked,
                                    .comm_s = s->comm_s, .blocked_s = blocked, .clock = c,
                                    .min_clock = min_at_start, .tau = tau, .rounds = s->rounds};
        }
        pthread_mutex_unlock(&s->mu);
        if (r->metrics != NULL)
            metrics_step(r->metrics, r->rank, &line);
        r->step++;
        r->step_in_epoch++;
        r->total_samples += (uint64_t)o->batch_size;
        r->last_loss = loss;
        r->last_train_acc = (double)correct / o->batch_size;
        r->compute_s += t2 - t1;
        r->wait_s += blocked;
        progress_step(r);
        /* rank 0 evaluates its own view between steps; the rounds go on meanwhile */
        if (r->rank == 0 && r->w->ntest > 0 && r->step < end &&
            every_due(&o->eval_every, r->step, ring_now(), &last_eval)) {
            pthread_mutex_lock(&s->mu);
            local_view(s, r->w->params);
            pthread_mutex_unlock(&s->mu);
            if (run_evaluate(r, err, errlen) != 0)
                return -1;
        }
    }
    return 0;
}

static void print_summary_extra(const ssp_t *s)
{
    const run_t *r = s->r;
    uint64_t steps = 0;

    for (int k = 0; k < TAU_BINS; k++)
        steps += s->tau_hist[k];
    printf("  %-20s %" PRIu64 " (%" PRIu64 " with updates), %.2f steps per updating round\n",
           "rounds", s->rounds, s->rounds_nonempty,
           s->rounds_nonempty ? (double)s->contributions / (double)s->rounds_nonempty : 0.0);
    printf("  %-20s", r->rank == 0 ? "staleness (rank 0)" : "staleness (this rank)");
    for (int k = 0; k < TAU_BINS; k++)
        if (s->tau_hist[k] > 0)
            printf(" tau=%d%s: %.1f%%", k, k == TAU_BINS - 1 ? "+" : "",
                   100.0 * (double)s->tau_hist[k] / (double)(steps ? steps : 1));
    printf("\n  %-20s %.1f s (%.1f %% of the run)\n", "blocked on the bound", r->wait_s,
           100 * r->wait_s / (ring_now() - r->t_start));
    progress_peer_wait(r, s->peer_wait);
}

int ssp_run(run_t *r, char *err, size_t errlen)
{
    ssp_t s;
    pthread_t engine;
    size_t bytes = r->w->nparams * sizeof(float);
    int rc = 0;

    memset(&s, 0, sizeof(s));
    s.r = r;
    s.bound = r->opt->mode == MODE_ASYNC ? -1 : r->opt->staleness;
    s.acc = malloc(bytes);
    s.send = malloc(bytes);
    s.avg = malloc(bytes);
    s.master = malloc(bytes);
    s.ctl = malloc((size_t)r->world * CTL_SLOTS * sizeof(float));
    s.peer_wait = calloc((size_t)r->world, sizeof(float));
    if (s.acc == NULL || s.send == NULL || s.avg == NULL || s.master == NULL || s.ctl == NULL ||
        s.peer_wait == NULL) {
        snprintf(err, errlen, "out of memory for the round buffers (4 x %zu bytes)", bytes);
        rc = -1;
        goto out;
    }
    memcpy(s.master, r->w->params, bytes);
    s.clock = s.min_clock = s.ckpt_last_m = r->step;
    s.ckpt_last_t = ring_now();
    {
        ring_comm_stats_t stats;
        (void)ring_comm_get_stats(r->comm, &stats);
        s.wire_base = stats.payload_bytes;
    }
    pthread_mutex_init(&s.mu, NULL);
    {
        /* timed waits on the monotonic clock: a stepped wall clock must not stretch them */
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s.cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    r->total_steps = (uint64_t)r->opt->epochs *
                     shard_steps_per_epoch(&r->shard, r->opt->batch_size);
    r->t_start = ring_now();
    progress_start(r);
    if (pthread_create(&engine, NULL, engine_main, &s) != 0) {
        snprintf(err, errlen, "cannot start the engine thread");
        rc = -1;
        goto out_sync;
    }
    rc = trainer_loop(&s, err, errlen);
    pthread_mutex_lock(&s.mu);
    s.trainer_done = 1;
    s.trainer_failed = rc != 0;
    pthread_cond_broadcast(&s.cv);
    pthread_mutex_unlock(&s.mu);
    pthread_join(engine, NULL);
    if (s.failed && rc == 0) {
        snprintf(err, errlen, "%s", s.err);
        rc = -1;
    }
    if (rc == 0) {
        memcpy(r->w->params, s.master, bytes);
        r->comm_s = s.comm_s;
        if (signals_stop_requested())
            r->stop = STOP_SIGNAL;
        else if (s.stop_all && r->opt->max_time_s > 0 &&
                 ring_now() - r->t_start >= r->opt->max_time_s)
            r->stop = STOP_MAX_TIME;
        else if (s.stop_all)
            r->stop = STOP_PEER;
        if (r->stop == STOP_NONE)
            r->stop = r->opt->max_steps > 0 && r->step >= (uint64_t)r->opt->max_steps
                          ? STOP_MAX_STEPS
                          : STOP_DONE;
        /* the last epoch ended with the last step */
        if (r->step_in_epoch >= shard_steps_per_epoch(&r->shard, r->opt->batch_size)) {
            r->epoch++;
            r->step_in_epoch = 0;
        }
        if (r->rank == 0) {
            double t0 = ring_now();
            if (r->w->ntest > 0 && r->test_step != r->step && run_evaluate(r, err, errlen) != 0)
                rc = -1;
            else if (r->opt->checkpoint_dir[0] != '\0' && run_checkpoint(r, 1, err, errlen) != 0)
                rc = -1;
            r->other_s += ring_now() - t0;
        }
        if (rc == 0 && r->chatty) {
            progress_summary(r);
            print_summary_extra(&s);
        }
    }
out_sync:
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
out:
    free(s.acc);
    free(s.send);
    free(s.avg);
    free(s.master);
    free(s.ctl);
    free(s.peer_wait);
    return rc;
}
