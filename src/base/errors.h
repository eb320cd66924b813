/*
* errors.h - setting the thread's last error message, and the check macros.
 *
 * Log once, where the error is first classified: the function that sees the
 * cause calls ring_error_set() with the peer, address, phase and cause;
 * callers only propagate the status with RING_CHECK.
 */
#ifndef RING_ERRORS_H
#define RING_ERRORS_H

#include <ringd/status.h>

#if defined(__GNUC__)
#define RING_PRINTF(_f, _a) __attribute__((format(printf, _f, _a)))
#else
#define RING_PRINTF(_f, _a)
#endif

/* Record msg as this thread's last error and return status (for "return ring_error_set(...)"). */
ring_status_t ring_error_set(ring_status_t status, const char *fmt, ...) RING_PRINTF(2, 3);

/* Copy an already formatted message (e.g. a communicator's sticky error) into the thread's slot. */
ring_status_t ring_error_copy(ring_status_t status, const char *msg);

/* Propagate a failing status. */
#define RING_CHECK(_call)                                   \
    do {                                                    \
        ring_status_t _st = (_call);                        \
        if (_st != RING_OK)                                 \
            return _st;                                     \
    } while (0)

/* Propagate a failing status to a cleanup label. */
#define RING_CHECK_GOTO(_call, _status, _label)             \
    do {                                                    \
        (_status) = (_call);                                \
        if ((_status) != RING_OK)                           \
            goto _label;                                    \
    } while (0)

#endif /* RING_ERRORS_H */
