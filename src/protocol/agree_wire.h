/*
 * agree_wire.h - the messages of the survivors' agreement (src/elastic/agree.c):
 * who is left after a failure, decided over a ring of the survivors.
 *
 *   header (64) | trailer (24: counter and tag, frame_mac.h; zeros without a
 *   secret) | set (ceil(world / 8) bytes: a bit per rank of the old ring)
 *
 * Header, little-endian: magic "RNGE" (4), version (2), type (2), job hash
 * (8), generation (4: the shrink it belongs to, so a message of an earlier
 * shrink is never taken for this one), world (4: the old ring's size), round
 * (4), origin (4: the old rank it speaks for), detail (4: a REJECT's reason),
 * then zeros to 64. The set is the origin's failed ranks (HELLO, TOKEN,
 * REJECT) or empty (DONE).
 */
#ifndef RING_AGREE_WIRE_H
#define RING_AGREE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "frame_mac.h"

#define RING_AGREE_MAGIC 0x45474e52u /* "RNGE" */
#define RING_AGREE_VERSION 1
#define RING_AGREE_HDR_BYTES 64
#define RING_AGREE_MAX_WORLD 4096
#define RING_AGREE_SET_BYTES (RING_AGREE_MAX_WORLD / 8)
#define RING_AGREE_MSG_MAX (RING_AGREE_HDR_BYTES + RING_FRAME_TRAILER_BYTES + RING_AGREE_SET_BYTES)

typedef enum ring_agree_type {
    RING_AGREE_HELLO = 1,   /* first message both ways on a connection: who I am, whom I count lost */
    RING_AGREE_REJECT = 2,  /* an acceptor turns a connector away (detail says why) */
    RING_AGREE_TOKEN = 3,   /* origin's view, passed once round the ring of survivors */
    RING_AGREE_DONE = 4     /* origin has decided this round */
} ring_agree_type_t;

/* a REJECT's detail */
enum {
    RING_AGREE_EXCLUDED = 1, /* the acceptor counts the connector lost */
    RING_AGREE_DECIDED = 2   /* the acceptor has decided without the connector */
};

typedef struct ring_agree_msg {
    uint16_t type;
    uint64_t job_hash;
    uint32_t generation;
    uint32_t world;
    uint32_t round;
    uint32_t origin;
    uint32_t detail;
    unsigned char set[RING_AGREE_SET_BYTES];
} ring_agree_msg_t;

static inline int ring_agree_set_has(const unsigned char *set, int r)
{
    return (set[r / 8] >> (r % 8)) & 1;
}
static inline void ring_agree_set_add(unsigned char *set, int r)
{
    set[r / 8] = (unsigned char)(set[r / 8] | (1u << (r % 8)));
}

/* Bytes of a message of a ring of world ranks. */
size_t ring_agree_msg_bytes(uint32_t world);
/* Write m into out (ring_agree_msg_bytes(m->world) bytes, trailer zero). */
void ring_agree_encode(const ring_agree_msg_t *m, unsigned char *out);
/*
 * Read len bytes into m, checking everything a peer could get wrong: magic,
 * version, type, the world expected, the length, origin < world, no bit set
 * past world, and the job hash and generation expected. Returns 0, or -1
 * with why filled ("another job", "generation 3, this shrink is 4" ...).
 */
int ring_agree_decode(const unsigned char *in, size_t len, uint32_t world, uint64_t job_hash,
                      uint32_t generation, ring_agree_msg_t *m, char *why, size_t whylen);

#endif /* RING_AGREE_WIRE_H */
