/*
 * fault_rank.h - t-fault.c's cases as its ranks see them: what a rank does
 * (enum kind, fcase_t) and the values it reports (V_*). The ranks' side is
 * fault_rank.c; the checks of what they reported stay in t-fault.c.
 */
#ifndef RING_FAULT_RANK_H
#define RING_FAULT_RANK_H

#include <stddef.h>
#include <stdint.h>

#include <ringd/ringd.h>

enum kind {
    K_OPEN,      /* open, one small allreduce */
    K_LOOP,      /* open, allreduce `count` floats again and again; h_ready after the first */
    K_SIZE,      /* open, one allreduce; rank odd_rank uses odd_count */
    K_DELAYED,   /* rank 1 sleeps `delay` before opening; then a few checked allreduces */
    K_CLOSE,     /* rank `closer` opens, says ready, sleeps `delay`, closes; the others allreduce */
    K_STRANGER,  /* rank 0 says ready after open and later times one allreduce (CPU and wall) */
    K_HANG,      /* harness self-check: rank 0 exits 3 at once, rank 1 never returns */
    K_ARGS,      /* start + wait one allreduce; rank odd_rank uses odd_op and odd_tensor */
};

#define V_RESULT_OK 0   /* K_DELAYED, K_STRANGER: 1 when the results were right */
#define V_ITERS 1       /* K_LOOP: allreduces completed */
#define V_CPU 2         /* K_STRANGER: CPU seconds in the timed allreduce */
#define V_WALL 3        /* K_STRANGER: wall seconds of it */
#define V_CLOSE_T 4     /* K_CLOSE: h_now() of the close, in the closer */
#define V_FAIL_T 5      /* h_now() when a ring call failed */

typedef struct fcase {
    enum kind kind;
    size_t count;
    int max_iters;
    double max_time;
    int odd_rank;
    size_t odd_count;
    double delay;
    int closer;
    ring_op_t odd_op;
    uint32_t odd_tensor;
} fcase_t;

/* A rank of a case (h_rank_fn; arg is the fcase_t): its exit code is the ring status it
 * failed with, 0 when it did its part. */
int f_child(int rank, int n, const ring_config_t *cfg, void *arg);

#endif /* RING_FAULT_RANK_H */
