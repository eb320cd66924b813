/*
 * options.c - the daemon's option table: flag, RING_* variable, default,
 * doc and parser of every training setting. The ring's own settings are
 * libringd's table (ring_config_*); main.c offers both.
 */
#include "config.h"

#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

typedef enum opt_type {
    OPT_LONG,     /* long, within min..max */
    OPT_INT,      /* int, within min..max */
    OPT_COUNT,    /* uint64_t with decimal K/M/G suffixes (25M = 25,000,000) */
    OPT_DOUBLE,   /* double >= 0 */
    OPT_DURATION, /* seconds: 90, 90s, 500ms, 2m, 1h */
    OPT_STRING,   /* char[OPT_STR_MAX] or char[32] */
    OPT_WORD,     /* char[]: one of the '|'-separated words of unit */
    OPT_CHOICE,   /* int: index of the value among the '|'-separated words of unit */
    OPT_SWITCH,   /* int 0/1: "--flag" alone sets 1; env and --flag=VALUE take on/off */
    OPT_WIDTHS,   /* hidden[]/nhidden: comma list of positive ints */
    OPT_PAIR,     /* int[2]: "A,B" */
    OPT_EVERY,    /* every_t: N (steps), DURATION with a unit, or "epoch" */
    OPT_STRAGGLER, /* "RANK:FACTOR" into straggler_rank/straggler_factor ("" = none) */
    OPT_JITTER,   /* "P:FACTOR" into jitter_p/jitter_factor ("" = none) */
    OPT_SIZE      /* size_t bytes with binary K/M/G suffixes, as the ring's sizes (8M = 8 MiB) */
} opt_type_t;

typedef struct opt_entry {
    const char *name;
    const char *env;
    opt_type_t type;
    const char *defval;
    const char *unit;
    size_t offset, size;
    long min, max;
    const char *doc;
} opt_entry_t;

#define OFIELD(_f) offsetof(daemon_opts_t, _f), sizeof(((daemon_opts_t *)0)->_f)

