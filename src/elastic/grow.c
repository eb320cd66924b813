/*
 * grow.c - ring_comm_grow: at a commit point the members of an elastic ring
 * admit the peers that asked to join at its rendezvous store (core/rdzv_join.c
 * is the joiner's side). Rank 0 reads the join slots, turns away a joiner
 * whose settings differ (saying which), and broadcasts who is admitted; when
 * nobody waits, that broadcast of 8 bytes is all a grow costs. Otherwise
 * rank 0 writes each joiner its admission (the new ring's peers, its rank)
 * and every member opens the new ring with the joiners after the members,
 * checked by a barrier. Whether that worked is then agreed over the old
 * ring, which still stands: when it did not (a joiner that died, or has
 * another secret), every member closes the new ring and goes on with the
 * old one. include/ringd/elastic.h has the semantics.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/elastic.h>

#include "clock.h"
#include "comm_int.h"
#include "handshake.h"
#include "log.h"
#include "rendezvous.h"
#include "store.h"

#define GROW_MAX 16               /* peers admitted at one grow */
#define GROW_ADDR (RING_HOST_MAX + 16)
#define GROW_READ_S 2.0           /* a slot's record follows its hello at once */
#define RING_GROW_TENSOR_ID 0xfffffff1u /* the members' verdict on the new ring */

typedef struct grow_joiner {
    char addr[GROW_ADDR];         /* "host:port" the members reach it at */
    char nonce[40];               /* where its admission goes */
} grow_joiner_t;

/* What rank 0 tells the members first: how many join, and the next slot. */
typedef struct grow_head {
    uint32_t count, next_slot;
} grow_head_t;

static void grow_refuse(ring_store_t *store, const char *nonce, const char *why)
{
    rdzv_admit_t a;
    char key[96], text[RDZV_ADMIT_WHY + 64];

    memset(&a, 0, sizeof(a));
    snprintf(a.why, sizeof(a.why), "%s", why);
    for (char *c = a.why; *c != '\0'; c++)
        if (*c == '\n')
            *c = ' ';
    snprintf(key, sizeof(key), "admit/%s", nonce);
    if (ring_rdzv_admit_format(&a, text, sizeof(text)) == 0)
        (void)store->ops->set(store, key, text);
    ring_log(RING_LOG_WARN, "grow: turned a peer away: %s", why);
}

/* A joiner's hello against ours: "" when they agree, else the error's words. */
static void grow_compare(const ring_comm_t *comm, const char *hex, uint32_t rank, char *why,
                         size_t len)
{
    unsigned char bytes[RING_HELLO_BYTES];
    ring_hello_t mine, theirs;

    why[0] = '\0';
    for (int i = 0; i < RING_HELLO_BYTES; i++) {
        unsigned v;
        if (strlen(hex) != 2 * RING_HELLO_BYTES || sscanf(hex + 2 * i, "%2x", &v) != 1) {
            snprintf(why, len, "its join request is garbled");
            return;
        }
        bytes[i] = (unsigned char)v;
    }
    if (ring_hello_decode(bytes, &theirs) != 0) {
        snprintf(why, len, "its join request is not a ringd hello");
        return;
    }
    ring_hello_fill(comm, 0, 0, &mine);
    ring_hello_for_join(&mine, rank);
    theirs.rank = rank;
    if (comm->size == 1) { /* a ring of one runs no transport: the setting decides, later */
        mine.transport = theirs.transport;
        ring_hello_for_join(&mine, rank);
    }
    if (ring_hello_check(comm, &mine, &theirs, "asking to join") != RING_OK)
        snprintf(why, len, "%s", ring_last_error());
}

/* The address members reach a joiner at (its record's, as the rendezvous picks). */
static int grow_addr(const ring_comm_t *comm, const rdzv_record_t *rec, char *buf, size_t len)
{
    ring_peer_addr_t a;
    const char *pick = rec->addr[0];

    for (int i = 0; i < rec->naddr; i++) /* loopback only when every peer is here */
        if ((strncmp(rec->addr[i], "127.", 4) == 0 || strcmp(rec->addr[i], "::1") == 0) ==
            comm->rdzv.all_local) {
            pick = rec->addr[i];
            break;
        }
    snprintf(a.host, sizeof(a.host), "%s", pick);
    a.port = rec->port;
    ring_peer_format(&a, buf, len);
    return 0;
}

/* Rank 0: read the join slots from next_slot on; the admissible ones in js, at most
 * room of them (the rest are turned away: the ring is full). */
