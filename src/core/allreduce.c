/*
 * allreduce.c - the request engine: drives the ring schedule (schedule.c) over
 * the transport, one request at a time in start order. Per channel, frame q
 * may be sent once frame q - nchunks has been received and reduced (the same
 * chunk one step earlier), and may be received into the user's buffer in
 * allgather once the send that read that region has left. Up to RING_WINDOW
 * frames are in flight each way, so receiving chunk k+1, reducing chunk k
 * and sending chunk k-1 overlap. Nothing here allocates or blocks except
 * ring_comm_wait_until, which sleeps in the transport's wait with a deadline.
 */
#include "ring_build.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "algo.h"
#include "allreduce.h"
#include "clock.h"
#include "codec_pipeline.h"
#include "collectives.h"
#include "comm_int.h"
#include "fail.h"
#include "frame_check.h"
#include "log.h"
#include "notice.h"
#include "reduce.h"
#include "timeline.h"


/* Receiving the back channel: ABORT or CLOSE from the right neighbour. */
void ring_channel_post_back(ring_comm_t *comm, ring_channel_t *ch)
{
    ring_slot_t *slot = &ch->back;

    slot->req.iov[0].iov_base = slot->hdr;
    slot->req.iov[0].iov_len = comm->auth.hdr_bytes;
    slot->req.iovcnt = 1;
    /* nothing here is urgent (transport.h), except the doctor's answers, which it times */
    slot->req.lazy = !comm->doctor.running;
    slot->posted = comm->tp_ops->post_recv(ch->right[0], &slot->req) == RING_OK;
}

static void request_finish(ring_comm_t *comm, ring_request_t *req, ring_status_t status);

static ring_status_t channel_begin(ring_comm_t *comm, ring_channel_t *ch,
                                   const ring_request_t *req)
{
    /* chunks are sized by what travels: 2 bytes an element with a codec */
    if (req->coll != RING_COLL_ALLREDUCE) {
        ring_coll_channel_layout(comm, ch, req); /* collectives.c: rank blocks as segments */
    } else {
        ch->part = ring_sched_split(req->count, comm->nchannels, ch->index, RING_SCHED_ALIGN);
        ring_sched_init(&ch->sched, comm->topo.pos, comm->size, ch->part.len,
                        ring_enc_elem_bytes(comm, req), comm->cfg.chunk_bytes);
    }
    ch->next_send = ch->next_recv = ch->sends_done = ch->recvs_done = 0;
    if (ring_enc_channel_grows(ch, req)) /* hook: device_codec.c page-locked the old slots */
        ring_dev_unpin_tx(comm, ch);
    return ring_enc_channel_reserve(comm, ch, req);
}

/* 1 when an fp16 or bf16 buffer holds an inf or NaN: all exponent bits set */
static int half_nonfinite(const uint16_t *v, size_t n, uint16_t exp_mask)
{
    for (size_t i = 0; i < n; i++)
        if ((v[i] & exp_mask) == exp_mask)
            return 1;
    return 0;
}

