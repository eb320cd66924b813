/*
 * codec_pipeline.c - the fp16/bf16 data path. Chunks travel encoded and are
 * accumulated in fp32:
 *  - reduce-scatter step 0 encodes this peer's chunk (times 1/N for an
 *    average, so the sum cannot overflow where the average would not);
 *  - later reduce-scatter steps decode the received chunk, add this peer's
 *    and encode the sum, in one fused pass;
 *  - the last of them also writes the decoded wire value into the result,
 *    so the owner of a segment ends with the same bits as everyone else;
 *  - allgather steps decode into the result and forward the received bytes
 *    unchanged.
 * fp16 chunks carry a power-of-two exponent chosen from an upper bound of
 * their largest value (the bound the sender had, plus this peer's largest
 * value), so large gradients do not overflow and small ones do not flush to
 * zero; decoding multiplies by a power of two, which is exact. The exponent
 * is clamped to -100..100 (ENC_EXP_LIMIT): chunks bounded below 2^-86 keep the
 * scale 2^-100, where fp16's subnormal step is 2^-124 (partial sums up to
 * 2^-125 encode as 0), and a partial sum from 65520 * 2^100 is inf (reported
 * as non-finite). docs/codec.md states the bound; tests/ring/t-codec-range.c.
 * Optional: lz4 on each encoded chunk (sent raw when it does not shrink),
 * and error feedback (what this peer's encodings lost is added to its next
 * contribution to the same tensor).
 */
#include "ring_build.h"

#include <limits.h>
#include <lz4.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_pipeline.h"
#include "collectives.h"
#include "comm_int.h"
#include "fail.h"
#include "half.h"
#include "log.h"
#include "lz4_chunk.h"
#include "timeline.h"

#define ENC_HEADROOM_EXP 15 /* scaled fp16 values stay below 2^15 (fp16 max is 65504) */
#define ENC_EXP_LIMIT 100   /* keeps 2^e and its products inside fp32's normal range */
#define ENC_F16_INF 0x7c00u
#define LZ4_AUTO_MISSES 4   /* auto: chunks in a row that did not shrink before pausing */
#define LZ4_AUTO_PAUSE 64   /* auto: chunks sent raw before trying again */
#ifndef LZ4_ACCELERATION
#define LZ4_ACCELERATION 8  /* lz4 fast mode: zero runs still compress, at a fraction of the cost */
#endif

size_t ring_enc_elem_bytes(const ring_comm_t *comm, const ring_request_t *req)
{
    return req->wire != RING_CODEC_NONE ? 2 : ring_dtype_size(req->dtype);
}

/* What a request's chunks travel as: the codec, or else the user's dtype. */
ring_codec_t ring_enc_wire(const ring_comm_t *comm, const ring_request_t *req)
{
    ring_dtype_t dtype = req->dtype;

    if (comm->enc.codec != RING_CODEC_NONE && !req->exact)
        return comm->enc.codec;
    return dtype == RING_FLOAT16 ? RING_CODEC_FP16
           : dtype == RING_BFLOAT16 ? RING_CODEC_BF16
                                    : RING_CODEC_NONE;
}

/* ---- set-up -------------------------------------------------------------- */

ring_status_t ring_enc_channel_alloc(ring_comm_t *comm, ring_channel_t *ch)
{
    size_t chunk = comm->cfg.chunk_bytes;

    ch->zcap = (size_t)LZ4_compressBound((int)chunk);
    /* fp32 scratch of one chunk's elements: error feedback, and half-precision
     * user buffers (their chunk as fp32, in and out) */
    ch->scratch = malloc(chunk / 2 * sizeof(float));
    ch->local32 = malloc(chunk / 2 * sizeof(float));
    ch->result32 = malloc(chunk / 2 * sizeof(float));
    /* a peer may send lz4 even when this one does not compress */
    ch->unz = malloc(chunk);
    if (ch->scratch == NULL || ch->local32 == NULL || ch->result32 == NULL || ch->unz == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the codec's buffers (4 "
                              "chunks of up to %zu bytes)", 2 * chunk);
    return RING_OK;
}

/* 1 when ring_enc_channel_reserve must move the channel's tx slots for req
 * (allreduce.c lets device_codec.c unpin them first). */
