/*
 * ringd/comm.h - the communicator and ring allreduce.
 *
 * Blocking: ring_comm_open blocks until the ring is connected (bounded by
 * connect_timeout_s). ring_allreduce blocks until done (bounded by timeout_s
 * of no progress). ring_allreduce_start never blocks: by default the request
 * makes progress whenever ring_request_test or ring_request_wait is called
 * on any request of the communicator (no hidden thread).
 *
 * Progress thread (setting progress-thread on, RING_PROGRESS_THREAD=on):
 * ring_comm_open starts one thread per communicator that advances started
 * requests by itself, so they move while the caller computes (a framework
 * starting an allreduce per gradient bucket during backward). Locking: the
 * communicator has one mutex; every call below takes it for its duration
 * (ring_request_wait releases it while it sleeps on a condition variable
 * the thread signals when a request finishes or the ring fails); the thread
 * holds it while it works and while it polls the transport, for at most
 * 1 ms at a time, so a call waits at most about that long to get in. The
 * thread enforces timeout_s and fails every request on a dead peer, so a
 * wait always ends. ring_comm_close stops and joins it first.
 *
 * Threads: without the progress thread a communicator is used by one thread
 * at a time; with it, calls from several threads are serialised by its lock
 * (a request must still be waited for exactly once).
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
#include <stdio.h>
#include <ringd/status.h>
#include <ringd/config.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ring_comm ring_comm_t;
typedef struct ring_request ring_request_t;

typedef enum ring_dtype {
    RING_FLOAT32 = 0,
    RING_FLOAT16,   /* IEEE binary16; travels as itself: each ring step adds in fp32 and
                       rounds the partial sum back to fp16 (N-1 roundings at N peers; use
                       an fp32 buffer and --codec fp16 for fp32 partial sums) */
    RING_BFLOAT16,  /* bfloat16; the same, rounding to bfloat16 */
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
RING_API
ring_status_t ring_comm_open(const ring_config_t *cfg, ring_comm_t **comm_p);

/*
 * Tell the neighbours this peer is leaving, close every connection and free
 * the communicator. Pending requests are cancelled. Accepts NULL.
 */
RING_API
void ring_comm_close(ring_comm_t *comm);

RING_API
int ring_comm_rank(const ring_comm_t *comm);
RING_API
int ring_comm_size(const ring_comm_t *comm);
/* The transport the ring runs on ("tcp" or "verbs"): what --transport auto chose. */
RING_API
const char *ring_comm_transport(const ring_comm_t *comm);

/* Time allreduces of `bytes` bytes of float32, exact (RING_CALL_EXACT) and
 * through the ring's codec, in blocks of calls, the fastest block of each,
 * as --codec auto does at open: *fp32_us and *codec_us get rank 0's
 * microseconds per call on every peer. A collective: every peer calls it, with
 * the same bytes. With --codec none both are fp32. A ring of one: both 0. */
RING_API
ring_status_t ring_comm_time_codec(ring_comm_t *comm, size_t bytes, double *fp32_us,
                                   double *codec_us);

/* The ring's order by host, "hostA[0-1] -> hostB[2,3]" (--ring-order). */
RING_API
const char *ring_comm_ring_order(const ring_comm_t *comm);

/* What --autotune chose and measured ("" when it did not run). */
RING_API
const char *ring_comm_autotune_report(const ring_comm_t *comm);

/*
 * Register a buffer this peer will pass to allreduces again and again (like
 * ncclCommRegister): over verbs its bytes then leave without a copy, and
 * CUDA device memory is registered for GPUDirect RDMA (a dma-buf). Other
 * transports accept and ignore it. The buffer must stay allocated until
 * ring_comm_deregister, which must not be called while an allreduce that
 * uses it is in flight. Registration is never needed for correctness.
 */
RING_API
ring_status_t ring_comm_register(ring_comm_t *comm, void *buf, size_t bytes);
RING_API
ring_status_t ring_comm_deregister(ring_comm_t *comm, void *buf);

/*
 * Allreduce count elements: recvbuf = op over all peers of their sendbuf.
 * In place when sendbuf == recvbuf. Every peer must call it with the same
 * count, dtype and op, in the same order as its other allreduces; a peer
 * that does not gets RING_ERR_MISMATCH naming the field, and so do the
 * others. Results are bitwise identical on every peer.
 */
RING_API
ring_status_t ring_allreduce(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                             size_t count, ring_dtype_t dtype, ring_op_t op);

/*
 * Start an allreduce without waiting; tensor_id is checked against the
 * peers' (use it to tell tensors apart). Requests run in the order they
 * were started. Buffers must stay untouched until the request completes.
 * Returns RING_ERR_NO_RESOURCE when RING_MAX_REQUESTS are outstanding.
 */
RING_API
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
RING_API
ring_status_t ring_allreduce_start_flags(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         size_t count, ring_dtype_t dtype, ring_op_t op,
                                         uint32_t tensor_id, unsigned flags,
                                         ring_request_t **req_p);