static void request_begin(ring_comm_t *comm, ring_request_t *req)
{
    ring_status_t st;

    req->started = 1;
    if (comm->tl != NULL) /* hook: timeline.c */
        ring_tl_request_begin(comm, req);
    /* hook: device.c stages CUDA device buffers through host memory (nothing for host ones) */
    if (req->coll == RING_COLL_ALLREDUCE && ring_dev_request_begin(comm, req) != RING_OK)
        return;
    /* hook: collectives.c places allgather's own block, reduce-scatter's scratch */
    if (ring_coll_request_begin(comm, req) != RING_OK)
        return;
    if (comm->size == 1) {
        int reduces = req->coll == RING_COLL_ALLREDUCE || req->coll == RING_COLL_REDUCE_SCATTER;

        /* a ring of one: the sum is the input, and so is the average */
        if (req->recvbuf != req->sendbuf)
            memcpy(req->recvbuf, req->sendbuf, req->count * ring_dtype_size(req->dtype));
        if (reduces && req->dtype == RING_FLOAT32 && req->count > 0) {
            int nonfinite = 0;
            (void)comm->enc.kops->absmax_f32(req->recvbuf, req->count, &nonfinite);
            req->nonfinite = nonfinite;
        } else if (reduces && (req->dtype == RING_FLOAT16 || req->dtype == RING_BFLOAT16)) {
            /* the same promise for half-precision buffers (it held for fp32 only) */
            req->nonfinite = half_nonfinite(req->recvbuf, req->count,
                                            req->dtype == RING_FLOAT16 ? 0x7c00 : 0x7f80);
        }
        request_finish(comm, req, req->nonfinite ? RING_ERR_NONFINITE : RING_OK);
        return;
    }
    for (int a = 0; a < RING_ALGO_HOOKS; a++) { /* hook: hier.c, rd.c */
        const ring_algo_ops_t *ops = comm->algo.ops[a];
        /* the device codec path runs on the ring */
        if (ops != NULL && req->dev != RING_DEV_CODEC && ops->takes(comm, req)) {
            req->algo = ops;
            req->wire = RING_CODEC_NONE;
            for (int c = 0; c < comm->nchannels; c++) {
                ring_channel_t *ch = &comm->channels[c];
                memset(&ch->sched, 0, sizeof(ch->sched)); /* nothing on the ring */
                ch->part = (ring_range_t){0, 0};
                ch->next_send = ch->next_recv = ch->sends_done = ch->recvs_done = 0;
            }
            /* a notice the right neighbour sent before this peer got here (notice.c) */
            if (ring_notice_begin(comm, req) != RING_OK)
                return;
            (void)ops->begin(comm, req); /* a failure fails the comm */
            return;
        }
    }
    req->wire = ring_enc_wire(comm, req);
    st = ring_enc_request_begin(comm, req);
    for (int c = 0; st == RING_OK && c < comm->nchannels; c++)
        st = channel_begin(comm, &comm->channels[c], req);
    /* hook: device_codec.c queues this peer's chunks on the GPU (a failure fails the comm) */
    if (st == RING_OK && req->dev == RING_DEV_CODEC && ring_dev_codec_begin(comm, req) != RING_OK)
        return;
    if (st != RING_OK) {
        /* the peers must not wait for a peer that cannot take part */
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", ring_last_error());
        ring_comm_fail(comm, &(ring_fault_t){.status = RING_ERR_NO_MEMORY, .culprit = comm->rank,
                                             .step = -1},
                       "round %llu: %s", (unsigned long long)req->round, msg);
        return;
    }
    (void)ring_notice_begin(comm, req); /* a failure fails the comm */
}

/* Where a range of the user's elements starts (fp32 or bytes: what travels unencoded). */
static void *elem_ptr(const void *base, const ring_channel_t *ch, const ring_request_t *req,
                      const ring_range_t *r)
{
    return (char *)base + (ch->part.off + r->off) * ring_dtype_size(req->dtype);
}

static void frame_fill(const ring_comm_t *comm, const ring_channel_t *ch,
                       const ring_request_t *req, const ring_sched_frame_t *sf, ring_frame_t *f)
{
    memset(f, 0, sizeof(*f));
    f->type = RING_FRAME_DATA;
    f->dtype = (uint8_t)req->dtype;
    f->op = (uint8_t)req->op;
    f->coll = (uint8_t)req->coll;
    f->channel = (uint8_t)ch->index;
    f->round = req->round;
    f->count = req->count;
    f->tensor_id = req->tensor_id;
    f->chunk = (uint32_t)sf->chunk;
    f->step = (uint16_t)sf->step;
    f->payload_bytes = (uint32_t)(sf->range.len * ring_enc_elem_bytes(comm, req));
    f->origin_rank = (uint32_t)comm->rank;
    /* what this peer knows so far; by the end of allgather every peer knows it all */
    f->flags = req->nonfinite ? RING_FRAME_NONFINITE : 0;
    if (req->coll == RING_COLL_BROADCAST)
        f->detail = (uint64_t)req->root; /* never encoded: detail is free */
}

