/* shm.h - the shared-memory transport: tcp endpoints that move their messages
 * through shared memory when the peer is on the same host (shm_int.h says how). */
#ifndef RING_SHM_H
#define RING_SHM_H

#include "tcp.h"
#include "transport.h"

extern const ring_tp_ops_t ring_shm_ops;

/* For a transport that bootstraps over shm and polls descriptors of its own
 * (verbs with peers on this host): what shm's wait() polls, into pfd
 * (SHM_WAIT_FDS entries; may shorten *timeout_ms), then, after the poll,
 * ring_shm_wait_done. */
#define SHM_WAIT_FDS (TCP_WAIT_FDS + 2 * 1024)
int ring_shm_wait_fds(ring_tp_t *tp, struct pollfd *pfd, int *timeout_ms);
void ring_shm_wait_done(ring_tp_t *tp);
/* Where an endpoint's messages go: 1 shared memory (the peer is on this host),
 * 0 its tcp connection (another host, or the hand-shake failed), -1 not known
 * yet (the hand-shake runs). */
int ring_shm_ep_local(const ring_tp_ep_t *ep);

#endif /* RING_SHM_H */
