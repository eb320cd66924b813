/*
 * store_server.c - the tcp store's server (wire format: store.h): one
 * thread, one poll() loop over the listening socket, the clients and a
 * pipe that stops it. A get for a missing key is parked until a set makes
 * it; a client that sends what is not a ringd store request is answered
 * with an error and dropped, and the server goes on.
 *
 * Keys are few (a handful per peer) and looked up by a linear search.
 *
 * Bounded, since anyone may connect: at most 2 x world + 16 clients (beyond,
 * the oldest that has not proven itself is dropped, so idle strangers cannot
 * lock a peer out), 10 s to say hello (or prove the secret), 300 s
 * idle after it, 1 MiB of replies queued per client, 4 x world + 64 keys. Once
 * every peer's client said hello and left (the ring is up everywhere), the
 * server stops listening and ends.
 */
#include "ring_build.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "errors.h"
#include "le.h"
#include "log.h"
#include "magic.h"
#include "store.h"
#include "store_proto.h"

#define HELLO_DEADLINE_S 10.0
#define IDLE_S 300.0
#define OUT_MAX (1u << 20)

typedef struct kv {
    char *key, *value;
    unsigned long setter; /* the client that set it: no other may overwrite it */
} kv_t;

typedef struct client {
    int fd;
    unsigned long id;           /* unique for the server's life */
    int hello;                  /* its hello named our job */
    unsigned char *in;          /* request bytes received so far */
    size_t in_len, in_cap;
    unsigned char *out;         /* reply bytes not yet sent */
    size_t out_len, out_cap;
    char *waiting;              /* key of a parked get, or NULL */
    int closing;                /* drop once out is sent */
    int auth_phase;             /* with a secret: 0 challenge due, 1 proof due, 2 proven */
    double since, last_active;  /* ring_now() of its accept, of its last request bytes */
    ring_auth_hs_t *hs;         /* the handshake while it runs (auth.h), then NULL */
} client_t;

struct ring_store_server {
    pthread_t thread;
    int running;                /* the thread runs (not so for ring_store_server_new's) */
    int listen_fd, stop_pipe[2];
    char job[RING_STORE_KEY_MAX + 1];
    ring_auth_key_t key;        /* key.on: clients must prove the secret first */
    ring_auth_party_t party;    /* the store's side of the handshake: no rank, any caller */
    int world;                  /* peers of the job: bounds, and when to stop */
    size_t max_clients, max_keys;
    int departed;               /* clients that said hello and then left */
    unsigned long evicted;      /* unproven clients dropped to make room */
    kv_t *kv;
    size_t nkv, kv_cap;
    client_t *clients;
    size_t nclients, clients_cap;
    unsigned long next_id;
    struct pollfd *pfd;         /* the loop's poll set */
    size_t pfd_cap;
    char stop_why[1024];        /* told to the clients still waiting when it stops */
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    size_t cap2 = *cap ? *cap : 16;
    void *q;

    if (need <= *cap)
        return 0;
    while (cap2 < need)
        cap2 *= 2;
    q = realloc(*p, cap2 * elem);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = cap2;
    return 0;
}

static void send_raw(client_t *c, const void *data, size_t len)
{
    if (grow((void **)&c->out, &c->out_cap, c->out_len + len, 1) != 0) {
        c->closing = 1;
        return;
    }
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
}

static void reply(client_t *c, char status, const char *data, size_t len)
{
    unsigned char hdr[RING_STORE_REP_HDR];

    ring_store_rep_encode(status, (uint32_t)len, hdr);
    send_raw(c, hdr, sizeof(hdr));
    send_raw(c, data, len);
}

static void reply_error(client_t *c, const char *msg)
{
    reply(c, 'E', msg, strlen(msg));
    c->closing = 1;
}

static kv_t *kv_find(ring_store_server_t *srv, const char *key)
{
    for (size_t i = 0; i < srv->nkv; i++)
        if (strcmp(srv->kv[i].key, key) == 0)
            return &srv->kv[i];
    return NULL;
}

