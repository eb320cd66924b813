/*
 * timeline.c - --timeline FILE: the trace-event JSON described in
 * timeline.h. Per channel it keeps the steps of the allreduce in flight
 * (start, end and the time of each phase) and formats them when the
 * allreduce finishes, parents before children, so that viewers which nest
 * complete events by their order in the file (chrome://tracing, where a
 * step and its allreduce begin at the same microsecond) nest them right.
 *
 * The lines go to a memory buffer, written out when it fills, when an
 * allreduce fails, at the end of the first allreduce a second after the
 * last write (a killed process loses about a second) and at
 * ring_comm_close. Every write ends with the closing
 * "]" and the next one overwrites it (pwrite at the same offset), so the
 * file is valid JSON after each write, even when the process is killed
 * later; only a kill in the middle of a write leaves a torn last line, which
 * the ring-launch merge drops. A file that cannot seek (a pipe) gets its
 * "]" at the close only: the JSON Array Format lets it be missing, and
 * chrome://tracing accepts that.
 *
 * After max_events events the file ends with one instant event saying so
 * and the timeline is closed: nothing more is recorded, at no further cost.
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
#include "timeline.h"

#define TL_BUF_BYTES (1u << 20) /* written out when fuller than this */
#define TL_LINE_MAX 1024        /* the longest line we format */
#define TL_FLUSH_NS 1000000000LL /* written out at least this often while allreduces run */

typedef struct tl_bucket {
    int64_t ns;
    uint32_t calls;
    uint64_t amount;
} tl_bucket_t;

typedef struct tl_step {
    int64_t start, end;
    tl_bucket_t ph[RING_TL_NPHASES];
} tl_step_t;

typedef struct tl_channel {
    tl_step_t *steps; /* 2(N-1) */
    int cur;          /* the open step; nsteps when all are closed */
    int64_t taken;    /* ns counted in this channel's phases so far */
} tl_channel_t;

struct ring_timeline {
    int fd;
    int seekable;          /* pwrite works: rewrite the closing bracket each time */
    off_t off;             /* where the next write goes (the bracket's place) */
    char *buf;
    size_t len;
    int first;             /* no event line yet: the next one has no comma before it */
    int args_first;        /* the event being formatted has no argument yet */
    int broken;            /* a write failed (errno err): recording stops */
    int err;
    long nevents, max_events;
    char path[RING_CONFIG_STR_MAX + 16];
    int pid;               /* the rank */
    int nchannels, nsteps;  /* channels with room for steps; steps per allreduce */
    int req_channels;      /* channels the allreduce in flight runs on */
    int active;            /* a request is in flight */
    uint64_t round;
    int64_t t_begin;
    int64_t flushed;       /* ring_tl_now() of the last write-out */
    tl_channel_t ch[RING_MAX_CHANNELS];
};

static const char *const tl_phase_names[RING_TL_NPHASES] = {
    [RING_TL_SEND] = "send",     [RING_TL_RECV] = "recv",   [RING_TL_ENCODE] = "encode",
    [RING_TL_REDUCE] = "reduce", [RING_TL_DECODE] = "decode", [RING_TL_LZ4] = "lz4",
    [RING_TL_MAC] = "mac",       [RING_TL_IO] = "transport",  [RING_TL_WAIT] = "wait"};
/* what a phase's amount counts ("" = nothing) */
static const char *const tl_phase_units[RING_TL_NPHASES] = {
    [RING_TL_SEND] = "bytes",    [RING_TL_RECV] = "bytes",    [RING_TL_ENCODE] = "values",
    [RING_TL_REDUCE] = "values", [RING_TL_DECODE] = "values", [RING_TL_LZ4] = "bytes",
    [RING_TL_MAC] = "bytes",     [RING_TL_IO] = "",           [RING_TL_WAIT] = ""};

/* ---- output ---------------------------------------------------------------- */

