/*
 * t-peers.c - the static peer list users type (RING_PEERS, --peers; src/peers.c)
 * and what --transport auto infers from it (one_host.c: every peer on this
 * host or not). Every error must be RING_ERR_INVALID with a message that names
 * what was wrong and where it came from.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/config.h>
#include <ringd/status.h>

#include "one_host.h"
#include "peers.h"
#include "tap.h"

/* ---- the peer list ------------------------------------------------------------------ */

static void test_peers_good(void)
{
    ring_peer_addr_t *a = NULL;
    char buf[300];
    ring_status_t st;

    st = ring_peers_parse("127.0.0.1:29500,127.0.0.1:29501,10.1.2.3:1", 3, 29500, 29500, &a);
    ok(st == RING_OK && a != NULL && strcmp(a[0].host, "127.0.0.1") == 0 && a[0].port == 29500 &&
           strcmp(a[1].host, "127.0.0.1") == 0 && a[1].port == 29501 &&
           strcmp(a[2].host, "10.1.2.3") == 0 && a[2].port == 1,
       "IPv4 host:port entries");
    free(a);
    a = NULL;
    st = ring_peers_parse("node-a.example.com:65535,node_b:2", 2, 29500, 29500, &a);
    ok(st == RING_OK && strcmp(a[0].host, "node-a.example.com") == 0 && a[0].port == 65535 &&
           strcmp(a[1].host, "node_b") == 0 && a[1].port == 2,
       "host names, port 65535");
    free(a);
    a = NULL;
    st = ring_peers_parse("[::1]:29500,[fe80::1%eth0]:4000", 2, 29500, 29500, &a);
    ok(st == RING_OK && strcmp(a[0].host, "::1") == 0 && a[0].port == 29500 &&
           strcmp(a[1].host, "fe80::1%eth0") == 0 && a[1].port == 4000,
       "[::1]:29500 and a scoped IPv6 address lose their brackets");
    if (st == RING_OK) {
        ring_peer_format(&a[0], buf, sizeof(buf));
        is_str(buf, "[::1]:29500", "ring_peer_format puts the brackets back");
    } else {
        ok(0, "ring_peer_format puts the brackets back");
    }
    free(a);
    a = NULL;
    st = ring_peers_parse("a,a,b,a", 4, 30000, 30009, &a);
    ok(st == RING_OK && a[0].port == 30000 && a[1].port == 30001 && a[2].port == 30000 &&
           a[3].port == 30002 && strcmp(a[2].host, "b") == 0,
       "entries without a port get port_lo + k for the k-th on the same host");
    if (st == RING_OK) {
        ring_peer_format(&a[3], buf, sizeof(buf));
        is_str(buf, "a:30002", "ring_peer_format host:port");
    } else {
        ok(0, "ring_peer_format host:port");
    }
    free(a);
    a = NULL;
    st = ring_peers_parse("[::1],[::1]", 2, 29500, 29501, &a);
    ok(st == RING_OK && strcmp(a[1].host, "::1") == 0 && a[0].port == 29500 && a[1].port == 29501,
       "[::1] without a port, twice, fills the range 29500-29501 exactly");
    free(a);
    a = NULL;
    st = ring_peers_parse("solo:7", 1, 29500, 29500, &a);
    ok(st == RING_OK && a[0].port == 7, "a world of one");
    free(a);
}