int ring_enc_channel_grows(const ring_channel_t *ch, const ring_request_t *req)
{
    /* more chunks, or larger ones: --autotune tries 64K chunks (many slots)
     * before 256K or 1M ones, and a slot is a chunk's bytes apart */
    return req->wire != RING_CODEC_NONE && ((size_t)ch->sched.nchunks > ch->tx_slots ||
                                            req->comm->cfg.chunk_bytes > ch->tx_chunk);
}

/*
 * The encoded chunk a received frame produces is sent nchunks frames later
 * (sends go step by step), so every chunk index of a segment has its own tx
 * slot: frame q uses slot q mod nchunks. The slots grow with the largest
 * allreduce seen, at its start, never per frame.
 */
ring_status_t ring_enc_channel_reserve(ring_comm_t *comm, ring_channel_t *ch,
                                       const ring_request_t *req)
{
    size_t chunk = comm->cfg.chunk_bytes, want = (size_t)ch->sched.nchunks;
    unsigned char *tx, *zbuf = ch->zbuf;
    ring_tx_meta_t *meta;

    if (!ring_enc_channel_grows(ch, req))
        return RING_OK;
    /* what is registered with the transport (verbs sends it without a copy) must be
     * deregistered before it moves; no send of an earlier request is in flight now */
    if (ch->tx != NULL)
        (void)comm->tp_ops->dereg_mem(comm->tp, ch->tx);
    if (ch->zbuf != NULL && comm->enc.lz4_mode != 0)
        (void)comm->tp_ops->dereg_mem(comm->tp, ch->zbuf);
    tx = realloc(ch->tx, want * chunk);
    if (tx != NULL)
        ch->tx = tx;
    meta = realloc(ch->tx_meta, want * sizeof(*meta));
    if (meta != NULL)
        ch->tx_meta = meta;
    if (comm->enc.lz4_mode != 0) {
        zbuf = realloc(ch->zbuf, want * ch->zcap);
        if (zbuf != NULL)
            ch->zbuf = zbuf;
    }
    if (tx == NULL || meta == NULL || (comm->enc.lz4_mode != 0 && zbuf == NULL))
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for %zu encoded chunks of %zu "
                              "bytes", want, chunk);
    ch->tx_slots = want;
    ch->tx_chunk = chunk;
    /* registration only saves a copy: a failure is logged and sends are copied */
    if (comm->tp_ops->reg_mem(comm->tp, ch->tx, want * chunk) != RING_OK ||
        (comm->enc.lz4_mode != 0 &&
         comm->tp_ops->reg_mem(comm->tp, ch->zbuf, want * ch->zcap) != RING_OK))
        ring_log(RING_LOG_DEBUG, "%s", ring_last_error());
    return RING_OK;
}

void ring_enc_channel_free(ring_channel_t *ch)
{
    free(ch->tx);
    free(ch->tx_meta);
    free(ch->zbuf);
    free(ch->unz);
    free(ch->scratch);
    free(ch->local32);
    free(ch->result32);
}

void ring_enc_comm_free(ring_comm_t *comm)
{
    for (int i = 0; i < RING_EF_TENSORS; i++)
        free(comm->enc.residuals[i].r);
}

/* The residual of a tensor id: found, or made (zeroed) on its first use; NULL
 * (with a warning) when the table is full. Out of memory is an error: error
 * feedback never goes silently missing. */
static ring_status_t enc_residual(ring_comm_t *comm, const ring_request_t *req, float **r_p)
{
    ring_residual_t *slot = NULL;

    *r_p = NULL;
    for (int i = 0; i < RING_EF_TENSORS && slot == NULL; i++)
        if (comm->enc.residuals[i].r != NULL && comm->enc.residuals[i].tensor_id == req->tensor_id)
            slot = &comm->enc.residuals[i];
    if (slot != NULL && slot->count == req->count) {
        *r_p = slot->r;
        return RING_OK;
    }
    if (slot == NULL)
        for (int i = 0; i < RING_EF_TENSORS && slot == NULL; i++)
            if (comm->enc.residuals[i].r == NULL)
                slot = &comm->enc.residuals[i];
    if (slot == NULL) {
        ring_log(RING_LOG_WARN, "error feedback keeps %d tensors; tensor id %u goes without",
                 RING_EF_TENSORS, req->tensor_id);
        return RING_OK;
    }
    /* a new tensor, or one whose size changed: start from nothing lost */
    free(slot->r);
    slot->r = calloc(req->count > 0 ? req->count : 1, sizeof(float));
    slot->tensor_id = req->tensor_id;
    slot->count = req->count;
    if (slot->r == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the error feedback of "
                              "tensor id %u (%zu floats)", req->tensor_id, req->count);
    *r_p = slot->r;
    return RING_OK;
}

