/* agree_wire.c - encoding and checking the survivors' agreement messages. */
#include "ring_build.h"

#include <stdio.h>
#include <string.h>

#include "agree_wire.h"
#include "le.h"

size_t ring_agree_msg_bytes(uint32_t world)
{
    return RING_AGREE_HDR_BYTES + RING_FRAME_TRAILER_BYTES + (world + 7) / 8;
}

void ring_agree_encode(const ring_agree_msg_t *m, unsigned char *out)
{
    memset(out, 0, RING_AGREE_HDR_BYTES + RING_FRAME_TRAILER_BYTES);
    le_put32(out + 0, RING_AGREE_MAGIC);
    le_put16(out + 4, RING_AGREE_VERSION);
    le_put16(out + 6, m->type);
    le_put64(out + 8, m->job_hash);
    le_put32(out + 16, m->generation);
    le_put32(out + 20, m->world);
    le_put32(out + 24, m->round);
    le_put32(out + 28, m->origin);
    le_put32(out + 32, m->detail);
    memcpy(out + RING_AGREE_HDR_BYTES + RING_FRAME_TRAILER_BYTES, m->set, (m->world + 7) / 8);
}

int ring_agree_decode(const unsigned char *in, size_t len, uint32_t world, uint64_t job_hash,
                      uint32_t generation, ring_agree_msg_t *m, char *why, size_t whylen)
{
    size_t setb = (world + 7) / 8;
    unsigned version;

    if (world == 0 || world > RING_AGREE_MAX_WORLD) {
        snprintf(why, whylen, "a ring of %u ranks cannot shrink (at most %d)", world,
                 RING_AGREE_MAX_WORLD);
        return -1;
    }
    if (len < 8 || le_get32(in) != RING_AGREE_MAGIC) {
        snprintf(why, whylen, "not an agreement message (%zu bytes)", len);
        return -1;
    }
    version = le_get16(in + 4);
    if (version != RING_AGREE_VERSION) {
        snprintf(why, whylen, "agreement version %u, this peer speaks %d", version,
                 RING_AGREE_VERSION);
        return -1;
    }
    if (len != ring_agree_msg_bytes(world)) {
        snprintf(why, whylen, "a message of %zu bytes where a ring of %u sends %zu", len, world,
                 ring_agree_msg_bytes(world));
        return -1;
    }
    memset(m, 0, sizeof(*m));
    m->type = le_get16(in + 6);
    m->job_hash = le_get64(in + 8);
    m->generation = le_get32(in + 16);
    m->world = le_get32(in + 20);
    m->round = le_get32(in + 24);
    m->origin = le_get32(in + 28);
    m->detail = le_get32(in + 32);
    if (m->type < RING_AGREE_HELLO || m->type > RING_AGREE_DONE) {
        snprintf(why, whylen, "unknown message type %u", m->type);
        return -1;
    }
    if (m->job_hash != job_hash) {
        snprintf(why, whylen, "a message of another job");
        return -1;
    }
    if (m->world != world) {
        snprintf(why, whylen, "a ring of %u ranks, this one has %u", m->world, world);
        return -1;
    }
    if (m->generation != generation) {
        snprintf(why, whylen, "shrink number %u, this peer runs number %u", m->generation,
                 generation);
        return -1;
    }
    if (m->origin >= world) {
        snprintf(why, whylen, "origin rank %u of a ring of %u", m->origin, world);
        return -1;
    }
    memcpy(m->set, in + RING_AGREE_HDR_BYTES + RING_FRAME_TRAILER_BYTES, setb);
    if (world % 8 != 0 && (m->set[setb - 1] >> (world % 8)) != 0) {
        snprintf(why, whylen, "ranks past the ring's %u in its set", world);
        return -1;
    }
    return 0;
}
