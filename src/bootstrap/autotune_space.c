/*
 * autotune_space.c - parse --autotune-chunks and --autotune-channels into
 * the candidates the autotuner times (diag/autotune.c).
 */
#include "ring_build.h"

#include <stdio.h>
#include <string.h>

#include "autotune_space.h"
#include "parse.h"

/* The next comma-separated item of *p into item: 1, 0 at the end, -1 when it is
 * empty or does not fit. */
static int list_next(const char **p, char *item, size_t cap)
{
    size_t n = strcspn(*p, ",");

    if (**p == '\0')
        return 0;
    if (n == 0 || n >= cap)
        return -1;
    memcpy(item, *p, n);
    item[n] = '\0';
    *p += n + ((*p)[n] == ',');
    return 1;
}

int ring_autotune_parse(const char *chunks, const char *channels, ring_autotune_space_t *sp,
                        char *why, size_t len)
{
    const char *p = chunks;
    char item[32];
    int r;

    memset(sp, 0, sizeof(*sp));
    while ((r = list_next(&p, item, sizeof(item))) > 0 && sp->nchunks < RING_AUTOTUNE_MAX) {
        size_t sz;

        if (ring_parse_size(item, &sz) != 0 || sz < 4096 || sz > (64u << 20)) {
            snprintf(why, len, "--autotune-chunks: '%s' is not a size in 4K..64M", item);
            return -1;
        }
        sp->chunks[sp->nchunks++] = sz;
        if (sz > sp->max_chunk)
            sp->max_chunk = sz;
    }
    if (r != 0) {
        snprintf(why, len, "--autotune-chunks '%s': expected up to %d sizes like 64K,256K,1M",
                 chunks, RING_AUTOTUNE_MAX);
        return -1;
    }
    p = channels;
    while ((r = list_next(&p, item, sizeof(item))) > 0 && sp->nchannels < RING_AUTOTUNE_MAX) {
        long c;

        if (ring_parse_long(item, &c) != 0 || c < 1 || c > RING_MAX_CHANNELS) {
            snprintf(why, len, "--autotune-channels: '%s' is not a count in 1..%d", item,
                     RING_MAX_CHANNELS);
            return -1;
        }
        sp->channels[sp->nchannels++] = (int)c;
        if (c > sp->max_channels)
            sp->max_channels = (int)c;
    }
    if (r != 0) {
        snprintf(why, len, "--autotune-channels '%s': expected up to %d counts like 1,2,4",
                 channels, RING_AUTOTUNE_MAX);
        return -1;
    }
    if (sp->nchunks == 0 || sp->nchannels == 0) {
        snprintf(why, len, "--autotune-chunks and --autotune-channels need one value at least");
        return -1;
    }
    return 0;
}
