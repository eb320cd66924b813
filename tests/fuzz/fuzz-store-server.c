/* fuzz-store-server.c - libFuzzer: what clients send the tcp store's server,
 * where anyone may connect (src/store_server.c: client_authenticate,
 * parse_requests, handle, and the request decoder of store_proto.c). The
 * real server runs in this thread (ring_store_server_new, one
 * ring_store_server_turn after each delivery), its clients are socketpairs:
 * no network, no thread.
 *
 * Input: a flags byte (bit 0: the job has a secret; bits 1-2: world size - 1;
 * bit 3: stop the server with a reason, told to clients still waiting), then
 * deliveries: a byte (bits 0-1: which of 4 clients, connected on first use;
 * bit 2: that client then hangs up; bit 3: the harness plays a real peer's
 * handshake for that client: a real challenge when it has sent nothing yet,
 * and once the server's answer is in, the real proof), a length byte and that
 * many bytes, which that client sends.
 *
 * Checked as well as memory: what the server sends a client is, without a
 * secret, a stream of well-formed replies; with one, its challenge and
 * nothing more unless the client proved the secret, then its proof and
 * replies. */
#include "ring_build.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "store.h"
#include "store_proto.h"

#define NCLIENTS 4
#define AUTH_BYTES (RING_AUTH_CHALLENGE_BYTES + RING_AUTH_PROOF_BYTES)

typedef struct fclient {
    int fd;                             /* the client's end, -1 when not connected */
    unsigned char sent[AUTH_BYTES];     /* the first bytes it sent */
    size_t sent_len;
    unsigned char got[AUTH_BYTES];      /* the first bytes the server sent it */
    size_t got_len;
    unsigned char hdr[RING_STORE_REP_HDR]; /* the reply header being read */
    size_t hdr_len, data_left;          /* its bytes so far; data still to come */
    ring_auth_hs_t hs;                  /* the real handshake, when bit 3 started one */
    int real;                           /* its first bytes were the real challenge */
    int proved;                         /* ... and the next the real proof */
} fclient_t;

static ring_auth_key_t key;

/* Whether c sent the connector's proof for its challenge and the server's:
 * only the harness's real handshake can (a forged one would be a finding). */
static int proved(const fclient_t *c)
{
    return c->proved;
}

/* What the server sent c: checked as it comes. */
static void take_replies(fclient_t *c, int secret, const unsigned char *p, size_t n)
{
    while (n > 0) {
        if (secret && c->got_len < AUTH_BYTES) {
            /* nothing past its challenge reaches a client that has not proven the secret */
            if (c->got_len >= RING_AUTH_CHALLENGE_BYTES && !proved(c))
                __builtin_trap();
            c->got[c->got_len++] = *p++;
            n--;
            continue;
        }
        if (c->data_left > 0) {
            size_t k = n < c->data_left ? n : c->data_left;

            c->data_left -= k;
            p += k;
            n -= k;
            continue;
        }
        c->hdr[c->hdr_len++] = *p++;
        n--;
        if (c->hdr_len == RING_STORE_REP_HDR) {
            ring_store_rep_t r;

            /* every reply is one the client accepts (with the largest buffer) */
            if (ring_store_rep_decode(c->hdr, RING_STORE_VALUE_MAX + 1, &r) != 0 ||
                strchr("OVNEF", r.status) == NULL || r.status == '\0')
                __builtin_trap();
            c->data_left = r.len;
            c->hdr_len = 0;
        }
    }
}

static void drain(fclient_t *c, int secret)
{
    unsigned char buf[4096];
    ssize_t n;

    if (c->fd < 0)
        return;
    while ((n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
        take_replies(c, secret, buf, (size_t)n);
}

static void client_send(fclient_t *c, const unsigned char *p, size_t n)
{
    size_t keep = n < AUTH_BYTES - c->sent_len ? n : AUTH_BYTES - c->sent_len;

    memcpy(c->sent + c->sent_len, p, keep);
    c->sent_len += keep;
    while (n > 0) {
        ssize_t k = send(c->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);

        if (k <= 0 && errno != EINTR)
            break;
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fclient_t cl[NCLIENTS];
    ring_store_server_t *srv;
    int secret, ended = 0;
    size_t off = 1;

    if (size < 1 || size > 256 * 1024)
        return 0;
    if (!key.on)
        (void)ring_auth_key_from("fuzzing-secret-0123456789", 25, &key);
    secret = data[0] & 1;
    if (ring_store_server_new("fuzzjob", 1 + ((data[0] >> 1) & 3), secret ? &key : NULL,
                              &srv) != RING_OK)
        return 0;
    memset(cl, 0, sizeof(cl));
    for (int i = 0; i < NCLIENTS; i++)
        cl[i].fd = -1;
    while (!ended && off + 2 <= size) {
        unsigned op = data[off];
        size_t len = data[off + 1];
        fclient_t *c = &cl[op & 3];

        off += 2;
        if (len > size - off)
            len = size - off;
        if (c->fd < 0) {
            int sv[2];

            if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0)
                break;
            memset(c, 0, sizeof(*c));
            c->fd = sv[0];
            if (ring_store_server_add(srv, sv[1]) != 0) { /* full: it closed sv[1] */
                close(sv[0]);
                c->fd = -1;
                off += len;
                continue;
            }
        }
        if ((op & 8) && secret && c->sent_len == 0) {
            ring_auth_party_t me;
            unsigned char ch[RING_AUTH_CHALLENGE_BYTES];

            ring_auth_party_init(&me, &key, "fuzzjob", RING_AUTH_FOR_STORE, RING_AUTH_NO_RANK,
                                 RING_AUTH_NO_RANK);
            if (ring_auth_hs_start(&c->hs, &me, 0, ch) == 0) {
                c->real = 1;
                client_send(c, ch, sizeof(ch));
                ended = ring_store_server_turn(srv, 0);
                drain(c, secret);
                if (ended)
                    break;
                off += len; /* the delivery's bytes are dropped: they would spoil the proof */
                continue;
            }
        }
        client_send(c, data + off, len);
        off += len;
        ended = ring_store_server_turn(srv, 0);
        drain(c, secret);
        if ((op & 8) && !ended && secret && c->real && !c->proved &&
            c->sent_len == RING_AUTH_CHALLENGE_BYTES && c->got_len >= RING_AUTH_CHALLENGE_BYTES) {
            unsigned char proof[RING_AUTH_PROOF_BYTES];

            if (ring_auth_hs_challenge(&c->hs, c->got, RING_AUTH_CHALLENGE_BYTES, proof) == 0) {
                c->proved = 1;
                client_send(c, proof, sizeof(proof));
                ended = ring_store_server_turn(srv, 0);
                drain(c, secret);
            }
        }
        /* a set may have answered other clients' parked gets */
        for (int i = 0; i < NCLIENTS; i++)
            drain(&cl[i], secret);
        if (op & 4) {
            close(c->fd);
            c->fd = -1;
            if (!ended)
                ended = ring_store_server_turn(srv, 0);
        }
    }
    ring_store_server_stop(srv, (data[0] & 8) ? "the fuzzer stopped it" : NULL);
    for (int i = 0; i < NCLIENTS; i++) {
        drain(&cl[i], secret);
        if (cl[i].fd >= 0)
            close(cl[i].fd);
    }
    return 0;
}
