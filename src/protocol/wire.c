/* wire.c - encoding and decoding hellos and frame headers, little-endian. */
#include "ring_build.h"

#include <string.h>

#include "le.h"
#include "wire.h"

void ring_hello_encode(const ring_hello_t *h, unsigned char out[RING_HELLO_BYTES])
{
    memset(out, 0, RING_HELLO_BYTES);
    le_put32(out + 0, RING_HELLO_MAGIC);
    le_put16(out + 4, h->version);
    le_put64(out + 8, h->job_hash);
    le_put32(out + 16, h->rank);
    le_put32(out + 20, h->world_size);
    le_put32(out + 24, h->channel);
    le_put32(out + 28, h->stream);
    le_put32(out + 32, h->channels);
    le_put32(out + 36, h->streams);
    le_put64(out + 40, h->chunk_bytes);
    le_put32(out + 48, h->transport);
    out[52] = h->codec;
    out[53] = h->fp16_scaling;
    out[54] = h->auth_frames;
    out[55] = h->algo;
    le_put64(out + 56, h->peers_hash);
    le_put64(out + 64, h->settings_hash);
    memcpy(out + 72, h->job_text, strnlen(h->job_text, RING_HELLO_JOB_TEXT));
}

int ring_hello_decode(const unsigned char in[RING_HELLO_BYTES], ring_hello_t *h)
{
    memset(h, 0, sizeof(*h));
    h->magic = le_get32(in + 0);
    if (h->magic != RING_HELLO_MAGIC)
        return -1;
    h->version = le_get16(in + 4);
    h->job_hash = le_get64(in + 8);
    h->rank = le_get32(in + 16);
    h->world_size = le_get32(in + 20);
    h->channel = le_get32(in + 24);
    h->stream = le_get32(in + 28);
    h->channels = le_get32(in + 32);
    h->streams = le_get32(in + 36);
    h->chunk_bytes = le_get64(in + 40);
    h->transport = le_get32(in + 48);
    h->codec = in[52];
    h->fp16_scaling = in[53];
    h->auth_frames = in[54];
    h->algo = in[55];
    h->peers_hash = le_get64(in + 56);
    h->settings_hash = le_get64(in + 64);
    memcpy(h->job_text, in + 72, RING_HELLO_JOB_TEXT);
    h->job_text[RING_HELLO_JOB_TEXT] = '\0';
    return 0;
}

void ring_frame_encode(const ring_frame_t *f, unsigned char out[RING_FRAME_BYTES])
{
    le_put32(out + 0, RING_FRAME_MAGIC);
    out[4] = f->type;
    out[5] = f->dtype;
    out[6] = (uint8_t)((f->op & 0x0fu) | (f->coll & 0x0fu) << 4);
    out[7] = f->channel;
    le_put64(out + 8, f->round);
    le_put64(out + 16, f->count);
    le_put32(out + 24, f->tensor_id);
    le_put32(out + 28, f->chunk);
    le_put16(out + 32, f->step);
    le_put16(out + 34, f->flags);
    le_put32(out + 36, f->payload_bytes);
    le_put32(out + 40, f->origin_rank);
    le_put32(out + 44, f->culprit_rank);
    le_put32(out + 48, f->status);
    le_put32(out + 52, (uint32_t)f->sys_errno);
    le_put64(out + 56, f->detail);
}

int ring_frame_decode(const unsigned char in[RING_FRAME_BYTES], ring_frame_t *f)
{
    f->magic = le_get32(in + 0);
    if (f->magic != RING_FRAME_MAGIC)
        return -1;
    f->type = in[4];
    f->dtype = in[5];
    f->op = in[6] & 0x0fu;
    f->coll = in[6] >> 4;
    f->channel = in[7];
    f->round = le_get64(in + 8);
    f->count = le_get64(in + 16);
    f->tensor_id = le_get32(in + 24);
    f->chunk = le_get32(in + 28);
    f->step = le_get16(in + 32);
    f->flags = le_get16(in + 34);
    f->payload_bytes = le_get32(in + 36);
    f->origin_rank = le_get32(in + 40);
    f->culprit_rank = le_get32(in + 44);
    f->status = le_get32(in + 48);
    f->sys_errno = (int32_t)le_get32(in + 52);
    f->detail = le_get64(in + 56);
    return 0;
}
