/*
 * shm_int.h - the shared-memory transport's private state, shared by its
 * files: shm.c (the ops table, the upgrade hand-shake, waiting), shm_pipe.c
 * (moving messages through the shared rings) and shm_seg.c (the segment,
 * its eventfds, and passing them over an abstract unix socket).
 *
 * How it works: every endpoint is a tcp endpoint first (transport/tcp.c).
 * The connector offers shared memory in its first message; an acceptor
 * that can reach the connector's abstract unix socket (same host, same
 * network namespace) creates a sealed memfd segment holding one byte pipe
 * per direction, hands it over with two eventfds, and answers yes. From
 * then on messages travel through the pipes (the same length-prefixed
 * stream as tcp) and the tcp connection stays open only to notice a peer
 * that dies: the kernel closes it. Answered no (another host), the
 * endpoint simply stays tcp.
 */
#ifndef RING_SHM_INT_H
#define RING_SHM_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lp_stream.h"
#include "shm.h"
#include "transport.h"

#define SHM_MAX_EPS 1024        /* as tcp: > 2 x 16 channels x 16 streams + spares */
#define SHM_ARRIVALS SHM_MAX_EPS /* hand-overs received, not yet claimed by their endpoint */
#define SHM_TOKEN_BYTES 16
#define SHM_NAME_MAX 64         /* the abstract socket's name, without its leading NUL */
#define SHM_HS_BYTES 128        /* a hand-shake message's buffer */
#define SHM_SEG_MAGIC 0x52534d31u /* "RSM1" */
#define SHM_PIPE_DEFAULT ((size_t)4 << 20) /* bytes per direction; RING_SHM_BYTES overrides */
#define SHM_LIVE_CHECK_S 0.002  /* a busy endpoint looks at its tcp socket this often */
#define SHM_LIVE_SKIP 32        /* ... reading the clock every this many progress calls */

/* One direction's indices, in the segment. Free-running byte counts; the
 * peer's index is never trusted (shm_pipe.c checks it against our own). */
typedef struct shm_ctl {
    _Atomic uint64_t head;             /* bytes written, by the producer */
    char pad0[56];
    _Atomic uint64_t tail;             /* bytes consumed, by the consumer */
    char pad1[56];
    _Atomic uint32_t consumer_sleeps;  /* 1: the consumer waits on its eventfd for data */
    _Atomic uint32_t producer_sleeps;  /* 1: the producer waits on its eventfd for room */
    char pad2[56];
} shm_ctl_t;

/* The segment's first bytes: what the acceptor made, checked by the connector. */
typedef struct shm_seg_hdr {
    uint32_t magic;
    uint32_t version;
    uint64_t pipe_bytes;               /* each direction's data area, a power of two */
    char pad[48];
} shm_seg_hdr_t;

/* Layout: header, ctl[0] (acceptor to connector), ctl[1] (connector to acceptor),
 * then the two data areas, each page aligned. */
#define SHM_CTL_OFFSET 64
#define SHM_DATA_OFFSET 4096

/* A direction as one side sees it. */
typedef struct shm_pipe {
    shm_ctl_t *ctl;
    unsigned char *data;
    uint64_t size, mask;
    uint64_t pos;                      /* our own index: head (sending) or tail (receiving) */
} shm_pipe_t;

typedef enum shm_phase {
    SHM_OFFERING,   /* connector: tcp connecting, offer sent, waiting for the answer */
    SHM_ANSWERING,  /* acceptor: waiting for the first bytes: an offer or not? */
    SHM_READING_OFFER, /* acceptor: reading the offer */
    SHM_PIPES,      /* messages go through shared memory */
    SHM_TCP,        /* another host: the endpoint is its tcp endpoint */
    SHM_FAILED
} shm_phase_t;

typedef struct shm_tp shm_tp_t;

/* What travels over the unix socket with SHM_NFDS fds (the segment, the connector's
 * eventfd, the acceptor's): the token and the pipes' size. */
#define SHM_NFDS 3
typedef struct shm_handover {
    unsigned char token[SHM_TOKEN_BYTES];
    uint64_t pipe_bytes;
} shm_handover_t;

/* A segment that came in over the unix socket before its endpoint asked for it. */
typedef struct shm_arrival {
    int used, received;
    double since;                      /* accepted at */
    uint64_t seq;                      /* accepted as the seq-th: the oldest goes first */
    int conn_fd;                       /* the unix connection until its hand-over is read */
    unsigned char token[SHM_TOKEN_BYTES];
    uint64_t pipe_bytes;
    int seg_fd, efd_mine, efd_peer;
} shm_arrival_t;

struct ring_tp_listener {
    shm_tp_t *tp;
    ring_tp_listener_t *tcp;
};

