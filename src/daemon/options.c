/*
 * options.c - the daemon's option table: flag, RING_* variable, default,
 * doc and parser of every training setting, run by the engine libringd's
 * settings use too (base/opt_table.c). The ring's own settings are libringd's
 * table (ring_config_*); main.c offers both.
 */
#include "ring_build.h"

#include "options.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "opt_table.h"
#include "parse.h"

#define OFIELD(_f) offsetof(daemon_opts_t, _f), sizeof(((daemon_opts_t *)0)->_f)

static const ring_opt_t opt_table[] = {
    {"workload", "RING_WORKLOAD", RING_OPT_WORD, "fmnist-mlp", "fmnist-mlp|fmnist-cnn|synthetic",
     OFIELD(workload), 0, 0, "what to train (see Workloads at the end of ringd --help)"},
    {"role", "RING_ROLE", RING_OPT_CHOICE, "trainer", "trainer|evaluator", OFIELD(role), 0, 0,
     "trainer: a peer of the ring; evaluator: outside the ring, evaluate every new checkpoint "
     "in --checkpoint-dir"},
    {"mode", "RING_MODE", RING_OPT_CHOICE, "lockstep", "lockstep|bounded|async", OFIELD(mode), 0, 0,
     "lockstep: one allreduce per step, every peer waits for all; bounded: rounds run in the "
     "background and a peer may be up to --staleness steps ahead of the slowest (SSP); async: "
     "no bound"},
    {"staleness", "RING_STALENESS", RING_OPT_LONG, "4", "S", OFIELD(staleness), 0, 1000000,
     "bounded: a peer starts step c only when every peer's steps below c-S are applied "
     "(S=0 is lockstep through rounds)"},
    {"warmup-steps", "RING_WARMUP_STEPS", RING_OPT_LONG, "auto", "K|auto", OFIELD(warmup_steps), -1,
     LONG_MAX,
     "bounded/async: the first K steps run in lockstep, then the chosen mode; auto: half an "
     "epoch (staleness costs most while the gradients are large: in repeated runs a "
     "half-epoch warm-up reached 85 % sooner, see docs/staleness.md)"},
    {"warmup-late", "RING_WARMUP_LATE", RING_OPT_DOUBLE, "1.5", "F", OFIELD(warmup_late), 0, 0,
     "bounded/async: during the lockstep warm-up, a step still computing after F times its "
     "peer's recent step time is left out and its gradient dropped, so the rounds go on "
     "without a transient straggler, (bounded: applying the mean of the others' steps; backup "
     "workers, Chen et al. 2016); 0 = wait for it, as "
     "lockstep does; otherwise 1 to 1000"},
    {"staleness-scale", "RING_STALENESS_SCALE", RING_OPT_SWITCH, "off", "on|off",
     OFIELD(staleness_scale), 0, 0,
     "bounded/async: scale each step's gradient by 1/(1+tau), tau = the slowest peer's steps "
     "missing from the parameters it was computed at"},
    {"stale-lr-scale", "RING_STALE_LR_SCALE", RING_OPT_SWITCH, "off", "on|off",
     OFIELD(stale_lr_scale), 0, 0,
     "bounded/async: divide each round's learning rate by 1 + the mean staleness of its "
     "contributions"},
    {"momentum-compensation", "RING_MOMENTUM_COMPENSATION", RING_OPT_SWITCH, "on", "on|off",
     OFIELD(momentum_compensation), 0, 0,
     "bounded/async: staleness acts like extra momentum (Mitliagkas et al. 2016); use "
     "1-(1-momentum)(1+tau) for a round of mean staleness tau (at least 0) so the total "
     "stays near --momentum (with sum, the best of the rules in repeated runs: see "
     "docs/staleness.md)"},
    {"delay-compensation", "RING_DELAY_COMPENSATION", RING_OPT_DOUBLE, "0", "LAMBDA",
     OFIELD(delay_compensation), 0, 0,
     "bounded/async: DC-ASGD (Zheng et al. 2017): add LAMBDA*g*g*(w_now - w_then) to each "
     "step's gradient g, w_then the parameters it started from; 0 = off"},
    {"budget", "RING_BUDGET", RING_OPT_CHOICE, "shared", "shared|per-peer", OFIELD(budget), 0, 0,
     "bounded/async: shared = --epochs counts every peer's samples together, and training "
     "ends when the peers' steps add up to epochs x shard steps x peers, so fast peers train "
     "on while a slow one is behind (as asynchronous SGD does; the samples/s of the run then "
     "count their work); per-peer = every peer does --epochs of its own shard, and the run "
     "lasts as long as the slowest peer's"},
    {"round-update", "RING_ROUND_UPDATE", RING_OPT_CHOICE, "sum", "steps|mean|sum",
     OFIELD(round_update), 0, 0,
     "bounded/async, a round holding K steps of N peers (K > N): sum = one update with their "
     "sum / N, so every sample counts as in lockstep (without --momentum-compensation it "
     "diverged in async runs); mean = one update with the mean of the K steps (a bigger "
     "batch: each step counts N/K); steps = round(K/N) updates sharing the round's average"},
    {"round-idle", "RING_ROUND_IDLE", RING_OPT_DURATION, "auto", "DURATION|auto",
     OFIELD(round_idle_s), -1, 0,
     "bounded/async: how long a peer's engine waits for its trainer's next step before "
     "joining a round with what it has (possibly nothing); auto: a tenth of its recent step "
     "time, 0.5 to 20 ms (a round rarely waits for a step about to land, and idle peers do "
     "not spin empty rounds)"},
    {"fresh-wait", "RING_FRESH_WAIT", RING_OPT_DURATION, "auto", "DURATION|auto",
     OFIELD(fresh_wait_s), -1, 0,
     "bounded/async: how long a step may wait, beyond the bound, for the round that brings "
     "its peers' previous steps when they are about to land (no peer more than one step "
     "behind), so that without stragglers steps see what lockstep's would; 0 = never; auto: "
     "the recent step time, 0.5 to 100 ms (peers out of phase are waited for once, and are "
     "in phase again)"},
    {"fresh-late", "RING_FRESH_LATE", RING_OPT_DOUBLE, "1.25", "F", OFIELD(fresh_late), 0, 0,
     "bounded/async: a step's fresh wait (--fresh-wait) ends as soon as a round says that a "
     "peer it waits for is late, its step still computing after F times its recent step "
     "time (a jittered step, which will not land within the wait); 0 = wait out "
     "--fresh-wait; otherwise 1 to 1000"},
    {"round-gather", "RING_ROUND_GATHER", RING_OPT_DURATION, "auto", "DURATION|auto",
     OFIELD(gather_s), -1, 0,
     "bounded/async: when a round would carry some peers' steps while each other peer's "
     "step is within DURATION of its recent step time, the round waits for those steps "
     "(once), so steps of peers in phase travel in one allreduce, as in lockstep, and not "
     "in two (never for a straggler); 0 = never; auto: a quarter of the recent step time, "
     "0.5 to 50 ms"},
    {"straggler", "RING_STRAGGLER", RING_OPT_CUSTOM, "", "RANK:FACTOR", OFIELD(straggler_rank), 0,
     0, "experiments: that peer's compute takes FACTOR times longer, every step"},
    {"jitter", "RING_JITTER", RING_OPT_CUSTOM, "", "P:FACTOR", OFIELD(jitter_p), 0, 0,
     "experiments: each step, each peer takes FACTOR times longer with probability P "
     "(deterministic from --seed, the step and the rank)"},
    {"epochs", "RING_EPOCHS", RING_OPT_LONG, "10", "N", OFIELD(epochs), 1, 1000000,
     "passes over each peer's shard of the training set"},
    {"max-steps", "RING_MAX_STEPS", RING_OPT_LONG, "0", "N", OFIELD(max_steps), 0, LONG_MAX,
     "stop after this many steps (counted from the start of training, across resumes); 0 = "
     "no limit"},
    {"max-time", "RING_MAX_TIME", RING_OPT_DURATION, "0", "DURATION", OFIELD(max_time_s), 0, 0,
     "stop after this much wall time of this run (like StopAtTimeHook), checkpointing first; "
     "0 = no limit"},
    {"batch-size", "RING_BATCH_SIZE", RING_OPT_INT, "64", "N", OFIELD(batch_size), 1, 65536,
     "samples per step on each peer (the global batch is N peers x this)"},
    {"lr", "RING_LR", RING_OPT_DOUBLE, "0.05", "RATE", OFIELD(lr), 0, 0, "SGD learning rate"},
    {"lr-schedule", "RING_LR_SCHEDULE", RING_OPT_CHOICE, "cosine", "constant|cosine",
     OFIELD(lr_schedule), 0, 0,
     "constant: --lr throughout; cosine: from --lr down to 0 over --epochs (--max-steps and "
     "--max-time stop early without changing it, so resumed runs follow the same path)"},
    {"momentum", "RING_MOMENTUM", RING_OPT_DOUBLE, "0.9", "M", OFIELD(momentum), 0, 0,
     "SGD momentum (0 = plain SGD)"},
    {"weight-decay", "RING_WEIGHT_DECAY", RING_OPT_DOUBLE, "0.0001", "WD", OFIELD(weight_decay), 0, 0,
     "L2 penalty added to every gradient (wd x parameter)"},
    {"seed", "RING_SEED", RING_OPT_COUNT, "1", "N", OFIELD(seed), 0, 0,
     "seeds the initial parameters (same on every peer) and each peer's shuffles"},
    {"hidden", "RING_HIDDEN", RING_OPT_CUSTOM, "256,128", "W,W,...", OFIELD(hidden), 1, 65536,
     "fmnist-mlp: hidden layer widths"},
    {"conv", "RING_CONV", RING_OPT_CUSTOM, "16,32", "C1,C2", OFIELD(conv), 1, 4096,
     "fmnist-cnn: output channels of its two 5x5 conv layers (TensorFlow's tutorial: 32,64)"},
    {"dense", "RING_DENSE", RING_OPT_INT, "128", "W", OFIELD(dense), 1, 65536,
     "fmnist-cnn: width of its dense layer (TensorFlow's tutorial: 1024)"},
    {"params", "RING_PARAMS", RING_OPT_COUNT, "25M", "N", OFIELD(params), 1, 0,
     "synthetic: number of parameters (decimal K/M/G; 25M is ResNet-50's size)"},
    {"compute-ms", "RING_COMPUTE_MS", RING_OPT_DOUBLE, "0", "MS", OFIELD(compute_ms), 0, 0,
     "synthetic: time a step's gradient takes"},
    {"compute-on", "RING_COMPUTE_ON", RING_OPT_CHOICE, "cpu", "cpu|accelerator", OFIELD(compute_on),
     0, 0,
     "synthetic: cpu = --compute-ms of busy work on a core (it competes with the ring for "
     "cores); accelerator = the gradient fill, then the step sleeps out the rest of "
     "--compute-ms, as a host waits on a GPU, leaving the cores to the ring (the case "
     "communication/compute overlap is for)"},
    {"device-ms", "RING_DEVICE_MS", RING_OPT_DOUBLE, "0", "MS", OFIELD(device_ms), 0, 0,
     "every workload: emulate an accelerator. Each step's real gradient is computed, then the "
     "step sleeps until MS have passed since it began, as a host waits on a GPU (a compute "
     "that takes longer is not cut); --straggler and --jitter scale MS. A 2-core machine "
     "stands in for a GPU cluster this way; 0 = off"},
    {"device", "RING_DEVICE", RING_OPT_CHOICE, "cpu", "cpu|cuda", OFIELD(device), 0, 0,
     "fmnist-cnn: where the model runs (cuda needs a build with cuDNN and a GPU)"},
    {"cuda-device", "RING_CUDA_DEVICE", RING_OPT_STRING, "auto", "auto|N", OFIELD(cuda_device), 0, 0,
     "--device cuda: the GPU this peer runs on; auto = its local rank (the launcher's: "
     "RING_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK, ...) modulo the "
     "GPUs it sees, so the peers of a host spread over its GPUs (Horovod's local_rank "
     "pinning); 0 when no launcher says"},
    {"shuffle", "RING_SHUFFLE", RING_OPT_CHOICE, "on", "off|on", OFIELD(shuffle), 0, 0,
     "shuffle each peer's shard every epoch, seeded by (seed, epoch, rank)"},
    {"data-dir", "RING_DATA_DIR", RING_OPT_STRING, "/usr/share/datasets/fashion-mnist", "DIR",
     OFIELD(data_dir), 0, 0, "Fashion-MNIST IDX files (Debian package dataset-fashion-mnist)"},
    {"checkpoint-dir", "RING_CHECKPOINT_DIR", RING_OPT_STRING, "", "DIR", OFIELD(checkpoint_dir), 0,
     0, "rank 0 writes checkpoints here; every peer resumes from the newest valid one"},
    {"checkpoint-every", "RING_CHECKPOINT_EVERY", RING_OPT_CUSTOM, "epoch", "N|DURATION|epoch",
     OFIELD(checkpoint_every), 0, 0,
     "checkpoint every N steps, every DURATION of wall time (e.g. 60s) or every epoch (in "
     "bounded/async, counted by the steps every peer has in the parameters); a final "
     "checkpoint is always written when training stops"},
    {"keep-checkpoints", "RING_KEEP_CHECKPOINTS", RING_OPT_INT, "3", "K", OFIELD(keep_checkpoints), 1,
     1000000, "keep the newest K checkpoints, delete older ones"},
    {"resume", "RING_RESUME", RING_OPT_SWITCH, "on", "on|off", OFIELD(resume), 0, 0,
     "resume from the newest valid checkpoint in --checkpoint-dir (--no-resume: start over; "
     "the earlier run's checkpoints wait in previous-run/ until this run writes one)"},
    {"eval-every", "RING_EVAL_EVERY", RING_OPT_CUSTOM, "epoch", "N|DURATION|epoch", OFIELD(eval_every),
     0, 0, "rank 0 evaluates on the test set every N steps, every DURATION or every epoch "
     "(in the background unless --eval-sync), and once more at the end"},
    {"eval-sync", "RING_EVAL_SYNC", RING_OPT_SWITCH, "off", "on|off", OFIELD(eval_sync), 0, 0,
     "evaluate inside the training loop: lockstep peers each evaluate a share of the test set "
     "and wait for one another; in bounded/async rank 0 evaluates alone while the others run "
     "ahead to the bound. Off: when an evaluation is due, rank 0 copies its parameters and a "
     "thread of its own evaluates the copy while training goes on; the result counts as of "
     "the copy's step and training time (an evaluation due while one is still waiting to "
     "begin replaces it). The final evaluation is in-line either way"},
    {"metrics", "RING_METRICS", RING_OPT_STRING, "", "FILE", OFIELD(metrics), 0, 0,
     "write one JSON line per step to FILE; {rank} in FILE is replaced by the rank (without "
     "it, only rank 0 writes)"},
    {"log-all", "RING_LOG_ALL", RING_OPT_SWITCH, "off", "on|off", OFIELD(log_all), 0, 0,
     "every rank prints progress, not only rank 0"},
    {"progress", "RING_PROGRESS", RING_OPT_CHOICE, "auto", "auto|bar|lines|off", OFIELD(progress), 0,
     0, "auto: a progress bar when stdout is a terminal (under ring-launch too), plain lines "
     "otherwise; its figures are defined under Figures at the end of ringd --help"},
    {"log-interval", "RING_LOG_INTERVAL", RING_OPT_DURATION, "5s", "DURATION",
     OFIELD(log_interval_s), 0, 0, "at most one plain progress line per DURATION"},
    {"poll-interval", "RING_POLL_INTERVAL", RING_OPT_DURATION, "1s", "DURATION",
     OFIELD(poll_interval_s), 0, 0, "evaluator: how often to look for new checkpoints"},
    {"doctor", "RING_DOCTOR", RING_OPT_SWITCH, "off", "on|off", OFIELD(doctor), 0, 0,
     "before training, the ring doctor measures every ring edge (a peer to its right "
     "neighbour) on its own: bandwidth and one-way latency; rank 0 prints the table and names "
     "every edge more than 20% below the median bandwidth, then training starts"},
    {"doctor-only", "RING_DOCTOR_ONLY", RING_OPT_SWITCH, "off", "on|off", OFIELD(doctor_only), 0, 0,
     "run the ring doctor (as --doctor) and exit without training: 0, or 3 when it found a "
     "slow edge"},
    {"elastic", "RINGD_ELASTIC", RING_OPT_CUSTOM, "off", "MIN:MAX|off", OFIELD(elastic_min), 1,
     65535,
     "lockstep: when peers are lost (killed, hung past --timeout) the others go on without "
     "them while at least MIN remain: they shrink the ring, finish the interrupted step, "
     "re-split the rest of the epoch's samples among themselves and train on, without a "
     "restart or a checkpoint; MAX is the most peers the ring may hold (torchrun's "
     "notation; ring-launch --elastic sets RINGD_ELASTIC). Every change is reported (rank 0's "
     "lines, the summary, the metrics). Not "
     "with --mode bounded or async (docs/training.md, Elastic training); off = a lost peer "
     "stops every peer"},
    {"doctor-bytes", "RING_DOCTOR_BYTES", RING_OPT_SIZE, "8M", "SIZE", OFIELD(doctor_bytes), 4096, 0,
     "the ring doctor's bursts (binary K/M/G; fewer bytes on an edge too slow to move them in "
     "0.2 s)"},
};

