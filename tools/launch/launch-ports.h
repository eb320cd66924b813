/* launch-ports.h - the ports ring-launch's ranks listen on (launch-ports.c). */
#ifndef RING_LAUNCH_PORTS_H
#define RING_LAUNCH_PORTS_H

#include "launch-opts.h"

/* Fill ports[0..n) for this node's ranks and return one socket per rank, still
 * bound (-1 where none), to close just before the ranks start: free ports
 * probed on --host, so the kernel cannot hand one out twice, or --base-port + i
 * checked free. NULL after saying why on stderr: out of memory, or a busy port
 * (named, with the fix). */
int *launch_ports_probe(const struct launch_opts *o, int *ports);

/* Bind PORT on every address (0: a port the kernel picks; a given one with
 * SO_REUSEADDR, as torch's TCPStore binds it) and return the socket, or -1 with
 * errno (EADDRINUSE: busy); *got_p is the port bound. For the torch store's
 * MASTER_PORT (launch-torch.c): rank 0 serves it on every address. */
int launch_port_hold(int port, int *got_p);

/* With --rendezvous tcp://HOST:PORT on node 0, where rank 0 serves the store:
 * exits 1 when PORT is taken on this host, before any rank starts. Also checks
 * --host. */
void launch_rdzv_port_check(const struct launch_opts *o);

#endif /* RING_LAUNCH_PORTS_H */
