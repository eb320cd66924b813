/*
 * handshake.h - the hello each connection opens with: what it carries and how
 * two hellos are compared (handshake.c).
 */
#ifndef RING_HANDSHAKE_H
#define RING_HANDSHAKE_H

#include "comm_int.h"

void ring_hello_fill(const ring_comm_t *comm, int channel, int stream, ring_hello_t *h);
ring_status_t ring_hello_check(const ring_comm_t *comm, const ring_hello_t *mine,
                               const ring_hello_t *theirs, const char *peer_addr);
/* A hello as a peer asking to join a running ring shows it (rdzv_join.c) and the
 * ring compares it (grow.c): without the world size and the peer list, which
 * the join changes, and speaking as `rank`, the rank it would get. */
void ring_hello_for_join(ring_hello_t *h, uint32_t rank);
/* The first setting two hellos differ in (1..), or 0; and its name, with the option
 * that sets it, for messages ("codec (RING_CODEC)"; "a setting" when unknown). */
unsigned ring_hello_first_diff(const ring_hello_t *mine, const ring_hello_t *theirs);
const char *ring_hello_field_name(unsigned field);

#endif /* RING_HANDSHAKE_H */
