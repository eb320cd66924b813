/*
 * ssp.c - bounded-staleness (SSP) and asynchronous training: the daemon's
 * trainer as a client of libringd's SSP session (include/ringd/ssp.h),
 * which runs the rounds, the clocks and the update on an engine thread.
 *
 * This file maps the daemon's options onto the session's, steps through
 * the workload (wait for the bound, compute, emulate the device, push), and
 * writes what the daemon writes: step and round metrics, rank 0's periodic
 * checkpoints of the master parameters at M (from the session's round
 * callback, on the engine thread), evaluations, progress and the summary.
 * A checkpoint rank 0 cannot write stops every peer (should_stop), and once
 * the session has ended rank 0's message reaches them all (agree_root_end).
 */
#include "ring_build.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/ssp.h>

#include "clock.h"
#include "daemon/daemon.h"
#include "daemon/progress.h"
#include "daemon/straggler.h"

/* How long the trainer waits on the bound before saying so: the session's
 * rounds fail on their own within the communicator's timeout when a peer dies. */
#define BOUND_WAIT_S 3600.0

typedef struct ssp_client {
    run_t *r;
    uint64_t ckpt_last_m;     /* rank 0: M of the last periodic checkpoint (engine thread) */
    double ckpt_last_t;
    int ckpt_failed;          /* rank 0: a checkpoint (or the final evaluation) failed,
                               * ckpt_err says why: every peer stops, naming rank 0 */
    char ckpt_err[DAEMON_ERR_MAX];
} ssp_client_t;

/* The session failed (status st, message in ring_last_error()): its error, or, when its
 * rounds kept averaging inf or NaN, a diverged run's message saying what to do. */
static void session_error(const run_t *r, ring_status_t st, char *err, size_t errlen)
{
    if (st == RING_ERR_NONFINITE)
        progress_diverged(r, r->step + 1, "inf or NaN in the averaged gradients, round after "
                          "round", err, errlen);
    else
        snprintf(err, errlen, "%s", ring_last_error());
}

/* After a step, and at the end: the engine's totals into the run's, all peers' samples
 * counted from their clocks as of the last round. */
static void take_stats(run_t *r, const ring_ssp_stats_t *st)
{
    r->wire_bytes = st->wire_bytes;
    r->total_samples = st->total_clock * (uint64_t)r->opt->batch_size;
    progress_engine_comm(st->comm_s);
}

/* Engine thread, after each round with updates: the round's metrics line and
 * rank 0's periodic checkpoint when M crossed a --checkpoint-every boundary. */
static int on_round(const ring_ssp_round_t *rd, void *arg)
{
    ssp_client_t *c = arg;
    run_t *r = c->r;
    const daemon_opts_t *o = r->opt;
    uint64_t m = rd->min_clock, spe = shard_steps_per_epoch(&r->shard, o->batch_size);

    if (r->metrics != NULL) {
        fprintf(r->metrics,
                "{\"type\":\"round\",\"rank\":%d,\"round\":%" PRIu64 ",\"steps\":%" PRIu64
                ",\"min_clock\":%" PRIu64 ",\"comm_s\":%.6f,\"idle_s\":%.6f}\n",
                r->rank, rd->round, rd->steps, m, rd->comm_s, rd->idle_s);
        fflush(r->metrics);
    }
    if (r->rank == 0 && o->checkpoint_dir[0] != '\0' && m > c->ckpt_last_m && spe > 0) {
        const every_t *e = &o->checkpoint_every;
        int due = 0;
        char path[CKPT_PATH_MAX];

        if (e->per_epoch)
            due = m / spe > c->ckpt_last_m / spe;
        else if (e->steps > 0)
            due = m / (uint64_t)e->steps > c->ckpt_last_m / (uint64_t)e->steps;
        else if (e->seconds > 0)
            due = ring_now() - c->ckpt_last_t >= e->seconds;
        /* a diverged round's parameters are not saved; the rounds that follow average
         * inf or NaN and end the run, saying so */
        if (due && !c->ckpt_failed && all_finite(rd->params, rd->count)) {
            ckpt_pos_t pos = {m, m / spe, m % spe,
                              m * (uint64_t)o->batch_size * (uint64_t)r->world};
            /* not written: every peer stops after its step (should_stop), and hears why
             * once the session ends (ssp_run); failing the session here would only
             * show them rank 0 leaving the rounds */
            if (checkpoint_state(r, &pos, rd->params, rd->velocity, 0, path, sizeof(path),
                                 c->ckpt_err, sizeof(c->ckpt_err)) != 0) {
                c->ckpt_failed = 1;
                return 0;
            }
            c->ckpt_last_m = m;
            c->ckpt_last_t = ring_now();
        }
    }
    return 0;
}