static const opt_entry_t opt_table[] = {
    {"workload", "RING_WORKLOAD", OPT_WORD, "fmnist-mlp", "fmnist-mlp|fmnist-cnn|synthetic",
     OFIELD(workload), 0, 0, "what to train (see Workloads below)"},
    {"role", "RING_ROLE", OPT_CHOICE, "trainer", "trainer|evaluator", OFIELD(role), 0, 0,
     "trainer: a peer of the ring; evaluator: outside the ring, evaluate every new checkpoint "
     "in --checkpoint-dir"},
    {"mode", "RING_MODE", OPT_CHOICE, "lockstep", "lockstep|bounded|async", OFIELD(mode), 0, 0,
     "lockstep: one allreduce per step, every peer waits for all; bounded: rounds run in the "
     "background and a peer may be up to --staleness steps ahead of the slowest (SSP); async: "
     "no bound"},
    {"staleness", "RING_STALENESS", OPT_LONG, "4", "S", OFIELD(staleness), 0, 1000000,
     "bounded: a peer starts step c only when every peer's steps below c-S are applied "
     "(S=0 is lockstep through rounds)"},
    {"warmup-steps", "RING_WARMUP_STEPS", OPT_LONG, "0", "K", OFIELD(warmup_steps), 0, LONG_MAX,
     "bounded/async: the first K steps run in lockstep, then the chosen mode"},
    {"staleness-scale", "RING_STALENESS_SCALE", OPT_SWITCH, "off", "on|off",
     OFIELD(staleness_scale), 0, 0,
     "bounded/async: scale each step's gradient by 1/(1+tau), tau = the slowest peer's steps "
     "missing from the parameters it was computed at"},
    {"stale-lr-scale", "RING_STALE_LR_SCALE", OPT_SWITCH, "off", "on|off",
     OFIELD(stale_lr_scale), 0, 0,
     "bounded/async: divide each round's learning rate by 1 + the mean staleness of its "
     "contributions"},
    {"momentum-compensation", "RING_MOMENTUM_COMPENSATION", OPT_SWITCH, "off", "on|off",
     OFIELD(momentum_compensation), 0, 0,
     "bounded/async: staleness acts like extra momentum (Mitliagkas et al. 2016); use "
     "1-(1-momentum)(1+tau) for a round of mean staleness tau (at least 0) so the total "
     "stays near --momentum"},
    {"round-update", "RING_ROUND_UPDATE", OPT_CHOICE, "mean", "steps|mean|sum",
     OFIELD(round_update), 0, 0,
     "bounded/async, a round holding K steps of N peers (K > N): mean = one update with the "
     "mean of the K steps (a bigger batch; the most stable); steps = round(K/N) updates "
     "sharing the round's average; sum = one update with their sum / N (with momentum, "
     "overshoots)"},
    {"round-idle", "RING_ROUND_IDLE", OPT_DURATION, "auto", "DURATION|auto",
     OFIELD(round_idle_s), -1, 0,
     "bounded/async: how long a peer's engine waits for its trainer's next step before "
     "joining a round with what it has (possibly nothing); auto: one of its recent step "
     "times, so rounds carry every peer's step unless a peer is late"},
    {"straggler", "RING_STRAGGLER", OPT_STRAGGLER, "", "RANK:FACTOR", OFIELD(straggler_rank), 0,
     0, "experiments: that peer's compute takes FACTOR times longer, every step"},
    {"jitter", "RING_JITTER", OPT_JITTER, "", "P:FACTOR", OFIELD(jitter_p), 0, 0,
     "experiments: each step, each peer takes FACTOR times longer with probability P "
     "(deterministic from --seed, the step and the rank)"},
    {"epochs", "RING_EPOCHS", OPT_LONG, "10", "N", OFIELD(epochs), 1, 1000000,
     "passes over each peer's shard of the training set"},
    {"max-steps", "RING_MAX_STEPS", OPT_LONG, "0", "N", OFIELD(max_steps), 0, LONG_MAX,
     "stop after this many steps (counted from the start of training, across resumes); 0 = "
     "no limit"},
    {"max-time", "RING_MAX_TIME", OPT_DURATION, "0", "DURATION", OFIELD(max_time_s), 0, 0,
     "stop after this much wall time of this run (like StopAtTimeHook), checkpointing first; "
     "0 = no limit"},
    {"batch-size", "RING_BATCH_SIZE", OPT_INT, "64", "N", OFIELD(batch_size), 1, 65536,
     "samples per step on each peer (the global batch is N peers x this)"},
    {"lr", "RING_LR", OPT_DOUBLE, "0.05", "RATE", OFIELD(lr), 0, 0, "SGD learning rate"},
    {"lr-schedule", "RING_LR_SCHEDULE", OPT_CHOICE, "cosine", "constant|cosine",
     OFIELD(lr_schedule), 0, 0,
     "constant: --lr throughout; cosine: from --lr down to 0 over --epochs (--max-steps and "
     "--max-time stop early without changing it, so resumed runs follow the same path)"},
    {"momentum", "RING_MOMENTUM", OPT_DOUBLE, "0.9", "M", OFIELD(momentum), 0, 0,
     "SGD momentum (0 = plain SGD)"},
    {"weight-decay", "RING_WEIGHT_DECAY", OPT_DOUBLE, "0.0001", "WD", OFIELD(weight_decay), 0, 0,
     "L2 penalty added to every gradient (wd x parameter)"},
    {"seed", "RING_SEED", OPT_COUNT, "1", "N", OFIELD(seed), 0, 0,
     "seeds the initial parameters (same on every peer) and each peer's shuffles"},
    {"hidden", "RING_HIDDEN", OPT_WIDTHS, "256,128", "W,W,...", OFIELD(hidden), 1, 65536,
     "fmnist-mlp: hidden layer widths"},
    {"conv", "RING_CONV", OPT_PAIR, "16,32", "C1,C2", OFIELD(conv), 1, 4096,
     "fmnist-cnn: output channels of its two 5x5 conv layers (TensorFlow's tutorial: 32,64)"},
    {"dense", "RING_DENSE", OPT_INT, "128", "W", OFIELD(dense), 1, 65536,
     "fmnist-cnn: width of its dense layer (TensorFlow's tutorial: 1024)"},
    {"params", "RING_PARAMS", OPT_COUNT, "25M", "N", OFIELD(params), 1, 0,
     "synthetic: number of parameters (decimal K/M/G; 25M is ResNet-50's size)"},
    {"compute-ms", "RING_COMPUTE_MS", OPT_DOUBLE, "0", "MS", OFIELD(compute_ms), 0, 0,
     "synthetic: time a step's gradient takes"},
    {"compute-on", "RING_COMPUTE_ON", OPT_CHOICE, "cpu", "cpu|accelerator", OFIELD(compute_on),
     0, 0,
     "synthetic: cpu = --compute-ms of busy work on a core (it competes with the ring for "
     "cores); accelerator = the gradient fill, then the step sleeps out the rest of "
     "--compute-ms, as a host waits on a GPU, leaving the cores to the ring (the case "
     "communication/compute overlap is for)"},
    {"device", "RING_DEVICE", OPT_CHOICE, "cpu", "cpu|cuda", OFIELD(device), 0, 0,
     "fmnist-cnn: where the model runs (cuda needs a build with cuDNN and a GPU)"},
    {"cuda-device", "RING_CUDA_DEVICE", OPT_STRING, "auto", "auto|N", OFIELD(cuda_device), 0, 0,
     "--device cuda: the GPU this peer runs on; auto = its local rank (the launcher's: "
     "RING_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK, ...) modulo the "
     "GPUs it sees, so the peers of a host spread over its GPUs (Horovod's local_rank "
     "pinning); 0 when no launcher says"},
    {"shuffle", "RING_SHUFFLE", OPT_CHOICE, "on", "off|on", OFIELD(shuffle), 0, 0,
     "shuffle each peer's shard every epoch, seeded by (seed, epoch, rank)"},
    {"data-dir", "RING_DATA_DIR", OPT_STRING, "/usr/share/datasets/fashion-mnist", "DIR",
     OFIELD(data_dir), 0, 0, "Fashion-MNIST IDX files (Debian package dataset-fashion-mnist)"},
    {"checkpoint-dir", "RING_CHECKPOINT_DIR", OPT_STRING, "", "DIR", OFIELD(checkpoint_dir), 0,
     0, "rank 0 writes checkpoints here; every peer resumes from the newest valid one"},
    {"checkpoint-every", "RING_CHECKPOINT_EVERY", OPT_EVERY, "epoch", "N|DURATION|epoch",
     OFIELD(checkpoint_every), 0, 0,
     "checkpoint every N steps, every DURATION of wall time (e.g. 60s) or every epoch (in "
     "bounded/async, counted by the steps every peer has in the parameters); a final "
     "checkpoint is always written when training stops"},
    {"keep-checkpoints", "RING_KEEP_CHECKPOINTS", OPT_INT, "3", "K", OFIELD(keep_checkpoints), 1,
     1000000, "keep the newest K checkpoints, delete older ones"},
    {"resume", "RING_RESUME", OPT_SWITCH, "on", "on|off", OFIELD(resume), 0, 0,
     "resume from the newest valid checkpoint in --checkpoint-dir (--no-resume: start over; "
     "the earlier run's checkpoints wait in previous-run/ until this run writes one)"},
    {"eval-every", "RING_EVAL_EVERY", OPT_EVERY, "epoch", "N|DURATION|epoch", OFIELD(eval_every),
     0, 0, "rank 0 evaluates on the test set every N steps, every DURATION or every epoch"},
    {"metrics", "RING_METRICS", OPT_STRING, "", "FILE", OFIELD(metrics), 0, 0,
     "write one JSON line per step to FILE; {rank} in FILE is replaced by the rank (without "
     "it, only rank 0 writes)"},
    {"log-all", "RING_LOG_ALL", OPT_SWITCH, "off", "on|off", OFIELD(log_all), 0, 0,
     "every rank prints progress, not only rank 0"},
    {"progress", "RING_PROGRESS", OPT_CHOICE, "auto", "auto|bar|lines|off", OFIELD(progress), 0,
     0, "auto: a progress bar when stdout is a terminal, plain lines otherwise"},
    {"log-interval", "RING_LOG_INTERVAL", OPT_DURATION, "5s", "DURATION",
     OFIELD(log_interval_s), 0, 0, "at most one plain progress line per DURATION"},
    {"poll-interval", "RING_POLL_INTERVAL", OPT_DURATION, "1s", "DURATION",
     OFIELD(poll_interval_s), 0, 0, "evaluator: how often to look for new checkpoints"},
    {"doctor", "RING_DOCTOR", OPT_SWITCH, "off", "on|off", OFIELD(doctor), 0, 0,
     "before training, the ring doctor measures every ring edge (a peer to its right "
     "neighbour) on its own: bandwidth and one-way latency; rank 0 prints the table and names "
     "every edge more than 20% below the median bandwidth, then training starts"},
    {"doctor-only", "RING_DOCTOR_ONLY", OPT_SWITCH, "off", "on|off", OFIELD(doctor_only), 0, 0,
     "run the ring doctor (as --doctor) and exit without training: 0, or 3 when it found a "
     "slow edge"},
    {"doctor-bytes", "RING_DOCTOR_BYTES", OPT_SIZE, "8M", "SIZE", OFIELD(doctor_bytes), 4096, 0,
     "the ring doctor's bursts (binary K/M/G; fewer bytes on an edge too slow to move them in "
     "0.2 s)"},
};

