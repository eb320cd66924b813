/*
 * t-iface.c - RING_SOCKET_IFNAME (src/iface.c): prefixes, exact names,
 * exclusion, exact exclusion, the default rule, malformed lists refused with
 * their reason, the selection's order and limit over a made-up host, and one
 * look at this host's real interfaces.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "iface.h"
#include "tap.h"

static void matches(const char *spec, const char *name, int want)
{
    ok(ring_iface_match(spec, name) == want, "'%s' %s %s", spec != NULL ? spec : "(null)",
       want ? "takes" : "leaves out", name);
}

static void accepts(const char *spec)
{
    char why[256] = "";

    ok(ring_iface_spec_check(spec, why, sizeof(why)) == 0, "'%s' is well formed%s%s", spec,
       why[0] != '\0' ? ": " : "", why);
}

/* spec must be refused with `word` in the reason, and select nothing */
static void refuses(const char *spec, const char *word)
{
    char why[256] = "";
    ring_iface_addr_t all[1] = {{"eth0", AF_INET, "192.0.2.2", 0}}, out[1];
    int rc = ring_iface_spec_check(spec, why, sizeof(why));

    ok(rc == -1 && strncmp(why, "RING_SOCKET_IFNAME '", 20) == 0 && strstr(why, word) != NULL &&
       ring_iface_select(spec, all, 1, out, 1) == -1 && !ring_iface_match(spec, "eth0"),
       "refused: %s", why);
}

/* A made-up host, in getifaddrs' order: every IPv4 address, then every IPv6 one. */
static const ring_iface_addr_t host[] = {
    {"lo", AF_INET, "127.0.0.1", 1},
    {"eth0", AF_INET, "192.0.2.2", 0},
    {"eth0:1", AF_INET, "192.0.2.3", 0},
    {"docker0", AF_INET, "172.17.0.1", 0},
    {"ib0", AF_INET, "10.0.0.2", 0},
    {"eth1", AF_INET, "198.51.100.2", 0},
    {"lo", AF_INET6, "::1", 1},
    {"eth0", AF_INET6, "fe80::fc:ff:fe00:1", 0},
    {"eth0", AF_INET6, "fd00::2", 0},
    {"ib0", AF_INET6, "febf::1", 0},
    {"ens3", AF_INET6, "2001:db8::3", 0},
    {"eth1", AF_INET6, "not-an-address", 0},
    {"eth1", AF_INET, "999.1.1.1", 0},
    {"vlo", AF_INET, "203.0.113.9", 1},
};
#define NHOST ((int)(sizeof(host) / sizeof(host[0])))

/* select spec over host[] with room for max; want is "name/addr ..." */
static void selects(const char *spec, int max, const char *want)
{
    ring_iface_addr_t out[NHOST + 1];
    char got[1024] = "";
    size_t len = 0;
    int n;

    /* a canary past max: the selection must not write there */
    memset(out, 0x5a, sizeof(out));
    n = ring_iface_select(spec, host, NHOST, out, max);
    for (int i = 0; i < n && len < sizeof(got); i++)
        len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s/%s", i ? " " : "",
                                out[i].name, out[i].addr);
    ok(n >= 0 && n <= max && strcmp(got, want) == 0 &&
       ((const unsigned char *)&out[max])[0] == 0x5a,
       "select '%s' max %d -> '%s'", spec, max, n >= 0 ? got : "(error)");
    if (n < 0 || strcmp(got, want) != 0)
        diag("want '%s'", want);
}