/*
 * CUDA streams. A stream is a cudaStream_t passed as void * (NULL: the
 * legacy default stream); host buffers ignore it. An allreduce of device
 * memory started with a stream reads sendbuf only after all the work queued
 * on that stream before the call: libringd records an event there, and its
 * own stream waits for that event on the device (never a device-wide
 * synchronisation). ring_request_wait_stream then waits, on the host, only
 * for the ring, and makes `stream` wait, on the device, for the last writes
 * to recvbuf: work queued on that stream afterwards sees the result, and
 * the host does not wait for the GPU. ring_request_wait (and
 * ring_allreduce) also block the host until the result is in recvbuf.
 *
 * Device buffers of one communicator must all be on one GPU (the first one
 * it is given; another one is RING_ERR_INVALID), and with fp16 or bf16 on
 * the wire and fp32 buffers the chunks are encoded, reduced and decoded on
 * that GPU, so PCIe carries the encoded bytes (docs/codec.md). A
 * failed allreduce leaves recvbuf undefined, as for host buffers.
 * ring_allreduce_start and ring_allreduce_start_flags use the legacy
 * default stream.
 */
typedef void *ring_stream_t;

RING_API
ring_status_t ring_allreduce_start_stream(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                          size_t count, ring_dtype_t dtype, ring_op_t op,
                                          uint32_t tensor_id, unsigned flags,
                                          ring_stream_t stream, ring_request_t **req_p);

/* ring_request_wait, except that for device buffers the host does not wait
 * for the GPU: `stream` waits for the result on the device instead. */
RING_API
ring_status_t ring_request_wait_stream(ring_request_t *req, ring_stream_t stream);

/*
 * Make progress without blocking; *done_p is set to 1 when the request has
 * finished (successfully or not, see the return value). A finished request
 * still has to be released with ring_request_wait.
 */
RING_API
ring_status_t ring_request_test(ring_request_t *req, int *done_p);

/* Block until the request finishes (bounded by timeout_s without progress),
 * release it and return its status. */
RING_API
ring_status_t ring_request_wait(ring_request_t *req);

/*
 * Other collectives, as frameworks need them (DDP's constructor calls
 * broadcast and allgather). They are requests like allreduces: started in
 * the same first-in first-out order, with the same fingerprinted frames
 * (round, collective, size, root, tensor id), timeouts and named-peer
 * failures; a peer that calls a different collective at the same point
 * fails every peer with RING_ERR_MISMATCH naming both calls. Broadcast and
 * allgather move bytes unchanged whatever the codec setting (bit-exact:
 * -0.0 stays -0.0, NaN payloads stay), so they take sizes in bytes and any
 * element type. Host memory only (RING_ERR_UNSUPPORTED for CUDA buffers).
 */

/* Broadcast `bytes` bytes of buf from rank `root` to every peer, pipelined
 * along the ring in chunks (root -> root+1 -> ... : N-1 hops, each chunk
 * forwarded as soon as it arrives). Every peer passes the same bytes and root. */
RING_API
ring_status_t ring_broadcast(ring_comm_t *comm, void *buf, size_t bytes, int root);
RING_API
ring_status_t ring_broadcast_start(ring_comm_t *comm, void *buf, size_t bytes, int root,
                                   uint32_t tensor_id, ring_request_t **req_p);

/* Allgather: recvbuf (size * bytes) receives every rank's `bytes` bytes of
 * sendbuf, rank r's at offset r * bytes. In place when sendbuf ==
 * recvbuf + rank * bytes. */
RING_API
ring_status_t ring_allgather(ring_comm_t *comm, const void *sendbuf, void *recvbuf, size_t bytes);
RING_API
ring_status_t ring_allgather_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t bytes, uint32_t tensor_id, ring_request_t **req_p);
/* Allgather with sizes per rank: rank r contributes bytes[r] (size entries,
 * the same array contents on every peer; a peer whose sizes differ fails the
 * ring naming the sizes), placed at offset bytes[0] + ... + bytes[r-1] of
 * recvbuf. sendbuf holds bytes[rank]. The array is copied. */
RING_API
ring_status_t ring_allgatherv_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    const size_t *bytes, uint32_t tensor_id,
                                    ring_request_t **req_p);

/* Reduce-scatter: sendbuf holds size * count elements; recvbuf (count
 * elements) receives block `rank` of the reduction, elements
 * [rank * count, (rank + 1) * count). It runs the first half of the ring
 * allreduce, N-1 steps, with the codec (and flags) as allreduce: the owner's
 * result is what an allreduce would give it. Needs one scratch buffer of the
 * input's size inside the communicator (grown on demand, kept until close). */
RING_API
ring_status_t ring_reduce_scatter(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                  size_t count, ring_dtype_t dtype, ring_op_t op);
RING_API
ring_status_t ring_reduce_scatter_start(ring_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t count, ring_dtype_t dtype, ring_op_t op,
                                        uint32_t tensor_id, unsigned flags,
                                        ring_request_t **req_p);

