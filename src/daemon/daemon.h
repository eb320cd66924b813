/*
 * daemon.h - what the parts of the ringd daemon share: the run's settings,
 * its workload, ring, optimizer and data order, and its running totals.
 *
 *   main.c       flags, environment, --help, roles, exit codes
 *   train.c      the lockstep training loop of a trainer
 *   ssp.c        bounded-staleness and async training: rounds in an engine thread
 *   straggler.c  slow steps on purpose (--straggler, --jitter)
 *   run_eval.c   a run's evaluations: a snapshot in the background, or in-line
 *   eval_thread.c the background evaluator: a thread with its own workload
 *   evaluator.c  the continuous evaluator (--role evaluator)
 *   elastic.c    --elastic: a lost peer shrinks the lockstep ring, which trains on
 *   resume.c     start-up state: newest valid checkpoint, broadcast from rank 0
 *   progress.c   what rank 0 prints: bar or lines, and the summary table
 *   metrics.c    one JSON line per step
 *   signals.c    SIGINT/SIGTERM: stop after this step
 *   print_env.c  --print-env: what the launcher says and what ringd uses
 *   doctor_cmd.c --doctor: every ring edge measured before training
 */
#ifndef RINGD_DAEMON_H
#define RINGD_DAEMON_H

#include <stdint.h>
#include <stdio.h>

#include <ringd/ringd.h>

#include "daemon/checkpoint.h"
#include "sgd.h"
#include "daemon/options.h"
#include "daemon/shard.h"
#include "workloads/workload.h"

#define DAEMON_ERR_MAX 1024

/* Why training stopped. */
/* The tensor ids of the daemon's collectives, one per kind of call: a peer at
 * another point of the run fails with RING_ERR_MISMATCH naming the tensor id
 * rather than mixing its data in (the broadcast of resume and the evaluation's
 * sums both were 3). */
enum daemon_tensor {
    TENSOR_GRADIENT = 1, /* train.c: the gradient's allreduce */
    TENSOR_CONTROL,      /* train.c: the step's control values */
    TENSOR_BROADCAST,    /* resume.c: rank 0's parameters at start */
    TENSOR_EVAL,         /* run_eval.c: the evaluation's sums */
    TENSOR_ROOT_END,     /* agree.c: agree_root_end's allreduce */
};

enum stop_reason { STOP_NONE = 0, STOP_DONE, STOP_MAX_STEPS, STOP_MAX_TIME, STOP_SIGNAL, STOP_PEER };

typedef struct run {
    const daemon_opts_t *opt;
    const ring_config_t *cfg;
    int rank, world;
    int chatty;               /* this rank prints progress (rank 0, or --log-all) */
    workload_t *w;
    ring_comm_t *comm;
    sgd_t sgd;
    shard_t shard;

    /* where training is; saved in checkpoints */
    uint64_t step, epoch, step_in_epoch, total_samples;
    double elapsed_before;    /* training time of earlier runs (from the checkpoint) */
    uint64_t start_step;      /* step this run started at */
    uint64_t total_steps;     /* steps of all --epochs: the learning-rate schedule's length */

    /* this run's clocks (seconds) */
    double t_start;
    double compute_s, wait_s, comm_s;
    uint64_t wire_bytes;      /* payload bytes this peer sent this run */

    /* evaluation */
    double test_acc, test_loss; /* last evaluation (-1: none yet) */
    uint64_t test_step;
    double time_to_85;        /* training seconds until test accuracy first >= 85% (-1: not yet) */
    struct eval_thread *eval_bg; /* rank 0's background evaluator (NULL until the first) */
    uint64_t evals_dropped;   /* snapshots replaced by newer ones before they began */
    double last_loss;         /* mean loss over the peers, last step */
    double last_train_acc;

    FILE *metrics;
    int stop;                 /* enum stop_reason */
    uint64_t nonfinite_steps; /* steps skipped for an inf/NaN gradient */
    /* --codec fp16|bf16 over shm: a 4 MiB allreduce, microseconds exact fp32 and
     * through the codec, timed at start-up for the summary (0: not timed) */
    double codec_fp32_us, codec_wire_us;
    float *peer_wait;         /* lockstep: every peer's idle time in allreduces (world floats) */
    int params_dirty;         /* resume: a corrupt checkpoint was partly read into params */
    int aside_pending;        /* --no-resume: the earlier run's checkpoints wait in previous-run */

    /* lockstep's collective steps outside a training step, and --elastic (elastic.c) */
    struct elastic *el;       /* --elastic: the ring's changes (NULL: off) */
    int eval_owed;            /* an in-line evaluation (--eval-sync) is due before the next step */
    int final_done;           /* the final evaluation is done */
    int force_final;          /* after a change: the final evaluation is done whatever test_step says */
    int changes;              /* changes of the ring so far (an evaluation redone is not shown twice) */
} run_t;

typedef struct elastic elastic_t;

/* train.c: the whole life of a trainer after the ring is open. 0, or -1 with err. */
int train_run(run_t *r, char *err, size_t errlen);

/* ssp.c: bounded-staleness and async training (--mode bounded|async). 0, or -1 with err. */
int ssp_run(run_t *r, char *err, size_t errlen);

/* resume.c: load (rank 0) and broadcast the starting state; fills r->step... and params. */
int resume_start(run_t *r, char *err, size_t errlen);
/* resume.c: rank 0's counters, parameters and momentum onto every peer (a ring that grew). */
int resume_share_state(run_t *r, char *err, size_t errlen);

/* checkpointing and evaluation at the current state (rank 0 only). */
int run_checkpoint(run_t *r, int final, char *err, size_t errlen);

