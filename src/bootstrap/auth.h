/*
 * auth.h - a peer proves it holds the job's secret before it is told
 * anything: a mutual challenge-response with HMAC-SHA-256 (OpenSSL's
 * libcrypto) at the start of every connection.
 *
 *   connector -> acceptor   CHALLENGE  "RNGA" version role  nonce_c (32)
 *   acceptor  -> connector  CHALLENGE  "RNGA" version role  nonce_s (32)
 *   connector -> acceptor   PROOF      "RNGP" HMAC(K, "ringd-auth connector" nonce_c nonce_s)
 *   acceptor  -> connector  PROOF      "RNGP" HMAC(K, "ringd-auth acceptor"  nonce_c nonce_s)
 *
 * The acceptor answers the connector's proof only after checking it, and
 * the connector says nothing more (its hello) until it has checked the
 * acceptor's: so neither side's hello, job id or error text reaches a peer
 * that has not proven the secret. Fresh random nonces on both sides stop
 * replays; the role labels stop a proof being reflected back. K is
 * HMAC-SHA-256 of the secret under a fixed label, 32 bytes whatever the
 * secret's length.
 */
#ifndef RING_AUTH_H
#define RING_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <ringd/config.h>

#include "magic.h"
#include "transport.h"

#define RING_AUTH_VERSION 1
#define RING_AUTH_NONCE_BYTES 32
#define RING_AUTH_MAC_BYTES 32
#define RING_AUTH_CHALLENGE_BYTES (8 + RING_AUTH_NONCE_BYTES)
#define RING_AUTH_PROOF_BYTES (4 + RING_AUTH_MAC_BYTES)
#define RING_AUTH_SECRET_MIN 16    /* bytes: shorter secrets are refused */
#define RING_AUTH_SECRET_MAX 4096

typedef struct ring_auth_key {
    int on;                        /* 0: no secret configured, connections are not authenticated */
    unsigned char k[32];
} ring_auth_key_t;

/* The key from cfg's secret-file or secret (neither: key->on = 0, RING_OK). */
ring_status_t ring_auth_key_load(const ring_config_t *cfg, ring_auth_key_t *key);
/* The key from the secret's bytes (tests, bindings). */
ring_status_t ring_auth_key_from(const void *secret, size_t len, ring_auth_key_t *key);

/* A fresh random nonce (libcrypto's RAND_bytes): 0, or -1 when it has none. */
int ring_auth_nonce(unsigned char nonce[RING_AUTH_NONCE_BYTES]);

/* The messages; decoders check size and magic (0 ok, -1 not one). */
void ring_auth_challenge_encode(int acceptor, const unsigned char nonce[RING_AUTH_NONCE_BYTES],
                                unsigned char out[RING_AUTH_CHALLENGE_BYTES]);
int ring_auth_challenge_decode(const unsigned char *in, size_t len, int acceptor,
                               unsigned char nonce[RING_AUTH_NONCE_BYTES]);
/* The proof a side (acceptor or connector) sends, over both nonces. */
void ring_auth_proof(const ring_auth_key_t *key, int acceptor,
                     const unsigned char nonce_c[RING_AUTH_NONCE_BYTES],
                     const unsigned char nonce_s[RING_AUTH_NONCE_BYTES],
                     unsigned char out[RING_AUTH_PROOF_BYTES]);
/* 0 when in (len bytes) is the proof that side must send, in constant time. */
int ring_auth_proof_check(const ring_auth_key_t *key, int acceptor,
                          const unsigned char nonce_c[RING_AUTH_NONCE_BYTES],
                          const unsigned char nonce_s[RING_AUTH_NONCE_BYTES],
                          const unsigned char *in, size_t len);

/*
 * One connection's exchange over a transport endpoint, without blocking:
 * ring_auth_begin posts the first messages, ring_auth_step moves it on
 * after progress(). The requests and buffers live in the struct, which
 * must stay put until the exchange ends (or the endpoint is closed).
 */
typedef enum ring_auth_state {
    RING_AUTH_PENDING = 0,
    RING_AUTH_DONE,
    RING_AUTH_FAILED       /* why: ring_auth_t.why */
} ring_auth_state_t;

typedef struct ring_auth {
    const ring_auth_key_t *key;
    const ring_tp_ops_t *ops;
    ring_tp_ep_t *ep;
    int acceptor;
    int phase;               /* which message this side waits for */
    unsigned char nonce_c[RING_AUTH_NONCE_BYTES], nonce_s[RING_AUTH_NONCE_BYTES];
    unsigned char out_challenge[RING_AUTH_CHALLENGE_BYTES], out_proof[RING_AUTH_PROOF_BYTES];
    unsigned char in_challenge[RING_AUTH_CHALLENGE_BYTES + 4];
    unsigned char in_proof[RING_AUTH_PROOF_BYTES + 4];
    ring_tp_req_t s_challenge, s_proof, r_challenge, r_proof;
    /* what failed, for a log line or an error: "sent a ringd hello instead (no secret?)" */
    char why[400];
    /* 1 when the other side failed us (closed after our proof): the secrets differ */
    int refused;
    /* connector: 1 when the connection never came up (refused, unreachable): nobody
     * listens there yet, which is no authentication failure */
    int unreachable;
} ring_auth_t;

ring_status_t ring_auth_begin(ring_auth_t *a, const ring_auth_key_t *key,
                              const ring_tp_ops_t *ops, ring_tp_ep_t *ep, int acceptor);
ring_auth_state_t ring_auth_step(ring_auth_t *a);

/*
 * auth_guard.c: with a key that is on, hooks get the connection guard
 * (ctx = key, which must outlive the transport): ring_auth_begin and
 * ring_auth_step on a ring_auth_t per connection, and what failed. Without
 * one hooks stay as they are (no guard).
 */
void ring_auth_guard_lend(ring_auth_key_t *key, ring_tp_hooks_t *hooks);

#endif /* RING_AUTH_H */
