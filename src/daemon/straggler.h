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

/* Seconds to add after a step whose compute took compute_s (0 when none). */
double straggler_extra(const daemon_opts_t *o, int rank, uint64_t step, double compute_s);

/* Sleep that long (interrupted sleeps are resumed). */
void straggler_sleep(double seconds);

#endif /* RINGD_DAEMON_STRAGGLER_H */
