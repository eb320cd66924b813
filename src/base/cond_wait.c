/* cond_wait.c - see cond_wait.h. */
#include "ring_build.h"

#include "cond_wait.h"

#include <errno.h>
#include <time.h>

int ring_cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    int rc;

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}

int ring_cond_wait_s(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds)
{
    struct timespec ts;

    if (!(seconds > 0))
        return ETIMEDOUT;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)seconds;
    ts.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return pthread_cond_timedwait(cv, mu, &ts);
}
