/* launch-job.h - one run of ring-launch's ranks, as ring-launch.c supervises
 * it, shared with launch-elastic.c (--elastic: lost ranks and replacements). */
#ifndef RING_LAUNCH_JOB_H
#define RING_LAUNCH_JOB_H

#include <sys/types.h>

#include "launch-opts.h"
#include "launch-relay.h"
#include "launch-torch.h"

/* how the last process of a rank ended (--elastic) */
enum launch_end { LAUNCH_END_NONE, LAUNCH_END_OK, LAUNCH_END_LOST, LAUNCH_END_FAILED };

struct launch_child {
    pid_t pid;
    int running;
    int stopped;        /* stopped by a signal when the job was torn down: killed at once */
    struct launch_stream io[2];
    /* --elastic */
    int gen;            /* 0: the rank's first process; k: its k-th replacement */
    int lost;           /* processes of this rank lost so far */
    int lost_status;    /* the wait status of the latest one */
    pid_t lost_pid;
    int late;           /* a replacement still running when the others had finished: stopped */
    enum launch_end end;
};

struct launch_elastic_state {
    long replaced;      /* replacements started (--max-restarts K bounds them) */
    long finished;      /* ranks that exited 0 */
    long below_rank;    /* the rank whose loss left fewer than MIN; -1: none */
    int below_status;
    long left;          /* ranks running when that happened */
    long long late_at;  /* when replacements alone are left running, the time to stop them */
};

struct launch_state {
    struct launch_opts opt;
    struct launch_child *kids;
    long running, first_rank, others_stopped;  /* first_rank -1: none */
    int first_status, timed_out, got_signal, killed, abandoned, spawn_failed;
    long long timeout_at, stop_at, kill_at, drain_until, signal_at;
    struct launch_relay relay;
    struct launch_torch torch;  /* MASTER_ADDR and MASTER_PORT of this attempt */
    const char *peers;          /* RING_PEERS of this attempt (for replacements) */
    struct launch_elastic_state el;
};

#endif /* RING_LAUNCH_JOB_H */
