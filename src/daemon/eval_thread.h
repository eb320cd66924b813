/*
 * eval_thread.h - a background evaluator: a thread that evaluates snapshots
 * of the parameters on the test set with a workload instance of its own, so
 * the trainer that hands them over never waits for an evaluation.
 *
 * One trainer thread calls everything here. Nothing queues: at most one
 * snapshot waits, one is being evaluated and one result waits to be taken;
 * a snapshot handed over while another still waits replaces it (see
 * eval_thread_submit). Every wait is bounded; the thread's errors come back
 * as a message from eval_thread_result.
 */
#ifndef RINGD_EVAL_THREAD_H
#define RINGD_EVAL_THREAD_H

#include <stddef.h>
#include <stdint.h>

#include "workloads/workload.h"

typedef struct eval_thread eval_thread_t;

/* Where training was when a snapshot was taken: its result counts as of then. */
typedef struct eval_at {
    uint64_t step, epoch, step_in_epoch;
    double time;              /* training seconds (across resumes) */
} eval_at_t;

typedef struct eval_result {
    eval_at_t at;
    double loss, accuracy;
} eval_result_t;

/*
 * Start the thread. It creates its own instance of the workload (ops with
 * settings s; s->data_dir is copied) before its first evaluation, off the
 * caller's path; a failure there comes back from eval_thread_result.
 * nparams: the size of the snapshots. 0, or -1 with err (no thread).
 */
int eval_thread_start(const workload_ops_t *ops, const wl_settings_t *s, size_t nparams,
                      eval_thread_t **out, char *err, size_t errlen);

/*
 * Copy params (nparams floats) as the next snapshot to evaluate, taken at
 * *at. Never waits for an evaluation, only for the thread's own copy of a
 * snapshot (a memcpy). Returns 1 when it replaced a snapshot that had not
 * begun (its position in *dropped_p), 0 otherwise.
 */
int eval_thread_submit(eval_thread_t *t, const float *params, const eval_at_t *at,
                       eval_at_t *dropped_p);

/*
 * The next result, oldest first. wait_s = 0: look and return at once;
 * wait_s > 0: wait up to that long for a result, or until the thread has
 * nothing left to evaluate. Returns 1 with *res, 0 when there is none
 * (with wait_s > 0: the thread is idle), or -1 with err when the thread
 * failed or the wait ran out.
 */
int eval_thread_result(eval_thread_t *t, double wait_s, eval_result_t *res, char *err,
                       size_t errlen);

/*
 * Stop: a snapshot not yet begun is dropped, the evaluation under way is
 * waited for (up to wait_s), the thread joined and everything freed. When
 * the wait runs out the thread is detached and frees itself when its
 * evaluation ends; -1 then, with err. t may be NULL.
 */
int eval_thread_stop(eval_thread_t *t, double wait_s, char *err, size_t errlen);

#endif /* RINGD_EVAL_THREAD_H */