struct ring_tp_ep {
    shm_tp_t *tp;
    ring_tp_ep_t *tcp;                 /* hand-shake, then liveness (or everything: SHM_TCP) */
    int acceptor;
    shm_phase_t phase;
    ring_status_t error;               /* sticky first error */
    int error_errno;
    char why[200];                     /* ep_error's words, "" when status says it all */
    char peer[96];
    double started;
    /* the hand-shake, over tcp */
    ring_tp_req_t hs_send, hs_recv;
    unsigned char hs_out[SHM_HS_BYTES], hs_in[SHM_HS_BYTES];
    unsigned char token[SHM_TOKEN_BYTES];
    /* the caller's requests (held while the hand-shake runs) */
    ring_tp_req_t *sq_head, *sq_tail, *rq_head, *rq_tail;
    /* shared memory */
    void *seg;
    size_t seg_bytes;
    shm_pipe_t tx, rx;
    int efd_mine, efd_peer;            /* we sleep on ours; we wake the peer through theirs */
    int rx_broken;                     /* an oversized message: receives fail, sends work */
    int gone, gone_errno;              /* it left: sends fail, receives read what it wrote first */
    ring_lp_rx_t lp_rx;                /* the message coming through rx */
    /* liveness: the tcp socket, idle once the pipes carry everything, is
     * checked every SHM_LIVE_CHECK_S (and polled while we sleep) */
    int live_fd;
    double live_at;
    unsigned live_skip;                /* progress calls left before the clock is read */
};

struct shm_tp {
    ring_tp_params_t params;
    ring_tp_t *tcp;
    size_t pipe_bytes;
    int ux_fd;                         /* abstract unix listener, -1 until the first connect */
    char ux_name[SHM_NAME_MAX];        /* SHM_NAME_PREFIX, scope, "-", pid, "-", random */
    uint32_t scope;                    /* the host id's hash: offers of another are refused */
    shm_arrival_t arrivals[SHM_ARRIVALS];
    uint64_t arrival_seq;
    ring_tp_ep_t *eps[SHM_MAX_EPS];
    int neps;
    ring_tp_ep_t *sleeping[SHM_MAX_EPS]; /* between ring_shm_wait_fds and ring_shm_wait_done */
    int nsleeping;
};

/* shm_seg.c */
/* The scope of a --host-id ("" when none): peers of different scopes stay tcp. */
uint32_t shm_scope(const char *host_id);
/* The scope an offer's socket name carries (a peer's bytes): 0, or -1 when the
 * name is not a ringd socket's (prefix, 8 lowercase hex digits, '-'). */
int shm_name_scope(const char *name, uint32_t *scope_p);
/* Random bytes from the kernel: 0, or -1. */
int shm_random(void *buf, size_t len);
/* The transport's abstract unix listener (made on first use): 0, or -1 with errno. */
int shm_ux_listen(shm_tp_t *tp);
/* Acceptor: make a segment for ep, connect to the connector's socket `name` and hand
 * the segment over with token. 0; -1 when the connector cannot be reached or the
 * segment cannot be made (why says which), and ep stays tcp. */
int shm_seg_offer(shm_tp_t *tp, ring_tp_ep_t *ep, const char *name, char *why, size_t whylen);
/* Connector: take what arrived for ep's token off the unix socket and map it. 1 done,
 * 0 not there (yet), -1 failed (why). */
int shm_seg_claim(shm_tp_t *tp, ring_tp_ep_t *ep, char *why, size_t whylen);
/* Drop a hand-over that arrived for token and was never claimed (its endpoint closed). */
void shm_arrival_forget(shm_tp_t *tp, const unsigned char token[SHM_TOKEN_BYTES]);
/* Unmap and close ep's segment and eventfds. */
void shm_seg_release(ring_tp_ep_t *ep);
/* Close the unix listener and every unclaimed arrival. */
void shm_ux_close(shm_tp_t *tp);

/* shm.c: an offer's fields (0), not an offer (-1), another version or a bad length (-2).
 * m holds len bytes; name gets a NUL-terminated string. */
int shm_offer_decode(const unsigned char *m, size_t len, unsigned char token[SHM_TOKEN_BYTES],
                     char name[SHM_NAME_MAX]);

/* shm_pipe.c */
int shm_ep_progress_tx(ring_tp_ep_t *ep);
int shm_ep_progress_rx(ring_tp_ep_t *ep);
/* 1 when ep could progress without waiting (data to read, room to write). */
int shm_ep_ready(ring_tp_ep_t *ep);
/* Before sleeping: ask the peer to wake us for what we wait for; returns 1 when
 * that is already there (do not sleep). After the sleep: shm_ep_wake_done. */
int shm_ep_sleep_prepare(ring_tp_ep_t *ep);
void shm_ep_wake_done(ring_tp_ep_t *ep);
void shm_ep_fail(ring_tp_ep_t *ep, ring_status_t status, int sys_errno, const char *why);
/* Its socket ended (sys_errno 0) or broke: fail the sends; the receives fail once
 * the pipe holds nothing more from it. */
void shm_ep_peer_gone(ring_tp_ep_t *ep, int sys_errno);

#endif /* RING_SHM_INT_H */
