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
 * drives requests of the two (ring_hier_progress), one phase after another.
 * Every peer gets bitwise the same result: the last phase copies the same
 * bytes everywhere. The sums are added in another order than the flat ring's,
 * so they may differ from it by rounding (exact for exactly summable data).
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_int.h"
#include "hier.h"
#include "log.h"
#include "transport.h"

typedef enum hier_phase {
    HIER_IDLE = 0,
    HIER_LOCAL_RS,     /* local reduce-scatter of the padded buffer into the slice */
    HIER_CROSS,        /* cross allreduce of the slice */
    HIER_LOCAL_AG      /* local allgather of the slices */
} hier_phase_t;

struct ring_hier {
    ring_comm_t *local, *cross;
    int local_size, local_rank, hosts, host_index;
    size_t min_bytes;            /* smaller allreduces stay on the flat ring */
    char local_map[256], cross_map[256]; /* "0 is rank 0, 1 is rank 2": for messages */
    int *local_members, *cross_members;  /* the sub-rings' ranks as the ring's */
    /* the request under way */
    hier_phase_t phase;
    ring_request_t *sub;
    float *pad, *slice;          /* local_size * block, block */
    size_t pad_count, block;
};

/* A free port on host: a listener on port 0, asked, closed. */
static ring_status_t free_port(const char *host, int *port_p)
{
    const ring_tp_ops_t *tcp = ring_tp_find("tcp");
    ring_tp_params_t params;
    ring_tp_t *tp = NULL;
    ring_tp_listener_t *l = NULL;
    ring_status_t st;

    memset(&params, 0, sizeof(params));
    RING_CHECK(tcp->init(&params, &tp));
    st = tcp->listen(tp, host, 0, &l);
    if (st == RING_OK) {
        *port_p = tcp->listener_port(l);
        tcp->listener_close(l);
    }
    tcp->fini(tp);
    return st;
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
static ring_status_t open_sub(ring_comm_t *comm, const char *what, const int *members, int n,
                              int me, const int *ports, int which, int tag, ring_comm_t **sub_p)
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
#undef SET
    if (st == RING_OK)
        st = ring_comm_open(&cfg, sub_p);
    ring_log_set_rank(comm->rank); /* the sub-ring's open named its own rank */
    ring_config_free(&cfg);
    free(peers);
    if (st != RING_OK)
        return ring_error_set(st, "hierarchical allreduce: the %s ring of %d peers did not form "
                              "(--hierarchical off avoids it): %s", what, n, ring_last_error());
    return RING_OK;
}

ring_status_t ring_hier_open(ring_comm_t *comm)
{
    const char *mode = comm->cfg.hierarchical;
    int *host_of = NULL, *local_of = NULL, *ports = NULL, *members = NULL;
    int my_ports[2], hosts = 0, local_size = 0, n = 0;
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
    st = free_port(comm->peers[comm->rank].host, &my_ports[0]);
    if (st == RING_OK)
        st = free_port(comm->peers[comm->rank].host, &my_ports[1]);
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
    rank_map(members, n, h->local_map, sizeof(h->local_map));
    h->local_members = malloc((size_t)n * sizeof(int));
    if (h->local_members == NULL) {
        st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the hierarchical allreduce");
        goto out;
    }
    memcpy(h->local_members, members, (size_t)n * sizeof(int));
    st = open_sub(comm, "local", members, n, h->local_rank, ports, 0, h->host_index, &h->local);
    if (st != RING_OK)
        goto out;
    n = 0;
    for (int r = 0; r < comm->size; r++)
        if (local_of[r] == h->local_rank)
            members[n++] = r;
    rank_map(members, n, h->cross_map, sizeof(h->cross_map));
    h->cross_members = malloc((size_t)n * sizeof(int));
    if (h->cross_members == NULL) {
        st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the hierarchical allreduce");
        goto out;
    }
    memcpy(h->cross_members, members, (size_t)n * sizeof(int));
    st = open_sub(comm, "cross", members, n, h->host_index, ports, 1, h->local_rank, &h->cross);
    if (st != RING_OK)
        goto out;
    ring_log(RING_LOG_INFO, "hierarchical allreduce: %d hosts x %d peers (local ring over %s, "
             "cross ring over %s), for allreduces of %zu bytes and more", hosts, local_size,
             ring_comm_transport(h->local), ring_comm_transport(h->cross), h->min_bytes);
    comm->hier = h;
    h = NULL;
out:
    if (h != NULL) {
        ring_comm_close(h->local);
        ring_comm_close(h->cross);
        free(h->local_members);
        free(h->cross_members);
        free(h);
    }
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
    ring_comm_close(h->local);
    ring_comm_close(h->cross);
    free(h->pad);
    free(h->slice);
    free(h->local_members);
    free(h->cross_members);
    free(h);
    comm->hier = NULL;
}

