/*
 * fake_cuda_device.h - a CUDA device on the CPU for the tests: it defines
 * every function of kernels/cuda/ring_cuda.h, so a test program linked with
 * it never pulls libringd's own member (codec.o, stream.o or cuda_stub.o;
 * one call left to it would pull that member and its definitions clash).
 *
 * It is strict, so that engine bugs show instead of passing by luck:
 *  - device memory is an mmap'ed region kept PROT_NONE except while a fake
 *    operation runs: the engine touching it directly crashes the process;
 *    device 0 and device 1 are two halves of it (ring_cuda_ptr_device);
 *  - streams are queues: async copies, kernels, event records and waits run
 *    only when something forces them (stream_sync, event_sync, a blocking
 *    call, or event_query, which says "not yet" lazy_queries times per
 *    record before it runs the stream up to that record); a wait, when it
 *    runs, first runs the other stream up to the awaited record;
 *  - kernels compute with kernels/half.h's element functions (the bits the
 *    real kernels give);
 *  - misuse (a device range outside a live allocation, host memory given as
 *    device memory, an unknown or destroyed handle, registering memory twice,
 *    unregistering what is not registered or while a queued copy still uses
 *    it) is a "bug": counted, printed to stderr, and abort() unless
 *    fake_cuda_knobs.bugs_abort is 0.
 */
#ifndef RING_FAKE_CUDA_DEVICE_H
#define RING_FAKE_CUDA_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/ring_cuda.h"

/* Fault injection and behaviour; set by the test (fake_cuda_reset restores the defaults).
 * fail_*: the n-th such call from now fails (1 = the next one), 0 = none. */
typedef struct fake_cuda_knobs {
    long fail_d2h;      /* device-to-host copies, blocking and async: the call returns -1 */
    long fail_h2d;      /* host-to-device copies, blocking and async */
    long fail_kernel;   /* codec kernel launches (encode, decode, fused, absmax) */
    long fail_query;    /* ring_cuda_event_query returns -1 */
    long fail_exec;     /* queued operations (not user kernels): fails when it runs; its
                         * stream is in error from then on (syncs and queries say -1) */
    int lazy_queries;   /* "not yet" answers per event record before it completes */
    int lazy_random;    /* 1: each record draws its count from 0..lazy_queries (seeded) */
    uint64_t seed;      /* for lazy_random */
    int available;      /* what ring_cuda_available says (1) */
    int bugs_abort;     /* 1: a bug aborts the process (default) */
} fake_cuda_knobs_t;

/* What happened since fake_cuda_reset. */
typedef struct fake_cuda_counts {
    uint64_t d2h_bytes, h2d_bytes, d2d_bytes; /* blocking and async copies that ran */
    uint64_t d2h_copies, h2d_copies;          /* calls accepted */
    uint64_t kernels;                         /* codec kernels launched (absmax included) */
    uint64_t user_kernels;                    /* fake_cuda_user_kernel calls run */
    uint64_t stream_syncs, event_syncs;       /* host-blocking waits asked for */
    uint64_t blocking_calls;                  /* blocking copies and absmax */
    uint64_t event_queries;
    uint64_t queued;                          /* operations queued on any stream */
    uint64_t unpinned_async;                  /* async copies whose host side is not
                                               * (wholly) registered */
    uint64_t bugs;
    uint64_t failures;                        /* injected faults that fired */
} fake_cuda_counts_t;

extern fake_cuda_knobs_t fake_cuda_knobs;
extern fake_cuda_counts_t fake_cuda_counts;

/* Forget every allocation, stream, event and registration, zero the counters and set
 * the knobs to their defaults (lazy_queries 2, random, seed 1). Call it first in every
 * process that uses the device (a forked rank inherits the parent's state). */
void fake_cuda_reset(void);

/* Queue fn(arg) on stream (NULL: the legacy default stream) as a kernel of the user's:
 * it runs when the stream reaches it, and may read and write device memory directly. */
int fake_cuda_user_kernel(void *stream, void (*fn)(void *arg), void *arg);

/* Raw access to device memory as it is now: no stream order, nothing counted. */
void fake_cuda_peek(void *dst, const void *dev_src, size_t bytes);
void fake_cuda_poke(void *dev_dst, const void *src, size_t bytes);

/* Live objects (for leak checks: compare before ring_comm_open and after close). */
typedef struct fake_cuda_live {
    int streams, events, registrations, allocations;
} fake_cuda_live_t;
fake_cuda_live_t fake_cuda_live(void);

/* Host-blocking waits (stream_sync, event_sync of an event recorded on it, blocking
 * calls on it) on one stream since fake_cuda_reset; queries do not count. */
uint64_t fake_cuda_stream_host_waits(void *stream);

#endif /* RING_FAKE_CUDA_DEVICE_H */