/* 0, -1 out of memory, -2 the key is another client's, -3 the store is full */
static int kv_set(ring_store_server_t *srv, unsigned long setter, const char *key,
                  const char *value)
{
    kv_t *e = kv_find(srv, key);
    char *v;

    if (e != NULL && e->setter != setter)
        return -2;
    if (e == NULL && srv->nkv >= srv->max_keys)
        return -3;
    v = strdup(value);
    if (v == NULL)
        return -1;
    if (e == NULL) {
        if (grow((void **)&srv->kv, &srv->kv_cap, srv->nkv + 1, sizeof(kv_t)) != 0 ||
            (srv->kv[srv->nkv].key = strdup(key)) == NULL) {
            free(v);
            return -1;
        }
        e = &srv->kv[srv->nkv++];
    } else {
        free(e->value);
    }
    e->value = v;
    e->setter = setter;
    /* answer every get parked on this key */
    for (size_t i = 0; i < srv->nclients; i++) {
        client_t *c = &srv->clients[i];
        if (c->waiting != NULL && strcmp(c->waiting, key) == 0) {
            reply(c, 'V', v, strlen(v));
            free(c->waiting);
            c->waiting = NULL;
        }
    }
    return 0;
}

/* Handle one complete request: op, NUL-terminated key and value. */
static void handle(ring_store_server_t *srv, client_t *c, char op, char *key, char *value)
{
    kv_t *e;
    char msg[RING_STORE_KEY_MAX * 2 + 128];

    if (op == 'H') {
        if (strcmp(key, srv->job) != 0) {
            /* the store's own job id is not told: the client may be anyone */
            snprintf(msg, sizeof(msg), "this peer's job id '%s' is not the job this store "
                     "serves: every peer of a job needs the same --job-id (RING_JOB_ID)", key);
            reply_error(c, msg);
            return;
        }
        c->hello = 1;
        reply(c, 'O', "", 0);
        return;
    }
    if (!c->hello) {
        reply_error(c, "a ringd store client must say hello first");
        return;
    }
    switch (op) {
    case 'S':
        switch (kv_set(srv, c->id, key, value)) {
        case 0:
            reply(c, 'O', "", 0);
            break;
        case -2:
            snprintf(msg, sizeof(msg), "key '%s' was already set by another client", key);
            reply(c, 'E', msg, strlen(msg)); /* the client may go on; this set failed */
            break;
        case -3:
            snprintf(msg, sizeof(msg), "the store holds its maximum of %zu keys (4 x the world "
                     "size + 64): clients that are not this job's peers filled it? Give every "
                     "peer the same --secret-file (RING_SECRET_FILE), so only peers may set "
                     "keys", srv->max_keys);
            reply(c, 'F', msg, strlen(msg));
            c->closing = 1;
            break;
        default:
            reply_error(c, "the store is out of memory");
        }
        return;
    case 'G':
        e = kv_find(srv, key);
        if (e != NULL) {
            reply(c, 'V', e->value, strlen(e->value));
        } else {
            free(c->waiting);
            c->waiting = strdup(key);
            if (c->waiting == NULL)
                reply_error(c, "the store is out of memory");
        }
        return;
    case 'C':
        reply(c, kv_find(srv, key) != NULL ? 'O' : 'N', "", 0);
        return;
    default:
        snprintf(msg, sizeof(msg), "unknown request 0x%02x", (unsigned char)op);
        reply_error(c, msg);
    }
}

/* A client that fails to prove the secret is dropped and told nothing. */
static void auth_drop(client_t *c, const char *why)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[64] = "?", port[16] = "?";

    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0)
        (void)getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port, sizeof(port),
                          NI_NUMERICHOST | NI_NUMERICSERV);
    ring_log_security("rendezvous store: refused a client from %s port %s: it %s; closed it, "
                      "told it nothing", host, port, why);
    c->in_len = 0;
    c->closing = 1;
}

/* Turn c away before its handshake, with a reason (store.h), then close. */
static void refuse(client_t *c, uint32_t why)
{
    unsigned char msg[RING_STORE_REFUSE_BYTES];

    le_put32(msg, RING_STORE_REFUSE_MAGIC);
    le_put32(msg + 4, why);
    send_raw(c, msg, sizeof(msg));
    c->closing = 1;
}

static void client_hs_free(client_t *c)
{
    if (c->hs != NULL) {
        ring_auth_hs_wipe(c->hs);
        free(c->hs);
        c->hs = NULL;
    }
}

