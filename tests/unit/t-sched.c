/*
 * t-sched.c - the ring schedule (src/schedule.c), exhaustively and without
 * sockets.
 *
 * For N = 1..16 and awkward element counts it checks the structure of the
 * schedule (segments tile the buffer, chunks tile segments, sender and
 * receiver agree frame by frame, the segment numbers of DESIGN.md, the owner
 * after reduce-scatter, nframes), and then runs all N ranks in memory the
 * way the engine (src/allreduce.c) drives them: frame q of rank r goes to
 * frame q of rank r+1, reduce-scatter receives add the receiver's own
 * contribution, allgather receives copy; sends and receives are posted under
 * the engine's window and dependency rules and complete in a random (but
 * seeded, so reproducible) interleaving. Every element carries its index and
 * a bitmask of the ranks whose contribution it holds, so a misplaced chunk, a
 * contribution counted twice or missed, a read of a region that is not final
 * yet, or an overwrite of a region a send in flight still reads all show up.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_int.h" /* RING_WINDOW, the engine's frames in flight */
#include "schedule.h"
#include "tap.h"

#define MAX_N 16
#define FULL(n) ((uint32_t)((1u << (n)) - 1u))
/* An element: index in the high 32 bits, mask of contributing ranks in the low 32. */
#define ELEM(idx, mask) (((uint64_t)(idx) << 32) | (uint32_t)(mask))
#define E_IDX(v) ((uint32_t)((v) >> 32))
#define E_MASK(v) ((uint32_t)(v))
#define M_GARBAGE 0x40000000u /* never written */
#define M_POISON 0x80000000u  /* a receive into this region is in flight */

/* ---- failure collection: each TAP line aggregates many checks ---------- */

static long nfail;   /* failures since the last reset */
static long nchecks; /* checks since the last reset */

#define CHECK(_cond, ...)                                                                      \
    do {                                                                                       \
        nchecks++;                                                                             \
        if (!(_cond)) {                                                                        \
            if (nfail++ < 4)                                                                   \
                diag(__VA_ARGS__);                                                             \
        }                                                                                      \
    } while (0)

static void reset_checks(void)
{
    nfail = 0;
    nchecks = 0;
}

/* ---- deterministic random numbers ------------------------------------- */

static uint64_t rng_state;

static void rng_seed(uint64_t seed)
{
    rng_state = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    if (rng_state == 0)
        rng_state = 1;
}

static uint32_t rng_next(void)
{
    uint64_t x = rng_state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return (uint32_t)(x >> 16);
}

static int imod(int a, int n)
{
    int r = a % n;

    return r < 0 ? r + n : r;
}

/* Mask of the k+1 ranks last-k .. last (mod n). */
static uint32_t ranks_mask(int last, int k, int n)
{
    uint32_t m = 0;

    for (int j = 0; j <= k; j++)
        m |= 1u << imod(last - j, n);
    return m;
}

static int frames_equal(const ring_sched_frame_t *a, const ring_sched_frame_t *b)
{
    return a->step == b->step && a->chunk == b->chunk && a->segment == b->segment &&
           a->reduce == b->reduce && a->last_reduce == b->last_reduce &&
           a->range.off == b->range.off && a->range.len == b->range.len;
}

/* ---- the counts to try for a ring of n ---------------------------------- */

static size_t counts_for(int n, size_t *out)
{
    size_t k = 0;

    out[k++] = 0;
    out[k++] = 1;
    out[k++] = (size_t)n - 1;
    out[k++] = (size_t)n;
    out[k++] = (size_t)n + 1;
    out[k++] = 15;
    out[k++] = 16;
    out[k++] = 17;
    out[k++] = 97;
    out[k++] = 1009;
    out[k++] = 65537;
    out[k++] = (size_t)RING_SCHED_ALIGN * (size_t)n - 1;  /* one block each, the last short */
    out[k++] = 7 * (size_t)n + 3;                        /* segments under one block */
    out[k++] = (size_t)RING_SCHED_ALIGN * 5 * (size_t)n + 13; /* unaligned, several blocks */
    out[k++] = 4099;                                      /* unaligned, many chunks */
    /* drop repeats (N-1, N, N+1 can be 15, 16, 17), keeping the first */
    {
        size_t m = 0;
        for (size_t i = 0; i < k; i++) {
            int seen = 0;
            for (size_t j = 0; j < m; j++)
                seen |= out[j] == out[i];
            if (!seen)
                out[m++] = out[i];
        }
        k = m;
    }
    return k;
}

