/* launch-torch.h - torchrun's variables for ring-launch's ranks
 * (launch-torch.c), so that torch.distributed's env:// works under it. */
#ifndef RING_LAUNCH_TORCH_H
#define RING_LAUNCH_TORCH_H

#include "launch-opts.h"

/* Where torch.distributed's store is: rank 0 serves it on MASTER_PORT. */
struct launch_torch {
    char addr[256];     /* MASTER_ADDR; "" when ring-launch cannot know rank 0's address */
    int port;           /* MASTER_PORT; 0 when none */
};

/* Once per attempt, after launch_ports_probe (whose sockets still hold the ranks'
 * ports): fill t and return a socket that holds MASTER_PORT, to close just
 * before the ranks start, or -1 when none is held. Notes on stderr what goes
 * wrong (a busy port); never fails the job, which may not use torch at all. */
int launch_torch_prepare(const struct launch_opts *o, struct launch_torch *t);

/* In the forked child of this node's rank i: RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT, each unless the
 * caller set it (not empty). 0, or -1 with errno. */
int launch_torch_setenv(const struct launch_opts *o, long i, const struct launch_torch *t);

/* Once, before any rank starts: a note on stderr for each of the caller's
 * variables that is kept but cannot be right for every rank (RANK or LOCAL_RANK
 * with several ranks, another WORLD_SIZE than the job's). */
void launch_torch_check(const struct launch_opts *o);

#endif /* RING_LAUNCH_TORCH_H */
