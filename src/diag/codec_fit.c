/*
 * codec_fit.c - whether the fp16 codec pays on this ring, measured at open.
 *
 * The codec halves the bytes on the wire and costs a conversion on each side
 * of every step. Over a network the bytes cost more; over shared memory on
 * one host, where the direct allreduce adds fp32 buffers at memory speed, the
 * conversions can cost more than the bytes they save. So:
 *   --codec auto   times allreduces of CODEC_FIT_BYTES through the codec (fp16)
 *                  against exact fp32 ones (which --algo auto may give to the
 *                  direct allreduce, as it would the user's) and keeps the
 *                  faster for every later call: per transport, per host;
 *   ring_comm_time_codec() the same timing, on demand, which only reports:
 *                  ringd runs it with --codec fp16|bf16 over shm, so that its
 *                  summary can say when fp32 would have been faster.
 * As autotune.c and rd_fit.c: calls in blocks, the fastest block of each,
 * rank 0's times decide and reach every peer in one exact allreduce, so
 * every peer runs every later call the same way. ring_comm_get_stats reports
 * the times and the choice.
 */
#include "ring_build.h"

#include <stdint.h>
#include <stdlib.h>

#include "clock.h"
#include "codec_fit.h"
#include "collectives.h"
#include "comm_int.h"
#include "log.h"

#define CODEC_FIT_TENSOR 0xffffffd0u      /* a tensor id no user picks */
#define CODEC_FIT_BYTES ((size_t)4 << 20) /* a gradient bucket's order of size */
#define CODEC_FIT_CALLS 2                 /* calls in a timed block */
#define CODEC_FIT_BLOCKS 3                /* timed blocks each, after a warm-up one */

/* Seconds per call: best[0] exact fp32, best[1] through the codec. */
static ring_status_t fit_time(ring_comm_t *comm, float *buf, size_t count, double best[2])
{
    best[0] = best[1] = 1e9;
    for (int rep = 0; rep <= CODEC_FIT_BLOCKS; rep++) {
        for (int a = 0; a < 2; a++) {
            double t0 = ring_now(), dt;

            for (int i = 0; i < CODEC_FIT_CALLS; i++) {
                ring_request_t *req;

                RING_CHECK(ring_allreduce_start_flags(comm, buf, buf, count, RING_FLOAT32,
                                                      RING_AVG, CODEC_FIT_TENSOR + (uint32_t)a,
                                                      a == 0 ? RING_CALL_EXACT : 0, &req));
                RING_CHECK(ring_request_wait(req));
            }
            dt = (ring_now() - t0) / CODEC_FIT_CALLS;
            if (rep > 0 && dt < best[a])
                best[a] = dt;
        }
    }
    return RING_OK;
}

/* Rank 0's microseconds per allreduce of bytes, exact fp32 (t[0]) and through
 * the codec (t[1]), on every peer. */
static ring_status_t codec_time(ring_comm_t *comm, size_t bytes, float t[2])
{
    size_t count = bytes / sizeof(float);
    float *buf = malloc(count * sizeof(float));
    double secs[2] = {0, 0};
    ring_status_t st;

    if (buf == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the codec timing's %zu-byte "
                              "buffer", bytes);
    for (size_t i = 0; i < count; i++) /* gradient-like magnitudes, exact in fp16 */
        buf[i] = (float)((int)(i % 63) - 31) * 0.0078125f;
    st = fit_time(comm, buf, count, secs);
    free(buf);
    t[0] = (float)(secs[0] * 1e6);
    t[1] = (float)(secs[1] * 1e6);
    if (st == RING_OK)
        st = ring_coll_rank0_value(comm, &t[0], CODEC_FIT_TENSOR + 2);
    if (st == RING_OK)
        st = ring_coll_rank0_value(comm, &t[1], CODEC_FIT_TENSOR + 2);
    return st;
}

ring_status_t ring_codec_fit(ring_comm_t *comm, ring_codec_fit_t *fit)
{
    float t[2];

    RING_CHECK(codec_time(comm, CODEC_FIT_BYTES, t));
    fit->fp32_us = (uint64_t)t[0];
    fit->codec_us = (uint64_t)t[1];
    fit->bytes = CODEC_FIT_BYTES;
    fit->codec_pays = t[1] < t[0];
    ring_log(RING_LOG_INFO, "codec auto: a %zu-byte allreduce took %.0f us as exact fp32 and "
             "%.0f us through fp16 (rank 0's times): %s for every call", CODEC_FIT_BYTES,
             (double)t[0], (double)t[1], fit->codec_pays ? "fp16" : "fp32");
    return RING_OK;
}

ring_status_t ring_comm_time_codec(ring_comm_t *comm, size_t bytes, double *fp32_us,
                                   double *codec_us)
{
    float t[2];

    if (comm == NULL || fp32_us == NULL || codec_us == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_time_codec: NULL argument");
    if (bytes < sizeof(float) || bytes > ((size_t)1 << 30))
        return ring_error_set(RING_ERR_INVALID, "ring_comm_time_codec: %zu bytes (4 B .. 1 GiB)",
                              bytes);
    *fp32_us = *codec_us = 0;
    if (comm->size < 2)
        return RING_OK;
    RING_CHECK(codec_time(comm, bytes, t));
    *fp32_us = t[0];
    *codec_us = t[1];
    return RING_OK;
}
