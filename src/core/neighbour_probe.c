/*
 * neighbour_probe.c - after a failure, whether the neighbours' ring
 * connections still stand. A failure names one lost peer; when two die at
 * once, the neighbour of the second may have heard of the first only. Its
 * own connection to the second was closed by that peer's kernel, which
 * tells it at once what the agreement would otherwise learn only by waiting
 * a timeout for an answer.
 */
#include "ring_build.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "neighbour_probe.h"

struct ring_probe {
    ring_tp_req_t req[2];   /* on the left and the right connection */
    size_t len;
    unsigned char buf[];    /* two receive buffers of len bytes */
};

/* A receive that ended as a close or a reset: the peer is gone. Data, or a
 * message too large for the buffer, means it is there. */
static int probe_lost(const ring_tp_req_t *req)
{
    return req->done && (req->status == RING_ERR_REMOTE || req->status == RING_ERR_IO);
}

ring_probe_t *ring_comm_probe_neighbours(ring_comm_t *comm, double seconds, int *left_lost_p,
                                         int *right_lost_p)
{
    ring_tp_ep_t *eps[2] = {comm->channels[0].left[0], comm->channels[0].right[0]};
    size_t len = comm->auth.hdr_bytes + comm->cfg.chunk_bytes;
    ring_probe_t *p = calloc(1, sizeof(*p) + 2 * len);
    double until = ring_now() + seconds;

    *left_lost_p = *right_lost_p = 0;
    if (p == NULL || comm->tp == NULL)
        return p;
    p->len = len;
    while (ring_now() < until) {
        int waiting = 0;
        for (int i = 0; i < 2; i++) {
            ring_tp_req_t *req = &p->req[i];
            if (eps[i] == NULL || (req->done && req->status != RING_OK))
                continue; /* no connection, or its answer is in */
            if (req->iovcnt == 0 || req->done) { /* first, or data that was on its way */
                ring_status_t st;
                memset(req, 0, sizeof(*req));
                req->iov[0].iov_base = p->buf + (size_t)i * len;
                req->iov[0].iov_len = len;
                req->iovcnt = 1;
                if ((st = comm->tp_ops->post_recv(eps[i], req)) != RING_OK && !req->done) {
                    req->status = st;
                    req->done = 1;
                }
            }
            waiting |= !req->done;
        }
        if (!waiting)
            break;
        if (comm->tp_ops->progress(comm->tp) == 0)
            comm->tp_ops->wait(comm->tp, 2);
    }
    *left_lost_p = eps[0] != NULL && probe_lost(&p->req[0]);
    *right_lost_p = eps[1] != NULL && probe_lost(&p->req[1]);
    return p;
}

void ring_probe_free(ring_probe_t *probe)
{
    free(probe);
}