int ring_hier_takes(const ring_comm_t *comm, const ring_request_t *req)
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

static ring_status_t phase_start(ring_comm_t *comm, ring_request_t *req)
{
    struct ring_hier *h = comm->hier;
    unsigned flags = req->exact ? RING_CALL_EXACT : 0;
    ring_status_t st = RING_OK;

    switch (h->phase) {
    case HIER_LOCAL_RS:
        st = ring_reduce_scatter_start(h->local, h->pad, h->slice, h->block, RING_FLOAT32,
                                       RING_SUM, req->tensor_id, flags, &h->sub);
        return st == RING_OK ? RING_OK : sub_failed(comm, "local", st);
    case HIER_CROSS:
        st = ring_allreduce_start_flags(h->cross, h->slice, h->slice, h->block, RING_FLOAT32,
                                        RING_SUM, req->tensor_id, flags, &h->sub);
        return st == RING_OK ? RING_OK : sub_failed(comm, "cross", st);
    case HIER_LOCAL_AG:
        st = ring_allgather_start(h->local, h->slice, h->pad, h->block * sizeof(float),
                                  req->tensor_id, &h->sub);
        return st == RING_OK ? RING_OK : sub_failed(comm, "local", st);
    default:
        return RING_OK;
    }
}

ring_status_t ring_hier_begin(ring_comm_t *comm, ring_request_t *req)
{
    struct ring_hier *h = comm->hier;
    size_t L = (size_t)h->local_size, block = (req->count + L - 1) / L;

    /* the local reduce-scatter takes equal blocks: pad with zeros */
    block = (block + 15) / 16 * 16;
    if (block * L > h->pad_count) {
        float *pad = realloc(h->pad, block * L * sizeof(float));
        float *slice = pad != NULL ? realloc(h->slice, block * sizeof(float)) : NULL;

        if (pad != NULL)
            h->pad = pad;
        if (slice != NULL)
            h->slice = slice;
        if (pad == NULL || slice == NULL)
            return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_NO_MEMORY,
                                                        .culprit = comm->rank, .step = -1},
                                  "hierarchical allreduce: out of memory for %zu elements",
                                  block * L);
        h->pad_count = block * L;
    }
    h->block = block;
    memcpy(h->pad, req->sendbuf, req->count * sizeof(float));
    memset(h->pad + req->count, 0, (block * L - req->count) * sizeof(float));
    h->phase = HIER_LOCAL_RS;
    h->sub = NULL;
    return phase_start(comm, req);
}

ring_status_t ring_hier_progress(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                                 int *finished_p)
{
    struct ring_hier *h = comm->hier;
    ring_comm_t *sub = h->phase == HIER_CROSS ? h->cross : h->local;
    const char *what = h->phase == HIER_CROSS ? "cross" : "local";
    ring_status_t st;
    int moved;

    *finished_p = 0;
    if (h->sub == NULL)
        return comm->error != RING_OK ? comm->error : RING_OK;
    moved = ring_comm_progress(sub);
    if (moved > 0)
        *moved_p += moved;
    if (!h->sub->done && moved >= 0)
        return RING_OK;
    st = ring_request_wait(h->sub); /* done: releases its slot */
    h->sub = NULL;
    if (st == RING_ERR_NONFINITE)
        req->nonfinite = 1;
    else if (st != RING_OK)
        return sub_failed(comm, what, st);
    *moved_p += 1;
    if (h->phase == HIER_LOCAL_AG) {
        float *out = req->recvbuf;

        memcpy(out, h->pad, req->count * sizeof(float));
        if (req->op == RING_AVG) {
            float inv = 1.0f / (float)comm->size;
            for (size_t i = 0; i < req->count; i++)
                out[i] *= inv;
        }
        h->phase = HIER_IDLE;
        *finished_p = 1;
        return RING_OK;
    }
    h->phase = h->phase == HIER_LOCAL_RS ? HIER_CROSS : HIER_LOCAL_AG;
    return phase_start(comm, req);
}

int ring_hier_wait(ring_comm_t *comm, int timeout_ms)
{
    struct ring_hier *h = comm->hier;
    ring_comm_t *sub;

    if (h == NULL || h->sub == NULL)
        return 0;
    sub = h->phase == HIER_CROSS ? h->cross : h->local;
    /* the sub-ring's events wake us; the ring's own (an ABORT) within 5 ms */
    sub->tp_ops->wait(sub->tp, timeout_ms < 5 ? timeout_ms : 5);
    return 1;
}