static const size_t chunk_sizes[] = {64, 100, 256, 4096, 1u << 20};
#define NCHUNK_SIZES (sizeof(chunk_sizes) / sizeof(chunk_sizes[0]))

/* ---- structure ---------------------------------------------------------- */

/* Worst segment-length spread, in elements, over everything checked (a TODO line). */
static size_t worst_spread;
static int worst_spread_n;
static size_t worst_spread_count;

/*
 * Structure of the schedule for one (n, count, chunk_bytes, elem_size).
 * Chunks are cut in whole blocks, and the engine stages a reduce-scatter
 * chunk in a slot of chunk_bytes, so a chunk holds the most whole blocks that
 * fit chunk_bytes (at least one), and a segment has as few chunks as that
 * allows.
 */
static void check_structure(int n, size_t count, size_t chunk_bytes, size_t elem)
{
    ring_sched_t s[MAX_N];
    ring_range_t seg[MAX_N];
    size_t next = 0, minlen = (size_t)-1, maxlen = 0, minblk = (size_t)-1, maxblk = 0;
    size_t chunk_elems = chunk_bytes / elem / RING_SCHED_ALIGN * RING_SCHED_ALIGN;
    size_t max_payload = chunk_bytes < RING_SCHED_ALIGN * elem ? RING_SCHED_ALIGN * elem
                                                                : chunk_bytes;

    if (chunk_elems < RING_SCHED_ALIGN)
        chunk_elems = RING_SCHED_ALIGN;

    /* segments tile [0, count) in order, block aligned, lengths within one block */
    for (int i = 0; i < n; i++) {
        size_t blocks;

        seg[i] = ring_sched_split(count, n, i, RING_SCHED_ALIGN);
        CHECK(seg[i].off == next, "N=%d count=%zu: segment %d starts at %zu, expected %zu", n,
              count, i, seg[i].off, next);
        CHECK(seg[i].off % RING_SCHED_ALIGN == 0 || seg[i].len == 0,
              "N=%d count=%zu: segment %d starts at %zu, not block aligned", n, count, i,
              seg[i].off);
        next = seg[i].off + seg[i].len;
        blocks = (seg[i].len + RING_SCHED_ALIGN - 1) / RING_SCHED_ALIGN;
        if (seg[i].len < minlen)
            minlen = seg[i].len;
        if (seg[i].len > maxlen)
            maxlen = seg[i].len;
        if (blocks < minblk)
            minblk = blocks;
        if (blocks > maxblk)
            maxblk = blocks;
    }
    CHECK(next == count, "N=%d count=%zu: segments end at %zu", n, count, next);
    CHECK(maxblk - minblk <= 1, "N=%d count=%zu: segments span %zu..%zu blocks", n, count, minblk,
          maxblk);
    if (maxlen - minlen > worst_spread) {
        worst_spread = maxlen - minlen;
        worst_spread_n = n;
        worst_spread_count = count;
    }

    for (int r = 0; r < n; r++) {
        ring_sched_init(&s[r], r, n, count, elem, chunk_bytes);
        CHECK(s[r].rank == r && s[r].nranks == n && s[r].count == count,
              "N=%d count=%zu: init of rank %d stored rank %d nranks %d count %zu", n, count, r,
              s[r].rank, s[r].nranks, s[r].count);
        CHECK(s[r].nchunks >= 1, "N=%d count=%zu: nchunks %d", n, count, s[r].nchunks);
        CHECK(s[r].nchunks == s[0].nchunks,
              "N=%d count=%zu: rank %d has %d chunks, rank 0 has %d", n, count, r, s[r].nchunks,
              s[0].nchunks);
        CHECK(s[r].nsend == s[r].nrecv && s[r].nrecv == (uint32_t)(2 * (n - 1)) * (uint32_t)s[r].nchunks,
              "N=%d count=%zu: nframes %" PRIu32 " != 2(N-1)*%d", n, count, s[r].nrecv,
              s[r].nchunks);
    }
    /* as many chunks of whole blocks within chunk_bytes as the largest segment needs */
    {
        size_t want = (maxlen + chunk_elems - 1) / chunk_elems;
        if (want == 0)
            want = 1;
        CHECK((size_t)s[0].nchunks == want,
              "N=%d count=%zu chunk=%zu elem=%zu: %d chunks per segment, expected %zu", n, count,
              chunk_bytes, elem, s[0].nchunks, want);
    }
    if (n == 1)
        return;

    for (int r = 0; r < n; r++) {
        const ring_sched_t *me = &s[r];
        int nc = me->nchunks, right = (r + 1) % n;
        uint32_t ag_lag = (uint32_t)(n - 1) * (uint32_t)nc;
        unsigned rs_recv_seen = 0, ag_recv_seen = 0, rs_send_seen = 0, ag_send_seen = 0;

        for (int step = 0; step < 2 * (n - 1); step++) {
            int rs = step < n - 1, j = step - (n - 1);
            int want_send = rs ? imod(r - step, n) : imod(r + 1 - j, n);
            int want_recv = rs ? imod(r - step - 1, n) : imod(r - j, n);
            size_t send_next = seg[want_send].off, recv_next = seg[want_recv].off;

            CHECK(ring_sched_send_segment(r, n, step) == want_send,
                  "N=%d rank %d step %d: send segment %d, DESIGN.md says %d", n, r, step,
                  ring_sched_send_segment(r, n, step), want_send);
            CHECK(ring_sched_recv_segment(r, n, step) == want_recv,
                  "N=%d rank %d step %d: recv segment %d, DESIGN.md says %d", n, r, step,
                  ring_sched_recv_segment(r, n, step), want_recv);
            if (rs) {
                rs_send_seen |= 1u << want_send;
                rs_recv_seen |= 1u << want_recv;
            } else {
                ag_send_seen |= 1u << want_send;
                ag_recv_seen |= 1u << want_recv;
            }
            for (int c = 0; c < nc; c++) {
                uint32_t q = (uint32_t)(step * nc + c);
                ring_sched_frame_t sf, rf, peer;

                ring_sched_send_frame(me, q, &sf);
                ring_sched_recv_frame(me, q, &rf);
                ring_sched_recv_frame(&s[right], q, &peer);
                CHECK(sf.step == step && sf.chunk == c && rf.step == step && rf.chunk == c,
                      "N=%d rank %d q=%" PRIu32 ": step/chunk %d/%d and %d/%d, expected %d/%d", n,
                      r, q, sf.step, sf.chunk, rf.step, rf.chunk, step, c);
                CHECK(sf.segment == want_send && rf.segment == want_recv,
                      "N=%d rank %d q=%" PRIu32 ": segments send %d recv %d, expected %d %d", n,
                      r, q, sf.segment, rf.segment, want_send, want_recv);
                CHECK(sf.reduce == rs && rf.reduce == rs,
                      "N=%d rank %d q=%" PRIu32 ": reduce flags %d %d at step %d", n, r, q,
                      sf.reduce, rf.reduce, step);
                CHECK(sf.last_reduce == (step == n - 2) && rf.last_reduce == (step == n - 2),
                      "N=%d rank %d q=%" PRIu32 ": last_reduce %d %d at step %d", n, r, q,
                      sf.last_reduce, rf.last_reduce, step);
                CHECK(frames_equal(&sf, &peer),
                      "N=%d count=%zu q=%" PRIu32 ": rank %d sends step %d chunk %d seg %d "
                      "[%zu,+%zu) but rank %d receives step %d chunk %d seg %d [%zu,+%zu)",
                      n, count, q, r, sf.step, sf.chunk, sf.segment, sf.range.off, sf.range.len,
                      right, peer.step, peer.chunk, peer.segment, peer.range.off, peer.range.len);
                /* chunks of a step tile its segment, in order, block aligned */
                CHECK(sf.range.off == send_next && rf.range.off == recv_next,
                      "N=%d count=%zu rank %d q=%" PRIu32 ": chunk %d at %zu/%zu, expected "
                      "%zu/%zu", n, count, r, q, c, sf.range.off, rf.range.off, send_next,
                      recv_next);
                CHECK((sf.range.off - seg[want_send].off) % RING_SCHED_ALIGN == 0 ||
                          sf.range.len == 0,
                      "N=%d rank %d q=%" PRIu32 ": chunk offset %zu not block aligned", n, r, q,
                      sf.range.off);
                send_next = sf.range.off + sf.range.len;
                recv_next = rf.range.off + rf.range.len;
                /* the engine stages a reduce-scatter chunk in chunk_bytes */
                CHECK(sf.range.len * elem <= max_payload,
                      "N=%d count=%zu chunk_bytes=%zu elem=%zu: frame %" PRIu32 " carries %zu "
                      "elements = %zu bytes, more than a staging slot", n, count, chunk_bytes,
                      elem, q, sf.range.len, sf.range.len * elem);
                /* the engine's dependency rules read/overwrite exactly these regions */
                if (q >= (uint32_t)nc && step >= 1) {
                    ring_sched_frame_t dep;
                    ring_sched_recv_frame(me, q - (uint32_t)nc, &dep);
                    CHECK(dep.segment == sf.segment && dep.range.off == sf.range.off &&
                              dep.range.len == sf.range.len,
                          "N=%d rank %d: send %" PRIu32 " does not forward what recv %" PRIu32
                          " produced", n, r, q, q - (uint32_t)nc);
                }
                if (!rs) {
                    ring_sched_frame_t dep;
                    ring_sched_send_frame(me, q - ag_lag, &dep);
                    CHECK(dep.segment == rf.segment && dep.range.off == rf.range.off &&
                              dep.range.len == rf.range.len,
                          "N=%d rank %d: allgather recv %" PRIu32 " does not overwrite what "
                          "send %" PRIu32 " read", n, r, q, q - ag_lag);
                }
                if (rf.last_reduce)
                    CHECK(rf.segment == (r + 1) % n,
                          "N=%d rank %d: last reduce lands in segment %d, owner should be %d", n,
                          r, rf.segment, (r + 1) % n);
            }
            CHECK(send_next == seg[want_send].off + seg[want_send].len &&
                      recv_next == seg[want_recv].off + seg[want_recv].len,
                  "N=%d count=%zu rank %d step %d: chunks do not cover the segment", n, count, r,
                  step);
        }
        /* reduce-scatter receives every segment but its own; it ends owning r+1 */
        CHECK(rs_recv_seen == (FULL(n) & ~(1u << r)),
              "N=%d rank %d: reduce-scatter receives segments %#x", n, r, rs_recv_seen);
        CHECK(rs_send_seen == (FULL(n) & ~(1u << right)),
              "N=%d rank %d: reduce-scatter sends segments %#x", n, r, rs_send_seen);
        CHECK(ag_send_seen == (FULL(n) & ~(1u << (r + 2) % n)),
              "N=%d rank %d: allgather sends segments %#x (all but the one it received last)",
              n, r, ag_send_seen);
        CHECK(ag_recv_seen == (FULL(n) & ~(1u << right)),
              "N=%d rank %d: allgather receives segments %#x (it owns %d)", n, r, ag_recv_seen,
              right);
        CHECK(ring_sched_send_segment(r, n, n - 1) == right,
              "N=%d rank %d: allgather starts with segment %d, owner of %d", n, r,
              ring_sched_send_segment(r, n, n - 1), right);
    }
}

