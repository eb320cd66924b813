/*
 * direct.c - small allreduces of peers that all run on one host (--algo
 * direct; auto does not choose it yet): one shared-memory segment instead of messages.
 *
 * Each place owns a board (its counters) and two slots (even and odd
 * rounds). A call copies the peer's buffer into its slot for the round and
 * posts the round on its board; once every board shows the round, each
 * peer adds all slots in place order into its result, so every peer holds
 * the same bits, and says on its board that it has read them. One step of
 * latency however many peers, where the ring takes 2(N-1) and recursive
 * doubling log2 N; each peer reads N buffers, which is why it is for small
 * ones (--rd-max-bytes, as recursive doubling).
 *
 * A slot is written again two rounds later, and only once every peer has
 * read it (their boards' read counter): no call can overwrite a buffer a
 * slower peer still adds, whatever ran in between.
 *
 * The call's header still goes round the ring as a notice frame (notice.c,
 * as for rd.c): a peer that called something else runs the ring and sees
 * the difference there; a peer that called another small allreduce is seen
 * here, in the slot's header. A failure anywhere is written on the failing
 * peer's board (status, the rank it blames, its message), so the others,
 * who wait on the segment and not on the ring, fail with its words at once.
 * A peer that stops is named by every other one after the timeout: each
 * sees whose board lags. The segment is a POSIX shm object that every peer
 * unlinks as soon as all have mapped it: nothing is left in /dev/shm
 * whichever peer dies later (and a failed set-up unlinks it too).
 *
 * The segment's contents come from the other peers, which have proved they
 * belong (the hello), but are still only read within bounds: counts are
 * checked against the slot, messages are cut to their field.
 */
#include "ring_build.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "direct.h"
#include "log.h"
#include "reduce.h"

#define DIRECT_MAGIC 0x52444931u /* "RDI1" */
#define DIRECT_WHY_BYTES 1024 /* comm->error_msg */
#define DIRECT_NAME_BYTES 48
#define DIRECT_WAIT_MS 1 /* a waiting peer looks at the boards at least this often */

/* One place's counters and, once its comm failed, why. */
typedef struct direct_board {
    _Atomic uint64_t posted;      /* round + 1 of the last buffer in its slots */
    char pad0[56];
    _Atomic uint64_t read;        /* round + 1 of the last call whose slots it added */
    char pad1[56];
    _Atomic int32_t failed;       /* 0, or the ring_status_t its comm failed with */
    int32_t culprit;              /* ... the rank it blamed, -1: none */
    char why[DIRECT_WHY_BYTES];   /* ... and its message (written before failed) */
    /* a mismatch: the other call, so that the ABORTs of the peers that relay it
     * carry it (comm->mismatch); mm_rank -1: none */
    int32_t mm_rank;
    uint32_t mm_coll, mm_tensor_id, mm_dtype, mm_op;
    uint64_t mm_count;
    char pad2[56];
} direct_board_t;

/* What a slot holds: the call, then its buffer. */
typedef struct direct_slot_hdr {
    uint64_t round, count;
    uint32_t tensor_id, op;
    char pad[40];
} direct_slot_hdr_t;

typedef struct direct_seg_hdr {
    uint32_t magic, places;
    uint64_t max_bytes, seg_bytes;
    char pad[40];
} direct_seg_hdr_t;

struct ring_direct {
    unsigned char *seg;
    size_t seg_bytes, max_bytes, slot_bytes;
    int places;
    direct_board_t *boards;      /* by place */
    /* the request under way */
    ring_request_t *req;
    int posted;                  /* its buffer is in our slot */
    double last_move;
    uint64_t parity_round[2];    /* round + 1 last written to each slot, 0: none */
};

static const ring_algo_ops_t direct_ops;

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

static direct_slot_hdr_t *slot_of(const struct ring_direct *d, int place, uint64_t round)
{
    /* the header, every place's board, then the slots */
    size_t off = align64(sizeof(direct_seg_hdr_t)) + (size_t)d->places * sizeof(direct_board_t);

    off += ((size_t)place * 2 + (size_t)(round & 1)) * d->slot_bytes;
    return (direct_slot_hdr_t *)(d->seg + off);
}

static float *slot_data(direct_slot_hdr_t *h)
{
    return (float *)(h + 1);
}

