/* schedule.c - the ring schedule: pure arithmetic, no I/O. */
#include "ring_build.h"

#include <string.h>

#include "schedule.h"

static int mod(int a, int n)
{
    int r = a % n;

    return r < 0 ? r + n : r;
}

ring_range_t ring_sched_split(size_t count, int parts, int part, size_t align)
{
    /* Whole blocks, the extra ones to the last parts: the last part also holds
     * the short tail block, so lengths differ by at most one block. */
    size_t blocks = (count + align - 1) / align;
    size_t base = blocks / (size_t)parts, extra = blocks % (size_t)parts;
    size_t p = (size_t)part, plain = (size_t)parts - extra;
    size_t first = p * base + (p > plain ? p - plain : 0);
    size_t nblocks = base + (p >= plain ? 1 : 0);
    ring_range_t r;

    r.off = first * align;
    if (r.off > count)
        r.off = count;
    r.len = (first + nblocks) * align;
    if (r.len > count)
        r.len = count;
    r.len -= r.off;
    return r;
}

/* Whole blocks per chunk, so no chunk exceeds chunk_bytes (the staging slot size). */
static int chunks_for(size_t seg_max, size_t elem_size, size_t chunk_bytes)
{
    size_t chunk_elems = chunk_bytes / elem_size / RING_SCHED_ALIGN * RING_SCHED_ALIGN;
    size_t nchunks;

    if (chunk_elems < RING_SCHED_ALIGN)
        chunk_elems = RING_SCHED_ALIGN;
    nchunks = (seg_max + chunk_elems - 1) / chunk_elems;
    return nchunks == 0 ? 1 : (int)nchunks;
}

void ring_sched_init(ring_sched_t *s, int rank, int nranks, size_t count, size_t elem_size,
                     size_t chunk_bytes)
{
    /* the largest segment decides how many chunks every segment has */
    size_t blocks = (count + RING_SCHED_ALIGN - 1) / RING_SCHED_ALIGN;
    size_t seg_max = (blocks + (size_t)nranks - 1) / (size_t)nranks * RING_SCHED_ALIGN;

    if (seg_max > count)
        seg_max = count;
    s->kind = RING_SCHED_ALLREDUCE;
    s->rank = rank;
    s->nranks = nranks;
    s->count = count;
    s->nchunks = chunks_for(seg_max, elem_size, chunk_bytes);
    s->first_step = 0;
    s->root_dist = 0;
    s->segs = NULL;
    s->nsend = s->nrecv = (uint32_t)(2 * (nranks - 1)) * (uint32_t)s->nchunks;
}

void ring_sched_init_coll(ring_sched_t *s, ring_sched_kind_t kind, int rank, int nranks,
                          const ring_range_t *segs, int root_dist, size_t elem_size,
                          size_t chunk_bytes)
{
    int nsegs = kind == RING_SCHED_BROADCAST ? 1 : nranks;
    size_t seg_max = 0, count = 0;
    uint32_t frames;

    for (int i = 0; i < nsegs; i++) {
        seg_max = segs[i].len > seg_max ? segs[i].len : seg_max;
        count += segs[i].len;
    }
    s->kind = kind;
    s->rank = rank;
    s->nranks = nranks;
    s->count = count;
    s->nchunks = chunks_for(seg_max, elem_size, chunk_bytes);
    s->first_step = kind == RING_SCHED_ALLGATHER ? nranks - 1 : 0;
    s->root_dist = kind == RING_SCHED_BROADCAST ? root_dist : 0;
    s->segs = segs;
    frames = (uint32_t)(nranks - 1) * (uint32_t)s->nchunks;
    s->nsend = s->nrecv = frames;
    if (kind == RING_SCHED_BROADCAST) {
        /* a chain: the root only sends, the peer before it only receives */
        s->nrecv = nranks > 1 && root_dist > 0 ? (uint32_t)s->nchunks : 0;
        s->nsend = nranks > 1 && root_dist < nranks - 1 ? (uint32_t)s->nchunks : 0;
    }
}

uint32_t ring_sched_send_needs(const ring_sched_t *s, uint32_t q)
{
    uint32_t nc = (uint32_t)s->nchunks;

    if (s->kind == RING_SCHED_BROADCAST)
        return s->root_dist == 0 ? 0 : q + 1; /* forward chunk q once it is here */
    /* the first step sends this peer's own data; later ones what the step before brought */
    return q < nc ? 0 : q - nc + 1;
}

uint32_t ring_sched_recv_needs(const ring_sched_t *s, uint32_t q)
{
    /* allreduce's allgather lands received segments where the reduce-scatter sent
     * from: its step k waits for the sends of step k - (N-1). Nothing else reuses
     * a region. */
    uint32_t lag = (uint32_t)(s->nranks - 1) * (uint32_t)s->nchunks;

    if (s->kind != RING_SCHED_ALLREDUCE)
        return 0;
    return q < lag ? 0 : q - lag + 1;
}

int ring_sched_send_segment(int rank, int nranks, int step)
{
    if (step < nranks - 1)
        return mod(rank - step, nranks);
    return mod(rank + 1 - (step - (nranks - 1)), nranks);
}

int ring_sched_recv_segment(int rank, int nranks, int step)
{
    if (step < nranks - 1)
        return mod(rank - step - 1, nranks);
    return mod(rank - (step - (nranks - 1)), nranks);
}

static void sched_frame(const ring_sched_t *s, int segment, ring_sched_frame_t *f)
{
    ring_range_t seg = s->segs != NULL ? s->segs[segment]
                                       : ring_sched_split(s->count, s->nranks, segment,
                                                          RING_SCHED_ALIGN);
    ring_range_t sub = ring_sched_split(seg.len, s->nchunks, f->chunk, RING_SCHED_ALIGN);

    f->segment = segment;
    f->reduce = s->kind != RING_SCHED_BROADCAST && f->step < s->nranks - 1;
    f->last_reduce = f->reduce && f->step == s->nranks - 2;
    f->range.off = seg.off + sub.off;
    f->range.len = sub.len;
}

static void frame_number(const ring_sched_t *s, uint32_t q, ring_sched_frame_t *f)
{
    f->step = s->first_step + (int)(q / (uint32_t)s->nchunks);
    f->chunk = (int)(q % (uint32_t)s->nchunks);
    if (s->kind == RING_SCHED_BROADCAST)
        f->step = 0;
}

void ring_sched_send_frame(const ring_sched_t *s, uint32_t q, ring_sched_frame_t *f)
{
    frame_number(s, q, f);
    if (s->kind == RING_SCHED_BROADCAST) {
        f->own = s->root_dist == 0;
        sched_frame(s, 0, f);
        return;
    }
    f->own = q < (uint32_t)s->nchunks;
    sched_frame(s, ring_sched_send_segment(s->rank, s->nranks, f->step), f);
}

void ring_sched_recv_frame(const ring_sched_t *s, uint32_t q, ring_sched_frame_t *f)
{
    frame_number(s, q, f);
    f->own = 0;
    sched_frame(s, s->kind == RING_SCHED_BROADCAST
                       ? 0
                       : ring_sched_recv_segment(s->rank, s->nranks, f->step), f);
}
