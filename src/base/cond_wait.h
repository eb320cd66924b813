/*
 * cond_wait.h - condition variables on the monotonic clock, waited on for a
 * number of seconds: a stepped wall clock must not stretch or cut a timeout.
 * (The SSP session and the daemon's background evaluator wait this way.)
 */
#ifndef RING_COND_WAIT_H
#define RING_COND_WAIT_H

#include <pthread.h>

/* pthread_cond_init with CLOCK_MONOTONIC; returns its result. */
int ring_cond_init_monotonic(pthread_cond_t *cv);

/* Wait on cv (made by ring_cond_init_monotonic, mu held) at most seconds;
 * ETIMEDOUT at once when seconds <= 0, else pthread_cond_timedwait's result. */
int ring_cond_wait_s(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds);

#endif /* RING_COND_WAIT_H */
