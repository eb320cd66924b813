/* store_proto.c - the tcp store's messages (store_proto.h). */
#include "ring_build.h"

#include <string.h>

#include "le.h"
#include "store_proto.h"

long ring_store_req_decode(const unsigned char *buf, size_t len, ring_store_req_t *r)
{
    size_t klen, vlen;

    if (len < RING_STORE_REQ_HDR)
        return 0;
    klen = le_get16(buf + 5);
    vlen = le_get32(buf + 7);
    if (memcmp(buf, RING_STORE_MAGIC, 4) != 0 || klen > RING_STORE_KEY_MAX ||
        vlen > RING_STORE_VALUE_MAX)
        return -1;
    if (len - RING_STORE_REQ_HDR < klen + vlen)
        return 0;
    r->op = (char)buf[4];
    r->key = buf + RING_STORE_REQ_HDR;
    r->klen = klen;
    r->value = buf + RING_STORE_REQ_HDR + klen;
    r->vlen = vlen;
    return (long)(RING_STORE_REQ_HDR + klen + vlen);
}

size_t ring_store_req_encode(char op, const char *key, size_t klen, const char *value,
                             size_t vlen, unsigned char *out)
{
    memcpy(out, RING_STORE_MAGIC, 4);
    out[4] = (unsigned char)op;
    le_put16(out + 5, (uint16_t)klen);
    le_put32(out + 7, (uint32_t)vlen);
    if (klen > 0)
        memcpy(out + RING_STORE_REQ_HDR, key, klen);
    if (vlen > 0)
        memcpy(out + RING_STORE_REQ_HDR + klen, value, vlen);
    return RING_STORE_REQ_HDR + klen + vlen;
}

void ring_store_rep_encode(char status, uint32_t len, unsigned char out[RING_STORE_REP_HDR])
{
    memcpy(out, RING_STORE_MAGIC, 4);
    out[4] = (unsigned char)status;
    le_put32(out + 5, len);
}

int ring_store_rep_decode(const unsigned char hdr[RING_STORE_REP_HDR], size_t cap,
                          ring_store_rep_t *r)
{
    if (memcmp(hdr, RING_STORE_MAGIC, 4) != 0)
        return -1;
    r->status = (char)hdr[4];
    r->len = le_get32(hdr + 5);
    if (r->len > RING_STORE_VALUE_MAX || r->len >= cap)
        return -2;
    return 0;
}
