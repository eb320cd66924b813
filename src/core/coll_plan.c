/*
 * coll_plan.c - what the engine (allreduce.c) asks of each collective:
 * the communicator's buffers for them, laying each rank's block out as the
 * schedule's segments, and a request's start and end (allgather's copy of
 * this peer's block into place, reduce-scatter's scratch and copy out).
 * The calls users make are in collectives.c.
 */
#include "ring_build.h"

#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "comm_int.h"
#include "fail.h"

ring_status_t ring_coll_comm_alloc(ring_comm_t *comm)
{
    size_t n = (size_t)comm->size;

    for (int c = 0; c < RING_MAX_CHANNELS; c++)
        if ((comm->channels[c].segs = calloc(n, sizeof(ring_range_t))) == NULL)
            goto oom;
    for (int i = 0; i < RING_MAX_REQUESTS; i++)
        if ((comm->requests.slots[i].offsets = calloc(n + 1, sizeof(size_t))) == NULL)
            goto oom;
    if ((comm->coll.barrier_bytes = calloc(n, 1)) == NULL)
        goto oom;
    return RING_OK;
oom:
    return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the collectives' tables of %d "
                          "peers", comm->size);
}

void ring_coll_comm_free(ring_comm_t *comm)
{
    for (int c = 0; c < RING_MAX_CHANNELS; c++)
        free(comm->channels[c].segs);
    for (int i = 0; i < RING_MAX_REQUESTS; i++)
        free(comm->requests.slots[i].offsets);
    free(comm->coll.barrier_bytes);
    free(comm->coll.scratch);
}

static int place_of(const ring_comm_t *comm, int rank)
{
    for (int p = 0; p < comm->size; p++)
        if (comm->topo.order[p] == rank)
            return p;
    return 0;
}

void ring_coll_channel_layout(ring_comm_t *comm, ring_channel_t *ch, const ring_request_t *req)
{
    int n = comm->size;
    size_t esize = req->wire != RING_CODEC_NONE ? 2 : ring_dtype_size(req->dtype);
    ring_sched_kind_t kind = req->coll == RING_COLL_BROADCAST        ? RING_SCHED_BROADCAST
                             : req->coll == RING_COLL_ALLGATHER      ? RING_SCHED_ALLGATHER
                                                                     : RING_SCHED_REDUCE_SCATTER;
    int root_dist = 0;

    /* ranges are absolute: the channel's part is the whole buffer */
    ch->part.off = 0;
    ch->part.len = req->count;
    if (kind == RING_SCHED_BROADCAST) {
        ch->segs[0] = ring_sched_split(req->count, comm->nchannels, ch->index, RING_SCHED_ALIGN);
        root_dist = (comm->topo.pos - place_of(comm, req->root) + n) % n;
    } else {
        /* segment s is owned (after reduce-scatter) by the peer at place s - 1: its
         * rank's block, of which this channel takes its share */
        for (int s = 0; s < n; s++) {
            int r = comm->topo.order[(s - 1 + n) % n];
            size_t off = req->offsets[r], len = req->offsets[r + 1] - off;
            ring_range_t sub = ring_sched_split(len, comm->nchannels, ch->index, RING_SCHED_ALIGN);

            ch->segs[s].off = off + sub.off;
            ch->segs[s].len = sub.len;
        }
    }
    ring_sched_init_coll(&ch->sched, kind, comm->topo.pos, n, ch->segs, root_dist, esize,
                         comm->cfg.chunk_bytes);
}

ring_status_t ring_coll_request_begin(ring_comm_t *comm, ring_request_t *req)
{
    size_t esize = ring_dtype_size(req->dtype);

    if (req->coll == RING_COLL_ALLGATHER) {
        unsigned char *mine = (unsigned char *)req->recvbuf + req->offsets[comm->rank];
        size_t bytes = req->offsets[comm->rank + 1] - req->offsets[comm->rank];

        if (req->sendbuf != mine && bytes > 0)
            memmove(mine, req->sendbuf, bytes);
        req->sendbuf = req->recvbuf; /* sends read the segments in place */
    } else if (req->coll == RING_COLL_REDUCE_SCATTER && comm->size > 1) {
        size_t bytes = req->count * esize;

        if (comm->coll.scratch_bytes < bytes) {
            void *grown = realloc(comm->coll.scratch, bytes);
            if (grown == NULL)
                return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_NO_MEMORY,
                                                            .culprit = comm->rank, .step = -1},
                                      "round %llu: out of memory for reduce-scatter's scratch "
                                      "of %zu bytes", (unsigned long long)req->round, bytes);
            comm->coll.scratch = grown;
            comm->coll.scratch_bytes = bytes;
        }
        req->user_recvbuf = req->recvbuf;
        req->recvbuf = comm->coll.scratch;
    }
    return RING_OK;
}

void ring_coll_request_finish(ring_comm_t *comm, ring_request_t *req, ring_status_t status)
{
    if (req->coll != RING_COLL_REDUCE_SCATTER || req->user_recvbuf == NULL)
        return;
    /* a non-finite result is still a result; a failed one leaves recvbuf undefined.
     * Uncompressed, allreduce.c's reduce_f32 wrote the sums in place already */
    if ((status == RING_OK || status == RING_ERR_NONFINITE) && req->wire != RING_CODEC_NONE) {
        size_t esize = ring_dtype_size(req->dtype), block = req->count / (size_t)comm->size;
        memcpy(req->user_recvbuf, (const char *)req->recvbuf + (size_t)comm->rank * block * esize,
               block * esize);
    }
    req->recvbuf = req->user_recvbuf;
    req->user_recvbuf = NULL;
}
