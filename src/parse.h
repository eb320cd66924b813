/* parse.h - strict parsers for numbers, sizes, durations and ports typed by users. */
#ifndef RING_PARSE_H
#define RING_PARSE_H

#include <stddef.h>

/* Each returns 0 on success, -1 when the whole text is not of the expected form. */
int ring_parse_long(const char *text, long *value_p);
int ring_parse_size(const char *text, size_t *value_p);       /* 4096, 64K, 1M, 1.5G (binary) */
int ring_parse_duration(const char *text, double *seconds_p); /* 30, 30s, 500ms, 2m, 1h */
int ring_parse_port_range(const char *text, int *lo_p, int *hi_p); /* 29500 or 29500-29599 */

/* "1M", "64K", "1536" - the shortest exact form. */
void ring_format_size(size_t bytes, char *buf, size_t len);

#endif /* RING_PARSE_H */