static ring_lz4_track_t *enc_lz4_track(ring_comm_t *comm, uint32_t tensor_id)
{
    ring_lz4_track_t *t = &comm->enc.lz4_track[tensor_id % RING_LZ4_TRACKS];

    if (!t->used || t->tensor_id != tensor_id)
        *t = (ring_lz4_track_t){.tensor_id = tensor_id, .used = 1};
    return t;
}

ring_status_t ring_enc_request_begin(ring_comm_t *comm, ring_request_t *req)
{
    req->residual = NULL;
    req->lz4 = NULL;
    if (req->wire == RING_CODEC_NONE)
        return RING_OK;
    if (comm->enc.lz4_mode == 2)
        req->lz4 = enc_lz4_track(comm, req->tensor_id);
    return comm->enc.error_feedback ? enc_residual(comm, req, &req->residual) : RING_OK;
}

/* ---- helpers --------------------------------------------------------------- */

static float enc_pow2(int e)
{
    return ldexpf(1.0f, e);
}

int ring_enc_choose_exp(const ring_comm_t *comm, const ring_request_t *req, float bound)
{
    int e;

    if (req->wire != RING_CODEC_FP16 || !comm->enc.fp16_scaling || !(bound > 0) || isinf(bound))
        return 0;
    (void)frexpf(bound, &e); /* bound < 2^e */
    e -= ENC_HEADROOM_EXP;
    if (e > ENC_EXP_LIMIT)
        e = ENC_EXP_LIMIT;
    if (e < -ENC_EXP_LIMIT)
        e = -ENC_EXP_LIMIT;
    return e;
}

/* An unscaled fp16 chunk may have overflowed to inf: look, only when it could have. */
static int enc_overflowed(const ring_request_t *req, const uint16_t *wire, float bound, int e,
                          size_t n)
{
    if (req->wire == RING_CODEC_BF16) {
        /* bf16 has fp32's range: only a sum near fp32's largest (or one that overflowed
         * fp32 itself, making bound inf) can have rounded to inf */
        if (bound < 3.0e38f)
            return 0;
        for (size_t i = 0; i < n; i++)
            if ((wire[i] & 0x7f80u) == 0x7f80u)
                return 1;
        return 0;
    }
    if (req->wire != RING_CODEC_FP16 || bound * enc_pow2(-e) < 65504.0f)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((wire[i] & 0x7fffu) >= ENC_F16_INF)
            return 1;
    return 0;
}

static float enc_decode1(const ring_request_t *req, uint16_t h)
{
    return req->wire == RING_CODEC_FP16 ? ring_f16_to_f32(h) : ring_bf16_to_f32(h);
}

static uint32_t enc_slot(const ring_channel_t *ch, uint32_t q)
{
    return q % (uint32_t)ch->sched.nchunks;
}

uint16_t *ring_enc_tx_slot(const ring_comm_t *comm, ring_channel_t *ch, uint32_t q)
{
    return (uint16_t *)(ch->tx + (size_t)enc_slot(ch, q) * comm->cfg.chunk_bytes);
}

ring_tx_meta_t *ring_enc_tx_meta(ring_channel_t *ch, uint32_t q)
{
    return &ch->tx_meta[enc_slot(ch, q)];
}

const void *ring_enc_tx_payload(const ring_comm_t *comm, const ring_channel_t *ch, uint32_t q)
{
    uint32_t slot = enc_slot(ch, q);

    if (ch->tx_meta[slot].in_zbuf)
        return ch->zbuf + (size_t)slot * ch->zcap;
    return ch->tx + (size_t)slot * comm->cfg.chunk_bytes;
}

