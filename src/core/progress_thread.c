/*
 * progress_thread.c - the progress thread. One thread per communicator owns the
 * engine while requests are pending: it runs ring_comm_progress, sleeps in
 * the transport's wait for at most PROGRESS_POLL_MS at a time (holding the
 * lock, so the transport never sees two threads; a caller waits at most that
 * long for the lock), enforces the timeout as ring_comm_wait_until does, and
 * wakes the waiters when a request finishes or the ring fails. With nothing
 * pending it sleeps on a condition variable until a request is queued.
 */
#include "ring_build.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "allreduce.h"
#include "clock.h"
#include "fail.h"
#include "progress_thread.h"

#define PROGRESS_POLL_MS 1

struct ring_progress {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work;   /* a request was queued, or stop */
    pthread_cond_t done;   /* a request finished, or the ring failed */
    atomic_int callers;    /* threads waiting for the lock in ring_comm_lock */
    int stop;
};

/* Let callers waiting for the lock have it before the thread takes it again (a
 * mutex is not fair: unlock-then-lock would starve them on a busy host). Bounded:
 * each caller holds the lock for one short call. With yield, the CPU is offered
 * once in any case (a spin). */
static void hand_over(struct ring_progress *p, int yield)
{
    pthread_mutex_unlock(&p->lock);
    if (yield)
        sched_yield();
    for (int i = 0; i < 1000 && atomic_load(&p->callers) > 0; i++)
        sched_yield();
    pthread_mutex_lock(&p->lock);
}

static int has_pending(const ring_comm_t *comm)
{
    for (unsigned i = 0; i < comm->requests.count; i++)
        if (!comm->requests.slots[(comm->requests.head + i) % RING_MAX_REQUESTS].done)
            return 1;
    return 0;
}

static void *progress_main(void *arg)
{
    ring_comm_t *comm = arg;
    struct ring_progress *p = comm->progress;
    double last_progress = ring_now(), spin_until = 0;
    uint64_t finished = comm->requests.finished;

    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        int moved;
        double now;

        if (comm->fail.error != RING_OK || !has_pending(comm)) {
            pthread_cond_wait(&p->work, &p->lock);
            last_progress = ring_now();
            spin_until = last_progress + comm->cfg.spin_us * 1e-6;
            continue;
        }
        moved = ring_comm_progress(comm);
        now = ring_now();
        if (moved != 0) {
            /* a request finished or the ring failed: waiters check their request */
            if (moved < 0 || finished != comm->requests.finished)
                pthread_cond_broadcast(&p->done);
            finished = comm->requests.finished;
            last_progress = now;
            spin_until = now + comm->cfg.spin_us * 1e-6;
            continue;
        }
        if (ring_comm_check_timeout(comm, now - last_progress)) {
            ring_comm_progress(comm); /* fails the requests with the sticky error */
            pthread_cond_broadcast(&p->done);
            continue;
        }
        if (now < spin_until) {
            /* spin without the lock, so callers get in at once, and yielding the
             * CPU as ring_comm_wait_until does: on an oversubscribed host a spin
             * that kept it held off the peers it waited for (4 peers on 2 cores:
             * a 4 KiB allreduce took 1.1 ms instead of 27 us) */
            hand_over(p, 1);
            continue;
        }
        ring_comm_sleep(comm, PROGRESS_POLL_MS);
        comm->stats.wait_s += ring_now() - now;
        hand_over(p, 0); /* a caller that queued up for the lock meanwhile */
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

ring_status_t ring_progress_start(ring_comm_t *comm)
{
    struct ring_progress *p = calloc(1, sizeof(*p));
    int err;

    if (p == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the progress thread");
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    comm->progress = p;
    err = pthread_create(&p->thread, NULL, progress_main, comm);
    if (err != 0) {
        comm->progress = NULL;
        pthread_cond_destroy(&p->done);
        pthread_cond_destroy(&p->work);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return ring_error_set(RING_ERR_NO_RESOURCE, "could not start the progress thread (errno "
                              "%d); run without it (--progress-thread off)", err);
    }
    return RING_OK;
}

void ring_progress_stop(ring_comm_t *comm)
{
    struct ring_progress *p = comm->progress;

    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    comm->progress = NULL;
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void ring_comm_lock(ring_comm_t *comm)
{
    struct ring_progress *p = comm->progress;

    if (p == NULL)
        return;
    atomic_fetch_add(&p->callers, 1);
    pthread_mutex_lock(&p->lock);
    atomic_fetch_sub(&p->callers, 1);
}

void ring_comm_unlock(ring_comm_t *comm)
{
    if (comm->progress != NULL)
        pthread_mutex_unlock(&comm->progress->lock);
}

void ring_progress_kick(ring_comm_t *comm)
{
    if (comm->progress != NULL)
        pthread_cond_signal(&comm->progress->work);
}

int ring_progress_wait(ring_comm_t *comm, ring_request_t *req)
{
    struct ring_progress *p = comm->progress;

    if (p == NULL)
        return -1;
    /* the thread fails every request on a timeout or a dead peer, so this ends;
     * the timed wait only guards against a lost wake-up */
    while (!req->done) {
        struct timespec until;

        if (comm->fail.error != RING_OK) {
            /* failed while the thread slept (a caller's call failed the ring): fail
             * what is pending with the sticky error, or this wait would never end */
            (void)ring_comm_progress(comm);
            break;
        }

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&p->done, &p->lock, &until);
    }
    if (!req->done)
        req->done = 1, req->status = comm->fail.error;
    return 0;
}
