/*
 * auth.c - the per-job secret (auth.h's K) and one connection's handshake
 * over a transport endpoint, without blocking: auth_handshake.c decides,
 * this file moves its messages. The key is libcrypto's HMAC-SHA-256 of the secret.
 */
#include "ring_build.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "auth.h"
#include "errors.h"
#include "le.h"
#include "magic.h"

static const char KEY_LABEL[] = "ringd-auth key v1";

ring_status_t ring_auth_key_from(const void *secret, size_t len, ring_auth_key_t *key)
{
    unsigned int n = sizeof(key->k);

    memset(key, 0, sizeof(*key));
    if (len < RING_AUTH_SECRET_MIN)
        return ring_error_set(RING_ERR_INVALID,
                              "the job's secret is %zu bytes; it needs at least %d (e.g. "
                              "head -c 32 /dev/urandom | base64 > FILE, then --secret-file FILE)",
                              len, RING_AUTH_SECRET_MIN);
    if (HMAC(EVP_sha256(), secret, (int)len, (const unsigned char *)KEY_LABEL,
             sizeof(KEY_LABEL) - 1, key->k, &n) == NULL || n != sizeof(key->k))
        return ring_error_set(RING_ERR_INTERNAL, "HMAC-SHA-256 failed in libcrypto");
    key->on = 1;
    return RING_OK;
}

static ring_status_t key_from_file(const char *path, ring_auth_key_t *key)
{
    unsigned char buf[RING_AUTH_SECRET_MAX + 1];
    ssize_t got;
    size_t len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ring_status_t st;

    if (fd < 0)
        return ring_error_set(RING_ERR_INVALID, "--secret-file %s: %s", path, strerror(errno));
    while (len < sizeof(buf) && (got = read(fd, buf + len, sizeof(buf) - len)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = errno;
            close(fd);
            return ring_error_set(RING_ERR_INVALID, "--secret-file %s: %s", path, strerror(e));
        }
        len += (size_t)got;
    }
    close(fd);
    if (len > RING_AUTH_SECRET_MAX)
        return ring_error_set(RING_ERR_INVALID, "--secret-file %s: longer than %d bytes: is it "
                              "the right file?", path, RING_AUTH_SECRET_MAX);
    /* `echo s3cret > FILE` and RING_SECRET=s3cret give the same key */
    if (len > 0 && buf[len - 1] == '\n')
        len--;
    st = ring_auth_key_from(buf, len, key);
    OPENSSL_cleanse(buf, sizeof(buf));
    if (st != RING_OK)
        return ring_error_set(st, "--secret-file %s: %s", path, ring_last_error());
    return RING_OK;
}

ring_status_t ring_auth_key_load(const ring_config_t *cfg, ring_auth_key_t *key)
{
    memset(key, 0, sizeof(*key));
    if (cfg->secret_file[0] != '\0' && cfg->secret[0] != '\0')
        return ring_error_set(RING_ERR_INVALID, "both --secret-file and --secret "
                              "(RING_SECRET_FILE, RING_SECRET) are set: give one");
    if (cfg->secret_file[0] != '\0')
        return key_from_file(cfg->secret_file, key);
    if (cfg->secret[0] != '\0') {
        ring_status_t st = ring_auth_key_from(cfg->secret, strlen(cfg->secret), key);
        return st == RING_OK ? st : ring_error_set(st, "RING_SECRET: %s", ring_last_error());
    }
    return RING_OK;
}


/* ---- one connection's exchange ------------------------------------------------ */

enum { WAIT_CHALLENGE, WAIT_PROOF, SUCCEEDED, FAILED };

static void req_set(ring_tp_req_t *req, void *buf, size_t len)
{
    memset(req, 0, sizeof(*req));
    req->iov[0].iov_base = buf;
    req->iov[0].iov_len = len;
    req->iovcnt = 1;
}

static ring_auth_state_t fail(ring_auth_t *a, const char *why)
{
    snprintf(a->why, sizeof(a->why), "%s", why);
    a->phase = FAILED;
    ring_auth_hs_wipe(&a->hs);
    return RING_AUTH_FAILED;
}

/* A request failed because the endpoint did (a verbs bootstrap that found the
 * secrets differ, say): the transport's own words, when it has some. */
static const char *ep_words(const ring_auth_t *a, const ring_tp_req_t *r)
{
    const char *text = r->status == RING_ERR_PROTOCOL && a->ops->ep_error != NULL
                           ? a->ops->ep_error(a->ep) : NULL;

    return text != NULL && text[0] != '\0' ? text : NULL;
}

