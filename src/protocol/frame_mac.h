/*
 * frame_mac.h - --auth frames: every message on a ring connection carries a
 * tag that proves it came from the peer that authenticated that connection
 * (auth.h) and was not altered, replayed or injected on the way.
 *
 * After the 64-byte frame header comes a trailer, then the payload:
 *
 *   header (64) | counter (8, little-endian) | tag (16) | payload
 *
 * The tag is GMAC (AES-256-GCM over no plaintext, OpenSSL's libcrypto) of
 * header | counter | payload, with the counter as the nonce, under a key of
 * this connection and direction: the traffic keys of its handshake (auth.h,
 * HKDF over the whole transcript), so no two connections share one. A sender counts 1, 2, 3 ... per
 * direction; a receiver accepts only counters above the last one it accepted
 * (an urgent ABORT may overtake queued data, so not exactly the next).
 * GMAC rather than HMAC-SHA-256: it runs at several GB/s (carry-less
 * multiply), HMAC-SHA-256 at 1.5 at best (docs/launchers.md, "--auth frames").
 *
 * --auth encrypt: a DATA frame's payload is encrypted too (AES-256-GCM with
 * the same key, counter and additional data: one pass gives both), and the
 * frame says so in its flags (RING_FRAME_SEALED, covered by the tag). The
 * header stays readable, as TLS's record lengths do: sizes, steps and tensor
 * ids show, values do not.
 */
#ifndef RING_FRAME_MAC_H
#define RING_FRAME_MAC_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "transport.h"

#define RING_FRAME_MAC_TAG_BYTES 16
#define RING_FRAME_TRAILER_BYTES (8 + RING_FRAME_MAC_TAG_BYTES)

typedef struct ring_frame_macs ring_frame_macs_t;

/* A table of the ring connections' keys; NULL on failure (out of memory). */
ring_frame_macs_t *ring_frame_macs_new(void);
void ring_frame_macs_free(ring_frame_macs_t *t);

/* Keys for both directions of ep, from its finished handshake (hs->done);
 * connector: 1 on the side that connected. */
ring_status_t ring_frame_macs_attach(ring_frame_macs_t *t, const ring_tp_ep_t *ep,
                                     const ring_auth_hs_t *hs, int connector);

/* Write the trailer for hdr (RING_FRAME_BYTES + trailer) and payload, to be
 * sent on ep. cipher NULL: a tag only (--auth frames); else the payload is
 * encrypted into cipher (len bytes; --auth encrypt), which is what goes on
 * the wire. Returns 0, or -1 when ep has no keys or libcrypto failed. */
int ring_frame_macs_seal(ring_frame_macs_t *t, const ring_tp_ep_t *ep, unsigned char *hdr,
                         const void *payload, void *cipher, size_t len);

/* Check what arrived on ep: 0 when the tag verifies and the counter is new
 * (then it is remembered), -1 otherwise. sealed: the payload was encrypted,
 * and is decrypted in place (on -1 it holds garbage: the frame is refused). */
int ring_frame_macs_open(ring_frame_macs_t *t, const ring_tp_ep_t *ep, const unsigned char *hdr,
                         void *payload, size_t len, int sealed);

#endif /* RING_FRAME_MAC_H */
