/* parse.c - strict parsers for user input: reject trailing junk, overflow, negatives. */
#include "ring_build.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

int ring_parse_long(const char *text, long *value_p)
{
    char *end;
    long v;

    if (text == NULL || *text == '\0')
        return -1;
    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *value_p = v;
    return 0;
}

int ring_parse_size(const char *text, size_t *value_p)
{
    char *end;
    double v, mult = 1.0;

    if (text == NULL || *text == '\0' || *text == '-')
        return -1;
    errno = 0;
    v = strtod(text, &end);
    if (errno != 0 || end == text)
        return -1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024.0; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024.0 * 1024.0; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    v *= mult;
    if (*end != '\0' || !(v >= 0) || v > (double)(SIZE_MAX / 2) || v != floor(v))
        return -1;
    *value_p = (size_t)v;
    return 0;
}

int ring_parse_duration(const char *text, double *seconds_p)
{
    char *end;
    double v;

    if (text == NULL || *text == '\0' || *text == '-')
        return -1;
    errno = 0;
    v = strtod(text, &end);
    if (errno != 0 || end == text || !(v >= 0) || isinf(v))
        return -1;
    if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
        ;
    else if (strcmp(end, "ms") == 0)
        v /= 1000.0;
    else if (strcmp(end, "us") == 0)
        v /= 1e6;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        v *= 60.0;
    else if (strcmp(end, "h") == 0)
        v *= 3600.0;
    else
        return -1;
    *seconds_p = v;
    return 0;
}

int ring_parse_port_range(const char *text, int *lo_p, int *hi_p)
{
    char buf[32], *dash;
    long lo, hi;

    if (text == NULL || strlen(text) >= sizeof(buf))
        return -1;
    snprintf(buf, sizeof(buf), "%s", text);
    dash = strchr(buf, '-');
    if (dash != NULL)
        *dash = '\0';
    if (ring_parse_long(buf, &lo) != 0)
        return -1;
    hi = lo;
    if (dash != NULL && ring_parse_long(dash + 1, &hi) != 0)
        return -1;
    if (lo < 1 || hi > 65535 || hi < lo)
        return -1;
    *lo_p = (int)lo;
    *hi_p = (int)hi;
    return 0;
}

void ring_format_size(size_t bytes, char *buf, size_t len)
{
    if (bytes != 0 && bytes % (1024UL * 1024 * 1024) == 0)
        snprintf(buf, len, "%zuG", bytes >> 30);
    else if (bytes != 0 && bytes % (1024UL * 1024) == 0)
        snprintf(buf, len, "%zuM", bytes >> 20);
    else if (bytes != 0 && bytes % 1024 == 0)
        snprintf(buf, len, "%zuK", bytes >> 10);
    else
        snprintf(buf, len, "%zu", bytes);
}

#define RATE_MAX 1e18 /* bytes/s; far beyond any link, and exact as a uint64_t */

static const struct rate_unit {
    const char *suffix;
    double mult; /* bytes/s per unit */
} rate_units[] = {
    {"", 1.0},          {"bps", 1.0},        {"bit", 1.0 / 8},
    {"kbps", 1e3},      {"mbps", 1e6},       {"gbps", 1e9},       {"tbps", 1e12},
    {"kbit", 1e3 / 8},  {"mbit", 1e6 / 8},   {"gbit", 1e9 / 8},   {"tbit", 1e12 / 8},
    {"kibps", 1024.0},  {"mibps", 1048576.0}, {"gibps", 1073741824.0},
    {"tibps", 1099511627776.0},
    {"kibit", 1024.0 / 8}, {"mibit", 1048576.0 / 8}, {"gibit", 1073741824.0 / 8},
    {"tibit", 1099511627776.0 / 8},
};

int ring_parse_rate(const char *text, double *bytes_per_s_p)
{
    const char *p = text;
    char *end;
    size_t digits = 0, dots = 0;
    double v;

    if (text == NULL)
        return -1;
    /* digits with at most one '.', at least one digit: strtod alone would take
     * " 1", "+1", "1e3", "0x10", "inf" and "nan" */
    for (; (*p >= '0' && *p <= '9') || *p == '.'; p++) {
        if (*p == '.')
            dots++;
        else
            digits++;
    }
    if (digits == 0 || dots > 1)
        return -1;
    errno = 0;
    v = strtod(text, &end);
    if (errno != 0 || end != p || !(v >= 0) || isinf(v))
        return -1;
    for (size_t i = 0; i < sizeof(rate_units) / sizeof(rate_units[0]); i++) {
        if (strcasecmp(p, rate_units[i].suffix) != 0)
            continue;
        v *= rate_units[i].mult;
        if (!(v <= RATE_MAX))
            return -1;
        *bytes_per_s_p = v;
        return 0;
    }
    return -1;
}

void ring_format_rate(double bytes_per_s, char *buf, size_t len)
{
    /* the fewest digits wins; on a tie, the earlier form (bytes before bits) */
    static const struct rate_unit forms[] = {
        {"gbps", 1e9},     {"mbps", 1e6},     {"kbps", 1e3},     {"gbit", 1e9 / 8},
        {"mbit", 1e6 / 8}, {"kbit", 1e3 / 8}, {"", 1.0},         {"bit", 1.0 / 8},
    };
    char best[64] = "", cand[64];
    size_t best_digits = 0;

    if (!(bytes_per_s > 0)) {
        snprintf(buf, len, "0");
        return;
    }
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        double n = bytes_per_s / forms[i].mult;
        size_t digits;

        /* whole numbers only, and only those that read back as the same double */
        if (n != floor(n) || n > RATE_MAX * 8 || n * forms[i].mult != bytes_per_s)
            continue;
        digits = (size_t)snprintf(cand, sizeof(cand), "%.0f", n);
        if (best[0] == '\0' || digits < best_digits) {
            snprintf(best, sizeof(best), "%s%s", cand, forms[i].suffix);
            best_digits = digits;
        }
    }
    if (best[0] == '\0') /* a fraction of a bit per second: exact in bytes/s */
        snprintf(best, sizeof(best), "%.17g", bytes_per_s);
    snprintf(buf, len, "%s", best);
}
