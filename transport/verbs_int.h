/*
 * verbs_int.h - the verbs transport's private state, shared by its files:
 * verbs.c (the transport operations: data path, waiting), verbs_ep.c (an
 * endpoint's sticky failure and its freeing), verbs_boot.c (an endpoint's
 * bootstrap: the secret, the records, the ready byte),
 * verbs_dev.c (device, port and GID choice), verbs_qp.c (queue pairs and
 * their state transitions) and verbs_mr.c (memory registration).
 *
 * The bootstrap, per endpoint, over its own TCP connection (verbs_boot.c):
 * - With the job's secret the engine lends a connection guard (params.hooks,
 *   transport.h: its challenge-response), which comes first, the side that
 *   called connect as its connector; only then does the queue pair exist
 *   and its record go out (the acceptor's right after its proof, the
 *   connector's once it has checked that proof). A stranger, a peer with
 *   another secret or none fails only its endpoint and is sent nothing
 *   about this peer. Without a guard the records go out at once.
 * - Then one record each way (verbs_record.h), RTR and RTS, and one ready
 *   byte each way.
 *
 * The protocol, per endpoint (one RC queue pair):
 * - Each side owns VB_SLOTS receive slots of VB_SLOT_BYTES in one
 *   registered region and tells the peer their address and rkey.
 * - A message goes as one or more RDMA WRITE WITH IMMEDIATE, one per
 *   fragment of at most a slot, into the peer's next slot in turn; the
 *   immediate says the fragment's length and whether it ends the message.
 *   RC delivers in order, so fragment k always lands in slot k mod nslots.
 * - Credits: a sender may have at most nslots fragments the receiver has not
 *   freed. The receiver frees a slot when it has copied the fragment into a
 *   posted receive, and returns freed slots in batches as a zero-length
 *   write with immediate flagged CREDIT (it uses no slot).
 * - The receive queue holds nslots + VB_RQ_EXTRA receive work requests
 *   (each write with immediate consumes one), reposted as they complete:
 *   at most nslots data and nslots / VB_CREDIT_BATCH credit writes can be
 *   in flight, so the peer never meets an empty receive queue.
 * - The bootstrap TCP connection stays open: its end (the peer process
 *   died) fails the endpoint at once, where RDMA alone would only notice on
 *   the next write's retry timeout, and a side that only receives never.
 */
#ifndef RING_VERBS_INT_H
#define RING_VERBS_INT_H

#include <infiniband/verbs.h>

#include "errors.h"
#include "token_bucket.h"
#include "transport.h"
#include "verbs_dl.h" /* after verbs.h: every ibv_* call goes through the dlopen'ed table */
#include "verbs_hca.h"
#include "verbs_record.h"

/* receive slots per endpoint, and their size: what one side may have in flight. 64 KiB
 * writes (16 packets at MTU 4096) stay clear of Soft-RoCE's trouble with retransmitted long
 * writes; CPPFLAGS=-DVB_SLOT_BYTES=... tries others */
#ifndef VB_SLOTS
#define VB_SLOTS 32
#endif
#ifndef VB_SLOT_BYTES
#define VB_SLOT_BYTES (64 * 1024)
#endif
#define VB_CREDIT_BATCH (VB_SLOTS / 4) /* freed slots returned together */
#define VB_RQ_EXTRA 8              /* receive WRs beyond nslots: credit writes */
#define VB_SQ_DEPTH (VB_SLOTS + 8) /* data writes + credit writes */
#define VB_MAX_EPS 256
#define VB_IMM_LAST 0x80000000u
#define VB_IMM_CREDIT 0x40000000u
#define VB_IMM_LEN 0x3fffffffu

enum { VB_WR_DATA = 1, VB_WR_CREDIT = 2, VB_WR_RECV = 3 };

