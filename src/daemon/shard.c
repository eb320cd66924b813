/*
 * shard.c - a peer's shard of the training set and its per-epoch order
 * (see shard.h).
 */
#include "ring_build.h"

#include "shard.h"

#include <stdlib.h>

#include "workloads/rng.h"

/* a tag so the shuffle stream differs from every other use of the seed */
#define SHARD_RNG_TAG 0x73686172645f6f72ull /* "shard_or" */

int shard_init(shard_t *s, size_t ntrain, int rank, int world, uint64_t seed, int shuffle)
{
    s->rank = rank;
    s->world = world;
    s->shuffle = shuffle;
    s->seed = seed;
    s->len = world > 0 ? ntrain / (size_t)world : 0;
    s->epoch = UINT64_MAX;
    s->order = s->len > 0 ? malloc(s->len * sizeof(uint32_t)) : NULL;
    return s->order != NULL ? 0 : -1;
}

void shard_set_epoch(shard_t *s, uint64_t epoch)
{
    rng_t rng;

    if (s->epoch == epoch)
        return;
    for (size_t k = 0; k < s->len; k++)
        s->order[k] = (uint32_t)(k * (size_t)s->world + (size_t)s->rank);
    if (s->shuffle) {
        /* Fisher-Yates within the shard; the rank is part of the seed so peers
         * draw different orders, and the epoch so each epoch differs */
        rng_seed(&rng, s->seed, SHARD_RNG_TAG ^ epoch, (uint64_t)s->rank);
        for (size_t k = s->len - 1; k > 0; k--) {
            size_t j = rng_uniform_u32_below(&rng, (uint32_t)(k + 1));
            uint32_t t = s->order[k];
            s->order[k] = s->order[j];
            s->order[j] = t;
        }
    }
    s->epoch = epoch;
}

void shard_free(shard_t *s)
{
    free(s->order);
    s->order = NULL;
}
