/*
 * auth_handshake.c - auth.h's handshake without I/O: the challenges, what
 * each side checks in the other's, the key schedule (HKDF-SHA-256 of the
 * pre-shared key, then of an X25519 shared secret, as TLS 1.3's psk_dhe_ke),
 * the Finished-style proofs over the transcript hash, and the traffic keys.
 * Every primitive is libcrypto's.
 */
#include "ring_build.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include "auth.h"
#include "le.h"

static const char TRANSCRIPT_LABEL[] = "ringd-auth v2";

/* The challenge's layout (little-endian), both directions:
 *   0 magic "RNGA"  4 version  6 role (0 connector, 1 acceptor)
 *   8 purpose  9 zero  10 channel  12 stream  14 zero
 *  16 rank (the sender's)  20 peer rank (whom it calls, or answers)
 *  24 job tag (16)  40 nonce (32)  72 X25519 public key (32) */
enum { OFF_PURPOSE = 8, OFF_CHANNEL = 10, OFF_STREAM = 12, OFF_RANK = 16, OFF_PEER = 20,
       OFF_JOB = 24, OFF_NONCE = 40, OFF_PUB = 72 };

static const char *purpose_name(unsigned p)
{
    switch (p) {
    case RING_AUTH_FOR_RING: return "a ring connection";
    case RING_AUTH_FOR_STORE: return "the rendezvous store";
    case RING_AUTH_FOR_VERBS_BOOT: return "a verbs bootstrap connection";
    case RING_AUTH_FOR_AGREE: return "the survivors' agreement";
    default: return "an unknown purpose";
    }
}

int ring_auth_nonce(unsigned char nonce[RING_AUTH_NONCE_BYTES])
{
    return RAND_bytes(nonce, RING_AUTH_NONCE_BYTES) == 1 ? 0 : -1;
}

void ring_auth_party_init(ring_auth_party_t *p, const ring_auth_key_t *key, const char *job,
                          ring_auth_purpose_t purpose, int rank, int peer_rank)
{
    static const char label[] = "ringd job id";
    unsigned char md[32];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();

    memset(p, 0, sizeof(*p));
    p->key = key;
    p->purpose = (uint8_t)purpose;
    p->rank = rank;
    p->peer_rank = peer_rank;
    memset(md, 0, sizeof(md));
    if (ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
        EVP_DigestUpdate(ctx, label, sizeof(label)) == 1 &&
        EVP_DigestUpdate(ctx, job, strlen(job)) == 1)
        (void)EVP_DigestFinal_ex(ctx, md, NULL);
    EVP_MD_CTX_free(ctx);
    memcpy(p->job_tag, md, sizeof(p->job_tag));
}

static int fail(ring_auth_hs_t *hs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(ring_auth_hs_t *hs, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(hs->why, sizeof(hs->why), fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- libcrypto: X25519, HKDF, HMAC, SHA-256 -------------------------------- */

static int x25519_new(unsigned char priv[32], unsigned char pub[32])
{
    EVP_PKEY *pk = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
    size_t lp = 32, lq = 32;
    int ok = pk != NULL && EVP_PKEY_get_raw_private_key(pk, priv, &lp) == 1 && lp == 32 &&
             EVP_PKEY_get_raw_public_key(pk, pub, &lq) == 1 && lq == 32;

    EVP_PKEY_free(pk);
    return ok ? 0 : -1;
}

/* The shared secret; -1 also for a low-order public key (an all-zero result). */
static int x25519_shared(const unsigned char priv[32], const unsigned char their_pub[32],
                         unsigned char out[32])
{
    static const unsigned char zero[32];
    EVP_PKEY *mine = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, 32);
    EVP_PKEY *theirs = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, their_pub, 32);
    EVP_PKEY_CTX *ctx = mine != NULL ? EVP_PKEY_CTX_new(mine, NULL) : NULL;
    size_t len = 32;
    int ok = ctx != NULL && theirs != NULL && EVP_PKEY_derive_init(ctx) == 1 &&
             EVP_PKEY_derive_set_peer(ctx, theirs) == 1 && EVP_PKEY_derive(ctx, out, &len) == 1 &&
             len == 32 && CRYPTO_memcmp(out, zero, 32) != 0;

    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(theirs);
    EVP_PKEY_free(mine);
    return ok ? 0 : -1;
}

/* HKDF (RFC 5869) through libcrypto: extract (info NULL) or expand (salt NULL,
 * ikm the pseudo-random key, info = label | context). */
static int hkdf(int extract, const unsigned char *salt, size_t salt_len, const unsigned char *ikm,
                size_t ikm_len, const char *label, const unsigned char *context, size_t ctx_len,
                unsigned char out[32])
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
    size_t len = 32;
    int ok = ctx != NULL && EVP_PKEY_derive_init(ctx) == 1 &&
             EVP_PKEY_CTX_set_hkdf_mode(ctx, extract ? EVP_PKEY_HKDEF_MODE_EXTRACT_ONLY
                                                     : EVP_PKEY_HKDEF_MODE_EXPAND_ONLY) == 1 &&
             EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) == 1 &&
             EVP_PKEY_CTX_set1_hkdf_key(ctx, ikm, (int)ikm_len) == 1;

    if (ok && extract)
        ok = EVP_PKEY_CTX_set1_hkdf_salt(ctx, salt, (int)salt_len) == 1;
    if (ok && !extract)
        ok = EVP_PKEY_CTX_add1_hkdf_info(ctx, (const unsigned char *)label, (int)strlen(label)) ==
                 1 &&
             EVP_PKEY_CTX_add1_hkdf_info(ctx, context, (int)ctx_len) == 1;
    ok = ok && EVP_PKEY_derive(ctx, out, &len) == 1 && len == 32;
    EVP_PKEY_CTX_free(ctx);
    return ok ? 0 : -1;
}