static ring_status_t channel_post_send(ring_comm_t *comm, ring_channel_t *ch,
                                       ring_request_t *req, uint32_t q)
{
    ring_slot_t *slot = &ch->send[q % RING_WINDOW];
    ring_sched_frame_t sf;
    ring_frame_t f;
    const void *src;
    unsigned char *cipher;
    ring_tp_ep_t *ep;
    ring_status_t status;

    ring_sched_send_frame(&ch->sched, q, &sf);
    if (req->wire != RING_CODEC_NONE) {
        /* encoded: step 0 encodes now; later steps were encoded when their input arrived
         * (on a GPU, step 0 too: device_codec.c) */
        if (sf.own && req->dev != RING_DEV_CODEC)
            RING_TL_TIMED(comm, ch, RING_TL_ENCODE, sf.range.len,
                          ring_enc_first(comm, ch, req, &sf, q));
        frame_fill(comm, ch, req, &sf, &f);
        ring_enc_meta_put(ring_enc_tx_meta(ch, q), &f);
        src = ring_enc_tx_payload(comm, ch, q);
    } else {
        /* the first step sends this peer's own data; later steps forward what it
         * reduced or received */
        frame_fill(comm, ch, req, &sf, &f);
        src = elem_ptr(sf.own ? req->sendbuf : req->recvbuf, ch, req, &sf.range);
    }
    /* --auth encrypt: the payload goes out encrypted, from this slot's own buffer */
    cipher = comm->auth.encrypt && f.payload_bytes > 0
                 ? ch->cipher + (size_t)(q % RING_WINDOW) * comm->cfg.chunk_bytes : NULL;
    if (cipher != NULL)
        f.flags |= RING_FRAME_SEALED;
    ring_frame_encode(&f, slot->hdr);
    ep = ch->right[q % (uint32_t)comm->nstreams];
    if (comm->auth.macs != NULL)
        RING_TL_TIMED(comm, ch, RING_TL_MAC, f.payload_bytes,
                      (void)ring_frame_macs_seal(comm->auth.macs, ep, slot->hdr, src, cipher,
                                                 f.payload_bytes));
    if (cipher != NULL)
        src = cipher;
    comm->stats.frames_sent++;
    comm->stats.payload_bytes += f.payload_bytes;
    comm->stats.raw_bytes += sf.range.len * ring_enc_elem_bytes(comm, req);
    comm->stats.frames_lz4 += (f.flags & RING_FRAME_LZ4) != 0;
    slot->req.iov[0].iov_base = slot->hdr;
    slot->req.iov[0].iov_len = comm->auth.hdr_bytes;
    slot->req.iov[1].iov_base = (void *)src;
    slot->req.iov[1].iov_len = f.payload_bytes;
    slot->req.iovcnt = 2;
    slot->posted = 1;
    status = comm->tp_ops->post_send(ep, &slot->req);
    return status == RING_OK || slot->req.done ? RING_OK : status; /* failure shows on retire */
}

static ring_status_t channel_post_recv(ring_comm_t *comm, ring_channel_t *ch,
                                       ring_request_t *req, uint32_t q)
{
    ring_slot_t *slot = &ch->recv[q % RING_WINDOW];
    ring_sched_frame_t sf;
    size_t bytes;
    ring_status_t status;

    ring_sched_recv_frame(&ch->sched, q, &sf);
    bytes = sf.range.len * ring_enc_elem_bytes(comm, req);
    slot->req.iov[0].iov_base = slot->hdr;
    slot->req.iov[0].iov_len = comm->auth.hdr_bytes;
    /* reduce-scatter (and anything encoded) lands in a staging chunk; fp32
     * allgather straight in the result */
    slot->req.iov[1].iov_base = sf.reduce || req->wire != RING_CODEC_NONE
                                    ? ch->stage + (q % RING_WINDOW) * comm->cfg.chunk_bytes
                                    : elem_ptr(req->recvbuf, ch, req, &sf.range);
    slot->req.iov[1].iov_len = bytes;
    slot->req.iovcnt = 2;
    slot->posted = 1;
    status = comm->tp_ops->post_recv(ch->left[q % (uint32_t)comm->nstreams], &slot->req);
    return status == RING_OK || slot->req.done ? RING_OK : status;
}

