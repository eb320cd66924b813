/*
 * verbs_ep.c - a verbs endpoint's failing and freeing, which both the data
 * path (verbs.c) and the bootstrap (verbs_boot.c) need: the first error is
 * sticky and completes every pending request with it.
 */
#include "ring_build.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "tcp.h"
#include "verbs_int.h"

void vb_req_finish(ring_tp_req_t *req, ring_status_t status, int sys_errno)
{
    req->status = status;
    req->sys_errno = sys_errno;
    req->done = 1;
}

void vb_fail_list(ring_tp_req_t **head, ring_tp_req_t **tail, ring_status_t st, int err)
{
    for (ring_tp_req_t *r = *head, *next; r != NULL; r = next) {
        next = r->next;
        vb_req_finish(r, st, err);
    }
    *head = *tail = NULL;
}

/* The first error on an endpoint is sticky: every pending request gets it. */
void vb_ep_fail(ring_tp_ep_t *ep, ring_status_t st, int sys_errno, const char *fmt, ...)
{
    if (ep->state == VB_EP_FAILED)
        return;
    ep->state = VB_EP_FAILED;
    ep->error = st;
    ep->error_errno = sys_errno;
    if (fmt != NULL) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(ep->error_text, sizeof(ep->error_text), fmt, ap);
        va_end(ap);
        ring_log(RING_LOG_DEBUG, "verbs: %s", ep->error_text);
    }
    vb_fail_list(&ep->sq_head, &ep->sq_tail, st, sys_errno);
    vb_fail_list(&ep->fl_head, &ep->fl_tail, st, sys_errno);
    vb_fail_list(&ep->rq_head, &ep->rq_tail, st, sys_errno);
}

static void vb_forget_ep(vb_tp_t *tp, ring_tp_ep_t *ep)
{
    for (int i = 0; i < tp->neps; i++)
        if (tp->eps[i] == ep) {
            tp->eps[i] = tp->eps[--tp->neps];
            return;
        }
}

void vb_ep_free(ring_tp_ep_t *ep)
{
    vb_qp_destroy(ep);
    if (ep->boot != NULL)
        ep->tp->boot_ops->ep_close(ep->boot);
    free(ep->guard); /* after the close: the guard's requests live in it */
    vb_forget_ep(ep->tp, ep);
    free(ep);
}
