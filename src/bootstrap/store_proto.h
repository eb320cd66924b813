/*
 * store_proto.h - the tcp store's messages (format: store.h) as pure
 * functions over byte buffers, with every length checked against the bytes
 * received and store.h's bounds: store_server.c decodes its clients'
 * requests with them, store_tcp.c the server's replies;
 * tests/fuzz/fuzz-store-server.c and fuzz-store-client.c fuzz them.
 */
#ifndef RING_STORE_PROTO_H
#define RING_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef struct ring_store_req {
    char op;
    const unsigned char *key, *value; /* inside the decoded buffer, not NUL-terminated */
    size_t klen, vlen;
} ring_store_req_t;

/* The request at the start of buf (len bytes received so far): its size in
 * bytes once all of it is there (*r then points into buf), 0 when more bytes
 * are needed, -1 when it is not a ringd store request (magic, or a key or
 * value beyond RING_STORE_KEY_MAX / RING_STORE_VALUE_MAX). */
long ring_store_req_decode(const unsigned char *buf, size_t len, ring_store_req_t *r);

/* Write a request into out (RING_STORE_REQ_HDR + klen + vlen bytes, its size,
 * returned); klen and vlen are within the bounds (the caller checked). */
size_t ring_store_req_encode(char op, const char *key, size_t klen, const char *value,
                             size_t vlen, unsigned char *out);

typedef struct ring_store_rep {
    char status;  /* 'O', 'V', 'N', 'E' (or whatever the server sent) */
    uint32_t len; /* bytes of data after the header */
} ring_store_rep_t;

/* A reply's header; its len bytes of data follow it. */
void ring_store_rep_encode(char status, uint32_t len, unsigned char out[RING_STORE_REP_HDR]);

/* The header of a reply whose data must fit, NUL-terminated, in cap bytes:
 * 0; -1 when it is not "RKV1"; -2 when its data is longer than
 * RING_STORE_VALUE_MAX or than cap - 1 (*r is filled in for both 0 and -2). */
int ring_store_rep_decode(const unsigned char hdr[RING_STORE_REP_HDR], size_t cap,
                          ring_store_rep_t *r);

#endif /* RING_STORE_PROTO_H */