#define OPT_COUNT_ENTRIES (sizeof(opt_table) / sizeof(opt_table[0]))
_Static_assert(OPT_COUNT_ENTRIES <= sizeof(((daemon_opts_t *)0)->source), "source[] too small");

static int parse_int_list(const char *v, int *vals, int max_n, long lo, long hi, int *n_out)
{
    int n = 0;
    const char *p = v;

    if (*p == '\0')
        return -1;
    while (*p != '\0') {
        char *end;
        long x;

        errno = 0;
        x = strtol(p, &end, 10);
        if (end == p || errno != 0 || x < lo || x > hi || n == max_n)
            return -1;
        vals[n++] = (int)x;
        if (*end == ',' && end[1] != '\0')
            end++;
        else if (*end != '\0')
            return -1;
        p = end;
    }
    *n_out = n;
    return 0;
}

static int parse_every(const char *v, every_t *e)
{
    long steps;

    memset(e, 0, sizeof(*e));
    if (strcmp(v, "epoch") == 0)
        return e->per_epoch = 1, 0;
    if (ring_parse_long(v, &steps) == 0)
        return steps < 0 ? -1 : (e->steps = steps, 0);
    /* anything with a unit is a duration */
    return ring_parse_duration(v, &e->seconds) == 0 && e->seconds > 0 ? 0 : -1;
}

