/*
 * rdzv_record.h - the words of a rendezvous (rdzv_record.c): the store's
 * URL (--rendezvous) and the record each peer publishes there. Pure
 * parsing and formatting; the rendezvous itself is core/rendezvous.c.
 */
#ifndef RING_RDZV_RECORD_H
#define RING_RDZV_RECORD_H

#include <stddef.h>

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
    int provisional; /* "provisional 1": the peer listens on loopback only until it has
                      * seen every record; when they name other hosts, a record with an
                      * address they can reach replaces this one (rendezvous.c) */
} rdzv_record_t;

/* Parse a record read from a store (untrusted: fuzzed in tests/fuzz); text is
 * cut up in place. 0, or -1 with what is wrong in why. */
int ring_rdzv_record_parse(char *text, rdzv_record_t *rec, char *why, size_t len);

/* The record as text, for the store. */
void ring_rdzv_record_format(const rdzv_record_t *rec, char *buf, size_t len);

/*
 * A running elastic ring's answer to a peer that asked to join (elastic/grow.c
 * writes it under "admit/<the joiner's nonce>", core/rdzv_join.c reads it):
 *
 *   ringd-admit 1
 *   status ok            (or "refused", with "why TEXT")
 *   generation 3
 *   world 5
 *   rank 4
 *   peers h:p,h:p,...    (the new ring, in rank order, exactly as its hello hashes it)
 */
#define RDZV_ADMIT_WHY 512
typedef struct rdzv_admit {
    int ok;
    unsigned generation;
    int world, rank;
    char *peers;                 /* points into the parsed text */
    char why[RDZV_ADMIT_WHY];
} rdzv_admit_t;

/* Parse an admission read from a store (untrusted: fuzzed); text is cut up in
 * place. 0, or -1 with what is wrong in why. */
int ring_rdzv_admit_parse(char *text, rdzv_admit_t *a, char *why, size_t len);
/* The admission as text (peers may be long: buf of len bytes). 0, or -1 when it
 * does not fit. */
int ring_rdzv_admit_format(const rdzv_admit_t *a, char *buf, size_t len);

#endif /* RING_RDZV_RECORD_H */