/* SHA-256 of the label and up to three pieces of the transcript. */
static int transcript_hash(const unsigned char *a, size_t la, const unsigned char *b, size_t lb,
                           const unsigned char *c, size_t lc, unsigned char out[32])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
             EVP_DigestUpdate(ctx, TRANSCRIPT_LABEL, sizeof(TRANSCRIPT_LABEL)) == 1 &&
             EVP_DigestUpdate(ctx, a, la) == 1 && EVP_DigestUpdate(ctx, b, lb) == 1 &&
             (lc == 0 || EVP_DigestUpdate(ctx, c, lc) == 1) &&
             EVP_DigestFinal_ex(ctx, out, NULL) == 1;

    EVP_MD_CTX_free(ctx);
    return ok ? 0 : -1;
}

/* A proof message: "RNGP" | HMAC(Expand(hs_secret, label, th1), th). */
static int proof_make(const ring_auth_hs_t *hs, int acceptor, const unsigned char th[32],
                      unsigned char out[RING_AUTH_PROOF_BYTES])
{
    unsigned char fk[32];
    unsigned int n = RING_AUTH_MAC_BYTES;
    int ok = hkdf(0, NULL, 0, hs->hs_secret, 32,
                  acceptor ? "ringd acceptor finished" : "ringd connector finished", hs->th1, 32,
                  fk) == 0 &&
             HMAC(EVP_sha256(), fk, sizeof(fk), th, 32, out + 4, &n) != NULL;

    OPENSSL_cleanse(fk, sizeof(fk));
    le_put32(out, RING_AUTH_PROOF_MAGIC);
    return ok ? 0 : -1;
}

/* ---- the messages ---------------------------------------------------------------- */

static void challenge_encode(const ring_auth_hs_t *hs, const unsigned char pub[32],
                             unsigned char out[RING_AUTH_CHALLENGE_BYTES])
{
    memset(out, 0, RING_AUTH_CHALLENGE_BYTES);
    le_put32(out, RING_AUTH_MAGIC);
    le_put16(out + 4, RING_AUTH_VERSION);
    le_put16(out + 6, (uint16_t)(hs->acceptor ? 1 : 0));
    out[OFF_PURPOSE] = hs->me.purpose;
    le_put16(out + OFF_CHANNEL, hs->channel);
    le_put16(out + OFF_STREAM, hs->stream);
    le_put32(out + OFF_RANK, (uint32_t)hs->me.rank);
    le_put32(out + OFF_PEER, (uint32_t)(hs->acceptor ? hs->their_rank : hs->me.peer_rank));
    memcpy(out + OFF_JOB, hs->me.job_tag, RING_AUTH_JOB_TAG_BYTES);
    memcpy(out + OFF_NONCE, hs->nonce, RING_AUTH_NONCE_BYTES);
    memcpy(out + OFF_PUB, pub, 32);
}

int ring_auth_other_version(const unsigned char *in, size_t len, unsigned *version)
{
    if (len < 8 || le_get32(in) != RING_AUTH_MAGIC || le_get16(in + 4) == RING_AUTH_VERSION)
        return 0;
    *version = le_get16(in + 4);
    return 1;
}

