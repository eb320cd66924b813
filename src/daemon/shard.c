/*
 * shard.c - a peer's shard of the training set and its per-epoch order
 * (see shard.h), and its re-deal when the ring changes (--elastic).
 */
#include "ring_build.h"

#include "shard.h"

#include <stdlib.h>
#include <string.h>

#include "workloads/rng.h"

/* a tag so the shuffle stream differs from every other use of the seed */
#define SHARD_RNG_TAG 0x73686172645f6f72ull /* "shard_or" */

/* rank's standard order of epoch in a ring of world: len = ntrain / world indices */
static void standard_order(uint32_t *order, size_t len, int rank, int world, uint64_t seed,
                           uint64_t epoch, int shuffle)
{
    rng_t rng;

    for (size_t k = 0; k < len; k++)
        order[k] = (uint32_t)(k * (size_t)world + (size_t)rank);
    if (shuffle && len > 1) {
        /* Fisher-Yates within the shard; the rank is part of the seed so peers
         * draw different orders, and the epoch so each epoch differs */
        rng_seed(&rng, seed, SHARD_RNG_TAG ^ epoch, (uint64_t)rank);
        for (size_t k = len - 1; k > 0; k--) {
            size_t j = rng_uniform_u32_below(&rng, (uint32_t)(k + 1));
            uint32_t t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
    }
}

static int reserve(shard_t *s, size_t len)
{
    uint32_t *p;

    if (len <= s->cap && s->order != NULL)
        return 0;
    p = realloc(s->order, (len > 0 ? len : 1) * sizeof(uint32_t));
    if (p == NULL)
        return -1;
    s->order = p;
    s->cap = len > 0 ? len : 1;
    return 0;
}

int shard_init(shard_t *s, size_t ntrain, int rank, int world, uint64_t seed, int shuffle)
{
    memset(s, 0, sizeof(*s));
    s->rank = rank;
    s->world = world;
    s->shuffle = shuffle;
    s->seed = seed;
    s->ntrain = ntrain;
    s->len = world > 0 ? ntrain / (size_t)world : 0;
    s->epoch = UINT64_MAX;
    if (s->len == 0)
        return -1;
    return reserve(s, s->len);
}

void shard_set_epoch(shard_t *s, uint64_t epoch)
{
    if (s->epoch == epoch)
        return;
    free(s->pool);
    s->pool = NULL;
    s->npool = 0;
    s->base = 0;
    s->len = s->ntrain / (size_t)s->world;
    if (reserve(s, s->len) != 0) { /* cannot happen for the ring of shard_init; else no steps */
        s->len = 0;
        return;
    }
    standard_order(s->order, s->len, s->rank, s->world, s->seed, epoch, s->shuffle);
    s->epoch = epoch;
}

uint32_t *shard_untaken(const shard_t *s, uint64_t pos, int bs, size_t *n_out)
{
    int w = s->world;
    size_t len = s->pool != NULL ? s->npool / (size_t)w : s->ntrain / (size_t)w;
    size_t taken = (size_t)(pos - s->base) * (size_t)bs, n = 0;
    uint32_t *out = malloc((s->ntrain > 0 ? s->ntrain : 1) * sizeof(uint32_t));
    uint32_t *lists = malloc((len * (size_t)w > 0 ? len * (size_t)w : 1) * sizeof(uint32_t));

    if (out == NULL || lists == NULL) {
        free(out);
        free(lists);
        return NULL;
    }
    /* every old rank's list: lists[q * len + k] */
    for (int q = 0; q < w; q++) {
        uint32_t *l = lists + (size_t)q * len;
        if (s->pool != NULL)
            for (size_t k = 0; k < len; k++)
                l[k] = s->pool[k * (size_t)w + (size_t)q];
        else
            standard_order(l, len, q, w, s->seed, s->epoch, s->shuffle);
    }
    if (taken > len)
        taken = len;
    for (size_t k = taken; k < len; k++)
        for (int q = 0; q < w; q++)
            out[n++] = lists[(size_t)q * len + k];
    /* what truncation left out of the old shards */
    if (s->pool != NULL)
        for (size_t j = len * (size_t)w; j < s->npool; j++)
            out[n++] = s->pool[j];
    else
        for (size_t j = len * (size_t)w; j < s->ntrain; j++)
            out[n++] = (uint32_t)j;
    free(lists);
    *n_out = n;
    return out;
}

int shard_deal(shard_t *s, uint64_t epoch, uint64_t pos, uint32_t *pool, size_t n, int rank,
               int world)
{
    if (pool != s->pool) {
        free(s->pool);
        s->pool = pool;
        s->npool = n;
    }
    s->epoch = epoch;
    s->base = pos;
    s->rank = rank;
    s->world = world;
    s->len = s->npool / (size_t)world;
    if (reserve(s, s->len) != 0)
        return -1;
    for (size_t k = 0; k < s->len; k++)
        s->order[k] = s->pool[k * (size_t)world + (size_t)rank];
    return 0;
}

int shard_reshard(shard_t *s, uint64_t pos, int bs, int rank, int world)
{
    if (pos == 0 || s->epoch == UINT64_MAX) {
        /* at an epoch's start: the new ring's standard shards, made by shard_set_epoch */
        free(s->pool);
        s->pool = NULL;
        s->npool = 0;
        s->base = 0;
        s->rank = rank;
        s->world = world;
        s->len = s->ntrain / (size_t)world;
        s->epoch = UINT64_MAX;
        return 0;
    }
    if (s->pool == NULL || pos != s->base) {
        size_t n;
        uint32_t *pool = shard_untaken(s, pos, bs, &n);

        if (pool == NULL)
            return -1;
        return shard_deal(s, s->epoch, pos, pool, n, rank, world);
    }
    return shard_deal(s, s->epoch, pos, s->pool, s->npool, rank, world); /* the same pool again */
}

void shard_free(shard_t *s)
{
    free(s->order);
    free(s->pool);
    s->order = NULL;
    s->pool = NULL;
}
