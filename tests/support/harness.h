/*
 * harness.h - run a ring of real processes on the loopback interface.
 *
 * The parent picks one free TCP port per rank (bind a random port of the
 * ring's host below the kernel's ephemeral range, where no outgoing
 * connection takes its source port; keep every socket open until all are chosen, close
 * them just before forking), builds the RING_PEERS string and forks one
 * child per rank. Each child fills a ring_config_t (rank, world-size,
 * peers, timeout, connect-timeout, then the test's own settings, for every
 * rank or for one) and calls the test's function; its return value is the
 * child's exit code. A child has a hard alarm(); it reports back through a
 * pipe: a message (h_msg, h_fail), numbered values (h_put), a "ready" mark
 * (h_ready).
 *
 * While the children run, the parent carries out actions (send a signal to
 * a rank at time T, or T seconds after some rank said ready) and calls an
 * optional tick function, so a test can kill, stop or poke at a rank
 * mid-allreduce. It waits for every child with an overall deadline (every
 * child still running then is killed with SIGKILL and marked hung), and a
 * rank it stopped with SIGSTOP is killed (SIGKILL, then SIGCONT) once every
 * other rank has ended, so nothing is left behind.
 *
 * Most tests run their rings through h_run_ring: h_run with the time limits
 * given as one budget and what to do when the ring cannot be run at all.
 *
 * Child side: h_msg, h_fail, h_put, h_put_double, h_ready, h_allreduce_loop.
 * Parent side: h_run_ring, h_run, h_signal (from a tick), h_addr, h_describe,
 * h_diag, h_outcome.
 */
#ifndef RING_HARNESS_H
#define RING_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ringd/ringd.h>

#define H_MAX_RANKS 16
#define H_MSG_MAX 1536
#define H_MAX_VALUES 192
#define H_MAX_ACTIONS 8

/* What a rank runs; the return value is the child's exit code. cfg is ready for ring_comm_open. */
typedef int (*h_rank_fn)(int rank, int n, const ring_config_t *cfg, void *arg);

/* One setting (name as for ring_config_set) for one rank, or for all with rank = -1. */
typedef struct h_setting {
    int rank;
    const char *name;
    const char *value;
} h_setting_t;

/*
 * Send signal `sig` to rank `target` at `at` seconds after the run started
 * (after_ready = -1), or `at` seconds after rank `after_ready` first called
 * h_ready(). An action whose trigger never comes is not carried out.
 */
typedef struct h_action {
    int after_ready;
    double at;
    int target;
    int sig;
} h_action_t;

typedef struct h_run h_run_t;

/* Called about every 5 ms while children run; t is seconds since the run started. */
typedef void (*h_tick_fn)(h_run_t *run, double t, void *arg);

typedef struct h_spec {
    int n;                        /* ranks, 1..H_MAX_RANKS */
    const char *host;             /* "127.0.0.1" (default NULL) or "::1" */
    const char *timeout;          /* "timeout" setting; NULL = "10s" */
    const char *connect_timeout;  /* "connect-timeout" setting; NULL = "10s" */
    const h_setting_t *settings;  /* ends with name == NULL; may be NULL */
    unsigned absent;              /* bit r set: rank r gets a port but is never started */
    double child_timeout;         /* alarm() in each child, seconds; 0 = 20 */
    double deadline;              /* parent kills what is left, seconds; 0 = child_timeout + 3 */
    const h_action_t *actions;
    int nactions;
    h_tick_fn tick;
    void *tick_arg;
    h_rank_fn fn;
    void *arg;
} h_spec_t;

typedef struct h_result {
    int started;                  /* 0 for an absent rank */
    pid_t pid;
    int exited, code;             /* exited normally, with this code */
    int signo;                    /* or killed by this signal */
    int hung;                     /* still running at the deadline: killed by the harness */
    int stopped_killed;           /* stopped by an action, killed once the others had ended */
    double t_end;                 /* seconds since the run started when it was reaped */
    double t_ready;               /* seconds since the run started of its first h_ready, -1 */
    int status;                   /* ring status given to h_fail, -1 if none */
    char msg[H_MSG_MAX];          /* last h_msg / h_fail text */
    uint64_t val[H_MAX_VALUES];
    unsigned char has_val[H_MAX_VALUES];
} h_result_t;

struct h_run {
    h_spec_t spec;
    int n;
    char host[64];
    int port[H_MAX_RANKS];
    char peers[H_MAX_RANKS * 80];
    h_result_t r[H_MAX_RANKS];
    double t0;                    /* h_now() when the first child was forked */
    double t_signal[H_MAX_RANKS]; /* when the harness last signalled a rank, -1 */
    int last_signal[H_MAX_RANKS];
    int stopped[H_MAX_RANKS];     /* SIGSTOPped by the harness and not continued */
    int nhung;                    /* ranks killed at the deadline */
    double t_done;                /* seconds since start when the last child was reaped */
    char error[256];              /* why h_run could not run the ring */
    /* private */
    int fd[H_MAX_RANKS];
    int live[H_MAX_RANKS];
    int action_done[H_MAX_ACTIONS];
    unsigned char buf[H_MAX_RANKS][4096];
    size_t buflen[H_MAX_RANKS];
};