/* fp32 reduce-scatter: this peer's values plus the received ones. */
static void reduce_f32(ring_comm_t *comm, const ring_channel_t *ch, ring_request_t *req,
                       const ring_sched_frame_t *sf, const float *in)
{
    float *dst = elem_ptr(req->recvbuf, ch, req, &sf->range);
    const float *mine = elem_ptr(req->sendbuf, ch, req, &sf->range);

    /* reduce-scatter: the owner's sums go straight into the user's buffer
     * (coll_plan.c's finish then copies nothing out of the scratch) */
    if (sf->last_reduce && req->coll == RING_COLL_REDUCE_SCATTER && req->user_recvbuf != NULL)
        dst = (float *)req->user_recvbuf + (ch->part.off + sf->range.off -
                                            req->offsets[comm->rank]);

    if (sf->last_reduce) {
        const float *src[2] = {mine, in};
        /* an inf or NaN anywhere in the inputs (or an overflow) shows in the
         * owner's sum: found in the pass that adds it (the same bits as a+b) */
        int nonfinite = ring_reduce_sum_n_f32(dst, NULL, src, 2,
                                              req->op == RING_AVG ? 1.0f / (float)comm->size
                                                                  : 1.0f,
                                              sf->range.len);

        if (!req->skip_nonfinite)
            req->nonfinite |= nonfinite;
    } else {
        ring_reduce_sum_f32(dst, mine, in, sf->range.len);
    }
}

static ring_status_t channel_retire_recv(ring_comm_t *comm, ring_channel_t *ch,
                                         ring_request_t *req, uint32_t q)
{
    ring_slot_t *slot = &ch->recv[q % RING_WINDOW];
    ring_tp_ep_t *ep = ch->left[q % (uint32_t)comm->nstreams];
    ring_sched_frame_t sf;
    ring_frame_t f;

    ring_sched_recv_frame(&ch->sched, q, &sf);
    slot->posted = 0;
    /* a message larger than expected still delivers its header: read it first */
    if (slot->req.status != RING_OK && slot->req.status != RING_ERR_MISMATCH)
        return ring_comm_fail_link(comm, req, sf.step, comm->topo.left_rank, ep, &slot->req);
    RING_CHECK(ring_frame_check(comm, ch, req, &sf, slot, ep, &f));
    req->nonfinite |= (f.flags & RING_FRAME_NONFINITE) != 0;
    if (req->wire != RING_CODEC_NONE) {
        ring_status_t status;

        /* hook: device_codec.c does the step on the GPU */
        RING_TL_TIMED(comm, ch, sf.reduce ? RING_TL_REDUCE : RING_TL_DECODE, sf.range.len,
                      status = req->dev == RING_DEV_CODEC
                                   ? ring_dev_combine(comm, ch, req, &sf, q, &f)
                                   : ring_enc_combine(comm, ch, req, &sf, q, &f));
        RING_CHECK(status);
    } else if (sf.reduce) {
        RING_TL_TIMED(comm, ch, RING_TL_REDUCE, sf.range.len,
                      reduce_f32(comm, ch, req, &sf, (const float *)slot->req.iov[1].iov_base));
    }
    return RING_OK;
}

/* Encoded: retiring frame q writes the tx slot of its chunk for frame
 * q + nchunks, so frame q itself must have left. (fp32 needs no slot: it
 * sends from the user's buffer.) */
static int recv_output_free(const ring_request_t *req, const ring_channel_t *ch, uint32_t q)
{
    uint32_t next = q + (uint32_t)ch->sched.nchunks;

    /* reduce-scatter's last step has no next frame, but its reduce still encodes
     * into the slot (the owner keeps the decoded wire value) */
    return req->wire == RING_CODEC_NONE || q < ch->sends_done ||
           (next >= ch->sched.nsend && req->coll != RING_COLL_REDUCE_SCATTER);
}

static ring_status_t check_back_channel(ring_comm_t *comm, ring_request_t *req);

/* A send to the right neighbour failed. It may have said why before it left (an
 * ABORT on the back channel, e.g. a settings mismatch at start-up further round
 * the ring), read only after the failed send: that message wins. */
