/*
 * hier.c - hierarchical allreduce, for several peers per host on several
 * hosts (Horovod's hierarchical allreduce; NCCL's rings cross each node
 * once): the peers of a host reduce-scatter among themselves (shared memory
 * with --transport shm or auto, even where the cross ring runs verbs), each
 * then allreduces its slice with the peers of the same local index on the
 * other hosts, and the host allgathers the slices. Only 1/L of the buffer
 * crosses a host's link per peer, so a host sends S in all where the flat
 * ring sends 2(N-1)/N S.
 *
 * Built from two more communicators, opened once the ring is up: "local"
 * (this host's peers) and "cross" (the peers of this local index, one per
 * host). Their ports are chosen free here and exchanged with an allgather
 * over the ring. A hierarchical allreduce is one request of the ring that
 * drives requests of the two (hier_progress, reached through comm->algo.ops).
 * Every peer gets bitwise the same result: the last phase copies the same
 * bytes everywhere. The sums are added in another order than the flat ring's,
 * so they may differ from it by rounding (exact for exactly summable data).
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "hier.h"
#include "log.h"
#include "subcomm.h"
#include "transport.h"

/* In flight on one sub-ring: at most this many requests (its FIFO order is the
 * same on every peer: the schedule below is a fixed sequence). */
#define HIER_INFLIGHT 2

typedef struct hier_slot {
    ring_request_t *req;
    int piece;
} hier_slot_t;

struct ring_hier {
    ring_sub_t local, cross;
    ring_sub_close_fn close_fn;  /* ring_comm_close, lent by comm_open.c */
    int local_size, local_rank, hosts, host_index;
    size_t min_bytes;            /* smaller allreduces stay on the flat ring */
    /* the request under way: the buffer in pieces, each reduce-scattered on the
     * local ring, its slice allreduced on the cross ring, allgathered locally;
     * piece k's cross allreduce overlaps piece k+1's reduce-scatter and piece
     * k-1's allgather (the local ring's order: RS0 RS1 AG0 RS2 AG1 ... AG(P-1)) */
    ring_request_t *req;         /* the ring's request, NULL when idle */
    float *pad, *slice;          /* the last piece, padded; pieces * piece_block */
    size_t pad_count, slice_count, piece_elems, piece_block;
    int pieces;
    int local_next;              /* next entry of the local sequence to start */
    int cross_next;              /* next piece to allreduce on the cross ring */
    int cross_done;              /* pieces whose cross allreduce finished, in order */
    int ag_done;                 /* pieces allgathered */
    hier_slot_t local_q[HIER_INFLIGHT], cross_q[HIER_INFLIGHT];
    int local_n, cross_n;
    int rs_done_upto;            /* pieces reduce-scattered, in order */
};

/* Group the ranks by host: host index (in order of first appearance) and local
 * index (rank order within the host). 0 when every host has the same number
 * (>= 2) of peers and there are >= 2 hosts; else why in words. */
