/*
 * shrink.c - ring_comm_shrink: after a failure that names a lost peer, the
 * survivors agree on who is left (agree.c) and open the ring among
 * themselves (ring_comm_open, with the old ring's settings and its peers'
 * addresses). include/ringd/elastic.h has the semantics.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/elastic.h>

#include "agree.h"
#include "clock.h"
#include "comm_int.h"
#include "log.h"
#include "neighbour_probe.h"
#include "one_host.h"
#include "progress_thread.h"
#include "rendezvous.h"

#define RING_SHRINK_PROBE_S 0.02 /* a dead neighbour's close is there at once */

/* The failures a shrink can cure: a peer that is gone, or silent. */
static ring_status_t shrink_check(const ring_comm_t *comm, int *lost_p)
{
    ring_status_t e = comm->fail.error;
    int culprit = comm->fail.error_culprit;

    if (comm->elastic.shrunk)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_shrink: this communicator was "
                              "shrunk already; shrink the one that shrink gave (or close it)");
    if (comm->size < 2)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_shrink: a ring of one has no peer "
                              "to lose");
    if (e == RING_OK)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_shrink: this communicator has not "
                              "failed; shrink follows a failure that names a lost peer");
    if ((e != RING_ERR_REMOTE && e != RING_ERR_TIMED_OUT && e != RING_ERR_IO) || culprit < 0 ||
        culprit >= comm->size || culprit == comm->rank)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_shrink: the failure names no lost "
                              "peer, so shrinking would not cure it (it was: %s: %s)",
                              ring_status_str(e), comm->fail.error_msg);
    *lost_p = culprit;
    return RING_OK;
}