int ring_auth_hs_start(ring_auth_hs_t *hs, const ring_auth_party_t *me, int acceptor,
                       unsigned char out[RING_AUTH_CHALLENGE_BYTES])
{
    unsigned char pub[32];

    memset(hs, 0, sizeof(*hs));
    hs->me = *me;
    hs->acceptor = acceptor;
    hs->their_rank = RING_AUTH_NO_RANK;
    hs->channel = me->channel;
    hs->stream = me->stream;
    if (ring_auth_nonce(hs->nonce) != 0 || x25519_new(hs->eph_priv, pub) != 0)
        return fail(hs, "no random bytes or no X25519 key from libcrypto");
    if (!acceptor) {
        challenge_encode(hs, pub, hs->ch_c);
        memcpy(out, hs->ch_c, RING_AUTH_CHALLENGE_BYTES);
    }
    OPENSSL_cleanse(pub, sizeof(pub));
    return 0;
}

/* What the other side's challenge says, checked against what this side is and
 * expects, before this side proves anything. */
static int challenge_check(ring_auth_hs_t *hs, const unsigned char *in, size_t len)
{
    unsigned version;
    int32_t rank, peer;

    if (ring_auth_other_version(in, len, &version))
        return fail(hs, "speaks authentication version %u, this peer %d: every peer needs the "
                    "same ringd release", version, RING_AUTH_VERSION);
    if (len != RING_AUTH_CHALLENGE_BYTES || le_get32(in) != RING_AUTH_MAGIC ||
        le_get16(in + 6) != (hs->acceptor ? 0 : 1) || in[9] != 0 || le_get16(in + 14) != 0)
        return fail(hs, "did not start with a ringd authentication challenge");
    rank = (int32_t)le_get32(in + OFF_RANK);
    peer = (int32_t)le_get32(in + OFF_PEER);
    if (in[OFF_PURPOSE] != hs->me.purpose)
        return fail(hs, "called for %s, which this side is not: a connection relayed from "
                    "elsewhere, or a misdirected one", purpose_name(in[OFF_PURPOSE]));
    hs->wrong_job = CRYPTO_memcmp(in + OFF_JOB, hs->me.job_tag, RING_AUTH_JOB_TAG_BYTES) != 0;
    if (hs->wrong_job)
        return fail(hs, "belongs to another job (its --job-id, RING_JOB_ID, differs)");
    if (peer != hs->me.rank)
        return hs->me.rank == RING_AUTH_NO_RANK
                   ? fail(hs, "was meant for rank %d, not for the store: a relayed connection",
                          (int)peer)
                   : fail(hs, "was meant for rank %d, and this is rank %d: a relayed "
                          "connection, or the peers disagree on RING_PEERS", (int)peer,
                          (int)hs->me.rank);
    if (hs->me.peer_rank != RING_AUTH_NO_RANK && rank != hs->me.peer_rank)
        return fail(hs, hs->acceptor ? "called as rank %d, but this peer expects rank %d: a "
                    "relayed connection, or the peers disagree on RING_PEERS"
                    : "answered as rank %d, but this peer called rank %d: a relayed "
                    "connection, or the peers disagree on RING_PEERS", (int)rank,
                    (int)hs->me.peer_rank);
    if (!hs->acceptor && (le_get16(in + OFF_CHANNEL) != hs->channel ||
                          le_get16(in + OFF_STREAM) != hs->stream))
        return fail(hs, "answered for channel %u stream %u, which this connection is not: a "
                    "relayed connection", le_get16(in + OFF_CHANNEL), le_get16(in + OFF_STREAM));
    hs->their_rank = rank;
    hs->channel = le_get16(in + OFF_CHANNEL);
    hs->stream = le_get16(in + OFF_STREAM);
    return 0;
}

/* Both challenges known: the handshake secret and the first transcript hash. */
static int schedule(ring_auth_hs_t *hs, const unsigned char their_pub[32])
{
    static const unsigned char zero[32];
    unsigned char early[32], dh[32];
    int ok = hkdf(1, zero, sizeof(zero), hs->me.key->k, sizeof(hs->me.key->k), NULL, NULL, 0,
                  early) == 0 &&
             x25519_shared(hs->eph_priv, their_pub, dh) == 0 &&
             hkdf(1, early, sizeof(early), dh, sizeof(dh), NULL, NULL, 0, hs->hs_secret) == 0 &&
             transcript_hash(hs->ch_c, sizeof(hs->ch_c), hs->ch_a, sizeof(hs->ch_a), NULL, 0,
                             hs->th1) == 0;

    OPENSSL_cleanse(early, sizeof(early));
    OPENSSL_cleanse(dh, sizeof(dh));
    OPENSSL_cleanse(hs->eph_priv, sizeof(hs->eph_priv));
    return ok ? 0 : fail(hs, "sent a key this peer cannot use (or libcrypto failed)");
}

