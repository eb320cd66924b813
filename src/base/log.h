/*
 * log.h - opt-in logging to stderr. The library prints nothing unless
 * RING_LOG_LEVEL (error|warn|info|debug|trace) or RING_DEBUG=1 asks for it,
 * apart from security notices: listening beyond loopback without a
 * secret (connect.c), and each connection refused for failing to prove the
 * job's secret (ring_log_security below).
 * Lines start with "ringd[rank R] host:pid" so logs of many peers merge.
 */
#ifndef RING_LOG_H
#define RING_LOG_H

#include "errors.h"

typedef enum ring_log_level {
    RING_LOG_NONE = 0,
    RING_LOG_ERROR,
    RING_LOG_WARN,
    RING_LOG_INFO,
    RING_LOG_DEBUG,
    RING_LOG_TRACE
} ring_log_level_t;

/* Current level; read once from the environment on first use. */
ring_log_level_t ring_log_level(void);

/* Parse "error|warn|info|debug|trace|none" (or a digit); returns -1 when unknown. */
int ring_log_level_parse(const char *text);

void ring_log_set_level(ring_log_level_t level);
void ring_log_set_rank(int rank);

void ring_log_write(ring_log_level_t level, const char *fmt, ...) RING_PRINTF(2, 3);

/*
 * A security notice (a connection refused for failing authentication): a
 * warn line, written at the default level too, unless RING_LOG_LEVEL (or
 * the program) asked for error or none. At most RING_LOG_SECURITY_LINES per
 * RING_LOG_SECURITY_WINDOW_S seconds, so a flood of strangers cannot fill a
 * disk; the next line says how many were held back. Thread-safe.
 */
#define RING_LOG_SECURITY_LINES 10
#define RING_LOG_SECURITY_WINDOW_S 10.0
void ring_log_security(const char *fmt, ...) RING_PRINTF(1, 2);

#define ring_log(_level, ...)                       \
    do {                                            \
        if ((_level) <= ring_log_level())           \
            ring_log_write((_level), __VA_ARGS__);  \
    } while (0)

#endif /* RING_LOG_H */