/* Engine thread, before each round: a signal, --max-time or a checkpoint rank 0 could
 * not write stops every peer. */
static int should_stop(void *arg)
{
    const ssp_client_t *c = arg;
    const run_t *r = c->r;

    return c->ckpt_failed || signals_stop_requested() ||
           (r->opt->max_time_s > 0 && ring_now() - r->t_start >= r->opt->max_time_s);
}

static void session_options(const run_t *r, ring_ssp_options_t *so, ssp_client_t *c)
{
    const daemon_opts_t *o = r->opt;
    static const ring_ssp_update_t rule[] = {[ROUND_STEPS] = RING_SSP_UPDATE_STEPS,
                                             [ROUND_MEAN] = RING_SSP_UPDATE_MEAN,
                                             [ROUND_SUM] = RING_SSP_UPDATE_SUM};

    ring_ssp_options_init(so);
    so->staleness = o->mode == MODE_ASYNC ? RING_SSP_ASYNC : o->staleness;
    /* auto: half an epoch */
    so->warmup_steps = o->warmup_steps >= 0
                           ? (uint64_t)o->warmup_steps
                           : shard_steps_per_epoch(&r->shard, o->batch_size) / 2;
    so->warmup_late = o->warmup_late;
    so->start_clock = r->step;
    so->total_steps = r->total_steps;
    if (o->budget == BUDGET_SHARED) /* the run's samples, whoever trains them */
        so->stop_at_steps = r->total_steps * (uint64_t)r->world;
    so->lr = o->lr;
    so->momentum = o->momentum;
    so->weight_decay = o->weight_decay;
    so->lr_schedule = o->lr_schedule == LR_COSINE ? RING_LR_COSINE : RING_LR_CONSTANT;
    so->update = rule[o->round_update];
    so->momentum_compensation = o->momentum_compensation;
    so->stale_lr_scale = o->stale_lr_scale;
    so->staleness_scale = o->staleness_scale;
    so->delay_compensation = o->delay_compensation;
    so->round_idle_s = o->round_idle_s;
    so->fresh_wait_s = o->fresh_wait_s;
    so->gather_s = o->gather_s;
    so->fresh_late = o->fresh_late;
    so->velocity = r->sgd.velocity; /* zeros, or a resumed run's */
    so->on_round = on_round;
    so->should_stop = should_stop;
    so->arg = c;
}

/* The trainer: steps until the epochs are done or the peers agree to stop.
 * Returns 0 when done, 1 when the peers agreed to stop, -1 on a failure of its own,
 * -2 when the session failed. */
static int trainer_loop(ring_ssp_t *s, run_t *r, char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    uint64_t spe = shard_steps_per_epoch(&r->shard, o->batch_size);
    uint64_t end = (uint64_t)o->epochs * spe;
    double last_eval = ring_now();

    if (spe == 0) {
        snprintf(err, errlen, "each peer's shard has %zu samples, fewer than --batch-size %d: "
                 "use a smaller batch or fewer peers", r->shard.len, o->batch_size);
        return -1;
    }
    if (o->budget == BUDGET_SHARED)
        end = UINT64_MAX; /* the session stops every peer when their steps add up */
    if (o->max_steps > 0 && (uint64_t)o->max_steps < end)
        end = (uint64_t)o->max_steps;
    while (r->step < end) {
        ring_ssp_step_t step;
        ring_ssp_stats_t st;
        ring_status_t rs;
        double t1, t2, loss = 0;
        int correct = 0;
        const uint32_t *idx;
        metrics_step_t line;

        if (r->step_in_epoch >= spe) {
            r->epoch++;
            r->step_in_epoch = 0;
            /* rank 0 evaluates its latest copy of the parameters; rounds go on meanwhile */
            if (r->rank == 0 && r->w->ntest > 0 && o->eval_every.per_epoch &&
                r->epoch < (uint64_t)o->epochs && run_evaluate_bg(r, err, errlen) != 0)
                return -1;
        }
        shard_set_epoch(&r->shard, r->epoch);
        /* the bound: every peer's steps below c - S are in the parameters */
        rs = ring_ssp_wait(s, BOUND_WAIT_S, &step);
        if (rs == RING_ERR_CANCELED)
            return 1;
        if (rs != RING_OK) {
            session_error(r, rs, err, errlen);
            return -2;
        }
        t1 = ring_now();
        idx = shard_batch(&r->shard, r->step_in_epoch, o->batch_size);
        if (r->w->ops->train_step(r->w, idx, o->batch_size, &loss, &correct, err, errlen) != 0)
            return -1;
        straggler_step_end(o, r->rank, step.clock, t1); /* --straggler, --jitter, --device-ms */
        t2 = ring_now();
        rs = ring_ssp_push(s, r->w->grads);
        if (rs != RING_OK) {
            session_error(r, rs, err, errlen);
            return -2;
        }
        (void)ring_ssp_get_stats(s, &st);
        take_stats(r, &st);
        /* this peer's steps, as the lockstep lines, the progress and the evaluations
         * count them: the clock runs ahead after a late warm-up step is left out */
        line = (metrics_step_t){.step = r->step + 1, .epoch = r->epoch,
                                .time = r->elapsed_before + (t2 - r->t_start), .loss = loss,
                                .samples = o->batch_size, .wire_bytes = st.wire_bytes,
                                .compute_s = t2 - t1, .wait_s = step.blocked_s + step.fresh_s,
                                .comm_s = st.comm_s, .blocked_s = step.blocked_s,
                                .clock = step.clock, .min_clock = step.min_clock,
                                .tau = step.tau, .rounds = st.rounds};
        if (r->metrics != NULL)
            metrics_step(r->metrics, r->rank, &line);
        r->step++;
        r->step_in_epoch++;
        r->last_loss = loss;
        r->last_train_acc = (double)correct / o->batch_size;
        r->compute_s += t2 - t1;
        r->wait_s += step.blocked_s;
        progress_step(r);
        /* rank 0 evaluates its own view between steps; the rounds go on meanwhile */
        if (r->rank == 0 && r->w->ntest > 0 && r->step < end &&
            every_due(&o->eval_every, r->step, ring_now(), &last_eval) &&
            run_evaluate_bg(r, err, errlen) != 0) /* a snapshot, in the background */
            return -1;
        if (r->rank == 0 && run_eval_poll(r, err, errlen) != 0)
            return -1;
    }
    return 0;
}