/* ---- simulation ----------------------------------------------------------- */

typedef struct sent_frame {
    ring_sched_frame_t f;
    uint64_t *data;
} sent_frame_t;

typedef struct sim_rank {
    ring_sched_t s;
    uint64_t *sendbuf, *recvbuf;
    uint32_t next_send, sends_done, next_recv, recvs_done;
    ring_sched_frame_t send_f[RING_WINDOW];
    uint64_t *snap[RING_WINDOW]; /* what each send in flight read at post time */
    sent_frame_t *inbox;         /* frames from the left neighbour, by q */
    uint32_t inbox_len;          /* frames delivered so far */
    unsigned weight;
} sim_rank_t;

static uint32_t expected_send_mask(int r, int n, int step)
{
    return step < n - 1 ? ranks_mask(r, step, n) : FULL(n);
}

static int overlap(ring_range_t a, ring_range_t b)
{
    return a.len > 0 && b.len > 0 && a.off < b.off + b.len && b.off < a.off + a.len;
}

/* Check a region holds elements idx..idx+len with exactly the mask want. */
static void check_region(const uint64_t *buf, ring_range_t rg, uint32_t want, const char *what,
                         int n, int r, uint32_t q)
{
    for (size_t i = 0; i < rg.len; i++) {
        uint64_t v = buf[rg.off + i];
        if (E_IDX(v) != rg.off + i || E_MASK(v) != want) {
            CHECK(0, "N=%d rank %d frame %" PRIu32 " %s: element %zu is idx %" PRIu32
                     " mask %#" PRIx32 ", expected mask %#" PRIx32 "%s",
                  n, r, q, what, rg.off + i, E_IDX(v), E_MASK(v), want,
                  E_MASK(v) & M_POISON ? " (a receive into it is in flight)"
                  : E_MASK(v) & M_GARBAGE ? " (never written)" : "");
            return;
        }
    }
    nchecks++;
}

