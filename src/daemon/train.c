/*
 * train.c - the lockstep training loop of one peer.
 *
 * Every step, on every peer:
 *   1. the workload computes the gradient of its next batch (compute);
 *   2. a tiny exact allreduce of control values: stop requests, the batch
 *      loss, correct predictions and samples, and whether a peer's loss or
 *      parameters went inf or NaN (the run diverged: every peer stops with
 *      the same message). Its time is the wait for the slowest peer (a
 *      barrier), so it is reported as "wait";
 *   3. the gradient is allreduce-averaged with the configured codec
 *      (communication);
 *   4. the same SGD update on every peer: the parameters stay bitwise
 *      identical across the ring.
 * A stop request (signal, --max-time on any peer) is part of step 2's
 * values, so every peer stops after the same step; so is rank 0's decision
 * to evaluate after the step, and a checkpoint rank 0 could not write: the
 * next step's values (or, after the last step, one more exact allreduce)
 * tell every peer, rank 0's message goes to all (agree_root_failure), and
 * every peer stops naming rank 0 and why. Rank 0 then hands a snapshot of the
 * parameters to its background evaluator and the ring trains on
 * (run_eval.c); with --eval-sync every peer evaluates its share of the test
 * set instead, and they all wait for the slowest (run_evaluate_shared).
 */
#include "ring_build.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "daemon/daemon.h"
#include "daemon/progress.h"
#include "daemon/straggler.h"

/* the control values of a step, summed over the peers (exact) */
enum {
    CTL_STOP_SIGNAL, CTL_STOP_TIME, CTL_EVAL, CTL_LOSS, CTL_CORRECT, CTL_SAMPLES,
    CTL_NONFINITE, /* peers whose loss or parameters are inf or NaN: the run diverged */
    CTL_FAILED,    /* rank 0 could not write a checkpoint: every peer stops with its message */
    CTL_COUNT
};

/* give up after this many consecutive steps with an inf/NaN gradient */
#define NONFINITE_STREAK_MAX 5

/* What a peer carries from one step to the next. */
typedef struct step_state {
    int streak;               /* consecutive steps with an inf/NaN averaged gradient */
    int bad_params;           /* rank 0 found inf or NaN in the parameters (at a checkpoint) */
    int failed;               /* rank 0 could not write a checkpoint; why says why */
    char why[DAEMON_ERR_MAX];
} step_state_t;

static double training_time(const run_t *r)
{
    return r->elapsed_before + (ring_now() - r->t_start);
}

static int ring_fail(run_t *r, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "step %" PRIu64 ", %s: %s", r->step, what, ring_last_error());
    return -1;
}

/* Every peer has learned that rank 0 could not write a checkpoint: its message
 * reaches every peer, and every peer stops with it (-1). */
static int root_failed(run_t *r, const step_state_t *ss, char *err, size_t errlen)
{
    char msg[DAEMON_ERR_MAX];

    (void)agree_root_failure(r->comm, ss->why, msg, sizeof(msg));
    if (r->rank == 0)
        snprintf(err, errlen, "%s", msg);
    else
        snprintf(err, errlen, "step %" PRIu64 ": %s", r->step, msg);
    return -1;
}

/* One step. Returns 0, or -1 with err; sets r->stop when the peers agreed to stop, and
 * *eval when rank 0 asked (want_eval) for an evaluation after it.
 * ctl holds CTL_COUNT values and then one idle time per peer. */
