/*
 * fake_cuda_device.c - kernels/cuda/ring_cuda.h on the CPU, strict and
 * lazy (see fake_cuda_device.h). One recursive lock guards everything: any
 * thread may call in, and a user kernel may call back in while it runs.
 * This half is the model: the state, the checks, the streams' queues and
 * what runs them, the events, and the tests' own calls (fake_cuda_*); device
 * memory, the copies and the kernels are fake_cuda_memory.c
 * (fake_cuda_int.h).
 */
#include "ring_build.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fake_cuda_device.h"
#include "fake_cuda_int.h"
#include "half.h"

fake_cuda_knobs_t fake_cuda_knobs;
fake_cuda_counts_t fake_cuda_counts;

typedef struct fevent {
    int destroyed, recorded, lazy_left;
    fstream_t *s;     /* its last record: operation number seq of s */
    uint64_t seq;
} fevent_t;

static pthread_mutex_t lock;
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;
char *fcd_dev_base;
size_t fcd_dev_next[NDEV];
static int open_depth;
_Thread_local int fcd_cur_device;
fstream_t fcd_legacy;
fcd_stream_vec_t fcd_streams;
static VEC(fevent_t *) events;
fcd_range_vec_t fcd_allocs;
fcd_range_vec_t fcd_regs;
static uint64_t rng;

static void lock_init(void)
{
    pthread_mutexattr_t a;

    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&lock, &a);
}

void fcd_enter(void)
{
    pthread_once(&lock_once, lock_init);
    pthread_mutex_lock(&lock);
}

int fcd_leave(int rc)
{
    pthread_mutex_unlock(&lock);
    return rc;
}

