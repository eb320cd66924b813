/*
 * hostlist.c - expanding Slurm's compressed host lists (hostlist.h).
 *
 * Two passes per entry: parse it into literal pieces and bracket groups
 * (each group a list of ranges), counting the hosts it makes with an
 * overflow guard; then write the names with an odometer over the groups,
 * the last group turning fastest. Nothing is allocated for an entry until
 * its count is known to fit.
 */
#include "ring_build.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"

#define HL_GROUPS_MAX 8     /* bracket groups in one entry */
#define HL_RANGES_MAX 256   /* ranges in one group */
#define HL_DIGITS_MAX 9     /* digits of one number: below 10^9, no overflow */

typedef struct hl_range {
    unsigned long lo, hi;
    int width;              /* digits of lo as written: the zero padding */
} hl_range_t;

typedef struct hl_group {
    size_t prefix_off, prefix_len; /* the literal text before this group */
    hl_range_t range[HL_RANGES_MAX];
    int nranges;
    size_t count;           /* numbers in the group */
} hl_group_t;

typedef struct hl_entry {
    hl_group_t group[HL_GROUPS_MAX];
    int ngroups;
    size_t tail_off, tail_len; /* the literal text after the last group */
    size_t count;           /* hosts the entry makes */
} hl_entry_t;

static int hl_name_char(int c)
{
    return isalnum(c) || c == '-' || c == '.' || c == '_';
}

/* One number of a range at spec[*pos]; -1 with err when it is not one. */
static int hl_number(const char *spec, size_t *pos, unsigned long *v, int *width, char *err,
                     size_t errlen)
{
    size_t start = *pos;

    *v = 0;
    while (isdigit((unsigned char)spec[*pos])) {
        if (*pos - start == HL_DIGITS_MAX) {
            snprintf(err, errlen, "host list '%s': a number longer than %d digits at offset %zu",
                     spec, HL_DIGITS_MAX, start);
            return -1;
        }
        *v = *v * 10 + (unsigned long)(spec[*pos] - '0');
        (*pos)++;
    }
    if (*pos == start) {
        snprintf(err, errlen, "host list '%s': %s at offset %zu where a number should be", spec,
                 spec[start] == '\0' ? "the end" : "a bad character", start);
        return -1;
    }
    *width = (int)(*pos - start);
    return 0;
}

/* The group whose '[' is at spec[*pos]; leaves *pos after its ']'. */
static int hl_group(const char *spec, size_t *pos, hl_group_t *g, char *err, size_t errlen)
{
    size_t open = (*pos)++;

    g->nranges = 0;
    g->count = 0;
    for (;;) {
        hl_range_t *r;

        if (g->nranges == HL_RANGES_MAX) {
            snprintf(err, errlen, "host list '%s': more than %d ranges in the brackets at "
                     "offset %zu", spec, HL_RANGES_MAX, open);
            return -1;
        }
        if (spec[*pos] == ',' || spec[*pos] == ']') {
            snprintf(err, errlen, "host list '%s': an empty range at offset %zu", spec, *pos);
            return -1;
        }
        if (spec[*pos] == '\0') {
            snprintf(err, errlen, "host list '%s': unbalanced '[' at offset %zu", spec, open);
            return -1;
        }
        r = &g->range[g->nranges++];
        if (hl_number(spec, pos, &r->lo, &r->width, err, errlen) != 0)
            return -1;
        r->hi = r->lo;
        if (spec[*pos] == '-') {
            int w;

            (*pos)++;
            if (hl_number(spec, pos, &r->hi, &w, err, errlen) != 0)
                return -1;
            if (r->hi < r->lo) {
                snprintf(err, errlen, "host list '%s': descending range %lu-%lu at offset %zu",
                         spec, r->lo, r->hi, *pos);
                return -1;
            }
        }
        g->count += r->hi - r->lo + 1;
        if (spec[*pos] == ',') {
            (*pos)++;
            continue;
        }
        if (spec[*pos] == ']') {
            (*pos)++;
            return 0;
        }
        if (spec[*pos] == '\0')
            snprintf(err, errlen, "host list '%s': unbalanced '[' at offset %zu", spec, open);
        else
            snprintf(err, errlen, "host list '%s': '%c' at offset %zu inside brackets (only "
                     "numbers, '-' and ',')", spec, spec[*pos], *pos);
        return -1;
    }
}

