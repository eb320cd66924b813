/*
 * rd_fit.c - --rd-fit on: where recursive doubling stops paying, measured
 * at start-up on the real ring instead of taken from a constant.
 *
 * rd takes log2 N steps that each move the whole buffer, the ring 2(N-1)
 * steps that each move 1/N of it: in the alpha-beta model rd wins below
 * S* = alpha beta (2(N-1) - k) / (k - 2(N-1)/N), k being rd's steps, and
 * alpha beta (latency times bandwidth) is what differs between loopback tcp,
 * a 1 Gbit/s link and InfiniBand by orders of magnitude. So right after rd's
 * pairs are up, every peer runs the same calls: at 2, 4, 8 and 16 times
 * --rd-max-bytes, rd and what takes those sizes without it in turn (the ring,
 * or Rabenseifner's where it runs: at N = 4 over tcp it is faster than the
 * ring from 32 KiB, so against the ring rd's limit came out too high), in
 * blocks of a few calls, keeping
 * each one's fastest block (the least disturbed by other processes), and
 * stops at the first size where rd loses clearly (FIT_CLEAR_LOSS) or once
 * RD_FIT_BUDGET_S has passed; a link so slow that one call of the first size
 * would blow the budget (a rate-limited one) skips the fit. rd's limit is
 * the cut that gains most over the ring at the sizes up to it (ring_fit_cut):
 * one size that a busy moment slowed does not move it, where "the last size
 * at which rd won" followed the noise of a 2-core VM. Rank 0's times decide:
 * its word to go on, and its limit, reach the others through exact
 * allreduces (as autotune.c does), so every peer runs the same calls and
 * every later call by the same algorithm.
 *
 * Measured over loopback tcp at n=4 (2-core VM, interleaved): 64 KiB took
 * 0.73-0.88 GB/s busbw by rd against 0.49-0.54 by the ring; at 4 MiB the
 * ring was twice as fast.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "algo.h"
#include "clock.h"
#include "log.h"
#include "rd.h"

#define RD_FIT_TENSOR 0xffffffe0u /* tensor ids no user picks */
#define RD_FIT_STEPS 4            /* sizes: 2, 4, 8, 16 times --rd-max-bytes */
#define RD_FIT_CALLS 4            /* calls in a timed block */
#define RD_FIT_BLOCKS 3           /* timed blocks per size and algorithm, after a warm-up one */
#define RD_FIT_MAX_BYTES ((size_t)4 << 20) /* never fit beyond this: the ring's range */
#define RD_FIT_BUDGET_S 0.1       /* no new size is tried once the fit has taken this long */
#define RD_FIT_GATE_S 0.005       /* no fit where a call of the first size takes longer */
#define RH_FIT_STEPS 4            /* Rabenseifner's: 4, 16, 64, 256 times rd's limit */
#define RH_FIT_BUDGET_S 0.3       /* no new size is tried once its fit has taken this long */
#define FIT_CLEAR_LOSS 1.25       /* no larger size once the challenger took this much longer */

int ring_fit_cut(const double (*secs)[2], int steps)
{
    double gain = 0, best = 0;
    int cut = 0;

    for (int k = 0; k < steps; k++) {
        if (!(secs[k][0] > 0 && secs[k][1] > 0)) /* not timed: nothing known beyond */
            break;
        gain += log(secs[k][0] / secs[k][1]);
        if (gain > best)
            best = gain, cut = k + 1;
    }
    return cut;
}

/* Seconds per allreduce of count floats without the challenger (best[0]: the
 * ring, or Rabenseifner's under rd's fit where it runs) and by it (best[1]:
 * rd, or Rabenseifner's under its own fit): blocks of RD_FIT_CALLS calls back
 * to back, the algorithms in turn, the fastest block of each after a warm-up
 * one. A block, not a call: one call ends on each peer at another moment (a
 * peer that adds last in rd finishes last), a run of them at about the same
 * one on every peer. */
