/*
 * comm_int.h - the communicator's insides, shared by comm_open.c (open, close), requests.c,
 * handshake.c (hellos), allreduce.c (the request engine) and fail.c
 * (sticky errors and telling the neighbours).
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

/* comm->algo_ops: the algorithms asked, in this order, whether they take an allreduce
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

struct ring_comm {
    ring_config_t cfg;
    int rank, size;
    int pos;                               /* place on the ring (ring_order.c); the
                                            * schedule runs on places, not ranks */
    int *order;                            /* order[place] = rank */
    int left_rank, right_rank;             /* ranks at places pos-1 and pos+1 */
    ring_peer_addr_t *peers;
    /* each rank's host (its --host-id at a rendezvous): the ring's order groups by it */
    char **hosts;
    char order_desc[512];                  /* "hostA[0-1] -> hostB[2-3]" */
    /* the rendezvous store: rank 0's file store until close (it cleans up), every
     * rank's file store until the ring is up (ring_rendezvous_refresh) */
    struct ring_store *store;
    int rdzv_all_local;                    /* the rendezvous chose loopback addresses */
    struct ring_store_server *store_server; /* rank 0's tcp store, up until close */
    char left_addr[300], right_addr[300];
    int autotuned;                         /* --autotune on: the hello says chunk 0 */
    ring_autotune_space_t autotune;        /* its candidates (autotune.c) */
    char autotune_desc[1024];              /* what it chose and measured, or "" */
    const ring_tp_ops_t *tp_ops;
    ring_tp_t *tp;
    ring_tp_listener_t *listener;
    int nchannels, nstreams;
    ring_codec_t codec;
    int fp16_scaling;
    int lz4_mode;                          /* 0 off, 1 on, 2 auto */
    int error_feedback;
    const ring_codec_ops_t *kops;          /* conversion kernels for this CPU */
    ring_lz4_track_t lz4_track[RING_LZ4_TRACKS];
    ring_comm_stats_t stats;
    ring_timeline_t *tl;                   /* timeline.c: --timeline; NULL when off */
    ring_residual_t residuals[RING_EF_TENSORS];
    void *coll_scratch;                    /* collectives.c: reduce-scatter's partial sums,
                                            * grow-only */
    size_t coll_scratch_bytes;
    unsigned char *barrier_bytes;          /* collectives.c: a barrier's allgather, size bytes */
    ring_dev_t *dev;                       /* device.h: made at the first CUDA buffer */
    ring_channel_t channels[RING_MAX_CHANNELS];
    /* requests run first-in first-out from a fixed ring of slots */
    ring_request_t reqs[RING_MAX_REQUESTS];
    unsigned req_head, req_count;
    uint64_t next_round;
    /* sticky first error */
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
    int open_done;                         /* ring_comm_open's set-up is over */
    /* an ABORT of a user's call on the back channel while this peer still ran the
     * set-up (it can overtake the set-up frames, which come the other way):
     * applied once the set-up is over (comm_open.c) */
    ring_frame_t abort_deferred;
    int abort_deferred_valid;
    ring_slot_t abort_right, abort_left;
    /* fail.c: asking the left neighbour before blaming it (probe mode) */
    ring_slot_t probe_left;                /* the question: an ABORT naming it */
    ring_slot_t waiting_right;             /* our answer to the right one: WAITING */
    ring_auth_key_t auth_key;              /* auth.c: the job's secret (auth_key.on = 0: none) */
    ring_auth_party_t boot_party;          /* the verbs bootstrap's guard: this rank calling
                                            * its right neighbour (connect.c fills it in) */
    int auth_frames;                       /* --auth frames or encrypt: a MAC on every frame
                                            * (frame_mac.c) */
    int auth_encrypt;                      /* --auth encrypt: data payloads encrypted too */
    ring_frame_macs_t *macs;               /* ... its keys per connection, NULL when off */
    size_t hdr_bytes;                      /* a frame's header: 64, + the trailer with macs */
    double timeout_probe_deadline;         /* fail.c: the left neighbour was asked; 0: not yet */
    double probe_started, probe_idle;      /* when it was asked, and how long we had waited */
    int probed_by_right;                   /* the right neighbour asked us (it gets WAITING) */
    /* doctor.c: its state (requests and buffers the transport may still hold
     * after a failure, so freed with the comm), and whether it is running */
    struct ring_hier *hier;                /* hier.c: the local and cross rings, or NULL */
    struct ring_rd *rd;                    /* rd.c: the pairs of recursive doubling, or NULL */
    struct ring_direct *direct;            /* direct.c: the host's shared segment, or NULL */
    /* how the engine calls them: algo_ops[RING_ALGO_HIER], [RING_ALGO_RD]; NULL when off */
    const struct ring_algo_ops *algo_ops[RING_ALGO_HOOKS];
    struct ring_doctor *doctor;
    int doctor_running;
    /* progress.c: the progress thread and its lock, NULL when off */
    struct ring_progress *progress;
    uint64_t requests_finished;            /* requests that finished (ok or not) */
    /* notice.c: our notice to the left neighbour, and the right neighbour's
     * notice of a call this peer has not begun yet (checked when it begins) */
    ring_slot_t notice_left;
    ring_frame_t notice_early;
    int notice_early_valid;
};