static int train_step(run_t *r, float *ctl, int want_eval, int *eval, step_state_t *ss,
                      char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    const uint32_t *idx = shard_batch(&r->shard, r->step_in_epoch, o->batch_size);
    double loss = 0, t0, t1, t2, t3;
    int correct = 0, loss_ok;
    ring_comm_stats_t before, after;
    ring_request_t *req;
    ring_status_t st;

    t0 = ring_now();
    if (r->w->ops->train_step(r->w, idx, o->batch_size, &loss, &correct, err, errlen) != 0)
        return -1;
    straggler_step_end(o, r->rank, r->step, t0); /* --straggler, --jitter, --device-ms */
    t1 = ring_now();

    memset(ctl, 0, (CTL_COUNT + (size_t)r->world) * sizeof(float));
    ctl[CTL_STOP_SIGNAL] = signals_stop_requested() ? 1.0f : 0.0f;
    ctl[CTL_STOP_TIME] = o->max_time_s > 0 && t1 - r->t_start >= o->max_time_s ? 1.0f : 0.0f;
    ctl[CTL_EVAL] = want_eval ? 1.0f : 0.0f;
    /* an inf or NaN loss, or one so large the peers' sum overflows a float, would fail
     * the exact allreduce: it travels as a count instead */
    loss_ok = fabs(loss) < FLT_MAX / r->world;
    ctl[CTL_NONFINITE] = !loss_ok || ss->bad_params ? 1.0f : 0.0f;
    ctl[CTL_FAILED] = ss->failed ? 1.0f : 0.0f;
    ctl[CTL_LOSS] = loss_ok ? (float)loss : 0.0f;
    ctl[CTL_CORRECT] = (float)correct;
    ctl[CTL_SAMPLES] = (float)o->batch_size;
    (void)ring_comm_get_stats(r->comm, &before);
    ctl[CTL_COUNT + r->rank] = (float)before.wait_s;
    if (ring_allreduce_start_flags(r->comm, ctl, ctl, CTL_COUNT + (size_t)r->world, RING_FLOAT32,
                                   RING_SUM,
                                   TENSOR_CONTROL, RING_CALL_EXACT, &req) != RING_OK ||
        ring_request_wait(req) != RING_OK)
        return ring_fail(r, "control allreduce", err, errlen);
    if (ctl[CTL_FAILED] > 0)
        return root_failed(r, ss, err, errlen);
    if (ctl[CTL_NONFINITE] > 0) { /* every peer knows: no gradient allreduce, the same end */
        progress_diverged(r, r->step + 1, ss->bad_params ? "inf or NaN in the parameters"
                                                         : "inf or NaN in the loss", err, errlen);
        return -1;
    }
    t2 = ring_now();
    st = ring_allreduce_start_flags(r->comm, r->w->grads, r->w->grads, r->w->nparams,
                                    RING_FLOAT32, RING_AVG, TENSOR_GRADIENT, 0, &req);
    if (st == RING_OK)
        st = ring_request_wait(req);
    t3 = ring_now();
    if (st == RING_ERR_NONFINITE) {
        /* skip the update, as mixed-precision loss scaling does; a streak is a diverged run */
        r->nonfinite_steps++;
        if (++ss->streak >= NONFINITE_STREAK_MAX) {
            char what[64];
            snprintf(what, sizeof(what), "inf or NaN in the gradients %d steps in a row",
                     NONFINITE_STREAK_MAX);
            progress_diverged(r, r->step + 1, what, err, errlen);
            return -1;
        }
        if (r->chatty)
            progress_line(r, "step %" PRIu64 ": gradient holds inf or NaN on some peer; update "
                          "skipped", r->step);
    } else if (st != RING_OK) {
        return ring_fail(r, "gradient allreduce", err, errlen);
    } else {
        ss->streak = 0;
        r->sgd.lr = (float)lr_at(o->lr_schedule == LR_COSINE, o->lr, r->step, r->total_steps);
        sgd_step(&r->sgd, r->w->params, r->w->grads);
    }
    (void)ring_comm_get_stats(r->comm, &after);

    memcpy(r->peer_wait, ctl + CTL_COUNT, (size_t)r->world * sizeof(float));
    *eval = ctl[CTL_EVAL] > 0;
    r->step++;
    r->step_in_epoch++;
    r->total_samples += (uint64_t)ctl[CTL_SAMPLES];
    r->last_loss = ctl[CTL_LOSS] / (float)r->world;
    r->last_train_acc = ctl[CTL_CORRECT] / ctl[CTL_SAMPLES];
    r->compute_s += t1 - t0;
    r->wait_s += t2 - t1;
    r->comm_s += t3 - t2;
    r->wire_bytes += after.payload_bytes - before.payload_bytes;
    if (r->metrics != NULL) {
        /* r->step counts this step already; one allreduce round per step */
        metrics_step_t m = {.step = r->step, .epoch = r->epoch,
                            .time = r->elapsed_before + (ring_now() - r->t_start), .loss = loss,
                            .samples = o->batch_size,
                            .wire_bytes = after.payload_bytes - before.payload_bytes,
                            .compute_s = t1 - t0, .wait_s = t2 - t1, .comm_s = t3 - t2,
                            .blocked_s = t2 - t1, .clock = r->step - 1,
                            .min_clock = r->step - 1, .rounds = r->step};
        metrics_step(r->metrics, r->rank, &m);
    }
    if (ctl[CTL_STOP_SIGNAL] > 0)
        r->stop = STOP_SIGNAL;
    else if (ctl[CTL_STOP_TIME] > 0)
        r->stop = STOP_MAX_TIME;
    else if (o->max_steps > 0 && r->step >= (uint64_t)o->max_steps)
        r->stop = STOP_MAX_STEPS;
    return 0;
}

/* After a step (eval: the peers agreed on it) or at an epoch's end: rank 0 evaluates
 * in the background (--eval-sync: every peer its share, in-line), rank 0 checkpoints. */