static ring_status_t fit_time(ring_comm_t *comm, float *buf, size_t count, double best[2],
                              void (*set_limit)(ring_comm_t *, size_t))
{
    best[0] = best[1] = 1e9;
    for (int rep = 0; rep <= RD_FIT_BLOCKS; rep++) {
        for (int a = 0; a < 2; a++) {
            double t0 = ring_now(), dt;

            /* what rd (or Rabenseifner) takes: 0, the ring runs them */
            set_limit(comm, a == 1 ? count * sizeof(float) : 0);
            for (int i = 0; i < RD_FIT_CALLS; i++) {
                ring_request_t *req;

                RING_CHECK(ring_allreduce_start_flags(comm, buf, buf, count, RING_FLOAT32,
                                                      RING_AVG, RD_FIT_TENSOR + (uint32_t)a,
                                                      RING_CALL_EXACT, &req));
                RING_CHECK(ring_request_wait(req));
            }
            dt = (ring_now() - t0) / RD_FIT_CALLS;
            if (rep > 0 && dt < best[a])
                best[a] = dt;
        }
    }
    return RING_OK;
}

/* Rank 0's *value for every peer (collectives.c). */
static ring_status_t rank0_says(ring_comm_t *comm, int *value)
{
    float v = (float)*value;

    RING_CHECK(ring_coll_rank0_value(comm, &v, RD_FIT_TENSOR + 2));
    *value = (int)v;
    return RING_OK;
}

/* Rabenseifner's limit, once rd's is known (base): at 4, 16, 64 and 256 times
 * base (at most RD_FIT_MAX_BYTES), it against the ring until it loses clearly
 * or the budget is spent; it takes up to ring_fit_cut's size (none when it
 * gains nowhere). Rank 0 decides. */
static ring_status_t rh_fit(ring_comm_t *comm, float *buf, size_t base)
{
    double secs[RH_FIT_STEPS][2] = {{0}}, t_start = ring_now();
    int go = 1, won, steps = 0;
    char desc[384];
    size_t used;
    ring_status_t st = RING_OK;

    for (int k = 1; go && st == RING_OK && k <= RH_FIT_STEPS; k++) {
        size_t bytes = base << (2 * k);

        if (bytes > RD_FIT_MAX_BYTES)
            break;
        st = fit_time(comm, buf, bytes / sizeof(float), secs[k - 1], ring_rh_set_max_bytes);
        steps = k;
        go = secs[k - 1][1] < secs[k - 1][0] * FIT_CLEAR_LOSS &&
             ring_now() - t_start < RH_FIT_BUDGET_S;
        if (st == RING_OK)
            st = rank0_says(comm, &go);
    }
    won = ring_fit_cut((const double(*)[2])secs, steps);
    if (st == RING_OK)
        st = rank0_says(comm, &won);
    if (st != RING_OK)
        return st;
    if (won < 0 || won > RH_FIT_STEPS)
        return ring_error_set(RING_ERR_INTERNAL, "--rd-fit: rank 0 chose %d sizes for "
                              "Rabenseifner's algorithm (0..%d)", won, RH_FIT_STEPS);
    ring_rh_set_max_bytes(comm, won > 0 ? base << (2 * won) : 0);
    used = (size_t)snprintf(desc, sizeof(desc), "--rd-fit: Rabenseifner's algorithm takes fp32 "
                            "allreduces without a codec of %zu to %zu bytes (none when equal; "
                            "rank 0's times, %.0f ms); this peer's times per call, ring/rh in "
                            "us:", base + 1, won > 0 ? base << (2 * won) : base,
                            (ring_now() - t_start) * 1e3);
    for (int k = 0; k < steps && used < sizeof(desc); k++)
        used += (size_t)snprintf(desc + used, sizeof(desc) - used, "%s %zu: %.0f/%.0f",
                                 k ? "," : "", base << (2 * (k + 1)), secs[k][0] * 1e6,
                                 secs[k][1] * 1e6);
    ring_log(RING_LOG_INFO, "%s", desc);
    return RING_OK;
}

