/* schedule.c - the ring schedule: pure arithmetic, no I/O. */
#include "config.h"

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

void ring_sched_init(ring_sched_t *s, int rank, int nranks, size_t count, size_t elem_size,
                     size_t chunk_bytes)
{
    /* the largest segment decides how many chunks every segment has */
    size_t blocks = (count + RING_SCHED_ALIGN - 1) / RING_SCHED_ALIGN;
    size_t seg_max = (blocks + (size_t)nranks - 1) / (size_t)nranks * RING_SCHED_ALIGN;
    /* whole blocks per chunk, so no chunk exceeds chunk_bytes (the staging slot size) */
    size_t chunk_elems = chunk_bytes / elem_size / RING_SCHED_ALIGN * RING_SCHED_ALIGN;
    size_t nchunks;

    if (seg_max > count)
        seg_max = count;
    if (chunk_elems < RING_SCHED_ALIGN)
        chunk_elems = RING_SCHED_ALIGN;
    nchunks = (seg_max + chunk_elems - 1) / chunk_elems;
    s->rank = rank;
    s->nranks = nranks;
    s->count = count;
    s->nchunks = nchunks == 0 ? 1 : (int)nchunks;
    s->nframes = (uint32_t)(2 * (nranks - 1)) * (uint32_t)s->nchunks;
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

static void sched_frame(const ring_sched_t *s, uint32_t q, int segment, ring_sched_frame_t *f)
{
    ring_range_t seg = ring_sched_split(s->count, s->nranks, segment, RING_SCHED_ALIGN);
    ring_range_t sub = ring_sched_split(seg.len, s->nchunks, f->chunk, RING_SCHED_ALIGN);

    f->segment = segment;
    f->reduce = f->step < s->nranks - 1;
    f->last_reduce = f->step == s->nranks - 2;
    f->range.off = seg.off + sub.off;
    f->range.len = sub.len;
    (void)q;
}

void ring_sched_send_frame(const ring_sched_t *s, uint32_t q, ring_sched_frame_t *f)
{
    f->step = (int)(q / (uint32_t)s->nchunks);
    f->chunk = (int)(q % (uint32_t)s->nchunks);
    sched_frame(s, q, ring_sched_send_segment(s->rank, s->nranks, f->step), f);
}

void ring_sched_recv_frame(const ring_sched_t *s, uint32_t q, ring_sched_frame_t *f)
{
    f->step = (int)(q / (uint32_t)s->nchunks);
    f->chunk = (int)(q % (uint32_t)s->nchunks);
    sched_frame(s, q, ring_sched_recv_segment(s->rank, s->nranks, f->step), f);
}
