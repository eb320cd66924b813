/*
 * launch-ranks.c - where each rank of ring-launch runs and how it starts.
 *
 * On one host every rank listens on --host. With --hosts A,B,... rank r
 * listens on entry r mod K, the way a lab of network namespaces (or a
 * container per rank) gives each rank a host of its own; ports are then
 * --base-port + r, since the launcher cannot probe ports in another
 * namespace. --exec-prefix puts a command before PROGRAM for each rank
 * ('tools/lab/netns-lab.sh exec LAB {node} --'), so every lab tool starts its
 * peers through ring-launch and gets its supervision: the first rank that
 * fails stops all of them.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch-nodes.h"
#include "launch-ranks.h"

static int launch_addr_ok(const char *a)
{
    struct in6_addr b6;
    struct in_addr b4;

    return inet_pton(AF_INET, a, &b4) == 1 || inet_pton(AF_INET6, a, &b6) == 1;
}

int launch_hosts_parse(struct launch_opts *o, const char *list, char *err, size_t errlen)
{
    char *copy = strdup(list), *save = NULL, *tok;
    size_t k = 0;

    free(o->hosts);
    free(o->hosts_text);
    o->hosts = calloc((size_t)LAUNCH_MAX_RANKS, sizeof(*o->hosts));
    o->hosts_text = copy;
    if (copy == NULL || o->hosts == NULL) {
        snprintf(err, errlen, "out of memory reading --hosts");
        return -1;
    }
    for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (k == LAUNCH_MAX_RANKS) {
            snprintf(err, errlen, "--hosts: more than %d addresses", LAUNCH_MAX_RANKS);
            return -1;
        }
        if (!launch_addr_ok(tok)) {
            snprintf(err, errlen, "--hosts: '%s' is not a numeric IPv4 or IPv6 address (each "
                     "rank listens on one: e.g. --hosts 10.0.0.1,10.0.0.2)", tok);
            return -1;
        }
        o->hosts[k++] = tok;
    }
    if (k == 0) {
        snprintf(err, errlen, "--hosts needs at least one address (ADDR,ADDR,...)");
        return -1;
    }
    o->nhosts = (long)k;
    return 0;
}

const char *launch_rank_host(const struct launch_opts *o, long rank)
{
    return o->nhosts > 0 ? o->hosts[rank % o->nhosts] : o->host;
}

char *launch_peers_build(const struct launch_opts *o, const int *ports)
{
    size_t cap = 1, off = 0;
    char *s;
    long i;

    for (i = 0; i < o->n; i++)
        cap += strlen(launch_rank_host(o, i)) + 10;
    if ((s = malloc(cap)) == NULL)
        return NULL;
    s[0] = '\0';
    for (i = 0; i < o->n; i++) {
        const char *h = launch_rank_host(o, i);
        int v6 = strchr(h, ':') != NULL;
        off += (size_t)snprintf(s + off, cap - off, "%s%s%s%s:%d", i ? "," : "",
                                v6 ? "[" : "", h, v6 ? "]" : "", ports[i]);
    }
    return s;
}

/* word with every {rank}, {node} and {host} replaced; NULL without memory */
static char *launch_word_expand(const char *word, long rank, long node, const char *host)
{
    char num[24], nodenum[24];
    size_t cap = strlen(word) + 1, off = 0;
    const char *p;
    char *out;

    snprintf(num, sizeof(num), "%ld", rank);
    snprintf(nodenum, sizeof(nodenum), "%ld", node);
    for (p = word; (p = strchr(p, '{')) != NULL; p++)
        cap += strlen(host) + sizeof(num);
    if ((out = malloc(cap)) == NULL)
        return NULL;
    for (p = word; *p != '\0';) {
        const char *with = strncmp(p, "{rank}", 6) == 0 ? num
                           : strncmp(p, "{node}", 6) == 0 ? nodenum
                           : strncmp(p, "{host}", 6) == 0 ? host : NULL;
        if (with != NULL) {
            off += (size_t)snprintf(out + off, cap - off, "%s", with);
            p += 6;
        } else {
            out[off++] = *p++;
        }
    }
    out[off] = '\0';
    return out;
}

char **launch_rank_argv(const struct launch_opts *o, long rank)
{
    const char *prefix = o->exec_prefix != NULL ? o->exec_prefix : "";
    size_t nwords = 0, nprog = 0, k = 0;
    char **argv, *copy, *save = NULL, *w;

    for (const char *p = prefix; *p != '\0'; p++)
        nwords += (*p != ' ' && *p != '\t') && (p == prefix || p[-1] == ' ' || p[-1] == '\t');
    while (o->argv[nprog] != NULL)
        nprog++;
    argv = calloc(nwords + nprog + 1, sizeof(*argv));
    copy = strdup(prefix);
    if (argv == NULL || copy == NULL)
        goto fail;
    for (w = strtok_r(copy, " \t", &save); w != NULL; w = strtok_r(NULL, " \t", &save))
        if ((argv[k++] = launch_word_expand(w, launch_global_rank(o, rank),
                                            o->nhosts > 0 ? rank % o->nhosts : o->node_rank,
                                            launch_rank_host(o, rank))) == NULL)
            goto fail;
    for (size_t i = 0; i < nprog; i++)
        if ((argv[k++] = strdup(o->argv[i])) == NULL)
            goto fail;
    free(copy);
    return argv;
fail:
    free(copy);
    launch_rank_argv_free(argv);
    return NULL;
}

void launch_rank_argv_free(char **argv)
{
    if (argv == NULL)
        return;
    for (size_t i = 0; argv[i] != NULL; i++)
        free(argv[i]);
    free(argv);
}