/* An algorithm other than the ring, run over sub-communicators (hier.c, rd.c);
 * the engine calls it through comm->algo_ops (it sits above the engine, which
 * must not call up into it by name) and asks each in turn whether it takes an
 * allreduce. */
typedef struct ring_algo_ops {
    /* 1 when it runs this allreduce (e.g. hier.c: fp32, host memory, large enough) */
    int (*takes)(const ring_comm_t *comm, const ring_request_t *req);
    ring_status_t (*begin)(ring_comm_t *comm, ring_request_t *req);
    /* advance the request under way; *finished_p = 1 once its result is in recvbuf */
    ring_status_t (*progress)(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                              int *finished_p);
    /* sleep in the sub-communicator under way instead of the ring: 1 when it did
     * (0 when it has nothing under way) */
    int (*wait)(ring_comm_t *comm, int timeout_ms);
    /* NULL, or: the ring just failed (comm->error is set): tell the peers it
     * reaches by other ways than the ring (rd.c: its pairs) */
    void (*on_fail)(ring_comm_t *comm);
    /* NULL, or: progress fails a request that waits too long, naming whom it
     * waits for, and this does so at once (when a neighbour asks); the ring's
     * timeout, which knows only its neighbours, stays out of it */
    ring_status_t (*fail_timeout)(ring_comm_t *comm, ring_request_t *req, double waited);
    /* 1 while it still runs the request (fail_timeout applies then) */
    int (*busy)(const ring_comm_t *comm);
    /* 1: a request that waits long sends its header to the left neighbour as an
     * empty notice frame (notice.c): a neighbour that called something else
     * (another count, dtype, collective) sees the difference, as if both ran the
     * ring; a call that does not wait sends nothing */
    int notice;
    /* 1: while busy, it waits for every peer (direct.c), so a neighbour whose
     * connection closes fails the call at once, not when the ring needs it */
    int needs_every_peer;
} ring_algo_ops_t;

/* handshake.c */
void ring_hello_fill(const ring_comm_t *comm, int channel, int stream, ring_hello_t *h);
ring_status_t ring_hello_check(const ring_comm_t *comm, const ring_hello_t *mine,
                               const ring_hello_t *theirs, const char *peer_addr);
/* The first setting two hellos differ in (1..), or 0; and its name, with the option
 * that sets it, for messages ("codec (RING_CODEC)"; "a setting" when unknown). */
unsigned ring_hello_first_diff(const ring_hello_t *mine, const ring_hello_t *theirs);
const char *ring_hello_field_name(unsigned field);

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
    /* rd.c: a ring's failure passed on through one of its pairs, whose ranks are
     * not the ring's: who saw it and whom it blames, as ring ranks + 1 (0: none);
     * the ABORT carries them in its detail field */
    int relay_origin, relay_culprit;
} ring_fault_t;

void ring_phase_format(const ring_comm_t *comm, const ring_request_t *req, int step, char *buf,
                       size_t len);
void ring_phase_format_round(const ring_comm_t *comm, uint64_t round, ring_coll_t coll, int step,
                             char *buf, size_t len);
ring_status_t ring_comm_fail(ring_comm_t *comm, const ring_fault_t *fault, const char *fmt, ...)
    RING_PRINTF(3, 4);