/* auth.h's handshake as the acceptor, on the bytes c sent so far: the offset
 * of the first request byte once c has proven the secret, else -1 (more
 * bytes needed, or c is being dropped). */
static long client_authenticate(ring_store_server_t *srv, client_t *c)
{
    unsigned char out[RING_AUTH_CHALLENGE_BYTES];
    unsigned version;

    if (c->auth_phase == 0) {
        if (c->in_len >= 4 && ring_auth_other_version(c->in, c->in_len, &version)) {
            auth_drop(c, "speaks another version of ringd's authentication (another ringd "
                         "release)");
            return -1;
        }
        if (c->in_len < RING_AUTH_CHALLENGE_BYTES)
            return -1;
        c->hs = calloc(1, sizeof(*c->hs));
        if (c->hs == NULL || ring_auth_hs_start(c->hs, &srv->party, 1, NULL) != 0 ||
            ring_auth_hs_challenge(c->hs, c->in, RING_AUTH_CHALLENGE_BYTES, out) != 0) {
            if (c->hs != NULL && c->hs->wrong_job) /* a peer of another job: say so */
                refuse(c, RING_STORE_REFUSE_JOB);
            auth_drop(c, c->hs == NULL ? "could not be served (out of memory)"
                         : c->hs->why[0] != '\0' ? c->hs->why
                         : "sent no authentication challenge (no secret, or not a ringd peer)");
            client_hs_free(c);
            return -1;
        }
        send_raw(c, out, sizeof(out));
        c->auth_phase = 1;
    }
    if (c->in_len < RING_AUTH_CHALLENGE_BYTES + RING_AUTH_PROOF_BYTES)
        return -1;
    if (ring_auth_hs_proof(c->hs, c->in + RING_AUTH_CHALLENGE_BYTES, RING_AUTH_PROOF_BYTES,
                           out) != 0) {
        auth_drop(c, c->hs->why);
        client_hs_free(c);
        return -1;
    }
    send_raw(c, out, RING_AUTH_PROOF_BYTES);
    client_hs_free(c);
    c->auth_phase = 2;
    return RING_AUTH_CHALLENGE_BYTES + RING_AUTH_PROOF_BYTES;
}

/* Take every complete request out of c->in. */
static void parse_requests(ring_store_server_t *srv, client_t *c)
{
    size_t off = 0;

    if (c->closing) {
        /* it is dropped once its replies are out: what it sends meanwhile is not
         * read, nor kept (a client that reads nothing must not grow c->in) */
        c->in_len = 0;
        return;
    }
    if (srv->key.on && c->auth_phase < 2) {
        long start = client_authenticate(srv, c);

        if (start < 0)
            return;
        off = (size_t)start;
    }
    while (!c->closing) {
        ring_store_req_t r;
        long used = ring_store_req_decode(c->in + off, c->in_len - off, &r);
        char *key, *value;

        if (used < 0) {
            ring_log(RING_LOG_WARN, "rendezvous store: dropping a client that sent something "
                     "other than a ringd store request");
            reply_error(c, "not a ringd store request");
            break;
        }
        if (used == 0)
            break;
        key = strndup((const char *)r.key, r.klen);
        value = strndup((const char *)r.value, r.vlen);
        if (key == NULL || value == NULL)
            reply_error(c, "the store is out of memory");
        else
            handle(srv, c, r.op, key, value);
        free(key);
        free(value);
        off += (size_t)used;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
}

static void client_drop(ring_store_server_t *srv, size_t i)
{
    client_t *c = &srv->clients[i];

    srv->departed += c->hello;
    client_hs_free(c);
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c->waiting);
    srv->clients[i] = srv->clients[--srv->nclients];
}