ring_status_t ring_rd_fit(ring_comm_t *comm)
{
    size_t floor = ring_rd_max_bytes(comm), top = floor << RD_FIT_STEPS;
    size_t rh = ring_rh_max_bytes(comm); /* 0: Rabenseifner's does not run here */
    size_t count_max = (top < RD_FIT_MAX_BYTES && rh == 0 ? top : RD_FIT_MAX_BYTES) /
                       sizeof(float);
    float *buf;
    double secs[RD_FIT_STEPS][2] = {{0}}, t_start = ring_now();
    char desc[512];
    size_t used = 0;
    int steps = 0, doublings, go;
    uint64_t rh_calls;
    ring_status_t st;

    if (comm->size < 2 || floor == 0 || floor > RD_FIT_MAX_BYTES / 2)
        return RING_OK;
    buf = calloc(count_max, sizeof(float));
    if (buf == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for --rd-fit's %zu-byte buffer",
                              count_max * sizeof(float));
    for (size_t i = 0; i < count_max; i++) /* small integers: every sum is exact */
        buf[i] = (float)(i % 7);
    ring_rh_set_max_bytes(comm, 0); /* the gate times the ring */
    /* two ring calls of the first size first (the second past a rate limit's
     * burst): on a link too slow for the fit to stay near its budget, it is not
     * tried */
    go = 1; /* first, every peer here (they finished opening at other moments) */
    st = rank0_says(comm, &go);
    {
        double t0 = ring_now();

        ring_rd_set_max_bytes(comm, 0);
        for (int i = 0; i < 2 && st == RING_OK; i++) {
            ring_request_t *req;

            st = ring_allreduce_start_flags(comm, buf, buf, (floor << 1) / sizeof(float),
                                            RING_FLOAT32, RING_AVG, RD_FIT_TENSOR,
                                            RING_CALL_EXACT, &req);
            if (st == RING_OK)
                st = ring_request_wait(req);
        }
        go = (ring_now() - t0) / 2 < RD_FIT_GATE_S;
    }
    if (st == RING_OK)
        st = rank0_says(comm, &go);
    /* rd's challenger is what takes its sizes when rd does not: Rabenseifner's
     * where it runs (up to its limit), else the ring */
    ring_rh_set_max_bytes(comm, rh);
    rh_calls = comm->stats.rh_allreduces; /* the log says which challenger ran */
    /* a size at a time; after each, rank 0 says whether to go on: until rd
     * loses clearly or the budget is spent (every peer then runs the same calls) */
    for (int k = 0; go && st == RING_OK && k < RD_FIT_STEPS; k++) {
        size_t bytes = floor << (k + 1);

        if (bytes > RD_FIT_MAX_BYTES)
            break;
        st = fit_time(comm, buf, bytes / sizeof(float), secs[k], ring_rd_set_max_bytes);
        steps = k + 1;
        go = secs[k][1] < secs[k][0] * FIT_CLEAR_LOSS &&
             ring_now() - t_start < RD_FIT_BUDGET_S;
        if (st == RING_OK)
            st = rank0_says(comm, &go);
    }
    rh_calls = comm->stats.rh_allreduces - rh_calls;
    doublings = ring_fit_cut((const double(*)[2])secs, steps);
    if (st == RING_OK) /* rank 0's limit for everyone, as doublings */
        st = rank0_says(comm, &doublings);
    ring_rd_set_max_bytes(comm, floor);
    if (st == RING_OK && (doublings < 0 || doublings > RD_FIT_STEPS))
        st = ring_error_set(RING_ERR_INTERNAL, "--rd-fit: rank 0 chose %d doublings (0..%d)",
                            doublings, RD_FIT_STEPS);
    if (st == RING_OK)
        ring_rd_set_max_bytes(comm, floor << doublings);
    /* then where Rabenseifner's stops paying, above rd's limit (steps 0: the
     * link is too slow for a fit; --rh-max-bytes stays) */
    if (st == RING_OK && rh > 0)
        st = steps > 0 ? rh_fit(comm, buf, floor << doublings)
                       : (ring_rh_set_max_bytes(comm, rh), RING_OK);
    free(buf);
    if (st != RING_OK)
        return st;
    used += (size_t)snprintf(desc, sizeof(desc), "--rd-fit: recursive doubling takes fp32 "
                             "allreduces without a codec up to %zu bytes (rank 0's times, "
                             "%.0f ms); this peer's times per call, %s/rd in us:",
                             floor << doublings, (ring_now() - t_start) * 1e3,
                             rh_calls > 0 ? "Rabenseifner's" : "ring");
    if (steps == 0)
        used += (size_t)snprintf(desc + used, sizeof(desc) - used, " none (a ring call of "
                                 "%zu bytes took more than %.0f ms: the link is too slow for "
                                 "the fit)", floor << 1, RD_FIT_GATE_S * 1e3);
    for (int k = 0; k < steps && used < sizeof(desc); k++)
        used += (size_t)snprintf(desc + used, sizeof(desc) - used, "%s %zu: %.0f/%.0f",
                                 k ? "," : "", floor << (k + 1), secs[k][0] * 1e6,
                                 secs[k][1] * 1e6);
    ring_log(RING_LOG_INFO, "%s", desc);
    return RING_OK;
}
