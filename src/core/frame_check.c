/*
 * frame_check.c - is a received frame the one the call expects? The fast
 * check, and the slow path that says why not (another call, an ABORT or
 * CLOSE, a bad tag), failing the comm with a message that names the peer.
 * Used by the ring's receives (allreduce.c).
 */
#include "ring_build.h"

#include <stdio.h>
#include <string.h>

#include "codec_pipeline.h"
#include "collectives.h"
#include "comm_int.h"
#include "fail.h"
#include "frame_check.h"
#include "timeline.h"
#include "transport.h"

/* A transport-level failure on a connection to rank `peer`. */
ring_status_t ring_comm_fail_link(ring_comm_t *comm, ring_request_t *req, int step, int peer,
                                  const ring_tp_ep_t *ep, const ring_tp_req_t *treq)
{
    ring_fault_t fault = {.status = RING_ERR_REMOTE, .culprit = peer,
                          .sys_errno = treq->sys_errno, .step = step};

    return ring_comm_fail_peer(comm, req, &fault, "%s by {peer}",
                               ring_tp_ep_cause(comm->tp_ops, ep, treq));
}

/* A neighbour left the ring (CLOSE) while this allreduce still needed it. */
ring_status_t ring_comm_fail_closed(ring_comm_t *comm, ring_request_t *req, int step, int peer)
{
    ring_fault_t fault = {.status = RING_ERR_REMOTE, .culprit = peer,
                          .sys_errno = RING_CAUSE_CLOSED, .step = step};

    return ring_comm_fail_peer(comm, req, &fault, "{peer} closed its communicator during this %s",
                               req != NULL ? ring_coll_names[req->coll] : "allreduce");
}

/* The frame belongs to the same call as req: round, collective and arguments. */
int ring_frame_matches_call(const ring_request_t *req, const ring_frame_t *f)
{
    return f->round == req->round && f->coll == req->coll && f->count == req->count &&
           f->dtype == req->dtype && f->op == req->op && f->tensor_id == req->tensor_id &&
           (req->coll != RING_COLL_BROADCAST || f->detail == (uint64_t)req->root);
}

int ring_slot_tag_ok(ring_comm_t *comm, const ring_tp_ep_t *ep, const ring_slot_t *slot)
{
    size_t payload;
    ring_frame_t f;
    int sealed;

    if (comm->auth.macs == NULL)
        return 0;
    if (slot->req.status != RING_OK || slot->req.bytes < comm->auth.hdr_bytes ||
        ring_frame_decode(slot->hdr, &f) != 0)
        return -1; /* cut short or too large: it cannot be checked, so it is not believed */
    payload = slot->req.bytes - comm->auth.hdr_bytes;
    if (payload > 0 && (slot->req.iovcnt < 2 || payload > slot->req.iov[1].iov_len))
        return -1;
    /* --auth encrypt: every data payload comes encrypted (the flag is under the tag);
     * it is decrypted in place here, once its tag checks */
    sealed = f.type == RING_FRAME_DATA && (f.flags & RING_FRAME_SEALED) != 0;
    if (comm->auth.encrypt && f.type == RING_FRAME_DATA && payload > 0 && !sealed)
        return -1;
    return ring_frame_macs_open(comm->auth.macs, ep, slot->hdr,
                                payload > 0 ? slot->req.iov[1].iov_base : NULL, payload, sealed);
}

