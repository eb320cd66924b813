/*
 * fail.c - the first error on a communicator: recorded once with its
 * phase, peer and cause, made sticky, and told to both neighbours in an
 * ABORT frame so that every peer fails promptly with the same diagnosis
 * instead of waiting for its own timeout.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "comm_int.h"
#include "log.h"

#define NOTICE_LINGER_S 0.2

const char *ring_rank_addr(const ring_comm_t *comm, int rank, char *buf, size_t len)
{
    if (rank < 0 || rank >= comm->size)
        snprintf(buf, len, "?");
    else
        ring_peer_format(&comm->peers[rank], buf, len);
    return buf;
}

void ring_phase_format(const ring_comm_t *comm, const ring_request_t *req, int step, char *buf,
                       size_t len)
{
    if (req == NULL)
        snprintf(buf, len, "between allreduces");
    else if (step < 0)
        snprintf(buf, len, "round %llu", (unsigned long long)req->round);
    else if (step < comm->size - 1)
        snprintf(buf, len, "round %llu, reduce-scatter step %d", (unsigned long long)req->round,
                 step);
    else
        snprintf(buf, len, "round %llu, allgather step %d", (unsigned long long)req->round,
                 step - (comm->size - 1));
}

static ring_request_t *fail_active_request(ring_comm_t *comm)
{
    ring_request_t *req = &comm->reqs[comm->req_head];

    return comm->req_count > 0 && req->started ? req : NULL;
}

static void notice_post(ring_comm_t *comm, ring_slot_t *slot, ring_tp_ep_t *ep,
                        const ring_frame_t *f)
{
    if (ep == NULL)
        return;
    ring_frame_encode(f, slot->hdr);
    slot->req.iov[0].iov_base = slot->hdr;
    slot->req.iov[0].iov_len = RING_FRAME_BYTES;
    slot->req.iovcnt = 1;
    slot->posted = comm->tp_ops->post_send(ep, &slot->req) == RING_OK;
}

void ring_comm_send_notice(ring_comm_t *comm, ring_frame_type_t type, ring_status_t status,
                           int culprit, int sys_errno, uint64_t detail, int skip_rank)
{
    ring_request_t *req = fail_active_request(comm);
    ring_frame_t f;
    double until = ring_now() + NOTICE_LINGER_S;

    if (comm->size < 2 || comm->abort_right.posted || comm->abort_left.posted)
        return;
    memset(&f, 0, sizeof(f));
    f.type = (uint8_t)type;
    f.round = req != NULL ? req->round : 0;
    f.count = req != NULL ? req->count : 0;
    f.tensor_id = req != NULL ? req->tensor_id : 0;
    f.dtype = req != NULL ? (uint8_t)req->dtype : 0;
    f.op = req != NULL ? (uint8_t)req->op : 0;
    f.origin_rank = (uint32_t)comm->rank;
    f.culprit_rank = (uint32_t)culprit;
    f.status = (uint32_t)status;
    f.sys_errno = sys_errno;
    f.detail = detail;
    /* the right neighbour reads it in place of data; the left one on its back channel */
    if (comm->right_rank != skip_rank || comm->size == 2)
        notice_post(comm, &comm->abort_right, comm->channels[0].right[0], &f);
    if (comm->left_rank != skip_rank || comm->size == 2)
        notice_post(comm, &comm->abort_left, comm->channels[0].left[0], &f);
    /* best effort: give the notices a moment to leave, never wait for a dead peer */
    while (ring_now() < until && ((comm->abort_right.posted && !comm->abort_right.req.done) ||
                                  (comm->abort_left.posted && !comm->abort_left.req.done))) {
        if (comm->tp_ops->progress(comm->tp) == 0)
            comm->tp_ops->wait(comm->tp, 5);
    }
}

ring_status_t ring_comm_fail(ring_comm_t *comm, ring_status_t status, int culprit, int sys_errno,
                             uint64_t detail, const char *fmt, ...)
{
    va_list ap;

    if (comm->error != RING_OK)
        return ring_error_copy(comm->error, comm->error_msg);
    va_start(ap, fmt);
    vsnprintf(comm->error_msg, sizeof(comm->error_msg), fmt, ap);
    va_end(ap);
    comm->error = status;
    ring_log(RING_LOG_ERROR, "%s", comm->error_msg);
    ring_comm_send_notice(comm, RING_FRAME_ABORT, status, culprit, sys_errno, detail, -1);
    return ring_error_copy(status, comm->error_msg);
}

/* An ABORT from a neighbour: adopt its diagnosis, pass it on, fail. */
ring_status_t ring_comm_fail_from_frame(ring_comm_t *comm, const ring_frame_t *f, int from_rank)
{
    ring_request_t *req = fail_active_request(comm);
    char phase[96], addr[300];
    int culprit = (int)f->culprit_rank;

    if (comm->error != RING_OK)
        return ring_error_copy(comm->error, comm->error_msg);
    ring_phase_format(comm, req, -1, phase, sizeof(phase));
    ring_rank_addr(comm, culprit, addr, sizeof(addr));
    switch ((ring_status_t)f->status) {
    case RING_ERR_REMOTE:
        snprintf(comm->error_msg, sizeof(comm->error_msg),
                 "%s: %s by rank %d (%s) (seen by rank %u, reported through rank %d)", phase,
                 ring_tp_cause(RING_ERR_REMOTE, f->sys_errno), culprit, addr, f->origin_rank,
                 from_rank);
        break;
    case RING_ERR_TIMED_OUT:
        snprintf(comm->error_msg, sizeof(comm->error_msg),
                 "%s: rank %u timed out waiting for rank %d (%s) (reported through rank %d)",
                 phase, f->origin_rank, culprit, addr, from_rank);
        break;
    case RING_ERR_MISMATCH:
        snprintf(comm->error_msg, sizeof(comm->error_msg),
                 "%s: allreduce arguments differ between ranks %u and %d: rank %u called round "
                 "%llu with count %llu, dtype %u, op %u, tensor id %u (reported through rank %d)",
                 phase, f->origin_rank, culprit, f->origin_rank, (unsigned long long)f->round,
                 (unsigned long long)f->count, f->dtype, f->op, f->tensor_id, from_rank);
        break;
    default:
        snprintf(comm->error_msg, sizeof(comm->error_msg),
                 "%s: rank %u failed (%s) and stopped the ring (reported through rank %d)", phase,
                 f->origin_rank, ring_status_str((ring_status_t)f->status), from_rank);
        break;
    }
    comm->error = (ring_status_t)f->status == RING_ERR_MISMATCH ? RING_ERR_MISMATCH
                                                                : RING_ERR_REMOTE;
    ring_log(RING_LOG_ERROR, "%s", comm->error_msg);
    ring_comm_send_notice(comm, RING_FRAME_ABORT, (ring_status_t)f->status, culprit, f->sys_errno,
                          f->detail, from_rank);
    return ring_error_copy(comm->error, comm->error_msg);
}