ring_status_t ring_comm_fail_from_frame(ring_comm_t *comm, const ring_frame_t *f, int from_rank);
void ring_comm_send_close(ring_comm_t *comm);
/* fail.c: a control frame (ABORT, CLOSE, WAITING, a notice) with req's header,
 * and its send on ep through slot (0: slot still busy with the one before) */
void ring_ctrl_fill(const ring_comm_t *comm, const ring_request_t *req, ring_frame_type_t type,
                    ring_frame_t *f);
int ring_ctrl_post(ring_comm_t *comm, ring_slot_t *slot, ring_tp_ep_t *ep, const ring_frame_t *f);
/* Give the ABORTs posted on abort_left/abort_right a moment (0.2 s) to leave. */
void ring_abort_flush(ring_comm_t *comm);
const char *ring_rank_addr(const ring_comm_t *comm, int rank, char *buf, size_t len);
ring_request_t *ring_comm_active_request(ring_comm_t *comm);
int ring_comm_current_step(const ring_comm_t *comm);

/* codec_pipeline.c: the fp16/bf16 data path */
size_t ring_enc_elem_bytes(const ring_comm_t *comm, const ring_request_t *req);
ring_status_t ring_enc_channel_alloc(ring_comm_t *comm, ring_channel_t *ch);
ring_status_t ring_enc_channel_reserve(ring_comm_t *comm, ring_channel_t *ch,
                                       const ring_request_t *req);
ring_codec_t ring_enc_wire(const ring_comm_t *comm, const ring_request_t *req);
ring_tx_meta_t *ring_enc_tx_meta(ring_channel_t *ch, uint32_t q);
void ring_enc_channel_free(ring_channel_t *ch);
ring_status_t ring_enc_request_begin(ring_comm_t *comm, ring_request_t *req);
void ring_enc_comm_free(ring_comm_t *comm);
void ring_enc_first(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                    const ring_sched_frame_t *sf, uint32_t q);
ring_status_t ring_enc_combine(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                               const ring_sched_frame_t *sf, uint32_t q, const ring_frame_t *f);
void ring_enc_meta_put(const ring_tx_meta_t *meta, ring_frame_t *f);
const void *ring_enc_tx_payload(const ring_comm_t *comm, const ring_channel_t *ch, uint32_t q);

/* codec_pipeline.c, for device_codec.c: the exponent a chunk bounded by `bound`
 * travels with; a queued chunk's meta; a tx slot's host bytes; and, once they are
 * final, the overflow check and lz4 of the chunk in tx slot of frame q */
int ring_enc_choose_exp(const ring_comm_t *comm, const ring_request_t *req, float bound);
int ring_enc_channel_grows(const ring_channel_t *ch, const ring_request_t *req);
/* A received frame's meta and encoded values (decompressed when it came as lz4). */
ring_status_t ring_enc_received(ring_comm_t *comm, ring_channel_t *ch, const ring_request_t *req,
                                const ring_sched_frame_t *sf, uint32_t q, const ring_frame_t *f,
                                ring_tx_meta_t *in_meta, const uint16_t **in_p);
void ring_enc_meta_set(ring_tx_meta_t *meta, int e, float bound, size_t n);
uint16_t *ring_enc_tx_slot(const ring_comm_t *comm, ring_channel_t *ch, uint32_t q);
void ring_enc_tx_final(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req, uint32_t q,
                       float bound, int e);

/* doctor.c */
void ring_doctor_free(ring_comm_t *comm);

/* fault_inject.c: ops wrapped so a test's RING_FAULT damages frames on the way out,
 * or ops themselves when RING_FAULT names no wire fault */
const ring_tp_ops_t *ring_fault_wrap(const ring_tp_ops_t *ops);

/* tp_lend.c: the hooks the transport gets in params (after comm->auth_key is loaded) */
void ring_comm_tp_lend(ring_comm_t *comm, ring_tp_params_t *params);

/* collectives.c: what is not allreduce */
extern const char *const ring_coll_names[RING_COLL_COUNT];
size_t ring_dtype_size(ring_dtype_t dtype); /* 1 for RING_DTYPE_BYTES */
ring_status_t ring_coll_comm_alloc(ring_comm_t *comm);
void ring_coll_comm_free(ring_comm_t *comm);
void ring_coll_channel_layout(ring_comm_t *comm, ring_channel_t *ch, const ring_request_t *req);
ring_status_t ring_coll_request_begin(ring_comm_t *comm, ring_request_t *req);
void ring_coll_request_finish(ring_comm_t *comm, ring_request_t *req, ring_status_t status);
size_t ring_coll_describe(ring_coll_t coll, uint64_t round, uint64_t count, unsigned dtype,
                          unsigned op, uint32_t tensor_id, int root, char *buf, size_t len);

