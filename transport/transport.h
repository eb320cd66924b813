/*
 * transport.h - the interface every transport (tcp, shm, verbs) implements, as a
 * table of function pointers.
 *
 * Contract:
 * - Endpoints carry messages: a message posted with post_send arrives whole,
 *   in order, at the peer's recv posted on the matching endpoint (an urgent
 *   one may go before earlier ones not yet begun, never into one). A message
 *   larger than the receive's capacity fails that receive with
 *   RING_ERR_MISMATCH (req->bytes says how large it was) after filling the
 *   capacity, and fails every later receive on the endpoint (sends still
 *   work, so the caller can tell the peer why); a smaller one completes with
 *   req->bytes < capacity. The engine's frame header tells the rest.
 * - Nothing blocks except wait(). connect() returns an endpoint at once; its
 *   connection completes during progress(), and sends posted meanwhile go
 *   out when it does.
 * - The data path never allocates: requests belong to the caller and stay
 *   untouched (and their buffers too) until req->done is set.
 * - The first error on an endpoint is sticky: it completes every pending
 *   request of the endpoint with the same status and errno, and later posts
 *   fail at once. sys_errno 0 with RING_ERR_REMOTE means an orderly close.
 * - Transports know nothing about rings, segments or ranks.
 */
#ifndef RING_TRANSPORT_H
#define RING_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <ringd/status.h>

#define RING_TP_IOV_MAX 4

typedef struct ring_tp ring_tp_t;
typedef struct ring_tp_ep ring_tp_ep_t;
typedef struct ring_tp_listener ring_tp_listener_t;
typedef struct ring_tp_ops ring_tp_ops_t;

/* A send or receive; owned by the caller. */
typedef struct ring_tp_req {
    /* filled by the caller before posting */
    struct iovec iov[RING_TP_IOV_MAX];
    int iovcnt;
    /* a send that may overtake queued sends not yet begun: an ABORT notice, which
     * ends the stream, must not wait behind data a dying peer will never finish */
    int urgent;
    /* a receive nothing waits on at once (the engine's back channel, where only an
     * ABORT, a CLOSE or a notice comes): while the caller spins, tcp reads for it
     * only every TCP_LAZY_RX_S instead of on every pass, a read() that almost always
     * finds nothing; after a wait or a failed send on its connection it reads at
     * once. Read on every pass, so it may change while the receive is posted.
     * Other transports ignore it */
    int lazy;
    /* set by the transport */
    int done;               /* 1 once finished, successfully or not */
    ring_status_t status;   /* RING_OK or why it failed */
    int sys_errno;          /* errno behind a failure (0: orderly close by the peer) */
    size_t bytes;           /* receive: size of the message that arrived */
    /* private to the transport */
    struct ring_tp_req *next;
    size_t offset;
    unsigned char prefix[4];
} ring_tp_req_t;

/* A connection guard's verdict so far (ring_tp_hooks_t.guard_step). */
typedef enum ring_tp_guard_state {
    RING_TP_GUARD_PENDING = 0,
    RING_TP_GUARD_DONE,        /* the peer proved itself: go on */
    RING_TP_GUARD_FAILED       /* guard_why says why */
} ring_tp_guard_state_t;

/* Why a connection's guard failed, for the transport's own message. */
typedef struct ring_tp_guard_why {
    const char *why;           /* in words, after the peer's address ("refused this peer's
                                * proof: the secrets differ"); lives with the guard's state */
    int refused;               /* connector: the other side closed after our proof */
    int unreachable;           /* connector: the connection never came up (nobody listens
                                * there yet): a failure as without a guard, status and
                                * sys_errno say which */
    ring_status_t status;      /* the guard's first receive: its status and errno */
    int sys_errno;
    int bad_message;           /* what the other side sent failed a check (another rank,
                                * job, purpose or secret): a security notice */
    size_t first_len;          /* 0..4: how many bytes of that message first holds (0: none
                                * arrived), to tell another protocol by its magic */
    unsigned char first[4];
} ring_tp_guard_why_t;

/*
 * What the engine lends a transport: hooks, each called with ctx, each
 * optional. All NULL (a ring_tp_params_t filled by hand, as tests do) means
 * no secret and host memory only. The engine fills them in
 * src/core/tp_lend.c; they must stay valid until the transport's fini.
 */
