/*
 * doctor_report.c - the ring doctor's results: the edge reports every peer
 * fills from the results vector (doctor.c carries it round the ring), the
 * median and the slow flags, and the printed table.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_int.h"
#include "doctor.h"
#include "le.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

void ring_doctor_names(const ring_comm_t *comm, int rank, char *host, char *addr)
{
    snprintf(host, RING_DOCTOR_NAME_MAX, "%s",
             comm->topo.hosts != NULL ? comm->topo.hosts[rank] : "?");
    if (comm->topo.peers != NULL)
        ring_peer_format(&comm->topo.peers[rank], addr, RING_DOCTOR_NAME_MAX);
    else
        snprintf(addr, RING_DOCTOR_NAME_MAX, "?");
}

void ring_doctor_report_fill(const ring_comm_t *comm, const unsigned char *vec,
                             ring_edge_report_t *edges)
{
    int n = comm->size;
    double *sorted = malloc((size_t)n * sizeof(double)), median;

    for (int p = 0; p < n; p++) {
        const unsigned char *e = vec + (size_t)p * DOCTOR_ENTRY;
        ring_edge_report_t *r = &edges[p];

        memset(r, 0, sizeof(*r));
        r->from_rank = comm->topo.order[p];
        r->to_rank = comm->topo.order[(p + 1) % n];
        ring_doctor_names(comm, r->from_rank, r->from_host, r->from_addr);
        ring_doctor_names(comm, r->to_rank, r->to_host, r->to_addr);
        r->bytes_per_s = (double)le_get64(e);
        r->burst_bytes = (size_t)le_get64(e + 8);
        r->latency_s = le_get32(e + 16) * 1e-9;
        r->bursts = (int)le_get32(e + 20);
        if (sorted != NULL)
            sorted[p] = r->bytes_per_s;
    }
    if (sorted == NULL)
        return; /* no flags rather than a failure after all that */
    qsort(sorted, (size_t)n, sizeof(double), cmp_double);
    median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    for (int p = 0; p < n; p++) {
        edges[p].median_ratio = median > 0 ? edges[p].bytes_per_s / median : 1;
        edges[p].slow = edges[p].median_ratio < RING_DOCTOR_SLOW;
    }
    free(sorted);
}

/* "rank 2 (h2, 10.0.0.2:29502)", or "rank 2 (10.0.0.2:29502)" when the host is the address's */
static void doctor_peer_name(int rank, const char *host, const char *addr, char *buf, size_t len)
{
    size_t hl = strlen(host);
    int same = strncmp(addr, host, hl) == 0 && addr[hl] == ':';

    if (!same && addr[0] == '[')
        same = strncmp(addr + 1, host, hl) == 0 && addr[hl + 1] == ']';
    if (same || host[0] == '\0' || strcmp(host, "?") == 0)
        snprintf(buf, len, "rank %d (%s)", rank, addr);
    else
        snprintf(buf, len, "rank %d (%s, %s)", rank, host, addr);
}

static void doctor_percent(double ratio, char *buf, size_t len)
{
    snprintf(buf, len, ratio >= 0.1 ? "%.0f%%" : "%.1f%%", ratio * 100);
}

/* "98", "4.8", "0.31": three significant digits at most, never an exponent */
static void doctor_mbps(double bytes_per_s, char *buf, size_t len)
{
    double m = bytes_per_s / 1e6;

    snprintf(buf, len, m >= 100 ? "%.0f" : m >= 10 ? "%.1f" : "%.2f", m);
}

int ring_doctor_print(const ring_comm_t *comm, const ring_edge_report_t *edges, FILE *out)
{
    int n = comm->size, slow = 0, wfrom = 4, wto = 2;
    char from[2 * RING_DOCTOR_NAME_MAX + 32], to[2 * RING_DOCTOR_NAME_MAX + 32], pct[32];
    char mb[32], mb_median[32];
    double median = 0;

    if (n < 2) {
        fprintf(out, "# ring doctor: a ring of one peer has no edges to measure\n");
        fprintf(out, "no slow edge: there are no edges\n");
        return 0;
    }
    for (int p = 0; p < n; p++) {
        int l;
        doctor_peer_name(edges[p].from_rank, edges[p].from_host, edges[p].from_addr, from,
                         sizeof(from));
        doctor_peer_name(edges[p].to_rank, edges[p].to_host, edges[p].to_addr, to, sizeof(to));
        if ((l = (int)strlen(from)) > wfrom)
            wfrom = l;
        if ((l = (int)strlen(to)) > wto)
            wto = l;
        if (edges[p].median_ratio > 0 && median == 0)
            median = edges[p].bytes_per_s / edges[p].median_ratio;
    }
    fprintf(out, "# ring doctor: %d edges over %s, measured one at a time in %d laps: MB/s of "
            "the best lap (1 MB = 1e6 bytes), one-way latency = half the median round trip "
            "of a 64-byte frame\n", n, ring_comm_transport(comm), DOCTOR_LAPS);
    fprintf(out, "# %4s  %-*s  %-*s  %10s  %12s  %6s  %10s  %s\n", "edge", wfrom, "from", wto,
            "to", "MB/s", "latency(us)", "bursts", "burst", "flag");
    for (int p = 0; p < n; p++) {
        const ring_edge_report_t *e = &edges[p];

        doctor_peer_name(e->from_rank, e->from_host, e->from_addr, from, sizeof(from));
        doctor_peer_name(e->to_rank, e->to_host, e->to_addr, to, sizeof(to));
        doctor_percent(e->median_ratio, pct, sizeof(pct));
        fprintf(out, "  %4d  %-*s  %-*s  %10.1f  %12.1f  %6d  %10zu  %s%s%s\n", p, wfrom, from,
                wto, to, e->bytes_per_s / 1e6, e->latency_s * 1e6, e->bursts, e->burst_bytes,
                e->slow ? "SLOW (" : "ok", e->slow ? pct : "", e->slow ? " of the median)" : "");
    }
    doctor_mbps(median, mb_median, sizeof(mb_median));
    fprintf(out, "# median %s MB/s; an edge more than %.0f%% below it is slow\n", mb_median,
            (1 - RING_DOCTOR_SLOW) * 100);
    for (int p = 0; p < n; p++) {
        const ring_edge_report_t *e = &edges[p];

        if (!e->slow)
            continue;
        slow++;
        doctor_peer_name(e->from_rank, e->from_host, e->from_addr, from, sizeof(from));
        doctor_peer_name(e->to_rank, e->to_host, e->to_addr, to, sizeof(to));
        doctor_percent(e->median_ratio, pct, sizeof(pct));
        doctor_mbps(e->bytes_per_s, mb, sizeof(mb));
        fprintf(out, "slow edge: %s -> %s: %s MB/s, %s of the median %s MB/s\n", from, to, mb,
                pct, mb_median);
    }
    if (slow == 0)
        fprintf(out, "no slow edge: none of the %d is more than %.0f%% below the median "
                "%s MB/s\n", n, (1 - RING_DOCTOR_SLOW) * 100, mb_median);
    fflush(out);
    return slow;
}