static int after_step(run_t *r, int epoch_end, int eval, double *last_ckpt, step_state_t *ss,
                      char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    double now = ring_now();
    int ckpt;

    if (epoch_end)
        eval = o->eval_every.per_epoch; /* the same on every peer */
    ckpt = r->rank == 0 && o->checkpoint_dir[0] != '\0' && !ss->failed &&
           (epoch_end ? o->checkpoint_every.per_epoch
                      : every_due(&o->checkpoint_every, r->step, now, last_ckpt));
    if (eval && r->w->ntest > 0 && o->eval_sync && run_evaluate_shared(r, err, errlen) != 0)
        return -1;
    if (eval && r->w->ntest > 0 && !o->eval_sync && r->rank == 0 &&
        run_evaluate_bg(r, err, errlen) != 0)
        return -1;
    /* a diverged run's parameters are never saved: the next step's control values tell
     * every peer, and they all stop saying why */
    if (ckpt && !all_finite(r->w->params, r->w->nparams)) {
        ss->bad_params = 1;
        return 0;
    }
    /* one that cannot be written: the next step's control values tell every peer (the
     * others would otherwise see only that rank 0 left the ring), and they all stop
     * with rank 0's message */
    if (ckpt && run_checkpoint(r, 0, ss->why, sizeof(ss->why)) != 0)
        ss->failed = 1;
    return 0;
}

/* After the last step and rank 0's final checkpoint: whether rank 0 failed to write a
 * checkpoint since the last step's control values (the final one, or one after the last
 * step) reaches every peer, and they all stop with its message. */
static int train_end(run_t *r, const step_state_t *ss, char *err, size_t errlen)
{
    char where[64];

    snprintf(where, sizeof(where), "step %" PRIu64, r->step);
    return agree_root_end(r->comm, ss->failed, ss->why, where, err, errlen);
}

/* Fault injection for the tests: RING_FAULT=KIND:N:R makes rank R act after step N of a
 * run that did not resume. sigkill-at-step: it SIGKILLs itself (the restart tests: the
 * restarted run, which resumes from a checkpoint, goes on); nan-at-step: a NaN enters its
 * parameters (the divergence tests: no checkpoint may hold it). 0 when unset. */
static uint64_t fault_step(const run_t *r, const char *kind)
{
    const char *f = getenv("RING_FAULT");
    size_t len = strlen(kind);
    unsigned long long step;
    int rank;

    if (f == NULL || strncmp(f, kind, len) != 0 ||
        sscanf(f + len, ":%llu:%d", &step, &rank) != 2 || rank != r->rank || r->start_step != 0)
        return 0;
    return (uint64_t)step;
}

static int train_loop(run_t *r, float *ctl, char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    uint64_t steps_per_epoch = shard_steps_per_epoch(&r->shard, o->batch_size);
    uint64_t kill_at = fault_step(r, "sigkill-at-step");
    uint64_t nan_at = fault_step(r, "nan-at-step");
    double last_eval, last_ckpt;
    step_state_t ss = {0};

    if (steps_per_epoch == 0) {
        snprintf(err, errlen, "each peer's shard has %zu samples, fewer than --batch-size %d: "
                 "use a smaller batch or fewer peers", r->shard.len, o->batch_size);
        return -1;
    }
    /* the schedule spans the epochs; --max-steps and --max-time only interrupt it,
     * so a run stopped early and resumed follows the uninterrupted run's path */
    r->total_steps = (uint64_t)o->epochs * steps_per_epoch;
    r->t_start = last_eval = last_ckpt = ring_now();
    progress_start(r);
    /* resumed at or past --max-steps: nothing to train */
    if (o->max_steps > 0 && r->step >= (uint64_t)o->max_steps)
        r->stop = STOP_MAX_STEPS;
    while (r->stop == STOP_NONE && r->epoch < (uint64_t)o->epochs) {
        shard_set_epoch(&r->shard, r->epoch);
        while (r->stop == STOP_NONE && r->step_in_epoch < steps_per_epoch) {
            /* rank 0 decides (its clock for --eval-every DURATION); the step tells everyone */
            int want = r->rank == 0 && r->w->ntest > 0 &&
                       every_due(&o->eval_every, r->step + 1, ring_now(), &last_eval);
            int eval = 0;

            if (train_step(r, ctl, want, &eval, &ss, err, errlen) != 0)
                return -1;
            if (kill_at != 0 && r->step == kill_at)
                raise(SIGKILL);
            if (nan_at != 0 && r->step == nan_at)
                r->w->params[0] = NAN;
            if (r->rank == 0 && run_eval_poll(r, err, errlen) != 0)
                return -1;
            progress_step(r);
            if (r->stop == STOP_NONE &&
                after_step(r, 0, eval, &last_ckpt, &ss, err, errlen) != 0)
                return -1;
        }
        if (r->step_in_epoch >= steps_per_epoch) { /* also a resume into a shorter epoch */
            r->epoch++;
            r->step_in_epoch = 0;
            if (r->stop == STOP_NONE && r->epoch < (uint64_t)o->epochs &&
                after_step(r, 1, 0, &last_ckpt, &ss, err, errlen) != 0)
                return -1;
        }
    }
    if (r->stop == STOP_NONE)
        r->stop = STOP_DONE;
    /* the end: every peer evaluates the final parameters (its share), rank 0 writes the
     * final checkpoint. With --eval-sync test_step is the same everywhere; otherwise only
     * rank 0 has one, and it is never this step: snapshots are taken only after steps
     * that more steps follow */
    if (r->w->ntest > 0 && (!o->eval_sync || r->test_step != r->step) &&
        run_evaluate_shared(r, err, errlen) != 0)
        return -1;
    if (r->rank == 0 && o->checkpoint_dir[0] != '\0' && !ss.failed &&
        run_checkpoint(r, 1, ss.why, sizeof(ss.why)) != 0)
        ss.failed = 1;
    return train_end(r, &ss, err, errlen);
}