/* This peer's chunk as fp32: in place for fp32 buffers, widened for half ones. */
static const float *enc_local(const ring_comm_t *comm, ring_channel_t *ch,
                              const ring_request_t *req, const ring_sched_frame_t *sf)
{
    size_t at = ch->part.off + sf->range.off;
    const uint16_t *half = (const uint16_t *)req->sendbuf + at;

    if (req->dtype == RING_FLOAT32)
        return (const float *)req->sendbuf + at;
    if (req->dtype == RING_FLOAT16)
        comm->enc.kops->decode_f16(ch->local32, half, 1.0f, sf->range.len);
    else
        comm->enc.kops->decode_bf16(ch->local32, half, 1.0f, sf->range.len);
    return ch->local32;
}

/* Where the fp32 result of a chunk goes: the user's buffer, or scratch for half ones. */
static float *enc_result(ring_channel_t *ch, const ring_request_t *req,
                         const ring_sched_frame_t *sf)
{
    if (req->dtype == RING_FLOAT32)
        return (float *)req->recvbuf + ch->part.off + sf->range.off;
    return ch->result32;
}

/*
 * A half-precision user buffer gets the fp32 result rounded to its dtype. A
 * sum too large for fp16 becomes inf there: every peer rounds the same bits,
 * so every peer sees it and reports it.
 */
static void enc_result_store(const ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                             const ring_sched_frame_t *sf)
{
    uint16_t *half = (uint16_t *)req->recvbuf + ch->part.off + sf->range.off;
    size_t n = sf->range.len;

    if (req->dtype == RING_FLOAT16) {
        comm->enc.kops->encode_f16(half, ch->result32, 1.0f, n);
        for (size_t i = 0; i < n && !req->nonfinite; i++)
            req->nonfinite = (half[i] & 0x7fffu) >= ENC_F16_INF;
    } else if (req->dtype == RING_BFLOAT16) {
        comm->enc.kops->encode_bf16(half, ch->result32, 1.0f, n);
        for (size_t i = 0; i < n && !req->nonfinite; i++)
            req->nonfinite = (half[i] & 0x7f80u) == 0x7f80u;
    }
}

static float enc_local_scale(const ring_comm_t *comm, const ring_request_t *req)
{
    return req->op == RING_AVG ? 1.0f / (float)comm->size : 1.0f;
}

void ring_enc_meta_put(const ring_tx_meta_t *meta, ring_frame_t *f)
{
    uint32_t bits;

    memcpy(&bits, &meta->bound, sizeof(bits));
    f->detail = (uint64_t)(uint8_t)(int8_t)meta->exp << 32 | bits;
    f->payload_bytes = meta->bytes;
    if (meta->lz4)
        f->flags |= RING_FRAME_LZ4;
}

static void enc_meta_get(const ring_frame_t *f, ring_tx_meta_t *meta)
{
    uint32_t bits = (uint32_t)f->detail;

    meta->exp = (int8_t)(uint8_t)(f->detail >> 32);
    memcpy(&meta->bound, &bits, sizeof(bits));
    meta->bytes = f->payload_bytes;
    meta->lz4 = (f->flags & RING_FRAME_LZ4) != 0;
    meta->in_zbuf = 0;
}

/* lz4 on a freshly encoded chunk: keep it only when it shrinks. */
static void enc_compress(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req, uint32_t q)
{
    ring_tx_meta_t *meta = ring_enc_tx_meta(ch, q);
    ring_lz4_track_t *t = req->lz4;
    int raw = (int)meta->bytes, packed;

    meta->lz4 = meta->in_zbuf = 0;
    if (comm->enc.lz4_mode == 0 || raw == 0)
        return;
    if (t != NULL && t->skip > 0) {
        t->skip--; /* auto: not shrinking lately; try again after a pause */
        return;
    }
    RING_TL_TIMED(comm, ch, RING_TL_LZ4, raw, /* hook: timeline.c */
                  packed = LZ4_compress_fast((const char *)ring_enc_tx_slot(comm, ch, q),
                                             (char *)ch->zbuf + (size_t)enc_slot(ch, q) * ch->zcap,
                                             raw, (int)ch->zcap, LZ4_ACCELERATION));
    /* worth it only when it saves an eighth: lz4 gives dense fp16 back at ~0.996 */
    if (packed > 0 && packed < raw - raw / 8) {
        meta->lz4 = meta->in_zbuf = 1;
        meta->bytes = (uint32_t)packed;
        if (t != NULL)
            t->misses = 0;
    } else if (t != NULL && ++t->misses >= LZ4_AUTO_MISSES) {
        t->misses = 0;
        t->skip = LZ4_AUTO_PAUSE;
    }
}