static void grow_collect(ring_comm_t *comm, int room, grow_head_t *head, grow_joiner_t *js)
{
    ring_store_t *store = comm->rdzv.store;
    char key[64], hex[2 * RING_HELLO_BYTES + 8], text[RDZV_RECORD_MAX], why[1024];

    head->count = 0;
    head->next_slot = comm->elastic.next_slot;
    for (int tries = 0; store != NULL && head->count < GROW_MAX; tries++) {
        rdzv_record_t rec;
        int present = 0;

        snprintf(key, sizeof(key), "join/%u", head->next_slot);
        if (store->ops->check(store, key, &present) != RING_OK) {
            /* a tcp store drops a client idle for minutes: once more, connected again */
            if (tries > 0 || ring_rendezvous_reconnect(comm) != RING_OK)
                return;
            store = comm->rdzv.store;
            continue;
        }
        if (!present)
            return;
        head->next_slot++;
        snprintf(key, sizeof(key), "join/%u/hello", head->next_slot - 1);
        if (store->ops->get(store, key, hex, sizeof(hex), ring_now() + GROW_READ_S) != RING_OK)
            continue;
        snprintf(key, sizeof(key), "join/%u", head->next_slot - 1);
        if (store->ops->get(store, key, text, sizeof(text), ring_now() + GROW_READ_S) !=
                RING_OK ||
            ring_rdzv_record_parse(text, &rec, why, sizeof(why)) != 0)
            continue; /* not a ringd record: nobody to answer */
        grow_compare(comm, hex, (uint32_t)(comm->size + (int)head->count), why, sizeof(why));
        if (why[0] == '\0' && rec.provisional && !comm->rdzv.all_local)
            snprintf(why, sizeof(why), "it listens on loopback only (a file store, and neither "
                     "--bind nor --iface), and the ring spans several hosts: start it with "
                     "--bind or --iface");
        if (why[0] == '\0' && (int)head->count >= room)
            snprintf(why, sizeof(why), "the ring is full: it has %d peers and takes at most %d "
                     "(ringd --elastic MIN:MAX)", comm->size, comm->size + room);
        if (why[0] == '\0' && comm->size > 1 && strcmp(rec.transport, comm->tp_ops->name) != 0)
            snprintf(why, sizeof(why), "it runs the %s transport, the ring %s (--transport)",
                     rec.transport, comm->tp_ops->name);
        if (why[0] != '\0') {
            grow_refuse(store, rec.nonce, why);
            continue;
        }
        grow_addr(comm, &rec, js[head->count].addr, sizeof(js[0].addr));
        snprintf(js[head->count].nonce, sizeof(js[0].nonce), "%s", rec.nonce);
        head->count++;
    }
}

/* "host:port,..." of the members (rank order) and then the joiners. */
static char *grow_peers(const ring_comm_t *comm, const grow_joiner_t *js, int n)
{
    size_t cap = (size_t)(comm->size + n) * GROW_ADDR + 1, used = 0;
    char *s = malloc(cap), addr[GROW_ADDR];

    if (s == NULL)
        return NULL;
    s[0] = '\0';
    for (int r = 0; r < comm->size; r++) {
        ring_peer_format(&comm->topo.peers[r], addr, sizeof(addr));
        used += (size_t)snprintf(s + used, cap - used, "%s%s", used ? "," : "", addr);
    }
    for (int j = 0; j < n; j++)
        used += (size_t)snprintf(s + used, cap - used, ",%s", js[j].addr);
    return s;
}

static void grow_admit(ring_comm_t *comm, const grow_joiner_t *js, int n, char *peers)
{
    size_t len = strlen(peers) + 256;
    char *text = malloc(len), key[96];
    rdzv_admit_t a;

    for (int j = 0; j < n && text != NULL; j++) {
        memset(&a, 0, sizeof(a));
        a.ok = 1;
        a.generation = comm->elastic.generation + 1;
        a.world = comm->size + n;
        a.rank = comm->size + j;
        a.peers = peers;
        snprintf(key, sizeof(key), "admit/%s", js[j].nonce);
        if (ring_rdzv_admit_format(&a, text, len) == 0)
            (void)comm->rdzv.store->ops->set(comm->rdzv.store, key, text);
    }
    free(text);
}

/* Open the ring of members and joiners, and check it: a barrier needs them all. */
static ring_status_t grow_open(ring_comm_t *comm, char *peers, int world, ring_comm_t **nc_p)
{
    ring_config_t cfg;
    ring_status_t st;

    RING_CHECK(ring_config_copy(&cfg, &comm->cfg));
    free(cfg.peers);
    cfg.peers = peers;
    /* every member is up and waiting: no long start-up (a dead joiner costs this) */
    if (cfg.timeout_s < cfg.connect_timeout_s)
        cfg.connect_timeout_s = cfg.timeout_s;
    cfg.world_size = world;
    cfg.rendezvous[0] = '\0';
    cfg.host_id[0] = '\0';
    cfg.ring_order = RING_CFG_ORDER_RANK;
    cfg.autotune = 0;
    st = ring_comm_open(&cfg, nc_p);
    cfg.peers = NULL; /* the caller's */
    ring_config_free(&cfg);
    if (st == RING_OK && (st = ring_barrier(*nc_p)) != RING_OK) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", ring_last_error());
        ring_comm_close(*nc_p);
        *nc_p = NULL;
        st = ring_error_set(st, "%s", msg);
    }
    return st;
}

