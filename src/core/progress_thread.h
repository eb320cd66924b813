/*
 * progress_thread.h - the optional progress thread (--progress-thread on): it
 * advances started requests while the caller computes, so a framework can
 * start an allreduce per gradient bucket during backward and find them done
 * at the optimizer step. With it on, every public call on the communicator
 * holds its lock (ring_comm_lock); without it the lock calls cost nothing
 * and requests advance only inside test/wait calls, as before.
 */
#ifndef RING_PROGRESS_THREAD_H
#define RING_PROGRESS_THREAD_H

#include "comm_int.h"

/* Start the thread (after the ring is up). */
ring_status_t ring_progress_start(ring_comm_t *comm);
/* Stop and join it (before close tells the neighbours); accepts a comm without one. */
void ring_progress_stop(ring_comm_t *comm);

void ring_comm_lock(ring_comm_t *comm);
void ring_comm_unlock(ring_comm_t *comm);

/* With the lock held: a request was queued (wake the thread). */
void ring_progress_kick(ring_comm_t *comm);

/* With the lock held: wait until req is done (the thread drives it and its
 * timeout). Returns 0, or -1 when there is no thread (drive it yourself). */
int ring_progress_wait(ring_comm_t *comm, ring_request_t *req);

#endif /* RING_PROGRESS_THREAD_H */
