/* launch-nodes.h - ring-launch across nodes, torchrun-style (launch-nodes.c):
 * the node options' checks, each rank's global rank and its environment. */
#ifndef RING_LAUNCH_NODES_H
#define RING_LAUNCH_NODES_H

#include <stddef.h>

#include "launch-opts.h"

/* --rendezvous tcp://HOST:PORT split up; file:///DIR gives port 0 and an empty host. */
struct launch_rdzv {
    char host[256];
    int port;
};

/* Split URL into r: 0, or -1 saying why in err (what to write instead). */
int launch_rdzv_parse(const char *url, struct launch_rdzv *r, char *err, size_t errlen);

/* After parsing: check -n, --nproc-per-node, --nnodes, --node-rank and
 * --rendezvous against each other, settling n and node_rank: 0, or -1 with the
 * usage error in err. */
int launch_nodes_check(struct launch_opts *o, char *err, size_t errlen);

/* Rank i of this node's ranks: its rank in the whole job (node_rank * n + i). */
long launch_global_rank(const struct launch_opts *o, long i);

/* Rank i's rank among the ranks of its host (RING_LOCAL_RANK): with --hosts, the
 * ranks sharing its entry; else its place on this node. */
long launch_local_rank(const struct launch_opts *o, long rank);

/* The ranks of every node together (nnodes * n). */
long launch_world_size(const struct launch_opts *o);

/* In the forked child of rank i: RING_RANK, RING_LOCAL_RANK, RING_WORLD_SIZE and
 * either RING_PEERS (peers) or, with --rendezvous, RING_RENDEZVOUS (and RING_BIND
 * with --host, RING_PORT with --base-port). 0, or -1 with errno. */
int launch_rank_setenv(const struct launch_opts *o, long i, const char *peers);

/* Whether the per-run secret ring-launch makes can serve this job: not across
 * nodes, which could not share it. Says once on stderr what to do instead. */
int launch_nodes_secret_usable(const struct launch_opts *o);

#endif /* RING_LAUNCH_NODES_H */