typedef struct ring_tp_hooks {
    void *ctx;

    /*
     * The connection guard, for a transport that runs its own bootstrap
     * connections (verbs): with the job's secret the engine's
     * challenge-response, which must succeed before the transport sends
     * anything about this peer. guard_begin NULL: no guard, go on at once.
     * The transport allocates guard_state_bytes of zeroed memory per
     * connection, keeps it in place until that connection (ep, over the
     * bootstrap transport ops) is closed, then frees it; nothing in it
     * needs releasing. guard_begin posts the first messages on ep
     * (acceptor: 1 when ep was accepted), RING_ERR_* with the last error
     * set when it cannot; guard_step moves it on after ops->progress;
     * guard_why, after RING_TP_GUARD_FAILED, says why.
     */
    size_t guard_state_bytes;
    ring_status_t (*guard_begin)(void *ctx, void *state, const ring_tp_ops_t *ops,
                                 ring_tp_ep_t *ep, int acceptor);
    ring_tp_guard_state_t (*guard_step)(void *ctx, void *state);
    void (*guard_why)(void *ctx, const void *state, ring_tp_guard_why_t *why_p);

    /*
     * A peer's bootstrap sent something other than the transport's own
     * record, or than the guard's challenge: first holds its first 4 bytes
     * (as many as arrived), bytes the message's size. Returns what the engine
     * recognises, in words to follow the peer's address ("runs ringd over
     * the tcp transport, this peer over verbs: ..."), or NULL. Only verbs
     * asks.
     */
    const char *(*foreign_bytes)(void *ctx, const unsigned char first[4], size_t bytes);

    /*
     * Device memory (CUDA), for a transport that registers memory:
     * is_device_ptr is 1 when p is device memory; dmabuf_fd, for such
     * memory, a dma-buf fd (the caller closes it) covering [*base_p,
     * *base_p + *len_p), which holds [p, p + bytes): 0, or -1 when it cannot
     * be exported. is_device_ptr NULL: every buffer is host memory.
     */
    int (*is_device_ptr)(void *ctx, const void *p);
    int (*dmabuf_fd)(void *ctx, const void *p, size_t bytes, int *fd_p, uintptr_t *base_p,
                     size_t *len_p);
} ring_tp_hooks_t;

typedef struct ring_tp_params {
    size_t sockbuf;         /* SO_SNDBUF/SO_RCVBUF, 0 = kernel default */
    /*
     * Bandwidth cap in bytes/s, 0 = unlimited: a token bucket per endpoint
     * (per connection, sending side; receives are never held back). An
     * endpoint's sends (length prefixes included) average at most this
     * rate, in bursts of at most max(64 KiB, rate * 10 ms) bytes; a message
     * may leave in several writes. Messages of 256 bytes or less (hellos,
     * ABORT and CLOSE notices) never wait for tokens, nor do the messages
     * queued ahead of one, so notices are never delayed; their bytes still
     * count (the bucket goes into debt, which later writes wait out). While its bucket is empty an endpoint does not write:
     * progress() returns 0 for it, and wait() sleeps until it has tokens
     * again instead of polling it for POLLOUT (no busy loop).
     */
    double rate_limit_bps;
    /* verbs */
    int rank;               /* picks among several matching devices (rank mod k) */
    const char *ib_dev;     /* RING_IB_HCA list, "" = every device */
    int gid_index;          /* -1 = an IPv4-mapped RoCE v2 GID */
    int ib_timeout;         /* QP local ACK timeout: 4.096 us x 2^this */
    int ib_retry_count;     /* QP retransmissions before an error */
    /* what the engine lends (the connection guard, device memory ...); verbs:
     * a bootstrap connection passes the guard before any queue-pair record */
    ring_tp_hooks_t hooks;
    /* auto: why the settings show every peer on this host (one_host.c), or "" */
    const char *one_host_why;
    /* --host-id, or NULL/"": shm moves only connections between peers that declare
     * the same host into shared memory (NCCL_HOSTID's use: a test, or a container
     * that hides its host) */
    const char *host_id;
    /* verbs: connections to peers on this host run in shared memory (verbs.c over an
     * shm bootstrap), as --transport auto asks; 0: every connection over RDMA */
    int verbs_local_shm;
} ring_tp_params_t;

