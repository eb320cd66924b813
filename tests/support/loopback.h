/*
 * loopback.h - sockets on 127.0.0.1 for tests that play a stranger, a proxy or
 * a store's client at the byte level (t-auth-relay, t-auth-splice,
 * t-store-avail, t-store-limits; loopback.c).
 */
#ifndef RING_TEST_LOOPBACK_H
#define RING_TEST_LOOPBACK_H

/* A socket listening on 127.0.0.1:port (SO_REUSEADDR), or -1. */
int lo_listen(int port);
/* A socket connected to 127.0.0.1:port (one attempt), or -1. */
int lo_dial(int port);
/* The port of the rank-th "HOST:PORT" entry of a RING_PEERS list, or 0. */
int lo_port_of(const char *peers, int rank);

#endif
