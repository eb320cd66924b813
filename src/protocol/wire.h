/*
 * wire.h - what travels between peers, in explicit widths and byte order
 * (little-endian), encoded and decoded field by field, never by memcpy of
 * a struct.
 *
 * hello (128 bytes): the first message on every connection, both ways.
 * frame header (64 bytes): in front of every chunk, and alone for ABORT
 * (a peer saw a failure and tells its neighbours) and CLOSE (a peer left).
 */
#ifndef RING_WIRE_H
#define RING_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "magic.h"

#define RING_WIRE_VERSION 4 /* 2: the collective in the op byte; 3: --algo in the hello,
                              * notice frames (rd.c); 4: notices go left, and only from
                              * calls that wait (notice.c) */
#define RING_HELLO_BYTES 128
#define RING_FRAME_BYTES 64
#define RING_HELLO_JOB_TEXT 40

typedef struct ring_hello {
    uint32_t magic;
    uint16_t version;
    uint64_t job_hash;
    uint32_t rank;
    uint32_t world_size;
    uint32_t channel;        /* which channel and stream this connection serves */
    uint32_t stream;
    uint32_t channels;
    uint32_t streams;
    uint64_t chunk_bytes;
    uint32_t transport;      /* 1 = tcp, 2 = verbs */
    uint8_t codec;           /* ring_codec_t: what travels on the wire */
    uint8_t fp16_scaling;    /* 1 when fp16 chunks carry a power-of-two scale */
    uint8_t auth_frames;     /* 1 with --auth frames: every frame carries a tag (frame_mac.h) */
    uint8_t algo;            /* --algo: 0 auto, 1 ring, 2 rd (rd.c), 3 direct (direct.c) */
    uint64_t rd_max_bytes;   /* --rd-max-bytes: not on the wire, only in settings_hash */
    uint64_t rd_fit;         /* --rd-fit, once auto is resolved (1: on): the same */
    uint64_t rh_max_bytes;   /* --rh-max-bytes: the same */
    uint64_t rh_piece_bytes; /* --rh-piece-bytes: the same */
    uint64_t peers_hash;
    uint64_t settings_hash;  /* all of the above that must agree, hashed */
    char job_text[RING_HELLO_JOB_TEXT + 1]; /* start of the job id, for messages */
} ring_hello_t;

/* What a gradient travels as (hello field and engine setting). */
typedef enum ring_codec {
    RING_CODEC_NONE = 0, /* the user's dtype, unchanged */
    RING_CODEC_FP16 = 1,
    RING_CODEC_BF16 = 2
} ring_codec_t;

/* flags of a DATA frame */
#define RING_FRAME_NONFINITE 0x1 /* some input the sender knows of was inf/NaN, or a sum overflowed */
#define RING_FRAME_LZ4 0x2       /* the payload is lz4-compressed (raw size: elements x 2) */
#define RING_FRAME_NOTICE 0x4    /* an empty frame with the header of a call another
                                  * algorithm runs, to the left neighbour (notice.c) */
#define RING_FRAME_SEALED 0x8    /* --auth encrypt: the payload is encrypted (frame_mac.h) */

typedef enum ring_frame_type {
    RING_FRAME_DATA = 1,
    RING_FRAME_ABORT = 2,
    RING_FRAME_CLOSE = 3,
    RING_FRAME_DOCTOR =
        4, /* the ring doctor's measurements (diag/doctor.c), before any allreduce */
    RING_FRAME_WAITING = 5 /* fail.c: "I wait too", only to a right neighbour that asked */
} ring_frame_type_t;

/* a DOCTOR frame's kind, in its `step` (the protocol: diag/doctor.c) */
enum ring_doctor_kind {
    DOC_PING = 1,
    DOC_PONG,
    DOC_BURST,
    DOC_DATA,
    DOC_ACK,
    DOC_TURN,
    DOC_RESULTS
};

/* The collective a DATA frame belongs to (and an ABORT's origin was in). */
typedef enum ring_coll {
    RING_COLL_ALLREDUCE = 0,
    RING_COLL_REDUCE_SCATTER,
    RING_COLL_ALLGATHER,
    RING_COLL_BROADCAST,
    RING_COLL_COUNT
} ring_coll_t;

/* sys_errno of an ABORT: the culprit closed its communicator (not a crash) */
#define RING_CAUSE_CLOSED (-1)
/* ... of a PROTOCOL ABORT: what the culprit sent has no valid tag (--auth frames) */
#define RING_CAUSE_BAD_TAG (-2)
/* ... of a MISMATCH ABORT: the same call, run by different algorithms (the ring on
 * one peer, recursive doubling or the direct allreduce on the other) */
#define RING_CAUSE_ALGO (-3)
/* ... of a MISMATCH ABORT at start-up: the origin's hello and the culprit's differ in
 * the setting whose number (ring_hello_field_name) is in the frame's detail */
#define RING_CAUSE_SETTINGS (-4)
/* An ABORT's channel byte: the origin had finished ring_comm_open, so the call
 * that failed is a user's, and every set-up frame it owed was sent before */
#define RING_ABORT_AFTER_OPEN 0x01

/*
 * In a DATA frame with a codec, detail carries the chunk's scale and bound:
 * bits 0-31 the fp32 bits of an upper bound of |value| over the chunk,
 * bits 32-39 the exponent e (int8) such that value = wire * 2^e.
 * In a broadcast's DATA frames (never encoded) detail is the root's rank.
 * The op byte carries op in its low 4 bits and coll in its high 4 bits.
 * In an ABORT frame, round/count/dtype/op/coll/tensor_id/step describe the
 * origin's collective; for a mismatch, detail/chunk/flags carry the
 * culprit's count, tensor id and dtype | (op | coll << 4) << 8.
 */
typedef struct ring_frame {
    uint32_t magic;
    uint8_t type;
    uint8_t dtype;
    uint8_t op;              /* ring_op_t, 0..15 */
    uint8_t coll;            /* ring_coll_t, 0..15: shares the op byte on the wire */
    uint8_t channel;
    uint64_t round;
    uint64_t count;          /* elements of the whole allreduce */
    uint32_t tensor_id;
    uint32_t chunk;
    uint16_t step;
    uint16_t flags;
    uint32_t payload_bytes;
    /* ABORT only: who saw what */
    uint32_t origin_rank;    /* the peer that detected the failure */
    uint32_t culprit_rank;   /* the peer it blames */
    uint32_t status;         /* ring_status_t */
    int32_t sys_errno;
    uint64_t detail;         /* e.g. the culprit's count in a size mismatch */
} ring_frame_t;

void ring_hello_encode(const ring_hello_t *h, unsigned char out[RING_HELLO_BYTES]);
/* Returns 0, or -1 when the bytes do not start with the hello magic. */
int ring_hello_decode(const unsigned char in[RING_HELLO_BYTES], ring_hello_t *h);

void ring_frame_encode(const ring_frame_t *f, unsigned char out[RING_FRAME_BYTES]);
/* Returns 0, or -1 when the bytes do not start with the frame magic. */
int ring_frame_decode(const unsigned char in[RING_FRAME_BYTES], ring_frame_t *f);


#endif /* RING_WIRE_H */