/* --elastic MIN:MAX (torchrun's --nnodes notation), or off */
static int parse_elastic(daemon_opts_t *o, const ring_opt_t *e, const char *v, char *why,
                         size_t len)
{
    long lo, hi;
    char *end;

    if (v[0] == '\0' || strcmp(v, "off") == 0) {
        o->elastic_min = o->elastic_max = 0;
        return 0;
    }
    errno = 0;
    lo = strtol(v, &end, 10);
    if (end == v || *end != ':' || errno != 0 || end[1] == '\0') {
        snprintf(why, len, "not two whole numbers MIN:MAX, the fewest and the most peers the "
                 "ring may have (e.g. 2:4)");
        return -1;
    }
    hi = strtol(end + 1, &end, 10);
    if (*end != '\0' || errno != 0) {
        snprintf(why, len, "not two whole numbers MIN:MAX (e.g. 2:4)");
        return -1;
    }
    if (lo < e->min || hi > e->max) {
        snprintf(why, len, "MIN must be at least %ld (a ring of %ld peer%s) and MAX at most %ld",
                 e->min, e->min, e->min == 1 ? "" : "s", e->max);
        return -1;
    }
    if (lo > hi) {
        snprintf(why, len, "MIN %ld is above MAX %ld", lo, hi);
        return -1;
    }
    o->elastic_min = (int)lo;
    o->elastic_max = (int)hi;
    return 0;
}

