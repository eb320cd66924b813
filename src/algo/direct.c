/*
 * direct.c - allreduces of peers that all run on one host (--algo direct,
 * and auto there): one shared-memory segment instead of messages.
 *
 * Each place owns a board (its counters) and two slots (even and odd
 * rounds). A call copies the peer's buffer into its slot for the round and
 * posts the round on its board; once every board shows the round, each
 * peer adds all slots in place order into its result, so every peer holds
 * the same bits, and says on its board that it has read them. One step of
 * latency however many peers, where the ring takes 2(N-1) and recursive
 * doubling log2 N; each peer reads N buffers, which is why it is for small
 * ones (--rd-max-bytes, as recursive doubling). Larger calls go through the
 * segment in pieces, each peer adding a slice of each (direct_big.c).
 *
 * A slot is written again two rounds later, and only once every peer has
 * read it (their boards' read counter): no call can overwrite a buffer a
 * slower peer still adds, whatever ran in between.
 *
 * A peer that called something else runs the ring, and a call here that
 * waits long sends its header to its left neighbour (notice.c, as for rd.c),
 * which sees the difference; a peer that called another allreduce is seen
 * here, in the slot's header. A failure anywhere is written on the failing
 * peer's board (status, the rank it blames, its message), so the others,
 * who wait on the segment and not on the ring, fail with its words at once.
 * A peer that stops is named by every other one after the timeout: each
 * sees whose board lags; one that closed its communicator says so on its
 * board. A peer that waits past the spin sleeps on a futex in the segment
 * (direct_board.c), so on a host with more peers than cores the peer it
 * waits for gets the core. The segment is a POSIX shm object that every peer
 * unlinks as soon as all have mapped it: nothing is left in /dev/shm
 * whichever peer dies later (and a failed set-up unlinks it too).
 *
 * The segment's contents come from the other peers, which have proved they
 * belong (the hello), but are still only read within bounds: a slot's header
 * is compared with our own call, whose sizes alone decide what is read;
 * messages are cut to their field.
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

#include "algo.h"
#include "auth.h"
#include "clock.h"
#include "direct.h"
#include "direct_int.h"
#include "log.h"
#include "reduce.h"

#define DIRECT_NAME_BYTES 48
#define DIRECT_WAIT_MS 1 /* a waiting peer looks at the boards at least this often */

static const ring_algo_ops_t direct_ops;

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* Whether every peer runs on this host over shared memory. */
static int one_host(const ring_comm_t *comm, char *why, size_t len)
{
    if (comm->tp_ops->kind != RING_TP_SHM) {
        snprintf(why, len, "the transport is %s, not shm", comm->tp_ops->name);
        return 0;
    }
    for (int r = 1; r < comm->size; r++)
        if (comm->topo.hosts == NULL || strcmp(comm->topo.hosts[r], comm->topo.hosts[0]) != 0) {
            snprintf(why, len, "rank %d runs on %s, rank 0 on %s", r,
                     comm->topo.hosts ? comm->topo.hosts[r] : "?",
                     comm->topo.hosts ? comm->topo.hosts[0] : "?");
            return 0;
        }
    return 1;
}

/* The segment's layout: the header, every place's board, the small slots (two
 * per place), the big slots (two per place). Sizes only while base is NULL; then
 * where each part lies in the mapping. */
