/*
 * fake_cuda_device.c - kernels/cuda/ring_cuda.h on the CPU, strict and
 * lazy (see fake_cuda_device.h). One recursive lock guards everything: any
 * thread may call in, and a user kernel may call back in while it runs.
 */
#include "ring_build.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fake_cuda_device.h"
#include "half.h"

#define NDEV 2
#define DEV_SPAN ((size_t)1 << 30) /* address space per device (reserved, not committed) */
#define PAGE ((size_t)4096)
#define NONE UINT64_MAX

fake_cuda_knobs_t fake_cuda_knobs;
fake_cuda_counts_t fake_cuda_counts;

typedef enum { OP_COPY, OP_ENCODE, OP_DECODE, OP_FUSED, OP_RECORD, OP_WAIT, OP_USER } kind_t;
enum { D2H, H2D, D2D };

typedef struct fstream fstream_t;

typedef struct op {
    kind_t kind;
    int dir;          /* copies: D2H, H2D, D2D */
    int bf16;         /* kernels: bf16 rather than fp16 */
    void *dst, *dst2; /* fused: out, final */
    const void *src, *src2;
    size_t n;         /* copies: bytes; kernels: elements */
    float s1, s2, s3;
    fstream_t *other; /* wait: run other until it has run `upto` operations */
    uint64_t upto;
    void (*fn)(void *);
    void *arg;
} op_t;

struct fstream {
    int destroyed;
    op_t *ops;        /* ops[head..len) are queued; ops[head] is operation number `done` */
    size_t head, len, cap;
    uint64_t done;
    uint64_t error_at; /* number of the first operation that failed, NONE */
    uint64_t host_waits;
};

typedef struct fevent {
    int destroyed, recorded, lazy_left;
    fstream_t *s;     /* its last record: operation number seq of s */
    uint64_t seq;
} fevent_t;

typedef struct range {
    char *p;
    size_t bytes;
    int live;
} range_t;

/* a growable array of T */
#define VEC(T) struct { T *v; size_t n, cap; }
#define VEC_PUSH(vec, x)                                                                   \
    do {                                                                                   \
        if ((vec).n == (vec).cap) {                                                        \
            (vec).cap = (vec).cap ? 2 * (vec).cap : 16;                                    \
            (vec).v = realloc((vec).v, (vec).cap * sizeof(*(vec).v));                      \
            if ((vec).v == NULL)                                                           \
                abort();                                                                   \
        }                                                                                  \
        (vec).v[(vec).n++] = (x);                                                          \
    } while (0)

static pthread_mutex_t lock;
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;
static char *dev_base;
static size_t dev_next[NDEV];
static int open_depth;
static _Thread_local int cur_device;
static fstream_t legacy;
static VEC(fstream_t *) streams;
static VEC(fevent_t *) events;
static VEC(range_t) allocs;
static VEC(range_t) regs;
static uint64_t rng;

static void lock_init(void)
{
    pthread_mutexattr_t a;

    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&lock, &a);
}

static void enter(void)
{
    pthread_once(&lock_once, lock_init);
    pthread_mutex_lock(&lock);
}

static int leave(int rc)
{
    pthread_mutex_unlock(&lock);
    return rc;
}

/* the usual start of a call: its argument check, a device, the lock */
#define BEGIN(_args_ok)                                                                      \
    do {                                                                                     \
        if (!ring_cuda_available() || !(_args_ok))                                           \
            return -1;                                                                       \
        enter();                                                                             \
    } while (0)

static void bug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bug(const char *fmt, ...)
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
static int fault(long *k)
{
    if (*k <= 0 || --*k > 0)
        return 0;
    fake_cuda_counts.failures++;
    return 1;
}

/* Device memory is readable only while a fake operation runs (nested calls count). */
static void dev_open(void)
{
    if (open_depth++ == 0 && mprotect(dev_base, NDEV * DEV_SPAN, PROT_READ | PROT_WRITE) != 0)
        abort();
}

static void dev_close(void)
{
    if (--open_depth == 0 && mprotect(dev_base, NDEV * DEV_SPAN, PROT_NONE) != 0)
        abort();
}

static int in_dev(const void *p)
{
    return dev_base != NULL && (const char *)p >= dev_base &&
           (const char *)p < dev_base + NDEV * DEV_SPAN;
}