/* Over the old ring: did the new one come up for every member? */
static ring_status_t grow_agree(ring_comm_t *comm, int mine_ok, int *all_ok)
{
    float bad = mine_ok ? 0.0f : 1.0f;
    ring_request_t *req = NULL;

    RING_CHECK(ring_allreduce_start_flags(comm, &bad, &bad, 1, RING_FLOAT32, RING_SUM,
                                          RING_GROW_TENSOR_ID, RING_CALL_EXACT, &req));
    RING_CHECK(ring_request_wait(req));
    *all_ok = bad == 0.0f;
    return RING_OK;
}

ring_status_t ring_comm_grow(ring_comm_t *comm, ring_comm_t **new_comm_p)
{
    return ring_comm_grow_upto(comm, 0, new_comm_p);
}

ring_status_t ring_comm_grow_upto(ring_comm_t *comm, int max_size, ring_comm_t **new_comm_p)
{
    double t0 = ring_now();
    grow_head_t head = {0, 0};
    grow_joiner_t js[GROW_MAX];
    ring_comm_t *nc = NULL;
    ring_status_t st;
    char *peers;
    int all_ok = 0, n;

    if (comm == NULL || new_comm_p == NULL)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_grow: comm and new_comm_p must not "
                              "be NULL");
    *new_comm_p = NULL;
    if (comm->fail.error != RING_OK)
        return ring_error_copy(comm->fail.error, comm->fail.error_msg);
    if (!comm->cfg.elastic)
        return ring_error_set(RING_ERR_INVALID, "ring_comm_grow: the ring is not elastic: open "
                              "it with --elastic on (RING_ELASTIC=on) and a rendezvous store");
    memset(js, 0, sizeof(js));
    if (comm->rank == 0)
        grow_collect(comm, max_size > 0 ? max_size - comm->size : GROW_MAX, &head, js);
    if (comm->size > 1)
        RING_CHECK(ring_broadcast(comm, &head, sizeof(head), 0));
    comm->elastic.next_slot = head.next_slot;
    n = (int)head.count;
    if (n == 0 || n > GROW_MAX) {
        *new_comm_p = comm; /* nobody waits: the ring stays as it is */
        return RING_OK;
    }
    if (comm->size > 1)
        RING_CHECK(ring_broadcast(comm, js, (size_t)n * sizeof(js[0]), 0));
    for (int j = 0; j < n; j++) { /* from the wire (a member's own rank 0): terminated */
        js[j].addr[sizeof(js[j].addr) - 1] = '\0';
        js[j].nonce[sizeof(js[j].nonce) - 1] = '\0';
    }
    if ((peers = grow_peers(comm, js, n)) == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory growing the ring");
    if (comm->rank == 0)
        grow_admit(comm, js, n, peers);
    ring_log(RING_LOG_INFO, "grow: admitting %d peer%s (%d -> %d)", n, n > 1 ? "s" : "",
             comm->size, comm->size + n);
    st = grow_open(comm, peers, comm->size + n, &nc);
    free(peers);
    if (st != RING_OK)
        ring_log(RING_LOG_WARN, "grow: the ring with the new peer%s did not come up: %s",
                 n > 1 ? "s" : "", ring_last_error());
    st = grow_agree(comm, st == RING_OK, &all_ok);
    if (st != RING_OK || !all_ok) {
        if (st == RING_OK)
            ring_log(RING_LOG_WARN, "grow: not every member has the new ring: going on without "
                     "the new peer%s", n > 1 ? "s" : "");
        ring_comm_close(nc);
        if (st != RING_OK)
            return st;
        *new_comm_p = comm;
        return RING_OK;
    }
    if ((nc->elastic.parent = malloc((size_t)nc->size * sizeof(int))) == NULL) {
        ring_comm_close(nc);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory growing the ring");
    }
    for (int r = 0; r < nc->size; r++)
        nc->elastic.parent[r] = r < comm->size ? r : -1;
    nc->elastic.generation = comm->elastic.generation + 1;
    nc->elastic.next_slot = comm->elastic.next_slot;
    ring_rendezvous_hand_over(comm, nc);
    snprintf(nc->elastic.report, sizeof(nc->elastic.report),
             "grew from %d to %d peers in %.3f s", comm->size, nc->size, ring_now() - t0);
    ring_log(RING_LOG_INFO, "grow: %s", nc->elastic.report);
    *new_comm_p = nc;
    return RING_OK;
}

int ring_comm_joined(const ring_comm_t *comm)
{
    return comm != NULL && comm->rdzv.joined;
}
