/* wire.c - encoding and decoding hellos and frame headers, little-endian. */
#include "config.h"

#include <string.h>

#include "wire.h"

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void ring_hello_encode(const ring_hello_t *h, unsigned char out[RING_HELLO_BYTES])
{
    memset(out, 0, RING_HELLO_BYTES);
    put32(out + 0, RING_HELLO_MAGIC);
    put16(out + 4, h->version);
    put64(out + 8, h->job_hash);
    put32(out + 16, h->rank);
    put32(out + 20, h->world_size);
    put32(out + 24, h->channel);
    put32(out + 28, h->stream);
    put32(out + 32, h->channels);
    put32(out + 36, h->streams);
    put64(out + 40, h->chunk_bytes);
    put32(out + 48, h->transport);
    out[52] = h->codec;
    out[53] = h->fp16_scaling;
    put64(out + 56, h->peers_hash);
    put64(out + 64, h->settings_hash);
    memcpy(out + 72, h->job_text, strnlen(h->job_text, RING_HELLO_JOB_TEXT));
}

int ring_hello_decode(const unsigned char in[RING_HELLO_BYTES], ring_hello_t *h)
{
    memset(h, 0, sizeof(*h));
    h->magic = get32(in + 0);
    if (h->magic != RING_HELLO_MAGIC)
        return -1;
    h->version = get16(in + 4);
    h->job_hash = get64(in + 8);
    h->rank = get32(in + 16);
    h->world_size = get32(in + 20);
    h->channel = get32(in + 24);
    h->stream = get32(in + 28);
    h->channels = get32(in + 32);
    h->streams = get32(in + 36);
    h->chunk_bytes = get64(in + 40);
    h->transport = get32(in + 48);
    h->codec = in[52];
    h->fp16_scaling = in[53];
    h->peers_hash = get64(in + 56);
    h->settings_hash = get64(in + 64);
    memcpy(h->job_text, in + 72, RING_HELLO_JOB_TEXT);
    h->job_text[RING_HELLO_JOB_TEXT] = '\0';
    return 0;
}

void ring_frame_encode(const ring_frame_t *f, unsigned char out[RING_FRAME_BYTES])
{
    put32(out + 0, RING_FRAME_MAGIC);
    out[4] = f->type;
    out[5] = f->dtype;
    out[6] = f->op;
    out[7] = f->channel;
    put64(out + 8, f->round);
    put64(out + 16, f->count);
    put32(out + 24, f->tensor_id);
    put32(out + 28, f->chunk);
    put16(out + 32, f->step);
    put16(out + 34, f->flags);
    put32(out + 36, f->payload_bytes);
    put32(out + 40, f->origin_rank);
    put32(out + 44, f->culprit_rank);
    put32(out + 48, f->status);
    put32(out + 52, (uint32_t)f->sys_errno);
    put64(out + 56, f->detail);
}

int ring_frame_decode(const unsigned char in[RING_FRAME_BYTES], ring_frame_t *f)
{
    f->magic = get32(in + 0);
    if (f->magic != RING_FRAME_MAGIC)
        return -1;
    f->type = in[4];
    f->dtype = in[5];
    f->op = in[6];
    f->channel = in[7];
    f->round = get64(in + 8);
    f->count = get64(in + 16);
    f->tensor_id = get32(in + 24);
    f->chunk = get32(in + 28);
    f->step = get16(in + 32);
    f->flags = get16(in + 34);
    f->payload_bytes = get32(in + 36);
    f->origin_rank = get32(in + 40);
    f->culprit_rank = get32(in + 44);
    f->status = get32(in + 48);
    f->sys_errno = (int32_t)get32(in + 52);
    f->detail = get64(in + 56);
    return 0;
}

uint64_t ring_hash_bytes(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
