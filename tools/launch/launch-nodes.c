/*
 * launch-nodes.c - ring-launch across nodes, as torchrun: one ring-launch per
 * node, each with --nnodes N --node-rank R --nproc-per-node P --rendezvous
 * tcp://HOST:PORT. Node R's rank i is rank R*P+i of N*P. The ranks find each
 * other at the rendezvous store that libringd's rank 0 serves at HOST:PORT
 * (so HOST is node 0's address), not by a peer list: a launcher cannot know
 * the other nodes' free ports, and the store needs no second channel between
 * launchers. Each rank listens where libringd puts it at a rendezvous (the
 * first interface that is not lo or docker*, or 127.0.0.1 when HOST is
 * loopback), or on --host, which becomes RING_BIND.
 */
#include "ring_build.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch-nodes.h"

#define LAUNCH_MAX_WORLD 65536   /* RING_LOCAL_RANK and ranks stay in libringd's range */

int launch_rdzv_parse(const char *url, struct launch_rdzv *r, char *err, size_t errlen)
{
    const char *h, *colon, *end;
    char *stop;
    long port;

    memset(r, 0, sizeof(*r));
    if (strncmp(url, "file:///", 8) == 0)
        return 0;
    if (strncmp(url, "tcp://", 6) != 0) {
        snprintf(err, errlen, "--rendezvous '%s': expected tcp://HOST:PORT (node 0's address "
                 "and a free port, the same on every node) or file:///DIR (a directory every "
                 "node sees)", url);
        return -1;
    }
    h = url + 6;
    if (h[0] == '[') {
        end = strchr(h, ']');
        colon = end != NULL && end[1] == ':' ? end + 1 : NULL;
        h++;
    } else {
        colon = strrchr(h, ':');
        end = colon;
        if (colon != NULL && memchr(h, ':', (size_t)(colon - h)) != NULL)
            colon = NULL;   /* a bare IPv6 address */
    }
    if (colon == NULL || end == h || (size_t)(end - h) >= sizeof(r->host)) {
        snprintf(err, errlen, "--rendezvous '%s': expected tcp://HOST:PORT, e.g. "
                 "tcp://10.0.0.1:29500 (IPv6: tcp://[ADDR]:PORT)", url);
        return -1;
    }
    errno = 0;
    port = strtol(colon + 1, &stop, 10);
    if (colon[1] == '\0' || *stop != '\0' || errno != 0 || port < 1 || port > 65535) {
        snprintf(err, errlen, "--rendezvous '%s': the port must be 1..65535", url);
        return -1;
    }
    memcpy(r->host, h, (size_t)(end - h));
    r->port = (int)port;
    return 0;
}

/* A usage error of the node options: the message in err, for launch-opts.c to die with. */
static int nodes_bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int nodes_bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int launch_nodes_check(struct launch_opts *o, char *err, size_t n)
{
    struct launch_rdzv rv;
    long nodes = o->nnodes ? o->nnodes : 1;

    if (o->n && o->nproc_per_node)
        return nodes_bad(err, n, "%s", o->nnodes
                         ? "-n with --nnodes: give --nproc-per-node P alone, the ranks of each "
                           "node (the job has --nnodes x P)"
                         : "-n and --nproc-per-node both count this node's ranks: give one");
    if (o->n && o->nnodes)
        return nodes_bad(err, n, "-n with --nnodes: use --nproc-per-node P instead, the ranks "
                         "of each node (the job has --nnodes x P)");
    if (o->nproc_per_node)
        o->n = o->nproc_per_node;
    if (o->n == 0)
        return nodes_bad(err, n, "%s", o->nnodes
                         ? "missing --nproc-per-node P, the ranks of each node"
                         : "missing required option -n N (or --nproc-per-node N)");
    if (o->node_rank >= 0 && !o->nnodes)
        return nodes_bad(err, n, "--node-rank %ld needs --nnodes N, the number of nodes",
                         o->node_rank);
    if (nodes > 1 && o->node_rank < 0)
        return nodes_bad(err, n, "--nnodes %ld needs --node-rank R, this node's index 0..%ld "
                         "(node 0 runs rank 0, which serves the rendezvous)", nodes, nodes - 1);
    if (o->node_rank >= nodes)
        return nodes_bad(err, n, "--node-rank %ld is out of range for --nnodes %ld: nodes are "
                         "numbered 0..%ld", o->node_rank, nodes, nodes - 1);
    if (o->node_rank < 0)
        o->node_rank = 0;
    if (nodes > 1 && !o->rendezvous)
        return nodes_bad(err, n, "--nnodes %ld needs --rendezvous tcp://HOST:PORT, the same on "
                         "every node: HOST is node 0's address (its rank 0 serves the store "
                         "there), PORT a free port", nodes);
    if (nodes * o->n > LAUNCH_MAX_WORLD)
        return nodes_bad(err, n, "--nnodes %ld x --nproc-per-node %ld is more than %d ranks",
                         nodes, o->n, LAUNCH_MAX_WORLD);
    if (o->rendezvous && launch_rdzv_parse(o->rendezvous, &rv, err, n) != 0)
        return -1;
    if (o->rendezvous && o->nhosts > 0)
        return nodes_bad(err, n, "--hosts gives the ranks a peer list; with --rendezvous they "
                         "meet at the store instead: leave --hosts out (--host ADDR sets where "
                         "this node's ranks listen)");
    return 0;
}

long launch_global_rank(const struct launch_opts *o, long i)
{
    return o->node_rank * o->n + i;
}

long launch_local_rank(const struct launch_opts *o, long rank)
{
    return o->nhosts > 0 ? rank / o->nhosts : rank;
}

long launch_world_size(const struct launch_opts *o)
{
    return (o->nnodes ? o->nnodes : 1) * o->n;
}

static int launch_env_long(const char *name, long v)
{
    char num[32];

    snprintf(num, sizeof(num), "%ld", v);
    return setenv(name, num, 1);
}

int launch_rank_setenv(const struct launch_opts *o, long i, const char *peers)
{
    if (launch_env_long("RING_RANK", launch_global_rank(o, i)) != 0 ||
        launch_env_long("RING_LOCAL_RANK", launch_local_rank(o, i)) != 0 ||
        launch_env_long("RING_WORLD_SIZE", launch_world_size(o)) != 0)
        return -1;
    if (!o->rendezvous)
        return setenv("RING_PEERS", peers, 1);
    /* a caller's peer list must not compete with the store */
    if (unsetenv("RING_PEERS") != 0 || setenv("RING_RENDEZVOUS", o->rendezvous, 1) != 0)
        return -1;
    if (o->host_given && setenv("RING_BIND", o->host, 1) != 0)
        return -1;
    return o->base_port ? launch_env_long("RING_PORT", o->base_port + i) : 0;
}

int launch_nodes_secret_usable(const struct launch_opts *o)
{
    const char *s = getenv("RING_SECRET"), *f = getenv("RING_SECRET_FILE");

    if (o->nnodes <= 1 || (s != NULL && *s != '\0') || (f != NULL && *f != '\0'))
        return 1;
    fprintf(stderr, "ring-launch: note: the ranks of %ld nodes run without a secret (one made "
            "here could not reach the other nodes), so anyone who can reach their ports can "
            "join: give every node's ring-launch the same RING_SECRET_FILE\n", o->nnodes);
    return 0;
}
