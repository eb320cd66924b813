/*
 * device_codec.c - fp16/bf16 allreduces of fp32 CUDA device buffers with
 * the codec on the GPU (device.h has the design). The steps are those of
 * codec_pipeline.c, with the same bits: kernels/cuda runs the element math
 * of half.h, and every exponent is chosen on the host from the same bounds.
 *
 *  - begin: the communicator's stream waits for the caller's event; one
 *    launch finds the largest |value| of every range this peer encodes or
 *    reduces (the only host wait on the device), so each exponent is known
 *    before its chunk arrives; every step-0 chunk is queued: encode into
 *    the channel's device tx slot, copy to the host tx slot, record.
 *  - a received chunk (host stage slot) is copied to the device; a reduce
 *    step runs the fused kernel there (writing the final fp32 values into
 *    recvbuf at the last one) and copies the encoded sum back to the host
 *    tx slot of the next frame; an allgather step decodes into recvbuf and
 *    forwards the received bytes from the host as they came.
 *  - gates: a frame is sent once the event of its tx copy says done (then
 *    its overflow check and lz4 run, as on the host); a stage slot takes a
 *    new frame once the copy that read it is done.
 * Nothing here waits for the device except begin's bounds and lz4'd chunks
 * (their decompressed bytes live in one buffer that the next chunk reuses).
 */
#include "ring_build.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_pipeline.h"
#include "comm_int.h"
#include "cuda/ring_cuda.h"
#include "fail.h"
#include "log.h"

static ring_status_t dev_fail(ring_comm_t *comm, const ring_request_t *req, const char *what)
{
    return ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_IO, .culprit = comm->rank,
                                                .step = -1},
                          "round %llu (tensor id %u): %s on rank %d's GPU %d (CUDA device "
                          "buffers of %zu floats)", (unsigned long long)req->round, req->tensor_id,
                          what, comm->rank, comm->dev->device, req->count);
}

int ring_dev_codec_takes(const ring_comm_t *comm, const ring_request_t *req)
{
    ring_codec_t wire = ring_enc_wire(comm, req);

    /* error feedback keeps its residual on the host: such requests are staged */
    return req->coll == RING_COLL_ALLREDUCE && req->dev_send && req->dev_recv &&
           req->dtype == RING_FLOAT32 && comm->size > 1 && !comm->enc.error_feedback &&
           (wire == RING_CODEC_FP16 || wire == RING_CODEC_BF16);
}

static float dev_local_scale(const ring_comm_t *comm, const ring_request_t *req)
{
    return req->op == RING_AVG ? 1.0f / (float)comm->size : 1.0f;
}

/* ---- buffers ------------------------------------------------------------------ */

static void dev_unpin(void **pinned)
{
    if (*pinned != NULL)
        (void)ring_cuda_host_unregister(*pinned);
    *pinned = NULL;
}

void ring_dev_unpin_tx(ring_comm_t *comm, ring_channel_t *ch)
{
    if (comm->dev != NULL)
        dev_unpin(&comm->dev->ch[ch->index].pinned_tx);
}

/* Page-locked host memory copies by DMA; failing that (a locked-memory limit)
 * they still work, staged by the driver: noted, not fatal. */
static void dev_pin(void **pinned, void *p, size_t bytes)
{
    if (*pinned != NULL || p == NULL)
        return;
    if (ring_cuda_host_register(p, bytes) == 0)
        *pinned = p;
    else
        ring_log(RING_LOG_DEBUG, "could not page-lock %zu bytes of staging for CUDA copies "
                 "(ulimit -l?); copies go through the driver's own staging", bytes);
}

