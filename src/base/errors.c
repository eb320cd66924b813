/* errors.c - status names and the per-thread last error message. */
#include "ring_build.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "log.h"

static const char *const status_names[RING_STATUS_COUNT] = {
    [RING_OK] = "success",
    [RING_IN_PROGRESS] = "in progress",
    [RING_ERR_NO_MEMORY] = "out of memory",
    [RING_ERR_INVALID] = "invalid argument",
    [RING_ERR_IO] = "input/output error",
    [RING_ERR_NO_RESOURCE] = "no resource, try again",
    [RING_ERR_TIMED_OUT] = "timed out",
    [RING_ERR_REMOTE] = "remote peer failure",
    [RING_ERR_MISMATCH] = "peers disagree",
    [RING_ERR_PROTOCOL] = "protocol error",
    [RING_ERR_UNSUPPORTED] = "unsupported",
    [RING_ERR_CANCELED] = "canceled",
    [RING_ERR_INTERNAL] = "internal error",
    [RING_ERR_NONFINITE] = "inputs not finite",
};

/* One message per thread: a failing call never clobbers another thread's message. */
static _Thread_local char last_error[1024];

const char *ring_status_str(ring_status_t status)
{
    if ((unsigned)status >= RING_STATUS_COUNT)
        return "unknown status";
    return status_names[status];
}

const char *ring_last_error(void)
{
    return last_error;
}

ring_status_t ring_error_set(ring_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    ring_log(RING_LOG_DEBUG, "error (%s): %s", ring_status_str(status), last_error);
    return status;
}

ring_status_t ring_error_copy(ring_status_t status, const char *msg)
{
    if (msg != last_error)
        snprintf(last_error, sizeof(last_error), "%s", msg);
    return status;
}