/* Whether every peer runs on this host over shared memory. */
static int one_host(const ring_comm_t *comm, char *why, size_t len)
{
    if (strcmp(comm->tp_ops->name, "shm") != 0) {
        snprintf(why, len, "the transport is %s, not shm", comm->tp_ops->name);
        return 0;
    }
    for (int r = 1; r < comm->size; r++)
        if (comm->hosts == NULL || strcmp(comm->hosts[r], comm->hosts[0]) != 0) {
            snprintf(why, len, "rank %d runs on %s, rank 0 on %s", r,
                     comm->hosts ? comm->hosts[r] : "?", comm->hosts ? comm->hosts[0] : "?");
            return 0;
        }
    return 1;
}

/* Map the segment: place 0 creates it (create = 1), the others open it. */
static int seg_map(struct ring_direct *d, const char *name, int create, int places, char *why,
                   size_t len)
{
    int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
    struct stat st;
    void *p;

    if (fd < 0) {
        snprintf(why, len, "shm_open(%s): %s", name, strerror(errno));
        return -1;
    }
    if (create && ftruncate(fd, (off_t)d->seg_bytes) != 0) {
        snprintf(why, len, "ftruncate(%s, %zu): %s", name, d->seg_bytes, strerror(errno));
        close(fd);
        return -1;
    }
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != d->seg_bytes) {
        snprintf(why, len, "%s is not the %zu bytes this peer expects", name, d->seg_bytes);
        close(fd);
        return -1;
    }
    p = mmap(NULL, d->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(why, len, "mmap of %zu bytes: %s", d->seg_bytes, strerror(errno));
        return -1;
    }
    d->seg = p;
    if (create) {
        direct_seg_hdr_t *h = p;

        h->magic = DIRECT_MAGIC;
        h->places = (uint32_t)places;
        h->max_bytes = d->max_bytes;
        h->seg_bytes = d->seg_bytes;
    }
    d->boards = (direct_board_t *)(d->seg + align64(sizeof(direct_seg_hdr_t)));
    return 0;
}

static void direct_free(struct ring_direct *d)
{
    if (d == NULL)
        return;
    if (d->seg != NULL)
        munmap(d->seg, d->seg_bytes);
    free(d);
}

ring_status_t ring_direct_open(ring_comm_t *comm)
{
    struct ring_direct *d;
    char name[DIRECT_NAME_BYTES] = "", why[300] = "";
    int root = comm->order[0], ok = 1, *oks = NULL, bad = -1;
    unsigned char nonce[RING_AUTH_NONCE_BYTES];
    ring_status_t st;

    /* asked for only: under auto, the mismatch tests of the ring (t-fault, t-codec-ring,
     * python/t-fault) saw other messages under ASan's timing; until those agree, auto
     * keeps rd and the ring */
    if (comm->size < 2 || strcmp(comm->cfg.algo, "direct") != 0)
        return RING_OK;
    if (!one_host(comm, why, sizeof(why)))
        return ring_error_set(RING_ERR_INVALID, "--algo direct needs every peer on one host over "
                              "the shm transport, and %s: use --algo auto (or ring, rd)", why);
    d = calloc(1, sizeof(*d));
    oks = calloc((size_t)comm->size, sizeof(int));
    if (d == NULL || oks == NULL) {
        free(d);
        free(oks);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the direct allreduce");
    }
    d->places = comm->size;
    d->max_bytes = align64(comm->cfg.rd_max_bytes > 0 ? comm->cfg.rd_max_bytes : 64);
    d->slot_bytes = sizeof(direct_slot_hdr_t) + d->max_bytes;
    d->seg_bytes = align64(sizeof(direct_seg_hdr_t)) +
                   (size_t)comm->size * (sizeof(direct_board_t) + 2 * d->slot_bytes);
    /* place 0 names it; everyone knows the name before it exists, so any peer can
     * unlink it if the set-up fails half-way */
    if (comm->pos == 0) {
        if (ring_auth_nonce(nonce) != 0) {
            snprintf(why, sizeof(why), "no random bytes for its name");
            ok = 0;
        } else
            snprintf(name, sizeof(name), "/ringd-direct-%02x%02x%02x%02x%02x%02x%02x%02x",
                     nonce[0], nonce[1], nonce[2], nonce[3], nonce[4], nonce[5], nonce[6],
                     nonce[7]);
    }
    st = ring_broadcast(comm, name, sizeof(name), root);
    name[sizeof(name) - 1] = '\0';
    if (st == RING_OK && comm->pos == 0 && name[0] != '\0')
        ok = seg_map(d, name, 1, comm->size, why, sizeof(why)) == 0;
    /* the others open it once place 0 says it is there */
    if (st == RING_OK)
        st = ring_allgather(comm, &ok, oks, sizeof(int));
    if (st == RING_OK && comm->pos != 0) {
        ok = name[0] != '\0' && oks[root] && seg_map(d, name, 0, comm->size, why, sizeof(why)) == 0;
        if (ok && (((direct_seg_hdr_t *)d->seg)->magic != DIRECT_MAGIC ||
                   ((direct_seg_hdr_t *)d->seg)->places != (uint32_t)comm->size)) {
            snprintf(why, sizeof(why), "%s holds something else", name);
            ok = 0;
        }
    }
    if (st == RING_OK)
        st = ring_allgather(comm, &ok, oks, sizeof(int));
    if (name[0] != '\0')
        (void)shm_unlink(name); /* everyone: mapped, it needs no name (ENOENT: done) */
    for (int r = 0; st == RING_OK && r < comm->size; r++)
        if (!oks[r] && bad < 0)
            bad = r;
    free(oks);
    if (st != RING_OK || bad >= 0) {
        size_t seg_bytes = d->seg_bytes;

        direct_free(d);
        if (st != RING_OK)
            return st;
        return ring_error_set(RING_ERR_NO_RESOURCE, "--algo direct: rank %d could not map the "
                              "shared segment%s%s (is /dev/shm mounted and writable, with room "
                              "for %zu bytes?): use --algo auto", bad,
                              bad == comm->rank ? ": " : "", bad == comm->rank ? why : "",
                              seg_bytes);
    }
    ring_log(RING_LOG_INFO, "direct allreduce: fp32 allreduces without a codec of at most %zu "
             "bytes go through one shared segment of %zu bytes (%d peers on this host)",
             d->max_bytes, d->seg_bytes, comm->size);
    comm->direct = d;
    comm->algo_ops[RING_ALGO_DIRECT] = &direct_ops;
    return RING_OK;
}

