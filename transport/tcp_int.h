/*
 * tcp_int.h - the TCP transport's private state, shared by its files:
 * tcp.c (set-up, tear-down, waiting), tcp_io.c (moving bytes) and
 * tcp_addr.c (names, addresses, socket options).
 */
#ifndef RING_TCP_INT_H
#define RING_TCP_INT_H

#include <netinet/in.h>
#include <sys/socket.h>

#include "lp_stream.h"
#include "tcp.h"
#include "token_bucket.h"
#include "transport.h"

#define TCP_RX_STAGE 16384   /* greedy read size for headers and small messages */
#define TCP_TX_IOV 64        /* messages are coalesced into one sendmsg up to this */
#define TCP_LAZY_RX_S 100e-6 /* a lazy receive (transport.h) is read for this often */

typedef enum tcp_ep_state {
    TCP_EP_CONNECTING,
    TCP_EP_OPEN,
    TCP_EP_FAILED
} tcp_ep_state_t;

typedef struct tcp_tp {
    ring_tp_params_t params;
    struct ring_tp_ep *eps[TCP_MAX_EPS];
    int neps;
    struct ring_tp_listener *listeners[4];
    int nlisteners;
} tcp_tp_t;

struct ring_tp_listener {
    tcp_tp_t *tp;
    int fd;
};

struct ring_tp_ep {
    tcp_tp_t *tp;
    int fd;
    tcp_ep_state_t state;
    ring_status_t error;     /* sticky first error */
    int error_errno;
    int rx_broken;           /* an oversized message: receives fail, sends still work */
    int tx_gone;             /* a send failed, the peer left: sends fail from then on, but
                              * receives still read what it wrote before (an ABORT saying
                              * why); its EOF then fails the ep with tx_gone_errno */
    int tx_gone_errno;
    char peer[80];           /* "host:port" */
    ring_tp_req_t *sq_head, *sq_tail;
    /* send side: rate limit (--rate-limit; tx_bucket.rate 0 = none) */
    size_t tx_queued;        /* unsent bytes in the send queue, prefixes included */
    int tx_ctrl;             /* control-sized messages (RING_BUCKET_CTRL_BYTES) queued */
    ring_bucket_t tx_bucket; /* tokens may go negative: debt from control messages */
    ring_tp_req_t *rq_head, *rq_tail;
    /* receive side: the message in progress and the staging buffer */
    ring_lp_rx_t lp_rx;
    unsigned char *rx_stage;
    size_t rx_stage_off, rx_stage_len;
    double rx_lazy_next;     /* a lazy receive is read from then on (0: now) */
};

/* tcp_addr.c */
int tcp_resolve(const char *host, int port, int passive, struct sockaddr_storage *ss,
                socklen_t *sslen, char *err, size_t errlen);
void tcp_format_addr(const struct sockaddr *sa, char *buf, size_t len);
void tcp_set_options(int fd, size_t sockbuf);

/* tcp_io.c */
/* Bytes ep may write now (SIZE_MAX when not rate limited). 0: the bucket is
 * short, and *delay_s (when not NULL) says how long until it will not be. */
size_t tcp_ep_tx_allowance(ring_tp_ep_t *ep, double now, double *delay_s);
int tcp_ep_progress_tx(ring_tp_ep_t *ep);
int tcp_ep_progress_rx(ring_tp_ep_t *ep);
void tcp_ep_fail(ring_tp_ep_t *ep, ring_status_t status, int sys_errno);

#endif /* RING_TCP_INT_H */