/* [p, p + bytes) inside one live allocation */
static void check_dev(const void *p, size_t bytes, const char *what)
{
    for (size_t i = 0; i < allocs.n; i++) {
        const range_t *a = &allocs.v[i];
        if (a->live && (const char *)p >= a->p && (const char *)p <= a->p + a->bytes &&
            bytes <= (size_t)(a->p + a->bytes - (const char *)p))
            return;
    }
    bug("%s: %zu bytes at %p are not inside a live device allocation", what, bytes, p);
}

static void check_host(const void *p, size_t bytes, const char *what)
{
    if ((p == NULL && bytes > 0) || in_dev(p) || (bytes > 0 && in_dev((const char *)p + bytes - 1)))
        bug("%s: %p is not host memory", what, p);
}

/* the registration that holds [p, p + bytes) wholly, or NULL */
static const range_t *registered(const void *p, size_t bytes)
{
    for (size_t i = 0; i < regs.n; i++)
        if ((const char *)p >= regs.v[i].p &&
            (const char *)p + bytes <= regs.v[i].p + regs.v[i].bytes)
            return &regs.v[i];
    return NULL;
}

static fstream_t *get_stream(void *stream, const char *what)
{
    if (stream == NULL)
        return &legacy;
    for (size_t i = 0; i < streams.n; i++)
        if (streams.v[i] == stream) {
            if (streams.v[i]->destroyed)
                bug("%s: stream %p was destroyed", what, stream);
            return stream;
        }
    bug("%s: %p is not a stream", what, stream);
    return &legacy;
}

static fevent_t *get_event(void *event, const char *what)
{
    for (size_t i = 0; i < events.n; i++)
        if (events.v[i] == event) {
            if (events.v[i]->destroyed)
                bug("%s: event %p was destroyed", what, event);
            return event;
        }
    bug("%s: %p is not an event", what, event);
    return NULL;
}

static uint64_t queued_end(const fstream_t *s)
{
    return s->done + (s->len - s->head);
}

/* Queue an operation; returns its number on the stream. */
static uint64_t push(fstream_t *s, const op_t *op)
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

static void run_stream(fstream_t *s, uint64_t upto);

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
        run_stream(o->other, o->upto);
        return;
    }
    if (o->kind == OP_RECORD)
        return;
    if (o->kind != OP_USER && fault(&fake_cuda_knobs.fail_exec)) {
        if (s->error_at == NONE)
            s->error_at = seq;
        return;
    }
    dev_open();
    if (o->kind == OP_USER) {
        fake_cuda_counts.user_kernels++;
        o->fn(o->arg);
    } else if (o->kind == OP_COPY) {
        memmove(o->dst, o->src, o->n);
    } else {
        run_kernel(o);
    }
    dev_close();
}

/* Run s's queued operations until it has run `upto` of them (or all). */
static void run_stream(fstream_t *s, uint64_t upto)
{
    while (s->done < upto && s->head < s->len) {
        op_t o = s->ops[s->head++]; /* taken off first: running it may queue more */
        uint64_t seq = s->done++;

        run_op(s, seq, &o);
    }
}

static void run_all(void)
{
    run_stream(&legacy, NONE);
    for (size_t i = 0; i < streams.n; i++)
        run_stream(streams.v[i], NONE);
}

static int stream_ok(const fstream_t *s, uint64_t upto)
{
    return s->error_at == NONE || s->error_at >= upto ? 0 : -1;
}

/* ---- the knobs' owner ------------------------------------------------------------- */

