/*
 * straggler.c - deterministic slow steps (see straggler.h).
 */
#include "ring_build.h"

#include "daemon/straggler.h"

#include <errno.h>
#include <time.h>

#include "clock.h"
#include "workloads/rng.h"

#define JITTER_RNG_TAG 0x6a69747465722121ull /* "jitter!!" */

double straggler_factor(const daemon_opts_t *o, int rank, uint64_t step)
{
    double factor = 1;

    if (o->straggler_rank == rank)
        factor *= o->straggler_factor;
    if (o->jitter_p > 0) {
        rng_t rng;
        rng_seed(&rng, o->seed, JITTER_RNG_TAG ^ step, (uint64_t)rank);
        if ((double)rng_uniform_float(&rng) < o->jitter_p)
            factor *= o->jitter_factor;
    }
    return factor;
}

void straggler_step_end(const daemon_opts_t *o, int rank, uint64_t step, double t_begin)
{
    double factor = straggler_factor(o, rank, step), now = ring_now();

    if (o->device_ms > 0)
        straggler_sleep(t_begin + o->device_ms * 1e-3 * factor - now);
    else
        straggler_sleep((now - t_begin) * (factor - 1));
}

void straggler_sleep(double seconds)
{
    struct timespec ts, rem;

    if (!(seconds > 0))
        return;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR)
        ts = rem;
}