int ring_auth_hs_challenge(ring_auth_hs_t *hs, const unsigned char *in, size_t len,
                           unsigned char *out)
{
    unsigned char pub[32];

    if (challenge_check(hs, in, len) != 0)
        return -1;
    if (hs->acceptor) {
        memcpy(hs->ch_c, in, RING_AUTH_CHALLENGE_BYTES);
        /* the public key again from the private one: the state holds no EVP_PKEY */
        {
            EVP_PKEY *pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, hs->eph_priv, 32);
            size_t l = 32;
            int ok = pk != NULL && EVP_PKEY_get_raw_public_key(pk, pub, &l) == 1 && l == 32;

            EVP_PKEY_free(pk);
            if (!ok)
                return fail(hs, "libcrypto failed (X25519)");
        }
        challenge_encode(hs, pub, hs->ch_a);
        memcpy(out, hs->ch_a, RING_AUTH_CHALLENGE_BYTES);
        return schedule(hs, in + OFF_PUB);
    }
    memcpy(hs->ch_a, in, RING_AUTH_CHALLENGE_BYTES);
    if (schedule(hs, in + OFF_PUB) != 0 || proof_make(hs, 0, hs->th1, hs->proof_c) != 0)
        return -1;
    memcpy(out, hs->proof_c, RING_AUTH_PROOF_BYTES);
    return 0;
}

static int traffic_keys(ring_auth_hs_t *hs)
{
    unsigned char th2[32];
    int ok = transcript_hash(hs->ch_c, sizeof(hs->ch_c), hs->ch_a, sizeof(hs->ch_a), hs->proof_c,
                             sizeof(hs->proof_c), th2) == 0 &&
             hkdf(0, NULL, 0, hs->hs_secret, 32, "ringd traffic connector to acceptor", th2, 32,
                  hs->key_c2a) == 0 &&
             hkdf(0, NULL, 0, hs->hs_secret, 32, "ringd traffic acceptor to connector", th2, 32,
                  hs->key_a2c) == 0;

    OPENSSL_cleanse(hs->hs_secret, sizeof(hs->hs_secret));
    if (!ok)
        return fail(hs, "libcrypto failed (HKDF)");
    hs->done = 1;
    return 0;
}

int ring_auth_hs_proof(ring_auth_hs_t *hs, const unsigned char *in, size_t len,
                       unsigned char *out)
{
    unsigned char want[RING_AUTH_PROOF_BYTES], th2[32];
    int bad;

    if (hs->acceptor) {
        bad = proof_make(hs, 0, hs->th1, want) != 0;
    } else {
        bad = transcript_hash(hs->ch_c, sizeof(hs->ch_c), hs->ch_a, sizeof(hs->ch_a),
                              hs->proof_c, sizeof(hs->proof_c), th2) != 0 ||
              proof_make(hs, 1, th2, want) != 0;
    }
    bad = bad || len != RING_AUTH_PROOF_BYTES ||
          CRYPTO_memcmp(want, in, RING_AUTH_PROOF_BYTES) != 0;
    OPENSSL_cleanse(want, sizeof(want));
    if (bad)
        return fail(hs, "could not prove the job's secret (another secret, or not a peer of "
                    "this job)");
    if (hs->acceptor) {
        memcpy(hs->proof_c, in, RING_AUTH_PROOF_BYTES);
        if (transcript_hash(hs->ch_c, sizeof(hs->ch_c), hs->ch_a, sizeof(hs->ch_a), hs->proof_c,
                            sizeof(hs->proof_c), th2) != 0 ||
            proof_make(hs, 1, th2, out) != 0)
            return fail(hs, "libcrypto failed (HMAC)");
    }
    return traffic_keys(hs);
}

void ring_auth_hs_wipe(ring_auth_hs_t *hs)
{
    OPENSSL_cleanse(hs->eph_priv, sizeof(hs->eph_priv));
    OPENSSL_cleanse(hs->hs_secret, sizeof(hs->hs_secret));
    OPENSSL_cleanse(hs->key_c2a, sizeof(hs->key_c2a));
    OPENSSL_cleanse(hs->key_a2c, sizeof(hs->key_a2c));
}
