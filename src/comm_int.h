/*
 * comm_int.h - the communicator's insides, shared by comm.c (open, close),
 * handshake.c (hellos), allreduce.c (the request engine) and fail.c
 * (sticky errors and telling the neighbours).
 */
#ifndef RING_COMM_INT_H
#define RING_COMM_INT_H

#include <ringd/comm.h>

#include "errors.h"
#include "peers.h"
#include "schedule.h"
#include "transport.h"
#include "wire.h"

#define RING_MAX_CHANNELS 16
#define RING_MAX_STREAMS 16
#define RING_WINDOW 4 /* frames in flight per channel and direction */

/* One frame in flight: the transport request and the header bytes it carries. */
typedef struct ring_slot {
    ring_tp_req_t req;
    unsigned char hdr[RING_FRAME_BYTES];
    int posted;
} ring_slot_t;

typedef struct ring_channel {
    int index;
    ring_tp_ep_t *right[RING_MAX_STREAMS]; /* data goes out on these (we connected) */
    ring_tp_ep_t *left[RING_MAX_STREAMS];  /* data comes in on these (we accepted) */
    ring_slot_t back;                      /* on right[0]: ABORT/CLOSE coming back */
    ring_slot_t send[RING_WINDOW];
    ring_slot_t recv[RING_WINDOW];
    unsigned char *stage;                  /* RING_WINDOW chunks for reduce-scatter receives */
    /* the allreduce in flight */
    ring_range_t part;                     /* this channel's elements of the buffer */
    ring_sched_t sched;
    uint32_t next_send, next_recv;         /* next frame to post */
    uint32_t sends_done, recvs_done;       /* frames retired, in order */
} ring_channel_t;

struct ring_request {
    ring_comm_t *comm;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    ring_dtype_t dtype;
    ring_op_t op;
    uint32_t tensor_id;
    uint64_t round;
    int in_use;
    int started;
    int done;
    ring_status_t status;
};

struct ring_comm {
    ring_config_t cfg;
    int rank, size;
    int left_rank, right_rank;
    ring_peer_addr_t *peers;
    char left_addr[300], right_addr[300];
    const ring_tp_ops_t *tp_ops;
    ring_tp_t *tp;
    ring_tp_listener_t *listener;
    int nchannels, nstreams;
    ring_channel_t channels[RING_MAX_CHANNELS];
    /* requests run first-in first-out from a fixed ring of slots */
    ring_request_t reqs[RING_MAX_REQUESTS];
    unsigned req_head, req_count;
    uint64_t next_round;
    /* sticky first error */
    ring_status_t error;
    char error_msg[1024];
    int right_closed;                      /* the right neighbour said CLOSE */
    ring_slot_t abort_right, abort_left;
};

/* handshake.c */
void ring_hello_fill(const ring_comm_t *comm, int channel, int stream, ring_hello_t *h);
ring_status_t ring_hello_check(const ring_comm_t *comm, const ring_hello_t *mine,
                               const ring_hello_t *theirs, const char *peer_addr);

/* connect.c */
ring_status_t ring_connect_ring(ring_comm_t *comm);

/* fail.c */

/* What went wrong, as the peers are told in an ABORT frame. */
typedef struct ring_fault {
    ring_status_t status;
    int culprit;             /* the rank blamed, -1 when none */
    int sys_errno;           /* errno behind it; RING_CAUSE_CLOSED for a peer that left */
    int step;                /* ring step, -1 when not in one */
    const ring_frame_t *theirs; /* MISMATCH: the culprit's frame header */
} ring_fault_t;

void ring_phase_format(const ring_comm_t *comm, const ring_request_t *req, int step, char *buf,
                       size_t len);
ring_status_t ring_comm_fail(ring_comm_t *comm, const ring_fault_t *fault, const char *fmt, ...)
    RING_PRINTF(3, 4);
ring_status_t ring_comm_fail_from_frame(ring_comm_t *comm, const ring_frame_t *f, int from_rank);
void ring_comm_send_close(ring_comm_t *comm);
const char *ring_rank_addr(const ring_comm_t *comm, int rank, char *buf, size_t len);
ring_request_t *ring_comm_active_request(ring_comm_t *comm);
int ring_comm_current_step(const ring_comm_t *comm);

/* allreduce.c */
int ring_comm_progress(ring_comm_t *comm);
ring_status_t ring_comm_wait_until(ring_comm_t *comm, ring_request_t *req);
void ring_channel_post_back(ring_comm_t *comm, ring_channel_t *ch);

#endif /* RING_COMM_INT_H */