/* The device, port and GID this process uses (verbs_dev.c). */
typedef struct vb_dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    char name[VB_DEV_NAME_MAX];
    uint8_t port;
    uint8_t link_layer;        /* 1 InfiniBand, 2 Ethernet */
    uint8_t mtu;               /* enum ibv_mtu */
    uint16_t lid;
    int gid_index;
    uint8_t gid[16];
    char gid_text[64];
} vb_dev_t;

/* A caller's registered buffer (verbs_mr.c). */
typedef struct vb_region {
    uintptr_t addr;
    size_t len;
    struct ibv_mr *mr;
    int device;                /* CUDA device memory, registered as a dma-buf */
} vb_region_t;

#define VB_REGIONS_MAX 64

typedef enum vb_ep_state {
    VB_EP_BOOT,                /* the secret, records, then the ready byte, over the bootstrap */
    VB_EP_OPEN,
    VB_EP_LOCAL,               /* the peer is on this host: messages go over the bootstrap
                                * connection, which shm moved into shared memory */
    VB_EP_FAILED
} vb_ep_state_t;

/*
 * The bootstrap is the tcp transport itself (tcp.c): a listener and
 * connections carrying, after the challenge-response when there is a
 * secret, two messages each way (the record, then one ready
 * byte once our QP is in RTS, so no write can reach a QP not yet ready to
 * receive), after which a 1-byte receive stays posted to hear the peer go.
 * With params.verbs_local_shm (--transport auto) it is the shm transport
 * (shm.c: tcp connections that move into shared memory when the peer is on
 * this host): such a connection needs no queue pair, and carries the
 * caller's messages itself (VB_EP_LOCAL), as NCCL runs SHM within a node
 * and IB across.
 */
typedef struct vb_tp {
    ring_tp_params_t params;
    const ring_tp_ops_t *boot_ops; /* tcp, or shm (verbs_local_shm) */
    ring_tp_t *boot_tp;        /* the bootstrap transport */
    int nlocal;                /* endpoints that went VB_EP_LOCAL, for the log */
    vb_dev_t dev;
    struct ibv_comp_channel *channel; /* every endpoint's CQ reports here */
    struct ring_tp_ep *eps[VB_MAX_EPS];
    int neps;
    vb_region_t regions[VB_REGIONS_MAX];
    int nregions;
    uint64_t bytes_direct;     /* sent straight from registered memory */
    uint64_t bytes_bounced;    /* ... and through the bounce slots */
} vb_tp_t;

struct ring_tp_listener {
    vb_tp_t *tp;
    ring_tp_listener_t *boot;
};

struct ring_tp_ep {
    vb_tp_t *tp;
    ring_tp_ep_t *boot;        /* the bootstrap connection, then liveness (VB_EP_LOCAL:
                                * everything) */
    char peer[80];             /* its peer, kept when it is closed after a failed secret */
    vb_ep_state_t state;
    ring_status_t error;       /* sticky first error */
    int error_errno;
    char error_text[384];      /* what failed, naming the peer, its GID and the QP */
    int rx_broken;             /* an oversized message: receives fail, sends still work */
    int rx_overflow;           /* the message being received does not fit its receive */
    int gone;                  /* its bootstrap connection ended with fragments of its not
                                * yet read: sends fail, receives read them, then fail */

    /* bootstrap messages: the guard first (with a secret), then records, ready bytes */
    void *guard;               /* the guard's state (hooks.guard_state_bytes), NULL: none */
    int guarding;              /* 1 while the guard runs */
    int placing;               /* 1 while the shm bootstrap finds out whether the peer is
                                * on this host (its hand-shake runs) */
    int acceptor;              /* the bootstrap connection was accepted, not connected */
    unsigned char rec_out[VB_RECORD_BYTES], rec_in[VB_RECORD_BYTES];
    unsigned char rdy_out, rdy_in, live_in;
    ring_tp_req_t rec_send, rec_recv, rdy_send, rdy_recv, live_recv;
    int ready_sent;
    vb_record_t mine, theirs;

