/* direct_int.h - the direct allreduce's shared segment, shared by direct.c (set-up, small
 * calls), direct_big.c (large calls) and direct_board.c (waits and failures). */
#ifndef RING_DIRECT_INT_H
#define RING_DIRECT_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>


#define DIRECT_MAGIC 0x52444933u /* "RDI3": the sums lie in the big slots */
#define DIRECT_WHY_BYTES 1024 /* comm->fail.error_msg */
/* a large call goes through the segment in pieces: each peer's big slots hold one
 * piece per parity, so the segment stays within the budget whatever the buffer's
 * size (pieces of 1 MiB up to N = 7, smaller above) */
#define DIRECT_SEG_BUDGET ((size_t)16 << 20)
#define DIRECT_PIECE_MAX ((size_t)4 << 20) /* 2.6 MiB at N = 2 ran 4-16 MiB 10 % faster
                                             * than 1 MiB (2-core VM) */
#define DIRECT_PIECE_MIN ((size_t)64 << 10)
/* calls of at least this many bytes write their result with non-temporal stores
 * (direct_big.c): past a core's L2 the caller reads it from farther out anyway.
 * On a 2-core VM, n=2 (busbw): 16 MiB 5.6-5.8 GB/s against 5.2, 64 MiB 5.1-5.3
 * against 4.0, 256 MiB 4.7-4.8 against 3.8 */
#define DIRECT_STREAM_MIN ((size_t)8 << 20)

/* A board's counters, each round + 1 (or step + 1) of the last one done. */
enum direct_counter {
    DIRECT_POSTED,     /* small: its buffer is in its slot */
    DIRECT_READ,       /* small: it added every slot of that round */
    DIRECT_BIG_POSTED, /* large: its piece is in its big slot */
    DIRECT_BIG_REDUCED, /* large: it wrote its slice of the piece's sum (direct_sum) */
    DIRECT_COUNTERS
};

/* A call, as a failed peer's board tells it; rank -1: none. */
typedef struct direct_call {
    int32_t rank;
    uint32_t coll, tensor_id, dtype, op, pad;
    uint64_t count;
} direct_call_t;

/* One place's counters and, once its comm failed, why. Only its peer writes it. */
typedef struct direct_board {
    struct {
        _Atomic uint64_t v;
        char pad[56];
    } ctr[DIRECT_COUNTERS];
    _Atomic int32_t closed;       /* 1 once its comm closed (ring_direct_close) */
    _Atomic int32_t failed;       /* 0, or the ring_status_t its comm failed with */
    int32_t culprit;              /* ... the rank it blamed, -1: none */
    char why[DIRECT_WHY_BYTES];   /* ... and its message (written before failed) */
    /* a mismatch: its own call and the other one (comm->fail.mismatch), so that the
     * ABORTs of the peers that relay it carry the call that differs from theirs */
    direct_call_t own, other;
    int32_t mm_cause;             /* comm->fail.mismatch.cause */
    /* microseconds of the monotonic clock at its last progress pass, whatever it
     * ran (direct.c's tick): a peer that waits here on it tells one stuck in
     * another call (fresh) from one that stopped (stale) */
    _Atomic uint64_t alive_us;
    /* large: step + 1 of the last piece whose slice it added held an inf or a
     * NaN (written before its DIRECT_BIG_REDUCED counter moves) */
    _Atomic uint64_t nonfinite_step;
    char pad2[40];
} direct_board_t;

/* What a slot holds: the call, then its buffer (or a piece of it: off, in floats). */
typedef struct direct_slot_hdr {
    uint64_t round, count, off;
    uint32_t tensor_id, op;
    char pad[32];
} direct_slot_hdr_t;

/* The segment's first line: a peer that waits long sleeps on bell (a futex), and
 * whoever moves a counter rings it when someone sleeps. */
typedef struct direct_seg_hdr {
    uint32_t magic, places;
    uint64_t max_bytes, seg_bytes, piece_bytes;
    _Atomic uint32_t bell, sleepers;
    char pad[24];
} direct_seg_hdr_t;

