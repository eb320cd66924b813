/* sum_check.h - the exactness and agreement checks that t-rd.c and t-direct.c run on
 * an algorithm (sum_check.c). */
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

#endif /* RING_TEST_SUM_CHECK_H */
