/*
 * auth.h - a peer proves it holds the job's secret before it is told
 * anything, and proves it to the very connection it means to talk on.
 *
 *   connector -> acceptor   CHALLENGE  who I am, whom I mean to reach, what for,
 *                                      nonce_c, ephemeral X25519 key e_c
 *   acceptor  -> connector  CHALLENGE  who I am, whom I answer, what for,
 *                                      nonce_s, ephemeral X25519 key e_s
 *   connector -> acceptor   PROOF      HMAC(fk_c, H(transcript))
 *   acceptor  -> connector  PROOF      HMAC(fk_a, H(transcript + connector's proof))
 *
 * The construction is TLS 1.3's (RFC 8446): its psk_dhe_ke key schedule
 * (HKDF-Extract of the pre-shared key, then of the X25519 shared secret) and
 * its Finished messages (an HMAC under a per-role key over the hash of every
 * message so far), on our own four messages. What the challenges say is in
 * the transcript, so each proof binds both nonces, both ephemeral keys, both
 * ranks, the role, the connection's purpose (ring, store, verbs bootstrap),
 * its channel and stream, the job and the protocol version. Each side checks
 * what the other says against what it expects before it proves anything:
 * an acceptor refuses a challenge meant for another rank, a connector an
 * answer from a rank it did not call. That is what stops a stranger who
 * relays a peer's challenge to another connection of the same peer (or to
 * the store): the relayed transcript names a rank, a purpose or a job the
 * receiving side is not (ISO/IEC 9798-4's and SIGMA's rule: the proof names
 * the parties). Fresh nonces stop replays, the role labels reflections.
 *
 * Per-connection keys for --auth frames and --auth encrypt come from the same
 * schedule, one per direction, over the whole transcript: two connections
 * never share keys, and a frame reflected or spliced onto another connection
 * fails its tag. The ephemeral X25519 keys give forward secrecy: a secret
 * that leaks later does not decrypt a recorded --auth encrypt run.
 *
 * K, the pre-shared key, is HMAC-SHA-256 of the secret under a fixed label:
 * 32 bytes whatever the secret's length. Every primitive is OpenSSL's
 * libcrypto (HMAC, HKDF, SHA-256, X25519, RAND_bytes, CRYPTO_memcmp).
 */
#ifndef RING_AUTH_H
#define RING_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <ringd/config.h>

#include "magic.h"
#include "transport.h"

#define RING_AUTH_VERSION 2
#define RING_AUTH_NONCE_BYTES 32
#define RING_AUTH_MAC_BYTES 32
#define RING_AUTH_KEY_BYTES 32
#define RING_AUTH_JOB_TAG_BYTES 16
#define RING_AUTH_CHALLENGE_BYTES 104
#define RING_AUTH_PROOF_BYTES (4 + RING_AUTH_MAC_BYTES)
#define RING_AUTH_SECRET_MIN 16    /* bytes: shorter secrets are refused */
#define RING_AUTH_SECRET_MAX 4096
#define RING_AUTH_NO_RANK (-1)     /* the store's side, or a client without a rank yet */

typedef struct ring_auth_key {
    int on;                        /* 0: no secret configured, connections are not authenticated */
    unsigned char k[32];
} ring_auth_key_t;

/* What a connection is for: part of the transcript, so a proof made for one
 * never passes for another. */
typedef enum ring_auth_purpose {
    RING_AUTH_FOR_RING = 1,        /* a ring connection, left neighbour to right */
    RING_AUTH_FOR_STORE = 2,       /* a client of the tcp rendezvous store */
    RING_AUTH_FOR_VERBS_BOOT = 3,  /* a verbs bootstrap connection */
    RING_AUTH_FOR_AGREE = 4        /* the survivors' agreement after a failure (elastic/agree.c) */
} ring_auth_purpose_t;

/*
 * This side of a connection, as it states it and checks the other's: the key,
 * the job (a tag of its id), the purpose, its own rank and the other side's.
 * A connector's peer_rank is the rank it calls (RING_AUTH_NO_RANK: the store);
 * an acceptor's, the rank it expects (RING_AUTH_NO_RANK: whoever proves the
 * secret and calls this rank). channel and stream: which connection of the
 * ring (0 elsewhere); an acceptor takes the connector's.
 */
typedef struct ring_auth_party {
    const ring_auth_key_t *key;
    unsigned char job_tag[RING_AUTH_JOB_TAG_BYTES];
    uint8_t purpose;
    int32_t rank, peer_rank;
    uint16_t channel, stream;
} ring_auth_party_t;

/* The key from cfg's secret-file or secret (neither: key->on = 0, RING_OK). */
ring_status_t ring_auth_key_load(const ring_config_t *cfg, ring_auth_key_t *key);
/* The key from the secret's bytes (tests, bindings). */
ring_status_t ring_auth_key_from(const void *secret, size_t len, ring_auth_key_t *key);