/* Read what c sent, answer it, send what is pending: 0, or -1 to drop it. */
static int client_io(ring_store_server_t *srv, client_t *c, short revents)
{
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n;

        if (grow((void **)&c->in, &c->in_cap, c->in_len + 4096, 1) != 0)
            return -1;
        n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return -1;
        if (n > 0) {
            c->in_len += (size_t)n;
            c->last_active = ring_now();
            parse_requests(srv, c);
            if (c->out_len > OUT_MAX) {
                ring_log(RING_LOG_WARN, "rendezvous store: a client left over %u bytes of "
                         "replies unread; dropped it", OUT_MAX);
                return -1;
            }
        }
    }
    if (c->out_len > 0) {
        ssize_t n = send(c->fd, c->out, c->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (n > 0) {
            memmove(c->out, c->out + n, c->out_len - (size_t)n);
            c->out_len -= (size_t)n;
        }
    }
    return c->closing && c->out_len == 0 ? -1 : 0;
}

/* Stopping: a client still waiting for a key hears why (rank 0 gave up),
 * instead of a bare closed connection. At most a second, then close. */
static void server_tell_waiters(ring_store_server_t *srv)
{
    double end;
    struct timespec ts;

    if (srv->stop_why[0] == '\0')
        return;
    for (size_t i = 0; i < srv->nclients; i++)
        if (srv->clients[i].waiting != NULL)
            reply(&srv->clients[i], 'E', srv->stop_why, strlen(srv->stop_why));
    clock_gettime(CLOCK_MONOTONIC, &ts);
    end = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + 1.0;
    for (;;) {
        size_t pending = 0;
        for (size_t i = 0; i < srv->nclients; i++)
            if (srv->clients[i].out_len > 0 && client_io(srv, &srv->clients[i], 0) == 0)
                pending += srv->clients[i].out_len > 0;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if (pending == 0 || (double)ts.tv_sec + ts.tv_nsec * 1e-9 > end)
            break;
        poll(NULL, 0, 10);
    }
}

/* A client that has not proven itself yet (the secret, or without one its hello). */
static int client_unproven(const ring_store_server_t *srv, const client_t *c)
{
    return !c->closing && (srv->key.on ? c->auth_phase < 2 : !c->hello);
}

/* Which unproven client to drop first: a's rank before b's. One that has not
 * begun the handshake (a silent socket, or one whose challenge is not read
 * yet) before one mid-way (its challenge answered: a real peer is there for
 * one round trip); the oldest first within each. */
static int client_drop_first(const client_t *a, const client_t *b)
{
    if (a->auth_phase != b->auth_phase)
        return a->auth_phase < b->auth_phase;
    return a->since < b->since;
}

/*
 * A connected client: 0, or -1 when it is turned away (fd is closed). At its
 * maximum of clients the server drops the oldest that has not proven itself
 * (as the ring's listener does: a real peer proves itself in a millisecond,
 * so a few silent sockets cannot lock it out), preferring one that has not
 * begun the handshake; the one dropped hears "RNGR" BUSY (store.h: where its
 * challenge or proof is due) and connects again. Only when every client has
 * proven itself is the newcomer turned away.
 */
