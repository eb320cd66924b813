/* tp_queue.c - the request queues of the byte-stream transports (tp_queue.h). */
#include "ring_build.h"

#include "tp_queue.h"

size_t ring_tp_req_capacity(const ring_tp_req_t *req)
{
    size_t total = 0;

    for (int i = 0; i < req->iovcnt; i++)
        total += req->iov[i].iov_len;
    return total;
}

void ring_tp_req_reset(ring_tp_req_t *req)
{
    req->done = 0;
    req->status = RING_OK;
    req->sys_errno = 0;
    req->offset = 0;
    req->bytes = 0;
    req->next = NULL;
}

void ring_tp_req_complete(ring_tp_req_t *req, ring_status_t status, int sys_errno)
{
    req->status = status;
    req->sys_errno = sys_errno;
    req->next = NULL;
    req->done = 1;
}

void ring_tp_queue_push(ring_tp_req_t *req, ring_tp_req_t **head, ring_tp_req_t **tail)
{
    if (req->urgent && *head != NULL) {
        /* before every queued message, except one already partly written */
        ring_tp_req_t *after = (*head)->offset > 0 ? *head : NULL;

        req->next = after != NULL ? after->next : *head;
        if (after != NULL)
            after->next = req;
        else
            *head = req;
        if (req->next == NULL)
            *tail = req;
        return;
    }
    if (*tail != NULL)
        (*tail)->next = req;
    else
        *head = req;
    *tail = req;
}

void ring_tp_queue_fail(ring_tp_req_t **head, ring_tp_req_t **tail, ring_status_t status,
                        int sys_errno)
{
    while (*head != NULL) {
        ring_tp_req_t *req = *head;
        *head = req->next;
        ring_tp_req_complete(req, status, sys_errno);
    }
    *tail = NULL;
}

int ring_tp_rx_complete(ring_tp_req_t **head, ring_tp_req_t **tail, size_t msg_len)
{
    ring_tp_req_t *req = *head;

    *head = req->next;
    if (*head == NULL)
        *tail = NULL;
    req->bytes = msg_len;
    if (msg_len > ring_tp_req_capacity(req)) {
        /* the stream is out of step with what the caller expects: no more receives,
         * but sends still work, so the caller can tell the peer why it stops */
        ring_tp_req_complete(req, RING_ERR_MISMATCH, 0);
        ring_tp_queue_fail(head, tail, RING_ERR_MISMATCH, 0);
        return 1;
    }
    ring_tp_req_complete(req, RING_OK, 0);
    return 0;
}