static void dev_channel_release(ring_dev_channel_t *dc)
{
    for (size_t s = 0; s < dc->tx_cap; s++)
        if (dc->tx_event[s] != NULL)
            (void)ring_cuda_event_destroy(dc->tx_event[s]);
    for (int w = 0; w < RING_WINDOW; w++)
        if (dc->in_event[w] != NULL)
            (void)ring_cuda_event_destroy(dc->in_event[w]);
    if (dc->tx != NULL)
        (void)ring_cuda_free(dc->tx);
    if (dc->in != NULL)
        (void)ring_cuda_free(dc->in);
    free(dc->tx_event), free(dc->tx_pending), free(dc->tx_ready), free(dc->tx_bound);
    free(dc->tx_exp), free(dc->own_max), free(dc->red_max);
    dev_unpin(&dc->pinned_tx);
    dev_unpin(&dc->pinned_stage);
    memset(dc, 0, sizeof(*dc));
}

/* _field grown to _n elements; on failure it keeps its old block (release frees it) */
#define DEV_GROW(_field, _n)                                                          \
    ((grown = realloc((_field), (_n) * sizeof(*(_field)))) != NULL ? ((_field) = grown, 0) \
                                                                   : -1)

/* Device tx slots as many as the host's, RING_WINDOW device stage slots, their
 * events, and room for the bounds of every frame. -1: out of device or host memory. */
static int dev_channel_reserve(ring_comm_t *comm, ring_channel_t *ch, ring_dev_channel_t *dc)
{
    size_t chunk = comm->cfg.chunk_bytes, slots = ch->tx_slots;
    size_t frames = ch->sched.nsend > ch->sched.nrecv ? ch->sched.nsend : ch->sched.nrecv;
    void *grown;

    if (dc->tx_cap < slots) {
        size_t old = dc->tx_cap;

        if (DEV_GROW(dc->tx_event, slots) != 0 || DEV_GROW(dc->tx_pending, slots) != 0 ||
            DEV_GROW(dc->tx_ready, slots) != 0 || DEV_GROW(dc->tx_bound, slots) != 0 ||
            DEV_GROW(dc->tx_exp, slots) != 0)
            return -1;
        for (size_t s = old; s < slots; s++)
            dc->tx_event[s] = NULL;
        dc->tx_cap = slots; /* from here on, release destroys what was made */
        for (size_t s = old; s < slots; s++)
            if (ring_cuda_event_create(&dc->tx_event[s]) != 0)
                return -1;
        if (dc->tx != NULL) {
            /* queued copies may still read the old device slots */
            if (ring_cuda_stream_sync(comm->dev->stream) != 0)
                return -1;
            (void)ring_cuda_free(dc->tx);
            dc->tx = NULL;
        }
    }
    if (dc->tx == NULL && ring_cuda_malloc(slots * chunk, &dc->tx) != 0)
        return -1;
    if (dc->in == NULL) {
        if (ring_cuda_malloc(RING_WINDOW * chunk, &dc->in) != 0)
            return -1;
        for (int w = 0; w < RING_WINDOW; w++)
            if (ring_cuda_event_create(&dc->in_event[w]) != 0)
                return -1;
    }
    if (dc->frames_cap < frames) {
        if (DEV_GROW(dc->own_max, frames) != 0 || DEV_GROW(dc->red_max, frames) != 0)
            return -1;
        dc->frames_cap = frames;
    }
    /* frame numbers start again at 0 in every request */
    for (size_t s = 0; s < dc->tx_cap; s++)
        dc->tx_pending[s] = dc->tx_ready[s] = RING_DEV_NONE;
    dev_pin(&dc->pinned_tx, ch->tx, ch->tx_slots * chunk);
    dev_pin(&dc->pinned_stage, ch->stage, RING_WINDOW * chunk);
    return 0;
}

/* ---- begin ---------------------------------------------------------------------- */

/* The ranges whose local bounds the steps need: step-0 sends and reduce receives,
 * channel after channel. With offs == NULL, only counted. */
