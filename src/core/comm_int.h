/*
 * comm_int.h - the communicator's insides: its types (struct ring_comm, its
 * channels, slots and requests). The functions of each engine module are in
 * that module's header (fail.h, allreduce.h, codec_pipeline.h, requests.h, ...);
 * algorithms outside the engine include algo.h.
 */
#ifndef RING_COMM_INT_H
#define RING_COMM_INT_H

#include <ringd/comm.h>

/* the tensor id of a barrier (an allgather of one byte each): errors name it a barrier */
#define RING_BARRIER_TENSOR_ID UINT32_MAX

#include "errors.h"
#include "autotune_space.h"
#include "peers.h"
#include "schedule.h"
#include "auth.h"
#include "frame_mac.h"
#include "transport.h"
#include "wire.h"
#include "codec.h"

/* The dtype of broadcast and allgather requests: they move bytes, whatever
 * the user's element type (frames carry it as their dtype). */
#define RING_DTYPE_BYTES RING_DTYPE_COUNT

#define RING_MAX_STREAMS 16

/* comm->algo.ops: the algorithms asked, in this order, whether they take an allreduce
 * (hier.c, direct.c, rd.c) */
enum { RING_ALGO_HIER, RING_ALGO_DIRECT, RING_ALGO_RD, RING_ALGO_HOOKS };
#define RING_WINDOW 4 /* frames in flight per channel and direction */

#include "device.h"

/* One frame in flight: the transport request and the header bytes it carries. */
typedef struct ring_slot {
    ring_tp_req_t req;
    unsigned char hdr[RING_FRAME_BYTES + RING_FRAME_TRAILER_BYTES]; /* + trailer: --auth frames */
    int posted;
} ring_slot_t;

/* What an encoded chunk waiting in a tx slot carries besides its bytes. */
typedef struct ring_tx_meta {
    int exp;                               /* value = wire * 2^exp */
    float bound;                           /* upper bound of |value| over the chunk */
    uint32_t bytes;                        /* payload bytes */
    int lz4;                               /* the payload is lz4-compressed */
    int in_zbuf;                           /* ... and lives in the channel's zbuf, not tx */
} ring_tx_meta_t;

/* lz4 auto: per tensor id, whether its chunks have been shrinking lately. */
#define RING_LZ4_TRACKS 16
typedef struct ring_lz4_track {
    uint32_t tensor_id;
    int used;
    int misses;                            /* chunks in a row that did not shrink */
    uint32_t skip;                         /* chunks left to send without trying */
} ring_lz4_track_t;

/* Error feedback: what this peer's encodings lost, per tensor id. */
#define RING_EF_TENSORS 64
typedef struct ring_residual {
    uint32_t tensor_id;
    size_t count;
    float *r;                              /* count floats; NULL = slot free */
} ring_residual_t;

/* timeline.c: --timeline, NULL when off */
typedef struct ring_timeline ring_timeline_t;

typedef struct ring_channel {
    int index;
    ring_tp_ep_t *right[RING_MAX_STREAMS]; /* data goes out on these (we connected) */
    ring_tp_ep_t *left[RING_MAX_STREAMS];  /* data comes in on these (we accepted) */
    ring_slot_t back;                      /* on right[0]: ABORT/CLOSE coming back */
    ring_slot_t send[RING_WINDOW];
    ring_slot_t recv[RING_WINDOW];
    unsigned char *stage;                  /* RING_WINDOW received chunks: reduce-scatter, and
                                            * everything encoded */
    unsigned char *cipher;                 /* --auth encrypt: RING_WINDOW outgoing payloads */
    unsigned char *tx;                     /* codec: one encoded chunk per chunk index */
    size_t tx_slots;                       /* chunks tx (and zbuf, tx_meta) can hold */
    size_t tx_chunk;                       /* ... of this many bytes each (autotune.c
                                            * changes the chunk size between calls) */
    unsigned char *zbuf;                   /* lz4: the same chunks, compressed */
    size_t zcap;                           /* bytes of one zbuf slot */
    unsigned char *unz;                    /* lz4: one decompressed chunk */
    float *scratch;                        /* error feedback: one chunk of fp32 */
    float *local32, *result32;             /* half user buffers: one chunk as fp32 */
    ring_tx_meta_t *tx_meta;
    /* the allreduce in flight */
    ring_range_t part;                     /* this channel's elements of the buffer (the
                                            * whole buffer for collectives with segs) */
    ring_range_t *segs;                    /* collectives.c: size segment ranges of this
                                            * channel (reduce-scatter, allgather, broadcast) */
    ring_sched_t sched;
    uint32_t next_send, next_recv;         /* next frame to post */
    uint32_t sends_done, recvs_done;       /* frames retired, in order */
} ring_channel_t;

