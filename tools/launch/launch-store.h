/* launch-store.h - the rendezvous store ring-launch serves for an elastic job
 * (launch-store.c): --elastic, and --serve-store alone. */
#ifndef RING_LAUNCH_STORE_H
#define RING_LAUNCH_STORE_H

#include "launch-opts.h"

/* --elastic without --rendezvous: pick a free port on --host for the store and
 * make o->rendezvous tcp://HOST:PORT (o->elastic_store). 0, or -1 saying why. */
int launch_store_port_pick(struct launch_opts *o);

/* --elastic, once the secret is set up: the ranks' RING_ELASTIC, RINGD_ELASTIC
 * and RING_JOB_ID, and on node 0 with a tcp rendezvous the store, served in a
 * thread until launch_store_stop. 0, or -1 saying why on stderr. */
int launch_store_start(const struct launch_opts *o);
void launch_store_stop(void);

/* --serve-store: serve the store until SIGINT, SIGTERM or SIGHUP (0) or --timeout
 * (124); 1 when it cannot. */
int launch_store_serve_only(const struct launch_opts *o);

#endif /* RING_LAUNCH_STORE_H */