static size_t dev_ranges(const ring_comm_t *comm, size_t *offs, size_t *lens)
{
    size_t k = 0;

    for (int c = 0; c < comm->nchannels; c++) {
        const ring_channel_t *ch = &comm->channels[c];
        ring_sched_frame_t sf;

        for (uint32_t q = 0; q < ch->sched.nsend; q++) {
            ring_sched_send_frame(&ch->sched, q, &sf);
            if (sf.own && offs != NULL)
                offs[k] = ch->part.off + sf.range.off, lens[k] = sf.range.len;
            k += sf.own;
        }
        for (uint32_t q = 0; q < ch->sched.nrecv; q++) {
            ring_sched_recv_frame(&ch->sched, q, &sf);
            if (sf.reduce && offs != NULL)
                offs[k] = ch->part.off + sf.range.off, lens[k] = sf.range.len;
            k += sf.reduce;
        }
    }
    return k;
}

/* Hand the bounds out to the channels' frames, in dev_ranges' order. */
static void dev_bounds_store(ring_comm_t *comm, ring_request_t *req, const float *max,
                             const int *nonfinite)
{
    size_t k = 0;

    for (int c = 0; c < comm->nchannels; c++) {
        ring_channel_t *ch = &comm->channels[c];
        ring_dev_channel_t *dc = &comm->dev->ch[c];
        ring_sched_frame_t sf;

        for (uint32_t q = 0; q < ch->sched.nsend; q++) {
            ring_sched_send_frame(&ch->sched, q, &sf);
            if (sf.own) {
                dc->own_max[q] = max[k];
                req->nonfinite |= nonfinite[k++];
            }
        }
        for (uint32_t q = 0; q < ch->sched.nrecv; q++) {
            ring_sched_recv_frame(&ch->sched, q, &sf);
            if (sf.reduce) {
                dc->red_max[q] = max[k];
                req->nonfinite |= nonfinite[k++];
            }
        }
    }
}

/* Queue tx slot `slot`'s copy to the host and its event; the gate waits for it. */
static int dev_tx_queue(ring_comm_t *comm, ring_channel_t *ch, uint32_t q, float bound, int e)
{
    ring_dev_channel_t *dc = &comm->dev->ch[ch->index];
    uint32_t slot = q % (uint32_t)ch->sched.nchunks;
    size_t chunk = comm->cfg.chunk_bytes, n = ring_enc_tx_meta(ch, q)->bytes / 2;
    void *dev_out = (char *)dc->tx + (size_t)slot * chunk;

    if (ring_cuda_memcpy_d2h_async(ring_enc_tx_slot(comm, ch, q), dev_out, n * 2,
                                   comm->dev->stream) != 0 ||
        ring_cuda_event_record(dc->tx_event[slot], comm->dev->stream) != 0)
        return -1;
    dc->tx_bound[slot] = bound;
    dc->tx_exp[slot] = e;
    dc->tx_pending[slot] = q;
    comm->dev->pending++;
    return 0;
}

/* Step 0: this peer's chunk of send frame q, encoded on the GPU. */
static int dev_encode_first(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                            const ring_sched_frame_t *sf, uint32_t q)
{
    ring_dev_channel_t *dc = &comm->dev->ch[ch->index];
    uint32_t slot = q % (uint32_t)ch->sched.nchunks;
    size_t n = sf->range.len;
    float local_scale = dev_local_scale(comm, req), bound = dc->own_max[q] * local_scale;
    int e = ring_enc_choose_exp(comm, req, bound), rc;
    uint16_t *dev_out = (uint16_t *)((char *)dc->tx + (size_t)slot * comm->cfg.chunk_bytes);
    const float *local = (const float *)req->sendbuf + ch->part.off + sf->range.off;

    if (req->wire == RING_CODEC_FP16)
        rc = ring_cuda_encode_f16(dev_out, local, local_scale * ldexpf(1.0f, -e), n,
                                  comm->dev->stream);
    else
        rc = ring_cuda_encode_bf16(dev_out, local, local_scale, n, comm->dev->stream);
    ring_enc_meta_set(ring_enc_tx_meta(ch, q), e, bound, n);
    return rc != 0 ? -1 : dev_tx_queue(comm, ch, q, bound, e);
}