/* Which transport an ops table is, for the engine's tests (name is for messages and
 * records); each transport's table sets it. */
typedef enum ring_tp_kind {
    RING_TP_NONE = 0,       /* none yet: for ring_tp_choose, choose one (auto) */
    RING_TP_TCP,
    RING_TP_SHM,
    RING_TP_VERBS
} ring_tp_kind_t;

struct ring_tp_ops {
    size_t size;            /* sizeof(ring_tp_ops_t), lets the table grow */
    const char *name;
    ring_tp_kind_t kind;

    ring_status_t (*init)(const ring_tp_params_t *params, ring_tp_t **tp_p);
    void (*fini)(ring_tp_t *tp);

    /* Listen on host (an address or interface name; "" = every address) and port. */
    ring_status_t (*listen)(ring_tp_t *tp, const char *host, int port, ring_tp_listener_t **l_p);
    /* RING_OK with *ep_p == NULL means nothing is waiting: call again later. */
    ring_status_t (*accept)(ring_tp_listener_t *l, ring_tp_ep_t **ep_p);
    void (*listener_close)(ring_tp_listener_t *l);
    /* The port the listener is bound to (after port 0 chose one), or -1. */
    int (*listener_port)(const ring_tp_listener_t *l);

    /* Start connecting; the endpoint is usable at once (see the contract). */
    ring_status_t (*connect)(ring_tp_t *tp, const char *host, int port, ring_tp_ep_t **ep_p);

    /* RING_ERR_* when the endpoint has failed (the request is then not queued). */
    ring_status_t (*post_send)(ring_tp_ep_t *ep, ring_tp_req_t *req);
    ring_status_t (*post_recv)(ring_tp_ep_t *ep, ring_tp_req_t *req);

    /* Move bytes on every endpoint without blocking; returns how many
     * requests completed plus 1 if any bytes moved (0 = nothing happened). */
    int (*progress)(ring_tp_t *tp);
    /* Sleep until an endpoint or listener may progress, at most timeout_ms. */
    void (*wait)(ring_tp_t *tp, int timeout_ms);

    /* Peer's address as "host:port" (for messages). */
    const char *(*ep_peer)(const ring_tp_ep_t *ep);
    /* Fails pending requests with RING_ERR_CANCELED and frees the endpoint. */
    void (*ep_close)(ring_tp_ep_t *ep);
    /* The endpoint's sticky error in words when the transport knows more than
     * status and errno say (a completion status, a QP number), else "". */
    const char *(*ep_error)(const ring_tp_ep_t *ep);

    /* Memory the caller will send from again and again: a transport that can
     * send without copying (verbs) registers it; addr must stay allocated until
     * dereg_mem. Transports that need nothing accept and ignore it. */
    ring_status_t (*reg_mem)(ring_tp_t *tp, void *addr, size_t bytes);
    ring_status_t (*dereg_mem)(ring_tp_t *tp, void *addr);
};

/* Transports compiled into this build, NULL-terminated; defaults filled in. */
const ring_tp_ops_t *ring_tp_find(const char *name);
/* The same by kind: NULL when this build lacks it (verbs) or for RING_TP_NONE. */
const ring_tp_ops_t *ring_tp_find_kind(ring_tp_kind_t kind);
const char *ring_tp_names(void);

/* Human text for a failed request: "connection reset", "connection closed"... */
const char *ring_tp_cause(ring_status_t status, int sys_errno);
/* The same for a request of endpoint ep: the transport's own words when it has them. */
const char *ring_tp_ep_cause(const ring_tp_ops_t *ops, const ring_tp_ep_t *ep,
                             const ring_tp_req_t *req);

/*
 * Which transport the communicator runs: the kind asked (--transport tcp, shm
 * or verbs), or for RING_TP_NONE (auto) verbs when this build has it, an active RDMA port exists and
 * params->one_host_why is empty, else shm (shared memory with the peers on
 * this host, tcp to the others), or tcp under a bandwidth cap. *why says why
 * auto did not choose verbs ("" when it did). NULL when the kind asked is
 * not in this build.
 */
const ring_tp_ops_t *ring_tp_choose(ring_tp_kind_t asked, const ring_tp_params_t *params,
                                    char *why, size_t whylen);

#endif /* RING_TRANSPORT_H */
