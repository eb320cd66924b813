/*
 * fake_cuda_int.h - what the two halves of the fake CUDA device share, not
 * for the tests (they use fake_cuda_device.h): fake_cuda_device.c owns the
 * state, the lock, the checks of the caller's arguments, the streams' queues
 * and the events; fake_cuda_memory.c is device memory, the copies,
 * page-locked memory and the kernels, which queue their work on the streams.
 */
#ifndef RING_FAKE_CUDA_INT_H
#define RING_FAKE_CUDA_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fake_cuda_device.h"

#define NDEV 2
#define DEV_SPAN ((size_t)1 << 30) /* address space per device (reserved, not committed) */
#define PAGE ((size_t)4096)
#define NONE UINT64_MAX

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

typedef VEC(fstream_t *) fcd_stream_vec_t;
typedef VEC(range_t) fcd_range_vec_t;

/* The state (fake_cuda_device.c), under the lock. */
extern char *fcd_dev_base;              /* NDEV spans of DEV_SPAN bytes */
extern size_t fcd_dev_next[NDEV];       /* the next free offset of each device */
extern _Thread_local int fcd_cur_device;
extern fstream_t fcd_legacy;            /* the legacy default stream (NULL) */
extern fcd_stream_vec_t fcd_streams;
extern fcd_range_vec_t fcd_allocs;      /* device allocations, live or freed */
extern fcd_range_vec_t fcd_regs;        /* registered (page-locked) host memory */

/* The recursive lock every call takes; fcd_leave unlocks and returns rc. */
void fcd_enter(void);
int fcd_leave(int rc);

/* the usual start of a call: its argument check, a device, the lock */
#define BEGIN(_args_ok)                                                                      \
    do {                                                                                     \
        if (!ring_cuda_available() || !(_args_ok))                                           \
            return -1;                                                                       \
        fcd_enter();                                                                         \
    } while (0)

/* A misuse by the caller: counted, printed, abort() unless bugs_abort is 0. */
void fcd_bug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 1 when this call is the one a fail_* knob names */
int fcd_fault(long *k);
/* Device memory is readable only between these (nested calls count). */
void fcd_dev_open(void);
void fcd_dev_close(void);
int fcd_in_dev(const void *p);
/* The caller's ranges: a bug unless inside one live allocation, or host memory. */
void fcd_check_dev(const void *p, size_t bytes, const char *what);
void fcd_check_host(const void *p, size_t bytes, const char *what);
/* the registration that holds [p, p + bytes) wholly, or NULL */
const range_t *fcd_registered(const void *p, size_t bytes);
/* A stream handle (NULL: the legacy stream); a bug if it is none. */
fstream_t *fcd_get_stream(void *stream, const char *what);
/* Queue an operation; returns its number on the stream. */
uint64_t fcd_push(fstream_t *s, const op_t *op);
/* Run s's queued operations until it has run `upto` of them (or all); every stream's. */
void fcd_run_stream(fstream_t *s, uint64_t upto);
void fcd_run_all(void);
/* 0, or -1 when one of the first `upto` operations of s failed */
int fcd_stream_ok(const fstream_t *s, uint64_t upto);

#endif /* RING_FAKE_CUDA_INT_H */
