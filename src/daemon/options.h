/*
 * options.h - the daemon's own settings (what to train and how), next to
 * libringd's ring settings (ring_config_t: rank, peers, codec, timeouts...).
 *
 * Like the ring settings, every option lives in one table (options.c) with
 * its flag, RING_* environment variable, default and doc, so parsing,
 * --help and --print-config cannot drift apart. Precedence: defaults <
 * environment < flags.
 */
#ifndef RINGD_DAEMON_OPTIONS_H
#define RINGD_DAEMON_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include <ringd/config.h>

#include "workloads/workload.h"

#define OPT_STR_MAX 512

enum daemon_role { ROLE_TRAINER = 0, ROLE_EVALUATOR };
enum train_mode { MODE_LOCKSTEP = 0, MODE_BOUNDED, MODE_ASYNC };
enum round_update { ROUND_STEPS = 0, ROUND_MEAN, ROUND_SUM }; /* word order of the option */
enum budget { BUDGET_SHARED = 0, BUDGET_PER_PEER };            /* word order of the option */
enum lr_schedule { LR_CONSTANT = 0, LR_COSINE };
enum progress_style { PROGRESS_AUTO = 0, PROGRESS_BAR, PROGRESS_LINES, PROGRESS_OFF };

/* "every N steps" or "every T seconds" (checkpoint-every, eval-every) */
typedef struct every {
    long steps;               /* > 0: every that many steps */
    double seconds;           /* > 0: every that much wall time */
    int per_epoch;            /* 1: at the end of every epoch */
} every_t;

typedef struct daemon_opts {
    char workload[32];
    int role;                 /* enum daemon_role */
    int mode;                 /* enum train_mode */
    long staleness;           /* bounded: S, steps a peer may run ahead of the slowest */
    long warmup_steps;        /* bounded/async: lockstep below this clock */
    double warmup_late;       /* ... where a step this many step times late is dropped */
    int staleness_scale;      /* scale a contribution by 1/(1+tau) */
    int stale_lr_scale;       /* divide the round's lr by 1 + its mean tau */
    int momentum_compensation; /* lower the round's momentum by its mean tau */
    double delay_compensation; /* DC-ASGD's lambda (0 = off) */
    int round_update;         /* enum round_update */
    int budget;               /* enum budget: whose samples --epochs counts (bounded/async) */
    double round_idle_s;      /* bounded/async: longest wait for a local step before a round */
    double fresh_wait_s;      /* bounded/async: longest hold of a step for fresher parameters */
    double fresh_late;        /* bounded/async: a fresh wait ends for a peer this late */
    double gather_s;          /* bounded/async: a round waits for a step due this close */
    int straggler_rank;       /* -1: none */
    double straggler_factor;
    double jitter_p, jitter_factor;
    long epochs;
    long max_steps;           /* 0 = no limit */
    double max_time_s;        /* 0 = no limit */
    int batch_size;           /* per peer */
    double lr, momentum, weight_decay;
    int lr_schedule;          /* enum lr_schedule */
    uint64_t seed;
    int hidden[WL_MAX_HIDDEN], nhidden;
    int conv[2], dense;
    uint64_t params;          /* synthetic */
    double compute_ms;        /* synthetic */
    int compute_on;           /* synthetic: WL_COMPUTE_* */
    double device_ms;         /* every workload: an emulated accelerator's step, 0 = off */
    int device;               /* WL_DEVICE_* */
    char cuda_device[32];     /* "auto" or a device index */
    int shuffle;
    char data_dir[OPT_STR_MAX];
    char checkpoint_dir[OPT_STR_MAX];
    every_t checkpoint_every;
    int keep_checkpoints;
    int resume;
    every_t eval_every;
    int eval_sync;            /* evaluate in the training loop, not on a snapshot in the background */
    char metrics[OPT_STR_MAX]; /* "" = none; "{rank}" is replaced by the rank */
    int log_all;
    int progress;             /* enum progress_style */
    double log_interval_s;    /* plain progress lines at most this often */
    double poll_interval_s;   /* evaluator: how often it looks for new checkpoints */
    int doctor;               /* --doctor: the ring doctor before training */
    int doctor_only;          /* --doctor-only: the ring doctor, no training */
    size_t doctor_bytes;      /* its bursts */
    int elastic_min, elastic_max; /* --elastic MIN:MAX (lockstep): train on while >= MIN
                               * peers remain; 0:0 = off (a lost peer stops the run) */
    unsigned char source[64]; /* where each option's value came from (ring_config_source_t) */
} daemon_opts_t;

/* Fill with the defaults. */
void daemon_opts_init(daemon_opts_t *o);

/* Read the RING_* variables of the daemon's table. 0, or -1 with a message in err. */
int daemon_opts_load_env(daemon_opts_t *o, char *err, size_t errlen);

/*
 * Consume argv[*i] (and its value) when it is one of the daemon's flags:
 * returns 1 and advances *i; 0 when it is not ours (*i untouched); -1 on a
 * bad value, with a message in err naming the flag and the expected form.
 */
int daemon_opts_parse_arg(daemon_opts_t *o, int argc, char **argv, int *i, char *err,
                          size_t errlen);

/* Check that the options make sense together. 0, or -1 with a message. */
int daemon_opts_validate(const daemon_opts_t *o, char *err, size_t errlen);

/* "Did you mean": the daemon's flag (with dashes) or RING_* variable closest to word,
 * or one of ringd's own flags (--help, --print-config...): 1 with it in buf, or 0. */
int daemon_opts_suggest(const char *word, char *buf, size_t len);

/* The options the user set that this mode or workload ignores (e.g. --hidden with
 * --workload fmnist-cnn), as one message in buf: how many there are. */
int daemon_opts_ignored(const daemon_opts_t *o, char *buf, size_t len);

/* 1 when the daemon reads the environment variable var[0..len). */
int daemon_opts_env_known(const char *var, size_t len);

/* An option's value as --print-config shows it; -1 for an unknown name. */
int daemon_opts_get(const daemon_opts_t *o, const char *name, char *buf, size_t len);

/* --help lines for every option, and --print-config lines with sources. */
void daemon_opts_print_help(FILE *out);
void daemon_opts_print(const daemon_opts_t *o, FILE *out);

/* The workload settings these options describe; local_rank is the launcher's
 * (ring_config_t.launch.local_rank, -1 unknown), for --cuda-device auto. */
void daemon_opts_workload(const daemon_opts_t *o, int local_rank, wl_settings_t *s);

/* Is a step- or time-based schedule due after step (now: the clock; *last:
 * when it was last due, updated)? Epoch ends are the caller's business. */
int every_due(const every_t *e, uint64_t step, double now, double *last);

/* "every N steps / T / epoch" as text, for logs. */
void every_format(const every_t *e, char *buf, size_t len);

#endif /* RINGD_DAEMON_OPTIONS_H */
