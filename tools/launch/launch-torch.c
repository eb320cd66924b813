/*
 * launch-torch.c - torchrun's variables for ring-launch's ranks, so that
 * torch.distributed's env:// (init_process_group("gloo"), or "ringd") works
 * under ring-launch as under torchrun: RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT. One the caller
 * set is kept, as a caller's secret or thread count is.
 *
 * MASTER_ADDR:MASTER_PORT is torch's store, which rank 0 serves on every
 * address of its host. It changes nothing in how libringd's ranks meet: they
 * also get RING_PEERS (across nodes RING_RENDEZVOUS), and either beats
 * MASTER_ADDR in libringd's launcher detection (src/bootstrap/launch_env.c).
 * MASTER_PORT is none of the ports the ranks or ringd's store use: on one host
 * a port the kernel picks while the ranks' ports are held (with --base-port P:
 * P+N, the port after theirs, if free); with --hosts P+N, not probed (the
 * ranks may live in other network namespaces); with --rendezvous
 * tcp://HOST:PORT, HOST and PORT+1, the port after ringd's store, the same on
 * every node without a word between them (ringd under torchrun takes
 * MASTER_PORT+1 for its store the same way round).
 */
#include "ring_build.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch-nodes.h"
#include "launch-ports.h"
#include "launch-torch.h"

static int torch_env_given(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0';
}

static int torch_env_long(const char *name, long v)
{
    char num[32];

    if (torch_env_given(name))
        return 0;
    snprintf(num, sizeof(num), "%ld", v);
    return setenv(name, num, 1);
}

/* With --rendezvous tcp://HOST:PORT on node 0: PORT+1 must be free and no rank's. */
static int torch_port_after_store(const struct launch_opts *o, int port)
{
    int fd, got;

    if (o->node_rank != 0)
        return -1;
    if (o->base_port && port >= o->base_port && port < o->base_port + o->n) {
        fprintf(stderr, "ring-launch: note: MASTER_PORT %d (--rendezvous's PORT + 1) is rank "
                "%ld's port (--base-port %ld), so torch.distributed's env:// store would fail "
                "there: give every node the same free MASTER_PORT, or another --base-port\n",
                port, port - o->base_port, o->base_port);
        return -1;
    }
    fd = launch_port_hold(port, &got);
    if (fd < 0 && errno == EADDRINUSE)
        fprintf(stderr, "ring-launch: note: port %d, the ranks' MASTER_PORT (--rendezvous's "
                "PORT + 1: torch.distributed's env:// store, which rank 0 serves), is in use "
                "on this host: give every node the same free MASTER_PORT\n", port);
    return fd;
}

/* One host (or one node): a free port, held; with --base-port P, P+N if free. */
static int torch_port_here(const struct launch_opts *o, struct launch_torch *t)
{
    long want = o->base_port ? o->base_port + o->n : 0;
    int fd;

    if (want > 0 && want <= 65535) {
        if ((fd = launch_port_hold((int)want, &t->port)) >= 0)
            return fd;
        fprintf(stderr, "ring-launch: note: port %ld, after the ranks' (--base-port %ld + %ld), "
                "is %s: the ranks' MASTER_PORT is a free port instead\n", want, o->base_port,
                o->n, errno == EADDRINUSE ? "in use" : strerror(errno));
    } else if (want > 65535) {
        fprintf(stderr, "ring-launch: note: no port after the ranks' (--base-port %ld + %ld) "
                "for MASTER_PORT: the ranks get a free port instead\n", o->base_port, o->n);
    }
    if ((fd = launch_port_hold(0, &t->port)) < 0) {
        fprintf(stderr, "ring-launch: note: no free port for MASTER_PORT (%s): the ranks get "
                "none\n", strerror(errno));
        t->port = 0;
    }
    return fd;
}

int launch_torch_prepare(const struct launch_opts *o, struct launch_torch *t)
{
    struct launch_rdzv rv = { .port = 0 };
    char why[300];
    const char *addr = o->nhosts > 0 ? o->hosts[0] : o->host;

    memset(t, 0, sizeof(*t));
    if (o->rendezvous && launch_rdzv_parse(o->rendezvous, &rv, why, sizeof(why)) != 0)
        return -1;  /* cannot happen: launch_nodes_check parsed it */
    if (o->rendezvous && rv.port != 0) {
        snprintf(t->addr, sizeof(t->addr), "%s", rv.host);
        t->port = rv.port < 65535 ? rv.port + 1 : 0;
        return t->port != 0 && !torch_env_given("MASTER_PORT")
                   ? torch_port_after_store(o, t->port) : -1;
    }
    if (o->rendezvous) {
        /* file:///DIR: rank 0's address is known only when it runs on this node */
        if (launch_world_size(o) > o->n)
            return -1;
        addr = o->host_given ? o->host : "127.0.0.1";
    }
    snprintf(t->addr, sizeof(t->addr), "%s", addr);
    if (torch_env_given("MASTER_PORT"))
        return -1;
    if (o->nhosts > 0) {
        t->port = o->base_port + o->n <= 65535 ? (int)(o->base_port + o->n) : 0;
        if (t->port == 0)
            fprintf(stderr, "ring-launch: note: no port after the ranks' (--base-port %ld + %ld) "
                    "for MASTER_PORT: the ranks get none\n", o->base_port, o->n);
        return -1;
    }
    return torch_port_here(o, t);
}

int launch_torch_setenv(const struct launch_opts *o, long i, const struct launch_torch *t)
{
    long k = o->nhosts, entry = k > 0 ? i % k : 0;

    if (torch_env_long("RANK", launch_global_rank(o, i)) != 0 ||
        torch_env_long("WORLD_SIZE", launch_world_size(o)) != 0 ||
        torch_env_long("LOCAL_RANK", launch_local_rank(o, i)) != 0 ||
        /* with --hosts, the ranks of its entry: i mod K == entry */
        torch_env_long("LOCAL_WORLD_SIZE", k > 0 ? o->n / k + (entry < o->n % k) : o->n) != 0 ||
        torch_env_long("GROUP_RANK", k > 0 ? entry : o->node_rank) != 0)
        return -1;
    if (t->addr[0] != '\0' && !torch_env_given("MASTER_ADDR") &&
        setenv("MASTER_ADDR", t->addr, 1) != 0)
        return -1;
    return t->port != 0 ? torch_env_long("MASTER_PORT", t->port) : 0;
}

void launch_torch_check(const struct launch_opts *o)
{
    static const char *const own[] = {"RANK", "LOCAL_RANK"};
    const char *v = getenv("WORLD_SIZE");
    char *end;
    long world = launch_world_size(o);

    for (size_t k = 0; k < sizeof(own) / sizeof(own[0]) && o->n > 1; k++)
        if (torch_env_given(own[k]))
            fprintf(stderr, "ring-launch: note: %s=%s of the environment is kept, as ring-launch "
                    "keeps every torchrun variable the caller set, so all %ld ranks get it: "
                    "torch.distributed's env:// needs each rank's own (unset %s)\n", own[k],
                    getenv(own[k]), o->n, own[k]);
    if (v != NULL && *v != '\0' && (strtol(v, &end, 10) != world || *end != '\0'))
        fprintf(stderr, "ring-launch: note: WORLD_SIZE=%s of the environment is kept, as "
                "ring-launch keeps every torchrun variable the caller set, but the job has %ld "
                "ranks: torch.distributed's env:// would wait for the others (unset "
                "WORLD_SIZE)\n", v, world);
}