/* A fresh random nonce (libcrypto's RAND_bytes): 0, or -1 when it has none. */
int ring_auth_nonce(unsigned char nonce[RING_AUTH_NONCE_BYTES]);

/* A party for key and job (purpose, ranks, channel and stream to fill in). */
void ring_auth_party_init(ring_auth_party_t *p, const ring_auth_key_t *key, const char *job,
                          ring_auth_purpose_t purpose, int rank, int peer_rank);

/*
 * The handshake itself, without any I/O (auth_handshake.c): the exchange
 * over a transport (below), the store's server and its client feed it the
 * bytes they read and send what it writes. Every function returns 0, or -1
 * with why (for the log, never told to the other side) filled.
 */
typedef struct ring_auth_hs {
    ring_auth_party_t me;
    int acceptor;
    unsigned char nonce[RING_AUTH_NONCE_BYTES];
    unsigned char eph_priv[32];           /* X25519, this connection's only */
    unsigned char ch_c[RING_AUTH_CHALLENGE_BYTES], ch_a[RING_AUTH_CHALLENGE_BYTES];
    unsigned char proof_c[RING_AUTH_PROOF_BYTES];
    unsigned char hs_secret[32];          /* HKDF-Extract of K, then of the X25519 secret */
    unsigned char th1[32];                /* SHA-256 of the two challenges */
    /* what the other side said, once its challenge checked */
    int32_t their_rank;
    uint16_t channel, stream;
    int wrong_job;                        /* the other side's challenge named another job */
    int done;
    /* after done: the traffic keys, connector-to-acceptor and back */
    unsigned char key_c2a[RING_AUTH_KEY_BYTES], key_a2c[RING_AUTH_KEY_BYTES];
    char why[300];
} ring_auth_hs_t;

/* Connector: fill its challenge (RING_AUTH_CHALLENGE_BYTES). Acceptor: only
 * the state; its challenge answers the connector's. */
int ring_auth_hs_start(ring_auth_hs_t *hs, const ring_auth_party_t *me, int acceptor,
                       unsigned char out[RING_AUTH_CHALLENGE_BYTES]);
/* The other side's challenge (len bytes). Acceptor: out gets its challenge
 * (RING_AUTH_CHALLENGE_BYTES). Connector: out gets its proof (PROOF_BYTES). */
int ring_auth_hs_challenge(ring_auth_hs_t *hs, const unsigned char *in, size_t len,
                           unsigned char *out);
/* The other side's proof. Acceptor: out gets its proof; connector: nothing
 * (out may be NULL). On 0, hs->done and the traffic keys are set. */
int ring_auth_hs_proof(ring_auth_hs_t *hs, const unsigned char *in, size_t len,
                       unsigned char *out);
/* Forget the keys (OPENSSL_cleanse). */
void ring_auth_hs_wipe(ring_auth_hs_t *hs);

/* What a first message of len bytes is, for the other side's error: 1 an
 * authentication challenge of another protocol version (*version set). */
int ring_auth_other_version(const unsigned char *in, size_t len, unsigned *version);

/*
 * One connection's exchange over a transport endpoint, without blocking:
 * ring_auth_begin posts the first messages, ring_auth_step moves it on
 * after progress(). The requests and buffers live in the struct, which
 * must stay put until the exchange ends (or the endpoint is closed); it
 * holds no heap memory.
 */
typedef enum ring_auth_state {
    RING_AUTH_PENDING = 0,
    RING_AUTH_DONE,
    RING_AUTH_FAILED       /* why: ring_auth_t.why */
} ring_auth_state_t;

typedef struct ring_auth {
    ring_auth_hs_t hs;
    const ring_tp_ops_t *ops;
    ring_tp_ep_t *ep;
    int acceptor;
    int phase;               /* which message this side waits for */
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
    /* 1 when what the other side sent failed a check (another rank, job, purpose or
     * secret): a security notice, where a close may be a peer restarting */
    int bad_message;
} ring_auth_t;

ring_status_t ring_auth_begin(ring_auth_t *a, const ring_auth_party_t *me,
                              const ring_tp_ops_t *ops, ring_tp_ep_t *ep, int acceptor);
ring_auth_state_t ring_auth_step(ring_auth_t *a);

/*
 * auth_guard.c: with a key that is on, hooks get the connection guard of a
 * verbs bootstrap (ctx = party, which must outlive the transport; its
 * purpose is set to RING_AUTH_FOR_VERBS_BOOT, and a connector calls
 * party->peer_rank): ring_auth_begin and ring_auth_step on a ring_auth_t per
 * connection, and what failed. Without one hooks stay as they are (no guard).
 */
void ring_auth_guard_lend(ring_auth_party_t *party, ring_tp_hooks_t *hooks);

#endif /* RING_AUTH_H */