/* ---- the steps ------------------------------------------------------------- */

/* A chunk's bytes in the tx slot of frame q are final: note an overflow, then lz4. */
void ring_enc_tx_final(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req, uint32_t q,
                       float bound, int e)
{
    const ring_tx_meta_t *meta = ring_enc_tx_meta(ch, q);

    req->nonfinite |= enc_overflowed(req, ring_enc_tx_slot(comm, ch, q), bound, e,
                                     meta->bytes / 2);
    enc_compress(comm, ch, req, q);
}

/* Error feedback: local*scale + residual, into the channel's scratch. */
static const float *enc_with_residual(ring_channel_t *ch, const ring_request_t *req,
                                      const ring_sched_frame_t *sf, const float *local,
                                      float local_scale)
{
    const float *r = req->residual + ch->part.off + sf->range.off;

    for (size_t i = 0; i < sf->range.len; i++)
        ch->scratch[i] = ring_fadd(ring_fmul(local[i], local_scale), r[i]);
    return ch->scratch;
}

/* This peer's values of sf's range and the scale they carry (*scale_p), with
 * the residual of error feedback folded in. */
static const float *enc_local_values(ring_comm_t *comm, ring_channel_t *ch,
                                     const ring_request_t *req, const ring_sched_frame_t *sf,
                                     float *scale_p)
{
    const float *local = enc_local(comm, ch, req, sf);

    *scale_p = enc_local_scale(comm, req);
    if (req->residual == NULL)
        return local;
    local = enc_with_residual(ch, req, sf, local, *scale_p);
    *scale_p = 1.0f;
    return local;
}

/* What an encoded chunk of n values carries besides its bytes. */
void ring_enc_meta_set(ring_tx_meta_t *meta, int e, float bound, size_t n)
{
    meta->exp = e;
    meta->bound = bound;
    meta->bytes = (uint32_t)(n * 2);
}

void ring_enc_first(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                    const ring_sched_frame_t *sf, uint32_t q)
{
    const ring_codec_ops_t *k = comm->enc.kops;
    float local_scale;
    const float *local = enc_local_values(comm, ch, req, sf, &local_scale);
    size_t n = sf->range.len;
    int nonfinite = 0;
    float bound;
    int e;
    uint16_t *out = ring_enc_tx_slot(comm, ch, q);

    bound = k->absmax_f32(local, n, &nonfinite) * local_scale;
    e = ring_enc_choose_exp(comm, req, bound);
    if (req->wire == RING_CODEC_FP16)
        k->encode_f16(out, local, local_scale * enc_pow2(-e), n);
    else
        k->encode_bf16(out, local, local_scale, n);
    if (req->residual != NULL) {
        /* what the wire could not carry goes into the next round */
        float *r = req->residual + ch->part.off + sf->range.off;
        for (size_t i = 0; i < n; i++)
            r[i] = ring_fadd(local[i], -ring_fmul(enc_decode1(req, out[i]), enc_pow2(e)));
    }
    req->nonfinite |= nonfinite;
    ring_enc_meta_set(ring_enc_tx_meta(ch, q), e, bound, n);
    ring_enc_tx_final(comm, ch, req, q, bound, e);
}

int ring_enc_lz4_unpack(const void *in, size_t in_bytes, void *out, size_t want_bytes, int *got)
{
    *got = -1;
    if (in_bytes > INT_MAX || want_bytes > INT_MAX)
        return -1;
    *got = LZ4_decompress_safe(in, out, (int)in_bytes, (int)want_bytes);
    return *got == (int)want_bytes ? 0 : -1;
}

