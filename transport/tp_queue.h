/*
 * tp_queue.h - the request queues every byte-stream transport keeps (tcp,
 * shm): a caller's request reset for posting, queued (an urgent send before
 * every queued one not yet begun), completed, or failed with its queue; and
 * the end of a received message, where one larger than its receive breaks
 * the stream (transport.h's contract).
 */
#ifndef RING_TP_QUEUE_H
#define RING_TP_QUEUE_H

#include <stddef.h>

#include "transport.h"

/* Bytes the request's iovs hold. */
size_t ring_tp_req_capacity(const ring_tp_req_t *req);
/* Clear what the transport sets, before the request is queued. */
void ring_tp_req_reset(ring_tp_req_t *req);
void ring_tp_req_complete(ring_tp_req_t *req, ring_status_t status, int sys_errno);
/* Append req, or put it first (after a send already begun) when it is urgent. */
void ring_tp_queue_push(ring_tp_req_t *req, ring_tp_req_t **head, ring_tp_req_t **tail);
/* Complete every queued request with status and errno. */
void ring_tp_queue_fail(ring_tp_req_t **head, ring_tp_req_t **tail, ring_status_t status,
                        int sys_errno);
/*
 * The head receive's message of msg_len bytes is in (up to its capacity):
 * complete it. A larger message fails it with RING_ERR_MISMATCH (bytes = its
 * size) and every later receive: returns 1, the stream is out of step and no
 * receive may follow; else 0.
 */
int ring_tp_rx_complete(ring_tp_req_t **head, ring_tp_req_t **tail, size_t msg_len);

#endif /* RING_TP_QUEUE_H */