/* Barrier: returns once every peer has entered it (an allgather of one byte
 * per rank: N-1 ring steps). */
RING_API
ring_status_t ring_barrier(ring_comm_t *comm);
RING_API
ring_status_t ring_barrier_start(ring_comm_t *comm, ring_request_t **req_p);

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
    uint64_t rd_allreduces;    /* of allreduces, those recursive doubling ran (--algo) */
    uint64_t direct_allreduces; /* ... and those the host's shared segment ran (--algo) */
    uint64_t rd_max_bytes;     /* the largest allreduce recursive doubling takes (--algo auto:
                                * --rd-max-bytes, or what --rd-fit chose; 0 when it does not run) */
    uint64_t rh_allreduces;    /* of allreduces, those Rabenseifner's algorithm ran */
    uint64_t rh_max_bytes;     /* the largest allreduce it takes (--rh-max-bytes or what
                                * --rd-fit chose; 0 when it does not run) */
    uint64_t codec;            /* what allreduces travel as: 0 fp32, 1 fp16, 2 bf16 (--codec,
                                * or what --codec auto chose) */
    uint64_t codec_fit_bytes;  /* --codec auto: the size of the allreduces timed at open, */
    uint64_t codec_fit_fp32_us; /* and rank 0's microseconds per call exact fp32 and */
    uint64_t codec_fit_codec_us; /* through fp16; 0: not timed */
} ring_comm_stats_t;

/* Copy the counters into *stats_p. Never fails for a valid comm. */
RING_API
ring_status_t ring_comm_get_stats(const ring_comm_t *comm, ring_comm_stats_t *stats_p);

/*
 * The ring doctor: every edge of the ring (a peer and its right neighbour,
 * the direction its data flows) measured on its own, the others idle, so a
 * slow link shows as itself instead of slowing every measurement the way a
 * whole-ring allreduce would. The protocol is described in src/doctor.c.
 */
#define RING_DOCTOR_NAME_MAX 320
#define RING_DOCTOR_DEFAULT_BYTES ((size_t)8 << 20)
#define RING_DOCTOR_SLOW 0.8 /* an edge below this fraction of the median bandwidth is slow */

typedef struct ring_edge_report {
    int from_rank, to_rank;                /* data flows from_rank -> to_rank, its right
                                            * neighbour on the ring */
    char from_host[RING_DOCTOR_NAME_MAX];  /* the host as the ring knows it: the host name a
                                            * rendezvous published, else the peer list's host */
    char to_host[RING_DOCTOR_NAME_MAX];
    char from_addr[RING_DOCTOR_NAME_MAX];  /* "host:port" the peer listens on */
    char to_addr[RING_DOCTOR_NAME_MAX];
    double bytes_per_s;                    /* bytes / second of the best lap (its bursts back
                                            * to back, timed as a whole) */
    double latency_s;                      /* one way: half the median round trip of a
                                            * 64-byte frame */
    double median_ratio;                   /* bytes_per_s / the median over all edges */
    size_t burst_bytes;                    /* bytes of a timed burst (fewer than asked on an
                                            * edge too slow to move them in 0.2 s) */
    int bursts;                            /* timed bursts, over all laps */
    int slow;                              /* median_ratio < RING_DOCTOR_SLOW */
} ring_edge_report_t;

/*
 * Measure every edge of the ring: bandwidth (bursts of up to `bytes`, 0 =
 * RING_DOCTOR_DEFAULT_BYTES, at least 4 KiB) and one-way latency. A
 * collective: every peer calls it at the same point, with no allreduce in
 * flight (right after ring_comm_open, or between allreduces); peers may pass
 * different sizes (each sender picks its own bursts). On success edges[p],
 * for every place p = 0..size-1 on the ring, holds the edge from the peer at
 * place p to the one at place p+1 (mod size), the same on every peer, with
 * slow set where the bandwidth is more than 20% below the median. A ring of
 * one has no edges: edges[0] then says 0 -> 0 with no bursts.
 * Blocks for a fraction of a second per fast edge, a few seconds per slow one
 * (5 laps round the ring); every wait is bounded by the timeout setting. A
 * failure (a peer that dies, hangs, leaves or runs allreduces instead) is
 * the comm's sticky error, naming the peer as usual.
 */
RING_API
ring_status_t ring_comm_doctor(ring_comm_t *comm, size_t bytes, ring_edge_report_t *edges);

/*
 * Print the doctor's report for comm (its size entries): a table (edge, from
 * rank and host, to rank and host, MB/s, latency in us, bursts, flag), the
 * median, and a final line per slow edge ("slow edge: rank 2 (h2) -> rank 3
 * (h3): 48 MB/s, 49% of the median 98 MB/s") or "no slow edge: ...".
 * Returns the number of slow edges.
 */
RING_API
int ring_doctor_print(const ring_comm_t *comm, const ring_edge_report_t *edges, FILE *out);

/* Version of the library, e.g. "0.1.0". */
RING_API
const char *ring_version(void);

#ifdef __cplusplus
}
#endif
#endif /* RINGD_COMM_H */