/* "host:port,..." of the members, in the old ring's order; *rank_p: ours among them. */
static ring_status_t shrink_peers(const ring_comm_t *comm, const ring_agree_result_t *res,
                                  int *parent, char **peers_p, int *rank_p)
{
    size_t cap = (size_t)res->nmembers * (RING_HOST_MAX + 16) + 1, used = 0;
    char *s = malloc(cap);
    int k = 0;

    if (s == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the shrunk ring's peers");
    s[0] = '\0';
    for (int place = 0; place < comm->size; place++) {
        int r = comm->topo.order[place];
        char addr[RING_HOST_MAX + 16];

        if (!ring_agree_set_has(res->members, r))
            continue;
        if (r == comm->rank)
            *rank_p = k;
        parent[k++] = r;
        ring_peer_format(&comm->topo.peers[r], addr, sizeof(addr));
        used += (size_t)snprintf(s + used, cap - used, "%s%s", used > 0 ? "," : "", addr);
    }
    *peers_p = s;
    return RING_OK;
}

/* The old ring's settings (what the autotuner chose included), for the members. */
static ring_status_t shrink_config(const ring_comm_t *comm, const ring_agree_result_t *res,
                                   int *parent, ring_config_t *cfg)
{
    char *peers = NULL;
    int rank = -1;

    RING_CHECK(ring_config_copy(cfg, &comm->cfg));
    RING_CHECK(shrink_peers(comm, res, parent, &peers, &rank));
    free(cfg->peers);
    cfg->peers = peers;
    cfg->rank = rank;
    cfg->world_size = res->nmembers;
    cfg->rendezvous[0] = '\0'; /* the addresses are known: no store */
    cfg->host_id[0] = '\0';    /* (exchanged at a rendezvous only) */
    cfg->ring_order = RING_CFG_ORDER_RANK; /* the old ring's order, as listed */
    cfg->autotune = 0;
    return RING_OK;
}

static void shrink_report(ring_comm_t *nc, const ring_comm_t *old, const ring_agree_result_t *res,
                          double t0)
{
    char lost[200] = "";
    size_t used = 0;
    int nlost = 0;

    for (int r = 0; r < old->size && used < sizeof(lost) - 16; r++)
        if (!ring_agree_set_has(res->members, r))
            used += (size_t)snprintf(lost + used, sizeof(lost) - used, "%s%d", nlost++ ? "," : "",
                                     r);
    snprintf(nc->elastic.report, sizeof(nc->elastic.report),
             "shrunk from %d to %d peers (lost rank%s %s of the old ring) in %.3f s: agreement "
             "%.3f s, %d round%s", old->size, nc->size, nlost > 1 ? "s" : "", lost,
             ring_now() - t0, res->seconds, res->rounds, res->rounds == 1 ? "" : "s");
}

/*
 * One attempt: agree, open the ring of the members, and check it with a
 * barrier. A member lost after the decision breaks the ring for every member
 * (a barrier needs all), so all of them try again, with the next generation.
 */
static ring_status_t shrink_attempt(ring_comm_t *comm, ring_agree_params_t *p, double t0,
                                    ring_comm_t **nc_p, int *final_p)
{
    ring_agree_result_t res;
    ring_config_t cfg;
    ring_comm_t *nc = NULL;
    int *parent;
    double left;
    ring_status_t st;

    memset(&res, 0, sizeof(res));
    *final_p = 1; /* the agreement's own failures are final: told to leave, out of time */
    RING_CHECK(ring_agree(p, &res));
    *final_p = 0;
    parent = malloc((size_t)res.nmembers * sizeof(*parent));
    if (parent == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the shrunk ring");
    memset(&cfg, 0, sizeof(cfg));
    st = shrink_config(comm, &res, parent, &cfg);
    left = p->deadline - ring_now();
    if (st == RING_OK && left < 0.5)
        st = ring_error_set(RING_ERR_TIMED_OUT, "shrink: no time left to open the ring");
    if (st == RING_OK) {
        cfg.connect_timeout_s = left < p->open_timeout_s ? left : p->open_timeout_s;
        st = ring_comm_open(&cfg, &nc);
        if (st == RING_OK && (st = ring_barrier(nc)) != RING_OK) {
            char msg[1024];
            snprintf(msg, sizeof(msg), "%s", ring_last_error());
            ring_comm_close(nc);
            nc = NULL;
            st = ring_error_set(st, "%s", msg);
        }
        if (st != RING_OK) {
            char msg[1024];
            snprintf(msg, sizeof(msg), "%s", ring_last_error());
            st = ring_error_set(st, "shrink: the survivors agreed on %d peers, but their ring "
                                "did not come up: %s", res.nmembers, msg);
        }
    }
    ring_config_free(&cfg);
    if (st != RING_OK) {
        free(parent);
        return st;
    }
    nc->elastic.parent = parent;
    nc->elastic.generation = p->generation;
    nc->elastic.next_slot = comm->elastic.next_slot;
    ring_rendezvous_hand_over(comm, nc); /* --elastic: joiners still find the ring */
    shrink_report(nc, comm, &res, t0);
    *nc_p = nc;
    return RING_OK;
}

ring_status_t ring_comm_shrink(ring_comm_t *comm, ring_comm_t **new_comm_p)
{
    double t0 = ring_now();
    ring_agree_params_t p;
    unsigned char lost[RING_AGREE_SET_BYTES] = {0};
    const char *bind;
    ring_comm_t *nc = NULL;
    int culprit = -1, final = 0, left_gone = 0, right_gone = 0;
    ring_status_t st;

    if (comm == NULL || new_comm_p == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_shrink: comm and new_comm_p must not "
                              "be NULL");
    *new_comm_p = NULL;
    RING_CHECK(shrink_check(comm, &culprit));
    ring_progress_stop(comm); /* the old ring has nothing left to move */
    comm->elastic.shrunk = 1; /* whatever comes next, this one is done */
    ring_agree_set_add(lost, culprit);
    /* two lost at once: the failure names one; our own connections may name the other */
    comm->elastic.probe = ring_comm_probe_neighbours(comm, RING_SHRINK_PROBE_S, &left_gone,
                                                     &right_gone);
    if (left_gone)
        ring_agree_set_add(lost, comm->topo.left_rank);
    if (right_gone)
        ring_agree_set_add(lost, comm->topo.right_rank);
    bind = comm->cfg.bind[0] != '\0' ? comm->cfg.bind : comm->topo.peers[comm->rank].host;
    memset(&p, 0, sizeof(p));
    p.world = comm->size;
    p.me = comm->rank;
    p.order = comm->topo.order;
    p.peers = comm->topo.peers;
    p.bind = ring_bind_is_any(bind) ? "" : bind;
    p.job_id = comm->cfg.job_id;
    p.key = &comm->auth.key;
    p.sockbuf = comm->cfg.tcp_sockbuf;
    p.answer_timeout_s = comm->cfg.timeout_s;
    /* the members are up and waiting: the new ring needs no long start-up */
    p.open_timeout_s = comm->cfg.connect_timeout_s < comm->cfg.timeout_s
                           ? comm->cfg.connect_timeout_s : comm->cfg.timeout_s;
    p.deadline = t0 + RING_SHRINK_BOUND(comm->cfg.timeout_s, p.open_timeout_s);
    p.lost = lost;
    ring_log(RING_LOG_INFO, "shrink: rank %d is lost; agreeing with the survivors", culprit);
    for (uint32_t attempt = 1;; attempt++) {
        p.generation = comm->elastic.generation + attempt;
        /* again after a member was lost late: some members may still be in the
         * last attempt's open and barrier (a stopped member holds them a
         * timeout): wait that long for them before counting them lost */
        if (attempt > 1)
            p.answer_timeout_s = comm->cfg.timeout_s + p.open_timeout_s + 1;
        st = shrink_attempt(comm, &p, t0, &nc, &final);
        if (st == RING_OK || final || st == RING_ERR_NO_MEMORY || ring_now() > p.deadline - 0.5)
            break; /* else a member was lost after the decision: agree again */
        ring_log(RING_LOG_WARN, "%s; trying again", ring_last_error());
    }
    if (st != RING_OK)
        return st;
    ring_log(RING_LOG_INFO, "shrink: %s; this peer is rank %d of %d", nc->elastic.report,
             nc->rank, nc->size);
    *new_comm_p = nc;
    return RING_OK;
}

int ring_comm_parent_rank(const ring_comm_t *comm, int rank)
{
    if (comm == NULL || comm->elastic.parent == NULL || rank < 0 || rank >= comm->size)
        return -1;
    return comm->elastic.parent[rank];
}

const char *ring_comm_shrink_report(const ring_comm_t *comm)
{
    return comm != NULL ? comm->elastic.report : "";
}
