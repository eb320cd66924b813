/*
 * store_tcp.c - the client of the tcp store (wire format: store.h). One
 * blocking socket; every read and write waits in poll() no longer than the
 * caller's deadline.
 */
#include "ring_build.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "auth.h"
#include "errors.h"
#include "le.h"
#include "store.h"
#include "store_proto.h"

typedef struct store_tcp {
    ring_store_t base;
    int fd;
    double op_timeout; /* for set and check, which the server answers at once */
    uint32_t refused;  /* the reason of an "RNGR" the store sent where a reply was due, or 0 */
} store_tcp_t;

/* Move len bytes in or out before deadline: 0, or -1 with errno (ETIMEDOUT, or 0 = closed). */
static int io_all(int fd, void *buf, size_t len, int out, double deadline)
{
    unsigned char *p = buf;

    while (len > 0) {
        struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        double left = deadline - ring_now();
        ssize_t n;

        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (poll(&pfd, 1, left > 1.0 ? 1000 : (int)(left * 1000) + 1) < 0 && errno != EINTR)
            return -1;
        if (pfd.revents == 0)
            continue;
        n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n == 0) {
            errno = 0;
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static ring_status_t io_error(store_tcp_t *st, const char *what)
{
    if (errno == ETIMEDOUT)
        return RING_ERR_TIMED_OUT;
    return ring_error_set(RING_ERR_IO, "rendezvous store %s: %s: %s", st->base.where, what,
                          errno == 0 ? "the store closed the connection (did rank 0 exit?)"
                                     : strerror(errno));
}

_Static_assert(RING_AUTH_PROOF_BYTES >= RING_STORE_REFUSE_BYTES &&
                   RING_STORE_REP_HDR >= RING_STORE_REFUSE_BYTES,
               "a refusal fits where a proof or a reply is due");

/* The store's "RNGR" (store.h), read where its challenge, its proof or (without
 * a secret) the hello's reply was due: an error naming the reason. */
static ring_status_t refused_error(store_tcp_t *st, uint32_t why)
{
    st->refused = why;
    if (why == RING_STORE_REFUSE_JOB)
        return ring_error_set(RING_ERR_MISMATCH, "rendezvous store %s serves another job: every "
                              "peer of a job needs the same --job-id (RING_JOB_ID)",
                              st->base.where);
    return ring_error_set(RING_ERR_NO_RESOURCE, "rendezvous store %s turned this peer away: it "
                          "holds its maximum of connections (strangers holding connections "
                          "open, or more peers than its job's world size)", st->base.where);
}

/* One request and its reply; a 'V' or 'E' reply's data lands in data. */
static ring_status_t store_call(store_tcp_t *st, char op, const char *key, const char *value,
                                double deadline, char *status, char *data, size_t len)
{
    size_t klen = strlen(key), vlen = value != NULL ? strlen(value) : 0;
    unsigned char *req, rep[RING_STORE_REP_HDR];
    ring_store_rep_t r;
    int sent, bad;

    if (klen > RING_STORE_KEY_MAX || vlen > RING_STORE_VALUE_MAX)
        return ring_error_set(RING_ERR_INVALID, "rendezvous store: key or value too long");
    /* one write per request: with Nagle's algorithm, a second small write
     * would wait for the server's delayed ACK (40 ms a request) */
    req = malloc(RING_STORE_REQ_HDR + klen + vlen);
    if (req == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a store request");
    sent = io_all(st->fd, req, ring_store_req_encode(op, key, klen, value, vlen, req), 1,
                  deadline);
    free(req);
    if (sent != 0)
        return io_error(st, "sending a request");
    /* first as many bytes as a refusal has: without a secret, the store turns a
     * client away (store.h) where the hello's reply is due */
    if (io_all(st->fd, rep, RING_STORE_REFUSE_BYTES, 0, deadline) != 0)
        return io_error(st, "waiting for its reply");
    if (le_get32(rep) == RING_STORE_REFUSE_MAGIC)
        return refused_error(st, le_get32(rep + 4));
    if (io_all(st->fd, rep + RING_STORE_REFUSE_BYTES, sizeof(rep) - RING_STORE_REFUSE_BYTES, 0,
               deadline) != 0)
        return io_error(st, "waiting for its reply");
    bad = ring_store_rep_decode(rep, len, &r);
    if (bad == -1)
        return ring_error_set(RING_ERR_PROTOCOL, "the program at %s is not a ringd rendezvous "
                              "store (it answered bytes %02x %02x %02x %02x)", st->base.where,
                              rep[0], rep[1], rep[2], rep[3]);
    *status = r.status;
    if (bad != 0)
        return ring_error_set(RING_ERR_PROTOCOL, "rendezvous store %s: a reply of %u bytes is "
                              "too long", st->base.where, r.len);
    if (io_all(st->fd, data, r.len, 0, deadline) != 0)
        return io_error(st, "reading its reply");
    data[r.len] = '\0';
    if (*status == 'E')
        return ring_error_set(RING_ERR_MISMATCH, "rendezvous store %s: %s", st->base.where, data);
    if (*status == 'F')
        return ring_error_set(RING_ERR_NO_RESOURCE, "rendezvous store %s: %s", st->base.where,
                              data);
    return RING_OK;
}

static ring_status_t tcp_set(ring_store_t *s, const char *key, const char *value)
{
    store_tcp_t *st = (store_tcp_t *)s;
    char status, data[RING_STORE_KEY_MAX];

    RING_CHECK(store_call(st, 'S', key, value, ring_now() + st->op_timeout, &status, data,
                          sizeof(data)));
    return RING_OK;
}

static ring_status_t tcp_get(ring_store_t *s, const char *key, char *value, size_t len,
                             double deadline)
{
    store_tcp_t *st = (store_tcp_t *)s;
    char status;

    RING_CHECK(store_call(st, 'G', key, NULL, deadline, &status, value, len));
    if (status != 'V')
        return ring_error_set(RING_ERR_PROTOCOL, "rendezvous store %s: unexpected reply '%c' to "
                              "a get", st->base.where, status);
    return RING_OK;
}

static ring_status_t tcp_check(ring_store_t *s, const char *key, int *present)
{
    store_tcp_t *st = (store_tcp_t *)s;
    char status, data[RING_STORE_KEY_MAX];

    RING_CHECK(store_call(st, 'C', key, NULL, ring_now() + st->op_timeout, &status, data,
                          sizeof(data)));
    *present = status == 'O';
    return RING_OK;
}

static void tcp_close(ring_store_t *s, int clean)
{
    store_tcp_t *st = (store_tcp_t *)s;

    (void)clean;
    if (st->fd >= 0)
        close(st->fd);
    free(st);
}

static const ring_store_ops_t store_tcp_ops = {RING_STORE_TCP, tcp_set, tcp_get, tcp_check,
                                                tcp_close};

/* One connection attempt: a connected fd, or -1 with errno / a resolver error in err. */
/* A connection to a port of this host that nobody listens on can meet itself (TCP's
 * simultaneous open, when the kernel picks the same port as the source): 1 then. */
static int tcp_self_connected(int fd)
{
    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof(me), pl = sizeof(peer);

    return getsockname(fd, (struct sockaddr *)&me, &ml) == 0 &&
           getpeername(fd, (struct sockaddr *)&peer, &pl) == 0 && ml == pl &&
           memcmp(&me, &peer, ml) == 0;
}

static int tcp_dial(const char *host, int port, double deadline, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
    char service[16];
    int fd = -1, rc, e = ECONNREFUSED, one = 1;

    snprintf(service, sizeof(service), "%d", port);
    rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            double left = deadline - ring_now();
            int soerr = ETIMEDOUT;
            socklen_t sl = sizeof(soerr);

            if (left > 0 && poll(&pfd, 1, left > 1.0 ? 1000 : (int)(left * 1000) + 1) > 0)
                (void)getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            errno = soerr;
        } else {
            errno = 0;
        }
        if (errno == 0 && tcp_self_connected(fd))
            errno = ECONNREFUSED; /* nobody listens: the kernel joined us to ourselves */
        if (errno != 0) {
            e = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(err, errlen, "%s", strerror(e));
    return fd;
}

/* auth.h's handshake as the connector, before the store's hello: the store
 * proves the secret before it hears the job id, and this peer before it is
 * answered. *retry = 1 when the store turned this connection away before
 * the handshake (at its capacity of connections, or closed it unanswered) or
 * dropped it mid-way to make room ("RNGR" BUSY where its proof was due): the
 * caller connects again while its deadline allows. */
static ring_status_t tcp_authenticate(store_tcp_t *st, const ring_auth_key_t *key,
                                      const char *job, double deadline, int *retry)
{
    ring_auth_party_t me;
    ring_auth_hs_t hs;
    unsigned char ch[RING_AUTH_CHALLENGE_BYTES], proof[RING_AUTH_PROOF_BYTES];
    unsigned version;
    ring_status_t rs = RING_OK;

    *retry = 0;
    ring_auth_party_init(&me, key, job, RING_AUTH_FOR_STORE, RING_AUTH_NO_RANK,
                         RING_AUTH_NO_RANK);
    if (ring_auth_hs_start(&hs, &me, 0, ch) != 0)
        return ring_error_set(RING_ERR_INTERNAL, "rendezvous store: %s", hs.why);
    if (io_all(st->fd, ch, sizeof(ch), 1, deadline) != 0 ||
        io_all(st->fd, ch, RING_STORE_REFUSE_BYTES, 0, deadline) != 0) {
        *retry = errno != ETIMEDOUT;
        rs = errno == ETIMEDOUT
                 ? ring_error_set(RING_ERR_TIMED_OUT, "rendezvous store %s: no answer to the "
                                  "authentication challenge", st->base.where)
                 : ring_error_set(RING_ERR_REMOTE, "rendezvous store %s closed the connection "
                                  "before answering the authentication challenge (a store at its "
                                  "capacity of connections, one of another ringd release, or "
                                  "not a store with a secret)", st->base.where);
        goto out;
    }
    if (le_get32(ch) == RING_STORE_REFUSE_MAGIC) {
        rs = refused_error(st, le_get32(ch + 4));
        *retry = st->refused == RING_STORE_REFUSE_BUSY;
        goto out;
    }
    if (ring_auth_other_version(ch, RING_STORE_REFUSE_BYTES, &version)) {
        rs = ring_error_set(RING_ERR_MISMATCH, "rendezvous store %s speaks authentication "
                            "version %u, this peer %d: every peer needs the same ringd release",
                            st->base.where, version, RING_AUTH_VERSION);
        goto out;
    }
    if (io_all(st->fd, ch + RING_STORE_REFUSE_BYTES, sizeof(ch) - RING_STORE_REFUSE_BYTES, 0,
               deadline) != 0 ||
        ring_auth_hs_challenge(&hs, ch, sizeof(ch), proof) != 0) {
        rs = ring_error_set(RING_ERR_PROTOCOL, "rendezvous store %s did not answer with this "
                            "job's ringd authentication challenge (%s): is it this job's ringd "
                            "store, with a secret?", st->base.where,
                            hs.why[0] != '\0' ? hs.why : "it closed the connection");
        goto out;
    }
    /* a store at its capacity may drop this connection mid-way to make room: it
     * says so with "RNGR" BUSY where its proof is due (store.h), and this peer
     * connects again; a bare close here is a refused proof */
    if (io_all(st->fd, proof, sizeof(proof), 1, deadline) != 0 ||
        io_all(st->fd, proof, RING_STORE_REFUSE_BYTES, 0, deadline) != 0 ||
        (le_get32(proof) != RING_STORE_REFUSE_MAGIC &&
         io_all(st->fd, proof + RING_STORE_REFUSE_BYTES, sizeof(proof) - RING_STORE_REFUSE_BYTES,
                0, deadline) != 0)) {
        rs = ring_error_set(RING_ERR_MISMATCH, "rendezvous store %s refused this peer's "
                            "proof of the secret: does every peer have the same "
                            "--secret-file (RING_SECRET_FILE)?", st->base.where);
        goto out;
    }
    if (le_get32(proof) == RING_STORE_REFUSE_MAGIC) {
        rs = refused_error(st, le_get32(proof + 4));
        *retry = st->refused == RING_STORE_REFUSE_BUSY;
        goto out;
    }
    if (ring_auth_hs_proof(&hs, proof, sizeof(proof), NULL) != 0)
        rs = ring_error_set(RING_ERR_MISMATCH, "rendezvous store %s could not prove the "
                            "job's secret: it is not this job's store", st->base.where);
out:
    ring_auth_hs_wipe(&hs);
    return rs;
}

/* The store's opening on a connected socket: the secret (with a key), then the
 * hello. *retry: as tcp_authenticate's (st is closed either way on failure). */
static ring_status_t tcp_begin(store_tcp_t *st, const char *job, const ring_auth_key_t *key,
                               double deadline, ring_store_t **s_p, int *retry)
{
    char status, data[1024];
    ring_status_t rs;
    double op_deadline = ring_now() + st->op_timeout;

    *retry = 0;
    st->refused = 0;
    if (op_deadline > deadline)
        op_deadline = deadline;
    rs = key != NULL && key->on ? tcp_authenticate(st, key, job, op_deadline, retry) : RING_OK;
    if (rs == RING_OK) {
        rs = store_call(st, 'H', job, NULL, op_deadline, &status, data, sizeof(data));
        /* without a secret the store turns a client away where the hello's reply is due */
        *retry = rs != RING_OK && st->refused == RING_STORE_REFUSE_BUSY;
    }
    if (rs == RING_ERR_TIMED_OUT)
        rs = ring_error_set(RING_ERR_TIMED_OUT, "rendezvous: the program at %s accepted the "
                            "connection but never answered a ringd store's hello",
                            st->base.where);
    if (rs != RING_OK) {
        close(st->fd);
        st->fd = -1;
        return rs;
    }
    *s_p = &st->base;
    return RING_OK;
}

ring_status_t ring_store_tcp_open(const char *host, int port, const char *job,
                                  const ring_auth_key_t *key, double deadline, ring_store_t **s_p)
{
    store_tcp_t *st = calloc(1, sizeof(*st));
    double started = ring_now(), backoff = 0.005;
    char err[256] = "no answer", why[1024] = "";
    int retry, turned_away = 0;
    ring_status_t rs;

    if (st == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a rendezvous store");
    st->base.ops = &store_tcp_ops;
    snprintf(st->base.where, sizeof(st->base.where), strchr(host, ':') != NULL
             ? "tcp://[%s]:%d" : "tcp://%s:%d", host, port);
    st->op_timeout = 30.0;
    for (;;) {
        st->fd = tcp_dial(host, port, deadline, err, sizeof(err));
        if (st->fd >= 0) {
            rs = tcp_begin(st, job, key, deadline, s_p, &retry);
            if (rs == RING_OK)
                return RING_OK;
            if (!retry) {
                free(st);
                return rs;
            }
            /* turned away before the handshake or dropped mid-way to make room
             * (strangers fill the store's connections, say): connect again
             * until the deadline */
            turned_away++;
            snprintf(why, sizeof(why), "%s", ring_last_error());
        }
        if (ring_now() + backoff > deadline) {
            rs = turned_away > 0
                     ? ring_error_set(RING_ERR_TIMED_OUT, "rendezvous: the store at %s turned "
                                      "this peer away %d time(s) in %.0f s, last: %s",
                                      st->base.where, turned_away, ring_now() - started, why)
                     : ring_error_set(RING_ERR_TIMED_OUT, "rendezvous: no store answered at %s "
                                      "within %.0f s (%s); rank 0 serves it on its host: is "
                                      "rank 0 running, and is that its host and port?",
                                      st->base.where, ring_now() - started, err);
            free(st);
            return rs;
        }
        /* rank 0 may not be listening yet: try again, backing off */
        usleep((useconds_t)(backoff * 1e6));
        backoff = backoff < 0.1 ? backoff * 2 : 0.2;
    }
}

ring_status_t ring_store_tcp_open_fd(int fd, const char *where, const char *job,
                                     const ring_auth_key_t *key, double op_timeout,
                                     ring_store_t **s_p)
{
    store_tcp_t *st = calloc(1, sizeof(*st));
    ring_status_t rs;
    int retry;

    if (st == NULL) {
        close(fd);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a rendezvous store");
    }
    st->base.ops = &store_tcp_ops;
    snprintf(st->base.where, sizeof(st->base.where), "%s", where);
    st->op_timeout = op_timeout;
    st->fd = fd;
    rs = tcp_begin(st, job, key, ring_now() + op_timeout, s_p, &retry);
    if (rs != RING_OK)
        free(st);
    return rs;
}