/* the real host: "=lo" finds 127.0.0.1, the default rule never loopback */
static void this_host(void)
{
    ring_iface_addr_t out[256];
    char why[256] = "";
    int n, found = 0, loop = 0;

    n = ring_iface_addrs("=lo", out, 256, why, sizeof(why));
    for (int i = 0; i < n; i++)
        found |= out[i].family == AF_INET && strcmp(out[i].addr, "127.0.0.1") == 0 &&
                 out[i].loopback && strcmp(out[i].name, "lo") == 0;
    if (n <= 0)
        diag("=lo: %s", why);
    if (n < 0 || (n == 0 && strstr(why, "no interface") != NULL))
        skip("this host has no up 'lo' with an address");
    else
        ok(found && n <= 2, "'=lo' on this host finds lo/127.0.0.1 (%d addresses)", n);

    n = ring_iface_addrs("", out, 256, why, sizeof(why));
    for (int i = 0; i < n; i++) {
        diag("default rule: %s %s", out[i].name, out[i].addr);
        loop |= out[i].loopback || strncmp(out[i].name, "lo", 2) == 0 ||
                strncmp(out[i].addr, "127.", 4) == 0 || strcmp(out[i].addr, "::1") == 0 ||
                strncmp(out[i].addr, "fe80:", 5) == 0;
    }
    ok(n >= 0 && !loop, "the default rule on this host: %d addresses, no loopback or "
       "link-local%s%s", n, n <= 0 ? ": " : "", n <= 0 ? why : "");
    is_int(ring_iface_addrs(NULL, out, 256, why, sizeof(why)), n, "NULL is the default rule");

    /* IPv4 before IPv6 here too, and max respected */
    n = ring_iface_addrs("^docker", out, 256, why, sizeof(why));
    {
        int order = 1, seen6 = 0;

        for (int i = 0; i < n; i++) {
            seen6 |= out[i].family == AF_INET6;
            order &= !(seen6 && out[i].family == AF_INET);
        }
        ok(n >= 1 && order, "'^docker' on this host: %d addresses, IPv4 first", n);
        if (n >= 1)
            is_int(ring_iface_addrs("^docker", out, 1, why, sizeof(why)), 1, "max 1 gives 1");
        else
            skip("no address");
    }
    is_int(ring_iface_addrs("=no-such-if0", out, 256, why, sizeof(why)), 0,
           "'=no-such-if0' matches nothing");
    like(why, "no interface that is up", "and why says so: %s", why);
    is_int(ring_iface_addrs("eth,,", out, 256, why, sizeof(why)), -1, "a bad list is refused");
    like(why, "RING_SOCKET_IFNAME 'eth,,': entry 2 is empty", "with its reason: %s", why);
}

