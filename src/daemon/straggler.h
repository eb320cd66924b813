/*
 * straggler.h - slow peers on purpose, for staleness experiments.
 *
 * --straggler RANK:FACTOR makes that peer's compute take FACTOR times
 * longer at every step (a slower GPU, a noisy neighbour); --jitter
 * P:FACTOR makes every peer's step take FACTOR times longer with
 * probability P (the transient stragglers of shared clusters), drawn from
 * (seed, step, rank) so a run is reproducible. The extra time is slept,
 * not spun: a slow device does not take the host's cores away from the
 * other peers.
 */
#ifndef RINGD_DAEMON_STRAGGLER_H
#define RINGD_DAEMON_STRAGGLER_H

#include <stdint.h>

#include "daemon/options.h"

/* How many times longer this peer's step is (1 when neither applies). */
double straggler_factor(const daemon_opts_t *o, int rank, uint64_t step);

/*
 * The end of a step whose compute began at t_begin (ring_now()). With
 * --device-ms the step lasts device-ms times its factor, slept out as a host
 * waits on a GPU (a compute that took longer is not cut); without, the
 * compute so far is stretched by the factor, the extra slept too.
 */
void straggler_step_end(const daemon_opts_t *o, int rank, uint64_t step, double t_begin);

/* Sleep that long (interrupted sleeps are resumed). */
void straggler_sleep(double seconds);

#endif /* RINGD_DAEMON_STRAGGLER_H */
