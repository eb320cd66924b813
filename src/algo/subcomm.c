/*
 * subcomm.c - communicators over some of the ring's peers (subcomm.h): free
 * ports held until they are used, opening one with the ring's settings and
 * its own peer list, and naming a failure in it as the ring's rank.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo.h"
#include "log.h"
#include "subcomm.h"
#include "transport.h"

void ring_port_hold_release(ring_port_hold_t *ph, int which)
{
    const ring_tp_ops_t *tcp = ring_tp_find("tcp");
    int left = 0;

    for (int i = 0; i < ph->n; i++) {
        if ((which < 0 || which == i) && ph->l[i] != NULL) {
            tcp->listener_close(ph->l[i]);
            ph->l[i] = NULL;
        }
        left += ph->l[i] != NULL;
    }
    if (left == 0 && ph->tp != NULL) {
        tcp->fini(ph->tp);
        ph->tp = NULL;
    }
}

ring_status_t ring_port_hold(ring_port_hold_t *ph, const char *host, int n, int *ports)
{
    const ring_tp_ops_t *tcp = ring_tp_find("tcp");
    ring_tp_params_t params;

    memset(&params, 0, sizeof(params));
    memset(ph, 0, sizeof(*ph));
    if (n < 0 || n > RING_PORT_HOLD_MAX)
        return ring_error_set(RING_ERR_INVALID, "ring_port_hold: %d ports (at most %d)", n,
                              RING_PORT_HOLD_MAX);
    if (n == 0)
        return RING_OK;
    RING_CHECK(tcp->init(&params, &ph->tp));
    ph->n = n;
    for (int i = 0; i < n; i++) {
        ring_status_t st = tcp->listen(ph->tp, host, 0, &ph->l[i]);

        if (st != RING_OK) {
            ring_port_hold_release(ph, -1);
            return st;
        }
        ports[i] = tcp->listener_port(ph->l[i]);
    }
    return RING_OK;
}

/* "0 is rank 4, 1 is rank 5": the sub-communicator's ranks as the ring's. */
static void rank_map(const int *members, int n, char *buf, size_t len)
{
    size_t k = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && k + 32 < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d is rank %d", i ? ", " : "", i, members[i]);
}

ring_status_t ring_sub_open(ring_comm_t *comm, const ring_sub_owner_t *owner,
                            ring_sub_open_fn open_fn, ring_sub_t *sub, const char *what,
                            const int *members, int n, int me, const int *ports, int stride,
                            int which, const char *job_tag, const char *const *settings)
{
    ring_config_t cfg;
    char *peers = calloc((size_t)n, 300), num[32], job[RING_CONFIG_STR_MAX];
    ring_log_level_t saved_level = ring_log_level();
    size_t len = 0;
    ring_status_t st;

    memset(sub, 0, sizeof(*sub));
    snprintf(sub->what, sizeof(sub->what), "%s", what);
    sub->members = malloc((size_t)n * sizeof(int));
    if (peers == NULL || sub->members == NULL) {
        free(peers);
        free(sub->members);
        sub->members = NULL;
        return ring_error_set(RING_ERR_NO_MEMORY, "%s: out of memory for the %s", owner->algo,
                              what);
    }
    memcpy(sub->members, members, (size_t)n * sizeof(int));
    sub->n = n;
    rank_map(members, n, sub->map, sizeof(sub->map));
    for (int i = 0; i < n; i++) {
        ring_peer_addr_t a = comm->topo.peers[members[i]];
        char one[300];

        a.port = ports[stride * members[i] + which];
        ring_peer_format(&a, one, sizeof(one));
        len += (size_t)snprintf(peers + len, (size_t)n * 300 - len, "%s%s", i ? "," : "", one);
    }
    st = ring_config_copy(&cfg, &comm->cfg);
    snprintf(job, sizeof(job), "%.200s/%s", comm->cfg.job_id, job_tag);
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
    SET("algo", "ring");
    SET("host-id", ""); /* a rendezvous setting: sub-communicators have peer lists */
    /* its set-up lines (transport, order) would repeat the ring's: warnings only */
    if (saved_level > RING_LOG_WARN)
        SET("log-level", "warn");
    for (int i = 0; settings != NULL && settings[i] != NULL; i += 2)
        SET(settings[i], settings[i + 1]);
#undef SET
    if (st == RING_OK)
        st = open_fn(&cfg, &sub->comm);
    ring_log_set_level(saved_level); /* the log's level and rank are the process's */
    ring_log_set_rank(comm->rank);
    ring_config_free(&cfg);
    free(peers);
    if (st != RING_OK) {
        char why[900];

        sub->comm = NULL;
        snprintf(why, sizeof(why), "%s", ring_last_error()); /* not the buffer it formats into */
        return ring_error_set(st, "%s: the %s of %d peers did not form (%s avoids it): %s",
                              owner->algo, what, n, owner->avoid, why);
    }
    return RING_OK;
}

void ring_sub_close(ring_sub_t *sub, ring_sub_close_fn close_fn)
{
    if (sub->comm != NULL)
        close_fn(sub->comm);
    free(sub->members);
    memset(sub, 0, sizeof(*sub));
}

void ring_sub_linger(const ring_comm_t *comm)
{
    struct timespec linger = {0, 200 * 1000 * 1000};

    if (comm->fail.error != RING_OK && (comm->algo.hier != NULL || comm->algo.rd != NULL))
        nanosleep(&linger, NULL);
}

ring_status_t ring_sub_fail(ring_comm_t *comm, const ring_sub_owner_t *owner,
                            const ring_sub_t *sub, ring_status_t st)
{
    const ring_comm_t *c = sub->comm;
    int culprit = c != NULL && c->fail.error != RING_OK && c->fail.error_culprit >= 0 &&
                          c->fail.error_culprit < sub->n
                      ? sub->members[c->fail.error_culprit]
                      : -1;
    char msg[700];

    snprintf(msg, sizeof(msg), "%s", ring_last_error());
    return ring_comm_fail(comm, &(ring_fault_t){.status = st, .culprit = culprit, .step = -1},
                          "%s, %s: %s (in the %s %s)", owner->algo, sub->what, msg, sub->what,
                          sub->map);
}

ring_status_t ring_sub_reap(ring_comm_t *comm, const ring_sub_owner_t *owner,
                            const ring_sub_t *sub, ring_request_t *req, int *nonfinite)
{
    ring_status_t st = ring_request_wait(req); /* done: releases its slot */

    if (st == RING_ERR_NONFINITE) {
        *nonfinite = 1;
        return RING_OK;
    }
    return st == RING_OK ? RING_OK : ring_sub_fail(comm, owner, sub, st);
}

void ring_sub_add_stats(ring_comm_t *comm, ring_sub_t *sub)
{
    const ring_comm_stats_t *now = &sub->comm->stats;

    comm->stats.frames_sent += now->frames_sent - sub->seen.frames_sent;
    comm->stats.payload_bytes += now->payload_bytes - sub->seen.payload_bytes;
    comm->stats.raw_bytes += now->raw_bytes - sub->seen.raw_bytes;
    comm->stats.frames_lz4 += now->frames_lz4 - sub->seen.frames_lz4;
    sub->seen = *now;
}
