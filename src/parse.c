/* parse.c - strict parsers for user input: reject trailing junk, overflow, negatives. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