/* Why a received frame is not the one expected: the slow path, with a message. */
static ring_status_t frame_error(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                                 const ring_sched_frame_t *sf, ring_slot_t *slot,
                                 ring_tp_ep_t *ep)
{
    ring_frame_t f;
    size_t expect = sf->range.len * ring_enc_elem_bytes(comm, req);
    int left = comm->topo.left_rank;
    ring_fault_t fault = {.status = RING_ERR_PROTOCOL, .culprit = left, .step = sf->step};

    if (slot->req.bytes < RING_FRAME_BYTES || ring_frame_decode(slot->hdr, &f) != 0)
        return ring_comm_fail_peer(comm, req, &fault, "{peer} sent something that is not a "
                                   "ringd frame (%zu bytes, bad magic)", slot->req.bytes);
    /* nothing in it is believed without a valid tag; but one too large for the
     * receive (another count) cannot be checked, and fails the call anyway */
    if (slot->req.status != RING_ERR_MISMATCH && ring_slot_tag_ok(comm, ep, slot) != 0)
        return ring_comm_fail_tag(comm, req, sf->step, left, "a frame");
    if (f.type == RING_FRAME_ABORT)
        return ring_comm_fail_from_frame(comm, &f, left);
    if (f.type == RING_FRAME_CLOSE)
        return ring_comm_fail_closed(comm, req, sf->step, left);
    if (f.type == RING_FRAME_DOCTOR) /* doctor.c's frames: a peer runs the ring doctor */
        return ring_comm_fail_peer(comm, req, &fault, "{peer} sent a ring doctor frame: it runs "
                                   "the ring doctor, this peer an allreduce; every peer must run "
                                   "the ring doctor at the same point (ringd --doctor, ring-bench "
                                   "--doctor), or none");
    if (!ring_frame_matches_call(req, &f)) {
        char mine[160], theirs[160];

        fault.status = RING_ERR_MISMATCH;
        fault.theirs = &f;
        ring_coll_describe(req->coll, req->round, req->count, req->dtype, req->op,
                           req->tensor_id, req->root, mine, sizeof(mine));
        ring_coll_describe((ring_coll_t)f.coll, f.round, f.count, f.dtype, f.op, f.tensor_id,
                           (int)f.detail, theirs, sizeof(theirs));
        return ring_comm_fail_peer(comm, req, &fault,
                                   "collective arguments differ between rank %d and {peer}: "
                                   "rank %d called %s; rank %d called %s", comm->rank,
                                   comm->rank, mine, left, theirs);
    }
    if (f.type != RING_FRAME_DATA || f.channel != ch->index || f.step != sf->step ||
        f.chunk != (uint32_t)sf->chunk || f.payload_bytes != expect ||
        slot->req.status != RING_OK || slot->req.bytes != comm->auth.hdr_bytes + expect)
        return ring_comm_fail_peer(comm, req, &fault,
                                   "{peer} sent frame type %u channel %u step %u chunk %u of %u "
                                   "bytes; expected channel %d step %d chunk %d of %zu bytes",
                                   f.type, f.channel, f.step, f.chunk, f.payload_bytes,
                                   ch->index, sf->step, sf->chunk, expect);
    return RING_OK;
}

ring_status_t ring_frame_check(ring_comm_t *comm, ring_channel_t *ch, ring_request_t *req,
                               const ring_sched_frame_t *sf, ring_slot_t *slot, ring_tp_ep_t *ep,
                               ring_frame_t *f_out)
{
    size_t expect = sf->range.len * ring_enc_elem_bytes(comm, req);
    ring_frame_t f;

    /* the common case, checked without formatting anything; an lz4 chunk is
     * smaller than its raw size */
    if (slot->req.status == RING_OK && ring_frame_decode(slot->hdr, &f) == 0 &&
        f.type == RING_FRAME_DATA && ring_frame_matches_call(req, &f) && f.channel == ch->index &&
        f.step == sf->step && f.chunk == (uint32_t)sf->chunk &&
        !(f.flags & RING_FRAME_NOTICE) &&
        slot->req.bytes == comm->auth.hdr_bytes + f.payload_bytes &&
        (f.payload_bytes == expect ||
         ((f.flags & RING_FRAME_LZ4) && req->wire != RING_CODEC_NONE &&
          f.payload_bytes > 0 && f.payload_bytes < expect))) {
        int tag = 0;

        if (comm->auth.macs != NULL) /* --auth frames: before a byte of it is used */
            RING_TL_TIMED(comm, ch, RING_TL_MAC, f.payload_bytes,
                          tag = ring_slot_tag_ok(comm, ep, slot));
        if (tag == 0) {
            *f_out = f;
            return RING_OK;
        }
    }
    return frame_error(comm, ch, req, sf, slot, ep);
}
