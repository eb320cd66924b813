/*
 * progress.h - what the training loops tell progress.c beyond run_t's
 * totals, and the one wording of a diverged run.
 *
 * The figures rank 0 prints have one definition in every mode
 * (docs/training.md, "What the figures mean"):
 *   samples/s     the samples of all peers per second of wall time;
 *   time shares   compute, wait for peers, communication and other: shares
 *                 of this peer's trainer thread's wall time, adding up to
 *                 100 %; in bounded/async the engine thread's allreduces run
 *                 alongside them and are given apart;
 *   saved         1 - the bytes sent / what the same gradient allreduces
 *                 would have sent as fp32: the codec's saving alone.
 */
#ifndef RINGD_PROGRESS_H
#define RINGD_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/daemon.h"

/* Bounded/async, after every step: the engine thread's seconds in allreduces
 * so far (alongside the trainer's time, not part of it). */
void progress_engine_comm(double comm_s);

/* Bounded/async, once the session is finished: the gradient allreduces its
 * rounds ran (lockstep runs one per step, and needs no call). */
void progress_gradient_allreduces(uint64_t count);

/* The error of a run whose loss diverged at this peer's step `step` (1-based):
 * on rank 0 the cause (`what`) and what to do, on the others a short line
 * pointing to rank 0's. */
void progress_diverged(const run_t *r, uint64_t step, const char *what, char *err,
                       size_t errlen);

/* 1 when none of the n values is inf or NaN: a diverged run's parameters are never
 * checkpointed. */
int all_finite(const float *x, size_t n);

#endif /* RINGD_PROGRESS_H */