/*
 * All ranks of one allreduce of count elements, events in a random order
 * under the engine's rules. Returns the number of events run.
 */
static long simulate(int n, size_t count, size_t chunk_bytes, int inplace, uint64_t seed)
{
    sim_rank_t *rk = calloc((size_t)n, sizeof(*rk));
    size_t maxchunk = 0;
    long events = 0;
    int done_ranks = 0;

    if (rk == NULL)
        bail("out of memory");
    rng_seed(seed);
    for (int r = 0; r < n; r++) {
        sim_rank_t *x = &rk[r];

        ring_sched_init(&x->s, r, n, count, sizeof(float), chunk_bytes);
        x->sendbuf = malloc((count + 1) * sizeof(uint64_t));
        x->recvbuf = inplace ? x->sendbuf : malloc((count + 1) * sizeof(uint64_t));
        x->inbox = calloc((size_t)x->s.nrecv + 1, sizeof(sent_frame_t));
        if (x->sendbuf == NULL || x->recvbuf == NULL || x->inbox == NULL)
            bail("out of memory");
        for (size_t i = 0; i < count; i++) {
            x->sendbuf[i] = ELEM(i, 1u << r);
            if (!inplace)
                x->recvbuf[i] = ELEM(i, M_GARBAGE);
        }
        x->weight = 1 + rng_next() % 8; /* some ranks run faster than others */
    }
    /* frames that do not fit the buffers would crash the simulation: stop there */
    for (int r = 0; r < n; r++) {
        if (rk[r].s.nrecv != rk[0].s.nrecv) {
            CHECK(0, "N=%d count=%zu: rank %d has %" PRIu32 " frames, rank 0 %" PRIu32, n, count,
                  r, rk[r].s.nrecv, rk[0].s.nrecv);
            done_ranks = n;
        }
        for (uint32_t q = 0; q < rk[r].s.nrecv; q++) {
            ring_sched_frame_t f[2];
            ring_sched_send_frame(&rk[r].s, q, &f[0]);
            ring_sched_recv_frame(&rk[r].s, q, &f[1]);
            for (int d = 0; d < 2; d++) {
                if (f[d].range.off > count || f[d].range.len > count - f[d].range.off) {
                    CHECK(0, "N=%d count=%zu: rank %d frame %" PRIu32 " range [%zu,+%zu) is out "
                             "of bounds", n, count, r, q, f[d].range.off, f[d].range.len);
                    done_ranks = n;
                }
                if (f[d].range.len > maxchunk)
                    maxchunk = f[d].range.len;
            }
        }
    }
    for (int r = 0; r < n; r++)
        for (int w = 0; w < RING_WINDOW; w++)
            if ((rk[r].snap[w] = malloc((maxchunk + 1) * sizeof(uint64_t))) == NULL)
                bail("out of memory");

    if (n == 1) {
        /* a ring of one: the engine copies the input */
        CHECK(rk[0].s.nrecv == 0, "N=1: %" PRIu32 " frames", rk[0].s.nrecv);
        if (!inplace)
            memcpy(rk[0].recvbuf, rk[0].sendbuf, count * sizeof(uint64_t));
        done_ranks = 1;
    }

    while (done_ranks < n) {
        int start = (int)(rng_next() % (unsigned)n), acted = 0;

        for (int t = 0; t < n && !acted; t++) {
            int r = (start + t) % n;
            sim_rank_t *x = &rk[r];
            sim_rank_t *right = &rk[(r + 1) % n];
            uint32_t nc = (uint32_t)x->s.nchunks, nf = x->s.nrecv;
            uint32_t ag_lag = (uint32_t)(n - 1) * nc;
            int can[4], ncan = 0, pick;

            if (x->recvs_done == nf && x->sends_done == nf)
                continue;
            /* slow ranks get fewer turns (but never none, so nothing starves) */
            if (t == 0 && rng_next() % 8 >= x->weight)
                continue;
            if (x->next_send < nf && x->next_send - x->sends_done < RING_WINDOW &&
                (x->next_send < nc || x->next_send - nc < x->recvs_done))
                can[ncan++] = 0; /* post send */
            if (x->sends_done < x->next_send)
                can[ncan++] = 1; /* a send leaves */
            if (x->next_recv < nf && x->next_recv - x->recvs_done < RING_WINDOW &&
                (x->next_recv < ag_lag || x->next_recv - ag_lag < x->sends_done))
                can[ncan++] = 2; /* post recv */
            if (x->recvs_done < x->next_recv && x->recvs_done < x->inbox_len)
                can[ncan++] = 3; /* a recv completes and is retired */
            if (ncan == 0)
                continue;
            pick = can[rng_next() % (unsigned)ncan];
            acted = 1;
            events++;
            if (pick == 0) {
                uint32_t q = x->next_send++;
                ring_sched_frame_t *f = &x->send_f[q % RING_WINDOW];
                const uint64_t *src;

                ring_sched_send_frame(&x->s, q, f);
                src = f->step == 0 ? x->sendbuf : x->recvbuf;
                check_region(src, f->range, expected_send_mask(r, n, f->step), "send reads", n, r,
                             q);
                memcpy(x->snap[q % RING_WINDOW], src + f->range.off,
                       f->range.len * sizeof(uint64_t));
            } else if (pick == 1) {
                uint32_t q = x->sends_done++;
                ring_sched_frame_t *f = &x->send_f[q % RING_WINDOW];
                const uint64_t *src = f->step == 0 ? x->sendbuf : x->recvbuf;
                sent_frame_t *out = &right->inbox[q];

                /* the transport may read the buffer at any time between post and completion */
                CHECK(memcmp(src + f->range.off, x->snap[q % RING_WINDOW],
                             f->range.len * sizeof(uint64_t)) == 0,
                      "N=%d count=%zu rank %d: the region of send %" PRIu32
                      " changed while it was in flight", n, count, r, q);
                CHECK(q == right->inbox_len, "N=%d rank %d: send %" PRIu32 " out of order", n, r,
                      q);
                out->f = *f;
                out->data = malloc((f->range.len + 1) * sizeof(uint64_t));
                if (out->data == NULL)
                    bail("out of memory");
                memcpy(out->data, x->snap[q % RING_WINDOW], f->range.len * sizeof(uint64_t));
                right->inbox_len++;
            } else if (pick == 2) {
                uint32_t q = x->next_recv++;
                ring_sched_frame_t f;

                ring_sched_recv_frame(&x->s, q, &f);
                if (!f.reduce) {
                    /* allgather lands straight in the result: the region is garbage until done */
                    for (uint32_t p = x->sends_done; p < x->next_send; p++)
                        CHECK(!overlap(x->send_f[p % RING_WINDOW].range, f.range) ||
                                  (x->send_f[p % RING_WINDOW].step == 0 && !inplace),
                              "N=%d count=%zu rank %d: allgather recv %" PRIu32
                              " posted over the region of send %" PRIu32 " still in flight", n,
                              count, r, q, p);
                    for (size_t i = 0; i < f.range.len; i++)
                        x->recvbuf[f.range.off + i] = ELEM(f.range.off + i, M_POISON);
                }
            } else {
                uint32_t q = x->recvs_done++;
                ring_sched_frame_t f;
                sent_frame_t *in = &x->inbox[q];
                int left = imod(r - 1, n);

                ring_sched_recv_frame(&x->s, q, &f);
                CHECK(frames_equal(&f, &in->f),
                      "N=%d count=%zu rank %d frame %" PRIu32 ": header from rank %d does not "
                      "match the expected frame", n, count, r, q, left);
                if (f.reduce) {
                    uint32_t want_in = ranks_mask(left, f.step, n);
                    int bad = 0;

                    for (size_t i = 0; i < f.range.len && !bad; i++) {
                        size_t e = f.range.off + i;
                        uint64_t mine = x->sendbuf[e], got = in->data[i];

                        if (E_IDX(got) != e || E_MASK(got) != want_in || E_IDX(mine) != e ||
                            E_MASK(mine) != (1u << r) || (E_MASK(got) & E_MASK(mine)) != 0) {
                            CHECK(0, "N=%d count=%zu rank %d frame %" PRIu32
                                     " (reduce step %d): element %zu got idx %" PRIu32
                                     " mask %#" PRIx32 " (want %#" PRIx32 "), own idx %" PRIu32
                                     " mask %#" PRIx32,
                                  n, count, r, q, f.step, e, E_IDX(got), E_MASK(got), want_in,
                                  E_IDX(mine), E_MASK(mine));
                            bad = 1;
                            break;
                        }
                        x->recvbuf[e] = ELEM(e, E_MASK(got) | E_MASK(mine));
                    }
                    if (!bad)
                        nchecks++;
                    if (f.last_reduce) {
                        CHECK(f.segment == (r + 1) % n,
                              "N=%d rank %d: owns segment %d after reduce-scatter", n, r,
                              f.segment);
                        check_region(x->recvbuf, f.range, FULL(n), "last reduce gives", n, r, q);
                    }
                } else {
                    for (size_t i = 0; i < f.range.len; i++)
                        x->recvbuf[f.range.off + i] = in->data[i];
                    check_region(x->recvbuf, f.range, FULL(n), "allgather delivers", n, r, q);
                }
                free(in->data);
                in->data = NULL;
            }
            if (x->recvs_done == nf && x->sends_done == nf)
                done_ranks++;
        }
        if (!acted) {
            /* every rank skipped its turn: see whether anything at all can move */
            int stuck = 1;
            for (int r = 0; r < n && stuck; r++) {
                sim_rank_t *x = &rk[r];
                uint32_t nc = (uint32_t)x->s.nchunks, nf = x->s.nrecv;
                uint32_t ag_lag = (uint32_t)(n - 1) * nc;
                if ((x->next_send < nf && x->next_send - x->sends_done < RING_WINDOW &&
                     (x->next_send < nc || x->next_send - nc < x->recvs_done)) ||
                    x->sends_done < x->next_send ||
                    (x->next_recv < nf && x->next_recv - x->recvs_done < RING_WINDOW &&
                     (x->next_recv < ag_lag || x->next_recv - ag_lag < x->sends_done)) ||
                    (x->recvs_done < x->next_recv && x->recvs_done < x->inbox_len))
                    stuck = 0;
            }
            if (stuck) {
                CHECK(0, "N=%d count=%zu chunk=%zu: deadlock with %d of %d ranks done", n, count,
                      chunk_bytes, done_ranks, n);
                break;
            }
        }
    }

    /* every rank ends with the full sum everywhere; out of place, the input is untouched */
    for (int r = 0; r < n; r++) {
        ring_range_t all = {0, count};
        check_region(rk[r].recvbuf, all, FULL(n), "final result", n, r, rk[r].s.nrecv);
        if (!inplace)
            check_region(rk[r].sendbuf, all, 1u << r, "input after the allreduce", n, r,
                         rk[r].s.nrecv);
    }

    for (int r = 0; r < n; r++) {
        for (uint32_t q = 0; q <= rk[r].s.nrecv; q++)
            free(rk[r].inbox[q].data);
        free(rk[r].inbox);
        for (int w = 0; w < RING_WINDOW; w++)
            free(rk[r].snap[w]);
        if (!inplace)
            free(rk[r].recvbuf);
        free(rk[r].sendbuf);
    }
    free(rk);
    return events;
}

