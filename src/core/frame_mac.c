/*
 * frame_mac.c - the per-connection keys and the GMAC tags of frame_mac.h,
 * with OpenSSL's libcrypto (AES-256-GCM, HMAC-SHA-256, constant-time
 * compare).
 */
#include "ring_build.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

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

static int dir_init(mac_dir_t *d, const unsigned char key[RING_AUTH_KEY_BYTES])
{
    d->ctx = EVP_CIPHER_CTX_new();
    d->counter = 0;
    return d->ctx != NULL &&
                   EVP_EncryptInit_ex(d->ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
                   EVP_CIPHER_CTX_ctrl(d->ctx, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1 &&
                   EVP_EncryptInit_ex(d->ctx, NULL, NULL, key, NULL) == 1
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
    if (dir_init(&c->tx, connector ? hs->key_c2a : hs->key_a2c) != 0 ||
        dir_init(&c->rx, connector ? hs->key_a2c : hs->key_c2a) != 0) {
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

/* GMAC of hdr (header and counter) and payload, the counter as the nonce. */
static int tag_of(mac_dir_t *d, uint64_t counter, const unsigned char *hdr, const void *payload,
                  size_t len, unsigned char tag[RING_FRAME_MAC_TAG_BYTES])
{
    unsigned char iv[12] = {0}, none[16];
    const unsigned char *p = payload;
    int outl;

    le_put64(iv + 4, counter);
    if (EVP_EncryptInit_ex(d->ctx, NULL, NULL, NULL, iv) != 1 ||
        EVP_EncryptUpdate(d->ctx, NULL, &outl, hdr, RING_FRAME_BYTES + 8) != 1)
        return -1;
    while (len > 0) { /* EVP takes int lengths */
        int part = len > INT_MAX / 2 ? INT_MAX / 2 : (int)len;

        if (EVP_EncryptUpdate(d->ctx, NULL, &outl, p, part) != 1)
            return -1;
        p += part;
        len -= (size_t)part;
    }
    if (EVP_EncryptFinal_ex(d->ctx, none, &outl) != 1 ||
        EVP_CIPHER_CTX_ctrl(d->ctx, EVP_CTRL_GCM_GET_TAG, RING_FRAME_MAC_TAG_BYTES, tag) != 1)
        return -1;
    return 0;
}

int ring_frame_macs_seal(ring_frame_macs_t *t, const ring_tp_ep_t *ep, unsigned char *hdr,
                         const void *payload, size_t len)
{
    mac_conn_t *c = find(t, ep);

    if (c == NULL)
        return -1;
    le_put64(hdr + RING_FRAME_BYTES, ++c->tx.counter);
    return tag_of(&c->tx, c->tx.counter, hdr, payload, len, hdr + RING_FRAME_BYTES + 8);
}

int ring_frame_macs_open(ring_frame_macs_t *t, const ring_tp_ep_t *ep, const unsigned char *hdr,
                         const void *payload, size_t len)
{
    mac_conn_t *c = find(t, ep);
    unsigned char tag[RING_FRAME_MAC_TAG_BYTES];
    uint64_t counter = le_get64(hdr + RING_FRAME_BYTES);

    if (c == NULL || counter <= c->rx.counter ||
        tag_of(&c->rx, counter, hdr, payload, len, tag) != 0 ||
        CRYPTO_memcmp(tag, hdr + RING_FRAME_BYTES + 8, sizeof(tag)) != 0)
        return -1;
    c->rx.counter = counter;
    return 0;
}