static ring_status_t fail_send(ring_comm_t *comm, ring_request_t *req, int step,
                               const ring_tp_ep_t *ep, const ring_tp_req_t *treq)
{
    ring_status_t st;

    (void)comm->tp_ops->progress(comm->tp);
    st = check_back_channel(comm, req);
    if (st != RING_OK)
        return st;
    if (comm->fail.error != RING_OK)
        return ring_error_copy(comm->fail.error, comm->fail.error_msg);
    return ring_comm_fail_link(comm, req, step, comm->topo.right_rank, ep, treq);
}

static ring_status_t channel_progress(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                                      int *moved)
{
    const ring_sched_t *s = &ch->sched;
    uint32_t nchunks = (uint32_t)s->nchunks;

    while (ch->sends_done < ch->next_send && ch->send[ch->sends_done % RING_WINDOW].req.done) {
        ring_slot_t *slot = &ch->send[ch->sends_done % RING_WINDOW];
        if (slot->req.status != RING_OK)
            return fail_send(comm, req, ch->sched.first_step + (int)(ch->sends_done / nchunks),
                             ch->right[ch->sends_done % (uint32_t)comm->nstreams], &slot->req);
        slot->posted = 0;
        ch->sends_done++;
        (*moved)++;
        if (comm->tl != NULL) /* hook: timeline.c ends the last step */
            ring_tl_channel_moved(comm, ch);
    }
    while (ch->recvs_done < ch->next_recv && ch->recv[ch->recvs_done % RING_WINDOW].req.done &&
           recv_output_free(req, ch, ch->recvs_done)) {
        ring_status_t status;
        const ring_tp_req_t *in = &ch->recv[ch->recvs_done % RING_WINDOW].req;

        RING_TL_TIMED(comm, ch, RING_TL_RECV,
                      in->bytes > comm->auth.hdr_bytes ? in->bytes - comm->auth.hdr_bytes : 0,
                      status = channel_retire_recv(comm, ch, req, ch->recvs_done));
        RING_CHECK(status);
        ch->recvs_done++;
        (*moved)++;
        if (comm->tl != NULL) /* hook: timeline.c ends a step at its last chunk */
            ring_tl_channel_moved(comm, ch);
    }
    while (ch->next_send < s->nsend && ch->next_send - ch->sends_done < RING_WINDOW &&
           ring_sched_send_needs(s, ch->next_send) <= ch->recvs_done) {
        ring_status_t status;
        /* hook: device_codec.c, once the chunk's copy from the GPU is done */
        int ready = ring_dev_send_ready(comm, ch, req, ch->next_send);

        if (ready <= 0) {
            if (ready < 0)
                return comm->fail.error;
            break;
        }

        RING_TL_TIMED(comm, ch, RING_TL_SEND, 0,
                      status = channel_post_send(comm, ch, req, ch->next_send));
        RING_CHECK(status);
        ch->next_send++;
        (*moved)++;
    }
    while (ch->next_recv < s->nrecv && ch->next_recv - ch->recvs_done < RING_WINDOW &&
           ring_sched_recv_needs(s, ch->next_recv) <= ch->sends_done) {
        /* hook: device_codec.c, once the copy that read the stage slot to the GPU is done */
        int ready = ring_dev_recv_ready(comm, ch, ch->next_recv);

        if (ready <= 0) {
            if (ready < 0)
                return comm->fail.error;
            break;
        }
        RING_CHECK(channel_post_recv(comm, ch, req, ch->next_recv));
        ch->next_recv++;
        (*moved)++;
    }
    return RING_OK;
}

/* 1 while the right neighbour still has to take data of this request from us: a
 * frame not yet handed to the transport, or one it has not finished sending
 * (a send the transport finished but channel_progress has not retired yet is
 * delivered: a fast transport's neighbour may read it and close at once). */
static int sends_pending(const ring_channel_t *ch)
{
    if (ch->next_send < ch->sched.nsend)
        return 1;
    for (uint32_t q = ch->sends_done; q < ch->next_send; q++) {
        const ring_slot_t *slot = &ch->send[q % RING_WINDOW];
        if (slot->posted && !slot->req.done)
            return 1;
    }
    return 0;
}

