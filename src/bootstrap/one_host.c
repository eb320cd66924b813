/*
 * one_host.c - whether a job's settings alone show that every peer runs on
 * this host, before any peer is reached. --transport auto then runs shared
 * memory even where an RDMA device is up, as NCCL (SHM/P2P within a node)
 * and Open MPI (vader) do: within a host, memory is faster than a loop out
 * through the HCA and back.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "one_host.h"
#include "peers.h"
#include "rdzv_record.h"

int ring_host_is_loopback(const char *host)
{
    return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
           strcmp(host, "localhost") == 0;
}

int ring_bind_is_any(const char *bind)
{
    return strcmp(bind, "*") == 0;
}

int ring_bind_is_loopback(const char *bind)
{
    return strcmp(bind, "lo") == 0 || ring_host_is_loopback(bind);
}

int ring_config_one_host(const ring_config_t *cfg, char *why, size_t len)
{
    ring_peer_addr_t *addrs = NULL;
    int loopback = 1, same = 1;

    why[0] = '\0';
    if (cfg->world_size < 2 || cfg->host_id[0] != '\0')
        return 0;
    if (ring_config_uses_rendezvous(cfg)) {
        ring_rdzv_url_t url;
        char bad[300];

        if (ring_rdzv_url_parse(cfg->rendezvous, &url, bad, sizeof(bad)) != 0 ||
            url.kind != RING_RDZV_TCP || !ring_host_is_loopback(url.host))
            return 0;
        snprintf(why, len, "every peer is on this host (the rendezvous store is at %s, a "
                 "loopback address)", url.host);
        return 1;
    }
    /* a bad list fails later, where the ring is formed, with its own message */
    if (ring_peers_parse(cfg->peers, cfg->world_size, cfg->port_lo, cfg->port_hi, &addrs) !=
        RING_OK)
        return 0;
    for (int r = 0; r < cfg->world_size; r++) {
        loopback &= ring_host_is_loopback(addrs[r].host);
        same &= strcmp(addrs[r].host, addrs[0].host) == 0;
    }
    if (loopback || same)
        snprintf(why, len, "every peer is on this host (the peer list has %s)",
                 loopback ? "loopback addresses only" : "one address only");
    free(addrs);
    return loopback || same;
}
