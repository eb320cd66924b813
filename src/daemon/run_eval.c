/*
 * run_eval.c - a run's evaluations on the test set, in every mode.
 *
 * By default they are off the critical path: when one is due, rank 0's
 * trainer copies its parameters (a memcpy, on the trainer thread, so
 * nothing races with the update) and hands the copy to the background
 * evaluator (eval_thread.c), then trains on. The result counts as of the
 * snapshot: its step, and its training time for "time to 85 %" (those
 * parameters existed then). The trainer takes finished results between
 * steps (run_eval_poll) and prints and writes them itself: the progress bar
 * and the metrics file stay the trainer's, and the run's test_* fields are
 * only ever touched by its thread. The evaluator starts before training
 * (run_eval_open), so its copy of the dataset loads during the first steps.
 *
 * --eval-sync keeps the old in-line evaluations: lockstep peers each
 * evaluate a share and wait for one another (run_evaluate_shared); in the
 * bounded/async modes rank 0 evaluates alone while the others run ahead
 * (run_evaluate). The final evaluation is always in-line: its result is
 * the summary's.
 */
#include "ring_build.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon/daemon.h"
#include "daemon/eval_thread.h"
#include "daemon/progress.h"

/* the longest wait for the background evaluation: the whole test set takes well
 * under a second for the MLP and seconds for the CNN on one core; this is a hang */
#define EVAL_WAIT_S 300.0

static eval_at_t eval_now(const run_t *r)
{
    return (eval_at_t){.step = r->step, .epoch = r->epoch, .step_in_epoch = r->step_in_epoch,
                       .time = r->elapsed_before + (ring_now() - r->t_start)};
}

static void eval_record(run_t *r, const eval_at_t *at, double loss, double acc)
{
    /* the epoch as the progress lines count it: bounded/async peers that ran ahead of a
     * shared budget's last epoch are still in it */
    uint64_t epoch = at->epoch + (at->step_in_epoch > 0);

    if (epoch > (uint64_t)r->opt->epochs)
        epoch = (uint64_t)r->opt->epochs;
    /* --elastic: an evaluation a change interrupted, done again, is not shown twice */
    int again = r->changes > 0 && r->test_acc >= 0 && r->test_step == at->step;

    r->test_loss = loss;
    r->test_acc = acc;
    r->test_step = at->step;
    if (again)
        return;
    if (acc >= 0.85 && r->time_to_85 < 0)
        r->time_to_85 = at->time;
    if (r->chatty)
        progress_line(r, "epoch %" PRIu64 " step %" PRIu64 ": test accuracy %.2f%%, loss %.4f",
                      epoch, at->step, 100 * acc, loss);
    if (r->metrics != NULL && r->rank == 0)
        metrics_eval(r->metrics, at->step, at->epoch, at->time, loss, acc);
}

int run_eval_poll(run_t *r, char *err, size_t errlen)
{
    eval_result_t res;
    int got;

    if (r->eval_bg == NULL)
        return 0;
    got = eval_thread_result(r->eval_bg, 0, &res, err, errlen);
    if (got > 0)
        eval_record(r, &res.at, res.loss, res.accuracy);
    return got < 0 ? -1 : 0;
}

/* Record every background result still to come, in order: an in-line evaluation
 * after them must be the last word. */
static int eval_drain(run_t *r, char *err, size_t errlen)
{
    eval_result_t res;
    int got;

    if (r->eval_bg == NULL)
        return 0;
    while ((got = eval_thread_result(r->eval_bg, EVAL_WAIT_S, &res, err, errlen)) > 0)
        eval_record(r, &res.at, res.loss, res.accuracy);
    return got;
}

int run_evaluate(run_t *r, char *err, size_t errlen)
{
    eval_at_t at;
    double loss, acc;

    if (eval_drain(r, err, errlen) != 0)
        return -1;
    at = eval_now(r);
    if (r->w->ops->evaluate(r->w, &loss, &acc, err, errlen) != 0)
        return -1;
    eval_record(r, &at, loss, acc);
    return 0;
}