/* Parse the entry spec[start, end) and count its hosts. */
static int hl_entry(const char *spec, size_t start, size_t end, hl_entry_t *e, char *err,
                    size_t errlen)
{
    size_t pos = start, lit = start;

    e->ngroups = 0;
    e->count = 1;
    if (start == end) {
        snprintf(err, errlen, "host list '%s': an empty host name at offset %zu", spec, start);
        return -1;
    }
    while (pos < end) {
        hl_group_t *g;

        if (spec[pos] == ']') {
            snprintf(err, errlen, "host list '%s': unmatched ']' at offset %zu", spec, pos);
            return -1;
        }
        if (spec[pos] != '[') {
            if (!hl_name_char((unsigned char)spec[pos])) {
                snprintf(err, errlen, "host list '%s': bad character '%c' at offset %zu "
                         "(host names hold letters, digits, '-', '.' and '_')", spec,
                         spec[pos], pos);
                return -1;
            }
            pos++;
            continue;
        }
        if (e->ngroups == HL_GROUPS_MAX) {
            snprintf(err, errlen, "host list '%s': more than %d bracket groups in one name",
                     spec, HL_GROUPS_MAX);
            return -1;
        }
        g = &e->group[e->ngroups++];
        g->prefix_off = lit;
        g->prefix_len = pos - lit;
        if (hl_group(spec, &pos, g, err, errlen) != 0)
            return -1;
        if (pos > end) { /* a ',' inside brackets belongs to them, never to the list */
            snprintf(err, errlen, "host list '%s': unbalanced '[' before offset %zu", spec, end);
            return -1;
        }
        if (g->count > RING_HOSTLIST_MAX || e->count > RING_HOSTLIST_MAX / g->count) {
            snprintf(err, errlen, "host list '%s' expands to more than %d hosts", spec,
                     RING_HOSTLIST_MAX);
            return -1;
        }
        e->count *= g->count;
        lit = pos;
    }
    e->tail_off = lit;
    e->tail_len = end - lit;
    return 0;
}

/* The k-th number of group g, zero-padded as written, into buf. */
static void hl_nth(const hl_group_t *g, size_t k, char *buf, size_t len)
{
    for (int i = 0; i < g->nranges; i++) {
        const hl_range_t *r = &g->range[i];
        size_t n = r->hi - r->lo + 1;

        if (k < n) {
            snprintf(buf, len, "%0*lu", r->width, r->lo + (unsigned long)k);
            return;
        }
        k -= n;
    }
    buf[0] = '\0';
}

/* Write the entry's hosts into hosts[*n...]. */
static int hl_write(const char *spec, const hl_entry_t *e, char **hosts, size_t *n, char *err,
                    size_t errlen)
{
    size_t digit[HL_GROUPS_MAX] = {0};

    for (size_t h = 0; h < e->count; h++) {
        char name[RING_HOST_NAME_MAX + 16];
        size_t len = 0;

        for (int g = 0; g < e->ngroups; g++) {
            const hl_group_t *gr = &e->group[g];
            char num[16];

            hl_nth(gr, digit[g], num, sizeof(num));
            len += (size_t)snprintf(name + len, sizeof(name) - len, "%.*s%s",
                                    (int)gr->prefix_len, spec + gr->prefix_off, num);
            if (len >= RING_HOST_NAME_MAX)
                break;
        }
        if (len < RING_HOST_NAME_MAX)
            len += (size_t)snprintf(name + len, sizeof(name) - len, "%.*s", (int)e->tail_len,
                                    spec + e->tail_off);
        if (len >= RING_HOST_NAME_MAX) {
            snprintf(err, errlen, "host list '%s': a host name longer than %d bytes", spec,
                     RING_HOST_NAME_MAX - 1);
            return -1;
        }
        hosts[*n] = strdup(name);
        if (hosts[*n] == NULL) {
            snprintf(err, errlen, "out of memory expanding host list '%s'", spec);
            return -1;
        }
        (*n)++;
        /* the odometer: the last group turns fastest */
        for (int g = e->ngroups - 1; g >= 0; g--) {
            if (++digit[g] < e->group[g].count)
                break;
            digit[g] = 0;
        }
    }
    return 0;
}

int ring_hostlist_expand(const char *spec, char ***hosts_p, size_t *n_p, char *err,
                         size_t errlen)
{
    hl_entry_t *e = malloc(sizeof(*e));
    char **hosts = NULL;
    size_t n = 0, total = 0, start = 0, len;
    int pass, rc = -1;

    *hosts_p = NULL;
    *n_p = 0;
    if (e == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (spec == NULL || spec[0] == '\0') {
        snprintf(err, errlen, "the host list is empty");
        goto out;
    }
    len = strlen(spec);
    /* pass 0 checks and counts every entry, pass 1 writes the names */
    for (pass = 0; pass < 2; pass++) {
        start = 0;
        while (start <= len) {
            size_t end = start;
            int depth = 0;

            while (end < len && (spec[end] != ',' || depth > 0)) {
                depth += spec[end] == '[' ? 1 : spec[end] == ']' ? -1 : 0;
                end++;
            }
            if (hl_entry(spec, start, end, e, err, errlen) != 0)
                goto out;
            if (pass == 0) {
                if (e->count > RING_HOSTLIST_MAX - total) {
                    snprintf(err, errlen, "host list '%s' expands to more than %d hosts", spec,
                             RING_HOSTLIST_MAX);
                    goto out;
                }
                total += e->count;
            } else if (hl_write(spec, e, hosts, &n, err, errlen) != 0) {
                goto out;
            }
            start = end + 1;
        }
        if (pass == 0) {
            hosts = calloc(total, sizeof(*hosts));
            if (hosts == NULL) {
                snprintf(err, errlen, "out of memory for %zu host names", total);
                goto out;
            }
        }
    }
    *hosts_p = hosts;
    *n_p = n;
    hosts = NULL;
    rc = 0;
out:
    ring_hostlist_free(hosts, n);
    free(e);
    return rc;
}

void ring_hostlist_free(char **hosts, size_t n)
{
    if (hosts == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(hosts[i]);
    free(hosts);
}
