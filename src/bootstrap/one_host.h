/* one_host.h - what a job's settings alone say about where its peers run. */
#ifndef RING_ONE_HOST_H
#define RING_ONE_HOST_H

#include <stddef.h>

#include <ringd/config.h>

/* 127.0.0.0/8, ::1 or "localhost". */
int ring_host_is_loopback(const char *host);

/* What a --bind value says: "*" is every address; a loopback bind is a
 * loopback host (above) or the interface "lo". The engine asks these instead
 * of comparing the setting's words itself. */
int ring_bind_is_any(const char *bind);
int ring_bind_is_loopback(const char *bind);

/*
 * 1 when cfg shows that every peer runs on this host, with *why saying how:
 * a rendezvous store reached over loopback, or a peer list of loopback
 * addresses or of one address only. 0 when it does not show it (a store
 * elsewhere, a file store, peers at several addresses, one peer) or when
 * --host-id is set (the user names the hosts: tests that stand in for
 * several on one machine).
 */
int ring_config_one_host(const ring_config_t *cfg, char *why, size_t len);

#endif /* RING_ONE_HOST_H */
