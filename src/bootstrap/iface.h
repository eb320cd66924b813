/*
 * iface.h - which network interfaces the tcp transport may use, chosen by a
 * list in NCCL_SOCKET_IFNAME's syntax (RING_SOCKET_IFNAME):
 *
 *   eth,ib        names starting with "eth" or "ib" (eth0, eth1, ib0)
 *   =eth0,eth1    exactly these names
 *   ^docker,lo    every name except those starting with "docker" or "lo"
 *   ^=eth1        every name except exactly "eth1"
 *   (empty)       the default rule: every interface except loopback ones
 *                 (IFF_LOOPBACK, or a name starting with "lo") and names
 *                 starting with "docker" - NCCL's "^docker,lo". Bridges and
 *                 veth pairs stay allowed: in a network namespace (our test
 *                 lab) a host's only interface is a veth end, and a host-side
 *                 veth without an address selects nothing anyway.
 *
 * Names are compared with the label getifaddrs(3) reports, so "eth0" also
 * matches an IPv4 alias "eth0:1" and "=eth0:1" names that alias alone.
 * Stricter than NCCL, which silently matches nothing: an empty list after
 * '^' or '=', empty entries, whitespace, '^'/'=' after the start, wildcards
 * ('*', '?'), '/' and names of IF_NAMESIZE characters or more are refused.
 *
 * Nothing here exits, logs or allocates (beyond getifaddrs' own list): an
 * error comes back as text in why (which may be NULL with whylen 0),
 * "RING_SOCKET_IFNAME '<spec>': <what is wrong>", for the caller to log.
 */
#ifndef RING_IFACE_H
#define RING_IFACE_H

#include <net/if.h>
#include <netinet/in.h>
#include <stddef.h>

/* One address of one interface, as the selection sees it. */
typedef struct ring_iface_addr {
    char name[IF_NAMESIZE];         /* getifaddrs' label: "eth0", "eth0:1" */
    int family;                     /* AF_INET or AF_INET6 */
    char addr[INET6_ADDRSTRLEN];    /* numeric, "192.0.2.2" or "fd00::2" */
    int loopback;                   /* IFF_LOOPBACK: never chosen by the default rule */
} ring_iface_addr_t;

/* 0 when spec (NULL or "" = the default rule) is well formed; else -1 with a
 * message naming the bad part in why. */
int ring_iface_spec_check(const char *spec, char *why, size_t whylen);

/* 1 when interface name is allowed by spec (NULL or "" = the default rule,
 * by name only: "lo*" and "docker*" are out), 0 when it is not or when spec
 * is malformed - check it first with ring_iface_spec_check. */
int ring_iface_match(const char *spec, const char *name);

/*
 * The selection, over a list of addresses given in interface order: the
 * entries whose name spec allows (the default rule also drops loopback
 * entries), IPv4 ones first then IPv6 ones except link-local (fe80::/10,
 * unusable without a scope id), each family in the order of all[]; an entry
 * whose addr does not parse as its family is skipped. Writes at
 * most max entries to out and returns how many (extra matches are dropped:
 * out[0] is the best choice), or -1 when spec is malformed.
 */
int ring_iface_select(const char *spec, const ring_iface_addr_t *all, int nall,
                      ring_iface_addr_t *out, int max);

/*
 * ring_iface_select over this host's addresses (getifaddrs), skipping
 * interfaces that are down and addresses that are neither IPv4 nor IPv6.
 * Returns the count (<= max); 0 when nothing matches, with why saying so for
 * the caller's message; -1 with why when spec is malformed or getifaddrs
 * fails.
 */
int ring_iface_addrs(const char *spec, ring_iface_addr_t *out, int max, char *why,
                     size_t whylen);

#endif /* RING_IFACE_H */