/* RING_OPT_CUSTOM entries: the widths, conv pair, every-N, straggler and jitter forms. */
static int custom_parse(void *settings, const ring_opt_t *e, const char *v, char *why,
                        size_t len)
{
    daemon_opts_t *o = settings;
    char *field = (char *)settings + e->offset, *end;
    double a, f;
    int k;

    if (strcmp(e->name, "hidden") == 0) {
        if (parse_int_list(v, o->hidden, WL_MAX_HIDDEN, e->min, e->max, &o->nhidden) == 0)
            return 0;
        snprintf(why, len, "not a comma list of 1 to 8 positive widths");
        return -1;
    }
    if (strcmp(e->name, "conv") == 0) {
        if (parse_int_list(v, (int *)field, 2, e->min, e->max, &k) == 0 && k == 2)
            return 0;
        snprintf(why, len, "not two positive numbers A,B");
        return -1;
    }
    if (strcmp(e->name, "elastic") == 0)
        return parse_elastic(o, e, v, why, len);
    if (strcmp(e->name, "straggler") != 0 && strcmp(e->name, "jitter") != 0) {
        if (parse_every(v, (every_t *)field) == 0)
            return 0;
        snprintf(why, len, "not a step count, a duration with a unit or 'epoch'");
        return -1;
    }
    /* straggler RANK:FACTOR, jitter P:FACTOR; "" = none */
    if (v[0] == '\0') {
        if (strcmp(e->name, "straggler") == 0)
            o->straggler_rank = -1, o->straggler_factor = 1;
        else
            o->jitter_p = 0, o->jitter_factor = 1;
        return 0;
    }
    errno = 0;
    a = strtod(v, &end);
    if (end == v || *end != ':' || errno != 0) {
        snprintf(why, len, "not two numbers A:B");
        return -1;
    }
    f = strtod(end + 1, &end);
    if (*end != '\0' || !(f >= 1) || !isfinite(f)) {
        snprintf(why, len, "FACTOR must be a number >= 1");
        return -1;
    }
    if (strcmp(e->name, "straggler") == 0) {
        if (a < 0 || a != floor(a) || a > 65535) {
            snprintf(why, len, "RANK must be a whole number");
            return -1;
        }
        o->straggler_rank = (int)a, o->straggler_factor = f;
    } else {
        if (!(a >= 0 && a <= 1)) {
            snprintf(why, len, "P must be a probability in 0..1");
            return -1;
        }
        o->jitter_p = a, o->jitter_factor = f;
    }
    return 0;
}