#define OPT_COUNT_ENTRIES (sizeof(opt_table) / sizeof(opt_table[0]))
_Static_assert(OPT_COUNT_ENTRIES <= sizeof(((daemon_opts_t *)0)->source), "source[] too small");

static const char *const source_names[] = {"default", "environment", "flag", "api"};

static const opt_entry_t *opt_find(const char *name, size_t len)
{
    for (size_t i = 0; i < OPT_COUNT_ENTRIES; i++)
        if (strlen(opt_table[i].name) == len && strncmp(opt_table[i].name, name, len) == 0)
            return &opt_table[i];
    return NULL;
}

/* index of word in the '|'-separated list, or -1 */
static int word_index(const char *list, const char *word)
{
    size_t wl = strlen(word);
    int idx = 0;

    for (const char *p = list; *p != '\0'; idx++) {
        size_t n = strcspn(p, "|");
        if (n == wl && strncmp(p, word, n) == 0)
            return idx;
        p += n;
        if (*p == '|')
            p++;
    }
    return -1;
}

static void word_at(const char *list, int idx, char *buf, size_t len)
{
    const char *p = list;

    for (int i = 0; i < idx && *p != '\0'; i++) {
        p += strcspn(p, "|");
        if (*p == '|')
            p++;
    }
    snprintf(buf, len, "%.*s", (int)strcspn(p, "|"), p);
}

