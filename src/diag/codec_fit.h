/* codec_fit.h - --codec auto: fp16 or fp32, whichever is faster on this ring (codec_fit.c). */
#ifndef RING_CODEC_FIT_H
#define RING_CODEC_FIT_H

#include <ringd/status.h>

#include <stddef.h>
#include <stdint.h>

struct ring_comm;
/* What the fit measured: rank 0's microseconds per call of bytes, exact fp32
 * and through fp16, the same on every peer. */
typedef struct ring_codec_fit {
    uint64_t fp32_us, codec_us;
    size_t bytes;
    int codec_pays;            /* fp16 was faster: keep it */
} ring_codec_fit_t;

/* --codec auto, once the ring is up (a collective: every peer calls it): time
 * fp32 against fp16; comm_open.c keeps fp16 only where it paid. */
ring_status_t ring_codec_fit(struct ring_comm *comm, ring_codec_fit_t *fit);

#endif /* RING_CODEC_FIT_H */