/* The right neighbour's back channel: ABORT fails us; CLOSE is fine once it has all our data. */
static ring_status_t check_back_channel(ring_comm_t *comm, ring_request_t *req)
{
    ring_channel_t *ch = &comm->channels[0];
    ring_frame_t f;
    int pending = 0;

    if (!ch->back.posted || !ch->back.req.done)
        return RING_OK;
    /* a ring call's frames must reach the right neighbour (rd.c and direct.c
     * calls send it nothing, and it may have closed once done with them) */
    for (int c = 0; req != NULL && req->algo == NULL && c < comm->nchannels; c++)
        pending |= sends_pending(&comm->channels[c]);
    if (ch->back.req.status != RING_OK && ch->back.req.status != RING_ERR_MISMATCH) {
        /* direct.c waits for every peer on the segment, not on this connection: a
         * right neighbour that died may be one it waits for (one that closed its
         * communicator sent CLOSE once done with the call: not this branch) */
        if (!pending && !(req != NULL && req->algo != NULL && req->algo->needs_every_peer &&
                          req->algo->busy(comm)))
            return RING_OK; /* reported when a call needs that connection: the slot stays
                             * as it is, to be looked at again then (a direct allreduce
                             * that begins after the loss would otherwise wait a timeout) */
        ch->back.posted = 0;
        return ring_comm_fail_link(comm, req, ring_comm_current_step(comm), comm->topo.right_rank,
                         ch->right[0], &ch->back.req);
    }
    ch->back.posted = 0;
    if (ring_frame_decode(ch->back.hdr, &f) != 0 ||
        ring_slot_tag_ok(comm, ch->right[0], &ch->back) != 0) {
        if (comm->auth.macs != NULL)
            return ring_comm_fail_tag(comm, req, ring_comm_current_step(comm),
                                      comm->topo.right_rank, "a notice on the back channel");
        ring_fault_t fault = {.status = RING_ERR_PROTOCOL, .culprit = comm->topo.right_rank,
                              .step = ring_comm_current_step(comm)};
        return ring_comm_fail_peer(comm, req, &fault, "{peer} sent garbage on its back channel");
    }
    if (f.type == RING_FRAME_ABORT && !comm->open_done && (f.channel & RING_ABORT_AFTER_OPEN)) {
        /* the right neighbour is past the set-up: what it owed this peer's is on its
         * way (the other connection); fail once the set-up is over */
        ring_comm_defer_abort(comm, &f);
        return RING_OK;
    }
    if (f.type == RING_FRAME_DATA && (f.flags & RING_FRAME_NOTICE) &&
        ch->back.req.status == RING_OK && f.payload_bytes == 0) {
        /* the right neighbour runs a call off the ring and waits (notice.c) */
        ring_status_t status = ring_notice_received(comm, &f);

        if (status == RING_OK)
            ring_channel_post_back(comm, ch);
        return status;
    }
    if (f.type == RING_FRAME_ABORT) {
        ring_status_t status = ring_comm_fail_from_frame(comm, &f, comm->topo.right_rank);

        if (status == RING_OK) /* a question (fail.c's probe), answered: listen on */
            ring_channel_post_back(comm, ch);
        return status;
    }
    if (pending)
        return ring_comm_fail_closed(comm, req, ring_comm_current_step(comm),
                                     comm->topo.right_rank);
    return RING_OK;
}

static void request_finish(ring_comm_t *comm, ring_request_t *req, ring_status_t status)
{
    /* hook: device.c copies a staged result back to the device (a failed copy fails it) */
    if (req->coll == RING_COLL_ALLREDUCE)
        status = ring_dev_request_finish(comm, req, status);
    ring_coll_request_finish(comm, req, status); /* hook: reduce-scatter's block */
    comm->requests.finished++;
    req->done = 1;
    req->status = status;
    if (comm->tl != NULL) /* hook: timeline.c writes the allreduce's events */
        ring_tl_request_end(comm, req, status);
}