/* ---- ring_sched_split on its own ------------------------------------------- */

static void check_split(size_t align)
{
    static const size_t big[] = {1000, 1023, 1024, 1025, 4099, 65536, 65537, 1000003,
                                 (size_t)1 << 40, ((size_t)1 << 40) + 17};

    reset_checks();
    for (size_t ci = 0; ci < 300 + sizeof(big) / sizeof(big[0]); ci++) {
        size_t count = ci < 300 ? ci : big[ci - 300];

        for (int parts = 1; parts <= 70; parts++) {
            size_t next = 0, minblk = (size_t)-1, maxblk = 0, minlen = (size_t)-1, maxlen = 0;

            for (int p = 0; p < parts; p++) {
                ring_range_t r = ring_sched_split(count, parts, p, align);
                size_t blk = (r.len + align - 1) / align;

                CHECK(r.off == next, "split(%zu, %d, %d, %zu) starts at %zu, expected %zu", count,
                      parts, p, align, r.off, next);
                CHECK(r.off % align == 0 || r.len == 0,
                      "split(%zu, %d, %d, %zu) starts at %zu, not aligned", count, parts, p,
                      align, r.off);
                next = r.off + r.len;
                if (r.len < minlen)
                    minlen = r.len;
                if (r.len > maxlen)
                    maxlen = r.len;
                if (blk < minblk)
                    minblk = blk;
                if (blk > maxblk)
                    maxblk = blk;
            }
            CHECK(next == count, "split(%zu, %d, *, %zu) covers %zu elements", count, parts,
                  align, next);
            CHECK(maxblk - minblk <= 1, "split(%zu, %d, *, %zu): parts of %zu..%zu blocks", count,
                  parts, align, minblk, maxblk);
            CHECK(maxlen - minlen <= align, "split(%zu, %d, *, %zu): parts of %zu..%zu elements",
                  count, parts, align, minlen, maxlen);
        }
    }
    ok(nfail == 0, "ring_sched_split(count, 1..70, p, %zu) tiles [0,count) in aligned, "
                   "balanced parts (%ld checks)", align, nchecks);
}

