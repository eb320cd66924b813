/*
 * autotune_space.h - the candidates --autotune-chunks and
 * --autotune-channels name (autotune_space.c): parsed when the settings are
 * validated and when a communicator opens; diag/autotune.c times them.
 */
#ifndef RING_AUTOTUNE_SPACE_H
#define RING_AUTOTUNE_SPACE_H

#include <stddef.h>

#define RING_MAX_CHANNELS 16 /* the most channels a ring connects (--channels) */

#define RING_AUTOTUNE_MAX 8 /* values per list */

typedef struct ring_autotune_space {
    size_t chunks[RING_AUTOTUNE_MAX];
    int channels[RING_AUTOTUNE_MAX];
    int nchunks, nchannels;
    size_t max_chunk;   /* the buffers are sized for it */
    int max_channels;   /* the ring is connected with that many */
} ring_autotune_space_t;

/* Parse --autotune-chunks and --autotune-channels: 0, or -1 saying why. */
int ring_autotune_parse(const char *chunks, const char *channels, ring_autotune_space_t *sp,
                        char *why, size_t len);

#endif /* RING_AUTOTUNE_SPACE_H */