static int parse_switch(const char *v, int *out)
{
    static const char *const yes[] = {"on", "1", "yes", "true", NULL};
    static const char *const no[] = {"off", "0", "no", "false", NULL};

    for (int i = 0; yes[i] != NULL; i++)
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 0;
    for (int i = 0; no[i] != NULL; i++)
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 0;
    return -1;
}

/* decimal count with an optional K/M/G suffix: 25M = 25e6 */
static int parse_count(const char *v, uint64_t *out)
{
    char *end;
    double d;
    double mult = 1;

    errno = 0;
    d = strtod(v, &end);
    if (end == v || errno != 0 || !(d >= 0))
        return -1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1e3, end++; break;
    case 'M': mult = 1e6, end++; break;
    case 'G': mult = 1e9, end++; break;
    default: break;
    }
    d *= mult;
    if (*end != '\0' || d > 1.8e19 || d != floor(d))
        return -1;
    *out = (uint64_t)d;
    return 0;
}

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

static int bad(const opt_entry_t *e, const char *value, const char *why, char *err, size_t errlen)
{
    snprintf(err, errlen, "invalid value '%s' for --%s (%s): %s; expected %s", value, e->name,
             e->env, why, e->unit);
    return -1;
}

static int opt_apply(daemon_opts_t *o, const opt_entry_t *e, const char *v, char *err,
                     size_t errlen)
{
    char *field = (char *)o + e->offset;
    long l;
    double d;
    int k;

    switch (e->type) {
    case OPT_LONG:
    case OPT_INT:
        if (ring_parse_long(v, &l) != 0)
            return bad(e, v, "not an integer", err, errlen);
        if (l < e->min || l > e->max) {
            char why[80];
            snprintf(why, sizeof(why), "out of range %ld..%ld", e->min, e->max);
            return bad(e, v, why, err, errlen);
        }
        if (e->type == OPT_LONG)
            *(long *)field = l;
        else
            *(int *)field = (int)l;
        return 0;
    case OPT_COUNT:
        if (parse_count(v, (uint64_t *)field) != 0)
            return bad(e, v, "not a whole number", err, errlen);
        if (e->min > 0 && *(uint64_t *)field < (uint64_t)e->min)
            return bad(e, v, "must be at least 1", err, errlen);
        return 0;
    case OPT_DOUBLE: {
        char *end;
        errno = 0;
        d = strtod(v, &end);
        if (end == v || *end != '\0' || errno != 0 || !isfinite(d) || d < 0)
            return bad(e, v, "not a non-negative number", err, errlen);
        *(double *)field = d;
        return 0;
    }
    case OPT_DURATION:
        if (e->min == -1 && strcmp(v, "auto") == 0) {
            *(double *)field = -1; /* the caller decides */
            return 0;
        }
        if (ring_parse_duration(v, &d) != 0 || d < 0)
            return bad(e, v, "not a duration", err, errlen);
        *(double *)field = d;
        return 0;
    case OPT_STRING:
        if (strlen(v) >= e->size)
            return bad(e, v, "too long", err, errlen);
        memcpy(field, v, strlen(v) + 1);
        return 0;
    case OPT_WORD:
        if (word_index(e->unit, v) < 0)
            return bad(e, v, "unknown", err, errlen);
        snprintf(field, e->size, "%s", v);
        return 0;
    case OPT_CHOICE:
        if ((k = word_index(e->unit, v)) < 0)
            return bad(e, v, "unknown", err, errlen);
        *(int *)field = k;
        return 0;
    case OPT_SWITCH:
        if (parse_switch(v, &k) != 0)
            return bad(e, v, "not on or off", err, errlen);
        *(int *)field = k;
        return 0;
    case OPT_SIZE:
        if (ring_parse_size(v, (size_t *)field) != 0)
            return bad(e, v, "not a size", err, errlen);
        if (*(size_t *)field < (size_t)e->min)
            return bad(e, v, "too small", err, errlen);
        return 0;
    case OPT_WIDTHS:
        if (parse_int_list(v, o->hidden, WL_MAX_HIDDEN, e->min, e->max, &o->nhidden) != 0)
            return bad(e, v, "not a comma list of 1 to 8 positive widths", err, errlen);
        return 0;
    case OPT_PAIR:
        if (parse_int_list(v, (int *)field, 2, e->min, e->max, &k) != 0 || k != 2)
            return bad(e, v, "not two positive numbers A,B", err, errlen);
        return 0;
    case OPT_EVERY:
        if (parse_every(v, (every_t *)field) != 0)
            return bad(e, v, "not a step count, a duration with a unit or 'epoch'", err, errlen);
        return 0;
    case OPT_STRAGGLER:
    case OPT_JITTER: {
        char *end;
        double a, f;
        if (v[0] == '\0') {
            if (e->type == OPT_STRAGGLER)
                o->straggler_rank = -1, o->straggler_factor = 1;
            else
                o->jitter_p = 0, o->jitter_factor = 1;
            return 0;
        }
        errno = 0;
        a = strtod(v, &end);
        if (end == v || *end != ':' || errno != 0)
            return bad(e, v, "not two numbers A:B", err, errlen);
        f = strtod(end + 1, &end);
        if (*end != '\0' || !(f >= 1) || !isfinite(f))
            return bad(e, v, "FACTOR must be a number >= 1", err, errlen);
        if (e->type == OPT_STRAGGLER) {
            if (a < 0 || a != floor(a) || a > 65535)
                return bad(e, v, "RANK must be a whole number", err, errlen);
            o->straggler_rank = (int)a, o->straggler_factor = f;
        } else {
            if (!(a >= 0 && a <= 1))
                return bad(e, v, "P must be a probability in 0..1", err, errlen);
            o->jitter_p = a, o->jitter_factor = f;
        }
        return 0;
    }
    }
    return bad(e, v, "internal: unknown option type", err, errlen);
}

