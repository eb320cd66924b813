/*
 * stranger_probe.h - a stranger on a ring's bootstrap port (t-verbs.c's
 * K_STRANGER): a separate process connects to a rank's port three times,
 * sending garbage, a fake verbs queue-pair record, and a real connector
 * challenge followed by a fake record, and says what came back each time.
 * The rank must answer nothing but its own challenge and drop it.
 */
#ifndef RING_STRANGER_PROBE_H
#define RING_STRANGER_PROBE_H

#include <stdint.h>

#include "auth.h"

#define PROBES 3
/* an acceptor's challenge as read off the socket: tcp framing's 4-byte length first */
#define CHALLENGE_FRAMED (4 + RING_AUTH_CHALLENGE_BYTES)

/* What the probes saw, indices into the result array:
 * S_BYTES + k   bytes read on probe k (999999: never connected)
 * S_CLOSED + k  1 when the rank closed or reset that connection
 * S_CHALLENGE   1 when probe 2 read exactly one well-formed acceptor challenge
 * S_RECORD      1 when a verbs record's magic appeared in anything read */
enum { S_BYTES = 0, S_CLOSED = PROBES, S_CHALLENGE = 2 * PROBES, S_RECORD, S_COUNT };

extern const char *const stranger_probe_name[PROBES];

/* Fork the stranger, let it probe 127.0.0.1:port (retrying while nobody listens,
 * <= 20 s, then <= 8 s per answer) knowing the job id (its challenge calls
 * rank 0 as rank 1, for a verbs bootstrap), and fill res; 0, or -1 when it
 * could not run or report (within 90 s). */
int stranger_probe_port(int port, const char *job, uint64_t res[S_COUNT]);

#endif