static void print_hist(const char *label, const char *var, const uint64_t *hist)
{
    uint64_t steps = 0;

    for (int k = 0; k < RING_SSP_TAU_BINS; k++)
        steps += hist[k];
    printf("  %-20s", label);
    for (int k = 0; k < RING_SSP_TAU_BINS; k++)
        if (hist[k] > 0)
            printf(" %s=%d%s: %.1f%%", var, k, k == RING_SSP_TAU_BINS - 1 ? "+" : "",
                   100.0 * (double)hist[k] / (double)(steps ? steps : 1));
    printf("\n");
}

/* finish_s: the trainer's wait for the other peers to finish, after its last step */
static void print_summary_extra(const run_t *r, ring_ssp_t *s, double finish_s)
{
    ring_ssp_stats_t st;
    float *wait = calloc((size_t)r->world, sizeof(float));
    double wall = ring_now() - r->t_start;

    (void)ring_ssp_get_stats(s, &st);
    /* how the rounds merged steps: the "gradient allreduces" of the bytes line */
    printf("  %-20s %" PRIu64 ", of which %" PRIu64 " carried steps: %" PRIu64 " steps of all "
           "peers, %.2f per round; %" PRIu64 " waited for a step about to land "
           "(--round-gather)\n", "rounds", st.rounds, st.rounds_applied, st.contributions,
           st.rounds_applied ? (double)st.contributions / (double)st.rounds_applied : 0.0,
           st.gather_rounds);
    /* tau counts from the slowest peer; lag is this peer's own steps still on their way
     * into the parameters: tau - lag is how far the slowest peer trails this one */
    print_hist(r->rank == 0 ? "staleness (rank 0)" : "staleness (this rank)", "tau", st.tau_hist);
    print_hist("own steps in flight", "lag", st.lag_hist);
    printf("  %-20s %.1f s (%.1f %% of the wall time), then %.1f s waiting for the others to "
           "finish: the wait for peers above\n", "blocked on the bound", r->wait_s - finish_s,
           100 * (r->wait_s - finish_s) / (wall > 0 ? wall : 1e-9), finish_s);
    printf("  %-20s %.1f s (%.1f %% of the wall time): rounds about to bring the peers' last "
           "steps (--fresh-wait); %" PRIu64 " waits ended early, a peer waited for was late\n",
           "held for freshness", st.fresh_s, 100 * st.fresh_s / (wall > 0 ? wall : 1e-9),
           st.fresh_cut);
    if (r->opt->warmup_late > 0)
        printf("  %-20s %" PRIu64 " of this rank's warm-up steps: still computing after %g step "
               "times, left out of their rounds (--warmup-late)\n", "dropped as late",
               st.late_steps, r->opt->warmup_late);
    if (wait != NULL && ring_ssp_peer_wait(s, wait, r->world) == RING_OK)
        progress_peer_wait(r, wait);
    free(wait);
}