void daemon_opts_init(daemon_opts_t *o)
{
    char err[256];

    memset(o, 0, sizeof(*o));
    for (size_t i = 0; i < OPT_COUNT_ENTRIES; i++)
        (void)opt_apply(o, &opt_table[i], opt_table[i].defval, err, sizeof(err));
}

int daemon_opts_env_known(const char *var, size_t len)
{
    for (size_t i = 0; i < OPT_COUNT_ENTRIES; i++)
        if (strlen(opt_table[i].env) == len && strncmp(opt_table[i].env, var, len) == 0)
            return 1;
    return 0;
}

int daemon_opts_load_env(daemon_opts_t *o, char *err, size_t errlen)
{
    for (size_t i = 0; i < OPT_COUNT_ENTRIES; i++) {
        const char *v = getenv(opt_table[i].env);

        if (v == NULL)
            continue;
        if (opt_apply(o, &opt_table[i], v, err, errlen) != 0)
            return -1;
        o->source[i] = RING_SRC_ENV;
    }
    return 0;
}

int daemon_opts_parse_arg(daemon_opts_t *o, int argc, char **argv, int *i, char *err,
                          size_t errlen)
{
    const char *arg = argv[*i], *eq, *name, *value;
    const opt_entry_t *e;
    size_t len;
    int negated = 0;

    if (strncmp(arg, "--", 2) != 0)
        return 0;
    name = arg + 2;
    eq = strchr(name, '=');
    len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    e = opt_find(name, len);
    if (e == NULL && len > 3 && strncmp(name, "no-", 3) == 0) {
        e = opt_find(name + 3, len - 3);
        if (e == NULL || e->type != OPT_SWITCH || eq != NULL)
            return 0;
        negated = 1;
    }
    if (e == NULL)
        return 0;
    if (negated || (e->type == OPT_SWITCH && eq == NULL)) {
        *(int *)((char *)o + e->offset) = !negated;
        o->source[e - opt_table] = RING_SRC_FLAG;
        (*i)++;
        return 1;
    }
    if (eq != NULL) {
        value = eq + 1;
        (*i)++;
    } else {
        if (*i + 1 >= argc) {
            snprintf(err, errlen, "--%s needs a value (%s)", e->name, e->unit);
            return -1;
        }
        value = argv[*i + 1];
        *i += 2;
    }
    if (opt_apply(o, e, value, err, errlen) != 0)
        return -1;
    o->source[e - opt_table] = RING_SRC_FLAG;
    return 1;
}

