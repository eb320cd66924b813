/*
 * timeline.c - --timeline FILE: the trace-event JSON described in
 * timeline.h. Per channel it keeps the steps of the allreduce in flight
 * (start, end and the time of each phase) and formats them when the
 * allreduce finishes, parents before children, so that viewers which nest
 * complete events by their order in the file (chrome://tracing, where a
 * step and its allreduce begin at the same microsecond) nest them right.
 *
 * The lines go to src/base/trace_json.c's memory buffer, written out when it
 * fills, when an allreduce fails, at the end of the first allreduce a second
 * after the last write (a killed process loses about a second) and at
 * ring_comm_close; the file is valid JSON after every write (a torn last
 * line, from a kill in the middle of one, the ring-launch merge drops).
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
#include "trace_json.h"

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
    ring_trace_t out;      /* the file (trace_json.h) */
    long max_events;
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

static void tl_free(ring_timeline_t *tl)
{
    for (int c = 0; c < RING_MAX_CHANNELS; c++)
        free(tl->ch[c].steps);
    free(tl);
}

/* Finish the file (flush, closing bracket) and drop the timeline. */
static void tl_finish(ring_comm_t *comm)
{
    ring_timeline_t *tl = comm->tl;

    comm->tl = NULL;
    ring_trace_close(&tl->out);
    tl_free(tl);
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
    char host[256] = "", host_json[512], args[900], codec[16], lz4[16];

    (void)ring_config_get(cfg, "codec", codec, sizeof(codec));
    (void)ring_config_get(cfg, "lz4", lz4, sizeof(lz4));
    if (gethostname(host, sizeof(host) - 1) != 0)
        snprintf(host, sizeof(host), "?");
    ring_trace_json_text(host, host_json, sizeof(host_json));
    snprintf(args, sizeof(args), "\"name\":\"rank %d (%s)\"", comm->rank, host_json);
    ring_trace_meta(&comm->tl->out, "process_name", 0, args);
    snprintf(args, sizeof(args), "\"sort_index\":%d", comm->rank);
    ring_trace_meta(&comm->tl->out, "process_sort_index", 0, args);
    snprintf(args, sizeof(args),
             "\"labels\":\"%d peers, codec %s, lz4 %s, %d channel%s, chunk %zu B\"",
             comm->size, codec, lz4, comm->nchannels, comm->nchannels == 1 ? "" : "s",
             cfg->chunk_bytes);
    ring_trace_meta(&comm->tl->out, "process_labels", 0, args);
    for (int c = 0; c < comm->tl->nchannels; c++) {
        snprintf(args, sizeof(args), "\"name\":\"channel %d\"", c);
        ring_trace_meta(&comm->tl->out, "thread_name", c, args);
        snprintf(args, sizeof(args), "\"sort_index\":%d", c);
        ring_trace_meta(&comm->tl->out, "thread_sort_index", c, args);
    }
}

ring_status_t ring_tl_open(ring_comm_t *comm)
{
    ring_timeline_t *tl;
    char path[RING_CONFIG_STR_MAX + 16];
    int nsteps = comm->size > 1 ? 2 * (comm->size - 1) : 0, err;

    comm->tl = NULL;
    tl_path(comm, path, sizeof(path));
    if (path[0] == '\0')
        return RING_OK;
    if ((tl = calloc(1, sizeof(*tl))) == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the timeline (--timeline, "
                              "RING_TIMELINE)");
    tl->nchannels = comm->size > 1 ? comm->nchannels : 1;
    tl->nsteps = nsteps;
    tl->max_events = comm->cfg.timeline_max_events;
    for (int c = 0; c < tl->nchannels && nsteps > 0; c++)
        if ((tl->ch[c].steps = calloc((size_t)nsteps, sizeof(tl_step_t))) == NULL) {
            tl_free(tl);
            return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the timeline's %d "
                                  "steps (--timeline, RING_TIMELINE)", nsteps);
        }
    if ((err = ring_trace_open(&tl->out, path, comm->rank)) != 0) {
        tl_free(tl);
        if (err == ENOMEM)
            return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for the timeline "
                                  "(--timeline, RING_TIMELINE)");
        return ring_error_set(RING_ERR_IO, "cannot create the timeline file '%s' (--timeline, "
                              "RING_TIMELINE): %s", path, strerror(err));
    }
    comm->tl = tl;
    tl_write_metadata(comm);
    /* the file is valid JSON from the start, with what it knows so far */
    if (ring_trace_flush(&tl->out) != 0) {
        err = tl->out.err;
        comm->tl = NULL;
        ring_trace_abandon(&tl->out);
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

    if (ring_trace_x_begin(&tl->out, c, "step", s < nrs ? "reduce-scatter step " : "allgather step ", k,
                   st->start, st->end) != 0)
        return;
    ring_trace_arg(&tl->out, "step", (uint64_t)k);
    ring_trace_arg(&tl->out, "ring_step", (uint64_t)s);
    ring_trace_arg(&tl->out, "recv_segment",
               (uint64_t)ring_sched_recv_segment(ch->sched.rank, comm->size, s));
    ring_trace_arg(&tl->out, "send_segment",
               (uint64_t)ring_sched_send_segment(ch->sched.rank, comm->size, s));
    ring_trace_arg(&tl->out, "chunks", (uint64_t)ch->sched.nchunks);
    ring_trace_x_end(&tl->out);
    /* the phases' totals, end to end from the step's start; never past its end */
    for (int p = 0; p < RING_TL_NPHASES; p++) {
        const tl_bucket_t *b = &st->ph[p];
        int64_t ns = b->ns < st->end - at ? b->ns : st->end - at;

        if (b->ns <= 0 || ns <= 0 || ring_trace_x_begin(&tl->out, c, "phase", tl_phase_names[p], -1, at,
                                                 at + ns) != 0)
            continue;
        ring_trace_arg(&tl->out, "calls", b->calls);
        if (tl_phase_units[p][0] != '\0')
            ring_trace_arg(&tl->out, tl_phase_units[p], b->amount);
        if (ns < b->ns) /* cut at the step's end (clock rounding): the true total */
            ring_trace_arg(&tl->out, "total_ns", (uint64_t)b->ns);
        ring_trace_x_end(&tl->out);
        at += ns;
    }
}