int ssp_run(run_t *r, char *err, size_t errlen)
{
    ssp_client_t c;
    ring_ssp_options_t so;
    ring_ssp_t *s = NULL;
    ring_ssp_stats_t st;
    ring_comm_stats_t before, after;
    ring_status_t fs;
    double finish_s;
    char where[64];
    int rc, stopped;

    memset(&c, 0, sizeof(c));
    c.r = r;
    c.ckpt_last_m = r->step;
    c.ckpt_last_t = ring_now();
    r->total_steps = (uint64_t)r->opt->epochs *
                     shard_steps_per_epoch(&r->shard, r->opt->batch_size);
    session_options(r, &so, &c);
    (void)ring_comm_get_stats(r->comm, &before);
    if (ring_ssp_open(r->comm, r->w->params, r->w->nparams, &so, &s) != RING_OK) {
        snprintf(err, errlen, "the SSP session: %s", ring_last_error());
        return -1;
    }
    /* all peers' samples follow their clocks, which the session starts at r->step each */
    r->total_samples = r->step * (uint64_t)r->world * (uint64_t)r->opt->batch_size;
    r->t_start = ring_now();
    progress_start(r);
    rc = trainer_loop(s, r, err, errlen);
    stopped = rc == 1;
    if (rc == -1) {
        ring_ssp_close(s); /* leaves the rounds: the peers fail, naming this one */
        return -1;
    }
    /* serve rounds until every peer is done; the final parameters are identical everywhere.
     * This peer waits for the others meanwhile: its wait for peers */
    finish_s = ring_now();
    fs = ring_ssp_finish(s, BOUND_WAIT_S);
    finish_s = ring_now() - finish_s;
    r->wait_s += finish_s;
    if (fs != RING_OK) {
        if (c.ckpt_err[0] != '\0')
            snprintf(err, errlen, "%s", c.ckpt_err);
        else if (rc != -2)
            session_error(r, fs, err, errlen);
        ring_ssp_close(s);
        return -1;
    }
    (void)ring_ssp_read(s, NULL, r->sgd.velocity);
    (void)ring_ssp_get_stats(s, &st);
    take_stats(r, &st);
    r->nonfinite_steps += st.nonfinite_steps;
    /* the engine has ended (finish joins it): the communicator's counters are still. Every
     * round ran one control allreduce, and a gradient allreduce when it carried steps */
    (void)ring_comm_get_stats(r->comm, &after);
    progress_gradient_allreduces(after.allreduces - before.allreduces >= st.rounds
                                     ? after.allreduces - before.allreduces - st.rounds
                                     : st.rounds_applied);
    if (signals_stop_requested())
        r->stop = STOP_SIGNAL;
    else if (stopped && r->opt->max_time_s > 0 &&
             ring_now() - r->t_start >= r->opt->max_time_s)
        r->stop = STOP_MAX_TIME;
    else if (stopped && st.stop_at_reached)
        r->stop = STOP_DONE; /* the shared budget: the peers' steps added up */
    else if (stopped)
        r->stop = STOP_PEER;
    else if (r->opt->max_steps > 0 && r->step >= (uint64_t)r->opt->max_steps)
        r->stop = STOP_MAX_STEPS;
    else
        r->stop = STOP_DONE;
    /* the last epoch ended with the last step */
    if (r->step_in_epoch >= shard_steps_per_epoch(&r->shard, r->opt->batch_size)) {
        r->epoch++;
        r->step_in_epoch = 0;
    }
    /* rank 0's final evaluation and checkpoint (not after a checkpoint that failed);
     * whether it failed, at them or before, reaches every peer */
    if (r->rank == 0 && !c.ckpt_failed &&
        ((r->w->ntest > 0 && r->test_step != r->step &&
          run_evaluate(r, c.ckpt_err, sizeof(c.ckpt_err)) != 0) ||
         (r->opt->checkpoint_dir[0] != '\0' &&
          run_checkpoint(r, 1, c.ckpt_err, sizeof(c.ckpt_err)) != 0)))
        c.ckpt_failed = 1;
    snprintf(where, sizeof(where), "after step %" PRIu64, r->step);
    rc = agree_root_end(r->comm, c.ckpt_failed, c.ckpt_err, where, err, errlen);
    if (rc == 0 && r->chatty) {
        progress_summary(r);
        print_summary_extra(r, s, finish_s);
    }
    ring_ssp_close(s);
    return rc;
}