/* "3" -> 3; -1 for anything but 0..1023 */
static int cuda_device_index(const char *text)
{
    long v;

    return ring_parse_long(text, &v) == 0 && v >= 0 && v <= 1023 ? (int)v : -1;
}

int daemon_opts_validate(const daemon_opts_t *o, char *err, size_t errlen)
{
    if (o->role == ROLE_EVALUATOR && o->checkpoint_dir[0] == '\0') {
        snprintf(err, errlen, "--role evaluator needs --checkpoint-dir DIR: it evaluates the "
                              "checkpoints the trainers write there");
        return -1;
    }
    if (!(o->poll_interval_s > 0)) {
        snprintf(err, errlen, "--poll-interval must be above 0 (the evaluator would spin)");
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

static void opt_format(const daemon_opts_t *o, const opt_entry_t *e, char *buf, size_t len)
{
    const char *field = (const char *)o + e->offset;

    switch (e->type) {
    case OPT_LONG: snprintf(buf, len, "%ld", *(const long *)field); break;
    case OPT_INT: snprintf(buf, len, "%d", *(const int *)field); break;
    case OPT_COUNT: snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)field); break;
    case OPT_DOUBLE: snprintf(buf, len, "%g", *(const double *)field); break;
    case OPT_DURATION:
        if (*(const double *)field < 0)
            snprintf(buf, len, "auto");
        else
            snprintf(buf, len, "%gs", *(const double *)field);
        break;
    case OPT_STRING:
    case OPT_WORD: snprintf(buf, len, "%s", field); break;
    case OPT_CHOICE: word_at(e->unit, *(const int *)field, buf, len); break;
    case OPT_SWITCH: snprintf(buf, len, "%s", *(const int *)field ? "on" : "off"); break;
    case OPT_SIZE: snprintf(buf, len, "%zu", *(const size_t *)field); break;
    case OPT_WIDTHS: {
        size_t at = 0;
        buf[0] = '\0';
        for (int k = 0; k < o->nhidden && at < len; k++)
            at += (size_t)snprintf(buf + at, len - at, "%s%d", k ? "," : "", o->hidden[k]);
        break;
    }
    case OPT_PAIR: snprintf(buf, len, "%d,%d", ((const int *)field)[0], ((const int *)field)[1]); break;
    case OPT_EVERY: every_format((const every_t *)field, buf, len); break;
    case OPT_STRAGGLER:
        if (o->straggler_rank < 0)
            snprintf(buf, len, "%s", "");
        else
            snprintf(buf, len, "%d:%g", o->straggler_rank, o->straggler_factor);
        break;
    case OPT_JITTER:
        if (o->jitter_p <= 0)
            snprintf(buf, len, "%s", "");
        else
            snprintf(buf, len, "%g:%g", o->jitter_p, o->jitter_factor);
        break;
    }
}

