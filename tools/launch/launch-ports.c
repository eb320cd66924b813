/*
 * launch-ports.c - the ports ring-launch's ranks listen on. Without
 * --base-port the launcher asks the kernel for free ones (port 0) and holds
 * them until the ranks start. With --base-port it checks that each port is
 * free before any rank starts: a busy port would otherwise fail in the rank,
 * whose library can only suggest its own --port, while under ring-launch the
 * fix is --base-port. The probes set SO_REUSEADDR, as libringd does, so that a
 * port whose last connections of an earlier run sit in TIME_WAIT counts as
 * free: only a socket that listens (or is bound without it) makes it busy.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launch-nodes.h"
#include "launch-ports.h"

/* Parses the host once so the probe sockets and RING_PEERS agree on it. */
static socklen_t launch_host_parse(const char *host, struct sockaddr_storage *ss)
{
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        return sizeof(*s4);
    }
    if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        return sizeof(*s6);
    }
    launch_usage_die("invalid --host '%s' (need a numeric IPv4 or IPv6 address)", host);
    return 0;
}

static void launch_addr_port_set(struct sockaddr_storage *ss, int port)
{
    if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

/* Binds ss's port (0: the kernel's pick) and returns the socket, or -1 with
 * errno; *port is the port bound. */
static int launch_port_bind(const struct sockaddr_storage *ss, socklen_t sl, int reuse,
                            int *port)
{
    struct sockaddr_storage got;
    socklen_t gl = sizeof(got);
    int one = 1, fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd >= 0 && ((reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) ||
                    bind(fd, (const struct sockaddr *)ss, sl) != 0 ||
                    getsockname(fd, (struct sockaddr *)&got, &gl) != 0)) {
        int saved = errno;
        if (close(fd) != 0)
            perror("ring-launch: close");
        errno = saved;
        return -1;
    }
    if (fd >= 0)
        *port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                                : ((struct sockaddr_in *)&got)->sin_port);
    return fd;
}

/* Where the ranks will listen: --host; with a rendezvous and no --host,
 * libringd picks an interface, so every address (0.0.0.0 conflicts with a
 * listener on any of them); --hosts: not here at all (0). */
static socklen_t launch_probe_addr(const struct launch_opts *o, struct sockaddr_storage *ss,
                                   const char **shown)
{
    *shown = o->host;
    if (o->nhosts > 0)
        return 0;
    if (o->rendezvous && !o->host_given) {
        *shown = "this host";
        return launch_host_parse("0.0.0.0", ss);
    }
    return launch_host_parse(*shown, ss);
}

int *launch_ports_probe(const struct launch_opts *o, int *ports)
{
    struct sockaddr_storage ss;
    const char *host;
    socklen_t sl = launch_probe_addr(o, &ss, &host);
    int *fds = calloc((size_t)o->n, sizeof(*fds));
    long i;

    if (fds == NULL) {
        fputs("ring-launch: out of memory\n", stderr);
        return NULL;
    }
    for (i = 0; i < o->n; i++) {
        fds[i] = -1;
        ports[i] = o->base_port ? (int)(o->base_port + i) : 0;
        if (sl == 0 || (o->rendezvous && !o->base_port))
            continue;   /* another namespace, or libringd takes a free port itself */
        launch_addr_port_set(&ss, ports[i]);
        fds[i] = launch_port_bind(&ss, sl, o->base_port != 0, &ports[i]);
        if (fds[i] >= 0)
            continue;
        if (!o->base_port) {
            fprintf(stderr, "ring-launch: cannot bind a TCP port on %s: %s (--host must be an "
                    "address of this host)\n", host, strerror(errno));
        } else if (errno == EADDRINUSE) {
            fprintf(stderr, "ring-launch: port %d on %s, rank %ld's (--base-port %ld + %ld), is "
                    "in use by another program: pick another --base-port (or leave it out to "
                    "probe free ports)\n", ports[i], host, launch_global_rank(o, i),
                    o->base_port, i);
        } else {
            fprintf(stderr, "ring-launch: cannot use port %d on %s, rank %ld's (--base-port "
                    "%ld + %ld): %s%s\n", ports[i], host, launch_global_rank(o, i),
                    o->base_port, i, strerror(errno),
                    errno == EACCES ? " (ports below 1024 need root: pick a --base-port of "
                                      "1024 or more)" : "");
        }
        /* the ports bound so far go back; the caller exits 1 */
        while (--i >= 0)
            if (fds[i] >= 0)
                close(fds[i]);
        free(fds);
        return NULL;
    }
    return fds;
}

int launch_port_hold(int port, int *got_p)
{
    struct sockaddr_storage any;
    socklen_t sl = launch_host_parse("0.0.0.0", &any);

    launch_addr_port_set(&any, port);
    return launch_port_bind(&any, sl, port != 0, got_p);
}

void launch_rdzv_port_check(const struct launch_opts *o)
{
    struct launch_rdzv rv;
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    struct sockaddr_storage any;
    char why[400], service[16];
    int fd = -1, port, err;

    if (o->rendezvous && o->host_given)
        launch_host_parse(o->host, &any);    /* a bad --host fails as usage, here */
    if (!o->rendezvous || o->node_rank != 0 || launch_rdzv_parse(o->rendezvous, &rv, why,
                                                                 sizeof(why)) != 0 ||
        rv.port == 0)
        return;
    snprintf(service, sizeof(service), "%d", rv.port);
    /* as libringd's store: HOST's address, else (not on this host) every address */
    if (getaddrinfo(rv.host, service, &hints, &res) == 0) {
        fd = launch_port_bind((struct sockaddr_storage *)res->ai_addr, res->ai_addrlen, 1, &port);
        err = errno;
        freeaddrinfo(res);
        if (fd < 0 && err == EADDRINUSE)
            goto busy;
    }
    if (fd < 0) {
        socklen_t sl = launch_host_parse("0.0.0.0", &any);
        launch_addr_port_set(&any, rv.port);
        fd = launch_port_bind(&any, sl, 1, &port);
        if (fd < 0 && errno == EADDRINUSE)
            goto busy;
    }
    if (fd >= 0 && close(fd) != 0)
        perror("ring-launch: close");
    return;
busy:
    fprintf(stderr, "ring-launch: port %d of --rendezvous %s is in use on this host, where "
            "rank 0 serves the store: pick another PORT, the same in every node's "
            "--rendezvous\n", rv.port, o->rendezvous);
    exit(1);
}
