/*
 * trace_json.h - a Chrome trace-event file (JSON Array Format) written from a
 * memory buffer: event lines, complete events ("ph":"X") formatted without
 * printf, and a file that is valid JSON after every write (its closing "]" is
 * rewritten in place while the file can seek). src/core/timeline.c keeps the
 * allreduce's steps and phases and writes them through this.
 */
#ifndef RING_TRACE_JSON_H
#define RING_TRACE_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "errors.h"

#define RING_TRACE_BUF_BYTES (1u << 20) /* written out when fuller than this */
#define RING_TRACE_LINE_MAX 1024        /* the longest line formatted */

typedef struct ring_trace {
    int fd;
    int seekable;   /* pwrite works: rewrite the closing bracket each time */
    off_t off;      /* where the next write goes (the bracket's place) */
    char *buf;
    size_t len;
    int first;      /* no event line yet: the next one has no comma before it */
    int args_first; /* the event being formatted has no argument yet */
    int broken;     /* a write failed (errno err): recording stops */
    int err;
    long nevents;   /* complete events begun */
    int pid;        /* the "pid" of every event (the rank) */
    char path[512];
} ring_trace_t;

/* Create path (truncated) with its buffer holding "[": 0, or an errno
 * (ENOMEM, or open's) with nothing left open. */
int ring_trace_open(ring_trace_t *t, const char *path, int pid);
/* Write the buffer, then "]" where the next write will start: 0, or -1 once a
 * write failed (t->err says why; nothing more is written). */
int ring_trace_flush(ring_trace_t *t);
/* Flush, end the array, close; warns (log.h) when writes failed. */
void ring_trace_close(ring_trace_t *t);
/* Close and free without writing more (the caller reports why). */
void ring_trace_abandon(ring_trace_t *t);

/* Start an event line (its separator), flushing first when the buffer is
 * nearly full: then RING_TRACE_LINE_MAX bytes are free. -1: not written. */
int ring_trace_line(ring_trace_t *t);
void ring_trace_printf(ring_trace_t *t, const char *fmt, ...) RING_PRINTF(2, 3);
/* A metadata event ("ph":"M") with its args' JSON members. */
void ring_trace_meta(ring_trace_t *t, const char *name, int tid, const char *args);
/* A complete event up to its first argument: its name is name1 followed by
 * num (none when negative); add ring_trace_arg pairs, end with ring_trace_x_end.
 * -1: nothing can be written. */
int ring_trace_x_begin(ring_trace_t *t, int tid, const char *cat, const char *name1, int num,
                       int64_t start_ns, int64_t end_ns);
void ring_trace_arg(ring_trace_t *t, const char *key, uint64_t v);
void ring_trace_put(ring_trace_t *t, const char *s); /* raw text, inside an event */
void ring_trace_x_end(ring_trace_t *t);

/* A JSON string's contents: quotes, backslashes and control characters escaped. */
void ring_trace_json_text(const char *s, char *out, size_t len);
/* Nanoseconds as microseconds with three decimals, exactly; buf has 32 bytes. */
const char *ring_trace_us(int64_t ns, char *buf);

#endif /* RING_TRACE_JSON_H */