void daemon_opts_print_help(FILE *out)
{
    for (size_t i = 0; i < OPT_COUNT_ENTRIES; i++) {
        const opt_entry_t *e = &opt_table[i];

        if (e->type == OPT_SWITCH)
            fprintf(out, "  --%s, --no-%s\n", e->name, e->name);
        else
            fprintf(out, "  --%s %s\n", e->name, e->unit);
        fprintf(out, "      %s\n      env %s, default %s\n", e->doc, e->env,
                e->defval[0] ? e->defval : "(none)");
    }
}

int daemon_opts_get(const daemon_opts_t *o, const char *name, char *buf, size_t len)
{
    const opt_entry_t *e = opt_find(name, strlen(name));

    if (e == NULL)
        return -1;
    opt_format(o, e, buf, len);
    return 0;
}

void daemon_opts_print(const daemon_opts_t *o, FILE *out)
{
    for (size_t i = 0; i < OPT_COUNT_ENTRIES; i++) {
        char value[OPT_STR_MAX + 8];

        opt_format(o, &opt_table[i], value, sizeof(value));
        fprintf(out, "%-16s %-24s (%s, %s)\n", opt_table[i].name, value[0] ? value : "\"\"",
                source_names[o->source[i] < 4 ? o->source[i] : 0], opt_table[i].env);
    }
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