/* The oldest request that has not finished, in start order. */
static ring_request_t *next_unfinished(ring_comm_t *comm)
{
    for (unsigned i = 0; i < comm->requests.count; i++) {
        ring_request_t *req = &comm->requests.slots[(comm->requests.head + i) % RING_MAX_REQUESTS];
        if (!req->done)
            return req;
    }
    return NULL;
}

/* Probe mode (fail.c): this peer asked its left neighbour whether it lives,
 * so data no longer moves here; every frame that comes in is read only for
 * the answer: an ABORT, a CLOSE, or WAITING (it waits too: wait longer). */
static ring_status_t probe_read_answers(ring_comm_t *comm, ring_request_t *req)
{
    /* messages first, then broken connections: a peer that answers and exits
     * leaves its answer in one receive and the close in the later ones */
    for (int pass = 0; pass < 2; pass++) {
        for (int c = 0; c < comm->nchannels; c++) {
            ring_channel_t *ch = &comm->channels[c];

            for (uint32_t q = ch->recvs_done; q < ch->next_recv; q++) {
                ring_slot_t *slot = &ch->recv[q % RING_WINDOW];
                ring_tp_ep_t *ep = ch->left[q % (uint32_t)comm->nstreams];
                int step = ch->sched.first_step + (int)(q / (uint32_t)ch->sched.nchunks);
                int broken = slot->req.status != RING_OK && slot->req.status != RING_ERR_MISMATCH;
                ring_frame_t f;

                if (!slot->posted || !slot->req.done || broken != pass)
                    continue;
                slot->posted = 0;
                if (broken)
                    return ring_comm_fail_link(comm, req, step, comm->topo.left_rank, ep,
                                               &slot->req);
                if (slot->req.bytes < RING_FRAME_BYTES || ring_frame_decode(slot->hdr, &f) != 0)
                    continue;
                if (f.type != RING_FRAME_DATA && ring_slot_tag_ok(comm, ep, slot) != 0)
                    return ring_comm_fail_tag(comm, req, step, comm->topo.left_rank, "an answer");
                if (f.type == RING_FRAME_ABORT)
                    return ring_comm_fail_from_frame(comm, &f, comm->topo.left_rank);
                if (f.type == RING_FRAME_CLOSE)
                    return ring_comm_fail_closed(comm, req, step, comm->topo.left_rank);
                if (f.type == RING_FRAME_WAITING)
                    ring_comm_probe_extend(comm, &f);
                if (slot->req.status == RING_ERR_MISMATCH)
                    continue; /* the transport fails every later receive on ep */
                /* the answer may follow on the same connection: room for a header */
                slot->req.iov[0].iov_base = slot->hdr;
                slot->req.iov[0].iov_len = comm->auth.hdr_bytes;
                slot->req.iovcnt = 1;
                slot->posted = comm->tp_ops->post_recv(ep, &slot->req) == RING_OK;
            }
        }
    }
    return RING_OK;
}

