/*
 * tp_cause.c - a failed request in words ("connection reset", "connection
 * closed"...), or its endpoint's own words when the transport has them. Apart
 * from the registry so the transports can use it without depending on it.
 */
#include "ring_build.h"

#include <errno.h>
#include <string.h>

#include "transport.h"

const char *ring_tp_ep_cause(const ring_tp_ops_t *ops, const ring_tp_ep_t *ep,
                             const ring_tp_req_t *req)
{
    const char *text = ep != NULL ? ops->ep_error(ep) : "";

    return text[0] != '\0' ? text : ring_tp_cause(req->status, req->sys_errno);
}

const char *ring_tp_cause(ring_status_t status, int sys_errno)
{
    if (status == RING_ERR_CANCELED)
        return "canceled";
    if (status == RING_ERR_MISMATCH)
        return "message larger than expected";
    switch (sys_errno) {
    case 0: return "connection closed";
    case ECONNRESET: return "connection reset";
    case ECONNREFUSED: return "connection refused";
    case EPIPE: return "connection broken";
    case ETIMEDOUT: return "connection timed out";
    case EHOSTUNREACH: return "host unreachable";
    case ENETUNREACH: return "network unreachable";
    default: return strerror(sys_errno);
    }
}