void fcd_bug(const char *fmt, ...)
{
    va_list ap;

    fake_cuda_counts.bugs++;
    fprintf(stderr, "fake_cuda: BUG in the caller: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (fake_cuda_knobs.bugs_abort)
        abort();
}

/* 1 when this call is the one a fail_* knob names */
int fcd_fault(long *k)
{
    if (*k <= 0 || --*k > 0)
        return 0;
    fake_cuda_counts.failures++;
    return 1;
}

/* Device memory is readable only while a fake operation runs (nested calls count). */
void fcd_dev_open(void)
{
    if (open_depth++ == 0 && mprotect(fcd_dev_base, NDEV * DEV_SPAN, PROT_READ | PROT_WRITE) != 0)
        abort();
}

void fcd_dev_close(void)
{
    if (--open_depth == 0 && mprotect(fcd_dev_base, NDEV * DEV_SPAN, PROT_NONE) != 0)
        abort();
}

int fcd_in_dev(const void *p)
{
    return fcd_dev_base != NULL && (const char *)p >= fcd_dev_base &&
           (const char *)p < fcd_dev_base + NDEV * DEV_SPAN;
}

/* [p, p + bytes) inside one live allocation */
void fcd_check_dev(const void *p, size_t bytes, const char *what)
{
    for (size_t i = 0; i < fcd_allocs.n; i++) {
        const range_t *a = &fcd_allocs.v[i];
        if (a->live && (const char *)p >= a->p && (const char *)p <= a->p + a->bytes &&
            bytes <= (size_t)(a->p + a->bytes - (const char *)p))
            return;
    }
    fcd_bug("%s: %zu bytes at %p are not inside a live device allocation", what, bytes, p);
}

void fcd_check_host(const void *p, size_t bytes, const char *what)
{
    if ((p == NULL && bytes > 0) || fcd_in_dev(p) ||
        (bytes > 0 && fcd_in_dev((const char *)p + bytes - 1)))
        fcd_bug("%s: %p is not host memory", what, p);
}

/* the registration that holds [p, p + bytes) wholly, or NULL */
const range_t *fcd_registered(const void *p, size_t bytes)
{
    for (size_t i = 0; i < fcd_regs.n; i++)
        if ((const char *)p >= fcd_regs.v[i].p &&
            (const char *)p + bytes <= fcd_regs.v[i].p + fcd_regs.v[i].bytes)
            return &fcd_regs.v[i];
    return NULL;
}

fstream_t *fcd_get_stream(void *stream, const char *what)
{
    if (stream == NULL)
        return &fcd_legacy;
    for (size_t i = 0; i < fcd_streams.n; i++)
        if (fcd_streams.v[i] == stream) {
            if (fcd_streams.v[i]->destroyed)
                fcd_bug("%s: stream %p was destroyed", what, stream);
            return stream;
        }
    fcd_bug("%s: %p is not a stream", what, stream);
    return &fcd_legacy;
}

static fevent_t *get_event(void *event, const char *what)
{
    for (size_t i = 0; i < events.n; i++)
        if (events.v[i] == event) {
            if (events.v[i]->destroyed)
                fcd_bug("%s: event %p was destroyed", what, event);
            return event;
        }
    fcd_bug("%s: %p is not an event", what, event);
    return NULL;
}

static uint64_t queued_end(const fstream_t *s)
{
    return s->done + (s->len - s->head);
}

/* Queue an operation; returns its number on the stream. */
uint64_t fcd_push(fstream_t *s, const op_t *op)
{
    if (s->head == s->len)
        s->head = s->len = 0;
    if (s->len == s->cap && s->head > 0) { /* slide the queued ones to the front */
        memmove(s->ops, s->ops + s->head, (s->len - s->head) * sizeof(op_t));
        s->len -= s->head;
        s->head = 0;
    }
    if (s->len == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        if ((s->ops = realloc(s->ops, s->cap * sizeof(op_t))) == NULL)
            abort();
    }
    s->ops[s->len++] = *op;
    fake_cuda_counts.queued++;
    return queued_end(s) - 1;
}

static void run_kernel(const op_t *o)
{
    uint16_t *h = o->dst;
    float *f = o->dst, *fin = o->dst2;
    const uint16_t *hin = o->src;
    const float *fsrc = o->src, *local = o->src2;

    for (size_t i = 0; i < o->n; i++) {
        float x;
        switch (o->kind) {
        case OP_ENCODE:
            h[i] = o->bf16 ? ring_f32_to_bf16(ring_fmul(fsrc[i], o->s1))
                           : ring_f32_to_f16(ring_fmul(fsrc[i], o->s1));
            break;
        case OP_DECODE:
            f[i] = ring_fmul(o->bf16 ? ring_bf16_to_f32(hin[i]) : ring_f16_to_f32(hin[i]), o->s1);
            break;
        default: /* OP_FUSED: both inputs of i are read before its outputs are written */
            x = 0.0f;
            h[i] = o->bf16 ? ring_fused_bf16_elem(hin[i], local[i], o->s1, o->s2, o->s3,
                                                  fin ? &x : NULL)
                           : ring_fused_f16_elem(hin[i], local[i], o->s1, o->s2, o->s3,
                                                 fin ? &x : NULL);
            if (fin)
                fin[i] = x;
        }
    }
}

static void run_op(fstream_t *s, uint64_t seq, const op_t *o)
{
    if (o->kind == OP_WAIT) { /* cross-stream order: the awaited work first */
        fcd_run_stream(o->other, o->upto);
        return;
    }
    if (o->kind == OP_RECORD)
        return;
    if (o->kind != OP_USER && fcd_fault(&fake_cuda_knobs.fail_exec)) {
        if (s->error_at == NONE)
            s->error_at = seq;
        return;
    }
    fcd_dev_open();
    if (o->kind == OP_USER) {
        fake_cuda_counts.user_kernels++;
        o->fn(o->arg);
    } else if (o->kind == OP_COPY) {
        memmove(o->dst, o->src, o->n);
    } else {
        run_kernel(o);
    }
    fcd_dev_close();
}

/* Run s's queued operations until it has run `upto` of them (or all). */
void fcd_run_stream(fstream_t *s, uint64_t upto)
{
    while (s->done < upto && s->head < s->len) {
        op_t o = s->ops[s->head++]; /* taken off first: running it may queue more */
        uint64_t seq = s->done++;

        run_op(s, seq, &o);
    }
}

void fcd_run_all(void)
{
    fcd_run_stream(&fcd_legacy, NONE);
    for (size_t i = 0; i < fcd_streams.n; i++)
        fcd_run_stream(fcd_streams.v[i], NONE);
}

int fcd_stream_ok(const fstream_t *s, uint64_t upto)
{
    return s->error_at == NONE || s->error_at >= upto ? 0 : -1;
}

/* ---- the knobs' owner ------------------------------------------------------------- */

void fake_cuda_reset(void)
{
    fcd_enter();
    if (fcd_dev_base != NULL)
        munmap(fcd_dev_base, NDEV * DEV_SPAN);
    fcd_dev_base = mmap(NULL, NDEV * DEV_SPAN, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fcd_dev_base == MAP_FAILED)
        abort();
    open_depth = 0;
    memset(fcd_dev_next, 0, sizeof(fcd_dev_next));
    fcd_cur_device = 0;
    for (size_t i = 0; i < fcd_streams.n; i++)
        free(fcd_streams.v[i]->ops), free(fcd_streams.v[i]);
    for (size_t i = 0; i < events.n; i++)
        free(events.v[i]);
    free(fcd_legacy.ops);
    memset(&fcd_legacy, 0, sizeof(fcd_legacy));
    fcd_legacy.error_at = NONE;
    fcd_streams.n = events.n = fcd_allocs.n = fcd_regs.n = 0;
    memset(&fake_cuda_counts, 0, sizeof(fake_cuda_counts));
    memset(&fake_cuda_knobs, 0, sizeof(fake_cuda_knobs));
    fake_cuda_knobs.lazy_queries = 2;
    fake_cuda_knobs.lazy_random = 1;
    fake_cuda_knobs.seed = 1;
    fake_cuda_knobs.available = 1;
    fake_cuda_knobs.bugs_abort = 1;
    rng = 0;
    fcd_leave(0);
}

int fake_cuda_user_kernel(void *stream, void (*fn)(void *arg), void *arg)
{
    fcd_enter();
    fcd_push(fcd_get_stream(stream, "fake_cuda_user_kernel"),
             &(op_t){.kind = OP_USER, .fn = fn, .arg = arg});
    return fcd_leave(0);
}

static void raw_copy(void *dst, const void *src, size_t bytes)
{
    fcd_enter();
    fcd_dev_open();
    memcpy(dst, src, bytes);
    fcd_dev_close();
    fcd_leave(0);
}

void fake_cuda_peek(void *dst, const void *dev_src, size_t bytes)
{
    raw_copy(dst, dev_src, bytes);
}

void fake_cuda_poke(void *dev_dst, const void *src, size_t bytes)
{
    raw_copy(dev_dst, src, bytes);
}

fake_cuda_live_t fake_cuda_live(void)
{
    fake_cuda_live_t l = {0, 0, 0, 0};

    fcd_enter();
    for (size_t i = 0; i < fcd_streams.n; i++)
        l.streams += !fcd_streams.v[i]->destroyed;
    for (size_t i = 0; i < events.n; i++)
        l.events += !events.v[i]->destroyed;
    for (size_t i = 0; i < fcd_allocs.n; i++)
        l.allocations += fcd_allocs.v[i].live;
    l.registrations = (int)fcd_regs.n;
    fcd_leave(0);
    return l;
}

uint64_t fake_cuda_stream_host_waits(void *stream)
{
    uint64_t w;

    fcd_enter();
    w = fcd_get_stream(stream, "fake_cuda_stream_host_waits")->host_waits;
    fcd_leave(0);
    return w;
}
/* ---- streams and events ------------------------------------------------------------- */

int ring_cuda_stream_create(void **stream_p)
{
    fstream_t *s;

    BEGIN(stream_p != NULL && (s = calloc(1, sizeof(*s))) != NULL);
    s->error_at = NONE;
    VEC_PUSH(fcd_streams, s);
    *stream_p = s;
    return fcd_leave(0);
}

int ring_cuda_stream_destroy(void *stream)
{
    fstream_t *s;

    BEGIN(stream != NULL);
    s = fcd_get_stream(stream, "ring_cuda_stream_destroy");
    fcd_run_stream(s, NONE); /* its queued work still completes */
    s->destroyed = 1;
    return fcd_leave(0);
}

int ring_cuda_stream_sync(void *stream)
{
    fstream_t *s;

    BEGIN(1);
    s = fcd_get_stream(stream, "ring_cuda_stream_sync");
    fake_cuda_counts.stream_syncs++;
    s->host_waits++;
    fcd_run_stream(s, NONE);
    return fcd_leave(s->error_at == NONE ? 0 : -1);
}

int ring_cuda_event_create(void **event_p)
{
    fevent_t *e;

    BEGIN(event_p != NULL && (e = calloc(1, sizeof(*e))) != NULL);
    VEC_PUSH(events, e);
    *event_p = e;
    return fcd_leave(0);
}

int ring_cuda_event_destroy(void *event)
{
    BEGIN(event != NULL);
    get_event(event, "ring_cuda_event_destroy")->destroyed = 1;
    return fcd_leave(0);
}

int ring_cuda_event_record(void *event, void *stream)
{
    fevent_t *e;
    fstream_t *s;
    int k = fake_cuda_knobs.lazy_queries;

    BEGIN(event != NULL);
    e = get_event(event, "ring_cuda_event_record");
    s = fcd_get_stream(stream, "ring_cuda_event_record");
    e->s = s;
    e->seq = fcd_push(s, &(op_t){.kind = OP_RECORD});
    e->recorded = 1;
    if (fake_cuda_knobs.lazy_random && k > 0) { /* xorshift64*, from the seed */
        if (rng == 0)
            rng = fake_cuda_knobs.seed | 1;
        rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
        k = (int)((rng * 2685821657736338717ull >> 33) % (uint64_t)(k + 1));
    }
    e->lazy_left = k;
    return fcd_leave(0);
}

int ring_cuda_stream_wait_event(void *stream, void *event)
{
    fevent_t *e;
    fstream_t *s;

    BEGIN(event != NULL);
    e = get_event(event, "ring_cuda_stream_wait_event");
    s = fcd_get_stream(stream, "ring_cuda_stream_wait_event");
    if (e->recorded) /* the record as it is now; a never-recorded event is no wait */
        fcd_push(s, &(op_t){.kind = OP_WAIT, .other = e->s, .upto = e->seq + 1});
    return fcd_leave(0);
}

int ring_cuda_event_query(void *event)
{
    fevent_t *e;

    BEGIN(event != NULL);
    e = get_event(event, "ring_cuda_event_query");
    fake_cuda_counts.event_queries++;
    if (fcd_fault(&fake_cuda_knobs.fail_query))
        return fcd_leave(-1);
    if (!e->recorded)
        return fcd_leave(1);
    if (e->s->done <= e->seq) {
        if (e->lazy_left > 0) {
            e->lazy_left--;
            return fcd_leave(0);
        }
        fcd_run_stream(e->s, e->seq + 1);
    }
    return fcd_leave(fcd_stream_ok(e->s, e->seq + 1) == 0 ? 1 : -1);
}

int ring_cuda_event_sync(void *event)
{
    fevent_t *e;

    BEGIN(event != NULL);
    e = get_event(event, "ring_cuda_event_sync");
    fake_cuda_counts.event_syncs++;
    if (!e->recorded)
        return fcd_leave(0);
    e->s->host_waits++;
    fcd_run_stream(e->s, e->seq + 1);
    return fcd_leave(fcd_stream_ok(e->s, e->seq + 1));
}
