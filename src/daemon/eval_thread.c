/*
 * eval_thread.c - the background evaluator (eval_thread.h): a thread with
 * its own workload instance evaluates snapshots of the parameters.
 *
 * Its own instance, because a workload's forward buffers are not
 * thread-safe: the trainer keeps training with its r->w meanwhile. The
 * thread creates it (loading the dataset) before its first evaluation, so
 * that cost is off the trainer's path too.
 *
 * The hand-off, under one mutex: the trainer copies the parameters into
 * snap and sets pending; the thread copies snap into its instance, clears
 * pending and evaluates without the lock; its result waits in done until
 * the trainer takes it. The thread begins the next snapshot only after the
 * trainer took the previous result, so results come out in order and none
 * is overwritten.
 */
#include "ring_build.h"

#include "daemon/eval_thread.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cond_wait.h"
#include "daemon/daemon.h"

struct eval_thread {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* any change below: both sides wait on it */
    const workload_ops_t *ops;
    wl_settings_t settings;
    char data_dir[OPT_STR_MAX]; /* settings.data_dir points here */
    size_t nparams;

    /* under mu */
    float *snap;              /* the snapshot waiting to be evaluated */
    eval_at_t snap_at;
    int pending;              /* snap holds one not yet begun */
    int busy;                 /* an evaluation is under way */
    eval_at_t busy_at;
    eval_result_t done;
    int have_done;            /* done waits for the trainer */
    int failed;               /* err says why; the thread has ended */
    char err[DAEMON_ERR_MAX];
    int stop;                 /* the trainer asks the thread to end */
    int exited;               /* the thread has ended (its last act under mu) */
    int abandoned;            /* nobody will join: the thread frees everything */
};

static void eval_thread_free(eval_thread_t *t)
{
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t->snap);
    free(t);
}

/* the condition variable runs on the monotonic clock: deadline in ring_now() seconds */
static int wait_until(eval_thread_t *t, double deadline)
{
    return ring_cond_wait_s(&t->cv, &t->mu, deadline - ring_now());
}

static void *eval_main(void *arg)
{
    eval_thread_t *t = arg;
    workload_t *w = NULL;
    char err[WL_ERR_MAX]; /* a workload's message; t->err has room for it and ours */
    int ok = t->ops->create(&t->settings, &w, err, sizeof(err)) == 0, abandoned;

    if (ok && w->nparams != t->nparams) {
        snprintf(err, sizeof(err), "its copy of the model has %zu parameters, the trainer's %zu",
                 w->nparams, t->nparams);
        ok = 0;
    }
    pthread_mutex_lock(&t->mu);
    if (!ok) {
        snprintf(t->err, sizeof(t->err), "background evaluation: %s", err);
        t->failed = 1;
    }
    while (!t->failed && !t->stop) {
        double loss, acc;
        int rc;

        if (!t->pending || t->have_done) {
            pthread_cond_wait(&t->cv, &t->mu);
            continue;
        }
        /* ours now: the trainer may put the next snapshot in snap meanwhile */
        memcpy(w->params, t->snap, t->nparams * sizeof(float));
        t->busy_at = t->snap_at;
        t->pending = 0;
        t->busy = 1;
        pthread_mutex_unlock(&t->mu);
        rc = w->ops->evaluate(w, &loss, &acc, err, sizeof(err));
        pthread_mutex_lock(&t->mu);
        t->busy = 0;
        if (rc != 0) {
            snprintf(t->err, sizeof(t->err), "background evaluation of step %" PRIu64 ": %s",
                     t->busy_at.step, err);
            t->failed = 1;
        } else {
            t->done = (eval_result_t){.at = t->busy_at, .loss = loss, .accuracy = acc};
            t->have_done = 1;
        }
        pthread_cond_broadcast(&t->cv);
    }
    t->exited = 1;
    abandoned = t->abandoned;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (w != NULL)
        w->ops->destroy(w);
    if (abandoned) /* eval_thread_stop gave up waiting and detached us */
        eval_thread_free(t);
    return NULL;
}

int eval_thread_start(const workload_ops_t *ops, const wl_settings_t *s, size_t nparams,
                      eval_thread_t **out, char *err, size_t errlen)
{
    eval_thread_t *t = calloc(1, sizeof(*t));
    sigset_t stop, old;
    int rc;

    if (t == NULL || (t->snap = malloc(nparams * sizeof(float))) == NULL) {
        snprintf(err, errlen, "out of memory for the evaluation snapshot (%zu bytes)",
                 nparams * sizeof(float));
        free(t);
        return -1;
    }
    t->ops = ops;
    t->nparams = nparams;
    t->settings = *s;
    snprintf(t->data_dir, sizeof(t->data_dir), "%s", s->data_dir != NULL ? s->data_dir : "");
    t->settings.data_dir = t->data_dir;
    pthread_mutex_init(&t->mu, NULL);
    ring_cond_init_monotonic(&t->cv); /* a stepped wall clock must not stretch waits */
    /* SIGINT/SIGTERM stay the trainer's: its waits return early on them (signals.c) */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    rc = pthread_create(&t->thread, NULL, eval_main, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the evaluation thread");
        eval_thread_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int eval_thread_submit(eval_thread_t *t, const float *params, const eval_at_t *at,
                       eval_at_t *dropped_p)
{
    int dropped;

    pthread_mutex_lock(&t->mu);
    /* keep only the latest: a snapshot still waiting is replaced, since the newer
     * parameters are the ones worth knowing; one being evaluated runs on */
    dropped = t->pending;
    if (dropped && dropped_p != NULL)
        *dropped_p = t->snap_at;
    memcpy(t->snap, params, t->nparams * sizeof(float));
    t->snap_at = *at;
    t->pending = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return dropped;
}

int eval_thread_result(eval_thread_t *t, double wait_s, eval_result_t *res, char *err,
                       size_t errlen)
{
    double deadline = ring_now() + wait_s;
    int rc = 0, timed_out = 0;

    pthread_mutex_lock(&t->mu);
    for (;;) {
        if (t->have_done) { /* a result the thread finished before failing still counts */
            *res = t->done;
            t->have_done = 0;
            pthread_cond_broadcast(&t->cv); /* the thread may begin the next snapshot */
            rc = 1;
            break;
        }
        if (t->failed) {
            snprintf(err, errlen, "%s", t->err);
            rc = -1;
            break;
        }
        if (wait_s <= 0 || (!t->pending && !t->busy))
            break;
        if (timed_out) {
            snprintf(err, errlen, "the background evaluation of step %" PRIu64 " did not end "
                     "within %.0f s", t->busy ? t->busy_at.step : t->snap_at.step, wait_s);
            rc = -1;
            break;
        }
        timed_out = wait_until(t, deadline) == ETIMEDOUT; /* the states are looked at once more */
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int eval_thread_stop(eval_thread_t *t, double wait_s, char *err, size_t errlen)
{
    double deadline = ring_now() + wait_s;
    int rc = 0;

    if (t == NULL)
        return 0;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    t->pending = 0;
    pthread_cond_broadcast(&t->cv);
    while (!t->exited && wait_until(t, deadline) != ETIMEDOUT)
        ;
    if (!t->exited) {
        /* the evaluation cannot be interrupted: let it end on its own */
        snprintf(err, errlen, "the background evaluation of step %" PRIu64 " did not end "
                 "within %.0f s; left running", t->busy_at.step, wait_s);
        t->abandoned = 1;
        pthread_mutex_unlock(&t->mu);
        pthread_detach(t->thread);
        return -1;
    }
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    eval_thread_free(t);
    return rc;
}