static void custom_format(const void *settings, const ring_opt_t *e, char *buf, size_t len)
{
    const daemon_opts_t *o = settings;
    const char *field = (const char *)settings + e->offset;

    if (strcmp(e->name, "hidden") == 0) {
        size_t at = 0;
        buf[0] = '\0';
        for (int k = 0; k < o->nhidden && at < len; k++)
            at += (size_t)snprintf(buf + at, len - at, "%s%d", k ? "," : "", o->hidden[k]);
    } else if (strcmp(e->name, "conv") == 0) {
        snprintf(buf, len, "%d,%d", ((const int *)field)[0], ((const int *)field)[1]);
    } else if (strcmp(e->name, "straggler") == 0) {
        if (o->straggler_rank < 0)
            snprintf(buf, len, "%s", "");
        else
            snprintf(buf, len, "%d:%g", o->straggler_rank, o->straggler_factor);
    } else if (strcmp(e->name, "elastic") == 0) {
        if (o->elastic_min <= 0)
            snprintf(buf, len, "off");
        else
            snprintf(buf, len, "%d:%d", o->elastic_min, o->elastic_max);
    } else if (strcmp(e->name, "jitter") == 0) {
        if (o->jitter_p <= 0)
            snprintf(buf, len, "%s", "");
        else
            snprintf(buf, len, "%g:%g", o->jitter_p, o->jitter_factor);
    } else {
        every_format((const every_t *)field, buf, len);
    }
}

