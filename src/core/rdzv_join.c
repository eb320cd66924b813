/*
 * rdzv_join.c - a peer started after its elastic ring is up (a replacement,
 * or one more) meets the same rendezvous store and asks to join. It takes
 * the first free join slot: "join/<k>/hello" (its hello, hex: the settings
 * the ring compares, elastic/grow.c) then "join/<k>" (its rendezvous record:
 * where it listens). The ring's rank 0 reads the slots at the members' next
 * ring_comm_grow and answers under "admit/<nonce>" (rdzv_record.h): refused,
 * saying why, or the new ring's peer list and this peer's rank in it. The
 * join waits for that answer until the start-up deadline.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "comm_int.h"
#include "handshake.h"
#include "log.h"
#include "rendezvous.h"
#include "store.h"

#define JOIN_SLOTS_MAX 4096   /* slots tried before giving up (each join uses one) */
#define ADMIT_MAX (RDZV_RECORD_MAX + 64 * 1024)

/* Claim the first free slot with our hello; *slot_p is its number. */
static ring_status_t join_claim(ring_comm_t *comm, const char *hello_hex, int *slot_p)
{
    ring_store_t *store = comm->rdzv.store;
    char key[64];

    for (int k = 0; k < JOIN_SLOTS_MAX; k++) {
        ring_status_t st;
        snprintf(key, sizeof(key), "join/%d/hello", k);
        st = store->ops->set(store, key, hello_hex);
        if (st == RING_OK) {
            *slot_p = k;
            return RING_OK;
        }
        if (st != RING_ERR_MISMATCH) /* anything but "someone has that slot" */
            return st;
    }
    return ring_error_set(RING_ERR_NO_RESOURCE, "rendezvous %s: all %d join slots are taken",
                          store->where, JOIN_SLOTS_MAX);
}

/* The admission's ring: our rank, its size and its peer list, as every member has
 * them; comm_open.c reads the list as a peer list the user gave. */
static ring_status_t join_take(ring_comm_t *comm, const rdzv_admit_t *a)
{
    char *peers = strdup(a->peers);

    if (peers == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory joining the ring");
    free(comm->cfg.peers);
    comm->cfg.peers = peers; /* the hello hashes it: the members' string, byte for byte */
    comm->cfg.rank = comm->rank = a->rank;
    comm->cfg.world_size = comm->size = a->world;
    comm->cfg.ring_order = RING_CFG_ORDER_RANK;
    comm->elastic.generation = a->generation;
    comm->rdzv.joined = 1;
    ring_log_set_rank(a->rank);
    return RING_OK;
}

ring_status_t ring_rendezvous_join(ring_comm_t *comm, const rdzv_record_t *mine, double deadline)
{
    ring_store_t *store = comm->rdzv.store;
    unsigned char hello[RING_HELLO_BYTES];
    char hex[2 * RING_HELLO_BYTES + 1], key[96], rec[RDZV_RECORD_MAX], why[300], *text;
    double started = ring_now();
    rdzv_admit_t a;
    ring_hello_t h;
    ring_status_t st;
    int slot = -1;

    ring_hello_fill(comm, 0, 0, &h);
    ring_hello_for_join(&h, 0);
    ring_hello_encode(&h, hello);
    for (int i = 0; i < RING_HELLO_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", hello[i]);
    RING_CHECK(join_claim(comm, hex, &slot));
    ring_rdzv_record_format(mine, rec, sizeof(rec));
    snprintf(key, sizeof(key), "join/%d", slot);
    RING_CHECK(store->ops->set(store, key, rec));
    ring_log(RING_LOG_INFO, "rendezvous %s: a ring of job '%s' is running; asked to join it "
             "(slot %d), waiting for its next grow", store->where, comm->cfg.job_id, slot);
    if ((text = malloc(ADMIT_MAX)) == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory joining the ring");
    snprintf(key, sizeof(key), "admit/%s", mine->nonce);
    st = store->ops->get(store, key, text, ADMIT_MAX, deadline);
    if (st == RING_ERR_TIMED_OUT)
        st = ring_error_set(st, "rendezvous %s: asked to join the running ring of job '%s', "
                            "but it did not admit this peer within %.0f s (its members admit "
                            "peers when they call ring_comm_grow: at a step boundary with "
                            "ringd --elastic; raise --connect-timeout if their steps are "
                            "longer)", store->where, comm->cfg.job_id, ring_now() - started);
    else if (st == RING_OK && ring_rdzv_admit_parse(text, &a, why, sizeof(why)) != 0)
        st = ring_error_set(RING_ERR_PROTOCOL, "rendezvous %s: the answer to this peer's join: "
                            "%s", store->where, why);
    else if (st == RING_OK && !a.ok)
        st = ring_error_set(RING_ERR_MISMATCH, "the running ring of job '%s' refused this peer: "
                            "%s", comm->cfg.job_id, a.why);
    else if (st == RING_OK)
        st = join_take(comm, &a);
    if (st == RING_OK)
        ring_log(RING_LOG_INFO, "joined the running ring as rank %d of %d after %.2f s",
                 comm->rank, comm->size, ring_now() - started);
    free(text);
    return st;
}
