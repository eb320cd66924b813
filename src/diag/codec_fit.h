/* codec_fit.h - --codec auto: fp16 or fp32, whichever is faster on this ring (codec_fit.c). */
#ifndef RING_CODEC_FIT_H
#define RING_CODEC_FIT_H

#include <ringd/status.h>

struct ring_comm;
/* --codec auto, once the ring is up: time fp32 against fp16 (rank 0's times
 * for every peer) and keep fp16 only where it was faster; the times land in
 * comm->enc.fit_*. Nothing for any other --codec. */
ring_status_t ring_codec_fit(struct ring_comm *comm);

#endif /* RING_CODEC_FIT_H */