static const ring_opt_table_t opts = {opt_table, OPT_COUNT_ENTRIES,
                                      offsetof(daemon_opts_t, source), custom_parse,
                                      custom_format};

void daemon_opts_init(daemon_opts_t *o)
{
    char err[256];

    memset(o, 0, sizeof(*o));
    (void)ring_opt_defaults(&opts, o, err, sizeof(err));
}

int daemon_opts_env_known(const char *var, size_t len)
{
    return ring_opt_env_known(&opts, var, len);
}

int daemon_opts_load_env(daemon_opts_t *o, char *err, size_t errlen)
{
    return ring_opt_load_env(&opts, o, err, errlen);
}

int daemon_opts_parse_arg(daemon_opts_t *o, int argc, char **argv, int *i, char *err,
                          size_t errlen)
{
    return ring_opt_parse_arg(&opts, o, argc, argv, i, err, errlen);
}

/* "3" -> 3; -1 for anything but 0..1023 */
static int cuda_device_index(const char *text)
{
    long v;

    return ring_parse_long(text, &v) == 0 && v >= 0 && v <= 1023 ? (int)v : -1;
}

/* 1 when the user set the option (a flag or its RING_* variable), not its default. */
static int opt_given(const daemon_opts_t *o, const char *name)
{
    const ring_opt_t *e = ring_opt_find(&opts, name, strlen(name));

    return e != NULL && o->source[e - opt_table] != RING_OPT_SRC_DEFAULT;
}

