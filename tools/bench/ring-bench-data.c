/*
 * ring-bench-data.c - what every ring-bench measurement shares: the clock,
 * the slowest rank's time and the sum over ranks (an allgather of one
 * float), and the data: gradient-like values to time, integer-valued ones
 * whose sums are exact to check.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <time.h>

#include <ringd/ringd.h>

#include "ring-bench.h"

double bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Every rank's v into slots[0..size): an allgather of one float each. */
static ring_status_t bench_gather(ring_comm_t *comm, float *slots, double v)
{
    float mine = (float)v;

    return ring_allgather(comm, &mine, slots, sizeof(mine));
}

ring_status_t bench_max(ring_comm_t *comm, float *slots, double v, double *max_p)
{
    if (bench_gather(comm, slots, v) != RING_OK)
        return RING_ERR_REMOTE;
    *max_p = 0;
    for (int i = 0; i < ring_comm_size(comm); i++)
        if (slots[i] > *max_p)
            *max_p = slots[i];
    return RING_OK;
}

/* (exact for counts below 2^24 per rank: #wrong of one check) */
ring_status_t bench_sum(ring_comm_t *comm, float *slots, double v, double *sum_p)
{
    if (bench_gather(comm, slots, v) != RING_OK)
        return RING_ERR_REMOTE;
    *sum_p = 0;
    for (int i = 0; i < ring_comm_size(comm); i++)
        *sum_p += slots[i];
    return RING_OK;
}

/* Timed data: gradient-like values (about N(0, 0.01^2), no pattern lz4 could
 * exploit), with a fraction `sparsity` of exact zeros. */
uint64_t bench_mix(uint64_t h)
{
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

void bench_fill_timed(float *buf, size_t count, int rank, double sparsity, int shared)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
    uint32_t zero_below = (uint32_t)(sparsity * 4294967295.0);

    for (size_t i = 0; i < count; i++) {
        uint64_t h;
        uint32_t where;
        x += 0x9e3779b97f4a7c15ull;
        h = bench_mix(x);
        /* the zero pattern: this peer's own, or the same on every peer */
        where = shared ? (uint32_t)bench_mix(i * 0x9e3779b97f4a7c15ull + 1) : (uint32_t)h;
        if (where < zero_below && sparsity > 0) {
            buf[i] = 0.0f;
        } else {
            /* sum of four uniforms: roughly normal */
            double u = (double)(h >> 48 & 0xffff) + (double)(h >> 32 & 0xffff) +
                       (double)(h >> 16 & 0xffff) + (double)(h & 0xffff);
            buf[i] = (float)((u / 65536.0 - 2.0) * 0.017);
        }
    }
}

void bench_fill(float *buf, size_t count, int rank)
{
    /* integer-valued: every partial sum is exact in fp32 */
    for (size_t i = 0; i < count; i++)
        buf[i] = (float)((rank + 1) * (int)((i % 13) + 1));
}

size_t bench_verify(const float *buf, size_t count, size_t first_index, int n, ring_op_t op,
                    double tolerance)
{
    size_t wrong = 0;
    double ranks_sum = (double)n * (n + 1) / 2.0;

    for (size_t i = 0; i < count; i++) {
        double want = ranks_sum * (double)(((first_index + i) % 13) + 1);
        if (op == RING_AVG)
            want /= n;
        if (fabs((double)buf[i] - want) > tolerance * want)
            wrong++;
    }
    return wrong;
}
