/*
 * rendezvous.c - how peers meet without a peer list. Each peer listens
 * first (on port 0 unless --port was given, so peers of one host never
 * collide), then publishes one record under "rank/<r>":
 *
 *   ringd-rendezvous 1
 *   world 4
 *   transport tcp
 *   nonce 8a1f...        (tells this peer's record from another's)
 *   host node07          (gethostname: loopback when every peer shares it)
 *   group node07         (--host-id, else the host: the ring's order groups by it)
 *   port 40123
 *   addr 10.1.2.7        (the addresses --iface allows, best first; without
 *                         --iface or --bind only the one it listens on: the
 *                         default rule's first, or 127.0.0.1 when the store
 *                         is on loopback or the host has no other)
 *   provisional 1        (a file store, below; absent otherwise)
 *
 * and waits for all N records (the barrier). Then every peer picks the
 * same address for each rank: loopback when all peers share a host name
 * and it was published, else the first non-loopback address. The ring
 * port listens on that address alone, never on every address.
 *
 * A tcp store on loopback says before anything is published that every
 * peer is on this host; a file store says nothing (NFS reaches many hosts,
 * a local directory one). So at a file store, without --iface or --bind, a
 * peer listens on 127.0.0.1 first and marks its record provisional: when
 * the records show one host name, the peers meet there, and nothing
 * listened beyond loopback. When they show several, each provisional peer
 * listens again on the default rule's address and publishes it in place of
 * the first record, and every peer reads each provisional record again
 * until that one has come (rdzv_settle): one more round through the
 * store, for multi-host jobs only.
 */
#include "ring_build.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "comm_int.h"
#include "iface.h"
#include "log.h"
#include "one_host.h"
#include "parse.h"
#include "rendezvous.h"
#include "store.h"

#define RDZV_ELASTIC_PROBE_S 0.3 /* is a store served already? (loopback or LAN: plenty) */

/* The store is reached over loopback: every peer is on this host. */
static int rdzv_store_is_loopback(const ring_rdzv_url_t *url)
{
    return url->kind == RING_RDZV_TCP && ring_host_is_loopback(url->host);
}

/* A file store, and neither --bind nor --iface: listen on loopback until the
 * records show where the peers are (a tcp store elsewhere than on loopback keeps the
 * default rule's address from the start: its peers are on several hosts as a rule). */
static int rdzv_loopback_first(const ring_config_t *cfg, const ring_rdzv_url_t *url)
{
    return url->kind == RING_RDZV_FILE && (cfg->bind[0] == '\0' || ring_bind_is_any(cfg->bind)) &&
           cfg->iface[0] == '\0';
}

/* Listen where --bind or --iface says, else on the one address the default rule
 * picks (loopback_first: on loopback for now, rec->provisional set, when the host
 * has another address); on port 0 unless --port was set. Fill rec with what
 * others need to reach this peer. */