static void seg_layout(struct ring_direct *d, int places, unsigned char *base)
{
    size_t boards = align64(sizeof(direct_seg_hdr_t));
    size_t small = boards + (size_t)places * sizeof(direct_board_t);
    size_t big;

    d->slot_bytes = sizeof(direct_slot_hdr_t) + d->max_bytes;
    d->big_slot_bytes = d->piece_bytes > 0 ? sizeof(direct_slot_hdr_t) + d->piece_bytes : 0;
    big = small + (size_t)places * 2 * d->slot_bytes;
    d->seg_bytes = big + (size_t)places * 2 * d->big_slot_bytes;
    if (base == NULL)
        return;
    d->boards = (direct_board_t *)(base + boards);
    d->small_slots = base + small;
    d->big_slots = base + big;
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
    seg_layout(d, places, d->seg);
    if (create) {
        direct_seg_hdr_t *h = p;

        h->magic = DIRECT_MAGIC;
        h->places = (uint32_t)places;
        h->max_bytes = d->max_bytes;
        h->seg_bytes = d->seg_bytes;
        h->piece_bytes = d->piece_bytes;
    }
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
    int root = comm->topo.order[0], ok = 1, *oks = NULL, bad = -1;
    int forced = comm->cfg.algo == RING_CFG_ALGO_DIRECT;
    unsigned char nonce[RING_AUTH_NONCE_BYTES];
    ring_status_t st;

    if (comm->size < 2 || (!forced && comm->cfg.algo != RING_CFG_ALGO_AUTO))
        return RING_OK;
    if (comm->size > RING_REDUCE_MAX_SRC) { /* one pass adds at most that many slots */
        if (!forced)
            return RING_OK;
        return ring_error_set(RING_ERR_INVALID, "--algo direct runs at most %d peers on one "
                              "host, and this ring has %d: use --algo auto (or ring, rd)",
                              RING_REDUCE_MAX_SRC, comm->size);
    }
    if (!one_host(comm, why, sizeof(why))) {
        if (!forced)
            return RING_OK;
        return ring_error_set(RING_ERR_INVALID, "--algo direct needs every peer on one host over "
                              "the shm transport, and %s: use --algo auto (or ring, rd)", why);
    }
    d = calloc(1, sizeof(*d));
    oks = calloc((size_t)comm->size, sizeof(int));
    if (d == NULL || oks == NULL) {
        free(d);
        free(oks);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the direct allreduce");
    }
    d->places = comm->size;
    /* every peer adds every slot of a small call, N times the bytes of the large
     * form's slice: the small form stops at --rd-max-bytes x 2/N^2 (at N = 4 over
     * shm on 2 cores, 16 KiB took 13 us in pieces against 20 us as a small call,
     * 8 KiB 11.2-12.6 against 8.6-9.2). At N = 2 the large form moves no more
     * lines between the cores than the small one and copies half as much in: it
     * wins from 4 KiB (2.0-2.2 us against 2.4-2.8; 16 KiB 4.0-4.2 against 5.9),
     * so the small form stops at --rd-max-bytes/16 there (2 KiB by default) */
    d->max_bytes = comm->size == 2 ? comm->cfg.rd_max_bytes / 16
                                   : comm->cfg.rd_max_bytes * 2 /
                                         ((size_t)comm->size * (size_t)comm->size);
    d->max_bytes = align64(d->max_bytes > 0 ? d->max_bytes : 64);
    /* pieces of up to 4 MiB (2.6 at N = 2), smaller at larger N: the segment stays
     * within DIRECT_SEG_BUDGET (containers give /dev/shm 64 MiB). The divisor still
     * counts the two pieces of shared result the segment held before the sums went
     * into the slots: the pieces keep the sizes they were measured at */
    d->piece_bytes = DIRECT_SEG_BUDGET / (2 * (size_t)comm->size + 2) & ~(size_t)0xffff;
    d->piece_bytes = d->piece_bytes > DIRECT_PIECE_MAX ? DIRECT_PIECE_MAX
                     : d->piece_bytes < DIRECT_PIECE_MIN ? DIRECT_PIECE_MIN : d->piece_bytes;
    /* at N = 2 too, since a peer reads its own slice from its own buffer and
     * writes it straight into its result: in one interleaved run (2-core VM,
     * busbw) 5.2-5.3 GB/s at 4-16 MiB against the shm ring's 4.7, 3.9 at 64-256
     * MiB against 3.4 */
    d->big_min_bytes = d->max_bytes + 1;
    seg_layout(d, comm->size, NULL);
    /* place 0 names it; everyone knows the name before it exists, so any peer can
     * unlink it if the set-up fails half-way */
    if (comm->topo.pos == 0) {
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
    if (st == RING_OK && comm->topo.pos == 0 && name[0] != '\0')
        ok = seg_map(d, name, 1, comm->size, why, sizeof(why)) == 0;
    /* the others open it once place 0 says it is there */
    if (st == RING_OK)
        st = ring_allgather(comm, &ok, oks, sizeof(int));
    if (st == RING_OK && comm->topo.pos != 0) {
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
        if (!forced) { /* every peer saw the same flags: all go on without it */
            ring_log(RING_LOG_WARN, "direct allreduce off: rank %d could not map its shared "
                     "segment of %zu bytes%s%s (is /dev/shm mounted and writable, with room?); "
                     "the ring runs every allreduce", bad, seg_bytes,
                     bad == comm->rank ? ": " : "", bad == comm->rank ? why : "");
            return RING_OK;
        }
        return ring_error_set(RING_ERR_NO_RESOURCE, "--algo direct: rank %d could not map the "
                              "shared segment%s%s (is /dev/shm mounted and writable, with room "
                              "for %zu bytes?): use --algo auto", bad,
                              bad == comm->rank ? ": " : "", bad == comm->rank ? why : "",
                              seg_bytes);
    }
    if (d->big_min_bytes > 0)
        ring_log(RING_LOG_INFO, "direct allreduce: fp32 allreduces without a codec go through "
                 "one shared segment of %zu bytes (%d peers on this host; pieces of %zu bytes)",
                 d->seg_bytes, comm->size, d->piece_bytes);
    else
        ring_log(RING_LOG_INFO, "direct allreduce: fp32 allreduces without a codec of at most "
                 "%zu bytes go through one shared segment of %zu bytes (%d peers on this host)",
                 d->max_bytes, d->seg_bytes, comm->size);
    comm->algo.direct = d;
    comm->algo.ops[RING_ALGO_DIRECT] = &direct_ops;
    return RING_OK;
}

void ring_direct_close(ring_comm_t *comm)
{
    if (comm->algo.direct != NULL) { /* a peer still waiting for this one fails at once */
        atomic_store(&comm->algo.direct->boards[comm->topo.pos].closed, 1);
        ring_direct_ring(comm->algo.direct);
    }
    direct_free(comm->algo.direct);
    comm->algo.direct = NULL;
    comm->algo.ops[RING_ALGO_DIRECT] = NULL;
}

ring_status_t ring_direct_rebase(ring_comm_t *comm)
{
    struct ring_direct *d = comm->algo.direct;

    if (d == NULL)
        return RING_OK;
    RING_CHECK(ring_barrier(comm)); /* every peer is past the set-up's direct calls */
    atomic_store(&d->boards[comm->topo.pos].ctr[DIRECT_POSTED].v, 0);
    atomic_store(&d->boards[comm->topo.pos].ctr[DIRECT_READ].v, 0);
    d->parity_round[0] = d->parity_round[1] = 0;
    return ring_barrier(comm); /* ... and every board forgot them */
}

static int direct_takes(const ring_comm_t *comm, const ring_request_t *req)
{
    const struct ring_direct *d = comm->algo.direct;
    size_t bytes = req->count * sizeof(float);

    return d != NULL && req->coll == RING_COLL_ALLREDUCE && req->dtype == RING_FLOAT32 &&
           req->dev_recvbuf == NULL && req->count > 0 &&
           (bytes <= d->max_bytes || (d->big_min_bytes > 0 && bytes >= d->big_min_bytes)) &&
           ring_enc_wire(comm, req) == RING_CODEC_NONE;
}

static ring_status_t direct_begin(ring_comm_t *comm, ring_request_t *req)
{
    struct ring_direct *d = comm->algo.direct;

    d->req = req;
    d->posted = 0;
    d->phase = 0;
    d->off = 0;
    d->moved = 1;
    return RING_OK;
}

/* Every slot of the round, added in place order: the same bits on every peer. */
static ring_status_t add_slots(ring_comm_t *comm, ring_request_t *req)
{
    struct ring_direct *d = comm->algo.direct;
    const float *src[RING_REDUCE_MAX_SRC];

    for (int p = 0; p < comm->size; p++) {
        direct_slot_hdr_t *h = direct_slot(d, p, req->round);

        if (!ring_direct_same_call(h, req))
            return ring_direct_mismatch(comm, p, h);
        src[p] = direct_slot_data(h);
    }
    /* every peer holds the same bits: each finds the same inf or NaN, in the pass */
    req->nonfinite = ring_reduce_sum_n_f32(req->recvbuf, NULL, src, comm->size,
                                           req->op == RING_AVG ? 1.0f / (float)comm->size : 1.0f,
                                           req->count);
    return RING_OK;
}

/* A small call: post our buffer, then add every slot once all are posted. */
static ring_status_t small_progress(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                                    int *finished_p)
{
    struct ring_direct *d = comm->algo.direct;
    int parity = (int)(req->round & 1), p;

    if (!d->posted) {
        direct_slot_hdr_t *h = direct_slot(d, comm->topo.pos, req->round);

        /* the slot's last buffer must have been added by everyone */
        if ((p = ring_direct_lagging(comm, DIRECT_READ, d->parity_round[parity])) >= 0)
            return ring_direct_check_wait(comm, p);
        h->round = req->round;
        h->count = req->count;
        h->off = 0;
        h->tensor_id = req->tensor_id;
        h->op = (uint32_t)req->op;
        RING_TL_TIMED(comm, NULL, RING_TL_SEND, req->count * sizeof(float),
                      memcpy(direct_slot_data(h), req->sendbuf, req->count * sizeof(float)));
        ring_direct_set(d, comm->topo.pos, DIRECT_POSTED, req->round + 1);
        d->parity_round[parity] = req->round + 1;
        d->posted = 1;
        d->moved = 1;
        *moved_p += 1;
    }
    if ((p = ring_direct_lagging(comm, DIRECT_POSTED, req->round + 1)) >= 0)
        return ring_direct_check_wait(comm, p);
    {
        ring_status_t st;

        RING_TL_TIMED(comm, NULL, RING_TL_REDUCE, req->count, st = add_slots(comm, req));
        RING_CHECK(st);
    }
    ring_direct_set(d, comm->topo.pos, DIRECT_READ, req->round + 1);
    *moved_p += 1;
    *finished_p = 1;
    return RING_OK;
}

static ring_status_t direct_progress(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                                     int *finished_p)
{
    struct ring_direct *d = comm->algo.direct;
    int finished = 0;

    *finished_p = d->req == NULL;
    if (comm->fail.error != RING_OK)
        return comm->fail.error;
    if (d->req == NULL)
        return RING_OK;
    RING_CHECK(ring_direct_relay_failure(comm));
    if (req->count * sizeof(float) <= d->max_bytes)
        RING_CHECK(small_progress(comm, req, moved_p, &finished));
    else
        RING_CHECK(ring_direct_big_progress(comm, req, moved_p, &finished));
    if (!finished)
        return RING_OK;
    comm->stats.direct_allreduces++;
    d->req = NULL;
    *finished_p = 1;
    return RING_OK;
}

/* A neighbour on the ring timed out and asks what this peer waits for. */
static ring_status_t direct_fail_timeout(ring_comm_t *comm, ring_request_t *req, double waited)
{
    struct ring_direct *d = comm->algo.direct;
    int p;

    (void)req;
    if (d->req == NULL)
        return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_TIMED_OUT, .culprit = -1,
                                                    .sys_errno = ETIMEDOUT, .step = -1},
                              "direct allreduce: timed out after %.0f s", waited);
    p = ring_direct_culprit(comm, NULL);
    return ring_direct_timed_out(comm, p >= 0 ? p : comm->topo.pos);
}