ring_status_t ring_auth_begin(ring_auth_t *a, const ring_auth_party_t *me,
                              const ring_tp_ops_t *ops, ring_tp_ep_t *ep, int acceptor)
{
    memset(a, 0, sizeof(*a));
    a->ops = ops;
    a->ep = ep;
    a->acceptor = acceptor;
    if (ring_auth_hs_start(&a->hs, me, acceptor, a->out_challenge) != 0)
        return ring_error_set(RING_ERR_INTERNAL, "authentication: %s", a->hs.why);
    /* the connector speaks first; the acceptor answers only what it is asked */
    if (!acceptor) {
        req_set(&a->s_challenge, a->out_challenge, sizeof(a->out_challenge));
        (void)ops->post_send(ep, &a->s_challenge);
    }
    req_set(&a->r_challenge, a->in_challenge, sizeof(a->in_challenge));
    (void)ops->post_recv(ep, &a->r_challenge);
    a->phase = WAIT_CHALLENGE;
    return RING_OK;
}

static ring_auth_state_t got_challenge(ring_auth_t *a)
{
    ring_tp_req_t *r = &a->r_challenge;

    /* a hello is larger than a challenge: its receive fails with MISMATCH, filled */
    if ((r->status == RING_OK || r->status == RING_ERR_MISMATCH) && r->bytes >= 4 &&
        le_get32(a->in_challenge) == RING_HELLO_MAGIC)
        return fail(a, "sent a ringd hello without authenticating: it runs without a secret "
                       "(give every peer the same --secret-file)");
    if (r->status != RING_OK && r->status != RING_ERR_MISMATCH && ep_words(a, r) != NULL)
        return fail(a, ep_words(a, r));
    if (r->status != RING_OK && r->status != RING_ERR_MISMATCH) {
        a->unreachable = !a->acceptor && (r->sys_errno == ECONNREFUSED ||
                                          r->sys_errno == EHOSTUNREACH ||
                                          r->sys_errno == ENETUNREACH ||
                                          r->sys_errno == ETIMEDOUT);
        return fail(a, a->acceptor ? "closed before authenticating"
                                   : "closed the connection without answering the challenge "
                                     "(does it run without a secret, or did it refuse this "
                                     "connection as meant for another rank?)");
    }
    if (ring_auth_hs_challenge(&a->hs, a->in_challenge, r->bytes,
                               a->acceptor ? a->out_challenge : a->out_proof) != 0) {
        a->bad_message = 1;
        return fail(a, a->hs.why);
    }
    if (a->acceptor) {
        req_set(&a->s_challenge, a->out_challenge, sizeof(a->out_challenge));
        (void)a->ops->post_send(a->ep, &a->s_challenge);
    } else {
        req_set(&a->s_proof, a->out_proof, sizeof(a->out_proof));
        (void)a->ops->post_send(a->ep, &a->s_proof);
    }
    req_set(&a->r_proof, a->in_proof, sizeof(a->in_proof));
    (void)a->ops->post_recv(a->ep, &a->r_proof);
    a->phase = WAIT_PROOF;
    return RING_AUTH_PENDING;
}

static ring_auth_state_t got_proof(ring_auth_t *a)
{
    ring_tp_req_t *r = &a->r_proof;

    if (r->status != RING_OK && r->status != RING_ERR_MISMATCH && ep_words(a, r) != NULL)
        return fail(a, ep_words(a, r));
    if (r->status != RING_OK && r->status != RING_ERR_MISMATCH) {
        /* an acceptor that closes after our proof found it wrong */
        a->refused = !a->acceptor;
        return fail(a, a->acceptor ? "closed before proving the secret"
                                   : "refused this peer's proof: the secrets differ");
    }
    if (ring_auth_hs_proof(&a->hs, a->in_proof, r->bytes, a->out_proof) != 0) {
        a->bad_message = 1;
        return fail(a, a->hs.why);
    }
    if (a->acceptor) {
        req_set(&a->s_proof, a->out_proof, sizeof(a->out_proof));
        (void)a->ops->post_send(a->ep, &a->s_proof);
    }
    a->phase = SUCCEEDED;
    return RING_AUTH_DONE;
}

ring_auth_state_t ring_auth_step(ring_auth_t *a)
{
    if (a->phase == WAIT_CHALLENGE && a->r_challenge.done)
        return got_challenge(a);
    if (a->phase == WAIT_PROOF && a->r_proof.done)
        return got_proof(a);
    return a->phase == SUCCEEDED ? RING_AUTH_DONE
           : a->phase == FAILED  ? RING_AUTH_FAILED
                                 : RING_AUTH_PENDING;
}
