/*
 * log.h - opt-in logging to stderr. The library prints nothing unless
 * RING_LOG_LEVEL (error|warn|info|debug|trace) or RING_DEBUG=1 asks for it,
 * apart from one security notice (connect.c: listening beyond loopback
 * without a secret).
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

#define ring_log(_level, ...)                       \
    do {                                            \
        if ((_level) <= ring_log_level())           \
            ring_log_write((_level), __VA_ARGS__);  \
    } while (0)

#endif /* RING_LOG_H */