static int tl_write_all(ring_timeline_t *tl, const char *p, size_t n, off_t at)
{
    while (n > 0) {
        ssize_t w = tl->seekable ? pwrite(tl->fd, p, n, at) : write(tl->fd, p, n);

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

/* Write the buffer, then "]" where the next write will start. */
static int tl_flush(ring_timeline_t *tl)
{
    static const char close_text[] = "\n]\n";

    if (tl->broken)
        return -1;
    if (tl->len == 0)
        return 0;
    memcpy(tl->buf + tl->len, close_text, sizeof(close_text) - 1);
    if (tl_write_all(tl, tl->buf, tl->len + (tl->seekable ? sizeof(close_text) - 1 : 0),
                     tl->off) != 0) {
        tl->err = errno;
        tl->broken = 1;
        return -1;
    }
    tl->off += (off_t)tl->len;
    tl->len = 0;
    return 0;
}

static void tl_free(ring_timeline_t *tl)
{
    for (int c = 0; c < RING_MAX_CHANNELS; c++)
        free(tl->ch[c].steps);
    free(tl->buf);
    free(tl);
}

/* Finish the file (flush, closing bracket) and drop the timeline. */
static void tl_finish(ring_comm_t *comm)
{
    ring_timeline_t *tl = comm->tl;

    comm->tl = NULL;
    if (tl_flush(tl) == 0 && !tl->seekable)
        (void)tl_write_all(tl, "\n]\n", 3, 0);
    if (tl->broken)
        ring_log(RING_LOG_WARN, "timeline: cannot write %s: %s; it ends before this point",
                 tl->path, strerror(tl->err));
    if (close(tl->fd) != 0)
        ring_log(RING_LOG_WARN, "timeline: closing %s: %m", tl->path);
    tl_free(tl);
}

/* Start an event line: its separator, after making room for it. */
static int tl_line_begin(ring_comm_t *comm)
{
    ring_timeline_t *tl = comm->tl;

    if (tl->len + TL_LINE_MAX + 8 > TL_BUF_BYTES && tl_flush(tl) != 0)
        return -1;
    if (!tl->first) {
        tl->buf[tl->len++] = ',';
        tl->buf[tl->len++] = '\n';
    }
    tl->first = 0;
    return 0;
}

static void tl_append(ring_timeline_t *tl, const char *fmt, ...) RING_PRINTF(2, 3);
static void tl_append(ring_timeline_t *tl, const char *fmt, ...)
{
    va_list ap;
    size_t room = TL_BUF_BYTES - tl->len;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tl->buf + tl->len, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        tl->len += (size_t)n < room ? (size_t)n : room - 1;
}

/* A JSON string's contents: quotes, backslashes and control characters escaped. */
static void tl_json_text(const char *s, char *out, size_t len)
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

/* Nanoseconds as microseconds with three decimals, exactly (no double rounding). */
static const char *tl_us(int64_t ns, char *buf)
{
    if (ns < 0)
        ns = 0;
    snprintf(buf, 32, "%" PRId64 ".%03d", ns / 1000, (int)(ns % 1000));
    return buf;
}

static void tl_meta(ring_comm_t *comm, const char *name, int tid, const char *args)
{
    ring_timeline_t *tl = comm->tl;

    if (tl_line_begin(comm) != 0)
        return;
    tl_append(tl, "{\"name\":\"%s\",\"ph\":\"M\",\"ts\":0,\"pid\":%d,\"tid\":%d,\"args\":{%s}}",
              name, tl->pid, tid, args);
}

/*
 * Complete events are formatted by hand, not by printf: an allreduce of a
 * few KiB takes tens of lines, and with printf their formatting cost as much
 * as the allreduce itself. tl_line_begin leaves TL_LINE_MAX bytes of room,
 * more than any of these lines needs.
 */
static void tl_put(ring_timeline_t *tl, const char *s)
{
    size_t n = strlen(s);

    memcpy(tl->buf + tl->len, s, n);
    tl->len += n;
}

static void tl_put_u(ring_timeline_t *tl, uint64_t v)
{
    char d[24];
    int i = 0;

    do
        d[i++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (i > 0)
        tl->buf[tl->len++] = d[--i];
}

/* Nanoseconds as microseconds with three decimals, exactly. */
static void tl_put_us(ring_timeline_t *tl, int64_t ns)
{
    int frac;

    if (ns < 0)
        ns = 0;
    frac = (int)(ns % 1000);
    tl_put_u(tl, (uint64_t)(ns / 1000));
    tl->buf[tl->len++] = '.';
    tl->buf[tl->len++] = (char)('0' + frac / 100);
    tl->buf[tl->len++] = (char)('0' + frac / 10 % 10);
    tl->buf[tl->len++] = (char)('0' + frac % 10);
}

/* "key":value, after a comma unless it is the event's first argument */
static void tl_put_arg(ring_timeline_t *tl, const char *key, uint64_t v)
{
    if (!tl->args_first)
        tl->buf[tl->len++] = ',';
    tl->args_first = 0;
    tl->buf[tl->len++] = '"';
    tl_put(tl, key);
    tl->buf[tl->len++] = '"';
    tl->buf[tl->len++] = ':';
    tl_put_u(tl, v);
}

/* A complete event up to its first argument: name is name1 followed by the
 * number num (none when negative); the caller adds ,"key":value pairs and
 * ends it with tl_x_end. Returns -1 when nothing can be written. */
static int tl_x_begin(ring_comm_t *comm, int tid, const char *cat, const char *name1, int num,
                      int64_t start, int64_t end)
{
    ring_timeline_t *tl = comm->tl;

    if (tl_line_begin(comm) != 0)
        return -1;
    tl_put(tl, "{\"name\":\"");
    tl_put(tl, name1);
    if (num >= 0)
        tl_put_u(tl, (uint64_t)num);
    tl_put(tl, "\",\"cat\":\"");
    tl_put(tl, cat);
    tl_put(tl, "\",\"ph\":\"X\",\"ts\":");
    tl_put_us(tl, start);
    tl_put(tl, ",\"dur\":");
    tl_put_us(tl, end - start);
    tl_put(tl, ",\"pid\":");
    tl_put_u(tl, (uint64_t)tl->pid);
    tl_put(tl, ",\"tid\":");
    tl_put_u(tl, (uint64_t)tid);
    tl_put(tl, ",\"args\":{");
    tl->args_first = 1;
    tl->nevents++;
    return 0;
}

static void tl_x_end(ring_timeline_t *tl)
{
    tl_put(tl, "}}");
}

/* ---- open and close ----------------------------------------------------------- */

/* cfg->timeline with {rank} replaced; "" when this rank records nothing. */
static void tl_path(const ring_comm_t *comm, char *out, size_t len)
{
    const char *spec = comm->cfg.timeline, *mark;
    size_t o = 0;

    out[0] = '\0';
    if (spec[0] == '\0' || (strstr(spec, "{rank}") == NULL && comm->rank != 0))
        return; /* like ringd --metrics: without {rank}, rank 0 alone writes */
    while ((mark = strstr(spec, "{rank}")) != NULL && o < len) {
        o += (size_t)snprintf(out + o, len - o, "%.*s%d", (int)(mark - spec), spec, comm->rank);
        spec = mark + 6;
    }
    if (o < len)
        snprintf(out + o, len - o, "%s", spec);
}

static void tl_write_metadata(ring_comm_t *comm)
{
    const ring_config_t *cfg = &comm->cfg;
    char host[256] = "", host_json[512], args[900];

    if (gethostname(host, sizeof(host) - 1) != 0)
        snprintf(host, sizeof(host), "?");
    tl_json_text(host, host_json, sizeof(host_json));
    snprintf(args, sizeof(args), "\"name\":\"rank %d (%s)\"", comm->rank, host_json);
    tl_meta(comm, "process_name", 0, args);
    snprintf(args, sizeof(args), "\"sort_index\":%d", comm->rank);
    tl_meta(comm, "process_sort_index", 0, args);
    snprintf(args, sizeof(args),
             "\"labels\":\"%d peers, codec %s, lz4 %s, %d channel%s, chunk %zu B\"",
             comm->size, cfg->codec, cfg->lz4, comm->nchannels, comm->nchannels == 1 ? "" : "s",
             cfg->chunk_bytes);
    tl_meta(comm, "process_labels", 0, args);
    for (int c = 0; c < comm->tl->nchannels; c++) {
        snprintf(args, sizeof(args), "\"name\":\"channel %d\"", c);
        tl_meta(comm, "thread_name", c, args);
        snprintf(args, sizeof(args), "\"sort_index\":%d", c);
        tl_meta(comm, "thread_sort_index", c, args);
    }
}

ring_status_t ring_tl_open(ring_comm_t *comm)
{
    ring_timeline_t *tl;
    char path[sizeof(tl->path)];
    int nsteps = comm->size > 1 ? 2 * (comm->size - 1) : 0;

    comm->tl = NULL;
    tl_path(comm, path, sizeof(path));
    if (path[0] == '\0')
        return RING_OK;
    tl = calloc(1, sizeof(*tl));
    if (tl == NULL || (tl->buf = malloc(TL_BUF_BYTES + 8)) == NULL) {
        free(tl);
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the timeline (--timeline, "
                              "RING_TIMELINE)");
    }
    snprintf(tl->path, sizeof(tl->path), "%s", path);
    tl->pid = comm->rank;
    tl->nchannels = comm->size > 1 ? comm->nchannels : 1;
    tl->nsteps = nsteps;
    tl->max_events = comm->cfg.timeline_max_events;
    tl->first = 1;
    for (int c = 0; c < tl->nchannels && nsteps > 0; c++)
        if ((tl->ch[c].steps = calloc((size_t)nsteps, sizeof(tl_step_t))) == NULL) {
            tl_free(tl);
            return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the timeline's %d "
                                  "steps (--timeline, RING_TIMELINE)", nsteps);
        }
    tl->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tl->fd < 0) {
        int err = errno;
        tl_free(tl);
        return ring_error_set(RING_ERR_IO, "cannot create the timeline file '%s' (--timeline, "
                              "RING_TIMELINE): %s", path, strerror(err));
    }
    tl->seekable = lseek(tl->fd, 0, SEEK_CUR) == 0;
    memcpy(tl->buf, "[\n", 2);
    tl->len = 2;
    comm->tl = tl;
    tl_write_metadata(comm);
    /* the file is valid JSON from the start, with what it knows so far */
    if (tl_flush(tl) != 0) {
        int err = tl->err;
        (void)close(tl->fd);
        comm->tl = NULL;
        tl_free(tl);
        return ring_error_set(RING_ERR_IO, "cannot write the timeline file '%s' (--timeline, "
                              "RING_TIMELINE): %s", path, strerror(err));
    }
    tl->flushed = ring_tl_now();
    ring_log(RING_LOG_INFO, "timeline: writing %s", path);
    return RING_OK;
}

void ring_tl_close(ring_comm_t *comm)
{
    if (comm->tl != NULL)
        tl_finish(comm);
}

/* ---- recording ---------------------------------------------------------------- */

static void tl_step_open(tl_step_t *s, int64_t t)
{
    memset(s, 0, sizeof(*s));
    s->start = t;
}

void ring_tl_request_begin(ring_comm_t *comm, const ring_request_t *req)
{
    ring_timeline_t *tl = comm->tl;

    if (tl == NULL)
        return;
    tl->active = 1;
    tl->round = req->round;
    tl->req_channels = comm->size == 1 ? 1 : comm->nchannels < tl->nchannels ? comm->nchannels
                                                                             : tl->nchannels;
    tl->t_begin = ring_tl_now();
    for (int c = 0; c < tl->req_channels; c++) {
        tl->ch[c].cur = 0;
        if (tl->nsteps > 0)
            tl_step_open(&tl->ch[c].steps[0], tl->t_begin);
    }
}

void ring_tl_channel_moved(ring_comm_t *comm, const ring_channel_t *ch)
{
    ring_timeline_t *tl = comm->tl;
    tl_channel_t *c;
    int target;
    int64_t now;

    if (tl == NULL || !tl->active || ch->index >= tl->req_channels)
        return;
    c = &tl->ch[ch->index];
    if (c->cur >= tl->nsteps)
        return;
    /* steps are received in order; the last one ends when the sends are done too */
    target = (int)(ch->recvs_done / (uint32_t)ch->sched.nchunks);
    if (ch->recvs_done == ch->sched.nrecv && ch->sends_done == ch->sched.nsend)
        target = tl->nsteps;
    else if (target > tl->nsteps - 1)
        target = tl->nsteps - 1;
    if (target <= c->cur)
        return;
    now = ring_tl_now();
    while (c->cur < target) {
        c->steps[c->cur].end = now;
        if (++c->cur < tl->nsteps)
            tl_step_open(&c->steps[c->cur], now);
    }
}

ring_tl_span_t ring_tl_span_begin(const ring_comm_t *comm, const ring_channel_t *ch)
{
    ring_tl_span_t span = {.t0 = ring_tl_now(), .sent0 = comm->stats.payload_bytes};

    if (ch != NULL && comm->tl != NULL)
        span.taken0 = comm->tl->ch[ch->index].taken;
    return span;
}

static void tl_count(ring_timeline_t *tl, tl_channel_t *c, ring_tl_phase_t ph, int64_t ns,
                     uint64_t amount)
{
    tl_bucket_t *b;

    if (c->cur >= tl->nsteps)
        return;
    b = &c->steps[c->cur].ph[ph];
    b->ns += ns;
    b->calls++;
    b->amount += amount;
}

void ring_tl_span_end(ring_comm_t *comm, const ring_channel_t *ch, ring_tl_phase_t ph,
                      const ring_tl_span_t *span, uint64_t amount)
{
    ring_timeline_t *tl = comm->tl;
    int64_t ns;

    if (tl == NULL || !tl->active || tl->nsteps == 0)
        return;
    ns = ring_tl_now() - span->t0;
    if (ph == RING_TL_SEND)
        amount = comm->stats.payload_bytes - span->sent0;
    if (ch == NULL) {
        /* transport progress and waits: not any channel's, so every channel's */
        for (int c = 0; c < tl->req_channels; c++)
            tl_count(tl, &tl->ch[c], ph, ns, amount);
        return;
    }
    if (ch->index < tl->req_channels) {
        tl_channel_t *c = &tl->ch[ch->index];
        /* what nested spans took is theirs, not this one's */
        ns -= c->taken - span->taken0;
        if (ns < 0)
            ns = 0;
        c->taken += ns;
        tl_count(tl, c, ph, ns, amount);
    }
}

/* ---- formatting an allreduce ------------------------------------------------- */

static const char *tl_codec_name(ring_codec_t wire)
{
    return wire == RING_CODEC_FP16 ? "fp16" : wire == RING_CODEC_BF16 ? "bf16" : "fp32";
}

static void tl_size_text(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = (double)bytes;

    while (v >= 1024 && u < 4)
        v /= 1024, u++;
    if (v == (double)(uint64_t)v)
        snprintf(buf, len, "%" PRIu64 " %s", (uint64_t)v, units[u]);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
}

/* Events an allreduce takes: per channel, itself, its steps and their phases. */
static long tl_request_events(const ring_timeline_t *tl)
{
    long n = 0;

    for (int c = 0; c < tl->req_channels; c++) {
        n++;
        for (int s = 0; s < tl->nsteps; s++) {
            n++;
            for (int p = 0; p < RING_TL_NPHASES; p++)
                n += tl->ch[c].steps[s].ph[p].ns > 0;
        }
    }
    return n;
}

static void tl_step_write(ring_comm_t *comm, const ring_channel_t *ch, int c, int s)
{
    ring_timeline_t *tl = comm->tl;
    const tl_step_t *st = &tl->ch[c].steps[s];
    int nrs = comm->size - 1, k = s < nrs ? s : s - nrs;
    int64_t at = st->start;

    if (tl_x_begin(comm, c, "step", s < nrs ? "reduce-scatter step " : "allgather step ", k,
                   st->start, st->end) != 0)
        return;
    tl_put_arg(tl, "step", (uint64_t)k);
    tl_put_arg(tl, "ring_step", (uint64_t)s);
    tl_put_arg(tl, "recv_segment",
               (uint64_t)ring_sched_recv_segment(ch->sched.rank, comm->size, s));
    tl_put_arg(tl, "send_segment",
               (uint64_t)ring_sched_send_segment(ch->sched.rank, comm->size, s));
    tl_put_arg(tl, "chunks", (uint64_t)ch->sched.nchunks);
    tl_x_end(tl);
    /* the phases' totals, end to end from the step's start; never past its end */
    for (int p = 0; p < RING_TL_NPHASES; p++) {
        const tl_bucket_t *b = &st->ph[p];
        int64_t ns = b->ns < st->end - at ? b->ns : st->end - at;

        if (b->ns <= 0 || ns <= 0 || tl_x_begin(comm, c, "phase", tl_phase_names[p], -1, at,
                                                 at + ns) != 0)
            continue;
        tl_put_arg(tl, "calls", b->calls);
        if (tl_phase_units[p][0] != '\0')
            tl_put_arg(tl, tl_phase_units[p], b->amount);
        if (ns < b->ns) /* cut at the step's end (clock rounding): the true total */
            tl_put_arg(tl, "total_ns", (uint64_t)b->ns);
        tl_x_end(tl);
        at += ns;
    }
}

static void tl_truncated(ring_comm_t *comm, uint64_t round, int64_t now)
{
    ring_timeline_t *tl = comm->tl;
    char ts[32];

    if (tl_line_begin(comm) != 0)
        return;
    tl_append(tl,
              "{\"name\":\"timeline truncated: %ld events recorded, the limit "
              "(--timeline-max-events); nothing from allreduce #%" PRIu64 " on\",\"cat\":"
              "\"timeline\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%s,\"pid\":%d,\"tid\":0,"
              "\"args\":{\"max_events\":%ld,\"first_round_missing\":%" PRIu64 "}}",
              tl->nevents, round, tl_us(now, ts), tl->pid, tl->max_events, round);
    ring_log(RING_LOG_WARN, "timeline: %s reached %ld events; recording stops (raise "
             "--timeline-max-events for more)", tl->path, tl->max_events);
}

void ring_tl_request_end(ring_comm_t *comm, const ring_request_t *req, ring_status_t status)
{
    ring_timeline_t *tl = comm->tl;
    char name[128], size[32];
    int64_t now;
    uint64_t bytes;

    if (tl == NULL || !tl->active || req->round != tl->round)
        return;
    tl->active = 0;
    now = ring_tl_now();
    /* the steps still open end here, and those not reached begin and end here: a
     * failed allreduce's, and an rd.c or direct.c call's (its work is in step 0) */
    for (int c = 0; c < tl->req_channels; c++) {
        tl_channel_t *ch = &tl->ch[c];

        while (ch->cur < tl->nsteps) {
            ch->steps[ch->cur].end = now;
            if (++ch->cur < tl->nsteps)
                tl_step_open(&ch->steps[ch->cur], now);
        }
    }
    if (tl->nevents + tl_request_events(tl) > tl->max_events) {
        tl_truncated(comm, req->round, now);
        tl_finish(comm);
        return;
    }
    bytes = (uint64_t)req->count * (req->dtype == RING_FLOAT32 ? 4 : 2);
    tl_size_text(bytes, size, sizeof(size));
    snprintf(name, sizeof(name), "allreduce tensor %u %s %s%s", req->tensor_id, size,
             comm->size > 1 ? tl_codec_name(req->wire) : "local",
             comm->lz4_mode != 0 && req->wire != RING_CODEC_NONE ? "+lz4" : "");
    for (int c = 0; c < tl->req_channels && comm->tl != NULL; c++) {
        const ring_channel_t *ch = &comm->channels[c];

        if (tl_x_begin(comm, c, "allreduce", name, -1, tl->t_begin, now) != 0)
            break;
        tl_put_arg(tl, "round", req->round);
        tl_put_arg(tl, "tensor_id", req->tensor_id);
        tl_put_arg(tl, "count", req->count);
        tl_put_arg(tl, "bytes", bytes);
        tl_put_arg(tl, "channel_values", comm->size > 1 ? ch->part.len : req->count);
        tl_put(tl, ",\"dtype\":\"");
        tl_put(tl, req->dtype == RING_FLOAT32   ? "float32"
                   : req->dtype == RING_FLOAT16 ? "float16"
                                                : "bfloat16");
        tl_put(tl, "\",\"op\":\"");
        tl_put(tl, req->op == RING_AVG ? "avg" : "sum");
        tl_put(tl, "\",\"wire\":\"");
        tl_put(tl, tl_codec_name(req->wire));
        tl_put(tl, "\",\"status\":\"");
        tl_put(tl, ring_status_str(status));
        tl_put(tl, "\"");
        tl_x_end(tl);
        for (int s = 0; s < tl->nsteps; s++)
            tl_step_write(comm, ch, c, s);
    }
    /* a failing job keeps what it saw; a killed one loses about a second */
    if ((status != RING_OK && status != RING_ERR_NONFINITE) || now - tl->flushed > TL_FLUSH_NS) {
        (void)tl_flush(tl);
        tl->flushed = now;
    }
    if (tl->broken)
        tl_finish(comm);
}
