/*
 * hier.c - hierarchical allreduce, for several peers per host on several
 * hosts (Horovod's hierarchical allreduce; NCCL's rings cross each node
 * once): the peers of a host reduce-scatter among themselves (shared memory
 * with --transport shm), each then allreduces its slice with the peers of
 * the same local index on the other hosts, and the host allgathers the
 * slices. Only 1/L of the buffer crosses a host's link per peer, so a host
 * sends S in all where the flat ring sends 2(N-1)/N S.
 *
 * Built from two more communicators, opened once the ring is up: "local"
 * (this host's peers) and "cross" (the peers of this local index, one per
 * host). Their ports are chosen free here and exchanged with an allgather
 * over the ring. A hierarchical allreduce is one request of the ring that
 * drives requests of the two (hier_progress, reached through comm->hier_ops).
 * Every peer gets bitwise the same result: the last phase copies the same
 * bytes everywhere. The sums are added in another order than the flat ring's,
 * so they may differ from it by rounding (exact for exactly summable data).
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_int.h"
#include "hier.h"
#include "log.h"
#include "transport.h"

/* In flight on one sub-ring: at most this many requests (its FIFO order is the
 * same on every peer: the schedule below is a fixed sequence). */
#define HIER_INFLIGHT 2
#define HIER_LINGER_NS (200 * 1000 * 1000) /* ring_hier_close after a failure */

typedef struct hier_slot {
    ring_request_t *req;
    int piece;
} hier_slot_t;