/* Options that only one mode or workload reads: given elsewhere they would be
 * silently ignored. */
static int stale_mode(const daemon_opts_t *o) { return o->mode != MODE_LOCKSTEP; }
static int is_mlp(const daemon_opts_t *o) { return strcmp(o->workload, "fmnist-mlp") == 0; }
static int is_cnn(const daemon_opts_t *o) { return strcmp(o->workload, "fmnist-cnn") == 0; }
static int is_synthetic(const daemon_opts_t *o) { return strcmp(o->workload, "synthetic") == 0; }

static const struct scoped_opt {
    const char *name, *applies_to;
    int (*applies)(const daemon_opts_t *o);
} scoped[] = {
    {"warmup-steps", "--mode bounded or async", stale_mode},
    {"warmup-late", "--mode bounded or async", stale_mode},
    {"staleness-scale", "--mode bounded or async", stale_mode},
    {"stale-lr-scale", "--mode bounded or async", stale_mode},
    {"momentum-compensation", "--mode bounded or async", stale_mode},
    {"delay-compensation", "--mode bounded or async", stale_mode},
    {"budget", "--mode bounded or async", stale_mode},
    {"round-update", "--mode bounded or async", stale_mode},
    {"round-idle", "--mode bounded or async", stale_mode},
    {"fresh-wait", "--mode bounded or async", stale_mode},
    {"fresh-late", "--mode bounded or async", stale_mode},
    {"round-gather", "--mode bounded or async", stale_mode},
    {"hidden", "--workload fmnist-mlp", is_mlp},
    {"conv", "--workload fmnist-cnn", is_cnn},
    {"dense", "--workload fmnist-cnn", is_cnn},
    {"params", "--workload synthetic", is_synthetic},
    {"compute-ms", "--workload synthetic", is_synthetic},
    {"compute-on", "--workload synthetic", is_synthetic},
};

int daemon_opts_suggest(const char *word, char *buf, size_t len)
{
    static const char *const program_flags[] = {"help", "version", "print-config", "print-env",
                                                NULL};

    return ring_opt_closest(&opts, word, program_flags, NULL, buf, len);
}

int daemon_opts_ignored(const daemon_opts_t *o, char *buf, size_t len)
{
    size_t used = 0;
    int n = 0;

    if (len > 0)
        buf[0] = '\0';
    for (size_t i = 0; i < sizeof(scoped) / sizeof(scoped[0]); i++) {
        char value[128];

        if (!opt_given(o, scoped[i].name) || scoped[i].applies(o))
            continue;
        (void)daemon_opts_get(o, scoped[i].name, value, sizeof(value));
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s--%s %s applies to %s only",
                                     n > 0 ? "; " : "", scoped[i].name, value,
                                     scoped[i].applies_to);
        n++;
    }
    return n;
}

