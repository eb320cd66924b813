/*
 * doctor_cmd.c - ringd --doctor and --doctor-only: the ring doctor
 * (ring_comm_doctor) right after the ring connects, before the first
 * allreduce, so every peer runs it at the same point. Rank 0 prints the
 * report; a slow edge is a diagnosis, not a failure: --doctor trains anyway,
 * --doctor-only exits 3.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>

#include "daemon/daemon.h"

int doctor_main(const daemon_opts_t *opt, ring_comm_t *comm, int rank)
{
    int n = ring_comm_size(comm), slow = 0;
    float one = 1;
    ring_edge_report_t *edges = calloc((size_t)n, sizeof(*edges));

    if (edges == NULL) {
        fprintf(stderr, "ringd[rank %d]: error: out of memory for %d edge reports\n", rank, n);
        return 1;
    }
    if (ring_comm_doctor(comm, opt->doctor_bytes, edges) != RING_OK) {
        fprintf(stderr, "ringd[rank %d]: error: %s\n", rank, ring_last_error());
        free(edges);
        return 1;
    }
    for (int p = 0; p < n; p++)
        slow += edges[p].slow;
    if (rank == 0) {
        printf("ringd: ring doctor: %d peers, transport %s, bursts of up to %zu bytes\n", n,
               ring_comm_transport(comm), opt->doctor_bytes);
        ring_doctor_print(comm, edges, stdout);
    }
    free(edges);
    /* a barrier after rank 0 has printed: under a launcher that stops every peer
     * when one exits non-zero, no peer's exit 3 may cut the report short */
    if (ring_allreduce(comm, &one, &one, 1, RING_FLOAT32, RING_SUM) != RING_OK) {
        fprintf(stderr, "ringd[rank %d]: error: %s\n", rank, ring_last_error());
        return 1;
    }
    return slow > 0 ? 3 : 0;
}
