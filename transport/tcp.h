/* tcp.h - the TCP transport: non-blocking sockets, length-prefixed messages. */
#ifndef RING_TCP_H
#define RING_TCP_H

#include "transport.h"

extern const ring_tp_ops_t ring_tcp_ops;

#endif /* RING_TCP_H */