int train_run(run_t *r, char *err, size_t errlen)
{
    float *ctl = calloc(CTL_COUNT + (size_t)r->world, sizeof(float));
    int rc;

    r->peer_wait = calloc((size_t)r->world, sizeof(float)); /* main.c frees it */
    if (ctl == NULL || r->peer_wait == NULL) {
        free(ctl);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    rc = train_loop(r, ctl, err, errlen);
    free(ctl);
    return rc;
}

int checkpoint_state(run_t *r, const ckpt_pos_t *pos, const float *params,
                     const float *velocity, int final,
                     char *path, size_t path_len, char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    char why_write[DAEMON_ERR_MAX / 2], codec[16];
    ckpt_state_t st;

    if (!all_finite(params, r->w->nparams) || !all_finite(velocity, r->w->nparams)) {
        char why[DAEMON_ERR_MAX / 2];
        progress_diverged(r, pos->step, "inf or NaN in the parameters", why, sizeof(why));
        snprintf(err, errlen, "%s; the checkpoint of step %" PRIu64 " is not written", why,
                 pos->step);
        return -1;
    }
    memset(&st, 0, sizeof(st));
    st.step = pos->step;
    st.epoch = pos->epoch;
    st.step_in_epoch = pos->step_in_epoch;
    st.seed = o->seed;
    st.total_samples = pos->total_samples;
    st.world_size = (uint32_t)r->world;
    st.batch_size = (uint32_t)o->batch_size;
    st.final = (uint32_t)final;
    st.elapsed_s = training_time(r);
    snprintf(st.workload, sizeof(st.workload), "%s", o->workload);
    snprintf(st.shape, sizeof(st.shape), "%s", r->w->shape);
    if (ring_config_get(r->cfg, "codec", codec, sizeof(codec)) != RING_OK)
        snprintf(codec, sizeof(codec), "?");
    snprintf(st.settings, sizeof(st.settings),
             "lr=%g momentum=%g weight-decay=%g batch-size=%d world-size=%d codec=%s shuffle=%s",
             o->lr, o->momentum, o->weight_decay, o->batch_size, r->world, codec,
             o->shuffle ? "on" : "off");
    st.nparams = r->w->nparams;
    st.params = (float *)params;
    st.momentum = (float *)velocity;
    if (ckpt_write(o->checkpoint_dir, &st, path, path_len, why_write, sizeof(why_write)) != 0) {
        snprintf(err, errlen, "could not write the checkpoint of step %" PRIu64
                 " (--checkpoint-dir %s): %s", pos->step, o->checkpoint_dir, why_write);
        return -1;
    }
    (void)ckpt_prune(o->checkpoint_dir, o->keep_checkpoints);
    if (r->aside_pending) { /* this run's first checkpoint is on disk: the earlier run's go */
        (void)ckpt_drop_aside(o->checkpoint_dir);
        r->aside_pending = 0;
    }
    return 0;
}

int run_checkpoint(run_t *r, int final, char *err, size_t errlen)
{
    ckpt_pos_t pos = {r->step, r->epoch, r->step_in_epoch, r->total_samples};
    char path[CKPT_PATH_MAX];
    /* the file's "final" flag tells the evaluator training is complete: not after an
     * interruption, which a later run resumes (the message still says final) */
    int complete = final && (r->stop == STOP_DONE || r->stop == STOP_MAX_STEPS);

    if (checkpoint_state(r, &pos, r->w->params, r->sgd.velocity, complete, path, sizeof(path), err, errlen) != 0)
        return -1;
    if (r->chatty && (final || r->opt->progress != PROGRESS_OFF))
        progress_line(r, "checkpoint %s (step %" PRIu64 "%s)", path, r->step,
                      final ? ", final" : "");
    return 0;
}
