/*
 * ringd/comm.h - the communicator and ring allreduce.
 *
 * Blocking: ring_comm_open blocks until the ring is connected (bounded by
 * connect_timeout_s). ring_allreduce blocks until done (bounded by timeout_s
 * of no progress). ring_allreduce_start never blocks: the request makes
 * progress whenever ring_request_test or ring_request_wait is called on any
 * request of the communicator (there is no hidden thread).
 *
 * Threads: a communicator is used by one thread at a time.
 *
 * Errors: the first error on a communicator is sticky. It fails the request
 * in flight and every later call with the same status and message (see
 * ring_last_error); the peers are told, so no peer waits for a dead ring.
 * On error the contents of recvbuf are undefined. The only thing left to do
 * with a failed communicator is ring_comm_close.
 */
#ifndef RINGD_COMM_H
#define RINGD_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <ringd/status.h>
#include <ringd/config.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ring_comm ring_comm_t;
typedef struct ring_request ring_request_t;

typedef enum ring_dtype {
    RING_FLOAT32 = 0,
    RING_FLOAT16,   /* IEEE binary16; summed in fp32 inside */
    RING_BFLOAT16,  /* bfloat16; summed in fp32 inside */
    RING_DTYPE_COUNT
} ring_dtype_t;

typedef enum ring_op {
    RING_SUM = 0,
    RING_AVG,       /* sum divided by the world size */
    RING_OP_COUNT
} ring_op_t;

/* Maximum number of requests started and not yet waited for. */
#define RING_MAX_REQUESTS 16

/*
 * Connect this peer into the ring described by cfg (copied; the caller keeps
 * cfg). Every peer must call it; it returns once both neighbours are
 * connected and their handshakes agree, or fails naming the peer and cause
 * (connection refused until the deadline, settings mismatch naming the first
 * differing field, bad magic from a stranger on the port...).
 */
ring_status_t ring_comm_open(const ring_config_t *cfg, ring_comm_t **comm_p);

/*
 * Tell the neighbours this peer is leaving, close every connection and free
 * the communicator. Pending requests are cancelled. Accepts NULL.
 */
void ring_comm_close(ring_comm_t *comm);

int ring_comm_rank(const ring_comm_t *comm);
int ring_comm_size(const ring_comm_t *comm);
/* The transport the ring runs on ("tcp" or "verbs"): what --transport auto chose. */
const char *ring_comm_transport(const ring_comm_t *comm);

/* The ring's order by host, "hostA[0-1] -> hostB[2,3]" (--ring-order). */
const char *ring_comm_ring_order(const ring_comm_t *comm);

/* What --autotune chose and measured ("" when it did not run). */
const char *ring_comm_autotune_report(const ring_comm_t *comm);

/*
 * Register a buffer this peer will pass to allreduces again and again (like
 * ncclCommRegister): over verbs its bytes then leave without a copy, and
 * CUDA device memory is registered for GPUDirect RDMA (a dma-buf). Other
 * transports accept and ignore it. The buffer must stay allocated until
 * ring_comm_deregister, which must not be called while an allreduce that
 * uses it is in flight. Registration is never needed for correctness.
 */
ring_status_t ring_comm_register(ring_comm_t *comm, void *buf, size_t bytes);
ring_status_t ring_comm_deregister(ring_comm_t *comm, void *buf);

/*
 * Allreduce count elements: recvbuf = op over all peers of their sendbuf.
 * In place when sendbuf == recvbuf. Every peer must call it with the same
 * count, dtype and op, in the same order as its other allreduces; a peer
 * that does not gets RING_ERR_MISMATCH naming the field, and so do the
 * others. Results are bitwise identical on every peer.
 */
ring_status_t ring_allreduce(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                             size_t count, ring_dtype_t dtype, ring_op_t op);

/*
 * Start an allreduce without waiting; tensor_id is checked against the
 * peers' (use it to tell tensors apart). Requests run in the order they
 * were started. Buffers must stay untouched until the request completes.
 * Returns RING_ERR_NO_RESOURCE when RING_MAX_REQUESTS are outstanding.
 */
ring_status_t ring_allreduce_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, ring_dtype_t dtype, ring_op_t op,
                                   uint32_t tensor_id, ring_request_t **req_p);

/* Flags of ring_allreduce_start_flags. */
#define RING_CALL_EXACT 0x1u /* travel as the buffer's own dtype whatever the codec setting
                                (Horovod's per-call compression=none): for counters and
                                flags that must arrive exactly */

/* ring_allreduce_start with per-call flags; every peer must pass the same flags
 * (otherwise the frame sizes differ and every peer fails, the one that notices
 * naming its neighbour and both sizes). */
ring_status_t ring_allreduce_start_flags(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         size_t count, ring_dtype_t dtype, ring_op_t op,
                                         uint32_t tensor_id, unsigned flags,
                                         ring_request_t **req_p);

/*
 * Make progress without blocking; *done_p is set to 1 when the request has
 * finished (successfully or not, see the return value). A finished request
 * still has to be released with ring_request_wait.
 */
ring_status_t ring_request_test(ring_request_t *req, int *done_p);

/* Block until the request finishes (bounded by timeout_s without progress),
 * release it and return its status. */
ring_status_t ring_request_wait(ring_request_t *req);

/* What this peer has sent since the communicator opened (for benchmarks and tests). */
typedef struct ring_comm_stats {
    uint64_t allreduces;       /* finished */
    uint64_t frames_sent;      /* data frames */
    uint64_t payload_bytes;    /* bytes of data frame payloads, as sent (encoded, compressed) */
    uint64_t raw_bytes;        /* the same payloads before lz4 */
    uint64_t frames_lz4;       /* frames sent lz4-compressed */
    double wait_s;             /* seconds allreduces sat idle waiting for a neighbour (in a
                                * ring, mostly for the left one's data): every peer waits for
                                * a late one, which itself waits least */
} ring_comm_stats_t;

/* Copy the counters into *stats_p. Never fails for a valid comm. */
ring_status_t ring_comm_get_stats(const ring_comm_t *comm, ring_comm_stats_t *stats_p);

/* Version of the library, e.g. "0.1.0". */
const char *ring_version(void);

#ifdef __cplusplus
}
#endif
#endif /* RINGD_COMM_H */