static ring_status_t rdzv_listen(ring_comm_t *comm, const ring_rdzv_url_t *url,
                                 int loopback_first, rdzv_record_t *rec)
{
    const ring_config_t *cfg = &comm->cfg;
    ring_iface_addr_t a[RDZV_ADDRS];
    char why[300], bind[RING_CONFIG_STR_MAX] = "";
    int n = 0, lo = 0, hi = 0;
    ring_status_t st = RING_ERR_IO;

    if (cfg->bind[0] != '\0' && !ring_bind_is_any(cfg->bind)) {
        char spec[RING_CONFIG_STR_MAX + 2];
        snprintf(spec, sizeof(spec), "=%s", cfg->bind);
        /* an interface name stands for its addresses, anything else for itself */
        n = ring_iface_spec_check(spec, NULL, 0) == 0
                ? ring_iface_addrs(spec, a, RDZV_ADDRS, NULL, 0) : 0;
        snprintf(bind, sizeof(bind), "%s", n > 0 ? a[0].addr : cfg->bind);
    } else if (cfg->iface[0] != '\0') {
        n = ring_iface_addrs(cfg->iface, a, RDZV_ADDRS, why, sizeof(why));
        if (n <= 0)
            return ring_error_set(RING_ERR_INVALID, "%s (--iface / RING_SOCKET_IFNAME)", why);
        snprintf(bind, sizeof(bind), "%s", a[0].addr);
    } else {
        /* neither: not every address, only the one the other peers would pick
         * (rdzv_pick: the default rule's first, IPv4 first); loopback when the
         * store is reached over loopback (every peer is here) or there is no other */
        n = rdzv_store_is_loopback(url) ? 0 : ring_iface_addrs("", a, 1, why, sizeof(why));
        rec->provisional = 0;
        if (n > 0 && loopback_first) {
            rec->provisional = 1; /* rdzv_settle listens on a[0] if other hosts take part */
            n = 0;
        }
        if (n <= 0) {
            snprintf(a[0].addr, sizeof(a[0].addr), "127.0.0.1");
            a[0].loopback = 1;
            n = 1;
        }
        snprintf(bind, sizeof(bind), "%s", a[0].addr);
    }
    if (ring_config_source(cfg, "port") != RING_SRC_DEFAULT) {
        lo = cfg->port_lo;
        hi = cfg->port_hi;
    }
    for (int port = lo; port <= hi && st != RING_OK; port++)
        st = comm->tp_ops->listen(comm->tp, bind, port, &comm->listener);
    RING_CHECK(st);
    rec->port = comm->tp_ops->listener_port(comm->listener);
    if (rec->port <= 0)
        return ring_error_set(RING_ERR_IO, "rendezvous: cannot learn the port this peer "
                              "listens on");
    for (int i = 0; i < n; i++)
        snprintf(rec->addr[i], sizeof(rec->addr[i]), "%s", a[i].addr);
    rec->naddr = n;
    if (n <= 0) { /* --bind named a host, not an interface */
        snprintf(rec->addr[0], sizeof(rec->addr[0]), "%s", bind);
        rec->naddr = 1;
    }
    return RING_OK;
}

/* "2", "2, 5 and 3 more": the ranks whose records are missing. When the
 * store cannot say any more (rank 0 stopped it), only rank from is named. */
