/* parse.h - strict parsers for numbers, sizes, durations and ports typed by users. */
#ifndef RING_PARSE_H
#define RING_PARSE_H

#include <stddef.h>

/* Each returns 0 on success, -1 when the whole text is not of the expected form. */
int ring_parse_long(const char *text, long *value_p);
int ring_parse_size(const char *text, size_t *value_p);       /* 4096, 64K, 1M, 1.5G (binary) */
int ring_parse_duration(const char *text, double *seconds_p); /* 30, 30s, 500ms, 2m, 1h */
int ring_parse_port_range(const char *text, int *lo_p, int *hi_p); /* 29500 or 29500-29599 */
/*
 * A rate in bytes per second, tc's way: "1gbit", "500mbit", "100kbit",
 * "1000bit" are decimal bits/s; "125mbps", "1gbps", "10kbps" are decimal
 * BYTES/s (tc's "bps"); "kibit"/"kibps" (and mi, gi, ti) are binary; "t"
 * (tera) works too; suffixes ignore case. A plain number is bytes/s (unlike
 * tc, where it is bits/s) and 0 (with any suffix) means unlimited. Digits
 * with at most one decimal point, then the suffix: no sign, exponent,
 * spaces, hex, inf or nan; more than 1e18 bytes/s is refused as overflow.
 */
int ring_parse_rate(const char *text, double *bytes_per_s_p);

/* The whole-number form with the fewest digits that ring_parse_rate reads back
 * exactly: "1gbit", "20mbps", "100kbit", "0" (bytes/s forms win ties; a
 * fraction of a bit per second falls back to plain bytes/s, "%.17g"). */
void ring_format_rate(double bytes_per_s, char *buf, size_t len);

/* "1M", "64K", "1536" - the shortest exact form. */
void ring_format_size(size_t bytes, char *buf, size_t len);

#endif /* RING_PARSE_H */