/* The received payload as encoded values: decompressed when it came as lz4. */
static ring_status_t enc_payload(ring_comm_t *comm, ring_channel_t *ch, const ring_request_t *req,
                                 const ring_sched_frame_t *sf, uint32_t q,
                                 const ring_tx_meta_t *in_meta, const uint16_t **in_p)
{
    const char *stage = (const char *)ch->stage + (size_t)(q % RING_WINDOW) *
                                                      comm->cfg.chunk_bytes;
    int want = (int)(sf->range.len * 2), got, bad;

    if (!in_meta->lz4) {
        *in_p = (const uint16_t *)stage;
        return RING_OK;
    }
    RING_TL_TIMED(comm, ch, RING_TL_LZ4, in_meta->bytes, /* hook: timeline.c */
                  bad = ring_enc_lz4_unpack(stage, in_meta->bytes, ch->unz, (size_t)want, &got));
    if (bad != 0) {
        ring_fault_t fault = {.status = RING_ERR_PROTOCOL, .culprit = comm->topo.left_rank,
                              .step = sf->step};

        return ring_comm_fail_peer(comm, req, &fault, "{peer} sent a corrupt lz4 chunk (chunk "
                                   "%d: %u bytes that decompress to %d, expected %d)", sf->chunk,
                                   in_meta->bytes, got, want);
    }
    *in_p = (const uint16_t *)ch->unz;
    return RING_OK;
}

ring_status_t ring_enc_received(ring_comm_t *comm, ring_channel_t *ch, const ring_request_t *req,
                                const ring_sched_frame_t *sf, uint32_t q, const ring_frame_t *f,
                                ring_tx_meta_t *in_meta, const uint16_t **in_p)
{
    enc_meta_get(f, in_meta);
    return enc_payload(comm, ch, req, sf, q, in_meta, in_p);
}

ring_status_t ring_enc_combine(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                               const ring_sched_frame_t *sf, uint32_t q, const ring_frame_t *f)
{
    const ring_codec_ops_t *k = comm->enc.kops;
    float *result = enc_result(ch, req, sf);
    uint32_t next = q + (uint32_t)ch->sched.nchunks; /* the same chunk, one step later */
    int last_step = 2 * (comm->size - 1) - 1;
    size_t n = sf->range.len;
    ring_tx_meta_t in_meta;
    const uint16_t *in = NULL; /* set by enc_payload when it returns RING_OK */

    RING_CHECK(ring_enc_received(comm, ch, req, sf, q, f, &in_meta, &in));
    if (sf->reduce) {
        float local_scale;
        const float *local = enc_local_values(comm, ch, req, sf, &local_scale);
        int nonfinite = 0;
        float bound, in_scale = enc_pow2(in_meta.exp), out_scale;
        int e;
        uint16_t *out = ring_enc_tx_slot(comm, ch, next);
        float *final = sf->last_reduce ? result : NULL;

        bound = in_meta.bound + k->absmax_f32(local, n, &nonfinite) * local_scale;
        e = ring_enc_choose_exp(comm, req, bound);
        out_scale = enc_pow2(-e);
        if (req->wire == RING_CODEC_FP16)
            k->fused_f16(out, final, in, local, in_scale, local_scale, out_scale, n);
        else
            k->fused_bf16(out, final, in, local, 1.0f, local_scale, 1.0f, n);
        if (req->residual != NULL) {
            float *r = req->residual + ch->part.off + sf->range.off;
            for (size_t i = 0; i < n; i++) {
                float sum = ring_fused_sum(enc_decode1(req, in[i]), local[i], in_scale, 1.0f);
                r[i] = ring_fadd(sum, -ring_fmul(enc_decode1(req, out[i]), enc_pow2(e)));
            }
        }
        req->nonfinite |= nonfinite;
        ring_enc_meta_set(ring_enc_tx_meta(ch, next), e, bound, n);
        if (final != NULL)
            enc_result_store(comm, ch, req, sf);
        ring_enc_tx_final(comm, ch, req, next, bound, e);
        return RING_OK;
    }
    if (req->wire == RING_CODEC_FP16)
        k->decode_f16(result, in, enc_pow2(in_meta.exp), n);
    else
        k->decode_bf16(result, in, 1.0f, n);
    enc_result_store(comm, ch, req, sf);
    if (sf->step < last_step) {
        /* forward what came, as it came (compressed or not) */
        const void *stage = ch->stage + (size_t)(q % RING_WINDOW) * comm->cfg.chunk_bytes;
        memcpy(ring_enc_tx_slot(comm, ch, next), stage, in_meta.bytes);
        *ring_enc_tx_meta(ch, next) = in_meta;
    }
    return RING_OK;
}