void ring_direct_close(ring_comm_t *comm)
{
    direct_free(comm->direct);
    comm->direct = NULL;
    comm->algo_ops[RING_ALGO_DIRECT] = NULL;
}

static int direct_takes(const ring_comm_t *comm, const ring_request_t *req)
{
    const struct ring_direct *d = comm->direct;

    return d != NULL && req->coll == RING_COLL_ALLREDUCE && req->dtype == RING_FLOAT32 &&
           req->dev_recvbuf == NULL && req->count > 0 &&
           req->count * sizeof(float) <= d->max_bytes &&
           ring_enc_wire(comm, req) == RING_CODEC_NONE;
}

static ring_status_t direct_begin(ring_comm_t *comm, ring_request_t *req)
{
    struct ring_direct *d = comm->direct;

    d->req = req;
    d->posted = 0;
    d->last_move = ring_now();
    return RING_OK;
}

/* The first peer (in place order) whose counter is below want, or -1. */
static int lagging(const ring_comm_t *comm, int read_counter, uint64_t want)
{
    const struct ring_direct *d = comm->direct;

    for (int p = 0; p < comm->size; p++) {
        const direct_board_t *b = &d->boards[p];
        uint64_t have = atomic_load_explicit(read_counter ? &b->read : &b->posted,
                                             memory_order_acquire);

        if (p != comm->pos && have < want)
            return p;
    }
    return -1;
}

/* Some peer's comm failed: fail ours with its words. */
static ring_status_t relay_failure(ring_comm_t *comm)
{
    struct ring_direct *d = comm->direct;

    for (int p = 0; p < comm->size; p++) {
        direct_board_t *b = &d->boards[p];
        int32_t status = atomic_load_explicit(&b->failed, memory_order_acquire);
        char why[DIRECT_WHY_BYTES];
        int culprit;

        if (p == comm->pos || status == 0)
            continue;
        memcpy(why, b->why, sizeof(why));
        why[sizeof(why) - 1] = '\0';
        for (char *c = why; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f)
                *c = ' ';
        culprit = b->culprit >= -1 && b->culprit < comm->size ? b->culprit : -1;
        if (status <= 0 || status >= RING_STATUS_COUNT)
            status = RING_ERR_REMOTE;
        if (status == RING_ERR_MISMATCH && b->mm_rank >= 0 && b->mm_rank < comm->size) {
            ring_frame_t theirs;

            memset(&theirs, 0, sizeof(theirs));
            theirs.coll = (uint8_t)(b->mm_coll & 0x0f);
            theirs.count = b->mm_count;
            theirs.tensor_id = b->mm_tensor_id;
            theirs.dtype = (uint8_t)b->mm_dtype;
            theirs.op = (uint8_t)(b->mm_op & 0x0f);
            return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_MISMATCH,
                                                        .culprit = b->mm_rank, .step = -1,
                                                        .theirs = &theirs},
                                  "rank %d failed (direct allreduce): %s", comm->order[p], why);
        }
        return ring_comm_fail(comm, &(ring_fault_t){.status = (ring_status_t)status,
                                                    .culprit = culprit, .step = -1},
                              "rank %d failed (direct allreduce): %s", comm->order[p], why);
    }
    return RING_OK;
}