    /* verbs objects */
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    unsigned char *rx_slots;   /* VB_SLOTS x VB_SLOT_BYTES, written by the peer */
    struct ibv_mr *rx_mr;
    unsigned char *tx_bounce;  /* VB_SLOTS x VB_SLOT_BYTES, what our writes read */
    struct ibv_mr *tx_mr;

    /* receive side */
    uint32_t rx_arrived;       /* data fragments landed */
    uint32_t rx_consumed;      /* ... copied out (their slots are free) */
    uint32_t rx_len[VB_SLOTS];
    uint8_t rx_last[VB_SLOTS];
    uint32_t rx_unreturned;    /* freed slots not yet returned as credits */
    size_t rx_msg_bytes;       /* bytes of the message being received so far */
    ring_tp_req_t *rq_head, *rq_tail;

    /* send side */
    uint32_t tx_credits;       /* peer slots we may still write */
    uint32_t tx_posted;        /* data fragments posted (next remote slot) */
    uint32_t tx_completed;     /* ... and completed (their bounce slots are free) */
    uint8_t tx_ends_req[VB_SLOTS]; /* per bounce slot: its fragment ends a request */
    int sq_out;                /* send WRs outstanding */
    ring_bucket_t tx_bucket;   /* --rate-limit: data fragments wait for tokens */
    ring_tp_req_t *sq_head, *sq_tail;     /* not fully posted yet */
    ring_tp_req_t *fl_head, *fl_tail;     /* fully posted, awaiting the last completion */
};

/* verbs_ep.c */
/* A request done with this status and errno; every request of a list so. */
void vb_req_finish(ring_tp_req_t *req, ring_status_t status, int sys_errno);
void vb_fail_list(ring_tp_req_t **head, ring_tp_req_t **tail, ring_status_t st, int err);
/* The first error on an endpoint is sticky: every pending request gets it. */
void vb_ep_fail(ring_tp_ep_t *ep, ring_status_t st, int sys_errno, const char *fmt, ...)
    RING_PRINTF(4, 5);
/* Destroys its QP, closes its bootstrap connection, frees its guard's state,
 * forgets and frees it. */
void vb_ep_free(ring_tp_ep_t *ep);

/* verbs_boot.c */
/* A new endpoint over bootstrap connection `boot` (accepted or connected): with
 * a secret its challenge-response starts, else its QP and record at once. */
ring_status_t vb_boot_start(vb_tp_t *tp, ring_tp_ep_t *boot, int acceptor, ring_tp_ep_t **ep_p);
/* Moves an endpoint in VB_EP_BOOT on; 1 when something happened. */
int vb_boot_progress(ring_tp_ep_t *ep);

/* verbs_dev.c */
/* Opens the device for this rank; -1 with why (libibverbs not loadable: "verbs unavailable:
 * ...", no device, none active...) */
int vb_dev_open(const ring_tp_params_t *params, vb_dev_t *dev, char *why, size_t whylen);
void vb_dev_close(vb_dev_t *dev);

/* verbs_mr.c */
ring_status_t vb_reg_mem(ring_tp_t *tp, void *addr, size_t bytes);
ring_status_t vb_dereg_mem(ring_tp_t *tp, void *addr);
/* The registered region holding all of [p, p + len), or NULL. */
const vb_region_t *vb_region_find(const vb_tp_t *tp, const void *p, size_t len);
void vb_regions_free(vb_tp_t *tp);

/* verbs_qp.c */
int vb_qp_create(ring_tp_ep_t *ep, char *err, size_t errlen);
int vb_qp_to_init(ring_tp_ep_t *ep, char *err, size_t errlen);
int vb_qp_to_rtr(ring_tp_ep_t *ep, char *err, size_t errlen);
int vb_qp_to_rts(ring_tp_ep_t *ep, char *err, size_t errlen);
int vb_qp_post_recvs(ring_tp_ep_t *ep, int n, char *err, size_t errlen);
void vb_qp_destroy(ring_tp_ep_t *ep);

#endif /* RING_VERBS_INT_H */