/* requests.c, with the comm's lock held: the next free request slot (zeroed; fill
 * in the call), then queue it and start it */
ring_status_t ring_request_next(ring_comm_t *comm, ring_request_t **slot_p);
ring_status_t ring_request_push(ring_comm_t *comm, ring_request_t *req, ring_request_t **req_p);

/* fail.c: fail with what this peer waits for; or, when the timeout has passed
 * (idle seconds without progress), ask the left neighbour first: returns 1
 * once the comm has failed */
ring_status_t ring_comm_fail_timeout(ring_comm_t *comm, ring_request_t *req, double waited);
int ring_comm_check_timeout(ring_comm_t *comm, double idle);
/* fail.c, probe mode (timeout_probe_deadline != 0): the left neighbour said it
 * waits too (WAITING, with when it will decide), so wait longer; and whether
 * the wait is over (returns 1 once the comm has failed, blaming the left one) */
void ring_comm_probe_extend(ring_comm_t *comm, const ring_frame_t *waiting);
int ring_comm_probe_check(ring_comm_t *comm);
/* fail.c: ring_comm_fail for a fault that names a peer: the message is the phase
 * of req at fault->step, ": ", then fmt, in which "{peer}" stands for "rank N
 * (its address)" of fault->culprit */
ring_status_t ring_comm_fail_peer(ring_comm_t *comm, const ring_request_t *req,
                                  const ring_fault_t *fault, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* fail.c, --auth frames: fail because what came from peer on a connection does
 * not carry a valid tag (altered or injected there) */
ring_status_t ring_comm_fail_tag(ring_comm_t *comm, ring_request_t *req, int step, int peer,
                                 const char *what);

/* notice.c: req (an algo with ops->notice) made no progress in a pass: after
 * RING_NOTICE_AFTER_S of that, send its header to the left neighbour */
void ring_notice_idle(ring_comm_t *comm, ring_request_t *req);
/* notice.c: the right neighbour's notice f came on the back channel: check it
 * against the call of its round (now, or when that call begins) */
ring_status_t ring_notice_received(ring_comm_t *comm, const ring_frame_t *f);
/* notice.c: req begins (its algorithm chosen): check a notice that came early */
ring_status_t ring_notice_begin(ring_comm_t *comm, ring_request_t *req);

/* allreduce.c */
int ring_comm_progress(ring_comm_t *comm);
ring_status_t ring_comm_wait_until(ring_comm_t *comm, ring_request_t *req);
/* sleep up to ms in whatever the request under way waits on (the ring's transport,
 * or a sub-communicator of hier.c or rd.c) */
void ring_comm_sleep(ring_comm_t *comm, int ms);
void ring_channel_post_back(ring_comm_t *comm, ring_channel_t *ch);

/* frame_check.c: check a received frame against the call and what the schedule
 * expects; fails the comm with a message if not */
ring_status_t ring_frame_check(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                               const ring_sched_frame_t *sf, ring_slot_t *slot, ring_tp_ep_t *ep,
                               ring_frame_t *f_out);
/* frame_check.c: 1 when frame f belongs to the same call as req (round,
 * collective and arguments) */
int ring_frame_matches_call(const ring_request_t *req, const ring_frame_t *f);
/* frame_check.c: fail on a transport failure of a connection to rank peer, or
 * because it closed its communicator during req */
ring_status_t ring_comm_fail_link(ring_comm_t *comm, ring_request_t *req, int step, int peer,
                                  const ring_tp_ep_t *ep, const ring_tp_req_t *treq);
ring_status_t ring_comm_fail_closed(ring_comm_t *comm, ring_request_t *req, int step, int peer);
/* frame_check.c, --auth frames: 0 when what slot received on ep carries a valid
 * tag (or frames are not tagged); its payload is what followed the header */
int ring_slot_tag_ok(ring_comm_t *comm, const ring_tp_ep_t *ep, const ring_slot_t *slot);

#endif /* RING_COMM_INT_H */