static int group_ranks(const ring_comm_t *comm, int *host_of, int *local_of, int *hosts_p,
                       int *local_size_p, char *why, size_t whylen)
{
    int hosts = 0, *count = calloc((size_t)comm->size, sizeof(int));

    if (count == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (int r = 0; r < comm->size; r++) {
        int h = -1;
        for (int q = 0; q < r && h < 0; q++)
            if (strcmp(comm->topo.hosts[q], comm->topo.hosts[r]) == 0)
                h = host_of[q];
        if (h < 0)
            h = hosts++;
        host_of[r] = h;
        local_of[r] = count[h]++;
    }
    *hosts_p = hosts;
    *local_size_p = count[0];
    for (int h = 0; h < hosts; h++)
        if (count[h] != count[0]) {
            snprintf(why, whylen, "the hosts run different numbers of peers (%d and %d)",
                     count[0], count[h]);
            free(count);
            return -1;
        }
    free(count);
    if (hosts < 2 || *local_size_p < 2) {
        snprintf(why, whylen, "%d host%s with %d peer%s each: it needs >= 2 hosts with >= 2 "
                 "peers each", hosts, hosts == 1 ? "" : "s", *local_size_p,
                 *local_size_p == 1 ? "" : "s");
        return -1;
    }
    return 0;
}

static const ring_algo_ops_t hier_ops;
static const char *const local_shm[] = {"transport", "shm", NULL};
static const ring_sub_owner_t hier_owner = {"hierarchical allreduce", "--hierarchical off"};

ring_status_t ring_hier_open(ring_comm_t *comm, ring_sub_open_fn open_fn,
                             ring_sub_close_fn close_fn)
{
    ring_cfg_hier_t mode = comm->cfg.hierarchical;
    int *host_of = NULL, *local_of = NULL, *ports = NULL, *members = NULL;
    int my_ports[2], hosts = 0, local_size = 0, n = 0;
    ring_port_hold_t ph = {0};
    char why[200], tag[32];
    const char *cross_tp[] = {"transport", NULL, NULL};
    ring_status_t st = RING_OK;
    struct ring_hier *h;

    if (mode == RING_CFG_HIER_OFF || (mode == RING_CFG_HIER_AUTO && comm->size < 4))
        return RING_OK;
    host_of = calloc((size_t)comm->size, sizeof(int));
    local_of = calloc((size_t)comm->size, sizeof(int));
    ports = calloc((size_t)comm->size * 2, sizeof(int));
    members = calloc((size_t)comm->size, sizeof(int));
    h = calloc(1, sizeof(*h));
    if (h != NULL)
        h->close_fn = close_fn;
    if (host_of == NULL || local_of == NULL || ports == NULL || members == NULL || h == NULL) {
        st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the hierarchical allreduce");
        goto out;
    }
    if (group_ranks(comm, host_of, local_of, &hosts, &local_size, why, sizeof(why)) != 0) {
        if (mode == RING_CFG_HIER_ON)
            st = ring_error_set(RING_ERR_INVALID, "--hierarchical on: %s (or use --hierarchical "
                                "auto or off)", why);
        else
            ring_log(RING_LOG_DEBUG, "hierarchical allreduce: off, because %s", why);
        goto out;
    }
    /* both rings' ports, chosen free on this peer's ring address, for everyone */
    st = ring_port_hold(&ph, comm->topo.peers[comm->rank].host, 2, my_ports);
    if (st == RING_OK)
        st = ring_allgather(comm, my_ports, ports, sizeof(my_ports));
    if (st != RING_OK)
        goto out;
    h->hosts = hosts;
    h->local_size = local_size;
    h->host_index = host_of[comm->rank];
    h->local_rank = local_of[comm->rank];
    h->min_bytes = comm->cfg.hier_min_bytes;
    n = 0;
    for (int r = 0; r < comm->size; r++)
        if (host_of[r] == h->host_index)
            members[n++] = r;
    ring_port_hold_release(&ph, 0);
    snprintf(tag, sizeof(tag), "local%d", h->host_index);
    /* auto: the local ring in shared memory even where the ring runs verbs (the
     * cross ring keeps auto); not under a bandwidth cap, which only tcp keeps */
    st = ring_sub_open(comm, &hier_owner, open_fn, &h->local, "local ring", members, n,
                       h->local_rank, ports, 2, 0, tag,
                       comm->cfg.transport == RING_CFG_TRANSPORT_AUTO &&
                               comm->cfg.rate_limit_bps <= 0 ? local_shm : NULL);
    if (st != RING_OK)
        goto out;
    n = 0;
    for (int r = 0; r < comm->size; r++)
        if (local_of[r] == h->local_rank)
            members[n++] = r;
    ring_port_hold_release(&ph, 1);
    snprintf(tag, sizeof(tag), "cross%d", h->local_rank);
    /* auto: what the ring chose (its peers are on other hosts, one each). Left to
     * choose again it would look at the peer list alone, which drops --host-id:
     * one machine standing in for several hosts would look like one host */
    cross_tp[1] = ring_comm_transport(comm);
    st = ring_sub_open(comm, &hier_owner, open_fn, &h->cross, "cross ring", members, n,
                       h->host_index, ports, 2, 1, tag,
                       comm->cfg.transport == RING_CFG_TRANSPORT_AUTO ? cross_tp : NULL);
    if (st != RING_OK)
        goto out;
    ring_log(RING_LOG_INFO, "hierarchical allreduce: %d hosts x %d peers (local ring over %s, "
             "cross ring over %s), for allreduces of %zu bytes and more", hosts, local_size,
             ring_comm_transport(h->local.comm), ring_comm_transport(h->cross.comm),
             h->min_bytes);
    comm->algo.hier = h;
    comm->algo.ops[RING_ALGO_HIER] = &hier_ops;
    h = NULL;
out:
    if (h != NULL) {
        ring_sub_close(&h->local, close_fn);
        ring_sub_close(&h->cross, close_fn);
        free(h);
    }
    ring_port_hold_release(&ph, -1);
    free(host_of);
    free(local_of);
    free(ports);
    free(members);
    return st;
}

void ring_hier_close(ring_comm_t *comm)
{
    struct ring_hier *h = comm->algo.hier;

    if (h == NULL)
        return;
    ring_sub_close(&h->local, h->close_fn);
    ring_sub_close(&h->cross, h->close_fn);
    free(h->pad);
    free(h->slice);
    free(h);
    comm->algo.hier = NULL;
    comm->algo.ops[RING_ALGO_HIER] = NULL;
}

static int hier_takes(const ring_comm_t *comm, const ring_request_t *req)
{
    const struct ring_hier *h = comm->algo.hier;

    return h != NULL && req->coll == RING_COLL_ALLREDUCE && req->dtype == RING_FLOAT32 &&
           req->dev_recvbuf == NULL && req->count * sizeof(float) >= h->min_bytes;
}

/* Entry i of the local ring's sequence RS0 RS1 AG0 RS2 AG1 ... RS(P-1) AG(P-2) AG(P-1):
 * *is_ag and *piece. */
static void local_entry(int pieces, int i, int *is_ag, int *piece)
{
    if (i < 2 || pieces < 2) {
        /* RS0, then RS1 (or AG0 when there is one piece) */
        *is_ag = pieces < 2 ? i : 0;
        *piece = pieces < 2 ? 0 : i;
        return;
    }
    if (i >= 2 * pieces - 1) { /* the last: AG(P-1) */
        *is_ag = 1;
        *piece = pieces - 1;
        return;
    }
    /* i = 2..2P-2 alternates AG(k), RS(k+2) from k = 0 */
    *is_ag = i % 2 == 0;
    *piece = *is_ag ? (i - 2) / 2 : (i - 1) / 2 + 1;
}

static ring_status_t start_local(ring_comm_t *comm, int is_ag, int k)
{
    struct ring_hier *h = comm->algo.hier;
    unsigned flags = h->req->exact ? RING_CALL_EXACT : 0;
    /* whole pieces straight from the caller's buffers, the last (padded) one from pad */
    int whole = (size_t)(k + 1) * h->piece_elems <= h->req->count;
    const float *in = whole ? (const float *)h->req->sendbuf + (size_t)k * h->piece_elems : h->pad;
    float *out = whole ? (float *)h->req->recvbuf + (size_t)k * h->piece_elems : h->pad;
    float *slice = h->slice + (size_t)k * h->piece_block;
    hier_slot_t *slot = &h->local_q[h->local_n];
    ring_status_t st;

    st = is_ag ? ring_allgather_start(h->local.comm, slice, out, h->piece_block * sizeof(float),
                                      h->req->tensor_id, &slot->req)
               : ring_reduce_scatter_start(h->local.comm, in, slice, h->piece_block, RING_FLOAT32,
                                           RING_SUM, h->req->tensor_id, flags, &slot->req);
    if (st != RING_OK)
        return ring_sub_fail(comm, &hier_owner, &h->local, st);
    slot->piece = is_ag ? -1 - k : k; /* negative: an allgather */
    h->local_n++;
    return RING_OK;
}

static ring_status_t start_cross(ring_comm_t *comm, int k)
{
    struct ring_hier *h = comm->algo.hier;
    unsigned flags = h->req->exact ? RING_CALL_EXACT : 0;
    float *slice = h->slice + (size_t)k * h->piece_block;
    hier_slot_t *slot = &h->cross_q[h->cross_n];
    ring_status_t st;

    st = ring_allreduce_start_flags(h->cross.comm, slice, slice, h->piece_block, RING_FLOAT32,
                                    RING_SUM, h->req->tensor_id, flags, &slot->req);
    if (st != RING_OK)
        return ring_sub_fail(comm, &hier_owner, &h->cross, st);
    slot->piece = k;
    h->cross_n++;
    return RING_OK;
}

/* Collect the oldest finished request of a queue (FIFO: they finish in order). */
static ring_status_t reap(ring_comm_t *comm, hier_slot_t *q, int *n, ring_sub_t *sub,
                          int *piece_p)
{
    ring_request_t *req;

    *piece_p = INT32_MIN;
    if (*n == 0 || !q[0].req->done)
        return RING_OK;
    req = q[0].req;
    *piece_p = q[0].piece;
    memmove(q, q + 1, (size_t)(*n - 1) * sizeof(*q));
    (*n)--;
    ring_sub_add_stats(comm, sub); /* its frames count as the ring's */
    return ring_sub_reap(comm, &hier_owner, sub, req, &comm->algo.hier->req->nonfinite);
}

static ring_status_t hier_begin(ring_comm_t *comm, ring_request_t *req)
{
    struct ring_hier *h = comm->algo.hier;
    size_t L = (size_t)h->local_size, unit = L * 16, piece, total, tail;

    /* pieces of about 2 MiB (the pipeline's grain), each a multiple of L x 16
     * elements so that the local reduce-scatter's blocks are equal */
    piece = ((size_t)512 << 10) / unit * unit;
    if (piece == 0)
        piece = unit;
    if (req->count <= piece)
        piece = (req->count + unit - 1) / unit * unit;
    h->pieces = (int)((req->count + piece - 1) / piece);
    total = (size_t)h->pieces * piece;
    if (piece > h->pad_count || total / L > h->slice_count) {
        float *pad = realloc(h->pad, piece * sizeof(float));
        float *slice = pad != NULL ? realloc(h->slice, total / L * sizeof(float)) : NULL;

        if (pad != NULL)
            h->pad = pad;
        if (slice != NULL)
            h->slice = slice;
        if (pad == NULL || slice == NULL)
            return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_NO_MEMORY,
                                                        .culprit = comm->rank, .step = -1},
                                  "hierarchical allreduce: out of memory for %zu elements", total);
        h->pad_count = piece;
        h->slice_count = total / L;
    }
    h->piece_elems = piece;
    h->piece_block = piece / L;
    /* the last piece, when the buffer does not end with a whole one: padded with zeros */
    tail = req->count - (size_t)(h->pieces - 1) * piece;
    if (tail < piece) {
        memcpy(h->pad, (const float *)req->sendbuf + (req->count - tail), tail * sizeof(float));
        memset(h->pad + tail, 0, (piece - tail) * sizeof(float));
    }
    h->req = req;
    h->local_next = h->cross_next = h->cross_done = h->ag_done = h->rs_done_upto = 0;
    h->local_n = h->cross_n = 0;
    return RING_OK;
}

