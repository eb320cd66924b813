/*
 * ringd/status.h - status codes returned by every libringd call.
 *
 * Every function of the public API returns a ring_status_t. RING_OK is zero;
 * errors are positive. When a call fails, ring_last_error() returns a
 * human-readable message for it with its context (peer rank, address, phase
 * and cause), valid until the next failing call on the same thread.
 */
#ifndef RINGD_STATUS_H
#define RINGD_STATUS_H

/* What libringd exports: the declarations marked RING_API, nothing else (the
 * library is built with -fvisibility=hidden; tests/scripts/exports.test checks it). */
#if defined(__GNUC__) && !defined(RING_API)
#define RING_API __attribute__((visibility("default")))
#elif !defined(RING_API)
#define RING_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ring_status {
    RING_OK = 0,             /* success */
    RING_IN_PROGRESS,        /* started, not finished yet: call again / test later */
    RING_ERR_NO_MEMORY,      /* an allocation failed */
    RING_ERR_INVALID,        /* bad argument, flag, environment value or peer list */
    RING_ERR_IO,             /* a system call failed; the message carries its errno text */
    RING_ERR_NO_RESOURCE,    /* back-pressure: try again after progress */
    RING_ERR_TIMED_OUT,      /* a deadline passed (connect, handshake or data wait) */
    RING_ERR_REMOTE,         /* a peer closed, reset, died or reported a failure */
    RING_ERR_MISMATCH,       /* peers disagree on settings or call arguments (size, dtype, op) */
    RING_ERR_PROTOCOL,       /* bad magic, version or frame from the wire */
    RING_ERR_UNSUPPORTED,    /* the operation or feature is not available in this build */
    RING_ERR_CANCELED,       /* aborted by the caller or by shutdown */
    RING_ERR_INTERNAL,       /* a bug in libringd: please report it with the message */
    RING_ERR_NONFINITE,      /* the allreduce finished, but some peer's input held inf or NaN
                              * (or a sum overflowed): the result is not to be trusted. Every
                              * peer gets it for the same call; the communicator stays usable. */
    RING_STATUS_COUNT
} ring_status_t;

/* Short constant name of a status, e.g. "timed out". Never NULL. */
RING_API
const char *ring_status_str(ring_status_t status);

/*
 * Message of the last error reported to this thread by any libringd call,
 * with its context, e.g. "round 118, reduce-scatter step 3: connection reset
 * by rank 2 (127.0.0.1:29502)". Empty string when there was none. The
 * pointer stays valid until the thread's next failing libringd call.
 */
RING_API
const char *ring_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* RINGD_STATUS_H */
