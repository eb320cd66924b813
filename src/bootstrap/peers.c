/* peers.c - parsing the static peer list with errors that name the bad entry. */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "parse.h"
#include "peers.h"

static ring_status_t peers_bad(int index, const char *entry, size_t len, const char *why)
{
    return ring_error_set(RING_ERR_INVALID,
                          "RING_PEERS/--peers entry %d '%.*s': %s (expected host:port, "
                          "[ipv6]:port or host)", index, (int)len, entry, why);
}

static ring_status_t peers_parse_entry(const char *entry, size_t len, int index,
                                       ring_peer_addr_t *a)
{
    const char *host = entry, *colon = NULL;
    size_t host_len;

    a->port = 0;
    if (len == 0)
        return peers_bad(index, entry, len, "empty entry");
    if (entry[0] == '[') {
        const char *close = memchr(entry, ']', len);
        if (close == NULL)
            return peers_bad(index, entry, len, "missing ']' after an IPv6 address");
        host = entry + 1;
        host_len = (size_t)(close - host);
        if (close + 1 < entry + len) {
            if (close[1] != ':')
                return peers_bad(index, entry, len, "junk after ']'");
            colon = close + 1;
        }
    } else {
        colon = memchr(entry, ':', len);
        if (colon != NULL && memchr(colon + 1, ':', len - (size_t)(colon + 1 - entry)) != NULL)
            return peers_bad(index, entry, len, "IPv6 addresses need brackets: [addr]:port");
        host_len = colon != NULL ? (size_t)(colon - entry) : len;
    }
    if (host_len == 0)
        return peers_bad(index, entry, len, "empty host");
    if (host_len >= RING_HOST_MAX)
        return peers_bad(index, entry, len, "host name too long");
    memcpy(a->host, host, host_len);
    a->host[host_len] = '\0';
    if (colon != NULL) {
        char port[16];
        long p;
        size_t plen = len - (size_t)(colon + 1 - entry);

        if (plen == 0 || plen >= sizeof(port))
            return peers_bad(index, entry, len, "bad port");
        memcpy(port, colon + 1, plen);
        port[plen] = '\0';
        if (ring_parse_long(port, &p) != 0 || p < 1 || p > 65535)
            return peers_bad(index, entry, len, "port must be 1..65535");
        a->port = (int)p;
    }
    return RING_OK;
}

ring_status_t ring_peers_parse(const char *list, int world_size, int port_lo, int port_hi,
                               ring_peer_addr_t **addrs_p)
{
    ring_peer_addr_t *addrs;
    const char *p = list != NULL ? list : "";
    int n = 0;
    ring_status_t status;

    if (*p == '\0')
        return ring_error_set(RING_ERR_INVALID,
                              "no peer list: set RING_PEERS or --peers to host:port,... with one "
                              "entry per rank (%d), or let peers meet with --rendezvous "
                              "tcp://HOST:PORT, or start under a launcher (ring-launch, mpirun, "
                              "srun, torchrun)", world_size);
    addrs = calloc((size_t)world_size, sizeof(*addrs));
    if (addrs == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %d peers", world_size);
    /* a list written for another tool: say what the separator is */
    for (const char *q = p; *q != '\0'; q++)
        if (*q == ';' || *q == '\n') {
            status = ring_error_set(RING_ERR_INVALID,
                                    "RING_PEERS/--peers '%s': entries are separated by commas, "
                                    "not %s: write host:port,host:port,... (one per rank, in "
                                    "rank order)", list, *q == ';' ? "';'" : "new lines");
            goto err;
        }
    for (;;) {
        size_t len = strcspn(p, ","), start = 0, stop = len;

        /* "a:1, b:2" is what people write: blanks around an entry are not part of it */
        while (start < stop && (p[start] == ' ' || p[start] == '\t'))
            start++;
        while (stop > start && (p[stop - 1] == ' ' || p[stop - 1] == '\t'))
            stop--;

        if (n == world_size) {
            /* count the rest for the message */
            int total = n;
            for (const char *q = p; *q != '\0'; q++)
                total += *q == ',';
            status = ring_error_set(RING_ERR_INVALID,
                                    "RING_PEERS/--peers has %d entries but the world size is %d",
                                    total + 1, world_size);
            goto err;
        }
        status = peers_parse_entry(p + start, stop - start, n, &addrs[n]);
        if (status != RING_OK)
            goto err;
        n++;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    if (n != world_size) {
        status = ring_error_set(RING_ERR_INVALID,
                                "RING_PEERS/--peers has %d entries but the world size is %d", n,
                                world_size);
        goto err;
    }
    /* entries without a port: the k-th on a host gets port_lo + k */
    for (int i = 0; i < n; i++) {
        int k = 0;

        if (addrs[i].port != 0)
            continue;
        for (int j = 0; j < i; j++)
            k += strcmp(addrs[j].host, addrs[i].host) == 0;
        if (port_lo + k > port_hi) {
            status = ring_error_set(RING_ERR_INVALID,
                                    "RING_PEERS/--peers entry %d '%s' has no port and the port "
                                    "range %d-%d has no room for peer %d on that host", i,
                                    addrs[i].host, port_lo, port_hi, k + 1);
            goto err;
        }
        addrs[i].port = port_lo + k;
    }
    *addrs_p = addrs;
    return RING_OK;
err:
    free(addrs);
    return status;
}

void ring_peer_format(const ring_peer_addr_t *a, char *buf, size_t len)
{
    if (strchr(a->host, ':') != NULL)
        snprintf(buf, len, "[%s]:%d", a->host, a->port);
    else
        snprintf(buf, len, "%s:%d", a->host, a->port);
}