int main(void)
{
    static const size_t aligns[] = {1, 3, 16, 64};
    /* not multiples of 64 bytes: the engine accepts any chunk size of 64..1G bytes */
    static const size_t unaligned_chunks[] = {100, 1000, 4100};
    size_t counts[32];
    int lines = 4 + MAX_N + 1;

    for (int n = 1; n <= MAX_N; n++)
        lines += (int)counts_for(n, counts);
    plan(lines);

    for (size_t a = 0; a < sizeof(aligns) / sizeof(aligns[0]); a++)
        check_split(aligns[a]);

    /* structure, per ring size, over every count and chunk size (fp32 and fp16 element sizes) */
    for (int n = 1; n <= MAX_N; n++) {
        size_t nc = counts_for(n, counts);

        reset_checks();
        for (size_t ci = 0; ci < nc; ci++) {
            for (size_t k = 0; k < NCHUNK_SIZES; k++) {
                check_structure(n, counts[ci], chunk_sizes[k], 4);
                check_structure(n, counts[ci], chunk_sizes[k], 2);
            }
            for (size_t k = 0; k < sizeof(unaligned_chunks) / sizeof(unaligned_chunks[0]); k++)
                check_structure(n, counts[ci], unaligned_chunks[k], 4);
        }
        /* and a sweep of every count up to 24 blocks */
        for (size_t count = 0; count <= 24 * RING_SCHED_ALIGN; count++) {
            check_structure(n, count, 256, 4);
            check_structure(n, count, 100, 4);
        }
        ok(nfail == 0, "N=%d: segments, chunks, frames, owners and dependencies are consistent "
                       "(%ld checks)", n, nchecks);
    }

    /* the engine's data flow, all ranks in memory */
    for (int n = 1; n <= MAX_N; n++) {
        size_t nc = counts_for(n, counts);

        for (size_t ci = 0; ci < nc; ci++) {
            long events = 0;
            int runs = 0;

            reset_checks();
            for (size_t k = 0; k < NCHUNK_SIZES; k++) {
                /* two interleavings for small counts, one for larger; 65537 elements in
                 * small chunks would be slow and adds nothing the smaller counts miss */
                int seeds = counts[ci] > 10000 ? chunk_sizes[k] < 4096 ? 0 : 1
                            : counts[ci] > 1100 ? 1 : 2;
                for (int seed = 0; seed < seeds; seed++)
                    for (int inplace = 0; inplace <= 1; inplace++) {
                        events += simulate(n, counts[ci], chunk_sizes[k], inplace,
                                           (uint64_t)n * 1000003u + counts[ci] * 31u + k * 7u +
                                               (uint64_t)seed * 2u + (uint64_t)inplace);
                        runs++;
                    }
            }
            ok(nfail == 0 && nchecks > 0,
               "N=%d count=%zu: every rank ends with every element summed over all ranks "
               "exactly once (%d runs, %ld events, %ld checks)", n, counts[ci], runs, events,
               nchecks);
        }
    }

    /* regression: the short tail block once went to the last part on top of
     * the extra blocks of the first ones (count 97, N 2: 64 and 33 elements) */
    ok(worst_spread <= RING_SCHED_ALIGN,
       "segment lengths differ by at most RING_SCHED_ALIGN elements (worst %zu: N=%d count=%zu)",
       worst_spread, worst_spread_n, worst_spread_count);

    return done_testing();
}
