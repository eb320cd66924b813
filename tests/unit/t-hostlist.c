/*
 * t-hostlist.c - Slurm's compressed host lists (src/hostlist.c): the forms
 * Slurm prints (ranges, lists in brackets, padding, several groups, plain
 * names), the limits, and every malformed list refused with its reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"
#include "tap.h"

/* spec must expand to the space-separated names in want */
static void expands(const char *spec, const char *want)
{
    char **hosts = NULL, err[512] = "", got[4096] = "";
    size_t n = 0, len = 0;
    int rc = ring_hostlist_expand(spec, &hosts, &n, err, sizeof(err));

    for (size_t i = 0; rc == 0 && i < n && len < sizeof(got) - 1; i++)
        len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s", i ? " " : "", hosts[i]);
    ok(rc == 0 && strcmp(got, want) == 0, "'%s' -> '%s'%s%s", spec, rc == 0 ? got : "(error)",
       rc == 0 ? "" : ": ", err);
    ring_hostlist_free(hosts, n);
}

/* spec must be refused with `word` in the reason */
static void refuses(const char *spec, const char *word)
{
    char **hosts = NULL, err[512] = "";
    size_t n = 0;
    int rc = ring_hostlist_expand(spec, &hosts, &n, err, sizeof(err));

    ok(rc == -1 && hosts == NULL && n == 0 && strstr(err, word) != NULL,
       "'%s' is refused: %s", spec != NULL ? spec : "(null)", err);
    ring_hostlist_free(hosts, n);
}

static void counts(const char *spec, size_t want, const char *first, const char *last)
{
    char **hosts = NULL, err[512] = "";
    size_t n = 0;
    int rc = ring_hostlist_expand(spec, &hosts, &n, err, sizeof(err));

    ok(rc == 0 && n == want && strcmp(hosts[0], first) == 0 && strcmp(hosts[n - 1], last) == 0,
       "'%s' -> %zu hosts, %s .. %s%s", spec, n, rc == 0 ? hosts[0] : "?",
       rc == 0 ? hosts[n - 1] : "?", err);
    ring_hostlist_free(hosts, n);
}

int main(void)
{
    plan(42);
    /* what Slurm prints */
    expands("node01", "node01");
    expands("node[01-04,07]", "node01 node02 node03 node04 node07");
    expands("node[1-3]", "node1 node2 node3");
    expands("node[8-11]", "node8 node9 node10 node11");
    expands("node[08-11]", "node08 node09 node10 node11");
    expands("node[001-003]", "node001 node002 node003");
    expands("n[7]", "n7");
    expands("login1,node[1-2],gpu-a[3,5]", "login1 node1 node2 gpu-a3 gpu-a5");
    expands("rack[1-2]-node[1-2]",
            "rack1-node1 rack1-node2 rack2-node1 rack2-node2");
    expands("a[1-2]b[3,5]c", "a1b3c a1b5c a2b3c a2b5c");
    expands("[1-3]", "1 2 3");
    expands("host.example.com", "host.example.com");
    expands("cn_[9-10].cluster", "cn_9.cluster cn_10.cluster");
    expands("n[1,1]", "n1 n1");
    expands("n[3,1-2]", "n3 n1 n2");
    expands("n[0-0]", "n0");
    expands("a,b,c", "a b c");
    expands("x[000-002]", "x000 x001 x002");
    expands("x[099-101]", "x099 x100 x101");
    /* sizes and limits */
    counts("node[0001-1000]", 1000, "node0001", "node1000");
    counts("r[1-16]n[1-64]", 1024, "r1n1", "r16n64");
    counts("n[1-65536]", 65536, "n1", "n65536");
    refuses("n[1-65537]", "more than 65536 hosts");
    refuses("a[1-300]b[1-300]", "more than 65536 hosts");
    refuses("n[1-65536],m", "more than 65536 hosts");
    refuses("n[1234567890]", "longer than 9 digits");
    /* malformed */
    refuses("", "empty");
    refuses(NULL, "empty");
    refuses("node[1-3", "unbalanced '['");
    refuses("node1-3]", "unmatched ']'");
    refuses("node[]", "empty range");
    refuses("node[1,,2]", "empty range");
    refuses("node[1,]", "empty range");
    refuses("node[5-3]", "descending range 5-3");
    refuses("node[a-b]", "where a number should be");
    refuses("node[1-]", "where a number should be");
    refuses("node[1[2]]", "inside brackets");
    refuses("a,,b", "empty host name");
    refuses(",a", "empty host name");
    refuses("a,", "empty host name");
    refuses("node 1", "bad character ' '");
    refuses("n[1-2]x[1-2]y[1-2]z[1-2]a[1]b[1]c[1]d[1]e[1]", "more than 8 bracket groups");
    return done_testing();
}
