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
 *
 * With --elastic, a collective that fails naming a lost peer (the step's two,
 * an in-line evaluation's, the final ones) returns LOST, and recover() has
 * the survivors shrink the ring and go on from the same step (elastic.h).
 * So that they can, the loop is flat: each turn first settles what the last
 * step made due (settle: the in-line evaluation, then rank 0's checkpoint),
 * then an epoch's end, then the end of the run or the next step; every
 * survivor re-enters it at the top in the same place.
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
#include "daemon/elastic.h"
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
    int ckpt_owed;            /* rank 0: a checkpoint is due (settle writes it) */
    uint64_t final_ckpt;      /* rank 0: 1 + the step of the final checkpoint written */
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

/* a collective of the loop failed: with --elastic the ring may shrink past a lost peer */
#define LOST 1

/* One step between its exchange and its update; and where a failed collective was. */
typedef struct step_io {
    double loss, t0, t1, t2, t3;
    int ctl_world;            /* the peers whose control values ctl holds */
    int recovered;            /* the update came from a survivor after a change (--elastic) */
    ring_comm_stats_t before;
    int phase;                /* LOST: where (enum elastic_phase) */
    double t_call;            /* LOST: when the failed call began */
} step_io_t;

/* A step's exchange: the gradient of the next batch, the control values (ctl holds
 * CTL_COUNT values and then one idle time per peer) and the gradient allreduce. 0 (*gst:
 * RING_OK, or RING_ERR_NONFINITE: skip the update), -1 with err (the run stops), or LOST
 * with err (a collective failed; io->phase says which). */
static int step_exchange(run_t *r, float *ctl, int want_eval, step_state_t *ss, step_io_t *io,
                         ring_status_t *gst, char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    const uint32_t *idx = shard_batch(&r->shard, r->step_in_epoch, o->batch_size);
    int correct = 0, loss_ok;
    ring_request_t *req;
    ring_status_t st;

    io->loss = 0;
    io->recovered = 0;
    io->t0 = ring_now();
    if (r->w->ops->train_step(r->w, idx, o->batch_size, &io->loss, &correct, err, errlen) != 0)
        return -1;
    straggler_step_end(o, r->rank, r->step, io->t0); /* --straggler, --jitter, --device-ms */
    io->t1 = ring_now();

    memset(ctl, 0, (CTL_COUNT + (size_t)r->world) * sizeof(float));
    ctl[CTL_STOP_SIGNAL] = signals_stop_requested() ? 1.0f : 0.0f;
    ctl[CTL_STOP_TIME] = o->max_time_s > 0 && io->t1 - r->t_start >= o->max_time_s ? 1.0f : 0.0f;
    ctl[CTL_EVAL] = want_eval ? 1.0f : 0.0f;
    /* an inf or NaN loss, or one so large the peers' sum overflows a float, would fail
     * the exact allreduce: it travels as a count instead */
    loss_ok = fabs(io->loss) < FLT_MAX / r->world;
    ctl[CTL_NONFINITE] = !loss_ok || ss->bad_params ? 1.0f : 0.0f;
    ctl[CTL_FAILED] = ss->failed ? 1.0f : 0.0f;
    ctl[CTL_LOSS] = loss_ok ? (float)io->loss : 0.0f;
    ctl[CTL_CORRECT] = (float)correct;
    ctl[CTL_SAMPLES] = (float)o->batch_size;
    (void)ring_comm_get_stats(r->comm, &io->before);
    ctl[CTL_COUNT + r->rank] = (float)io->before.wait_s;
    io->phase = EL_CONTROL;
    io->t_call = io->t1;
    if (ring_allreduce_start_flags(r->comm, ctl, ctl, CTL_COUNT + (size_t)r->world, RING_FLOAT32,
                                   RING_SUM,
                                   TENSOR_CONTROL, RING_CALL_EXACT, &req) != RING_OK ||
        ring_request_wait(req) != RING_OK)
        return ring_fail(r, "control allreduce", err, errlen), LOST;
    io->ctl_world = r->world;
    elastic_control_done(r, r->world);
    if (ctl[CTL_FAILED] > 0)
        return root_failed(r, ss, err, errlen);
    if (ctl[CTL_NONFINITE] > 0) { /* every peer knows: no gradient allreduce, the same end */
        progress_diverged(r, r->step + 1, ss->bad_params ? "inf or NaN in the parameters"
                                                         : "inf or NaN in the loss", err, errlen);
        return -1;
    }
    io->t2 = io->t_call = ring_now();
    io->phase = EL_GRADIENT;
    st = ring_allreduce_start_flags(r->comm, r->w->grads, r->w->grads, r->w->nparams,
                                    RING_FLOAT32, RING_AVG, TENSOR_GRADIENT, 0, &req);
    if (st == RING_OK)
        st = ring_request_wait(req);
    io->t3 = ring_now();
    if (st != RING_OK && st != RING_ERR_NONFINITE)
        return ring_fail(r, "gradient allreduce", err, errlen), LOST;
    *gst = st;
    return 0;
}

/* The step's update with the averaged gradient in r->w->grads (gst RING_ERR_NONFINITE:
 * skipped, as mixed-precision loss scaling does), its counters, figures and metrics line.
 * Sets r->stop when the peers agreed to stop, and *eval when rank 0 asked for an
 * evaluation after it. 0, or -1 with err (a streak of inf/NaN gradients). */
static int step_apply(run_t *r, const float *ctl, const step_io_t *io, ring_status_t gst,
                      int *eval, step_state_t *ss, char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    ring_comm_stats_t after;
    uint64_t sent;

    if (gst == RING_ERR_NONFINITE) {
        /* a streak is a diverged run */
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
    } else {
        ss->streak = 0;
        r->sgd.lr = (float)elastic_lr(r);
        sgd_step(&r->sgd, r->w->params, r->w->grads);
    }
    (void)ring_comm_get_stats(r->comm, &after);
    /* after a change the counters are another ring's */
    sent = io->recovered ? 0 : after.payload_bytes - io->before.payload_bytes;

    if (io->ctl_world == r->world)
        memcpy(r->peer_wait, ctl + CTL_COUNT, (size_t)r->world * sizeof(float));
    *eval = ctl[CTL_EVAL] > 0;
    r->step++;
    r->step_in_epoch++;
    elastic_step_applied(r, gst == RING_ERR_NONFINITE);
    r->total_samples += (uint64_t)ctl[CTL_SAMPLES];
    r->last_loss = ctl[CTL_LOSS] / (float)io->ctl_world;
    r->last_train_acc = ctl[CTL_CORRECT] / ctl[CTL_SAMPLES];
    r->compute_s += io->t1 - io->t0;
    r->wait_s += io->t2 - io->t1;
    r->comm_s += io->t3 - io->t2;
    r->wire_bytes += sent;
    if (r->metrics != NULL) {
        /* r->step counts this step already; one allreduce round per step */
        metrics_step_t m = {.step = r->step, .epoch = r->epoch,
                            .time = r->elapsed_before + (ring_now() - r->t_start),
                            .loss = io->loss, .samples = o->batch_size, .wire_bytes = sent,
                            .compute_s = io->t1 - io->t0, .wait_s = io->t2 - io->t1,
                            .comm_s = io->t3 - io->t2, .blocked_s = io->t2 - io->t1,
                            .clock = r->step - 1, .min_clock = r->step - 1, .rounds = r->step};
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

/* After a step (eval: the peers agreed on it) or at an epoch's end: rank 0 hands a snapshot
 * to its background evaluator; an in-line evaluation (--eval-sync: every peer its share)
 * and rank 0's checkpoint become due, for settle. */
static int after_step(run_t *r, int epoch_end, int eval, double *last_ckpt, step_state_t *ss,
                      char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    double now = ring_now();

    if (epoch_end)
        eval = o->eval_every.per_epoch; /* the same on every peer */
    if (r->rank == 0 && o->checkpoint_dir[0] != '\0' && !ss->failed &&
        (epoch_end ? o->checkpoint_every.per_epoch
                   : every_due(&o->checkpoint_every, r->step, now, last_ckpt)))
        ss->ckpt_owed = 1;
    if (eval && r->w->ntest > 0 && o->eval_sync)
        r->eval_owed = 1;
    if (eval && r->w->ntest > 0 && !o->eval_sync && r->rank == 0 &&
        run_evaluate_bg(r, err, errlen) != 0)
        return -1;
    return 0;
}

/* An evaluation every peer takes part in (phase: for the change report): 0, -1 with
 * err, or LOST (its allreduce failed). */
static int eval_shared(run_t *r, step_io_t *io, int phase, char *err, size_t errlen)
{
    int rc;

    io->phase = phase;
    io->t_call = ring_now();
    rc = run_evaluate_shared(r, err, errlen);
    return rc == 0 ? 0 : rc == 1 ? LOST : -1;
}

/* What after_step made due, in this order: the in-line evaluation, then the checkpoint.
 * 0, -1 with err, or LOST (the evaluation's allreduce failed). */
static int settle(run_t *r, step_state_t *ss, step_io_t *io, char *err, size_t errlen)
{
    if (r->eval_owed) {
        int rc = eval_shared(r, io, EL_EVAL, err, errlen);

        if (rc != 0)
            return rc;
        r->eval_owed = 0;
    }
    if (!ss->ckpt_owed)
        return 0;
    ss->ckpt_owed = 0;
    /* a diverged run's parameters are never saved: the next step's control values tell
     * every peer, and they all stop saying why */
    if (!all_finite(r->w->params, r->w->nparams)) {
        ss->bad_params = 1;
        return 0;
    }
    /* one that cannot be written: the next step's control values tell every peer (the
     * others would otherwise see only that rank 0 left the ring), and they all stop
     * with rank 0's message */
    if (run_checkpoint(r, 0, ss->why, sizeof(ss->why)) != 0)
        ss->failed = 1;
    return 0;
}

/* --elastic: the changes of the ring waiting for a completed step are finished: rank 0
 * says so (and every peer's metrics) */
static void show_changes(run_t *r)
{
    for (int n = elastic_step_done(r); n > 0; n--) {
        char line[512];

        elastic_change_line(r, n, line, sizeof(line));
        if (r->chatty)
            progress_line(r, "%s", line);
    }
}

/* After a step: rank 0's results and progress, a change of the ring finished, what is due. */
static int step_finish(run_t *r, int eval, int changed, double *last_ckpt, step_state_t *ss,
                       char *err, size_t errlen)
{
    if (r->rank == 0 && run_eval_poll(r, err, errlen) != 0)
        return -1;
    progress_step(r);
    if (changed)
        show_changes(r);
    if (r->stop == STOP_NONE && after_step(r, 0, eval, last_ckpt, ss, err, errlen) != 0)
        return -1;
    return 0;
}

/* An epoch ended with the last step (or a resume into a shorter epoch): the next one, and
 * what its end makes due. stepped: this run took a step (a stop before any, as at a resume
 * at --max-steps, leaves the counters as they are). 1 when it did, 0, -1 with err. */
static int epoch_end(run_t *r, int stepped, double *last_ckpt, step_state_t *ss, char *err,
                     size_t errlen)
{
    const daemon_opts_t *o = r->opt;

    if (r->epoch >= (uint64_t)o->epochs ||
        r->step_in_epoch < shard_steps_per_epoch(&r->shard, o->batch_size) ||
        (r->stop != STOP_NONE && !stepped))
        return 0;
    r->epoch++;
    r->step_in_epoch = 0;
    if (r->stop == STOP_NONE && r->epoch < (uint64_t)o->epochs &&
        after_step(r, 1, 0, last_ckpt, ss, err, errlen) != 0)
        return -1;
    return 1;
}

/* The end: every peer evaluates the final parameters (its share), rank 0 writes the final
 * checkpoint, and whether rank 0 failed to write a checkpoint since the last step's
 * control values reaches every peer, which all stop with its message. With --eval-sync
 * test_step is the same everywhere; otherwise only rank 0 has one, and it is never this
 * step: snapshots are taken only after steps that more steps follow. 0, -1 with err, or
 * LOST. */
static int run_end(run_t *r, step_state_t *ss, step_io_t *io, char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    char where[64];
    int rc;

    if (r->w->ntest > 0 && !r->final_done &&
        (!o->eval_sync || r->test_step != r->step || r->force_final) &&
        (rc = eval_shared(r, io, EL_FINAL_EVAL, err, errlen)) != 0)
        return rc;
    r->final_done = 1;
    if (r->rank == 0 && o->checkpoint_dir[0] != '\0' && !ss->failed &&
        ss->final_ckpt != r->step + 1) {
        ss->final_ckpt = r->step + 1;
        if (run_checkpoint(r, 1, ss->why, sizeof(ss->why)) != 0)
            ss->failed = 1;
    }
    snprintf(where, sizeof(where), "step %" PRIu64, r->step);
    io->phase = EL_END;
    io->t_call = ring_now();
    rc = agree_root_end(r->comm, ss->failed, ss->why, where, err, errlen);
    return rc == 1 ? LOST : rc;
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

/* --elastic: a collective of phase failed (err says how). Shrink past the lost peers,
 * finish or redo the interrupted step, re-deal the data (elastic.c). 0, or -1 with err. */
static int recover(run_t *r, float *ctl, step_io_t *io, int *stepped, double *last_ckpt,
                   step_state_t *ss, char *err, size_t errlen)
{
    int was0 = r->rank == 0, nonfinite, eval = 0, rc;

    if (!elastic_on(r))
        return -1;
    rc = elastic_recover(r, io->phase, io->t_call, &nonfinite, &io->ctl_world, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == EL_APPLY) { /* this peer missed the update of a step others finished */
        io->recovered = 1;
        io->t3 = ring_now();
        if (step_apply(r, ctl, io, nonfinite ? RING_ERR_NONFINITE : RING_OK, &eval, ss, err,
                       errlen) != 0 ||
            step_finish(r, eval, 0, last_ckpt, ss, err, errlen) != 0)
            return -1;
        *stepped = 1;
    }
    /* every survivor at the same place, also across an epoch's end */
    if (epoch_end(r, *stepped, last_ckpt, ss, err, errlen) < 0 ||
        elastic_commit(r, err, errlen) != 0)
        return -1;
    if (r->rank == 0 && !was0) { /* rank 0 was lost: this peer prints and checkpoints now */
        progress_chatty(r);
        if (r->opt->checkpoint_dir[0] != '\0' && !ss->failed &&
            ckpt_dir_prepare(r->opt->checkpoint_dir, ss->why, sizeof(ss->why)) != 0)
            ss->failed = 1; /* the next step's control values tell every peer */
    }
    return 0;
}

static int train_loop(run_t *r, float *ctl, char *err, size_t errlen)
{
    const daemon_opts_t *o = r->opt;
    uint64_t steps_per_epoch = shard_steps_per_epoch(&r->shard, o->batch_size);
    uint64_t kill_at = fault_step(r, "sigkill-at-step");
    uint64_t nan_at = fault_step(r, "nan-at-step");
    double last_eval, last_ckpt;
    step_state_t ss = {0};
    step_io_t io = {0};
    int stepped = 0, changed = 0, joined_now;

    if (steps_per_epoch == 0) {
        snprintf(err, errlen, "each peer's shard has %zu samples, fewer than --batch-size %d: "
                 "use a smaller batch or fewer peers", r->shard.len, o->batch_size);
        return -1;
    }
    /* the schedule spans the epochs; --max-steps and --max-time only interrupt it,
     * so a run stopped early and resumed follows the uninterrupted run's path */
    r->total_steps = (uint64_t)o->epochs * steps_per_epoch;
    r->t_start = last_eval = last_ckpt = ring_now();
    if (elastic_joined(r, err, errlen) != 0) /* a joiner gets the state */
        return -1;
    /* a joiner was admitted at the members' grow point of this step: it starts with
     * the step's exchange, where they are */
    joined_now = ring_comm_joined(r->comm);
    progress_start(r);
    /* resumed at or past --max-steps: nothing to train */
    if (o->max_steps > 0 && r->step >= (uint64_t)o->max_steps)
        r->stop = STOP_MAX_STEPS;
    for (;;) {
        ring_status_t gst = RING_OK;
        int rc, want, eval = 0;

        if (joined_now) {
            joined_now = 0;
            rc = 0;
            goto exchange;
        }
        rc = settle(r, &ss, &io, err, errlen);
        if (rc == 0) {
            int next = epoch_end(r, stepped, &last_ckpt, &ss, err, errlen);

            if (next != 0) {
                if (next < 0)
                    return -1;
                continue;
            }
            if (r->stop != STOP_NONE || r->epoch >= (uint64_t)o->epochs) {
                if (r->stop == STOP_NONE)
                    r->stop = STOP_DONE;
                rc = run_end(r, &ss, &io, err, errlen);
                if (rc == 0 && changed) /* the ring changed at the end: that is done too */
                    show_changes(r);
                if (rc != LOST)
                    return rc;
            }
        }
        if (rc == 0) {
            shard_set_epoch(&r->shard, r->epoch);
            io.phase = EL_GROW;
            io.t_call = ring_now();
            rc = elastic_grow_point(r, err, errlen); /* peers may join */
            if (rc == 2) { /* they did */
                changed = 1;
                rc = 0;
            }
        }
exchange:
        if (rc == 0) {
            /* rank 0 decides (its clock for --eval-every DURATION); the step tells everyone */
            want = r->rank == 0 && r->w->ntest > 0 &&
                   every_due(&o->eval_every, r->step + 1, ring_now(), &last_eval);
            rc = step_exchange(r, ctl, want, &ss, &io, &gst, err, errlen);
        }
        if (rc == LOST) {
            if (recover(r, ctl, &io, &stepped, &last_ckpt, &ss, err, errlen) != 0)
                return -1;
            changed = 1;
            continue;
        }
        if (rc != 0 || step_apply(r, ctl, &io, gst, &eval, &ss, err, errlen) != 0)
            return -1;
        stepped = 1;
        if (kill_at != 0 && r->step == kill_at)
            raise(SIGKILL);
        if (nan_at != 0 && r->step == nan_at)
            r->w->params[0] = NAN;
        if (step_finish(r, eval, changed, &last_ckpt, &ss, err, errlen) != 0)
            return -1;
        changed = 0;
    }
}

int train_run(run_t *r, char *err, size_t errlen)
{
    /* room for every peer the ring may hold (--elastic MAX) */
    int room = r->el != NULL && r->opt->elastic_max > r->world ? r->opt->elastic_max : r->world;
    float *ctl = calloc(CTL_COUNT + (size_t)room, sizeof(float));
    int rc;

    r->peer_wait = calloc((size_t)room, sizeof(float)); /* main.c frees it */
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