struct ring_request {
    ring_comm_t *comm;
    ring_coll_t coll;
    const void *sendbuf;
    void *recvbuf;             /* reduce-scatter: the comm's scratch of count elements */
    void *user_recvbuf;        /* reduce-scatter: the caller's block, filled at finish */
    size_t count;              /* elements of the whole buffer (reduce-scatter: size
                                * blocks; broadcast, allgather: bytes in all) */
    int root;                  /* broadcast: the root's rank */
    size_t *offsets;           /* allgather: size + 1 offsets of each rank's bytes
                                * (owned by the slot, allocated at open) */
    ring_dtype_t dtype;
    ring_op_t op;
    ring_codec_t wire;         /* what its chunks travel as */
    uint32_t tensor_id;
    uint64_t round;
    int in_use;
    int exact;                 /* RING_CALL_EXACT: no codec for this call */
    /* notice.c: a call of an algo with ops->notice that waits long tells its
     * left neighbour (once); idle passes counted, then the clock from then */
    int notice_sent;
    unsigned notice_idle;
    double notice_since;
    const struct ring_algo_ops *algo; /* what runs it instead of the ring (hier.c over the
                                       * local and cross rings, rd.c over pairs); NULL: ring */
    int nonfinite;             /* some input (on some peer) was inf/NaN, or a sum overflowed */
    int skip_nonfinite;        /* the owner's sums are not looked at for inf/NaN: rd.c's
                                * scatters before the last, whose look covers them */
    float *residual;           /* error feedback for this tensor id, or NULL */
    ring_lz4_track_t *lz4;     /* lz4 auto state for this tensor id, or NULL */
    int dev;                   /* device.h: RING_DEV_HOST, _STAGED or _CODEC */
    int dev_send, dev_recv;    /* sendbuf, recvbuf are CUDA device memory */
    void *dev_recvbuf;         /* device.c: the user's CUDA recvbuf, filled from the host
                                * staging at finish; NULL when nothing is staged */
    int started;
    int done;
    ring_status_t status;
};

/*
 * A communicator's failure, written by fail.c alone (ring_comm_fail and its
 * kin); every other file reads it: `comm->fail.error` is the sticky first
 * error every call returns once it is set.
 */
typedef struct ring_fail_state {
    ring_status_t error;
    char error_msg[1024];
    int error_culprit;                     /* the rank it blames, -1: none (hier.c maps it) */
    struct {                               /* a RING_ERR_MISMATCH: the other peer's call */
        int rank;                          /* -1: none seen */
        ring_coll_t coll;
        uint64_t count;
        uint32_t tensor_id;
        unsigned dtype, op;
        int cause;                         /* 0, or RING_CAUSE_ALGO: the same call, run by
                                            * different algorithms */
    } mismatch;
    ring_frame_t abort_seen;               /* the ABORT this comm failed from, if any */
    int abort_seen_valid;
    /* an ABORT of a user's call on the back channel while this peer still ran the
     * set-up (it can overtake the set-up frames, which come the other way):
     * applied once the set-up is over (comm_open.c) */
    ring_frame_t abort_deferred;
    int abort_deferred_valid;
    ring_slot_t abort_right, abort_left;
    /* asking the left neighbour before blaming it (probe mode) */
    ring_slot_t probe_left;                /* the question: an ABORT naming it */
    ring_slot_t waiting_right;             /* our answer to the right one: WAITING */
    double timeout_probe_deadline;         /* the left neighbour was asked; 0: not yet */
    double probe_started, probe_idle;      /* when it was asked, and how long we had waited */
    int probed_by_right;                   /* the right neighbour asked us (it gets WAITING) */
} ring_fail_state_t;

/*
 * The communicator. Its members are grouped by the files that write them:
 * a group is written there (and at open and close, by src/comm_open.c) and
 * only read elsewhere; tools/dev/check-layers.py's OWNERS holds the same list
 * and tests/scripts/layers.test fails on a write anywhere else.
 */