static void test_peers_bad(void)
{
    static const struct {
        const char *list;
        int world, lo, hi;
        const char *want1, *want2;
        const char *what;
    } bad[] = {
        {"a:1,,b:2", 3, 29500, 29500, "entry 1", "empty entry", "empty entry"},
        {"a:1,b:2,", 3, 29500, 29500, "entry 2", "empty entry", "trailing comma"},
        {"host:99999", 1, 29500, 29500, "entry 0 'host:99999'", "1..65535", "port 99999"},
        {"a:1,host:abc", 2, 29500, 29500, "entry 1 'host:abc'", "1..65535", "port abc"},
        {"host:0", 1, 29500, 29500, "entry 0", "1..65535", "port 0"},
        {"a:1,b:2,host:", 3, 29500, 29500, "entry 2 'host:'", "port", "empty port"},
        {"a:1,::1:29500", 2, 29500, 29500, "entry 1", "brackets", "unbracketed IPv6"},
        {"a:1,fe80::1", 2, 29500, 29500, "entry 1", "brackets", "unbracketed IPv6, no port"},
        {"[::1:29500", 1, 29500, 29500, "entry 0", "']'", "missing ]"},
        {"[::1]29500", 1, 29500, 29500, "entry 0", "junk after ']'", "junk after ]"},
        {":29500", 1, 29500, 29500, "entry 0", "empty host", "empty host"},
        {"a:1,[]:5", 2, 29500, 29500, "entry 1", "empty host", "empty brackets"},
        {"a:1,b:2,c:3", 2, 29500, 29500, "has 3 entries", "world size is 2", "too many entries"},
        {"a:1,b:2,c:3,d:4,e:5", 2, 29500, 29500, "has 5 entries", "world size is 2",
         "far too many entries"},
        {"a:1", 2, 29500, 29500, "has 1 entries", "world size is 2", "too few entries"},
        {"h,h,h", 3, 29500, 29501, "entry 2 'h'", "29500-29501", "port range exhausted"},
        {"", 2, 29500, 29500, "no peer list", "RING_PEERS", "empty list"},
        {"a:1,b:2", 0, 29500, 29500, "has", "world size is 0", "world size 0"},
    };
    int failed = 0;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ring_peer_addr_t *a = NULL;
        ring_status_t st = ring_peers_parse(bad[i].list, bad[i].world, bad[i].lo, bad[i].hi, &a);
        const char *msg = ring_last_error();
        int good = st == RING_ERR_INVALID && a == NULL && strstr(msg, bad[i].want1) != NULL &&
                   strstr(msg, bad[i].want2) != NULL;

        if (!good) {
            failed++;
            free(a);
        }
        ok(good, "peers \"%s\" (world %d): %s", bad[i].list, bad[i].world, bad[i].what);
        if (!good)
            diag("status %d, message '%s'", (int)st, msg);
    }
    {
        ring_peer_addr_t *a = NULL;
        char list[600];

        memset(list, 'h', 300);
        snprintf(list + 300, sizeof(list) - 300, ":1");
        ok(ring_peers_parse(list, 1, 29500, 29500, &a) == RING_ERR_INVALID &&
               strstr(ring_last_error(), "too long") != NULL,
           "a 300-character host name is refused");
        ok(ring_peers_parse(NULL, 2, 29500, 29500, &a) == RING_ERR_INVALID &&
               strstr(ring_last_error(), "RING_PEERS") != NULL,
           "a NULL list says to set RING_PEERS");
    }
}

/* one_host.c: what --transport auto reads before any peer is reached */
static int one_host_of(const char *const *settings, char *why, size_t len)
{
    ring_config_t cfg;
    int one = -1;

    ring_config_init(&cfg);
    for (int i = 0; settings[i] != NULL; i += 2)
        if (ring_config_set(&cfg, settings[i], settings[i + 1], RING_SRC_API) != RING_OK)
            goto out;
    one = ring_config_one_host(&cfg, why, len);
out:
    ring_config_free(&cfg);
    return one;
}

static void test_one_host(void)
{
    static const struct {
        const char *settings[9];
        int want;
        const char *says; /* in why, when want */
    } cases[] = {
        {{"world-size", "3", "peers", "127.0.0.1:1,127.0.0.2:2,localhost:3", NULL}, 1,
         "loopback addresses only"},
        {{"world-size", "2", "peers", "[::1]:1,127.0.0.1:2", NULL}, 1, "loopback"},
        {{"world-size", "2", "peers", "10.1.2.3:1,10.1.2.3:2", NULL}, 1, "one address only"},
        {{"world-size", "2", "peers", "10.1.2.3:1,10.1.2.4:2", NULL}, 0, NULL},
        {{"world-size", "2", "peers", "127.0.0.1:1,10.1.2.4:2", NULL}, 0, NULL},
        {{"world-size", "4", "rendezvous", "tcp://127.0.0.1:29500", NULL}, 1,
         "the rendezvous store is at 127.0.0.1"},
        {{"world-size", "4", "rendezvous", "tcp://node7:29500", NULL}, 0, NULL},
        {{"world-size", "4", "rendezvous", "file:///tmp/rdzv", NULL}, 0, NULL},
        /* --host-id names the hosts: nothing is inferred */
        {{"world-size", "4", "rendezvous", "tcp://127.0.0.1:29500", "host-id", "h1", NULL}, 0,
         NULL},
        {{"world-size", "1", "peers", "127.0.0.1:1", NULL}, 0, NULL},
        /* a bad list says nothing here (the ring's set-up reports it) */
        {{"world-size", "3", "peers", "127.0.0.1:1", NULL}, 0, NULL},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[300] = "x";
        int got = one_host_of(cases[i].settings, why, sizeof(why));

        ok(got == cases[i].want &&
               (cases[i].want ? strstr(why, cases[i].says) != NULL : why[0] == '\0'),
           "one host? %s %s %s %s: %s (%s)", cases[i].settings[2], cases[i].settings[3],
           cases[i].settings[4] != NULL ? cases[i].settings[4] : "",
           cases[i].settings[5] != NULL ? cases[i].settings[5] : "",
           cases[i].want ? "yes" : "no", why);
    }
}

int main(void)
{
    plan(8 + 20 + 11);
    test_peers_good(); /* 8 */
    test_peers_bad();  /* 20 */
    test_one_host();   /* 11 */
    return done_testing();
}
