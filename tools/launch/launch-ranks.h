/* launch-ranks.h - where each rank of ring-launch runs and how it is started
 * (launch-ranks.c): its address in RING_PEERS, its local rank, and its command
 * line with --exec-prefix. */
#ifndef RING_LAUNCH_RANKS_H
#define RING_LAUNCH_RANKS_H

#include <stddef.h>

#include "launch-opts.h"

/* Split --hosts ADDR,... into o->hosts / o->nhosts: 0, or -1 saying why in err. */
int launch_hosts_parse(struct launch_opts *o, const char *list, char *err, size_t errlen);

/* The address rank listens on: --hosts' entry rank mod K, else --host. */
const char *launch_rank_host(const struct launch_opts *o, long rank);

/* RING_PEERS: HOST:PORT of every rank in rank order ([V6]:PORT); NULL without memory. */
char *launch_peers_build(const struct launch_opts *o, const int *ports);

/* The command line of this node's rank i: --exec-prefix's words with {rank} (its
 * global rank), {node} (the index of its --hosts entry, else --node-rank) and
 * {host} (its address) replaced,
 * then PROGRAM and its arguments (NULL-terminated, malloc'ed; free with
 * launch_rank_argv_free). NULL without memory. */
char **launch_rank_argv(const struct launch_opts *o, long rank);
void launch_rank_argv_free(char **argv);

#endif /* RING_LAUNCH_RANKS_H */
