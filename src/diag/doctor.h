/*
 * doctor.h - what doctor.c (the ring doctor's protocol and measurements)
 * and doctor_report.c (the results as edge reports, and the table) share.
 */
#ifndef RING_DOCTOR_H
#define RING_DOCTOR_H

#include "comm_int.h"

#define DOCTOR_LAPS 5     /* rounds of the ring, each edge measured once in each */
#define DOCTOR_ENTRY 24   /* bytes per edge in the results vector: bytes/s (u64), burst bytes
                           * (u64), one-way latency in ns (u32), timed bursts (u32), LE */

/* Rank's host as the ring knows it, and its "host:port", RING_DOCTOR_NAME_MAX each. */
void ring_doctor_names(const ring_comm_t *comm, int rank, char *host, char *addr);

/* edges[0..size-1] from the results vector (edge p from the peer at place p). */
void ring_doctor_report_fill(const ring_comm_t *comm, const unsigned char *vec,
                             ring_edge_report_t *edges);

/* Free the doctor's requests and buffers (the transport may hold them until its
 * endpoints are closed): src/comm_open.c calls it at close. */
void ring_doctor_free(ring_comm_t *comm);

#endif /* RING_DOCTOR_H */