/* Monotonic seconds. */
double h_now(void);

/* Run the ring; 0 when every rank was started and waited for, -1 with run->error if not. */
int h_run(const h_spec_t *spec, h_run_t *run);

/*
 * A ring as a test runs one: h_spec_t's fields, with the time limits given as one
 * budget (each rank's alarm) and the parent's deadline a grace after it, and what
 * happens when the ring cannot be run at all (no port, no fork). Each test keeps
 * what is its own: its settings, its rank function and case, its checks.
 */
typedef enum h_on_error {
    H_BAIL,                       /* "Bail out! [LABEL: ]harness: WHY", exit 255 */
    H_DIAG,                       /* "# [LABEL: ]harness: WHY", h_run_ring returns NULL */
} h_on_error_t;

typedef struct h_ring_spec {
    const char *label;            /* names the ring in the harness's error; may be NULL */
    int n;                        /* ranks, 1..H_MAX_RANKS */
    h_rank_fn fn;                 /* what each rank runs, given arg */
    void *arg;
    const h_setting_t *settings;  /* ends with name == NULL; may be NULL */
    const char *host;             /* "127.0.0.1" (default NULL) or "::1" */
    const char *timeout;          /* "timeout" setting; NULL = "10s" */
    const char *connect_timeout;  /* "connect-timeout" setting; NULL = "10s" */
    unsigned absent;              /* bit r set: rank r gets a port but is never started */
    const h_action_t *actions;
    int nactions;
    h_tick_fn tick;
    void *tick_arg;
    double budget;                /* seconds a rank may run (its alarm); 0 = 20 */
    double grace;                 /* the parent kills what is left at budget + grace; 0 = 3 */
    h_on_error_t on_error;        /* default H_BAIL */
    h_run_t *run;                 /* the results; NULL = the harness's own (the next call
                                   * with NULL overwrites it) */
} h_ring_spec_t;

/* Run the ring of rs (h_run); the run with every rank's result, or NULL (H_DIAG) when it
 * could not be run. */
h_run_t *h_run_ring(const h_ring_spec_t *rs);

/* A rank's end as one number: its exit code, -100 - the signal that killed it, or -200
 * when the harness killed it at the deadline. */
int h_outcome(const h_result_t *r);

/* From a tick: send sig to a rank (recorded; SIGSTOP/SIGCONT tracked). 0 or -1. */
int h_signal(h_run_t *run, int rank, int sig);

/* "127.0.0.1:PORT" or "[::1]:PORT" of a rank, as the library names it. */
const char *h_addr(const h_run_t *run, int rank, char *buf, size_t len);

/* "exit 0", "exit 8 (peers disagree)", "signal 9", "hung (killed at the deadline)". */
const char *h_describe(const h_result_t *r, char *buf, size_t len);

/* One diag line per rank: outcome, end time and message. */
void h_diag(const h_run_t *run);

/* Value idx reported by a rank, or `dflt` when it did not report it. */
uint64_t h_val(const h_result_t *r, int idx, uint64_t dflt);
double h_val_double(const h_result_t *r, int idx, double dflt);

/* 1 when a ring on [::1] can work here (an IPv6 loopback socket connects). */
int h_ipv6_usable(void);

/* ---- in the child ---- */

/* Set this rank's message (printf-style; replaces an earlier one). */
void h_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Report a failed ring call: message = "WHAT: " + ring_last_error(), status = st; returns st. */
int h_fail(ring_status_t st, const char *what);

/* Report value idx (0..H_MAX_VALUES-1). */
void h_put(int idx, uint64_t v);
void h_put_double(int idx, double v);

/* Tell the parent this rank reached its "ready" point (only the first one counts). */
void h_ready(void);

/*
 * The loop a rank runs while the parent kills or stops a peer: allreduce (fp32, average,
 * in place) `count` floats of buf again and again, bounded in count and time: until a
 * call fails, after max_iters calls, or once max_time seconds have passed since it began.
 * h_ready() once call number ready_at (from 0) has succeeded (ready_at < 0: never).
 * *iters (may be NULL): the calls that succeeded. Returns the failed call's status, or
 * RING_OK.
 */
ring_status_t h_allreduce_loop(ring_comm_t *comm, float *buf, size_t count, int max_iters,
                               double max_time, int ready_at, int *iters);

#endif /* RING_HARNESS_H */
