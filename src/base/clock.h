/* clock.h - monotonic time for deadlines. */
#ifndef RING_CLOCK_H
#define RING_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline double ring_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* RING_CLOCK_H */