/* Start what the schedule allows now. */
static ring_status_t hier_start_more(ring_comm_t *comm)
{
    struct ring_hier *h = comm->algo.hier;

    while (h->local_next < 2 * h->pieces && h->local_n < HIER_INFLIGHT) {
        int is_ag, k;

        local_entry(h->pieces, h->local_next, &is_ag, &k);
        if (is_ag ? k >= h->cross_done : 0)
            break; /* its cross allreduce has not finished: wait (the order is fixed) */
        RING_CHECK(start_local(comm, is_ag, k));
        h->local_next++;
    }
    while (h->cross_next < h->pieces && h->cross_next < h->rs_done_upto &&
           h->cross_n < HIER_INFLIGHT) {
        RING_CHECK(start_cross(comm, h->cross_next));
        h->cross_next++;
    }
    return RING_OK;
}

static ring_status_t hier_progress(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                                   int *finished_p)
{
    struct ring_hier *h = comm->algo.hier;
    int moved, piece;

    *finished_p = 0;
    if (comm->fail.error != RING_OK)
        return comm->fail.error;
    RING_CHECK(hier_start_more(comm));
    moved = ring_comm_progress(h->local.comm);
    moved = moved < 0 ? 1 : moved + (h->hosts > 1 ? ring_comm_progress(h->cross.comm) : 0);
    if (moved > 0)
        *moved_p += moved;
    for (;;) {
        RING_CHECK(reap(comm, h->local_q, &h->local_n, &h->local, &piece));
        if (piece == INT32_MIN)
            break;
        *moved_p += 1;
        if (piece >= 0)
            h->rs_done_upto = piece + 1;
        else
            h->ag_done = -piece; /* AG(k) done: k + 1 pieces */
    }
    for (;;) {
        RING_CHECK(reap(comm, h->cross_q, &h->cross_n, &h->cross, &piece));
        if (piece == INT32_MIN)
            break;
        *moved_p += 1;
        h->cross_done = piece + 1;
    }
    RING_CHECK(hier_start_more(comm));
    if (h->ag_done < h->pieces)
        return RING_OK;
    {
        float *out = req->recvbuf;
        size_t tail = req->count - (size_t)(h->pieces - 1) * h->piece_elems;

        if (tail < h->piece_elems)
            memcpy(out + (req->count - tail), h->pad, tail * sizeof(float));
        if (req->op == RING_AVG) {
            float inv = 1.0f / (float)comm->size;
            for (size_t i = 0; i < req->count; i++)
                out[i] *= inv;
        }
    }
    h->req = NULL;
    *finished_p = 1;
    return RING_OK;
}

static int hier_wait(ring_comm_t *comm, int timeout_ms)
{
    struct ring_hier *h = comm->algo.hier;
    ring_comm_t *sub;

    if (h == NULL || h->req == NULL)
        return 0;
    /* the cross ring is the slow one; the local ring's and the ring's own events
     * (an ABORT) are seen within 2 ms */
    sub = h->cross_n > 0 ? h->cross.comm : h->local.comm;
    sub->tp_ops->wait(sub->tp, timeout_ms < 2 ? timeout_ms : 2);
    return 1;
}

static const ring_algo_ops_t hier_ops = {
    .takes = hier_takes,
    .begin = hier_begin,
    .progress = hier_progress,
    .wait = hier_wait,
};
