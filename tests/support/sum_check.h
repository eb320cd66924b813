/* sum_check.h - the exactness, agreement and selection checks that t-rd.c and
 * t-direct.c run on an algorithm (sum_check.c). */
#ifndef RING_TEST_SUM_CHECK_H
#define RING_TEST_SUM_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include <ringd/comm.h>

typedef struct sum_check {
    uint64_t wrong;            /* integer sums that were not exact, bit for bit */
    uint64_t hash;             /* of every random result: the same on every rank */
    double max_err;            /* random sums' largest error relative to the terms */
} sum_check_t;

/*
 * For each of counts[] (at most max_count), 4 fp32 allreduces: integer-valued
 * data (exact in any order of the sum), out of place and in place, then
 * random data summed and averaged. in and out hold max_count floats each.
 * Returns the first failed call's status (RING_OK: all ran).
 */
ring_status_t sum_check_run(ring_comm_t *comm, int rank, int n, const size_t *counts,
                            size_t ncounts, float *in, float *out, sum_check_t *res);

/* The calls of a selection check (run with --rd-max-bytes 4K and --codec fp16). */
typedef enum sum_check_call {
    SEL_EXACT_4096,     /* 1024 floats, RING_CALL_EXACT: --rd-max-bytes exactly */
    SEL_EXACT_4100,     /* 1025 floats, RING_CALL_EXACT: just above it */
    SEL_CODEC,          /* 256 floats with the fp16 codec */
    SEL_FP16,           /* 1024 fp16 values */
    SEL_BROADCAST,      /* a broadcast of 64 bytes in between */
    SEL_TINY_EXACT_AVG  /* 1 float, RING_CALL_EXACT, averaged */
} sum_check_call_t;

/*
 * Run calls[0..ncalls) one after the other; bit k of *sel is set when the
 * ring_comm_stats_t counter at stat_offset (a uint64_t, e.g.
 * offsetof(ring_comm_stats_t, rd_allreduces)) grew during call k. Returns
 * the first failed call's status.
 */
ring_status_t sum_check_select(ring_comm_t *comm, const sum_check_call_t *calls, size_t ncalls,
                               size_t stat_offset, uint64_t *sel);

#endif /* RING_TEST_SUM_CHECK_H */
