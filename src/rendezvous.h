/* rendezvous.h - peers finding each other through a store (rendezvous.c). */
#ifndef RING_RENDEZVOUS_H
#define RING_RENDEZVOUS_H

#include <stddef.h>

#include <ringd/status.h>

#include "peers.h"

typedef enum ring_rdzv_kind { RING_RDZV_TCP = 1, RING_RDZV_FILE } ring_rdzv_kind_t;

typedef struct ring_rdzv_url {
    ring_rdzv_kind_t kind;
    char host[256];  /* tcp: the store's host, without brackets */
    int port;        /* tcp */
    char path[4096]; /* file: an absolute directory */
} ring_rdzv_url_t;

/* "tcp://HOST:PORT", "tcp://[V6]:PORT" or "file:///DIR": 0, or -1 saying why. */
int ring_rdzv_url_parse(const char *url, ring_rdzv_url_t *u, char *why, size_t len);

/* A peer's rendezvous record, as it publishes it (text, "name value" lines). */
#define RDZV_ADDRS 8
#define RDZV_RECORD_MAX 2048

typedef struct rdzv_record {
    int world;
    char transport[16];
    char nonce[40];
    char host[RING_HOST_MAX];
    char group[RING_HOST_MAX]; /* --host-id, else host */
    int port;
    char addr[RDZV_ADDRS][RING_HOST_MAX]; /* numeric, or --bind's host name */
    int naddr;
} rdzv_record_t;

/* Parse a record read from a store (untrusted: fuzzed in tests/fuzz); text is
 * cut up in place. 0, or -1 with what is wrong in why. */
int ring_rdzv_record_parse(char *text, rdzv_record_t *rec, char *why, size_t len);

struct ring_comm;

/*
 * Listen, publish this peer's record (host name, port, addresses), wait
 * for every rank's (a barrier), then fill comm->peers with the address to
 * reach each rank by and comm->hosts with their host names. A rank that
 * never arrives is named in the timeout error.
 */
ring_status_t ring_rendezvous(struct ring_comm *comm);

/*
 * File store only (else *changed = 0): read rank's record again, for when
 * its address refuses connections. A crashed run of the same job leaves
 * records behind, and a peer that started before rank's fresh one was
 * written may have read the old one. *changed = 1 when comm->peers[rank]
 * now holds a new address. A record that moved to another host fails
 * (the ring's order could differ between peers).
 */
ring_status_t ring_rendezvous_refresh(struct ring_comm *comm, int rank, int *changed);

/* A file store's record of other settings (a crashed run's?) gets this long to be replaced. */
#define RING_RDZV_STALE_GRACE_S 5.0

/* 1 while this peer reads a file store (until the ring is up): records may be stale. */
int ring_rendezvous_file(const struct ring_comm *comm);

/* Once the ring is up: close the store, unless this peer owns a file store. */
void ring_rendezvous_done(struct ring_comm *comm);

/* Stop the store this peer serves (rank 0), remove the job's files. */
void ring_rendezvous_close(struct ring_comm *comm);

#endif /* RING_RENDEZVOUS_H */
