/*
 * notice.c - the receive side of notice frames (RING_SCHED_NOTICE).
 *
 * While rd.c runs an allreduce over its pairs, the ring still carries the
 * call's header: every peer sends its right neighbour an empty notice frame,
 * so that a neighbour that called something else sees the difference, as if
 * both ran the ring. The left neighbour's notice is read here, whenever it
 * comes: the call does not wait for it (the left neighbour may still be in
 * the call before, and waiting cost a 4 KiB allreduce at n=4 a quarter of its
 * time). A peer that runs another call on the ring sends a data frame
 * instead, and that frame lands in the notice's receive (mismatch, at once);
 * a notice that lands in a ring call's receive is the same mismatch seen from
 * the other side (allreduce.c).
 *
 * Order: a notice receive is posted before the call finishes (the engine
 * waits for room), so before any later call posts its receives on the same
 * connection, and the connection delivers in order.
 */
#include "ring_build.h"

#include <string.h>

#include "comm_int.h"
#include "transport.h"

int ring_notice_post(ring_comm_t *comm, const ring_request_t *req)
{
    struct ring_notice_in *n;
    ring_tp_ep_t *ep = comm->channels[0].left[0];

    if (comm->notice_posted - comm->notice_done >= RING_NOTICE_WINDOW)
        return 0;
    n = &comm->notice_in[comm->notice_posted % RING_NOTICE_WINDOW];
    n->call = *req;
    memset(&n->slot.req, 0, sizeof(n->slot.req));
    n->slot.req.iov[0].iov_base = n->slot.hdr;
    n->slot.req.iov[0].iov_len = comm->hdr_bytes;
    n->slot.req.iovcnt = 1;
    n->slot.posted = 1;
    comm->notice_posted++;
    /* a failure shows when it is retired */
    (void)comm->tp_ops->post_recv(ep, &n->slot.req);
    return 1;
}

ring_status_t ring_notice_progress(ring_comm_t *comm, int *moved)
{
    ring_channel_t *ch = &comm->channels[0];
    /* the one frame of the notice schedule: step 0, chunk 0, no payload */
    const ring_sched_frame_t sf = {.step = 0, .chunk = 0};

    while (comm->notice_done != comm->notice_posted) {
        struct ring_notice_in *n = &comm->notice_in[comm->notice_done % RING_NOTICE_WINDOW];
        ring_frame_t f;

        if (!n->slot.req.done)
            break;
        n->slot.posted = 0;
        comm->notice_done++;
        (*moved)++;
        /* a frame larger than the receive still delivers its header: read it */
        if (n->slot.req.status != RING_OK && n->slot.req.status != RING_ERR_MISMATCH)
            return ring_comm_fail_link(comm, &n->call, 0, comm->left_rank, ch->left[0],
                                       &n->slot.req);
        RING_CHECK(ring_frame_check(comm, ch, &n->call, &sf, &n->slot, ch->left[0], 1, &f));
    }
    return RING_OK;
}