static int server_add_client(ring_store_server_t *srv, int fd)
{
    int one = 1;

    if (srv->nclients >= srv->max_clients) {
        size_t oldest = srv->nclients;

        for (size_t i = 0; i < srv->nclients; i++)
            if (client_unproven(srv, &srv->clients[i]) &&
                (oldest == srv->nclients ||
                 client_drop_first(&srv->clients[i], &srv->clients[oldest])))
                oldest = i;
        if (oldest == srv->nclients) {
            client_t c = {.fd = fd};

            ring_log_security("rendezvous store: %zu clients, all of them proven; turned a "
                              "newcomer away", srv->nclients);
            refuse(&c, RING_STORE_REFUSE_BUSY);
            (void)send(fd, c.out, c.out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
            free(c.out);
            close(fd);
            return -1;
        }
        srv->evicted++;
        ring_log_security("rendezvous store: at its maximum of %zu clients; dropped the oldest "
                          "that had not proven itself (%lu so far) to let a newcomer in",
                          srv->max_clients, srv->evicted);
        {
            /* after what it was sent so far (the store's challenge, maybe), as
             * much as the socket takes now: it is closed either way */
            client_t *c = &srv->clients[oldest];

            refuse(c, RING_STORE_REFUSE_BUSY);
            if (c->out_len > 0)
                (void)send(c->fd, c->out, c->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        client_drop(srv, oldest);
    }
    /* replies are small and must not wait for the client's delayed ACK */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (grow((void **)&srv->clients, &srv->clients_cap, srv->nclients + 1,
             sizeof(client_t)) != 0) {
        close(fd);
        return -1;
    }
    srv->clients[srv->nclients++] = (client_t){.fd = fd, .id = ++srv->next_id,
                                               .since = ring_now(),
                                               .last_active = ring_now()};
    return 0;
}

/* One turn of the server's loop, waiting at most timeout_ms for something to
 * happen: 0, or 1 when the server ends (stopped, or every peer came and left). */
static int server_turn(ring_store_server_t *srv, int timeout_ms)
{
    size_t n = srv->nclients;
    struct pollfd *pfd;

    if (grow((void **)&srv->pfd, &srv->pfd_cap, n + 2, sizeof(*srv->pfd)) != 0)
        return 1;
    pfd = srv->pfd;
    /* (a server of ring_store_server_new has neither: poll skips fd -1) */
    pfd[0] = (struct pollfd){.fd = srv->stop_pipe[0], .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = srv->listen_fd, .events = POLLIN};
    for (size_t i = 0; i < n; i++)
        pfd[i + 2] = (struct pollfd){.fd = srv->clients[i].fd,
                                     .events = (short)(POLLIN |
                                                       (srv->clients[i].out_len ? POLLOUT : 0))};
    if (poll(pfd, n + 2, timeout_ms) < 0 && errno != EINTR)
        return 1;
    if (pfd[0].revents)
        return 1;
    /* clients first: dropping one moves the last into its place */
    for (size_t i = n; i-- > 0;)
        if (pfd[i + 2].revents != 0 &&
            client_io(srv, &srv->clients[i], pfd[i + 2].revents) != 0)
            client_drop(srv, i);
    /* a set may have answered parked gets of other clients: send those too */
    for (size_t i = srv->nclients; i-- > 0;)
        if (srv->clients[i].out_len > 0 && client_io(srv, &srv->clients[i], 0) != 0)
            client_drop(srv, i);
    /* strangers that never say hello, and clients gone quiet, make room */
    for (size_t i = srv->nclients; i-- > 0;) {
        client_t *c = &srv->clients[i];
        double now = ring_now();

        if ((!c->hello && now - c->since > HELLO_DEADLINE_S) ||
            (c->hello && c->waiting == NULL && c->out_len == 0 &&
             now - c->last_active > IDLE_S))
            client_drop(srv, i);
    }
    /* every peer said hello and left: the ring is up everywhere, nobody needs us */
    if (srv->world > 0 && srv->departed >= srv->world) {
        if (srv->listen_fd >= 0)
            close(srv->listen_fd);
        srv->listen_fd = -1;
        return 1;
    }
    if (pfd[1].revents & POLLIN) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd >= 0)
            (void)server_add_client(srv, fd);
    }
    return 0;
}

static void *server_main(void *arg)
{
    ring_store_server_t *srv = arg;

    while (server_turn(srv, 1000) == 0)
        ;
    server_tell_waiters(srv);
    return NULL;
}

/* Listen on host's address when the URL gives a numeric one of this machine
 * (tcp://127.0.0.1 serves loopback only), or "localhost"; -2 for a name (it
 * may resolve to 127.0.1.1 here and to the real address elsewhere) or an
 * address not of this machine (NAT, a virtual address): then every address. */
static int server_listen_host(const char *host, int port, int *err)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_NUMERICHOST};
    struct addrinfo *res = NULL;
    char service[16];
    int one = 1, fd = -2;

    snprintf(service, sizeof(service), "%d", port);
    if (host != NULL && strcmp(host, "localhost") == 0)
        host = "127.0.0.1";
    if (host == NULL || host[0] == '\0' || getaddrinfo(host, service, &hints, &res) != 0)
        return -2;
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
            *err = errno;
            close(fd);
            fd = *err == EADDRNOTAVAIL ? -2 : -1;
        }
    } else {
        *err = errno;
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* Listen on port of every address: IPv6 with IPv4 mapped, or IPv4 alone. */
static int server_listen(int port, int *err)
{
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                              .sin6_addr = IN6ADDR_ANY_INIT};
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_ANY)};
    int one = 1, zero = 0, fd;

    fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0) {
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0 && listen(fd, 1024) == 0)
            return fd;
        *err = errno;
        close(fd);
        if (*err == EADDRINUSE)
            return -1;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) == 0 && listen(fd, 1024) == 0)
        return fd;
    *err = errno;
    close(fd);
    return -1;
}