struct ring_direct {
    unsigned char *seg;          /* the mapping; it starts with a direct_seg_hdr_t */
    size_t seg_bytes, max_bytes, slot_bytes, big_slot_bytes, big_min_bytes, piece_bytes;
    int places;
    direct_board_t *boards;      /* by place */
    unsigned char *small_slots, *big_slots;
    /* the request under way */
    ring_request_t *req;
    int posted;                  /* small: its buffer is in our slot */
    int phase;                   /* large: 0 post the piece, 1 add our slice, 2 copy out */
    size_t off;                  /* large: floats of the request done */
    uint64_t step;               /* large: pieces done since open, the same on every peer */
    double last_move;            /* when it last moved, for the timeout ... */
    int moved;                   /* ... or 1: it moved since, the clock not read yet (a
                                  * small call reads it only when it has to wait) */
    uint64_t parity_round[2];    /* small: round + 1 last written to each slot, 0: none */
    /* what it waits for, for a neighbour's timeout (fail_timeout) */
    enum direct_counter wait_ctr;
    uint64_t wait_want;
};

static inline direct_seg_hdr_t *direct_hdr(const struct ring_direct *d)
{
    return (direct_seg_hdr_t *)d->seg;
}

static inline direct_slot_hdr_t *direct_slot(const struct ring_direct *d, int place,
                                             uint64_t round)
{
    return (direct_slot_hdr_t *)(d->small_slots +
                                 ((size_t)place * 2 + (size_t)(round & 1)) * d->slot_bytes);
}

static inline direct_slot_hdr_t *direct_big_slot(const struct ring_direct *d, int place,
                                                 uint64_t step)
{
    return (direct_slot_hdr_t *)(d->big_slots +
                                 ((size_t)place * 2 + (size_t)(step & 1)) * d->big_slot_bytes);
}

static inline float *direct_slot_data(direct_slot_hdr_t *h)
{
    return (float *)(h + 1);
}

/* Where the sum of place q's slice of step s's piece lies: in place of the next
 * place's input for that slice, which only q reads (and reads in the pass that
 * writes the sum). Writing into lines it has just read is what makes this fast:
 * on a 2-core VM at N = 2, 1 MiB took 150 us against 190 with a separate result,
 * 128 KiB 13.5 against 17.5 (the peer's copies of the lines it read are only
 * invalidated, where a separate result's are fetched first). */
static inline float *direct_sum(const struct ring_direct *d, int q, uint64_t step)
{
    return direct_slot_data(direct_big_slot(d, (q + 1) % d->places, step));
}

/* direct_board.c */
/* Set our counter c to v, and wake the peers that sleep on the segment. */
void ring_direct_set(struct ring_direct *d, int place, enum direct_counter c, uint64_t v);
/* Wake the peers that sleep on the segment (something on a board changed). */
void ring_direct_ring(struct ring_direct *d);
/* Sleep until a counter moves or timeout_ms pass, unless the wait is over. */
void ring_direct_sleep(ring_comm_t *comm, int timeout_ms);

/* The first peer (in place order) whose counter c is below want, or -1; notes what
 * this peer waits for. */
int ring_direct_lagging(ring_comm_t *comm, enum direct_counter c, uint64_t want);
/* Of the places the last ring_direct_lagging waits for, the one whose last sign of
 * life (its heartbeat) is oldest; *fresh_p (may be NULL): 1 when even that one made
 * a progress pass within half a timeout (alive, stuck in a call of its own). -1: none. */
int ring_direct_culprit(ring_comm_t *comm, int *fresh_p);
/* timeouts a peer waits on the segment for peers that are all alive but stuck */
#define DIRECT_PATIENCE 3
/* Some peer's comm failed (its board says so): fail ours with its words. */
ring_status_t ring_direct_relay_failure(ring_comm_t *comm);
/* Nothing moved for the timeout: name the peer at place this one waits for. */
ring_status_t ring_direct_timed_out(ring_comm_t *comm, int place);
/* Still waiting: fail once nothing moved for the timeout. */
ring_status_t ring_direct_check_wait(ring_comm_t *comm, int place);
/* A peer's slot holds another call than ours (h->round == round: another allreduce). */
ring_status_t ring_direct_mismatch(ring_comm_t *comm, int place, const direct_slot_hdr_t *h);
/* Whether the slot holds our call. */
int ring_direct_same_call(const direct_slot_hdr_t *h, const ring_request_t *req);

/* direct_big.c: an allreduce larger than --rd-max-bytes, in pieces through the
 * big slots: each peer adds its slice of a piece from every slot, writes the sum
 * over one of them (direct_sum), then copies every other slice's sum out. */
ring_status_t ring_direct_big_progress(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                                       int *finished_p);

#endif /* RING_DIRECT_INT_H */
