/*
 * autotune.c - --autotune on: right after the ring is up, time allreduces of
 * --autotune-bytes with every pair of a chunk size (--autotune-chunks) and
 * a channel count (--autotune-channels) on the real ring, and keep the
 * fastest, like Horovod's autotuner but once, at start-up.
 *
 * The ring is connected with the most channels of the list and the
 * buffers are sized for the largest chunk, so switching between
 * candidates only changes two numbers. Every peer times every candidate
 * the same way; rank 0's times decide (an allreduce ends on all peers at
 * about the same moment) and its choice reaches the others through one
 * exact allreduce, so every peer switches to the same setting.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autotune.h"
#include "clock.h"
#include "collectives.h"
#include "comm_int.h"
#include "log.h"
#include "parse.h"

#define AUTOTUNE_TENSOR 0xfffffff0u /* a tensor id no user picks: its own error feedback */
#define AUTOTUNE_CALLS 3            /* timed calls per candidate, after one warm-up */

/* Seconds per allreduce of count floats with the comm's current chunk and channels. */
static ring_status_t autotune_time(ring_comm_t *comm, float *buf, size_t count, double *secs)
{
    double t0 = 0;

    for (int i = 0; i <= AUTOTUNE_CALLS; i++) {
        ring_request_t *req;

        if (i == 1)
            t0 = ring_now();
        RING_CHECK(ring_allreduce_start(comm, buf, buf, count, RING_FLOAT32, RING_AVG,
                                        AUTOTUNE_TENSOR, &req));
        RING_CHECK(ring_request_wait(req));
    }
    *secs = (ring_now() - t0) / AUTOTUNE_CALLS;
    return RING_OK;
}

static void autotune_set(ring_comm_t *comm, size_t chunk, int channels)
{
    comm->cfg.chunk_bytes = chunk;
    comm->nchannels = channels;
}

ring_status_t ring_autotune(ring_comm_t *comm)
{
    const ring_autotune_space_t *sp = &comm->tune.space;
    size_t count = comm->cfg.autotune_bytes / sizeof(float);
    int ncand = sp->nchunks * sp->nchannels, best = 0;
    double *secs = calloc((size_t)ncand, sizeof(double));
    float *buf = malloc(count * sizeof(float)), choice = 0;
    char fmt[32], *desc = comm->tune.desc;
    size_t used = 0, dlen = sizeof(comm->tune.desc);
    double factor = 2.0 * (comm->size - 1) / comm->size, bytes = (double)count * sizeof(float);
    ring_status_t st = RING_OK;

    if (secs == NULL || buf == NULL) {
        st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for autotune's %zu-byte buffer",
                            count * sizeof(float));
        goto out;
    }
    for (size_t i = 0; i < count; i++)
        buf[i] = (float)(i % 251) * 0.25f;
    for (int c = 0; c < ncand && st == RING_OK; c++) {
        autotune_set(comm, sp->chunks[c / sp->nchannels], sp->channels[c % sp->nchannels]);
        st = autotune_time(comm, buf, count, &secs[c]);
        if (secs[c] < secs[best])
            best = c;
    }
    if (st != RING_OK)
        goto out;
    /* rank 0's choice for everyone: the others add 0 */
    choice = (float)(best + 1);
    st = ring_coll_rank0_value(comm, &choice, AUTOTUNE_TENSOR + 1);
    if (st != RING_OK)
        goto out;
    best = (int)choice - 1;
    if (best < 0 || best >= ncand) {
        st = ring_error_set(RING_ERR_INTERNAL, "autotune: rank 0 chose candidate %d of %d",
                            best, ncand);
        goto out;
    }
    autotune_set(comm, sp->chunks[best / sp->nchannels], sp->channels[best % sp->nchannels]);
    ring_format_size(comm->cfg.chunk_bytes, fmt, sizeof(fmt));
    used += (size_t)snprintf(desc, dlen, "autotune chose chunk %s x %d channel%s, rank 0's "
                             "fastest; busbw this peer measured (chunk x channels: GB/s):",
                             fmt, comm->nchannels, comm->nchannels > 1 ? "s" : "");
    for (int c = 0; c < ncand && used < dlen; c++) {
        ring_format_size(sp->chunks[c / sp->nchannels], fmt, sizeof(fmt));
        used += (size_t)snprintf(desc + used, dlen - used, "%s %sx%d: %.3f", c ? "," : "", fmt,
                                 sp->channels[c % sp->nchannels], bytes / secs[c] * factor / 1e9);
    }
    ring_log(RING_LOG_INFO, "%s", desc);
out:
    free(secs);
    free(buf);
    return st;
}
