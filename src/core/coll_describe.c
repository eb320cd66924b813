/*
 * coll_describe.c - the names of the collectives and data types, and a
 * call described in words for error messages ("allreduce #12 with count
 * 1024, float32, sum, tensor id 3"). Pure functions: the failure paths
 * (fail.c) and the engine (allreduce.c) both use them, so they sit below
 * both.
 */
#include "ring_build.h"

#include <stdio.h>

#include "collectives.h"
#include "comm_int.h"

const char *const ring_coll_names[RING_COLL_COUNT] = {"allreduce", "reduce-scatter", "allgather",
                                                      "broadcast"};

size_t ring_dtype_size(ring_dtype_t dtype)
{
    return dtype == RING_FLOAT32 ? 4 : dtype == RING_DTYPE_BYTES ? 1 : 2;
}

size_t ring_coll_describe(ring_coll_t coll, uint64_t round, uint64_t count, unsigned dtype,
                          unsigned op, uint32_t tensor_id, int root, char *buf, size_t len)
{
    static const char *const dtypes[] = {"float32", "float16", "bfloat16", "bytes"};
    static const char *const ops[] = {"sum", "avg"};
    const char *name = coll < RING_COLL_COUNT ? ring_coll_names[coll] : "an unknown collective";
    int n;

    if (coll == RING_COLL_BROADCAST && root >= 0)
        n = snprintf(buf, len, "%s #%llu of %llu bytes from rank %d, tensor id %u", name,
                     (unsigned long long)round, (unsigned long long)count, root, tensor_id);
    else if (coll == RING_COLL_BROADCAST) /* an ABORT notice does not carry the root */
        n = snprintf(buf, len, "%s #%llu of %llu bytes, tensor id %u", name,
                     (unsigned long long)round, (unsigned long long)count, tensor_id);
    else if (coll == RING_COLL_ALLGATHER && tensor_id == RING_BARRIER_TENSOR_ID)
        n = snprintf(buf, len, "barrier #%llu", (unsigned long long)round);
    else if (coll == RING_COLL_ALLGATHER)
        n = snprintf(buf, len, "%s #%llu of %llu bytes in all, tensor id %u", name,
                     (unsigned long long)round, (unsigned long long)count, tensor_id);
    else
        n = snprintf(buf, len, "%s #%llu with count %llu, %s, %s, tensor id %u", name,
                     (unsigned long long)round, (unsigned long long)count,
                     dtype < 4 ? dtypes[dtype] : "?", op < 2 ? ops[op] : "?", tensor_id);
    return n < 0 ? 0 : (size_t)n;
}