static void rdzv_missing(ring_store_t *store, int n, int from, char *buf, size_t len, int *count)
{
    size_t used = 0;

    *count = 0;
    buf[0] = '\0';
    for (int r = from; r < n; r++) {
        char key[32];
        int present = 1;

        snprintf(key, sizeof(key), "rank/%d", r);
        if (store->ops->check(store, key, &present) != RING_OK) {
            snprintf(buf, len, "%d", from);
            *count = 1;
            return;
        }
        if (present)
            continue;
        if (++*count <= 8 && used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%d", *count > 1 ? ", " : "", r);
    }
    if (*count > 8 && used < len)
        snprintf(buf + used, len - used, " and %d more", *count - 8);
}

static ring_status_t rdzv_open_store(ring_comm_t *comm, const ring_rdzv_url_t *url,
                                     double deadline)
{
    const ring_config_t *cfg = &comm->cfg;

    if (url->kind == RING_RDZV_FILE)
        return ring_store_file_open(url->path, cfg->job_id, cfg->rank == 0, &comm->rdzv.store);
    /* elastic: a rank 0 started after the ring is up (a replacement) finds the store
     * served already, by the ring's rank 0, and joins (rdzv_join.c) */
    if (cfg->rank == 0 && cfg->elastic &&
        ring_store_tcp_open(url->host, url->port, cfg->job_id, &comm->auth.key,
                            ring_now() + RDZV_ELASTIC_PROBE_S, &comm->rdzv.store) == RING_OK)
        return RING_OK;
    if (cfg->rank == 0)
        RING_CHECK(ring_store_server_start(url->host, url->port, cfg->job_id,
                                           cfg->elastic ? -cfg->world_size : cfg->world_size,
                                           &comm->auth.key, &comm->rdzv.store_server));
    return ring_store_tcp_open(url->host, url->port, cfg->job_id, &comm->auth.key, deadline,
                               &comm->rdzv.store);
}

/* Every rank's record, in rank order; a missing one is named when time is up. */
static ring_status_t rdzv_gather(ring_comm_t *comm, rdzv_record_t *recs, double deadline,
                                 double started)
{
    ring_store_t *store = comm->rdzv.store;
    int file = store->ops->kind == RING_STORE_FILE;
    char *text = malloc(RDZV_RECORD_MAX);
    ring_status_t st = RING_OK;

    if (text == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the rendezvous");
    for (int r = 0; r < comm->size && st == RING_OK; r++) {
        char key[32], why[200] = "", missing[200];
        const char *hint = "";
        double grace = 0;
        int count, bad, same;

        snprintf(key, sizeof(key), "rank/%d", r);
        for (;;) {
            st = store->ops->get(store, key, text, RDZV_RECORD_MAX, deadline);
            bad = st == RING_OK && ring_rdzv_record_parse(text, &recs[r], why, sizeof(why)) != 0;
            same = st == RING_OK && !bad && recs[r].world == comm->size &&
                   strcmp(recs[r].transport, comm->tp_ops->name) == 0;
            if (st != RING_OK || bad || same || !file)
                break;
            /* other settings in a file: maybe a crashed run's record, which its
             * peer replaces when it starts; give it RING_RDZV_STALE_GRACE_S */
            hint = " (or that is the record of a crashed earlier run, which no peer replaced "
                   "in time: give each run its own --job-id, or empty the rendezvous directory)";
            if (grace == 0)
                grace = ring_now() + RING_RDZV_STALE_GRACE_S;
            if (ring_now() > grace || ring_now() > deadline)
                break;
            usleep(100000);
        }
        if (st == RING_ERR_TIMED_OUT) {
            rdzv_missing(store, comm->size, r, missing, sizeof(missing), &count);
            st = ring_error_set(RING_ERR_TIMED_OUT, "rendezvous %s: timed out after %.0f s: "
                                "%d of %d peers arrived; missing: rank%s %s (is it running, "
                                "with the same --job-id '%s' and world size?)", store->where,
                                ring_now() - started, comm->size - count, comm->size,
                                count > 1 ? "s" : "", missing, comm->cfg.job_id);
        } else if (st == RING_OK && bad) {
            st = ring_error_set(RING_ERR_PROTOCOL, "rendezvous %s: the entry of rank %d: %s",
                                store->where, r, why);
        } else if (st == RING_OK && recs[r].world != comm->size) {
            st = ring_error_set(RING_ERR_MISMATCH, "settings mismatch with rank %d (host %s): "
                                "its world size is %d, this peer's %d%s", r, recs[r].host,
                                recs[r].world, comm->size, hint);
        } else if (st == RING_OK && !same) {
            st = ring_error_set(RING_ERR_MISMATCH, "settings mismatch with rank %d (host %s): it "
                                "runs the %s transport, this peer %s: every peer needs the same "
                                "--transport (RING_TRANSPORT)%s", r, recs[r].host,
                                recs[r].transport, comm->tp_ops->name, hint);
        }
    }
    free(text);
    return st;
}

/*
 * The records name more than one host: a peer that listened on loopback for
 * now (provisional) listens again where the default rule says and publishes
 * that in place of its first record; then each provisional record of the
 * others is read again until its peer's final one replaces it.
 */
static ring_status_t rdzv_settle(ring_comm_t *comm, const ring_rdzv_url_t *url,
                                 rdzv_record_t *mine, rdzv_record_t *recs, double deadline,
                                 double started)
{
    ring_store_t *store = comm->rdzv.store;
    char key[32], why[200], *text = malloc(RDZV_RECORD_MAX);
    ring_status_t st = RING_OK;

    if (text == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the rendezvous");
    if (mine->provisional) {
        comm->tp_ops->listener_close(comm->listener);
        comm->listener = NULL;
        mine->naddr = 0;
        st = rdzv_listen(comm, url, 0, mine);
        if (st == RING_OK) {
            ring_rdzv_record_format(mine, text, RDZV_RECORD_MAX);
            snprintf(key, sizeof(key), "rank/%d", comm->rank);
            st = store->ops->set(store, key, text);
        }
        if (st == RING_OK)
            recs[comm->rank] = *mine;
    }
    for (int r = 0; r < comm->size && st == RING_OK; r++) {
        double backoff = 0.002;
        rdzv_record_t rec;

        snprintf(key, sizeof(key), "rank/%d", r);
        while (recs[r].provisional && st == RING_OK) {
            st = store->ops->get(store, key, text, RDZV_RECORD_MAX, deadline);
            if (st == RING_OK && ring_rdzv_record_parse(text, &rec, why, sizeof(why)) == 0 &&
                !rec.provisional && rec.world == comm->size &&
                strcmp(rec.transport, comm->tp_ops->name) == 0) {
                recs[r] = rec;
                break;
            }
            if (st == RING_ERR_TIMED_OUT || (st == RING_OK && ring_now() > deadline)) {
                st = ring_error_set(RING_ERR_TIMED_OUT, "rendezvous %s: timed out after %.0f s "
                                    "waiting for rank %d (host %s) to publish an address the "
                                    "peers on other hosts can reach: its record still offers "
                                    "loopback only (a record of an earlier run of job '%s'? "
                                    "give each run its own --job-id, or empty the directory)",
                                    store->where, ring_now() - started, r, recs[r].host,
                                    comm->cfg.job_id);
                break;
            }
            if (st != RING_OK)
                break;
            usleep((useconds_t)(backoff * 1e6));
            backoff = backoff < 0.05 ? backoff * 2 : 0.05;
        }
    }
    free(text);
    return st;
}

/* The address every peer uses for rank r (the same choice everywhere). */
static const char *rdzv_pick(const rdzv_record_t *rec, int all_local)
{
    for (int i = 0; i < rec->naddr; i++)
        if (all_local ? strcmp(rec->addr[i], "127.0.0.1") == 0
                      : strcmp(rec->addr[i], "127.0.0.1") != 0 && strcmp(rec->addr[i], "::1") != 0)
            return rec->addr[i];
    return all_local && rec->naddr > 0 ? rec->addr[0] : NULL;
}

static ring_status_t rdzv_choose(const rdzv_record_t *rec, int r, int all_local,
                                 ring_peer_addr_t *out)
{
    const char *pick = rdzv_pick(rec, all_local);

    if (pick == NULL)
        return ring_error_set(RING_ERR_INVALID, "rank %d (host %s) published no address other "
                              "peers can reach: only loopback passed its --iface / "
                              "RING_SOCKET_IFNAME (the default leaves out lo and docker*)", r,
                              rec->host);
    snprintf(out->host, sizeof(out->host), "%s", pick);
    out->port = rec->port;
    return RING_OK;
}

ring_status_t ring_rendezvous(ring_comm_t *comm)
{
    const ring_config_t *cfg = &comm->cfg;
    double started = ring_now(), deadline = started + cfg->connect_timeout_s;
    ring_rdzv_url_t url;
    rdzv_record_t mine, *recs = NULL;
    char why[300], text[RDZV_RECORD_MAX], key[32];
    int all_local = 1;
    ring_status_t st;

    if (ring_rdzv_url_parse(cfg->rendezvous, &url, why, sizeof(why)) != 0)
        return ring_error_set(RING_ERR_INVALID, "--rendezvous '%s': %s", cfg->rendezvous, why);
    memset(&mine, 0, sizeof(mine));
    mine.world = comm->size;
    snprintf(mine.transport, sizeof(mine.transport), "%s", comm->tp_ops->name);
    snprintf(mine.nonce, sizeof(mine.nonce), "%lx-%lx", (long)getpid(),
             (long)(ring_now() * 1e6) ^ (long)clock());
    if (gethostname(mine.host, sizeof(mine.host)) != 0)
        snprintf(mine.host, sizeof(mine.host), "unknown");
    mine.host[sizeof(mine.host) - 1] = '\0';
    snprintf(mine.group, sizeof(mine.group), "%s",
             cfg->host_id[0] != '\0' ? cfg->host_id : mine.host);
    RING_CHECK(rdzv_listen(comm, &url, rdzv_loopback_first(cfg, &url), &mine));
    st = rdzv_open_store(comm, &url, deadline);
    if (st != RING_OK)
        goto out;
    snprintf(comm->rdzv.url, sizeof(comm->rdzv.url), "%s", cfg->rendezvous);
    if (cfg->elastic) { /* a ring of this job runs already: join it */
        int running = 0;
        st = comm->rdzv.store->ops->check(comm->rdzv.store, RDZV_RUNNING_KEY, &running);
        if (st == RING_OK && running) {
            st = ring_rendezvous_join(comm, &mine, deadline);
            goto out;
        }
    }
    ring_rdzv_record_format(&mine, text, sizeof(text));
    snprintf(key, sizeof(key), "rank/%d", comm->rank);
    st = comm->rdzv.store->ops->set(comm->rdzv.store, key, text);
    if (st == RING_ERR_MISMATCH)
        st = ring_error_set(st, "rendezvous %s: another peer already claims rank %d: check "
                            "the ranks the launcher gives", comm->rdzv.store->where, comm->rank);
    if (st != RING_OK)
        goto out;
    recs = calloc((size_t)comm->size, sizeof(*recs));
    comm->topo.peers = calloc((size_t)comm->size, sizeof(*comm->topo.peers));
    comm->topo.hosts = calloc((size_t)comm->size, sizeof(*comm->topo.hosts));
    if (recs == NULL || comm->topo.peers == NULL || comm->topo.hosts == NULL) {
        st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", comm->size);
        goto out;
    }
    st = rdzv_gather(comm, recs, deadline, started);
    if (st == RING_OK && strcmp(recs[comm->rank].nonce, mine.nonce) != 0)
        st = ring_error_set(RING_ERR_MISMATCH, "rendezvous %s: another peer (host %s) also "
                            "claims rank %d: check the ranks the launcher gives",
                            comm->rdzv.store->where, recs[comm->rank].host, comm->rank);
    for (int r = 0; r < comm->size && st == RING_OK; r++)
        all_local &= strcmp(recs[r].host, recs[0].host) == 0;
    comm->rdzv.all_local = all_local;
    if (st == RING_OK && !all_local)
        st = rdzv_settle(comm, &url, &mine, recs, deadline, started);
    for (int r = 0; r < comm->size && st == RING_OK; r++) {
        st = rdzv_choose(&recs[r], r, all_local, &comm->topo.peers[r]);
        if (st == RING_OK && (comm->topo.hosts[r] = strdup(recs[r].group)) == NULL)
            st = ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", comm->size);
    }
    if (st == RING_OK)
        ring_log(RING_LOG_INFO, "rendezvous %s: %d peers in %.2f s", comm->rdzv.store->where,
                 comm->size, ring_now() - started);
out:
    free(recs);
    /* this peer has what it needs from a tcp store (rank 0 keeps serving the
     * others); a file store stays open until the ring is up, for refreshes,
     * and rank 0's until close, when it cleans up */
    if (comm->rdzv.store != NULL &&
        (st != RING_OK || (url.kind != RING_RDZV_FILE && !cfg->elastic))) {
        comm->rdzv.store->ops->close(comm->rdzv.store, 0);
        comm->rdzv.store = NULL;
    }
    if (st != RING_OK && comm->rdzv.store_server != NULL) {
        ring_store_server_stop(comm->rdzv.store_server, ring_last_error());
        comm->rdzv.store_server = NULL;
    }
    return st;
}

ring_status_t ring_rendezvous_refresh(ring_comm_t *comm, int rank, int *changed)
{
    ring_store_t *store = comm->rdzv.store;
    char key[32], why[200], *text;
    const char *pick;
    rdzv_record_t rec;
    ring_status_t st;

    *changed = 0;
    if (store == NULL || store->ops->kind != RING_STORE_FILE)
        return RING_OK;
    if ((text = malloc(RDZV_RECORD_MAX)) == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the rendezvous");
    snprintf(key, sizeof(key), "rank/%d", rank);
    /* a record that is missing, unreadable or of other settings: keep what we
     * have, and leave the thread's last error alone (the caller's may be set) */
    st = store->ops->get(store, key, text, RDZV_RECORD_MAX, ring_now());
    if (st == RING_OK && ring_rdzv_record_parse(text, &rec, why, sizeof(why)) == 0 &&
        rec.world == comm->size && strcmp(rec.transport, comm->tp_ops->name) == 0 &&
        (pick = rdzv_pick(&rec, comm->rdzv.all_local)) != NULL &&
        (rec.port != comm->topo.peers[rank].port ||
         strcmp(pick, comm->topo.peers[rank].host) != 0)) {
        if (strcmp(rec.group, comm->topo.hosts[rank]) != 0) {
            free(text);
            return ring_error_set(RING_ERR_MISMATCH,
                                  "rendezvous %s: rank %d's record changed "
                                  "from host %s to %s after this peer read it: one of them is "
                                  "from an earlier run of job '%s' (a crashed run leaves its "
                                  "files): give each run its own --job-id, or empty the "
                                  "directory",
                                  store->where, rank, comm->topo.hosts[rank], rec.group,
                                  comm->cfg.job_id);
        }
        snprintf(comm->topo.peers[rank].host, sizeof(comm->topo.peers[rank].host), "%s", pick);
        comm->topo.peers[rank].port = rec.port;
        *changed = 1;
    }
    free(text);
    return RING_OK;
}

int ring_rendezvous_file(const ring_comm_t *comm)
{
    return comm->rdzv.store != NULL && comm->rdzv.store->ops->kind == RING_STORE_FILE;
}

void ring_rendezvous_done(ring_comm_t *comm)
{
    /* rank 0's client of its own tcp store leaves too: once every peer's has, the
     * store ends (a file store's owner keeps its store to clean up at close) */
    if (comm->rdzv.store != NULL && !comm->cfg.elastic &&
        (comm->rank != 0 || comm->rdzv.store_server != NULL)) {
        comm->rdzv.store->ops->close(comm->rdzv.store, 0);
        comm->rdzv.store = NULL;
    }
}

void ring_rendezvous_close(ring_comm_t *comm)
{
    if (comm->rdzv.store != NULL)
        comm->rdzv.store->ops->close(comm->rdzv.store, 1);
    comm->rdzv.store = NULL;
    ring_store_server_stop(comm->rdzv.store_server, NULL);
    comm->rdzv.store_server = NULL;
}

void ring_rendezvous_mark_running(ring_comm_t *comm)
{
    /* a key another client set is refused: a ring that grew or shrank keeps the first */
    if (comm->cfg.elastic && comm->rdzv.store != NULL && comm->rank == 0 && !comm->rdzv.joined &&
        comm->rdzv.store->ops->set(comm->rdzv.store, RDZV_RUNNING_KEY, "1") != RING_OK)
        ring_log(RING_LOG_DEBUG, "rendezvous: %s", ring_last_error());
}

void ring_rendezvous_hand_over(ring_comm_t *from, ring_comm_t *to)
{
    to->rdzv.store = from->rdzv.store;
    to->rdzv.store_server = from->rdzv.store_server;
    to->rdzv.all_local = from->rdzv.all_local;
    snprintf(to->rdzv.url, sizeof(to->rdzv.url), "%s", from->rdzv.url);
    from->rdzv.store = NULL;
    from->rdzv.store_server = NULL;
}

ring_status_t ring_rendezvous_reconnect(ring_comm_t *comm)
{
    ring_rdzv_url_t url;
    char why[300];

    if (comm->rdzv.url[0] == '\0' || ring_rdzv_url_parse(comm->rdzv.url, &url, why,
                                                         sizeof(why)) != 0)
        return ring_error_set(RING_ERR_INVALID, "this ring met at no rendezvous store");
    if (comm->rdzv.store != NULL)
        comm->rdzv.store->ops->close(comm->rdzv.store, 0);
    comm->rdzv.store = NULL;
    if (url.kind == RING_RDZV_FILE)
        return ring_store_file_open(url.path, comm->cfg.job_id, 0, &comm->rdzv.store);
    return ring_store_tcp_open(url.host, url.port, comm->cfg.job_id, &comm->auth.key,
                               ring_now() + RDZV_ELASTIC_PROBE_S, &comm->rdzv.store);
}
