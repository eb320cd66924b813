/* sum_check.c - see sum_check.h. */
#include "ring_build.h"

#include <math.h>
#include <string.h>

#include "sum_check.h"

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* small integers: exact in fp32 whatever the order of the sum */
static float int_val(int rank, size_t i)
{
    return (float)((int)((rank * 7 + i * 3) % 17) - 8);
}

static float rand_val(int rank, size_t i)
{
    uint64_t x = (uint64_t)rank * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull + 1;

    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0) * 100.0f;
}

ring_status_t sum_check_run(ring_comm_t *comm, int rank, int n, const size_t *counts,
                            size_t ncounts, float *in, float *out, sum_check_t *res)
{
    ring_status_t st = RING_OK;

    res->wrong = 0;
    res->hash = 1469598103934665603ull;
    res->max_err = 0;
    for (size_t c = 0; c < ncounts && st == RING_OK; c++) {
        size_t count = counts[c];

        for (int inplace = 0; inplace < 2 && st == RING_OK; inplace++) {
            for (size_t i = 0; i < count; i++)
                in[i] = int_val(rank, i);
            st = ring_allreduce(comm, in, inplace ? in : out, count, RING_FLOAT32, RING_SUM);
            for (size_t i = 0; i < count && st == RING_OK; i++) {
                float want = 0;
                const float *got = inplace ? in : out;

                for (int r = 0; r < n; r++)
                    want += int_val(r, i);
                res->wrong += memcmp(&got[i], &want, sizeof(float)) != 0;
            }
        }
        for (int avg = 0; avg < 2 && st == RING_OK; avg++) {
            for (size_t i = 0; i < count; i++)
                in[i] = rand_val(rank, i);
            st = ring_allreduce(comm, in, out, count, RING_FLOAT32, avg ? RING_AVG : RING_SUM);
            for (size_t i = 0; i < count && st == RING_OK; i++) {
                double want = 0, mag = 0;

                for (int r = 0; r < n; r++)
                    want += rand_val(r, i), mag += fabs(rand_val(r, i));
                if (avg)
                    want /= n, mag /= n;
                /* an fp32 sum of n terms is off by at most about n eps their magnitudes */
                double err = fabs(out[i] - want) / (mag + 1e-30);
                if (err > res->max_err)
                    res->max_err = err;
            }
            res->hash = fnv(out, count * sizeof(float), res->hash);
        }
    }
    return st;
}

static uint64_t stat_at(const ring_comm_stats_t *s, size_t offset)
{
    uint64_t v;

    memcpy(&v, (const char *)s + offset, sizeof(v));
    return v;
}

ring_status_t sum_check_select(ring_comm_t *comm, const sum_check_call_t *calls, size_t ncalls,
                               size_t stat_offset, uint64_t *sel)
{
    static float buf[4096];
    static uint16_t half[1024];
    ring_comm_stats_t s0, s1;
    ring_status_t st = RING_OK;

    memset(buf, 0, sizeof(buf));
    memset(half, 0, sizeof(half));
    *sel = 0;
    for (size_t k = 0; k < ncalls && st == RING_OK; k++) {
        ring_request_t *req = NULL;

        st = ring_comm_get_stats(comm, &s0);
        if (st != RING_OK)
            break;
        switch (calls[k]) {
        case SEL_EXACT_4096:
            st = ring_allreduce_start_flags(comm, buf, buf, 1024, RING_FLOAT32, RING_SUM, 0,
                                            RING_CALL_EXACT, &req);
            break;
        case SEL_EXACT_4100:
            st = ring_allreduce_start_flags(comm, buf, buf, 1025, RING_FLOAT32, RING_SUM, 0,
                                            RING_CALL_EXACT, &req);
            break;
        case SEL_CODEC:
            st = ring_allreduce(comm, buf, buf, 256, RING_FLOAT32, RING_SUM);
            break;
        case SEL_FP16:
            st = ring_allreduce(comm, half, half, 1024, RING_FLOAT16, RING_SUM);
            break;
        case SEL_BROADCAST:
            st = ring_broadcast(comm, buf, 64, 1);
            break;
        case SEL_TINY_EXACT_AVG:
            st = ring_allreduce_start_flags(comm, buf, buf, 1, RING_FLOAT32, RING_AVG, 0,
                                            RING_CALL_EXACT, &req);
            break;
        }
        if (st == RING_OK && req != NULL)
            st = ring_request_wait(req);
        if (st == RING_OK)
            st = ring_comm_get_stats(comm, &s1);
        if (st == RING_OK && stat_at(&s1, stat_offset) > stat_at(&s0, stat_offset))
            *sel |= 1u << k;
    }
    return st;
}