static void tl_truncated(ring_comm_t *comm, uint64_t round, int64_t now)
{
    ring_timeline_t *tl = comm->tl;
    char ts[32];

    if (ring_trace_line(&tl->out) != 0)
        return;
    ring_trace_printf(&tl->out,
              "{\"name\":\"timeline truncated: %ld events recorded, the limit "
              "(--timeline-max-events); nothing from allreduce #%" PRIu64 " on\",\"cat\":"
              "\"timeline\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%s,\"pid\":%d,\"tid\":0,"
              "\"args\":{\"max_events\":%ld,\"first_round_missing\":%" PRIu64 "}}",
              tl->out.nevents, round, ring_trace_us(now, ts), tl->out.pid, tl->max_events, round);
    ring_log(RING_LOG_WARN, "timeline: %s reached %ld events; recording stops (raise "
             "--timeline-max-events for more)", tl->out.path, tl->max_events);
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
    if (tl->out.nevents + tl_request_events(tl) > tl->max_events) {
        tl_truncated(comm, req->round, now);
        tl_finish(comm);
        return;
    }
    bytes = (uint64_t)req->count * (req->dtype == RING_FLOAT32 ? 4 : 2);
    tl_size_text(bytes, size, sizeof(size));
    snprintf(name, sizeof(name), "allreduce tensor %u %s %s%s", req->tensor_id, size,
             comm->size > 1 ? tl_codec_name(req->wire) : "local",
             comm->enc.lz4_mode != 0 && req->wire != RING_CODEC_NONE ? "+lz4" : "");
    for (int c = 0; c < tl->req_channels && comm->tl != NULL; c++) {
        const ring_channel_t *ch = &comm->channels[c];

        if (ring_trace_x_begin(&tl->out, c, "allreduce", name, -1, tl->t_begin, now) != 0)
            break;
        ring_trace_arg(&tl->out, "round", req->round);
        ring_trace_arg(&tl->out, "tensor_id", req->tensor_id);
        ring_trace_arg(&tl->out, "count", req->count);
        ring_trace_arg(&tl->out, "bytes", bytes);
        ring_trace_arg(&tl->out, "channel_values", comm->size > 1 ? ch->part.len : req->count);
        ring_trace_put(&tl->out, ",\"dtype\":\"");
        ring_trace_put(&tl->out, req->dtype == RING_FLOAT32   ? "float32"
                   : req->dtype == RING_FLOAT16 ? "float16"
                                                : "bfloat16");
        ring_trace_put(&tl->out, "\",\"op\":\"");
        ring_trace_put(&tl->out, req->op == RING_AVG ? "avg" : "sum");
        ring_trace_put(&tl->out, "\",\"wire\":\"");
        ring_trace_put(&tl->out, tl_codec_name(req->wire));
        ring_trace_put(&tl->out, "\",\"status\":\"");
        ring_trace_put(&tl->out, ring_status_str(status));
        ring_trace_put(&tl->out, "\"");
        ring_trace_x_end(&tl->out);
        for (int s = 0; s < tl->nsteps; s++)
            tl_step_write(comm, ch, c, s);
    }
    /* a failing job keeps what it saw; a killed one loses about a second */
    if ((status != RING_OK && status != RING_ERR_NONFINITE) || now - tl->flushed > TL_FLUSH_NS) {
        (void)ring_trace_flush(&tl->out);
        tl->flushed = now;
    }
    if (tl->out.broken)
        tl_finish(comm);
}
