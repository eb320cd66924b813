/*
 * ring-bench-coll.c - the collectives ring-bench measures (--coll): for each,
 * the shape of a size (nccl-tests' size and count columns), the bus
 * bandwidth factor (nccl-tests' doc/PERFORMANCE.md), the call, and the -c
 * check that fills the buffers and counts wrong elements.
 *
 * Conventions, as nccl-tests prints them: the size column is the buffer for
 * allreduce and broadcast, the whole output for allgather (N blocks) and
 * the whole input for reducescatter (N blocks); algbw = size / time; busbw =
 * algbw * 2(N-1)/N for allreduce, * (N-1)/N for allgather and
 * reducescatter, * 1 for broadcast (each byte crosses one link per peer).
 */
#include "ring_build.h"

#include <string.h>

#include "ring-bench.h"

static const char *const coll_names[BENCH_COLL_COUNT] = {"allreduce", "broadcast", "allgather",
                                                          "reducescatter"};

const char *bench_coll_name(bench_coll_t coll)
{
    return (unsigned)coll < BENCH_COLL_COUNT ? coll_names[coll] : "?";
}

int bench_coll_parse(const char *name, bench_coll_t *coll_p)
{
    for (int c = 0; c < BENCH_COLL_COUNT; c++) {
        if (strcmp(name, coll_names[c]) == 0) {
            *coll_p = (bench_coll_t)c;
            return 0;
        }
    }
    return -1;
}

void bench_coll_shape(bench_coll_t coll, size_t want_bytes, int n, bench_shape_t *shape_p)
{
    size_t elems = want_bytes / sizeof(float);

    if (coll == BENCH_ALLGATHER || coll == BENCH_REDUCESCATTER) {
        /* N equal blocks: nccl-tests' count / nranks, rounded down */
        shape_p->count = elems / (size_t)n;
        shape_p->block = shape_p->count * sizeof(float);
        shape_p->bytes = shape_p->block * (size_t)n;
    } else {
        shape_p->count = elems;
        shape_p->bytes = elems * sizeof(float);
        shape_p->block = shape_p->bytes;
    }
}

double bench_coll_busbw_factor(bench_coll_t coll, int n)
{
    if (n <= 1)
        return 1.0; /* nothing crosses a link; busbw = algbw, as ring-bench always printed */
    switch (coll) {
    case BENCH_ALLREDUCE: return 2.0 * (n - 1) / n;
    case BENCH_ALLGATHER:
    case BENCH_REDUCESCATTER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

ring_status_t bench_coll_call(ring_comm_t *comm, const bench_opts_t *o, const bench_shape_t *s,
                              float *sbuf, float *rbuf)
{
    size_t mine = (size_t)ring_comm_rank(comm) * s->count; /* this rank's block, in elements */

    switch (o->coll) {
    case BENCH_ALLREDUCE:
        return ring_allreduce(comm, sbuf, o->inplace ? sbuf : rbuf, s->count, RING_FLOAT32, o->op);
    case BENCH_BROADCAST:
        /* always in place: the root's buffer is the source, the others' the destination */
        return ring_broadcast(comm, sbuf, s->bytes, o->root);
    case BENCH_ALLGATHER:
        return ring_allgather(comm, o->inplace ? rbuf + mine : sbuf, rbuf, s->block);
    case BENCH_REDUCESCATTER:
        return ring_reduce_scatter(comm, sbuf, o->inplace ? sbuf + mine : rbuf, s->count,
                                   RING_FLOAT32, o->op);
    default:
        return RING_ERR_INVALID;
    }
}

/* The bits broadcast and allgather must deliver: element i of rank r's data.
 * Any 32 bits (NaN payloads and -0.0 included), since both are bit-exact. */
static uint32_t coll_word(int r, size_t i)
{
    return (uint32_t)bench_mix(((uint64_t)(r + 1) << 40) + i + 0x5bd1e995u);
}

static void coll_put(float *buf, size_t i, uint32_t w)
{
    memcpy(buf + i, &w, sizeof(w));
}

static uint32_t coll_get(const float *buf, size_t i)
{
    uint32_t w;

    memcpy(&w, buf + i, sizeof(w));
    return w;
}

void bench_coll_fill_check(ring_comm_t *comm, const bench_opts_t *o, const bench_shape_t *s,
                           float *sbuf, float *rbuf)
{
    int n = ring_comm_size(comm), rank = ring_comm_rank(comm);
    size_t mine = (size_t)rank * s->count;

    switch (o->coll) {
    case BENCH_ALLREDUCE:
        bench_fill(sbuf, s->count, rank);
        if (!o->inplace)
            for (size_t i = 0; i < s->count; i++)
                rbuf[i] = -1.0f; /* a call that writes nothing is caught */
        break;
    case BENCH_BROADCAST:
        /* the others hold the complement of every word: any byte not delivered differs */
        for (size_t i = 0; i < s->count; i++)
            coll_put(sbuf, i, rank == o->root ? coll_word(o->root, i) : ~coll_word(o->root, i));
        break;
    case BENCH_ALLGATHER:
        for (size_t j = 0; j < (size_t)n * s->count; j++)
            coll_put(rbuf, j, ~coll_word((int)(j / s->count), j % s->count));
        for (size_t i = 0; i < s->count; i++)
            coll_put(o->inplace ? rbuf + mine : sbuf, i, coll_word(rank, i));
        break;
    case BENCH_REDUCESCATTER:
        bench_fill(sbuf, (size_t)n * s->count, rank);
        if (!o->inplace)
            for (size_t i = 0; i < s->count; i++)
                rbuf[i] = -1.0f;
        break;
    default:
        break;
    }
}

size_t bench_coll_verify(ring_comm_t *comm, const bench_opts_t *o, const bench_shape_t *s,
                         const float *sbuf, const float *rbuf)
{
    int n = ring_comm_size(comm), rank = ring_comm_rank(comm);
    size_t mine = (size_t)rank * s->count, wrong = 0;

    switch (o->coll) {
    case BENCH_ALLREDUCE:
        return bench_verify(o->inplace ? sbuf : rbuf, s->count, 0, n, o->op, o->tolerance);
    case BENCH_BROADCAST:
        for (size_t i = 0; i < s->count; i++)
            wrong += coll_get(sbuf, i) != coll_word(o->root, i);
        return wrong;
    case BENCH_ALLGATHER:
        for (size_t j = 0; j < (size_t)n * s->count; j++)
            wrong += coll_get(rbuf, j) != coll_word((int)(j / s->count), j % s->count);
        return wrong;
    case BENCH_REDUCESCATTER:
        /* this rank's block of the sum: elements [rank * count, (rank + 1) * count) */
        return bench_verify(o->inplace ? sbuf + mine : rbuf, s->count, mine, n, o->op,
                            o->tolerance);
    default:
        return s->count;
    }
}