/* Our comm failed: say so on our board, for the peers that wait on the segment. */
static void direct_on_fail(ring_comm_t *comm)
{
    direct_board_t *b = &comm->algo.direct->boards[comm->topo.pos];
    const ring_request_t *req = ring_comm_active_request(comm);

    if (atomic_load_explicit(&b->failed, memory_order_relaxed) != 0)
        return;
    snprintf(b->why, sizeof(b->why), "%s", comm->fail.error_msg);
    b->culprit = comm->fail.error_culprit;
    b->other = (direct_call_t){
        .rank = comm->fail.error == RING_ERR_MISMATCH ? comm->fail.mismatch.rank : -1,
        .coll = (uint32_t)comm->fail.mismatch.coll,
        .tensor_id = comm->fail.mismatch.tensor_id,
        .dtype = comm->fail.mismatch.dtype,
        .op = comm->fail.mismatch.op,
        .count = comm->fail.mismatch.count};
    b->own = (direct_call_t){.rank = req != NULL ? comm->rank : -1};
    if (req != NULL) {
        b->own.coll = (uint32_t)req->coll;
        b->own.tensor_id = req->tensor_id & 0x7fffffffu;
        b->own.dtype = (uint32_t)req->dtype;
        b->own.op = (uint32_t)req->op;
        b->own.count = req->count;
    }
    b->mm_cause = comm->fail.mismatch.cause;
    atomic_store_explicit(&b->failed, (int32_t)comm->fail.error, memory_order_release);
    ring_direct_ring(comm->algo.direct);
}

/* Every progress pass: alive, whatever this peer runs (ring_direct_check_wait). */
static void direct_tick(ring_comm_t *comm)
{
    atomic_store_explicit(&comm->algo.direct->boards[comm->topo.pos].alive_us,
                          (uint64_t)(ring_now() * 1e6), memory_order_relaxed);
}

static int direct_busy(const ring_comm_t *comm)
{
    return comm->algo.direct != NULL && comm->algo.direct->req != NULL;
}

static int direct_wait(ring_comm_t *comm, int timeout_ms)
{
    if (!direct_busy(comm))
        return 0;
    /* sleep on the segment's bell, and look at the ring (an ABORT, a closed
     * connection) at least every DIRECT_WAIT_MS */
    ring_direct_sleep(comm, timeout_ms < DIRECT_WAIT_MS ? timeout_ms : DIRECT_WAIT_MS);
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
    .needs_every_peer = 1,
    .on_fail = direct_on_fail,
    .tick = direct_tick,
};
