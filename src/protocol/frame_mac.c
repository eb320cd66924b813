/*
 * frame_mac.c - the per-connection keys, the GMAC tags and the AES-256-GCM
 * encryption of frame_mac.h, with OpenSSL's libcrypto.
 */
#include "ring_build.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "errors.h"
#include "frame_mac.h"
#include "le.h"
#include "wire.h"

/* every connection of the ring, both ends: channels x streams x 2 */
#define MACS_MAX (2 * 16 * 16)

typedef struct mac_dir {
    EVP_CIPHER_CTX *ctx;       /* keyed once; each tag sets only the nonce */
    uint64_t counter;          /* tx: the last one sent; rx: the last one accepted */
} mac_dir_t;

typedef struct mac_conn {
    const ring_tp_ep_t *ep;    /* only a key: never used */
    mac_dir_t tx, rx;
} mac_conn_t;

struct ring_frame_macs {
    mac_conn_t conn[MACS_MAX];
    int n;
    int last;                  /* where the previous lookup hit */
};

ring_frame_macs_t *ring_frame_macs_new(void)
{
    return calloc(1, sizeof(ring_frame_macs_t));
}

void ring_frame_macs_free(ring_frame_macs_t *t)
{
    if (t == NULL)
        return;
    for (int i = 0; i < t->n; i++) {
        EVP_CIPHER_CTX_free(t->conn[i].tx.ctx);
        EVP_CIPHER_CTX_free(t->conn[i].rx.ctx);
    }
    free(t);
}

/* One direction's AES-256-GCM context: encrypting (tx) or decrypting (rx); a
 * tag-only frame runs its payload through as additional data either way. */
static int dir_init(mac_dir_t *d, const unsigned char key[RING_AUTH_KEY_BYTES], int rx)
{
    d->ctx = EVP_CIPHER_CTX_new();
    d->counter = 0;
    return d->ctx != NULL &&
                   EVP_CipherInit_ex(d->ctx, EVP_aes_256_gcm(), NULL, NULL, NULL, !rx) == 1 &&
                   EVP_CIPHER_CTX_ctrl(d->ctx, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1 &&
                   EVP_CipherInit_ex(d->ctx, NULL, NULL, key, NULL, !rx) == 1
               ? 0 : -1;
}

ring_status_t ring_frame_macs_attach(ring_frame_macs_t *t, const ring_tp_ep_t *ep,
                                     const ring_auth_hs_t *hs, int connector)
{
    mac_conn_t *c;

    if (t->n == MACS_MAX)
        return ring_error_set(RING_ERR_INTERNAL, "--auth frames: more than %d connections",
                              MACS_MAX);
    c = &t->conn[t->n];
    memset(c, 0, sizeof(*c));
    c->ep = ep;
    /* the connector sends with the connector-to-acceptor key and receives with the other */
    if (!hs->done)
        return ring_error_set(RING_ERR_INTERNAL, "--auth frames: a connection without keys");
    if (dir_init(&c->tx, connector ? hs->key_c2a : hs->key_a2c, 0) != 0 ||
        dir_init(&c->rx, connector ? hs->key_a2c : hs->key_c2a, 1) != 0) {
        EVP_CIPHER_CTX_free(c->tx.ctx);
        EVP_CIPHER_CTX_free(c->rx.ctx);
        return ring_error_set(RING_ERR_INTERNAL, "--auth frames: AES-256-GCM set-up failed in "
                              "libcrypto");
    }
    t->n++;
    return RING_OK;
}

static mac_conn_t *find(ring_frame_macs_t *t, const ring_tp_ep_t *ep)
{
    if (t->last < t->n && t->conn[t->last].ep == ep)
        return &t->conn[t->last];
    for (int i = 0; i < t->n; i++)
        if (t->conn[i].ep == ep) {
            t->last = i;
            return &t->conn[i];
        }
    return NULL;
}

/*
 * One frame through a direction's context, the counter as the nonce, the
 * header and counter as additional data. in -> out: the payload is
 * encrypted (tx) or decrypted (rx; out may be in); out NULL: the payload is
 * additional data too (a tag only). tx writes the tag; rx checks it (0 ok).
 */
static int gcm_frame(mac_dir_t *d, int rx, uint64_t counter, const unsigned char *hdr,
                     const void *in, void *out, size_t len, unsigned char tag[RING_FRAME_MAC_TAG_BYTES])
{
    unsigned char iv[12] = {0}, none[16];
    const unsigned char *p = in;
    unsigned char *q = out;
    int outl;

    le_put64(iv + 4, counter);
    if (EVP_CipherInit_ex(d->ctx, NULL, NULL, NULL, iv, !rx) != 1 ||
        EVP_CipherUpdate(d->ctx, NULL, &outl, hdr, RING_FRAME_BYTES + 8) != 1)
        return -1;
    while (len > 0) { /* EVP takes int lengths */
        int part = len > INT_MAX / 2 ? INT_MAX / 2 : (int)len;

        if (EVP_CipherUpdate(d->ctx, q, &outl, p, part) != 1)
            return -1;
        p += part;
        q = q != NULL ? q + part : NULL;
        len -= (size_t)part;
    }
    if (rx)
        return EVP_CIPHER_CTX_ctrl(d->ctx, EVP_CTRL_GCM_SET_TAG, RING_FRAME_MAC_TAG_BYTES,
                                   tag) == 1 &&
                       EVP_CipherFinal_ex(d->ctx, none, &outl) == 1
                   ? 0 : -1;
    return EVP_CipherFinal_ex(d->ctx, none, &outl) == 1 &&
                   EVP_CIPHER_CTX_ctrl(d->ctx, EVP_CTRL_GCM_GET_TAG, RING_FRAME_MAC_TAG_BYTES,
                                       tag) == 1
               ? 0 : -1;
}

int ring_frame_macs_seal(ring_frame_macs_t *t, const ring_tp_ep_t *ep, unsigned char *hdr,
                         const void *payload, void *cipher, size_t len)
{
    mac_conn_t *c = find(t, ep);

    if (c == NULL)
        return -1;
    le_put64(hdr + RING_FRAME_BYTES, ++c->tx.counter);
    return gcm_frame(&c->tx, 0, c->tx.counter, hdr, payload, cipher, len,
                     hdr + RING_FRAME_BYTES + 8);
}

int ring_frame_macs_open(ring_frame_macs_t *t, const ring_tp_ep_t *ep, const unsigned char *hdr,
                         void *payload, size_t len, int sealed)
{
    mac_conn_t *c = find(t, ep);
    unsigned char tag[RING_FRAME_MAC_TAG_BYTES];
    uint64_t counter = le_get64(hdr + RING_FRAME_BYTES);

    /* an old counter is refused before a byte is touched: a replay never
     * decrypts in place twice */
    if (c == NULL || counter <= c->rx.counter)
        return -1;
    memcpy(tag, hdr + RING_FRAME_BYTES + 8, sizeof(tag));
    if (gcm_frame(&c->rx, 1, counter, hdr, payload, sealed ? payload : NULL, len, tag) != 0)
        return -1;
    c->rx.counter = counter;
    return 0;
}
