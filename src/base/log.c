/* log.c - opt-in stderr logging with a rank/host/pid prefix. */
#include "ring_build.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static int log_level = -1; /* -1: not read from the environment yet */
static int log_rank = -1;
static int log_level_asked; /* 1: RING_LOG_LEVEL or the program chose the level */
/* security notices: a budget of lines per window, and how many were held back */
static pthread_mutex_t notice_lock = PTHREAD_MUTEX_INITIALIZER;
static double notice_window_start;
static int notice_lines;
static unsigned long notice_held;

static const char *const level_names[] = {"none", "error", "warn", "info", "debug", "trace"};

int ring_log_level_parse(const char *text)
{
    if (text == NULL || *text == '\0')
        return -1;
    if (text[0] >= '0' && text[0] <= '5' && text[1] == '\0')
        return text[0] - '0';
    for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
        if (strcasecmp(text, level_names[i]) == 0)
            return i;
    if (strcasecmp(text, "warning") == 0)
        return RING_LOG_WARN;
    return -1;
}

ring_log_level_t ring_log_level(void)
{
    if (log_level < 0) {
        int level = ring_log_level_parse(getenv("RING_LOG_LEVEL"));
        const char *debug = getenv("RING_DEBUG");

        log_level_asked = level >= 0;
        if (level < 0)
            level = (debug != NULL && *debug != '\0' && strcmp(debug, "0") != 0) ? RING_LOG_DEBUG
                                                                                  : RING_LOG_NONE;
        log_level = level;
    }
    return (ring_log_level_t)log_level;
}

void ring_log_set_level(ring_log_level_t level)
{
    log_level = (int)level;
    log_level_asked = 1;
}

void ring_log_set_rank(int rank)
{
    log_rank = rank;
}

void ring_log_write(ring_log_level_t level, const char *fmt, ...)
{
    char host[64] = "?";
    char line[2048];
    int len;
    va_list ap;

    gethostname(host, sizeof(host) - 1);
    if (log_rank >= 0)
        len = snprintf(line, sizeof(line), "ringd[rank %d] %s:%d %s: ", log_rank, host,
                       (int)getpid(), level_names[level]);
    else
        len = snprintf(line, sizeof(line), "ringd %s:%d %s: ", host, (int)getpid(),
                       level_names[level]);
    va_start(ap, fmt);
    vsnprintf(line + len, sizeof(line) - (size_t)len, fmt, ap);
    va_end(ap);
    /* one write per line, so lines of concurrent processes do not interleave */
    fprintf(stderr, "%s\n", line);
}

void ring_log_security(const char *fmt, ...)
{
    struct timespec ts;
    double now;
    unsigned long held = 0;
    char text[1536];
    va_list ap;
    ring_log_level_t level = ring_log_level();

    if (level < RING_LOG_WARN && log_level_asked)
        return; /* RING_LOG_LEVEL=none or error: asked for silence */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    pthread_mutex_lock(&notice_lock);
    if (notice_window_start == 0 || now - notice_window_start >= RING_LOG_SECURITY_WINDOW_S) {
        held = notice_held;
        notice_window_start = now;
        notice_lines = 0;
        notice_held = 0;
    }
    if (notice_lines >= RING_LOG_SECURITY_LINES) {
        notice_held++;
        pthread_mutex_unlock(&notice_lock);
        return;
    }
    notice_lines++;
    pthread_mutex_unlock(&notice_lock);
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (held > 0)
        ring_log_write(RING_LOG_WARN, "%s (and %lu more such notices held back in the last %g "
                       "s)", text, held, RING_LOG_SECURITY_WINDOW_S);
    else
        ring_log_write(RING_LOG_WARN, "%s", text);
}