struct ring_hier {
    ring_comm_t *local, *cross;
    ring_hier_open_fn open_fn;   /* ring_comm_open and _close, lent by comm_open.c (hier.c */
    ring_hier_close_fn close_fn; /* sits above the engine: no call may come back up) */
    int local_size, local_rank, hosts, host_index;
    size_t min_bytes;            /* smaller allreduces stay on the flat ring */
    char local_map[256], cross_map[256]; /* "0 is rank 0, 1 is rank 2": for messages */
    int *local_members, *cross_members;  /* the sub-rings' ranks as the ring's */
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

/* Two free ports on host, held by listeners (so that no other peer of this host
 * is given them) until the sub-rings open on them: closed one at a time, just
 * before (port_hold_release). */
typedef struct port_hold {
    ring_tp_t *tp;
    ring_tp_listener_t *l[2];
} port_hold_t;

static void port_hold_release(port_hold_t *ph, int which)
{
    const ring_tp_ops_t *tcp = ring_tp_find("tcp");

    if (ph->l[which] != NULL)
        tcp->listener_close(ph->l[which]);
    ph->l[which] = NULL;
    if (ph->l[0] == NULL && ph->l[1] == NULL && ph->tp != NULL) {
        tcp->fini(ph->tp);
        ph->tp = NULL;
    }
}

static ring_status_t port_hold(port_hold_t *ph, const char *host, int ports[2])
{
    const ring_tp_ops_t *tcp = ring_tp_find("tcp");
    ring_tp_params_t params;
    ring_status_t st;

    memset(&params, 0, sizeof(params));
    memset(ph, 0, sizeof(*ph));
    RING_CHECK(tcp->init(&params, &ph->tp));
    for (int i = 0; i < 2; i++) {
        st = tcp->listen(ph->tp, host, 0, &ph->l[i]);
        if (st != RING_OK) {
            port_hold_release(ph, 0);
            port_hold_release(ph, 1);
            return st;
        }
        ports[i] = tcp->listener_port(ph->l[i]);
    }
    return RING_OK;
}

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
            if (strcmp(comm->hosts[q], comm->hosts[r]) == 0)
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

/* "0 is rank 4, 1 is rank 5": the sub-ring's ranks as the ring's, for messages. */
static void rank_map(const int *members, int n, char *buf, size_t len)
{
    size_t k = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && k + 32 < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d is rank %d", i ? ", " : "", i, members[i]);
}

/* Open one of the two: rank `me` of the `n` ranks in members[], on ports[r]. */
static ring_status_t open_sub(ring_comm_t *comm, ring_hier_open_fn open_fn, const char *what,
                              const int *members, int n, int me, const int *ports, int which,
                              int tag, ring_comm_t **sub_p)
{
    ring_config_t cfg;
    char *peers = calloc((size_t)n, 300), num[32], job[RING_CONFIG_STR_MAX];
    size_t len = 0;
    ring_status_t st;

    if (peers == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the %s ring", what);
    for (int i = 0; i < n; i++) {
        ring_peer_addr_t a = comm->peers[members[i]];
        char one[300];

        a.port = ports[2 * members[i] + which];
        ring_peer_format(&a, one, sizeof(one));
        len += (size_t)snprintf(peers + len, (size_t)n * 300 - len, "%s%s", i ? "," : "", one);
    }
    st = ring_config_copy(&cfg, &comm->cfg);
    snprintf(job, sizeof(job), "%.200s/%s%d", comm->cfg.job_id, what, tag);
#define SET(_name, _value)                                                                \
    if (st == RING_OK)                                                                    \
    st = ring_config_set(&cfg, _name, _value, RING_SRC_API)
    snprintf(num, sizeof(num), "%d", me);
    SET("rank", num);
    snprintf(num, sizeof(num), "%d", n);
    SET("world-size", num);
    SET("peers", peers);
    SET("rendezvous", "");
    SET("job-id", job);
    SET("progress-thread", "off"); /* the ring's progress drives it */
    SET("autotune", "off");
    SET("timeline", "");
    SET("hierarchical", "off");
    SET("host-id", ""); /* a rendezvous setting: the sub-rings have peer lists */
#undef SET
    if (st == RING_OK)
        st = open_fn(&cfg, sub_p);
    ring_log_set_rank(comm->rank); /* the sub-ring's open named its own rank */
    ring_config_free(&cfg);
    free(peers);
    if (st != RING_OK) {
        char why[900];

        snprintf(why, sizeof(why), "%s", ring_last_error()); /* not the buffer it formats into */
        return ring_error_set(st, "hierarchical allreduce: the %s ring of %d peers did not form "
                              "(--hierarchical off avoids it): %s", what, n, why);
    }
    return RING_OK;
}

static const ring_hier_ops_t hier_ops;

ring_status_t ring_hier_open(ring_comm_t *comm, ring_hier_open_fn open_fn,
                             ring_hier_close_fn close_fn)
{
    const char *mode = comm->cfg.hierarchical;
    int *host_of = NULL, *local_of = NULL, *ports = NULL, *members = NULL;
    int my_ports[2], hosts = 0, local_size = 0, n = 0;
    port_hold_t ph = {0};
    char why[200];
    ring_status_t st = RING_OK;
    struct ring_hier *h;

    if (strcmp(mode, "off") == 0 || (strcmp(mode, "auto") == 0 && comm->size < 4))
        return RING_OK;
    host_of = calloc((size_t)comm->size, sizeof(int));
    local_of = calloc((size_t)comm->size, sizeof(int));
    ports = calloc((size_t)comm->size * 2, sizeof(int));
    members = calloc((size_t)comm->size, sizeof(int));
    h = calloc(1, sizeof(*h));
    if (h != NULL) {
        h->open_fn = open_fn;
        h->close_fn = close_fn;
    }
    if (host_of == NULL || local_of == NULL || ports == NULL || members == NULL || h == NULL) {
        st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the hierarchical allreduce");
        goto out;
    }
    if (group_ranks(comm, host_of, local_of, &hosts, &local_size, why, sizeof(why)) != 0) {
        if (strcmp(mode, "on") == 0)
            st = ring_error_set(RING_ERR_INVALID, "--hierarchical on: %s (or use --hierarchical "
                                "auto or off)", why);
        else
            ring_log(RING_LOG_DEBUG, "hierarchical allreduce: off, because %s", why);
        goto out;
    }
    /* both rings' ports, chosen free on this peer's ring address, for everyone */
    st = port_hold(&ph, comm->peers[comm->rank].host, my_ports);
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
    port_hold_release(&ph, 0);
    rank_map(members, n, h->local_map, sizeof(h->local_map));
    h->local_members = malloc((size_t)n * sizeof(int));
    if (h->local_members == NULL) {
        st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the hierarchical allreduce");
        goto out;
    }
    memcpy(h->local_members, members, (size_t)n * sizeof(int));
    st = open_sub(comm, open_fn, "local", members, n, h->local_rank, ports, 0, h->host_index, &h->local);
    if (st != RING_OK)
        goto out;
    n = 0;
    for (int r = 0; r < comm->size; r++)
        if (local_of[r] == h->local_rank)
            members[n++] = r;
    port_hold_release(&ph, 1);
    rank_map(members, n, h->cross_map, sizeof(h->cross_map));
    h->cross_members = malloc((size_t)n * sizeof(int));
    if (h->cross_members == NULL) {
        st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the hierarchical allreduce");
        goto out;
    }
    memcpy(h->cross_members, members, (size_t)n * sizeof(int));
    st = open_sub(comm, open_fn, "cross", members, n, h->host_index, ports, 1, h->local_rank, &h->cross);
    if (st != RING_OK)
        goto out;
    ring_log(RING_LOG_INFO, "hierarchical allreduce: %d hosts x %d peers (local ring over %s, "
             "cross ring over %s), for allreduces of %zu bytes and more", hosts, local_size,
             ring_comm_transport(h->local), ring_comm_transport(h->cross), h->min_bytes);
    comm->hier = h;
    comm->hier_ops = &hier_ops;
    h = NULL;
out:
    if (h != NULL) {
        close_fn(h->local);
        close_fn(h->cross);
        free(h->local_members);
        free(h->cross_members);
        free(h);
    }
    port_hold_release(&ph, 0);
    port_hold_release(&ph, 1);
    free(host_of);
    free(local_of);
    free(ports);
    free(members);
    return st;
}

void ring_hier_close(ring_comm_t *comm)
{
    struct ring_hier *h = comm->hier;

    if (h == NULL)
        return;
    if (comm->error != RING_OK) {
        /* the ring's ABORT names the culprit and is on its way to every peer: give
         * it a head start, or a peer of a sub-ring that sees our CLOSE there first
         * would name us instead */
        struct timespec linger = {0, HIER_LINGER_NS};
        nanosleep(&linger, NULL);
    }
    h->close_fn(h->local);
    h->close_fn(h->cross);
    free(h->pad);
    free(h->slice);
    free(h->local_members);
    free(h->cross_members);
    free(h);
    comm->hier = NULL;
    comm->hier_ops = NULL;
}

static int hier_takes(const ring_comm_t *comm, const ring_request_t *req)
{
    const struct ring_hier *h = comm->hier;

    return h != NULL && req->coll == RING_COLL_ALLREDUCE && req->dtype == RING_FLOAT32 &&
           req->dev_recvbuf == NULL && req->count * sizeof(float) >= h->min_bytes;
}

/* Start a request of one of the two rings; a failure fails the ring, naming it. */
static ring_status_t sub_failed(ring_comm_t *comm, const char *what, ring_status_t st)
{
    const struct ring_hier *h = comm->hier;
    int cross = strcmp(what, "cross") == 0;
    const ring_comm_t *sub = cross ? h->cross : h->local;
    int culprit = sub->error != RING_OK && sub->error_culprit >= 0 && sub->error_culprit < sub->size
                      ? (cross ? h->cross_members : h->local_members)[sub->error_culprit]
                      : -1;
    char msg[700];

    /* the peers learn the culprit as the ring's rank (the sub-ring's own number
     * would name another peer) */
    snprintf(msg, sizeof(msg), "%s", ring_last_error());
    return ring_comm_fail(comm, &(ring_fault_t){.status = st, .culprit = culprit, .step = -1},
                          "hierarchical allreduce, %s ring: %s (in the %s ring %s)", what, msg,
                          what, strcmp(what, "cross") == 0 ? h->cross_map : h->local_map);
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
    struct ring_hier *h = comm->hier;
    unsigned flags = h->req->exact ? RING_CALL_EXACT : 0;
    /* whole pieces straight from the caller's buffers, the last (padded) one from pad */
    int whole = (size_t)(k + 1) * h->piece_elems <= h->req->count;
    const float *in = whole ? (const float *)h->req->sendbuf + (size_t)k * h->piece_elems : h->pad;
    float *out = whole ? (float *)h->req->recvbuf + (size_t)k * h->piece_elems : h->pad;
    float *slice = h->slice + (size_t)k * h->piece_block;
    hier_slot_t *slot = &h->local_q[h->local_n];
    ring_status_t st;

    st = is_ag ? ring_allgather_start(h->local, slice, out, h->piece_block * sizeof(float),
                                      h->req->tensor_id, &slot->req)
               : ring_reduce_scatter_start(h->local, in, slice, h->piece_block, RING_FLOAT32,
                                           RING_SUM, h->req->tensor_id, flags, &slot->req);
    if (st != RING_OK)
        return sub_failed(comm, "local", st);
    slot->piece = is_ag ? -1 - k : k; /* negative: an allgather */
    h->local_n++;
    return RING_OK;
}

static ring_status_t start_cross(ring_comm_t *comm, int k)
{
    struct ring_hier *h = comm->hier;
    unsigned flags = h->req->exact ? RING_CALL_EXACT : 0;
    float *slice = h->slice + (size_t)k * h->piece_block;
    hier_slot_t *slot = &h->cross_q[h->cross_n];
    ring_status_t st;

    st = ring_allreduce_start_flags(h->cross, slice, slice, h->piece_block, RING_FLOAT32,
                                    RING_SUM, h->req->tensor_id, flags, &slot->req);
    if (st != RING_OK)
        return sub_failed(comm, "cross", st);
    slot->piece = k;
    h->cross_n++;
    return RING_OK;
}

/* Collect the oldest finished request of a queue (FIFO: they finish in order). */
static ring_status_t reap(ring_comm_t *comm, hier_slot_t *q, int *n, const char *what,
                          int *piece_p)
{
    ring_status_t st;

    *piece_p = INT32_MIN;
    if (*n == 0 || !q[0].req->done)
        return RING_OK;
    st = ring_request_wait(q[0].req); /* done: releases its slot */
    *piece_p = q[0].piece;
    memmove(q, q + 1, (size_t)(*n - 1) * sizeof(*q));
    (*n)--;
    if (st == RING_ERR_NONFINITE) {
        comm->hier->req->nonfinite = 1;
        return RING_OK;
    }
    return st == RING_OK ? RING_OK : sub_failed(comm, what, st);
}

static ring_status_t hier_begin(ring_comm_t *comm, ring_request_t *req)
{
    struct ring_hier *h = comm->hier;
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
    struct ring_hier *h = comm->hier;

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
    struct ring_hier *h = comm->hier;
    int moved, piece;

    *finished_p = 0;
    if (comm->error != RING_OK)
        return comm->error;
    RING_CHECK(hier_start_more(comm));
    moved = ring_comm_progress(h->local);
    moved = moved < 0 ? 1 : moved + (h->hosts > 1 ? ring_comm_progress(h->cross) : 0);
    if (moved > 0)
        *moved_p += moved;
    for (;;) {
        RING_CHECK(reap(comm, h->local_q, &h->local_n, "local", &piece));
        if (piece == INT32_MIN)
            break;
        *moved_p += 1;
        if (piece >= 0)
            h->rs_done_upto = piece + 1;
        else
            h->ag_done = -piece; /* AG(k) done: k + 1 pieces */
    }
    for (;;) {
        RING_CHECK(reap(comm, h->cross_q, &h->cross_n, "cross", &piece));
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
    struct ring_hier *h = comm->hier;
    ring_comm_t *sub;

    if (h == NULL || h->req == NULL)
        return 0;
    /* the cross ring is the slow one; the local ring's and the ring's own events
     * (an ABORT) are seen within 2 ms */
    sub = h->cross_n > 0 ? h->cross : h->local;
    sub->tp_ops->wait(sub->tp, timeout_ms < 2 ? timeout_ms : 2);
    return 1;
}

static const ring_hier_ops_t hier_ops = {
    .takes = hier_takes,
    .begin = hier_begin,
    .progress = hier_progress,
    .wait = hier_wait,
};
