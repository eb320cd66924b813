/*
 * tap.h - a small TAP producer for tests run by automake's tap-driver.sh.
 * plan(n) first (or skip_all), then ok()/is_int()/is_str()/is_mem(), and
 * done_testing() returns the exit status. Header-only.
 */
#ifndef RING_TAP_H
#define RING_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count, tap_failed, tap_planned;

#define TAP_PRINTF(_f, _a) __attribute__((format(printf, _f, _a)))

static inline void plan(int n)
{
    tap_planned = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

static inline void skip_all(const char *why)
{
    printf("1..0 # SKIP %s\n", why);
    fflush(stdout);
    exit(0);
}

static inline void bail(const char *fmt, ...) TAP_PRINTF(1, 2) __attribute__((noreturn));
static inline void bail(const char *fmt, ...)
{
    va_list ap;

    printf("Bail out! ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(255);
}

static inline void diag(const char *fmt, ...) TAP_PRINTF(1, 2);
static inline void diag(const char *fmt, ...)
{
    va_list ap;

    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static inline int tap_vok(int cond, const char *fmt, va_list ap)
{
    tap_count++;
    if (!cond)
        tap_failed++;
    printf("%sok %d - ", cond ? "" : "not ", tap_count);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    return cond;
}

static inline int ok(int cond, const char *fmt, ...) TAP_PRINTF(2, 3);
static inline int ok(int cond, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = tap_vok(cond, fmt, ap);
    va_end(ap);
    return r;
}

static inline void skip(const char *why)
{
    tap_count++;
    printf("ok %d # SKIP %s\n", tap_count, why);
    fflush(stdout);
}

static inline int is_int(long long got, long long want, const char *fmt, ...) TAP_PRINTF(3, 4);
static inline int is_int(long long got, long long want, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = tap_vok(got == want, fmt, ap);
    va_end(ap);
    if (!r)
        diag("    got: %lld\n#   want: %lld", got, want);
    return r;
}

static inline int is_str(const char *got, const char *want, const char *fmt, ...)
    TAP_PRINTF(3, 4);
static inline int is_str(const char *got, const char *want, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = tap_vok(got != NULL && want != NULL && strcmp(got, want) == 0, fmt, ap);
    va_end(ap);
    if (!r)
        diag("    got: '%s'\n#   want: '%s'", got ? got : "(null)", want ? want : "(null)");
    return r;
}

/* ok when haystack contains needle */
static inline int like(const char *haystack, const char *needle, const char *fmt, ...)
    TAP_PRINTF(3, 4);
static inline int like(const char *haystack, const char *needle, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = tap_vok(haystack != NULL && strstr(haystack, needle) != NULL, fmt, ap);
    va_end(ap);
    if (!r)
        diag("    '%s'\n#   does not contain '%s'", haystack ? haystack : "(null)", needle);
    return r;
}

static inline int done_testing(void)
{
    if (tap_planned == 0)
        printf("1..%d\n", tap_count);
    else if (tap_planned != tap_count)
        diag("planned %d tests but ran %d", tap_planned, tap_count);
    fflush(stdout);
    return tap_failed != 0 || (tap_planned != 0 && tap_planned != tap_count);
}

#endif /* RING_TAP_H */
