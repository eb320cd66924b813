/*
 * ring-bench.h - what the parts of ring-bench share: the options, the
 * collectives it measures (ring-bench-coll.c: their shapes, calls, busbw
 * factors and correctness checks) and the overlap measurement
 * (ring-bench-overlap.c). ring-bench.c parses the command line and runs the
 * size loop.
 */
#ifndef RING_BENCH_H
#define RING_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include <ringd/ringd.h>

typedef enum bench_coll {
    BENCH_ALLREDUCE = 0,
    BENCH_BROADCAST,
    BENCH_ALLGATHER,
    BENCH_REDUCESCATTER,
    BENCH_COLL_COUNT
} bench_coll_t;

typedef struct bench_opts {
    size_t min_bytes, max_bytes;
    int sizes_given;    /* -b or -e was given (--overlap has its own default sizes) */
    double factor;
    int iters;          /* 0: as many as fit in target_s */
    int warmup;
    double target_s;
    int check;
    int csv;
    int inplace;
    int register_bufs;  /* ring_comm_register the buffers (verbs: no bounce copy) */
    double sparsity;    /* fraction of zeros in the timed data */
    int sparse_shared;  /* every peer has its zeros at the same places */
    double tolerance;   /* relative, for -c; set from the codec */
    ring_op_t op;
    bench_coll_t coll;  /* --coll */
    int coll_given;
    int root;           /* --root, for broadcast */
    int doctor;         /* --doctor: measure every ring edge instead */
    size_t doctor_bytes;
    int overlap;        /* --overlap: allreduce while the caller computes */
    double compute_ms;  /* --compute-ms; 0: as long as the allreduce alone */
    int device;         /* --device cuda[:N]: the GPU holding the buffers; -1: host */
} bench_opts_t;

/* ring-bench-cuda.c: --device cuda, through the CUDA runtime opened at run time */
int bench_cuda_open(int device, char *why, size_t len);
void *bench_cuda_alloc(size_t bytes, char *why, size_t len);
int bench_cuda_put(void *dev, const void *host, size_t bytes);
int bench_cuda_get(void *host, const void *dev, size_t bytes);
void bench_cuda_free(void *dev);

/* ---- ring-bench-data.c ----------------------------------------------------- */

double bench_now(void);
/* The same value on every rank: the maximum over ranks of v (slots: one float per rank). */
ring_status_t bench_max(ring_comm_t *comm, float *slots, double v, double *max_p);
/* The sum over ranks of v, on every rank. */
ring_status_t bench_sum(ring_comm_t *comm, float *slots, double v, double *sum_p);
uint64_t bench_mix(uint64_t h);
/* Timed data: gradient-like values with a fraction `sparsity` of zeros. */
void bench_fill_timed(float *buf, size_t count, int rank, double sparsity, int shared);
/* Integer-valued data for -c: element i of rank r is (r + 1) * (i % 13 + 1), exact in fp32. */
void bench_fill(float *buf, size_t count, int rank);
/* #wrong of an allreduce of bench_fill's data (first_index: the index of buf[0]). */
size_t bench_verify(const float *buf, size_t count, size_t first_index, int n, ring_op_t op,
                    double tolerance);

/* ---- ring-bench-coll.c: the collectives ------------------------------------ */

/* The shape of one measured size, nccl-tests' way. */
typedef struct bench_shape {
    size_t bytes;  /* the size column: the buffer (allreduce, broadcast), the whole
                    * output (allgather) or the whole input (reducescatter) */
    size_t count;  /* the count column: float32 elements of the call's count argument,
                    * per rank for allgather and reducescatter */
    size_t block;  /* bytes of one rank's block (allgather, reducescatter), else bytes */
} bench_shape_t;

const char *bench_coll_name(bench_coll_t coll);
/* 0 and *coll_p set when name is allreduce, broadcast, allgather or reducescatter. */
int bench_coll_parse(const char *name, bench_coll_t *coll_p);
/* The shape for a requested size: rounded down to whole float32 elements, and to a
 * multiple of n of them for allgather and reducescatter. */
void bench_coll_shape(bench_coll_t coll, size_t want_bytes, int n, bench_shape_t *shape_p);
/* busbw / algbw: 2(n-1)/n, 1, (n-1)/n, (n-1)/n; 1 for a ring of one. */
double bench_coll_busbw_factor(bench_coll_t coll, int n);
/* One blocking call of o->coll on sbuf and rbuf (each at least max_bytes). */
ring_status_t bench_coll_call(ring_comm_t *comm, const bench_opts_t *o, const bench_shape_t *s,
                              float *sbuf, float *rbuf);
/* -c: fill sbuf and rbuf so that one bench_coll_call gives a checkable result, and
 * count the wrong elements of that result (on this rank). */
void bench_coll_fill_check(ring_comm_t *comm, const bench_opts_t *o, const bench_shape_t *s,
                           float *sbuf, float *rbuf);
size_t bench_coll_verify(ring_comm_t *comm, const bench_opts_t *o, const bench_shape_t *s,
                         const float *sbuf, const float *rbuf);

/* ---- ring-bench-overlap.c: --overlap ---------------------------------------- */

/* Run the overlap measurement (it opens its own two communicators from cfg);
 * 0, 1 (a failure or wrong values) or 2 (bad usage). */
int bench_overlap(const bench_opts_t *o, ring_config_t *cfg);

#endif /* RING_BENCH_H */