/* Nothing moved for the timeout: name the peer this one waits for. */
static ring_status_t direct_timed_out(ring_comm_t *comm, int place, const char *what)
{
    struct ring_direct *d = comm->direct;
    int rank = comm->order[place];
    char addr[300], phase[96];

    ring_rank_addr(comm, rank, addr, sizeof(addr));
    ring_phase_format(comm, d->req, -1, phase, sizeof(phase));
    return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_TIMED_OUT, .culprit = rank,
                                                .sys_errno = ETIMEDOUT, .step = -1},
                          "%s: direct allreduce: rank %d (%s) %s for %.1f s: it stopped or is "
                          "stuck, or it called another collective or count than this peer "
                          "(every peer must make the same calls in the same order); its own "
                          "log says which", phase, rank, addr, what, ring_now() - d->last_move);
}

/* A peer's slot holds another call than ours for this round. */
static ring_status_t direct_mismatch(ring_comm_t *comm, int place, const direct_slot_hdr_t *h)
{
    ring_request_t *req = comm->direct->req;
    int peer = comm->order[place];
    ring_frame_t theirs;
    char mine[160], other[160];

    memset(&theirs, 0, sizeof(theirs));
    theirs.coll = RING_COLL_ALLREDUCE;
    theirs.round = h->round;
    theirs.dtype = RING_FLOAT32;
    theirs.op = h->op == RING_AVG ? RING_AVG : RING_SUM;
    theirs.tensor_id = h->tensor_id & 0x7fffffffu;
    theirs.count = h->count;
    ring_coll_describe(req->coll, req->round, req->count, req->dtype, req->op,
                       req->tensor_id & 0x7fffffffu, -1, mine, sizeof(mine));
    if (h->round == req->round)
        ring_coll_describe(RING_COLL_ALLREDUCE, h->round, h->count, RING_FLOAT32,
                           (ring_op_t)theirs.op, theirs.tensor_id, -1, other, sizeof(other));
    else
        snprintf(other, sizeof(other), "another collective in round %" PRIu64
                 " (not a small fp32 allreduce)", req->round);
    return ring_comm_fail_peer(comm, req, &(ring_fault_t){.status = RING_ERR_MISMATCH,
                                                          .culprit = peer, .step = -1,
                                                          .theirs = &theirs},
                               "collective arguments differ between rank %d and {peer} "
                               "(direct allreduce): rank %d called %s; rank %d called %s",
                               comm->rank, comm->rank, mine, peer, other);
}

/* Every slot of the round, added in place order: the same bits on every peer. */
static ring_status_t add_slots(ring_comm_t *comm, ring_request_t *req)
{
    struct ring_direct *d = comm->direct;
    float *out = req->recvbuf;

    for (int p = 0; p < comm->size; p++) {
        const direct_slot_hdr_t *h = slot_of(d, p, req->round);

        if (h->round != req->round || h->count != req->count ||
            h->tensor_id != req->tensor_id || h->op != (uint32_t)req->op)
            return direct_mismatch(comm, p, h);
    }
    ring_reduce_sum_f32(out, slot_data(slot_of(d, 0, req->round)),
                        slot_data(slot_of(d, 1, req->round)), req->count);
    for (int p = 2; p < comm->size; p++)
        ring_reduce_sum_f32(out, out, slot_data(slot_of(d, p, req->round)), req->count);
    if (req->op == RING_AVG)
        ring_scale_f32(out, out, 1.0f / (float)comm->size, req->count);
    return RING_OK;
}

