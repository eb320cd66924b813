/*
 * straggler.c - deterministic slow steps (see straggler.h).
 */
#include "ring_build.h"

#include "daemon/straggler.h"

#include <errno.h>
#include <time.h>

#include "workloads/rng.h"

#define JITTER_RNG_TAG 0x6a69747465722121ull /* "jitter!!" */

double straggler_extra(const daemon_opts_t *o, int rank, uint64_t step, double compute_s)
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
    return compute_s * (factor - 1);
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