void fake_cuda_reset(void)
{
    enter();
    if (dev_base != NULL)
        munmap(dev_base, NDEV * DEV_SPAN);
    dev_base = mmap(NULL, NDEV * DEV_SPAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
    if (dev_base == MAP_FAILED)
        abort();
    open_depth = 0;
    memset(dev_next, 0, sizeof(dev_next));
    cur_device = 0;
    for (size_t i = 0; i < streams.n; i++)
        free(streams.v[i]->ops), free(streams.v[i]);
    for (size_t i = 0; i < events.n; i++)
        free(events.v[i]);
    free(legacy.ops);
    memset(&legacy, 0, sizeof(legacy));
    legacy.error_at = NONE;
    streams.n = events.n = allocs.n = regs.n = 0;
    memset(&fake_cuda_counts, 0, sizeof(fake_cuda_counts));
    memset(&fake_cuda_knobs, 0, sizeof(fake_cuda_knobs));
    fake_cuda_knobs.lazy_queries = 2;
    fake_cuda_knobs.lazy_random = 1;
    fake_cuda_knobs.seed = 1;
    fake_cuda_knobs.available = 1;
    fake_cuda_knobs.bugs_abort = 1;
    rng = 0;
    leave(0);
}

int fake_cuda_user_kernel(void *stream, void (*fn)(void *arg), void *arg)
{
    enter();
    push(get_stream(stream, "fake_cuda_user_kernel"), &(op_t){.kind = OP_USER, .fn = fn, .arg = arg});
    return leave(0);
}

static void raw_copy(void *dst, const void *src, size_t bytes)
{
    enter();
    dev_open();
    memcpy(dst, src, bytes);
    dev_close();
    leave(0);
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

    enter();
    for (size_t i = 0; i < streams.n; i++)
        l.streams += !streams.v[i]->destroyed;
    for (size_t i = 0; i < events.n; i++)
        l.events += !events.v[i]->destroyed;
    for (size_t i = 0; i < allocs.n; i++)
        l.allocations += allocs.v[i].live;
    l.registrations = (int)regs.n;
    leave(0);
    return l;
}

uint64_t fake_cuda_stream_host_waits(void *stream)
{
    uint64_t w;

    enter();
    w = get_stream(stream, "fake_cuda_stream_host_waits")->host_waits;
    leave(0);
    return w;
}

/* ---- ring_cuda.h: the device, memory, blocking copies ------------------------------- */

int ring_cuda_built(void)
{
    return 1;
}

int ring_cuda_available(void)
{
    return fake_cuda_knobs.available && dev_base != NULL;
}

int ring_cuda_is_device_ptr(const void *p)
{
    return in_dev(p);
}

int ring_cuda_ptr_device(const void *p)
{
    return in_dev(p) ? (int)((size_t)((const char *)p - dev_base) / DEV_SPAN) : -1;
}

int ring_cuda_set_device(int device)
{
    if (!ring_cuda_available() || device < 0 || device >= NDEV)
        return -1;
    cur_device = device;
    return 0;
}

int ring_cuda_malloc(size_t bytes, void **dev_p)
{
    size_t span = (bytes + PAGE - 1) / PAGE * PAGE + PAGE; /* a guard page after each */
    int d = cur_device;
    void *p;

    BEGIN(dev_p != NULL);
    if (dev_next[d] + span > DEV_SPAN)
        return leave(-1);
    p = dev_base + (size_t)d * DEV_SPAN + dev_next[d];
    dev_next[d] += span;
    VEC_PUSH(allocs, ((range_t){p, bytes, 1}));
    *dev_p = p;
    return leave(0);
}

int ring_cuda_free(void *dev_p)
{
    if (!ring_cuda_available())
        return -1;
    if (dev_p == NULL)
        return 0;
    enter();
    for (size_t i = 0; i < allocs.n; i++) {
        range_t *a = &allocs.v[i];
        if (a->live && a->p == dev_p) {
            run_all(); /* cudaFree waits for the device */
            a->live = 0; /* never handed out again: a later use is caught */
            madvise(a->p, (a->bytes + PAGE - 1) / PAGE * PAGE, MADV_DONTNEED);
            return leave(0);
        }
    }
    bug("ring_cuda_free: %p is not a live device allocation", dev_p);
    return leave(-1);
}

int ring_cuda_dmabuf_fd(const void *dev_ptr, size_t bytes, int *fd, uintptr_t *base, size_t *len)
{
    (void)dev_ptr, (void)bytes, (void)fd, (void)base, (void)len;
    return -1; /* no GPUDirect: registration falls back as without a driver */
}

/* cudaMemcpy: on the legacy default stream, which it waits for */
static int blocking_copy(int dir, void *dst, const void *src, size_t bytes)
{
    const char *what = dir == D2H ? "ring_cuda_memcpy_d2h" : "ring_cuda_memcpy_h2d";

    if (!ring_cuda_available())
        return -1;
    if (bytes == 0)
        return 0;
    enter();
    if (fault(dir == D2H ? &fake_cuda_knobs.fail_d2h : &fake_cuda_knobs.fail_h2d))
        return leave(-1);
    check_dev(dir == D2H ? src : dst, bytes, what);
    check_host(dir == D2H ? dst : src, bytes, what);
    fake_cuda_counts.blocking_calls++;
    legacy.host_waits++;
    run_stream(&legacy, NONE);
    *(dir == D2H ? &fake_cuda_counts.d2h_copies : &fake_cuda_counts.h2d_copies) += 1;
    *(dir == D2H ? &fake_cuda_counts.d2h_bytes : &fake_cuda_counts.h2d_bytes) += bytes;
    dev_open();
    memmove(dst, src, bytes);
    dev_close();
    return leave(0);
}

int ring_cuda_memcpy_d2h(void *dst, const void *dev_src, size_t bytes)
{
    return blocking_copy(D2H, dst, dev_src, bytes);
}

int ring_cuda_memcpy_h2d(void *dev_dst, const void *src, size_t bytes)
{
    return blocking_copy(H2D, dev_dst, src, bytes);
}

/* ---- streams and events ------------------------------------------------------------- */

int ring_cuda_stream_create(void **stream_p)
{
    fstream_t *s;

    BEGIN(stream_p != NULL && (s = calloc(1, sizeof(*s))) != NULL);
    s->error_at = NONE;
    VEC_PUSH(streams, s);
    *stream_p = s;
    return leave(0);
}

int ring_cuda_stream_destroy(void *stream)
{
    fstream_t *s;

    BEGIN(stream != NULL);
    s = get_stream(stream, "ring_cuda_stream_destroy");
    run_stream(s, NONE); /* its queued work still completes */
    s->destroyed = 1;
    return leave(0);
}

int ring_cuda_stream_sync(void *stream)
{
    fstream_t *s;

    BEGIN(1);
    s = get_stream(stream, "ring_cuda_stream_sync");
    fake_cuda_counts.stream_syncs++;
    s->host_waits++;
    run_stream(s, NONE);
    return leave(s->error_at == NONE ? 0 : -1);
}

int ring_cuda_event_create(void **event_p)
{
    fevent_t *e;

    BEGIN(event_p != NULL && (e = calloc(1, sizeof(*e))) != NULL);
    VEC_PUSH(events, e);
    *event_p = e;
    return leave(0);
}

int ring_cuda_event_destroy(void *event)
{
    BEGIN(event != NULL);
    get_event(event, "ring_cuda_event_destroy")->destroyed = 1;
    return leave(0);
}

int ring_cuda_event_record(void *event, void *stream)
{
    fevent_t *e;
    fstream_t *s;
    int k = fake_cuda_knobs.lazy_queries;

    BEGIN(event != NULL);
    e = get_event(event, "ring_cuda_event_record");
    s = get_stream(stream, "ring_cuda_event_record");
    e->s = s;
    e->seq = push(s, &(op_t){.kind = OP_RECORD});
    e->recorded = 1;
    if (fake_cuda_knobs.lazy_random && k > 0) { /* xorshift64*, from the seed */
        if (rng == 0)
            rng = fake_cuda_knobs.seed | 1;
        rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
        k = (int)((rng * 2685821657736338717ull >> 33) % (uint64_t)(k + 1));
    }
    e->lazy_left = k;
    return leave(0);
}

int ring_cuda_stream_wait_event(void *stream, void *event)
{
    fevent_t *e;
    fstream_t *s;

    BEGIN(event != NULL);
    e = get_event(event, "ring_cuda_stream_wait_event");
    s = get_stream(stream, "ring_cuda_stream_wait_event");
    if (e->recorded) /* the record as it is now; a never-recorded event is no wait */
        push(s, &(op_t){.kind = OP_WAIT, .other = e->s, .upto = e->seq + 1});
    return leave(0);
}

int ring_cuda_event_query(void *event)
{
    fevent_t *e;

    BEGIN(event != NULL);
    e = get_event(event, "ring_cuda_event_query");
    fake_cuda_counts.event_queries++;
    if (fault(&fake_cuda_knobs.fail_query))
        return leave(-1);
    if (!e->recorded)
        return leave(1);
    if (e->s->done <= e->seq) {
        if (e->lazy_left > 0) {
            e->lazy_left--;
            return leave(0);
        }
        run_stream(e->s, e->seq + 1);
    }
    return leave(stream_ok(e->s, e->seq + 1) == 0 ? 1 : -1);
}

int ring_cuda_event_sync(void *event)
{
    fevent_t *e;

    BEGIN(event != NULL);
    e = get_event(event, "ring_cuda_event_sync");
    fake_cuda_counts.event_syncs++;
    if (!e->recorded)
        return leave(0);
    e->s->host_waits++;
    run_stream(e->s, e->seq + 1);
    return leave(stream_ok(e->s, e->seq + 1));
}

/* ---- asynchronous copies and page-locked memory ------------------------------------- */

static int async_copy(int dir, void *dst, const void *src, size_t bytes, void *stream)
{
    static const char *const what[] = {"ring_cuda_memcpy_d2h_async", "ring_cuda_memcpy_h2d_async",
                                       "ring_cuda_memcpy_d2d_async"};
    fstream_t *s;
    const void *host = dir == D2H ? dst : src;

    if (!ring_cuda_available())
        return -1;
    if (bytes == 0)
        return 0;
    enter();
    s = get_stream(stream, what[dir]);
    if ((dir == D2H && fault(&fake_cuda_knobs.fail_d2h)) ||
        (dir == H2D && fault(&fake_cuda_knobs.fail_h2d)))
        return leave(-1);
    if (dir != D2H)
        check_dev(dst, bytes, what[dir]);
    if (dir != H2D)
        check_dev(src, bytes, what[dir]);
    if (dir != D2D) {
        check_host(host, bytes, what[dir]);
        fake_cuda_counts.unpinned_async += registered(host, bytes) == NULL;
    }
    if (dir == D2H)
        fake_cuda_counts.d2h_copies++, fake_cuda_counts.d2h_bytes += bytes;
    else if (dir == H2D)
        fake_cuda_counts.h2d_copies++, fake_cuda_counts.h2d_bytes += bytes;
    else
        fake_cuda_counts.d2d_bytes += bytes;
    push(s, &(op_t){.kind = OP_COPY, .dir = dir, .dst = dst, .src = src, .n = bytes});
    return leave(0);
}

int ring_cuda_memcpy_d2h_async(void *dst, const void *dev_src, size_t bytes, void *stream)
{
    return async_copy(D2H, dst, dev_src, bytes, stream);
}

int ring_cuda_memcpy_h2d_async(void *dev_dst, const void *src, size_t bytes, void *stream)
{
    return async_copy(H2D, dev_dst, src, bytes, stream);
}

int ring_cuda_memcpy_d2d_async(void *dev_dst, const void *dev_src, size_t bytes, void *stream)
{
    return async_copy(D2D, dev_dst, dev_src, bytes, stream);
}

int ring_cuda_host_register(void *p, size_t bytes)
{
    BEGIN(p != NULL && bytes > 0);
    check_host(p, bytes, "ring_cuda_host_register");
    for (size_t i = 0; i < regs.n; i++)
        if ((char *)p < regs.v[i].p + regs.v[i].bytes && regs.v[i].p < (char *)p + bytes) {
            bug("ring_cuda_host_register: [%p, +%zu) overlaps the registered [%p, +%zu)", p,
                bytes, (void *)regs.v[i].p, regs.v[i].bytes);
            return leave(-1);
        }
    VEC_PUSH(regs, ((range_t){p, bytes, 1}));
    return leave(0);
}

/* 1 when an operation queued on s (not yet run) reads or writes host memory in r */
static int queued_on(const fstream_t *s, const range_t *r)
{
    for (size_t i = s->head; i < s->len; i++) {
        const op_t *o = &s->ops[i];
        const char *h = o->dir == D2H ? o->dst : o->src;
        if (o->kind == OP_COPY && o->dir != D2D && h < r->p + r->bytes && r->p < h + o->n)
            return 1;
    }
    return 0;
}

int ring_cuda_host_unregister(void *p)
{
    BEGIN(p != NULL);
    for (size_t i = 0; i < regs.n; i++) {
        if (regs.v[i].p != p)
            continue;
        int busy = queued_on(&legacy, &regs.v[i]);
        for (size_t j = 0; j < streams.n; j++)
            busy |= queued_on(streams.v[j], &regs.v[i]);
        if (busy)
            bug("ring_cuda_host_unregister: %p still has a queued copy (its event was not "
                "waited for)", p);
        regs.v[i] = regs.v[--regs.n];
        return leave(0);
    }
    bug("ring_cuda_host_unregister: %p is not registered", p);
    return leave(-1);
}

/* ---- kernels ------------------------------------------------------------------------ */

static int launch(const char *what, void *stream, const op_t *o)
{
    fstream_t *s;

    if (!ring_cuda_available())
        return -1;
    if (o->n == 0)
        return 0;
    enter();
    s = get_stream(stream, what);
    if (fault(&fake_cuda_knobs.fail_kernel))
        return leave(-1);
    check_dev(o->dst, o->n * (o->kind == OP_DECODE ? 4 : 2), what);
    check_dev(o->src, o->n * (o->kind == OP_ENCODE ? 4 : 2), what);
    if (o->kind == OP_FUSED) {
        check_dev(o->src2, o->n * 4, what);
        if (o->dst2 != NULL)
            check_dev(o->dst2, o->n * 4, what);
    }
    fake_cuda_counts.kernels++;
    push(s, o);
    return leave(0);
}

/* the four conversions and the two fused steps share their shapes */
#define CONVERT(_name, _dst_t, _src_t, _kind, _bf16)                                          \
    int _name(_dst_t *dev_dst, const _src_t *dev_src, float scale, size_t n, void *stream)   \
    {                                                                                        \
        return launch(#_name, stream, &(op_t){.kind = _kind, .bf16 = _bf16, .dst = dev_dst,  \
                                              .src = dev_src, .s1 = scale, .n = n});         \
    }
