/* rendezvous.h - a communicator's peers finding each other through a store
 * (rendezvous.c); the store URL and the record it publishes are
 * bootstrap/rdzv_record.h. */
#ifndef RING_RENDEZVOUS_H
#define RING_RENDEZVOUS_H

#include <stddef.h>

#include <ringd/status.h>

#include "rdzv_record.h"

struct ring_comm;

/*
 * Listen, publish this peer's record (host name, port, addresses), wait
 * for every rank's (a barrier), then fill comm->topo.peers with the address to
 * reach each rank by and comm->topo.hosts with their host names. A rank that
 * never arrives is named in the timeout error.
 */
ring_status_t ring_rendezvous(struct ring_comm *comm);

/*
 * File store only (else *changed = 0): read rank's record again, for when
 * its address refuses connections. A crashed run of the same job leaves
 * records behind, and a peer that started before rank's fresh one was
 * written may have read the old one. *changed = 1 when comm->topo.peers[rank]
 * now holds a new address. A record that moved to another host fails
 * (the ring's order could differ between peers).
 */
ring_status_t ring_rendezvous_refresh(struct ring_comm *comm, int rank, int *changed);

/* A file store's record of other settings (a crashed run's?) gets this long to be replaced. */
#define RING_RDZV_STALE_GRACE_S 5.0

/* 1 while this peer reads a file store (until the ring is up): records may be stale. */
int ring_rendezvous_file(const struct ring_comm *comm);

/* Once the ring is up: close the store, unless this peer owns a file store. */
void ring_rendezvous_done(struct ring_comm *comm);

/* Stop the store this peer serves (rank 0), remove the job's files. */
void ring_rendezvous_close(struct ring_comm *comm);

/* --elastic: the key a ring's rank 0 sets once it is up; a peer that finds it joins */
#define RDZV_RUNNING_KEY "elastic/ring"

/* rdzv_join.c: this peer met the store of a running elastic ring (mine: its
 * record, listening already): ask to join, wait for the answer until
 * deadline, and fill comm's rank, size, peers and hosts from it. */
ring_status_t ring_rendezvous_join(struct ring_comm *comm, const rdzv_record_t *mine,
                                   double deadline);
/* --elastic, once the ring is up: rank 0 marks the job's ring as running. */
void ring_rendezvous_mark_running(struct ring_comm *comm);
/* A shrink or a grow: the store (and the server rank 0 runs) goes with the new ring. */
void ring_rendezvous_hand_over(struct ring_comm *from, struct ring_comm *to);
/* Open the store again (a tcp store drops a client idle for minutes). */
ring_status_t ring_rendezvous_reconnect(struct ring_comm *comm);

#endif /* RING_RENDEZVOUS_H */
