/*
 * ring_order.c - where each rank sits on the ring. By host: the ranks of
 * one host are neighbours, so the ring crosses each host boundary once
 * (a host's traffic to the next host leaves through one link, not N);
 * hosts come in the order of their lowest rank, ranks in rank order
 * within a host. Every peer computes the same order from the same list.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring_order.h"

typedef struct order_key {
    const char *host;
    int rank, group; /* group: the lowest rank of its host */
} order_key_t;

static int by_host_rank(const void *a, const void *b)
{
    const order_key_t *x = a, *y = b;
    int c = strcmp(x->host, y->host);

    return c != 0 ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

static int by_group_rank(const void *a, const void *b)
{
    const order_key_t *x = a, *y = b;

    if (x->group != y->group)
        return (x->group > y->group) - (x->group < y->group);
    return (x->rank > y->rank) - (x->rank < y->rank);
}

int ring_order_by_host(const char *const *hosts, int n, int *order)
{
    order_key_t *k = malloc((size_t)n * sizeof(*k));

    if (k == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        k[i] = (order_key_t){.host = hosts[i], .rank = i};
    qsort(k, (size_t)n, sizeof(*k), by_host_rank);
    for (int i = 0; i < n; i++)
        k[i].group = i > 0 && strcmp(k[i].host, k[i - 1].host) == 0 ? k[i - 1].group : k[i].rank;
    qsort(k, (size_t)n, sizeof(*k), by_group_rank);
    for (int i = 0; i < n; i++)
        order[i] = k[i].rank;
    free(k);
    return 0;
}

void ring_order_by_rank(int n, int *order)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
}

/* Append "a-b" or "a" for a run of consecutive ranks. */
static size_t put_run(char *buf, size_t len, size_t used, int first, int last, int comma)
{
    int w;

    if (used >= len)
        return used;
    w = first == last ? snprintf(buf + used, len - used, "%s%d", comma ? "," : "", first)
                      : snprintf(buf + used, len - used, "%s%d-%d", comma ? "," : "", first, last);
    return w < 0 ? used : used + (size_t)w;
}

void ring_order_describe(const char *const *hosts, const int *order, int n, char *buf,
                         size_t len)
{
    size_t used = 0;
    int p = 0;

    if (len == 0)
        return;
    buf[0] = '\0';
    while (p < n && used < len) {
        const char *h = hosts[order[p]];
        int q = p, comma = 0, w;

        w = snprintf(buf + used, len - used, "%s%s[", p ? " -> " : "", h);
        used = w < 0 ? len : used + (size_t)w;
        /* this host's ranks, consecutive ranks as runs */
        while (q < n && strcmp(hosts[order[q]], h) == 0) {
            int first = order[q];
            while (q + 1 < n && strcmp(hosts[order[q + 1]], h) == 0 &&
                   order[q + 1] == order[q] + 1)
                q++;
            used = put_run(buf, len, used, first, order[q], comma);
            comma = 1;
            q++;
        }
        if (used < len) {
            w = snprintf(buf + used, len - used, "]");
            used = w < 0 ? len : used + (size_t)w;
        }
        p = q;
    }
    /* cut short, or exactly full with hosts left over: say so */
    if ((used >= len || p < n) && len > 4)
        memcpy(buf + len - 4, "...", 4);
}
