/* direct.h - allreduces of peers on one host through one shared segment (direct.c). */
#ifndef RING_DIRECT_H
#define RING_DIRECT_H


/*
 * After the ring is up, with --algo direct or auto, when every peer runs on
 * this host over the shm transport: create (place 0) or map (the others) the
 * segment, unlink its name once all hold it, and set
 * comm->algo.ops[RING_ALGO_DIRECT], through which the engine runs fp32
 * allreduces without a codec.
 * With --algo direct a peer that cannot map it fails the open for all, naming
 * itself; under auto every peer goes on without it (a warning).
 */
ring_status_t ring_direct_open(ring_comm_t *comm);
void ring_direct_close(ring_comm_t *comm);
/* ring_comm_open ran small direct calls (codec_fit.c) and numbers the rounds
 * from 0 again for the user: every peer forgets the rounds its board shows,
 * between two barriers (on the ring), so that no counter of the set-up's
 * rounds passes for a user's call. */
ring_status_t ring_direct_rebase(ring_comm_t *comm);

#endif /* RING_DIRECT_H */