/* A checkpoint of params and the momentum buffer at position pos (train.c; in
 * bounded/async mode the SSP session's round callback writes the master
 * parameters at M, the steps every peer has in them). Silent. */
typedef struct ckpt_pos {
    uint64_t step, epoch, step_in_epoch, total_samples;
} ckpt_pos_t;
int checkpoint_state(run_t *r, const ckpt_pos_t *pos, const float *params,
                     const float *velocity, int final,
                     char *path, size_t path_len, char *err, size_t errlen);

/* run_eval.c: evaluations of the test set. Each records its result (r->test_*, time_to_85,
 * rank 0's line and metrics record) as of the step and training time of the parameters
 * it evaluated. 0, or -1 with err. */
/* Rank 0, before training, when evaluations are due in the background: start the
 * background evaluator, so its own copy of the workload (the dataset too) loads while the
 * first steps run. Does nothing otherwise. */
int run_eval_open(run_t *r, char *err, size_t errlen);
/* Rank 0, an evaluation is due: a copy of r->w->params goes to the background evaluator
 * (run_eval_open's, or started now) and training goes on; with --eval-sync, run_evaluate. */
int run_evaluate_bg(run_t *r, char *err, size_t errlen);
/* Rank 0, between steps: record a background evaluation that has ended, if any. */
int run_eval_poll(run_t *r, char *err, size_t errlen);
/* In-line, rank 0 alone, the whole test set (bounded/async: the rounds go on meanwhile).
 * It first waits for the background evaluations still under way and records them. */
int run_evaluate(run_t *r, char *err, size_t errlen);
/* lockstep in-line: every peer evaluates its share of the test set, then an exact allreduce
 * of the sums, so no peer waits on rank 0 for a whole evaluation (which may outlast
 * --timeout); rank 0 first waits for its background evaluations, as run_evaluate does.
 * 1 (with err) when the allreduce failed: the ring failed, --elastic may shrink it */
int run_evaluate_shared(run_t *r, char *err, size_t errlen);
/* Stop the background evaluator (bounded wait; a warning on stderr if it would not end). */
void run_eval_close(run_t *r);

/* print_env.c: the --print-env report. */
void print_env(const daemon_opts_t *opt, const ring_config_t *cfg, FILE *out);

/* agree.c: every peer trains the same model with the same optimizer, schedule,
 * data order and mode (an allgather of the settings): 0, or -1 naming the first
 * setting that differs, with both values and ranks, the same on every peer. */
int agree_settings(ring_comm_t *comm, const daemon_opts_t *opt, const ring_config_t *cfg,
                   char *err, size_t errlen);

/* agree.c: rank 0 failed at something only it does (its checkpoint directory, a
 * checkpoint) and every peer has learned that it did, from a value they all
 * received (a control value, the start-up broadcast): every peer calls this at
 * the same point. Rank 0 broadcasts why (its own message, in why), and every
 * peer fails with it: rank 0 with why, the others with "rank 0 failed: why",
 * in err (which may be why itself). Always returns -1. */
int agree_root_failure(ring_comm_t *comm, const char *why, char *err, size_t errlen);

/* agree.c: the end of a run, after the last collective of the training and rank 0's
 * final checkpoint: one exact allreduce tells every peer whether rank 0 failed
 * (failed, with why: only rank 0's count), and if it did every peer stops with its
 * message (agree_root_failure; where prefixes the other peers' messages, "step 40").
 * 0, -1 with err, or 1 with err when the allreduce failed (the ring failed). */
int agree_root_end(ring_comm_t *comm, int failed, const char *why, const char *where,
                   char *err, size_t errlen);

/* doctor_cmd.c: --doctor, the ring doctor before training; rank 0 prints the report.
 * 0, 3 when it found a slow edge, 1 when it failed (said on stderr). */
int doctor_main(const daemon_opts_t *opt, ring_comm_t *comm, int rank);

/* evaluator.c: the --role evaluator main loop. Returns the exit code. */
int evaluator_main(const daemon_opts_t *opt, const ring_config_t *cfg);

/* signals.c */
void signals_install(void);
int signals_stop_requested(void);   /* the signal number, or 0 */

/* metrics.c */
/* *f_out: the open file, or NULL when this rank writes none. 0, or -1 with err. */
int metrics_open(const daemon_opts_t *opt, int rank, FILE **f_out, char *err, size_t errlen);
/* One step's line, the same schema in every mode: lockstep has tau 0 and its
 * clock, min_clock and rounds equal to the steps before this one. */
typedef struct metrics_step {
    uint64_t step, epoch;     /* the step just done (1-based), its epoch */
    double time;              /* seconds of training so far, across resumes */
    double loss;
    int samples;
    uint64_t wire_bytes;      /* sent by this step (lockstep) or so far (bounded/async) */
    double compute_s, wait_s, comm_s, blocked_s;
    uint64_t clock, min_clock, tau, rounds;
} metrics_step_t;
void metrics_step(FILE *f, int rank, const metrics_step_t *m);
void metrics_eval(FILE *f, uint64_t step, uint64_t epoch, double elapsed, double loss, double acc);
void metrics_final(FILE *f, const run_t *r);

/* progress.c */
void progress_start(const run_t *r);
void progress_step(run_t *r);
void progress_line(const run_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void progress_summary(const run_t *r);
/* this peer became rank 0 (--elastic, rank 0 was lost): it prints from now on */
void progress_chatty(const run_t *r);
/* every peer's idle time in allreduces, naming the one the others wait for */
void progress_peer_wait(const run_t *r, const float *wait);

/* workload registry (workload_registry.c) */
const workload_ops_t *workload_find(const char *name);

#endif /* RINGD_DAEMON_H */
