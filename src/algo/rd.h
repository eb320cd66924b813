/* rd.h - recursive doubling for small allreduces (rd.c). */
#ifndef RING_RD_H
#define RING_RD_H

#include "algo.h"
#include "subcomm.h"

/*
 * After the ring is up, with --algo rd, or auto on a ring where it pays (2 or
 * more peers): open the pairs (their ports allgathered over the ring) and set
 * comm->algo.ops[RING_ALGO_RD], through which the engine runs small fp32
 * allreduces over them. The hello made sure the peers agree on --algo and
 * --rd-max-bytes. rd.c sits above the engine, like hier.c.
 */
ring_status_t ring_rd_open(ring_comm_t *comm, ring_sub_open_fn open_fn,
                           ring_sub_close_fn close_fn);
void ring_rd_close(ring_comm_t *comm);
/* The largest allreduce rd takes under --algo auto, and setting it (rd_fit.c) */
size_t ring_rd_max_bytes(const ring_comm_t *comm);
void ring_rd_set_max_bytes(ring_comm_t *comm, size_t bytes);
/* The same for Rabenseifner's algorithm (0 where it does not run: N not a
 * power of two of at least 4, or --rh-max-bytes 0) */
size_t ring_rh_max_bytes(const ring_comm_t *comm);
void ring_rh_set_max_bytes(ring_comm_t *comm, size_t bytes);
/* rd_fit.c, --rd-fit on (or auto with --autotune on): time rd against the ring
 * at 2..16 times --rd-max-bytes and let rd take the sizes where it gains, then
 * Rabenseifner's the same way (rank 0 decides for every peer) */
ring_status_t ring_rd_fit(ring_comm_t *comm);
/* Where a challenger (rd, Rabenseifner's) should stop, from the times of the
 * ring (secs[k][0]) and of it (secs[k][1]) at steps growing sizes: the number
 * of sizes, from the first, whose summed log(ring / challenger) is largest (0
 * when it gains nowhere; the fewer on a tie). A clear win at three sizes
 * outweighs a noisy loss at the first; a size not timed (0) ends the list. */
int ring_fit_cut(const double (*secs)[2], int steps);

#endif /* RING_RD_H */