static ring_status_t direct_progress(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                                     int *finished_p)
{
    struct ring_direct *d = comm->direct;
    int parity = (int)(req->round & 1), p, nonfinite = 0;
    double now;

    *finished_p = d->req == NULL; /* done: the engine waits for the notice frames */
    if (comm->error != RING_OK)
        return comm->error;
    if (d->req == NULL)
        return RING_OK;
    RING_CHECK(relay_failure(comm));
    if (!d->posted) {
        direct_slot_hdr_t *h = slot_of(d, comm->pos, req->round);

        /* the slot's last buffer must have been added by everyone */
        p = lagging(comm, 1, d->parity_round[parity]);
        if (p >= 0)
            goto wait;
        h->round = req->round;
        h->count = req->count;
        h->tensor_id = req->tensor_id;
        h->op = (uint32_t)req->op;
        memcpy(slot_data(h), req->sendbuf, req->count * sizeof(float));
        atomic_store_explicit(&d->boards[comm->pos].posted, req->round + 1,
                              memory_order_release);
        d->parity_round[parity] = req->round + 1;
        d->posted = 1;
        d->last_move = ring_now();
        *moved_p += 1;
    }
    p = lagging(comm, 0, req->round + 1);
    if (p >= 0)
        goto wait;
    RING_CHECK(add_slots(comm, req));
    atomic_store_explicit(&d->boards[comm->pos].read, req->round + 1, memory_order_release);
    /* every peer holds the same bits: each finds the same non-finite values */
    (void)comm->kops->absmax_f32(req->recvbuf, req->count, &nonfinite);
    req->nonfinite = nonfinite;
    comm->stats.direct_allreduces++;
    d->req = NULL;
    *moved_p += 1;
    *finished_p = 1;
    return RING_OK;
wait:
    now = ring_now();
    if (now - d->last_move > comm->cfg.timeout_s)
        return direct_timed_out(comm, p, d->posted ? "has not posted its buffer"
                                                   : "has not read the last one");
    return RING_OK;
}

/* A neighbour on the ring timed out and asks what this peer waits for. */
static ring_status_t direct_fail_timeout(ring_comm_t *comm, ring_request_t *req, double waited)
{
    struct ring_direct *d = comm->direct;
    int p;

    (void)req;
    if (d->req == NULL)
        return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_TIMED_OUT, .culprit = -1,
                                                    .sys_errno = ETIMEDOUT, .step = -1},
                              "direct allreduce: timed out after %.0f s", waited);
    p = d->posted ? lagging(comm, 0, d->req->round + 1)
                  : lagging(comm, 1, d->parity_round[d->req->round & 1]);
    return direct_timed_out(comm, p >= 0 ? p : comm->pos,
                            d->posted ? "has not posted its buffer" : "has not read the last one");
}

/* Our comm failed: say so on our board, for the peers that wait on the segment. */
static void direct_on_fail(ring_comm_t *comm)
{
    direct_board_t *b = &comm->direct->boards[comm->pos];

    if (atomic_load_explicit(&b->failed, memory_order_relaxed) != 0)
        return;
    snprintf(b->why, sizeof(b->why), "%s", comm->error_msg);
    b->culprit = comm->error_culprit;
    b->mm_rank = comm->error == RING_ERR_MISMATCH ? comm->mismatch.rank : -1;
    b->mm_coll = (uint32_t)comm->mismatch.coll;
    b->mm_count = comm->mismatch.count;
    b->mm_tensor_id = comm->mismatch.tensor_id;
    b->mm_dtype = comm->mismatch.dtype;
    b->mm_op = comm->mismatch.op;
    atomic_store_explicit(&b->failed, (int32_t)comm->error, memory_order_release);
}

static int direct_busy(const ring_comm_t *comm)
{
    return comm->direct != NULL && comm->direct->req != NULL;
}

static int direct_wait(ring_comm_t *comm, int timeout_ms)
{
    if (!direct_busy(comm))
        return 0;
    /* the boards have no file descriptor: sleep in the ring (an ABORT, a closed
     * connection wake it) and look again soon */
    comm->tp_ops->wait(comm->tp, timeout_ms < DIRECT_WAIT_MS ? timeout_ms : DIRECT_WAIT_MS);
    return 1;
}

static const ring_algo_ops_t direct_ops = {
    .takes = direct_takes,
    .begin = direct_begin,
    .progress = direct_progress,
    .wait = direct_wait,
    .fail_timeout = direct_fail_timeout,
    .busy = direct_busy,
    .notice = 1,
    .on_fail = direct_on_fail,
};