CONVERT(ring_cuda_encode_f16, uint16_t, float, OP_ENCODE, 0)
CONVERT(ring_cuda_decode_f16, float, uint16_t, OP_DECODE, 0)
CONVERT(ring_cuda_encode_bf16, uint16_t, float, OP_ENCODE, 1)
CONVERT(ring_cuda_decode_bf16, float, uint16_t, OP_DECODE, 1)

#define FUSED(_name, _bf16)                                                                  \
    int _name(uint16_t *dev_out, float *dev_final, const uint16_t *dev_in,                 \
              const float *dev_local, float in_scale, float local_scale, float out_scale,  \
              size_t n, void *stream)                                                      \
    {                                                                                        \
        return launch(#_name, stream,                                                        \
                      &(op_t){.kind = OP_FUSED, .bf16 = _bf16, .dst = dev_out,               \
                              .dst2 = dev_final, .src = dev_in, .src2 = dev_local,           \
                              .s1 = in_scale, .s2 = local_scale, .s3 = out_scale, .n = n});  \
    }
FUSED(ring_cuda_fused_f16, 0)
FUSED(ring_cuda_fused_bf16, 1)

/* absmax of each range, as ring_absmax_elem folds it; blocking: the stream runs first */
static int absmax(const char *what, const float *src, const size_t *offs, const size_t *lens,
                  size_t nranges, float *max_out, int *nonfinite_out, void *stream)
{
    fstream_t *s;
    int rc;

    enter();
    s = get_stream(stream, what);
    if (fault(&fake_cuda_knobs.fail_kernel))
        return leave(-1);
    for (size_t r = 0; r < nranges; r++)
        if (lens[r] > 0)
            check_dev(src + offs[r], lens[r] * 4, what);
    fake_cuda_counts.kernels++;
    fake_cuda_counts.blocking_calls++;
    s->host_waits++;
    run_stream(s, NONE);
    if ((rc = stream_ok(s, NONE)) != 0)
        return leave(rc);
    dev_open();
    for (size_t r = 0; r < nranges; r++) {
        uint32_t bits = 0;
        int nonfinite = 0;
        for (size_t i = 0; i < lens[r]; i++)
            ring_absmax_elem(&bits, &nonfinite, src[offs[r] + i]);
        max_out[r] = ring_bits_f32(bits);
        nonfinite_out[r] = nonfinite;
    }
    dev_close();
    return leave(0);
}

int ring_cuda_absmax_f32(const float *dev_src, size_t n, float *max_p, int *nonfinite_p,
                         void *stream)
{
    size_t off = 0;
    int nonfinite = 0;

    if (max_p == NULL || !ring_cuda_available())
        return -1;
    if (n == 0) {
        *max_p = 0.0f;
        return 0;
    }
    if (absmax("ring_cuda_absmax_f32", dev_src, &off, &n, 1, max_p, &nonfinite, stream) != 0)
        return -1;
    if (nonfinite && nonfinite_p != NULL)
        *nonfinite_p = 1;
    return 0;
}

int ring_cuda_absmax_ranges(const float *dev_src, const size_t *offs, const size_t *lens,
                            size_t nranges, float *max_out, int *nonfinite_out, void *stream)
{
    if (!ring_cuda_available() ||
        (nranges > 0 && (offs == NULL || lens == NULL || max_out == NULL || nonfinite_out == NULL)))
        return -1;
    if (nranges == 0)
        return 0;
    return absmax("ring_cuda_absmax_ranges", dev_src, offs, lens, nranges, max_out,
                  nonfinite_out, stream);
}