ring_status_t ring_dev_codec_begin(ring_comm_t *comm, ring_request_t *req)
{
    ring_dev_t *dev = comm->dev;
    size_t nranges = dev_ranges(comm, NULL, NULL);
    size_t *offs = malloc((nranges + 1) * 2 * sizeof(size_t));
    float *max = malloc((nranges + 1) * sizeof(float));
    int *nonfinite = malloc((nranges + 1) * sizeof(int));
    const char *what = NULL;

    if (offs == NULL || max == NULL || nonfinite == NULL)
        what = "out of host memory for the chunks' bounds";
    for (int c = 0; what == NULL && c < comm->nchannels; c++)
        if (dev_channel_reserve(comm, &comm->channels[c], &dev->ch[c]) != 0)
            what = "could not allocate the device's encoded chunks and their events";
    if (what == NULL) {
        /* every bound at once; the only time the host waits for the device */
        (void)dev_ranges(comm, offs, offs + nranges);
        if (ring_cuda_absmax_ranges((const float *)req->sendbuf, offs, offs + nranges, nranges,
                                    max, nonfinite, dev->stream) != 0)
            what = "finding the largest values of the input failed";
    }
    if (what == NULL)
        dev_bounds_store(comm, req, max, nonfinite);
    free(offs), free(max), free(nonfinite);
    for (int c = 0; what == NULL && c < comm->nchannels; c++) {
        ring_channel_t *ch = &comm->channels[c];
        ring_sched_frame_t sf;

        for (uint32_t q = 0; what == NULL && q < ch->sched.nsend; q++) {
            ring_sched_send_frame(&ch->sched, q, &sf);
            if (sf.own && dev_encode_first(comm, ch, req, &sf, q) != 0)
                what = "encoding this peer's chunks failed";
        }
    }
    return what == NULL ? RING_OK : dev_fail(comm, req, what);
}

/* ---- the steps -------------------------------------------------------------------- */

ring_status_t ring_dev_combine(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                               const ring_sched_frame_t *sf, uint32_t q, const ring_frame_t *f)
{
    ring_tx_meta_t meta, *in_meta = &meta;
    const uint16_t *in = NULL; /* set by ring_enc_received when it returns RING_OK */
    ring_dev_t *dev = comm->dev;
    ring_dev_channel_t *dc = &dev->ch[ch->index];
    size_t chunk = comm->cfg.chunk_bytes, n = sf->range.len;
    size_t at = ch->part.off + sf->range.off;
    uint32_t w = q % RING_WINDOW, next = q + (uint32_t)ch->sched.nchunks;
    uint16_t *dev_in = (uint16_t *)((char *)dc->in + (size_t)w * chunk);
    float *result = (float *)req->recvbuf + at;
    int fp16 = req->wire == RING_CODEC_FP16;

    RING_CHECK(ring_enc_received(comm, ch, req, sf, q, f, &meta, &in));
    if (ring_cuda_memcpy_h2d_async(dev_in, in, n * 2, dev->stream) != 0)
        return dev_fail(comm, req, "copying a received chunk to the device failed");
    if (sf->reduce) {
        float local_scale = dev_local_scale(comm, req);
        float bound = in_meta->bound + dc->red_max[q] * local_scale;
        int e = ring_enc_choose_exp(comm, req, bound), rc;
        uint32_t slot = next % (uint32_t)ch->sched.nchunks;
        uint16_t *dev_out = (uint16_t *)((char *)dc->tx + (size_t)slot * chunk);
        const float *local = (const float *)req->sendbuf + at;
        float *final = sf->last_reduce ? result : NULL;

        if (fp16)
            rc = ring_cuda_fused_f16(dev_out, final, dev_in, local, ldexpf(1.0f, in_meta->exp),
                                     local_scale, ldexpf(1.0f, -e), n, dev->stream);
        else
            rc = ring_cuda_fused_bf16(dev_out, final, dev_in, local, 1.0f, local_scale, 1.0f,
                                      n, dev->stream);
        ring_enc_meta_set(ring_enc_tx_meta(ch, next), e, bound, n);
        if (rc != 0 || dev_tx_queue(comm, ch, next, bound, e) != 0)
            return dev_fail(comm, req, "the reduce of a received chunk failed");
    } else {
        int rc = fp16 ? ring_cuda_decode_f16(result, dev_in, ldexpf(1.0f, in_meta->exp), n,
                                             dev->stream)
                      : ring_cuda_decode_bf16(result, dev_in, 1.0f, n, dev->stream);

        if (rc != 0)
            return dev_fail(comm, req, "decoding a received chunk failed");
        if (sf->step < 2 * (comm->size - 1) - 1) {
            /* forward what came, as it came (compressed or not): host to host */
            const void *stage = ch->stage + (size_t)w * chunk;
            uint32_t slot = next % (uint32_t)ch->sched.nchunks;

            memcpy(ring_enc_tx_slot(comm, ch, next), stage, in_meta->bytes);
            *ring_enc_tx_meta(ch, next) = *in_meta;
            dc->tx_ready[slot] = next;
        }
    }
    if (ring_cuda_event_record(dc->in_event[w], dev->stream) != 0)
        return dev_fail(comm, req, "recording a copy's event failed");
    dc->in_pending[w] = 1;
    dev->pending++;
    /* an lz4'd chunk came from the one decompression buffer: the next one reuses it */
    if (in_meta->lz4 && ring_dev_recv_ready(comm, ch, q) == 0 &&
        ring_cuda_event_sync(dc->in_event[w]) != 0)
        return dev_fail(comm, req, "copying a received chunk to the device failed");
    return RING_OK;
}