int daemon_opts_validate(const daemon_opts_t *o, char *err, size_t errlen)
{
    /* a bound the user asked for and would not get */
    if (opt_given(o, "staleness") && o->mode != MODE_BOUNDED) {
        snprintf(err, errlen, "--staleness %ld applies to --mode bounded, and the mode is %s: "
                 "add --mode bounded (or leave out --staleness%s)", o->staleness,
                 o->mode == MODE_ASYNC ? "async" : "lockstep",
                 o->mode == MODE_ASYNC ? "; async has no bound" : "");
        return -1;
    }
    if (o->elastic_min > 0 && o->mode != MODE_LOCKSTEP) {
        snprintf(err, errlen, "--elastic %d:%d works with --mode lockstep only, and the mode is "
                 "%s: when a peer is lost, rounds of stale steps are in flight and the "
                 "survivors have applied different ones, so there is no step to go on from "
                 "that every survivor holds; use --mode lockstep (the default) with --elastic",
                 o->elastic_min, o->elastic_max, o->mode == MODE_ASYNC ? "async" : "bounded");
        return -1;
    }
    if (o->role == ROLE_EVALUATOR && o->checkpoint_dir[0] == '\0') {
        snprintf(err, errlen, "--role evaluator needs --checkpoint-dir DIR: it evaluates the "
                              "checkpoints the trainers write there");
        return -1;
    }
    if (!(o->poll_interval_s > 0)) {
        snprintf(err, errlen, "--poll-interval must be above 0 (the evaluator would spin)");
        return -1;
    }
    if (o->fresh_late != 0 && !(o->fresh_late >= 1 && o->fresh_late <= 1000)) {
        snprintf(err, errlen, "--fresh-late %g: expected 0 (wait out --fresh-wait) or a "
                              "multiple of the recent step time from 1 to 1000 (a step is "
                              "late after F step times)", o->fresh_late);
        return -1;
    }
    if (o->warmup_late != 0 && !(o->warmup_late >= 1 && o->warmup_late <= 1000)) {
        snprintf(err, errlen, "--warmup-late %g: expected 0 (wait for late steps, as lockstep "
                              "does) or a multiple of the recent step time from 1 to 1000 (a "
                              "step is late after F step times)", o->warmup_late);
        return -1;
    }
    if (!(o->momentum < 1.0)) {
        snprintf(err, errlen, "--momentum %g: must be below 1 (the update would grow without "
                              "bound)", o->momentum);
        return -1;
    }
    if (strcmp(o->cuda_device, "auto") != 0 && cuda_device_index(o->cuda_device) < 0) {
        snprintf(err, errlen, "invalid value '%s' for --cuda-device (RING_CUDA_DEVICE): expected "
                 "auto or a device index 0..1023", o->cuda_device);
        return -1;
    }
    if (o->device == WL_DEVICE_CUDA && strcmp(o->workload, "fmnist-cnn") != 0) {
        snprintf(err, errlen, "--device cuda: only the fmnist-cnn workload has a GPU path "
                              "(--workload is %s)", o->workload);
        return -1;
    }
    return 0;
}

int every_due(const every_t *e, uint64_t step, double now, double *last)
{
    if (e->steps > 0)
        return step % (uint64_t)e->steps == 0;
    if (e->seconds > 0 && now - *last >= e->seconds) {
        *last = now;
        return 1;
    }
    return 0;
}

void every_format(const every_t *e, char *buf, size_t len)
{
    if (e->per_epoch)
        snprintf(buf, len, "epoch");
    else if (e->seconds > 0)
        snprintf(buf, len, "%gs", e->seconds);
    else if (e->steps > 0)
        snprintf(buf, len, "%ld", e->steps);
    else
        snprintf(buf, len, "0");
}

void daemon_opts_print_help(FILE *out)
{
    ring_opt_print_help(&opts, out);
}

int daemon_opts_get(const daemon_opts_t *o, const char *name, char *buf, size_t len)
{
    const ring_opt_t *e = ring_opt_find(&opts, name, strlen(name));

    if (e == NULL)
        return -1;
    ring_opt_format(&opts, e, o, buf, len);
    return 0;
}

void daemon_opts_print(const daemon_opts_t *o, FILE *out)
{
    ring_opt_print(&opts, o, out, NULL);
}

void daemon_opts_workload(const daemon_opts_t *o, int local_rank, wl_settings_t *s)
{
    memset(s, 0, sizeof(*s));
    s->data_dir = o->data_dir;
    memcpy(s->hidden, o->hidden, sizeof(s->hidden));
    s->nhidden = o->nhidden;
    s->conv[0] = o->conv[0];
    s->conv[1] = o->conv[1];
    s->dense = o->dense;
    s->seed = o->seed;
    s->batch_size = o->batch_size;
    s->params = o->params;
    s->compute_ms = o->compute_ms;
    s->compute_on = o->compute_on;
    s->device = o->device;
    s->cuda_device = cuda_device_index(o->cuda_device); /* auto: -1 */
    s->local_rank = local_rank;
}
