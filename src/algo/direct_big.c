/*
 * direct_big.c - the direct allreduce's large calls: a reduce-scatter and an
 * allgather through the shared segment, a piece (up to 4 MiB) at a time.
 *
 * For each piece, step s (counted since open, the same on every peer):
 *   post    copy our piece into our big slot for s's parity (every peer has
 *           copied out the sums of step s-2, the slot's last contents, before
 *           it added its slice of s-1);
 *   reduce  once every peer posted s, add our 1/N slice of the piece from every
 *           slot, in place order, and write the sum over the next place's input
 *           for that slice (direct_sum), which only we read;
 *   copy    once every peer reduced s, copy every other slice's sum out.
 * Two waits per piece however many peers, where the ring takes 2(N-1)
 * dependent steps; each element is added by one peer only, so every peer
 * holds the same bits, and the same as direct.c's small calls give (slots in
 * place order, then the scale of an average). Each peer moves about 4 times
 * the buffer through memory (the ring over shm: about 7.5 at N = 4), and the
 * adding is shared out: what lets 4 peers on 2 cores run at memory speed.
 */
#include "ring_build.h"

#include <string.h>

#include "algo.h"
#include "clock.h"
#include "direct_int.h"
#include "reduce.h"

/* Place p's slice of a piece of n floats: [lo, hi), cut at 64-byte boundaries. */
static void slice_of_place(const ring_comm_t *comm, int p, size_t n, size_t *lo, size_t *hi)
{
    size_t places = (size_t)comm->size;

    *lo = (n * (size_t)p / places) & ~(size_t)15;
    *hi = (size_t)p + 1 == places ? n : (n * ((size_t)p + 1) / places) & ~(size_t)15;
}

/* Our slice of a piece of n floats. */
static void slice_of(const ring_comm_t *comm, size_t n, size_t *lo, size_t *hi)
{
    slice_of_place(comm, comm->topo.pos, n, lo, hi);
}

/* Copy what is outside our slice [lo, hi) of n floats from src to dst (the
 * others' slices: what they add from our slot). */
static void copy_around(float *dst, const float *src, size_t lo, size_t hi, size_t n)
{
    memcpy(dst, src, lo * sizeof(float));
    memcpy(dst + hi, src + hi, (n - hi) * sizeof(float));
}

/* Whether a call writes its result past the caches (non-temporal stores): one
 * larger than they hold, whose lines would be read from memory only to be
 * overwritten (and pushed out before the caller reads them anyway). */
static int direct_streams(const ring_request_t *req)
{
    return req->count * sizeof(float) >= DIRECT_STREAM_MIN;
}

/* Copy every other place's slice of step's sums into dst (the caller's buffer at
 * the piece), streamed when the call is that large. */
static void copy_out_sums(const ring_comm_t *comm, const ring_request_t *req, float *dst,
                          uint64_t step, size_t n)
{
    for (int q = 0; q < comm->size; q++) {
        const float *sum = direct_sum(comm->algo.direct, q, step);
        size_t lo, hi;

        slice_of_place(comm, q, n, &lo, &hi);
        if (q == comm->topo.pos || hi <= lo)
            continue;
        if (direct_streams(req))
            ring_copy_f32_stream(dst + lo, sum + lo, hi - lo);
        else
            memcpy(dst + lo, sum + lo, (hi - lo) * sizeof(float));
    }
}

/* Our slice of the piece: every place's input in place order (ours from our
 * own buffer, the others' from their slots), in one pass, into our recvbuf and
 * over the next place's input (direct_sum) at once. */
