/* rendezvous.h - peers finding each other through a store (rendezvous.c). */
#ifndef RING_RENDEZVOUS_H
#define RING_RENDEZVOUS_H

#include <stddef.h>

#include <ringd/status.h>

typedef enum ring_rdzv_kind { RING_RDZV_TCP = 1, RING_RDZV_FILE } ring_rdzv_kind_t;

typedef struct ring_rdzv_url {
    ring_rdzv_kind_t kind;
    char host[256];  /* tcp: the store's host, without brackets */
    int port;        /* tcp */
    char path[4096]; /* file: an absolute directory */
} ring_rdzv_url_t;

/* "tcp://HOST:PORT", "tcp://[V6]:PORT" or "file:///DIR": 0, or -1 saying why. */
int ring_rdzv_url_parse(const char *url, ring_rdzv_url_t *u, char *why, size_t len);

struct ring_comm;

/*
 * Listen, publish this peer's record (host name, port, addresses), wait
 * for every rank's (a barrier), then fill comm->peers with the address to
 * reach each rank by and comm->hosts with their host names. A rank that
 * never arrives is named in the timeout error.
 */
ring_status_t ring_rendezvous(struct ring_comm *comm);

/* Stop the store this peer serves (rank 0), remove the job's files. */
void ring_rendezvous_close(struct ring_comm *comm);

#endif /* RING_RENDEZVOUS_H */