int main(void)
{
    char why[256], small[24];

    plan(115);

    /* prefixes */
    matches("eth", "eth0", 1);
    matches("eth", "eth1", 1);
    matches("eth", "eth10", 1);
    matches("eth", "eth", 1);
    matches("eth", "et", 0);
    matches("eth", "ib0", 0);
    matches("eth", "veth0", 0);
    matches("eth,ib", "eth0", 1);
    matches("eth,ib", "ib0", 1);
    matches("eth,ib", "ens3", 0);
    matches("eth0", "eth0", 1);
    matches("eth0", "eth0:1", 1);
    matches("eth0", "eth01", 1);
    matches("eth0", "eth1", 0);
    matches("e", "ens3", 1);
    matches("ens3,eth1,ib", "eth1", 1);
    matches("ens3,eth1,ib", "ens3", 1);
    matches("ens3,eth1,ib", "eth0", 0);
    matches("ETH", "eth0", 0);

    /* exact */
    matches("=eth0", "eth0", 1);
    matches("=eth0", "eth01", 0);
    matches("=eth0", "eth0:1", 0);
    matches("=eth0", "eth", 0);
    matches("=eth0,eth1", "eth1", 1);
    matches("=eth0,eth1", "eth2", 0);
    matches("=eth0:1", "eth0:1", 1);
    matches("=eth0:1", "eth0", 0);
    matches("=lo", "lo", 1);

    /* exclusion */
    matches("^docker,lo", "eth0", 1);
    matches("^docker,lo", "docker0", 0);
    matches("^docker,lo", "lo", 0);
    matches("^docker,lo", "loop1", 0);
    matches("^docker,lo", "veth12ab", 1);
    matches("^eth", "eth3", 0);
    matches("^eth", "ib0", 1);

    /* exact exclusion */
    matches("^=eth1", "eth1", 0);
    matches("^=eth1", "eth10", 1);
    matches("^=eth1", "eth0", 1);
    matches("^=eth1,lo", "lo", 0);
    matches("^=eth1,lo", "lo0", 1);

    /* the default rule: NCCL's ^docker,lo, veth kept */
    matches("", "lo", 0);
    matches("", "docker0", 0);
    matches("", "docker_gwbridge", 0);
    matches("", "eth0", 1);
    matches("", "ens3", 1);
    matches("", "ib0", 1);
    matches("", "veth0", 1);
    matches("", "br0", 1);
    matches(NULL, "lo", 0);
    matches(NULL, "eth0", 1);

    /* well-formed lists */
    accepts("");
    accepts("eth");
    accepts("^=a,b,c");
    accepts("eth0:1");
    accepts("abcdefghijklmno");         /* 15 characters: IF_NAMESIZE - 1 */
    accepts("enp0s31f6,wlp2s0,ib,bond0.100,br-lan,vlan@x");
    ok(ring_iface_spec_check(NULL, why, sizeof(why)) == 0, "NULL is well formed");

    /* malformed lists, each with its reason */
    refuses("^", "empty name after '^'");
    refuses("=", "empty name after '='");
    refuses("^=", "empty name after '^='");
    refuses(",", "entry 1 is empty");
    refuses(",eth", "entry 1 is empty");
    refuses("eth,", "ends with a comma");
    refuses("eth,,ib", "entry 2 is empty");
    refuses("^eth,", "ends with a comma");
    refuses(" eth0", "entry 1 ' eth0' has whitespace");
    refuses("eth0 ", "whitespace");
    refuses("eth0, ib0", "entry 2 ' ib0' has whitespace");
    refuses("eth0\t", "whitespace or a control character");
    refuses("eth\n", "RING_SOCKET_IFNAME 'eth\\n': entry 1 'eth\\n' has whitespace");
    refuses("a\001b", "'a\\x01b' has whitespace or a control character");
    refuses(" ", "entry 1 ' ' has whitespace");
    refuses("=^eth", "'^' may only start the list");
    refuses("eth,^lo", "entry 2 '^lo': '^' may only start the list");
    refuses("eth,=lo", "'=' may only start the list");
    refuses("^^eth", "'^' may only start");
    refuses("==eth", "'=' may only start");
    refuses("eth*", "no wildcards");
    refuses("eth?", "no wildcards");
    refuses("net/eth0", "no interface name has a '/'");
    refuses("abcdefghijklmnop", "longer than an interface name (15 characters at most)");
    refuses("eth,abcdefghijklmnopqrstuvwxyz", "entry 2");

    /* a long list is cut in the message */
    {
        char spec[301];

        memset(spec, 'e', 300);
        spec[300] = '\0';
        refuses(spec, "eeee...': entry 1 'eeee");
    }

    /* a short why buffer is cut, never overrun */
    memset(small, 'x', sizeof(small));
    ok(ring_iface_spec_check("eth,,", small, 16) == -1 && strlen(small) == 15 &&
       small[16] == 'x', "a 16-byte why holds '%s'", small);
    ok(ring_iface_spec_check("eth,,", NULL, 0) == -1, "why may be NULL with length 0");

    /* selection: IPv4 first, interface order, no link-local, loopback only when named */
    selects("", NHOST, "eth0/192.0.2.2 eth0:1/192.0.2.3 ib0/10.0.0.2 eth1/198.51.100.2 "
            "eth0/fd00::2 ens3/2001:db8::3");
    selects("eth", NHOST, "eth0/192.0.2.2 eth0:1/192.0.2.3 eth1/198.51.100.2 eth0/fd00::2");
    selects("=eth0", NHOST, "eth0/192.0.2.2 eth0/fd00::2");
    selects("=eth0:1", NHOST, "eth0:1/192.0.2.3");
    selects("=lo", NHOST, "lo/127.0.0.1 lo/::1");
    selects("lo", NHOST, "lo/127.0.0.1 lo/::1");
    selects("^eth", NHOST, "lo/127.0.0.1 docker0/172.17.0.1 ib0/10.0.0.2 vlo/203.0.113.9 "
            "lo/::1 ens3/2001:db8::3");
    selects("^=eth0", NHOST, "lo/127.0.0.1 eth0:1/192.0.2.3 docker0/172.17.0.1 ib0/10.0.0.2 "
            "eth1/198.51.100.2 vlo/203.0.113.9 lo/::1 ens3/2001:db8::3");
    selects("ib", NHOST, "ib0/10.0.0.2");     /* febf::1 is link-local too (fe80::/10) */
    selects("ens", NHOST, "ens3/2001:db8::3");
    selects("docker", NHOST, "docker0/172.17.0.1");
    selects("vlo", NHOST, "vlo/203.0.113.9"); /* a loopback by flag, but named */
    selects("=eth1", NHOST, "eth1/198.51.100.2"); /* its unparsable addresses dropped */
    selects("wlan", NHOST, "");

    /* max truncation: the first ones in preference order */
    selects("", 0, "");
    selects("", 1, "eth0/192.0.2.2");
    selects("", 4, "eth0/192.0.2.2 eth0:1/192.0.2.3 ib0/10.0.0.2 eth1/198.51.100.2");
    selects("", 5, "eth0/192.0.2.2 eth0:1/192.0.2.3 ib0/10.0.0.2 eth1/198.51.100.2 "
            "eth0/fd00::2");
    selects("=lo", 1, "lo/127.0.0.1");
    is_int(ring_iface_select("", host, 0, NULL, 0), 0, "an empty list selects nothing");
    is_int(ring_iface_select("", host, NHOST, NULL, -1), 0, "a negative max selects nothing");

    this_host();
    return done_testing();
}
