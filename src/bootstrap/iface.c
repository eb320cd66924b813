/*
 * iface.c - choosing the tcp transport's interfaces by RING_SOCKET_IFNAME
 * (iface.h).
 *
 * Not built on transport/verbs_hca.c, though the syntax is close: there
 * ':' starts a port number while here it is part of an alias label
 * ("eth0:1"), a lone '^' means "every device" while here it is a mistake,
 * and its messages speak of RDMA devices. A list is checked once, whole,
 * and then matched by walking its text, so nothing is copied or allocated.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "iface.h"

#define IFACE_VAR "RING_SOCKET_IFNAME"

/* NCCL's default; loopback by flag is dropped as well (iface_keep) */
static const char iface_default[] = "^docker,lo";

typedef struct iface_rule {
    int exclude;        /* '^': every name but the listed ones */
    int exact;          /* '=': whole names, not prefixes */
    int deflt;          /* the list was empty: iface_default, and no loopback */
    const char *list;   /* the entries after the markers, checked */
} iface_rule_t;

/* s[0..len) fit for a log line: control bytes as \t, \n or \xNN (a newline in
 * the variable must not split the message), cut with "..." when long */
static const char *iface_quote(const char *s, size_t len, char *buf, size_t buflen)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char one[8];
        size_t n;

        if (c == '\t' || c == '\n')
            n = (size_t)snprintf(one, sizeof(one), "\\%c", c == '\t' ? 't' : 'n');
        else if (c < ' ' || c == 0x7f)
            n = (size_t)snprintf(one, sizeof(one), "\\x%02x", c);
        else
            n = (size_t)snprintf(one, sizeof(one), "%c", c);
        if (o + n + 4 > buflen) {
            memcpy(buf + o, "...", 4);
            return buf;
        }
        memcpy(buf + o, one, n);
        o += n;
    }
    buf[o] = '\0';
    return buf;
}

