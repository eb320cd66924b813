/* codec_fit.h - --codec auto: fp16 or fp32, whichever is faster on this ring (codec_fit.c). */
#ifndef RING_CODEC_FIT_H
#define RING_CODEC_FIT_H

#include <ringd/config.h>
#include <ringd/status.h>

struct ring_comm;
/* 1 when the ring is up and the fit runs: --codec auto, or a codec with every
 * peer on this host over shm (then it only reports). */
int ring_codec_fit_wanted(const struct ring_comm *comm, const ring_config_t *cfg);
/* Time fp32 against the codec (rank 0's times for every peer); choose: keep the
 * codec only where it was faster. The times land in comm->enc.fit_*. */
ring_status_t ring_codec_fit(struct ring_comm *comm, int choose);

#endif /* RING_CODEC_FIT_H */
