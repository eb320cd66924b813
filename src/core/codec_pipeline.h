/*
 * codec_pipeline.h - the fp16/bf16 data path of the host engine, and what
 * device_codec.c shares of it (codec_pipeline.c).
 */
#ifndef RING_CODEC_PIPELINE_H
#define RING_CODEC_PIPELINE_H

#include "comm_int.h"

/* codec_pipeline.c: the fp16/bf16 data path */
size_t ring_enc_elem_bytes(const ring_comm_t *comm, const ring_request_t *req);
ring_status_t ring_enc_channel_alloc(ring_comm_t *comm, ring_channel_t *ch);
ring_status_t ring_enc_channel_reserve(ring_comm_t *comm, ring_channel_t *ch,
                                       const ring_request_t *req);
ring_codec_t ring_enc_wire(const ring_comm_t *comm, const ring_request_t *req);
ring_tx_meta_t *ring_enc_tx_meta(ring_channel_t *ch, uint32_t q);
void ring_enc_channel_free(ring_channel_t *ch);
ring_status_t ring_enc_request_begin(ring_comm_t *comm, ring_request_t *req);
void ring_enc_comm_free(ring_comm_t *comm);
void ring_enc_first(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                    const ring_sched_frame_t *sf, uint32_t q);
ring_status_t ring_enc_combine(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                               const ring_sched_frame_t *sf, uint32_t q, const ring_frame_t *f);
void ring_enc_meta_put(const ring_tx_meta_t *meta, ring_frame_t *f);
const void *ring_enc_tx_payload(const ring_comm_t *comm, const ring_channel_t *ch, uint32_t q);

/* codec_pipeline.c, for device_codec.c: the exponent a chunk bounded by `bound`
 * travels with; a queued chunk's meta; a tx slot's host bytes; and, once they are
 * final, the overflow check and lz4 of the chunk in tx slot of frame q */
int ring_enc_choose_exp(const ring_comm_t *comm, const ring_request_t *req, float bound);
int ring_enc_channel_grows(const ring_channel_t *ch, const ring_request_t *req);
/* A received frame's meta and encoded values (decompressed when it came as lz4). */
ring_status_t ring_enc_received(ring_comm_t *comm, ring_channel_t *ch, const ring_request_t *req,
                                const ring_sched_frame_t *sf, uint32_t q, const ring_frame_t *f,
                                ring_tx_meta_t *in_meta, const uint16_t **in_p);
void ring_enc_meta_set(ring_tx_meta_t *meta, int e, float bound, size_t n);
uint16_t *ring_enc_tx_slot(const ring_comm_t *comm, ring_channel_t *ch, uint32_t q);
void ring_enc_tx_final(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req, uint32_t q,
                       float bound, int e);

#endif /* RING_CODEC_PIPELINE_H */
