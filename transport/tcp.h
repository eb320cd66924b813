/* tcp.h - the TCP transport: non-blocking sockets, length-prefixed messages. */
#ifndef RING_TCP_H
#define RING_TCP_H

#include <poll.h>

#include "transport.h"

#define TCP_MAX_EPS 1024 /* > 2 x (16 channels x 16 streams) + connect.c's spare slots */
#define TCP_WAIT_FDS (TCP_MAX_EPS + 4)

extern const ring_tp_ops_t ring_tcp_ops;

/* What tcp's wait() polls, for a transport that bootstraps over tcp and adds
 * descriptors of its own: fills pfd (TCP_WAIT_FDS entries), may shorten *timeout_ms. */
int tcp_wait_fds(ring_tp_t *tp, struct pollfd *pfd, int *timeout_ms);

/* An endpoint's socket, for a transport that watches it itself (shm: liveness). */
int tcp_ep_fd(const ring_tp_ep_t *ep);

#endif /* RING_TCP_H */
