/* peers.h - the static peer list: "host[:port],..." in rank order. */
#ifndef RING_PEERS_H
#define RING_PEERS_H

#include <ringd/status.h>

#define RING_HOST_MAX 256

typedef struct ring_peer_addr {
    char host[RING_HOST_MAX]; /* without IPv6 brackets */
    int port;
} ring_peer_addr_t;

/*
 * Parse list into world_size entries (*addrs_p, to free). An entry without a
 * port gets port_lo + k, where k counts the entries before it on the same
 * host (with or without a port); it must stay within port_hi. Errors name the entry and what is wrong with it.
 */
ring_status_t ring_peers_parse(const char *list, int world_size, int port_lo, int port_hi,
                               ring_peer_addr_t **addrs_p);

/* "host:port" or "[v6]:port" for messages. */
void ring_peer_format(const ring_peer_addr_t *a, char *buf, size_t len);

#endif /* RING_PEERS_H */