/* One pass over everything; returns how much moved, or -1 once the comm has failed. */
int ring_comm_progress(ring_comm_t *comm)
{
    ring_request_t *req;
    int moved;

    moved = 0;
    /* failed outside this function (the progress thread's timeout): fail what is pending,
     * or its waiters never wake */
    if (comm->fail.error != RING_OK)
        goto failed;
    for (int a = 0; a < RING_ALGO_HOOKS; a++) /* hook: direct.c's heartbeat */
        if (comm->algo.ops[a] != NULL && comm->algo.ops[a]->tick != NULL)
            comm->algo.ops[a]->tick(comm);
    if (comm->size > 1) /* hook: timeline.c; a pass that moved nothing was a wait */
        RING_TL_TIMED(comm, NULL, moved > 0 ? RING_TL_IO : RING_TL_WAIT, 0,
                      moved = comm->tp_ops->progress(comm->tp));
    /* start the next request first, so a notice already waiting is blamed on it */
    req = next_unfinished(comm);
    /* hook: device.c, a device request waits for the caller's stream to reach it */
    if (req != NULL && !req->started && ring_dev_begin_ready(comm, req)) {
        request_begin(comm, req);
        moved++;
    }
    if (comm->fail.error != RING_OK ||
        check_back_channel(comm, ring_comm_active_request(comm)) != RING_OK)
        goto failed;
    if (comm->fail.timeout_probe_deadline != 0) {
        if (probe_read_answers(comm, ring_comm_active_request(comm)) != RING_OK ||
            ring_comm_probe_check(comm))
            goto failed;
        return moved;
    }
    /* requests run one after the other; finished ones stay until waited for */
    while (req != NULL) {
        int finished = 1;

        if (!req->started) {
            if (!ring_dev_begin_ready(comm, req))
                break;
            request_begin(comm, req);
            moved++;
            if (comm->fail.error != RING_OK)
                goto failed;
        }
        if (!req->done) {
            if (req->algo != NULL && /* hook: hier.c, rd.c drive it over their own */
                req->algo->progress(comm, req, &moved, &finished) != RING_OK)
                goto failed;
            if (req->algo == NULL) {
                for (int c = 0; c < comm->nchannels; c++) {
                    ring_channel_t *ch = &comm->channels[c];
                    if (channel_progress(comm, ch, req, &moved) != RING_OK)
                        goto failed;
                    finished &= ch->sends_done == ch->sched.nsend &&
                                ch->recvs_done == ch->sched.nrecv;
                }
            }
            if (!finished) {
                /* one that waits long shows its header to the left neighbour */
                if (moved == 0 && req->algo != NULL && req->algo->notice)
                    ring_notice_idle(comm, req);
                break;
            }
            request_finish(comm, req, req->nonfinite ? RING_ERR_NONFINITE : RING_OK);
            comm->stats.allreduces++;
            moved++;
        }
        req = next_unfinished(comm);
    }
    return moved;
failed:
    for (unsigned i = 0; i < comm->requests.count; i++) {
        ring_request_t *r = &comm->requests.slots[(comm->requests.head + i) % RING_MAX_REQUESTS];
        if (!r->done)
            request_finish(comm, r, comm->fail.error);
    }
    return -1;
}

void ring_comm_sleep(ring_comm_t *comm, int ms)
{
    if (ring_dev_busy(comm)) { /* hook: device.c: a gate waits for a copy, not for the wire */
        sched_yield();
        return;
    }
    for (int a = 0; a < RING_ALGO_HOOKS; a++) /* hook: hier.c, rd.c */
        if (comm->algo.ops[a] != NULL && comm->algo.ops[a]->wait(comm, ms))
            return;
    comm->tp_ops->wait(comm->tp, ms);
}

ring_status_t ring_comm_wait_until(ring_comm_t *comm, ring_request_t *req)
{
    double now = ring_now();
    double last_progress = now, spin_until = now + comm->cfg.spin_us * 1e-6;
    int moved_since = 0;

    while (!req->done) {
        int moved = ring_comm_progress(comm);

        if (moved < 0)
            break;
        if (moved > 0) { /* the clock is read once a pass moves nothing (a small call's
                          * passes mostly move: a clock read is a fifth of one) */
            moved_since = 1;
            continue;
        }
        now = ring_now();
        if (moved_since) {
            last_progress = now;
            spin_until = now + comm->cfg.spin_us * 1e-6;
            moved_since = 0;
        }
        if (now < spin_until) {
            /* spinning keeps latency low; yielding lets another peer on an
             * oversubscribed host run the step we are waiting for */
            RING_TL_TIMED(comm, NULL, RING_TL_WAIT, 0, sched_yield());
            comm->stats.wait_s += ring_now() - now;
            continue;
        }
        if (ring_comm_check_timeout(comm, now - last_progress)) {
            ring_comm_progress(comm); /* fails the requests with the sticky error */
            break;
        }
        {
            double left = comm->cfg.timeout_s - (now - last_progress);
            int ms = left > 0.1 ? 100 : left > 0 ? (int)(left * 1000) + 1 : 5;
            RING_TL_TIMED(comm, NULL, RING_TL_WAIT, 0, ring_comm_sleep(comm, ms));
            comm->stats.wait_s += ring_now() - now;
        }
    }
    if (!req->done)
        req->done = 1, req->status = comm->fail.error;
    return req->status;
}
