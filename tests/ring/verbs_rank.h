/*
 * verbs_rank.h - t-verbs.c's cases as its ranks see them: what a rank does
 * (enum kind, vcase_t) and the values it reports (V_*). The ranks' side is
 * verbs_rank.c; the parent's checks (results, packet counters, messages)
 * stay in t-verbs.c.
 */
#ifndef RING_VERBS_RANK_H
#define RING_VERBS_RANK_H

#include <stddef.h>
#include <stdint.h>

#include <ringd/ringd.h>

#define V_STATUS 0   /* status of op k: 0 + k */
#define V_WRONG 16   /* elements outside the bound: 16 + k */
#define V_HASH 32    /* result hash: 32 + k */
#define V_RATIO 48   /* largest err / bound, as a double: 48 + k */
#define V_ITERS 64   /* K_LOOP: allreduces completed */
#define V_FAIL_T 65  /* h_now() when a ring call failed */
#define V_STRANGER 80 /* K_STRANGER: what the stranger saw, 80 + S_* */
#define MAX_OPS 8

enum kind {
    K_CHECK, /* the ops, each checked against the exact sum */
    K_LOOP,  /* allreduce `count` floats again and again; h_ready after the first */
    K_SIZE,  /* one allreduce of `count` floats; rank odd_rank uses odd_count */
    K_GPUDIRECT, /* register `count` floats of CUDA device memory (a dma-buf), then drop it */
    K_STRANGER, /* K_CHECK, after a stranger probed rank 0's bootstrap port (last rank forks it) */
};

typedef struct vop {
    size_t count;
    ring_op_t op;
} vop_t;

typedef struct vcase {
    enum kind kind;
    const char *codec;
    uint64_t seed;
    int nops;
    vop_t ops[MAX_OPS];
    size_t count;      /* K_LOOP, K_SIZE */
    int max_iters;     /* K_LOOP */
    double max_time;   /* K_LOOP, seconds */
    int odd_rank;      /* K_SIZE */
    size_t odd_count;  /* K_SIZE */
} vcase_t;

/* A rank of a case (h_rank_fn; arg is the vcase_t): 0 when it did its part, else the
 * ring status it failed with. */
int v_child(int rank, int n, const ring_config_t *cfg, void *arg);

#endif /* RING_VERBS_RANK_H */
