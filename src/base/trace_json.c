/*
 * trace_json.c - the trace-event file of trace_json.h. Every write ends with
 * the closing "]" and the next one overwrites it (pwrite at the same
 * offset), so the file is valid JSON after each write, even when the
 * process is killed later; only a kill in the middle of a write leaves a
 * torn last line. A file that cannot seek (a pipe) gets its "]" at the close
 * only: the JSON Array Format lets it be missing, and chrome://tracing
 * accepts that.
 */
#include "ring_build.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "trace_json.h"

static int write_all(ring_trace_t *t, const char *p, size_t n, off_t at)
{
    while (n > 0) {
        ssize_t w = t->seekable ? pwrite(t->fd, p, n, at) : write(t->fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
        at += w;
    }
    return 0;
}

int ring_trace_open(ring_trace_t *t, const char *path, int pid)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->path, sizeof(t->path), "%s", path);
    t->pid = pid;
    t->first = 1;
    if ((t->buf = malloc(RING_TRACE_BUF_BYTES + 8)) == NULL)
        return ENOMEM;
    t->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (t->fd < 0) {
        int err = errno;

        free(t->buf);
        t->buf = NULL;
        return err;
    }
    t->seekable = lseek(t->fd, 0, SEEK_CUR) == 0;
    memcpy(t->buf, "[\n", 2);
    t->len = 2;
    return 0;
}

int ring_trace_flush(ring_trace_t *t)
{
    static const char close_text[] = "\n]\n";

    if (t->broken)
        return -1;
    if (t->len == 0)
        return 0;
    memcpy(t->buf + t->len, close_text, sizeof(close_text) - 1);
    if (write_all(t, t->buf, t->len + (t->seekable ? sizeof(close_text) - 1 : 0), t->off) != 0) {
        t->err = errno;
        t->broken = 1;
        return -1;
    }
    t->off += (off_t)t->len;
    t->len = 0;
    return 0;
}

void ring_trace_close(ring_trace_t *t)
{
    if (t->buf == NULL)
        return;
    if (ring_trace_flush(t) == 0 && !t->seekable)
        (void)write_all(t, "\n]\n", 3, 0);
    if (t->broken)
        ring_log(RING_LOG_WARN, "timeline: cannot write %s: %s; it ends before this point",
                 t->path, strerror(t->err));
    if (close(t->fd) != 0)
        ring_log(RING_LOG_WARN, "timeline: closing %s: %m", t->path);
    free(t->buf);
    t->buf = NULL;
}

void ring_trace_abandon(ring_trace_t *t)
{
    if (t->buf == NULL)
        return;
    (void)close(t->fd);
    free(t->buf);
    t->buf = NULL;
}

int ring_trace_line(ring_trace_t *t)
{
    if (t->len + RING_TRACE_LINE_MAX + 8 > RING_TRACE_BUF_BYTES && ring_trace_flush(t) != 0)
        return -1;
    if (!t->first) {
        t->buf[t->len++] = ',';
        t->buf[t->len++] = '\n';
    }
    t->first = 0;
    return 0;
}

void ring_trace_printf(ring_trace_t *t, const char *fmt, ...)
{
    va_list ap;
    size_t room = RING_TRACE_BUF_BYTES - t->len;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(t->buf + t->len, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n < room ? (size_t)n : room - 1;
}

void ring_trace_json_text(const char *s, char *out, size_t len)
{
    size_t o = 0;

    for (; *s != '\0' && o + 7 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(out + o, len - o, "\\%c", c);
        else if (c < 0x20)
            o += (size_t)snprintf(out + o, len - o, "\\u%04x", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
}

const char *ring_trace_us(int64_t ns, char *buf)
{
    if (ns < 0)
        ns = 0;
    snprintf(buf, 32, "%" PRId64 ".%03d", ns / 1000, (int)(ns % 1000));
    return buf;
}

void ring_trace_meta(ring_trace_t *t, const char *name, int tid, const char *args)
{
    if (ring_trace_line(t) != 0)
        return;
    ring_trace_printf(t, "{\"name\":\"%s\",\"ph\":\"M\",\"ts\":0,\"pid\":%d,\"tid\":%d,"
                      "\"args\":{%s}}", name, t->pid, tid, args);
}

/*
 * Complete events are formatted by hand, not by printf: an allreduce of a
 * few KiB takes tens of lines, and with printf their formatting cost as much
 * as the allreduce itself. ring_trace_line leaves RING_TRACE_LINE_MAX bytes
 * of room, more than any of these lines needs.
 */
void ring_trace_put(ring_trace_t *t, const char *s)
{
    size_t n = strlen(s);

    memcpy(t->buf + t->len, s, n);
    t->len += n;
}

static void put_u(ring_trace_t *t, uint64_t v)
{
    char d[24];
    int i = 0;

    do
        d[i++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (i > 0)
        t->buf[t->len++] = d[--i];
}

/* Nanoseconds as microseconds with three decimals, exactly. */
static void put_us(ring_trace_t *t, int64_t ns)
{
    int frac;

    if (ns < 0)
        ns = 0;
    frac = (int)(ns % 1000);
    put_u(t, (uint64_t)(ns / 1000));
    t->buf[t->len++] = '.';
    t->buf[t->len++] = (char)('0' + frac / 100);
    t->buf[t->len++] = (char)('0' + frac / 10 % 10);
    t->buf[t->len++] = (char)('0' + frac % 10);
}

void ring_trace_arg(ring_trace_t *t, const char *key, uint64_t v)
{
    if (!t->args_first)
        t->buf[t->len++] = ',';
    t->args_first = 0;
    t->buf[t->len++] = '"';
    ring_trace_put(t, key);
    t->buf[t->len++] = '"';
    t->buf[t->len++] = ':';
    put_u(t, v);
}

int ring_trace_x_begin(ring_trace_t *t, int tid, const char *cat, const char *name1, int num,
                       int64_t start_ns, int64_t end_ns)
{
    if (ring_trace_line(t) != 0)
        return -1;
    ring_trace_put(t, "{\"name\":\"");
    ring_trace_put(t, name1);
    if (num >= 0)
        put_u(t, (uint64_t)num);
    ring_trace_put(t, "\",\"cat\":\"");
    ring_trace_put(t, cat);
    ring_trace_put(t, "\",\"ph\":\"X\",\"ts\":");
    put_us(t, start_ns);
    ring_trace_put(t, ",\"dur\":");
    put_us(t, end_ns - start_ns);
    ring_trace_put(t, ",\"pid\":");
    put_u(t, (uint64_t)t->pid);
    ring_trace_put(t, ",\"tid\":");
    put_u(t, (uint64_t)tid);
    ring_trace_put(t, ",\"args\":{");
    t->args_first = 1;
    t->nevents++;
    return 0;
}

void ring_trace_x_end(ring_trace_t *t)
{
    ring_trace_put(t, "}}");
}