int run_evaluate_shared(run_t *r, char *err, size_t errlen)
{
    eval_at_t at;
    double loss_sum;
    size_t correct, count;
    float sums[4];
    int loss_ok;
    ring_request_t *req;

    if (r->world == 1 || r->comm == NULL)
        return run_evaluate(r, err, errlen);
    /* rank 0's background one first: the others wait for it in the allreduce below */
    if (eval_drain(r, err, errlen) != 0)
        return -1;
    at = eval_now(r);
    if (r->w->ops->evaluate_part(r->w, (size_t)r->rank, (size_t)r->world, &loss_sum, &correct,
                                 &count, err, errlen) != 0)
        return -1;
    /* counts below 2^24 add exactly in float; the loss sum to float precision */
    /* an inf or NaN loss (diverged parameters), or one whose sum overflows a float, would
     * fail the exact allreduce: it travels as a count, so every peer ends the same way */
    loss_ok = fabs(loss_sum) < FLT_MAX / r->world;
    sums[0] = loss_ok ? (float)loss_sum : 0.0f;
    sums[1] = (float)correct;
    sums[2] = (float)count;
    sums[3] = loss_ok ? 0.0f : 1.0f;
    if (ring_allreduce_start_flags(r->comm, sums, sums, 4, RING_FLOAT32, RING_SUM, TENSOR_EVAL,
                                   RING_CALL_EXACT, &req) != RING_OK ||
        ring_request_wait(req) != RING_OK) {
        snprintf(err, errlen, "step %" PRIu64 ", evaluation allreduce: %s", r->step,
                 ring_last_error());
        return 1;
    }
    if (sums[3] > 0) {
        progress_diverged(r, r->step, "inf or NaN in the loss on the test set", err, errlen);
        return -1;
    }
    if (!(sums[2] > 0)) {
        snprintf(err, errlen, "step %" PRIu64 ": the peers evaluated no test samples", r->step);
        return -1;
    }
    eval_record(r, &at, (double)sums[0] / sums[2], (double)sums[1] / sums[2]);
    return 0;
}

static int eval_start(run_t *r, char *err, size_t errlen)
{
    const char *fault = getenv("RING_FAULT");
    wl_settings_t s;

    daemon_opts_workload(r->opt, r->cfg->launch.local_rank, &s);
    /* fault injection for the tests: RING_FAULT=eval-data-dir:DIR makes the evaluator
     * load its copy of the data from DIR, so its failure can be had on purpose */
    if (fault != NULL && strncmp(fault, "eval-data-dir:", 14) == 0)
        s.data_dir = fault + 14;
    return eval_thread_start(r->w->ops, &s, r->w->nparams, &r->eval_bg, err, errlen);
}

int run_eval_open(run_t *r, char *err, size_t errlen)
{
    const every_t *e = &r->opt->eval_every;

    if (r->rank != 0 || r->w->ntest == 0 || r->opt->eval_sync || r->eval_bg != NULL ||
        (e->steps <= 0 && e->seconds <= 0 && !e->per_epoch))
        return 0;
    return eval_start(r, err, errlen);
}

int run_evaluate_bg(run_t *r, char *err, size_t errlen)
{
    eval_at_t at = eval_now(r), dropped;

    if (r->opt->eval_sync)
        return run_evaluate(r, err, errlen);
    if (r->eval_bg == NULL && eval_start(r, err, errlen) != 0)
        return -1;
    if (run_eval_poll(r, err, errlen) != 0) /* an earlier result first, in step order */
        return -1;
    if (eval_thread_submit(r->eval_bg, r->w->params, &at, &dropped) && r->evals_dropped++ == 0 &&
        r->chatty)
        progress_line(r, "step %" PRIu64 ": the evaluation of step %" PRIu64 " gave way to "
                      "this one: the background evaluator was still busy (loading its data, "
                      "or evaluating for longer than --eval-every; said once)",
                      at.step, dropped.step);
    return 0;
}

void run_eval_close(run_t *r)
{
    char err[DAEMON_ERR_MAX];

    if (eval_thread_stop(r->eval_bg, EVAL_WAIT_S, err, sizeof(err)) != 0)
        fprintf(stderr, "ringd[rank %d]: warning: %s\n", r->rank, err);
    r->eval_bg = NULL;
}
