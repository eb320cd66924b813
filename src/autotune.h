/* autotune.h - choosing chunk size and channels on the real ring (autotune.c). */
#ifndef RING_AUTOTUNE_H
#define RING_AUTOTUNE_H

#include <stddef.h>

#include <ringd/status.h>

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

struct ring_comm;
/* Time every candidate, agree on rank 0's fastest, switch to it; the report
 * lands in comm->autotune_desc. */
ring_status_t ring_autotune(struct ring_comm *comm);

#endif /* RING_AUTOTUNE_H */