struct ring_comm {
    ring_config_t cfg;
    int rank, size;
    /* the ring's shape: set at open (rendezvous.c, comm_open.c's ring order,
     * connect.c's addresses), read-only once the ring is up */
    struct {
        int pos;                           /* place on the ring (ring_order.c); the
                                            * schedule runs on places, not ranks */
        int *order;                        /* order[place] = rank */
        int left_rank, right_rank;         /* ranks at places pos-1 and pos+1 */
        ring_peer_addr_t *peers;
        /* each rank's host (its --host-id at a rendezvous): the order groups by it */
        char **hosts;
        char order_desc[512];              /* "hostA[0-1] -> hostB[2-3]" */
        char left_addr[300], right_addr[300];
    } topo;
    /* rendezvous.c: the store. Rank 0's file store until close (it cleans up),
     * every rank's file store until the ring is up (ring_rendezvous_refresh) */
    struct {
        struct ring_store *store;
        int all_local;                     /* the rendezvous chose loopback addresses */
        struct ring_store_server *store_server; /* rank 0's tcp store, up until close */
        char url[RING_CONFIG_STR_MAX];     /* where the store is (--rendezvous), "" none */
        int joined;                        /* rdzv_join.c: this peer joined a running ring */
    } rdzv;
    /* src/diag/autotune.c: --autotune (its candidates parsed at open) */
    struct {
        int on;                            /* the hello says chunk 0 */
        ring_autotune_space_t space;       /* its candidates */
        char desc[1024];                   /* what it chose and measured, or "" */
    } tune;
    const ring_tp_ops_t *tp_ops;
    ring_tp_t *tp;
    ring_tp_listener_t *listener;
    int nchannels, nstreams;
    /* codec_pipeline.c and device_codec.c: the fp16/bf16 codec (its settings
     * parsed at open) and its state per tensor id */
    struct {
        ring_codec_t codec;
        /* codec_fit.c: a fp32 and a codec allreduce of fit_bytes, microseconds
         * (rank 0's); 0: not timed */
        uint64_t fit_fp32_us, fit_codec_us, fit_bytes;
        int fp16_scaling;
        int lz4_mode;                      /* 0 off, 1 on, 2 auto */
        int error_feedback;
        const ring_codec_ops_t *kops;      /* conversion kernels for this CPU */
        ring_lz4_track_t lz4_track[RING_LZ4_TRACKS];
        ring_residual_t residuals[RING_EF_TENSORS];
    } enc;
    ring_comm_stats_t stats;
    ring_timeline_t *tl;                   /* timeline.c: --timeline; NULL when off */
    /* collectives.c and coll_plan.c */
    struct {
        void *scratch;                     /* reduce-scatter's partial sums, grow-only */
        size_t scratch_bytes;
        unsigned char *barrier_bytes;      /* a barrier's allgather, size bytes */
    } coll;
    ring_dev_t *dev;                       /* device.h: made at the first CUDA buffer */
    ring_channel_t channels[RING_MAX_CHANNELS];
    /* requests.c: requests run first-in first-out from a fixed ring of slots;
     * allreduce.c (the engine) counts those that finish. A slot's contents are
     * its request's, filled by its call and run by the engine. */
    struct {
        ring_request_t slots[RING_MAX_REQUESTS];
        unsigned head, count;
        uint64_t next_round;
        uint64_t finished;                 /* requests that finished (ok or not) */
    } requests;
    int open_done;                         /* ring_comm_open's set-up is over */
    ring_fail_state_t fail;                /* fail.c's */
    /* the job's secret and what it protects: loaded at open, the keys of each
     * connection made by connect.c (frame_mac.c's tags) */
    struct {
        ring_auth_key_t key;               /* auth.c: the secret (key.on = 0: none) */
        ring_auth_party_t boot_party;      /* the verbs bootstrap's guard: this rank calling
                                            * its right neighbour (connect.c fills it in) */
        int frames;                        /* --auth frames or encrypt: a MAC on every frame */
        int encrypt;                       /* --auth encrypt: data payloads encrypted too */
        ring_frame_macs_t *macs;           /* ... its keys per connection, NULL when off */
        size_t hdr_bytes;                  /* a frame's header: 64, + the trailer with macs */
    } auth;
    /* src/algo: each algorithm's state (written by its own files), and the tables
     * src/comm_open.c installs, through which the engine calls them (algo.h):
     * ops[RING_ALGO_HIER], [RING_ALGO_DIRECT], [RING_ALGO_RD]; NULL when off */
    struct {
        struct ring_hier *hier;            /* hier.c: the local and cross rings, or NULL */
        struct ring_rd *rd;                /* rd.c: the pairs of recursive doubling, or NULL */
        struct ring_direct *direct;        /* direct.c: the host's shared segment, or NULL */
        const struct ring_algo_ops *ops[RING_ALGO_HOOKS];
    } algo;
    /* src/diag/doctor.c: its state (requests and buffers the transport may
     * still hold after a failure, so freed with the comm), and whether it runs */
    struct {
        struct ring_doctor *state;
        int running;
    } doctor;
    /* src/elastic (shrink.c, grow.c) and rdzv_join.c: how the ring came to be */
    struct {
        uint32_t generation;               /* shrinks since the job's first ring */
        int *parent;                       /* parent[rank]: the rank in the ring it was
                                            * shrunk from; NULL when not shrunk */
        int shrunk;                        /* this one was shrunk into another */
        uint32_t next_slot;                /* grow.c: the first join slot not read yet */
        struct ring_probe *probe;          /* neighbour_probe.c's receives on this comm's
                                            * endpoints: freed after they are closed */
        char report[320];                  /* ring_comm_shrink_report */
    } elastic;
    /* progress_thread.c: the progress thread and its lock, NULL when off */
    struct ring_progress *progress;
    /* notice.c: our notice to the left neighbour, and the right neighbour's
     * notice of a call this peer has not begun yet (checked when it begins) */
    struct {
        ring_slot_t left;
        ring_frame_t early;
        int early_valid;
    } notice;
};

#endif /* RING_COMM_INT_H */