static void iface_fail(char *why, size_t whylen, const char *spec, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void iface_fail(char *why, size_t whylen, const char *spec, const char *fmt, ...)
{
    char quoted[96];
    va_list ap;
    int n = snprintf(why, whylen, IFACE_VAR " '%s': ",
                     iface_quote(spec, strlen(spec), quoted, sizeof(quoted)));

    if (n < 0 || (size_t)n >= whylen)
        return;
    va_start(ap, fmt);
    vsnprintf(why + n, whylen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* The first character of entry p[0..len) no interface name may hold, or NULL. */
static const char *iface_bad_char(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];

        if (c <= ' ' || c == 0x7f || strchr("^=*?/", c) != NULL)
            return p + i;
    }
    return NULL;
}

static int iface_parse(const char *spec, iface_rule_t *rule, char *why, size_t whylen)
{
    const char *p = spec != NULL ? spec : "";

    memset(rule, 0, sizeof(*rule));
    if (*p == '\0') {
        int rc = iface_parse(iface_default, rule, why, whylen);

        rule->deflt = 1;
        return rc;
    }
    if (*p == '^') {
        rule->exclude = 1;
        p++;
    }
    if (*p == '=') {
        rule->exact = 1;
        p++;
    }
    rule->list = p;
    if (*p == '\0') {
        iface_fail(why, whylen, spec, "empty name after '%s'", spec);
        return -1;
    }
    for (int entry = 1;; entry++) {
        size_t len = strcspn(p, ",");
        const char *bad = iface_bad_char(p, len);
        char ent[64];

        if (len == 0) {
            if (*p == '\0')
                iface_fail(why, whylen, spec, "ends with a comma");
            else
                iface_fail(why, whylen, spec, "entry %d is empty", entry);
            return -1;
        }
        if (bad != NULL || len >= IF_NAMESIZE)
            iface_quote(p, len, ent, sizeof(ent));
        if (bad != NULL) {
            if (*bad == '^' || *bad == '=')
                iface_fail(why, whylen, spec, "entry %d '%s': '%c' may only start the list "
                           "('^', '=' or '^=')", entry, ent, *bad);
            else if (*bad == '*' || *bad == '?')
                iface_fail(why, whylen, spec, "entry %d '%s': no wildcards (without '=' names "
                           "are prefixes already: 'eth' matches eth0)", entry, ent);
            else if (*bad == '/')
                iface_fail(why, whylen, spec, "entry %d '%s': no interface name has a '/'",
                           entry, ent);
            else
                iface_fail(why, whylen, spec, "entry %d '%s' has whitespace or a control "
                           "character (no spaces around names or commas)", entry, ent);
            return -1;
        }
        /* a longer prefix could never match: the kernel's names are shorter */
        if (len >= IF_NAMESIZE) {
            iface_fail(why, whylen, spec, "entry %d '%s' is longer than an interface name "
                       "(%d characters at most)", entry, ent, IF_NAMESIZE - 1);
            return -1;
        }
        p += len;
        if (*p == '\0')
            return 0;
        p++;
    }
}

static int iface_rule_match(const iface_rule_t *rule, const char *name)
{
    int listed = 0;

    for (const char *p = rule->list; *p != '\0' && !listed;) {
        size_t len = strcspn(p, ",");

        listed = strncmp(name, p, len) == 0 && (!rule->exact || name[len] == '\0');
        p += len;
        if (*p == ',')
            p++;
    }
    return rule->exclude ? !listed : listed;
}

int ring_iface_spec_check(const char *spec, char *why, size_t whylen)
{
    iface_rule_t rule;

    return iface_parse(spec, &rule, why, whylen);
}

int ring_iface_match(const char *spec, const char *name)
{
    iface_rule_t rule;

    if (iface_parse(spec, &rule, NULL, 0) != 0)
        return 0;
    return iface_rule_match(&rule, name);
}

/* 1 when a is taken in the pass over family. An address that does not parse
 * cannot be connected to, so it is dropped like a link-local one. */
static int iface_keep(const iface_rule_t *rule, const ring_iface_addr_t *a, int family)
{
    unsigned char bin[sizeof(struct in6_addr)];

    if (a->family != family || !iface_rule_match(rule, a->name) || (rule->deflt && a->loopback))
        return 0;
    if (inet_pton(family, a->addr, bin) != 1)
        return 0;
    /* fe80::/10 needs a scope id, which a bare address text cannot carry */
    return family != AF_INET6 || !(bin[0] == 0xfe && (bin[1] & 0xc0) == 0x80);
}

int ring_iface_select(const char *spec, const ring_iface_addr_t *all, int nall,
                      ring_iface_addr_t *out, int max)
{
    static const int families[] = {AF_INET, AF_INET6};
    iface_rule_t rule;
    int n = 0;

    if (iface_parse(spec, &rule, NULL, 0) != 0)
        return -1;
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
        for (int i = 0; i < nall && n < max; i++)
            if (iface_keep(&rule, &all[i], families[f]))
                out[n++] = all[i];
    return n;
}

/* ifa as a ring_iface_addr_t; 0 when it is not a usable IPv4/IPv6 address
 * of an interface that is up. */
static int iface_from_ifaddrs(const struct ifaddrs *ifa, ring_iface_addr_t *a)
{
    const void *bin;
    int family;

    if (ifa->ifa_addr == NULL || !(ifa->ifa_flags & IFF_UP))
        return 0;
    family = ifa->ifa_addr->sa_family;
    if (family == AF_INET)
        bin = &((const struct sockaddr_in *)(const void *)ifa->ifa_addr)->sin_addr;
    else if (family == AF_INET6)
        bin = &((const struct sockaddr_in6 *)(const void *)ifa->ifa_addr)->sin6_addr;
    else
        return 0;
    memset(a, 0, sizeof(*a));
    if ((size_t)snprintf(a->name, sizeof(a->name), "%s", ifa->ifa_name) >= sizeof(a->name) ||
        inet_ntop(family, bin, a->addr, sizeof(a->addr)) == NULL)
        return 0;
    a->family = family;
    a->loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    return 1;
}

int ring_iface_addrs(const char *spec, ring_iface_addr_t *out, int max, char *why,
                     size_t whylen)
{
    static const int families[] = {AF_INET, AF_INET6};
    struct ifaddrs *list;
    iface_rule_t rule;
    int n = 0;

    if (iface_parse(spec, &rule, why, whylen) != 0)
        return -1;
    if (getifaddrs(&list) != 0) {
        snprintf(why, whylen, "getifaddrs: %s", strerror(errno));
        return -1;
    }
    /* the same two passes as ring_iface_select, straight over the list:
     * a host may hold thousands of addresses (one per veth), no copy needed */
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
        for (const struct ifaddrs *ifa = list; ifa != NULL && n < max; ifa = ifa->ifa_next) {
            ring_iface_addr_t a;

            if (iface_from_ifaddrs(ifa, &a) && iface_keep(&rule, &a, families[f]))
                out[n++] = a;
        }
    freeifaddrs(list);
    if (n == 0 && max > 0)
        iface_fail(why, whylen, spec != NULL ? spec : "",
                   "no interface that is up with an IPv4 or global IPv6 address matches%s",
                   rule.deflt ? " (the default: any but loopback and docker*)" : "");
    return n;
}