/* ---- gates ------------------------------------------------------------------------- */

int ring_dev_send_ready(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req, uint32_t q)
{
    ring_dev_channel_t *dc;
    uint32_t slot;
    int done;

    if (req->dev != RING_DEV_CODEC)
        return 1;
    dc = &comm->dev->ch[ch->index];
    slot = q % (uint32_t)ch->sched.nchunks;
    if (dc->tx_ready[slot] == q)
        return 1;
    if (dc->tx_pending[slot] != q) {
        /* begin queued every step-0 chunk and each combine the next one: a bug */
        (void)dev_fail(comm, req, "internal error: the device pipeline lost a chunk");
        return -1;
    }
    done = ring_cuda_event_query(dc->tx_event[slot]);
    if (done == 0)
        return 0;
    dc->tx_pending[slot] = RING_DEV_NONE;
    comm->dev->pending--;
    if (done < 0) {
        (void)dev_fail(comm, req, "encoding or copying a chunk to the host failed");
        return -1;
    }
    ring_enc_tx_final(comm, ch, req, q, dc->tx_bound[slot], dc->tx_exp[slot]);
    dc->tx_ready[slot] = q;
    return 1;
}

int ring_dev_recv_ready(ring_comm_t *comm, ring_channel_t *ch, uint32_t q)
{
    ring_dev_channel_t *dc;
    uint32_t w = q % RING_WINDOW;
    int done;

    if (comm->dev == NULL || !comm->dev->ch[ch->index].in_pending[w])
        return 1;
    dc = &comm->dev->ch[ch->index];
    done = ring_cuda_event_query(dc->in_event[w]);
    if (done == 0)
        return 0;
    dc->in_pending[w] = 0;
    comm->dev->pending--;
    if (done < 0) {
        (void)ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_IO,
                                                   .culprit = comm->rank, .step = -1},
                             "a copy of a received chunk to rank %d's GPU %d failed", comm->rank,
                             comm->dev->device);
        return -1;
    }
    return 1;
}

void ring_dev_codec_free(ring_comm_t *comm)
{
    for (int c = 0; c < RING_MAX_CHANNELS; c++)
        dev_channel_release(&comm->dev->ch[c]);
}