static ring_status_t add_slice(ring_comm_t *comm, ring_request_t *req, size_t n)
{
    struct ring_direct *d = comm->algo.direct;
    const float *src[RING_REDUCE_MAX_SRC];
    size_t lo, hi;
    int nonfinite;

    for (int p = 0; p < comm->size; p++) {
        direct_slot_hdr_t *h = direct_big_slot(d, p, d->step);

        if (!ring_direct_same_call(h, req) || h->off != d->off)
            return ring_direct_mismatch(comm, p, h);
        src[p] = direct_slot_data(h);
    }
    slice_of(comm, n, &lo, &hi);
    if (hi <= lo)
        return RING_OK;
    for (int p = 0; p < comm->size; p++)
        src[p] = (p == comm->topo.pos ? (const float *)req->sendbuf + d->off : src[p]) + lo;
    /* an inf or NaN anywhere in the inputs (or an overflow) shows in the sum: each
     * finds it in its own slice, in the pass that adds it, and says so on its board */
    nonfinite = (direct_streams(req) ? ring_reduce_sum_n_f32_stream : ring_reduce_sum_n_f32)(
        direct_sum(d, comm->topo.pos, d->step) + lo, (float *)req->recvbuf + d->off + lo, src,
        comm->size, req->op == RING_AVG ? 1.0f / (float)comm->size : 1.0f, hi - lo);
    if (nonfinite)
        atomic_store(&d->boards[comm->topo.pos].nonfinite_step, d->step + 1);
    return RING_OK;
}

ring_status_t ring_direct_big_progress(ring_comm_t *comm, ring_request_t *req, int *moved_p,
                                       int *finished_p)
{
    struct ring_direct *d = comm->algo.direct;
    const size_t piece = d->piece_bytes / sizeof(float);

    while (d->off < req->count) {
        size_t n = req->count - d->off < piece ? req->count - d->off : piece;
        size_t lo, hi;
        ring_status_t st;
        int p;

        if (d->phase == 0) {
            direct_slot_hdr_t *h = direct_big_slot(d, comm->topo.pos, d->step);

            /* no wait: our slot of s-2 held sums the others copy out, and each
             * did before it added its slice of s-1, which our copy of s-1 waited
             * for (checking again cost 0.2-0.3 us of a 4 KiB call at N = 2) */
            h->round = req->round;
            h->count = req->count;
            h->off = d->off;
            h->tensor_id = req->tensor_id;
            h->op = (uint32_t)req->op;
            /* the timeline counts our piece going in as a send, the result coming
             * out as a receive, our slice's sums as reduce */
            slice_of(comm, n, &lo, &hi);
            RING_TL_TIMED(comm, NULL, RING_TL_SEND, (n - (hi - lo)) * sizeof(float),
                          copy_around(direct_slot_data(h), (const float *)req->sendbuf + d->off,
                                      lo, hi, n));
            ring_direct_set(d, comm->topo.pos, DIRECT_BIG_POSTED, d->step + 1);
            d->phase = 1;
        } else if (d->phase == 1) {
            if ((p = ring_direct_lagging(comm, DIRECT_BIG_POSTED, d->step + 1)) >= 0)
                return ring_direct_check_wait(comm, p);
            RING_TL_TIMED(comm, NULL, RING_TL_REDUCE, n / (size_t)comm->size,
                          st = add_slice(comm, req, n));
            RING_CHECK(st);
            ring_direct_set(d, comm->topo.pos, DIRECT_BIG_REDUCED, d->step + 1);
            d->phase = 2;
        } else {
            if ((p = ring_direct_lagging(comm, DIRECT_BIG_REDUCED, d->step + 1)) >= 0)
                return ring_direct_check_wait(comm, p);
            slice_of(comm, n, &lo, &hi);
            RING_TL_TIMED(comm, NULL, RING_TL_RECV, (n - (hi - lo)) * sizeof(float),
                          copy_out_sums(comm, req, (float *)req->recvbuf + d->off, d->step, n));
            for (p = 0; p < comm->size; p++)
                req->nonfinite |= atomic_load(&d->boards[p].nonfinite_step) == d->step + 1;
            d->step++;
            d->off += n;
            d->phase = 0;
        }
        d->moved = 1;
        *moved_p += 1;
    }
    *finished_p = 1;
    return RING_OK;
}