ring_status_t ring_store_server_new(const char *job, int world, const ring_auth_key_t *key,
                                    ring_store_server_t **srv_p)
{
    ring_store_server_t *srv = calloc(1, sizeof(*srv));

    if (srv == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the rendezvous store");
    snprintf(srv->job, sizeof(srv->job), "%s", job);
    if (key != NULL)
        srv->key = *key;
    /* the store has no rank, and serves whoever proves the secret for it */
    ring_auth_party_init(&srv->party, &srv->key, job, RING_AUTH_FOR_STORE, RING_AUTH_NO_RANK,
                         RING_AUTH_NO_RANK);
    /* elastic (world < 0): peers join later, so it never stops on its own, and it
     * holds room for four times as many (each join leaves two keys) */
    srv->world = world;
    if (world < 0)
        world = -4 * world;
    srv->max_clients = 2 * (size_t)(world > 0 ? world : 1) + 16;
    srv->max_keys = 4 * (size_t)(world > 0 ? world : 1) + 64;
    srv->listen_fd = srv->stop_pipe[0] = srv->stop_pipe[1] = -1;
    *srv_p = srv;
    return RING_OK;
}

int ring_store_server_add(ring_store_server_t *srv, int fd)
{
    return server_add_client(srv, fd);
}

int ring_store_server_turn(ring_store_server_t *srv, int timeout_ms)
{
    return server_turn(srv, timeout_ms);
}

ring_status_t ring_store_server_start(const char *host, int port, const char *job, int world,
                                      const ring_auth_key_t *key, ring_store_server_t **srv_p)
{
    ring_store_server_t *srv;
    int err = 0;

    RING_CHECK(ring_store_server_new(job, world, key, &srv));
    srv->listen_fd = server_listen_host(host, port, &err);
    if (srv->listen_fd == -2)
        srv->listen_fd = server_listen(port, &err);
    if (srv->listen_fd < 0) {
        free(srv);
        return ring_error_set(RING_ERR_IO, "rank 0 cannot serve the rendezvous store on port "
                              "%d: %s%s", port, strerror(err), err == EADDRINUSE
                              ? " (another job or program has it: choose another port in "
                                "RING_RENDEZVOUS=tcp://HOST:PORT or MASTER_PORT)" : "");
    }
    if (pipe2(srv->stop_pipe, O_CLOEXEC) != 0) {
        close(srv->listen_fd);
        free(srv);
        return ring_error_set(RING_ERR_IO, "rendezvous store: pipe: %s", strerror(errno));
    }
    if (pthread_create(&srv->thread, NULL, server_main, srv) != 0) {
        close(srv->listen_fd);
        close(srv->stop_pipe[0]);
        close(srv->stop_pipe[1]);
        free(srv);
        return ring_error_set(RING_ERR_NO_RESOURCE, "rendezvous store: cannot start its thread");
    }
    srv->running = 1;
    *srv_p = srv;
    return RING_OK;
}

void ring_store_server_stop(ring_store_server_t *srv, const char *why)
{
    if (srv == NULL)
        return;
    if (why != NULL)
        snprintf(srv->stop_why, sizeof(srv->stop_why), "rank 0, which serves this store, gave "
                 "up: %s", why);
    if (srv->running) {
        (void)!write(srv->stop_pipe[1], "x", 1);
        pthread_join(srv->thread, NULL);
    } else {
        server_tell_waiters(srv); /* what the thread does as it ends */
    }
    while (srv->nclients > 0)
        client_drop(srv, srv->nclients - 1);
    for (size_t i = 0; i < srv->nkv; i++) {
        free(srv->kv[i].key);
        free(srv->kv[i].value);
    }
    free(srv->kv);
    free(srv->clients);
    free(srv->pfd);
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    if (srv->stop_pipe[0] >= 0) {
        close(srv->stop_pipe[0]);
        close(srv->stop_pipe[1]);
    }
    free(srv);
}
