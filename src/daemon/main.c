/*
 * main.c - ringd, the training daemon: settings from flags and RING_*
 * variables, then one of two roles. A trainer joins the ring, trains in
 * lockstep (train.c) or with bounded staleness / asynchronously (ssp.c) and
 * exits 0 when training ends or is stopped; an evaluator watches the
 * checkpoints (evaluator.c).
 *
 * Exit status: 0 done (also after SIGINT/SIGTERM: stopped cleanly),
 * 1 a run-time failure (ring, data, checkpoint), 2 a usage error, 3 the
 * ring doctor (--doctor-only) found a slow edge.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "daemon/daemon.h"
#include "daemon/elastic.h"

extern char **environ;

/* ringd's own defaults of ring settings, over libringd's */
static void ringd_ring_defaults(ring_config_t *cfg)
{
    (void)ring_config_set(cfg, "codec", "fp16", RING_SRC_DEFAULT);
}

static void usage(FILE *out)
{
    ring_config_t defaults;

    fprintf(out,
        "Usage: ringd [OPTIONS]\n"
        "       ring-launch -n N -- ringd [OPTIONS]   (N peers on this host)\n"
        "\n"
        "ringd trains a model data-parallel on a ring of peers: every peer trains on its own\n"
        "shard of the data, the gradients are averaged over the ring every step (fp16 on the\n"
        "wire by default) and every peer applies the same update, so the parameters stay\n"
        "identical everywhere. Rank 0 prints progress, evaluates and writes checkpoints.\n"
        "Rank, world size and peers come from flags, RING_* variables, or the launcher\n"
        "that started ringd (srun, mpirun, torchrun, TF_CONFIG, a Kubernetes indexed Job;\n"
        "see --print-env); with none of them ringd trains alone.\n"
        "\n"
        "Training options (flag, environment variable, default):\n");
    daemon_opts_print_help(out);
    fprintf(out,
        "\n"
        "Ring options (flag, environment variable, default; ringd's own defaults shown):\n");
    ring_config_init(&defaults);
    ringd_ring_defaults(&defaults);
    ring_config_print_help_from(&defaults, out);
    ring_config_free(&defaults);
    fprintf(out,
        "\n"
        "Other options:\n"
        "  --print-config   print every effective setting and where it came from, then exit\n"
        "  --print-env      print what the launcher's variables say (rank, world size, local\n"
        "                   rank, rendezvous, job id) and what ringd uses, then exit\n"
        "  -h, --help       this text\n"
        "  --version        print the version\n"
        "  Value options also accept --opt=VALUE. Flags win over RING_* variables, which\n"
        "  win over defaults.\n"
        "\n"
        "Workloads:\n");
    for (const workload_ops_t *const *w = workload_list(); *w != NULL; w++)
        fprintf(out, "  %-12s %s\n", (*w)->name, (*w)->doc);
    fprintf(out,
        "\n"
        "Signals: SIGINT or SIGTERM on any peer finishes the current step, writes a final\n"
        "checkpoint (with --checkpoint-dir) and stops every peer cleanly (exit 0); a second\n"
        "signal aborts at once.\n"
        "\n"
        "Figures: rank 0's progress lines and summary define them the same way in every\n"
        "mode (docs/training.md, \"What the figures mean\").\n"
        "  samples/s   the samples of all peers per second of wall time\n"
        "  shares      compute, wait (for peers: lockstep's per-step control allreduce, the\n"
        "              staleness bound in bounded/async), comm (the gradient allreduce) and\n"
        "              other split this peer's trainer wall time and add up to 100 %%; in\n"
        "              bounded/async the engine thread's allreduces run alongside and are\n"
        "              given apart (engine comm)\n"
        "  saved       1 - the bytes sent / what the same gradient allreduces would send in\n"
        "              fp32: what the codec saved, whatever the rounds of bounded/async merged\n"
        "\n"
        "Exit status: 0 done or stopped cleanly, 1 run-time failure (the message names the\n"
        "peer, file or setting; a diverged loss says to lower --lr), 2 usage error, 3\n"
        "--doctor-only found a slow edge (every peer; --doctor reports it and trains anyway).\n"
        "\n"
        "Examples:\n"
        "  ring-launch -n 4 -- ringd --workload fmnist-mlp --epochs 5\n"
        "  ring-launch -n 4 -- ringd --checkpoint-dir ckpt --max-time 10m   # run again to resume\n"
        "  ringd --role evaluator --checkpoint-dir ckpt                     # alongside them\n"
        "  ring-launch -n 2 -- ringd --workload synthetic --params 25M --compute-ms 50\n"
        "  ring-launch -n 4 -- ringd --doctor-only                          # check the links\n");
}

/* a warning for every RING_* variable nobody reads (a typo, usually) */
static void check_env(void)
{
    for (char **env = environ; env != NULL && *env != NULL; env++) {
        size_t len = strcspn(*env, "=");
        char name[128], near[128];

        if (strncmp(*env, "RING_", 5) != 0 || ring_config_env_known(*env, len) ||
            daemon_opts_env_known(*env, len))
            continue;
        snprintf(name, sizeof(name), "%.*s", (int)len, *env);
        if (daemon_opts_suggest(name, near, sizeof(near)) ||
            ring_config_suggest(name, near, sizeof(near)))
            fprintf(stderr, "ringd: warning: unknown environment variable %s ignored: did you "
                            "mean %s? (see ringd --help)\n", name, near);
        else
            fprintf(stderr, "ringd: warning: unknown environment variable %s ignored (see "
                            "ringd --help)\n", name);
    }
}

/* An OpenBLAS older than the CPU runs generic kernels, several times slower
 * (ring_launch_blas_advice): name the fix. ring-launch applies it; srun and mpirun
 * do not. */
static void check_blas(int rank)
{
    char why[400];

    if (rank <= 0 && ring_launch_blas_advice(NULL, 0, why, sizeof(why)))
        fprintf(stderr, "ringd: warning: %s\n", why);
}

static int spin_flag_given(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--spin-us", 9) == 0)
            return 1;
    return 0;
}

/* The ring's RING_* variables. libringd's RING_ELASTIC is on|off (a ring that peers may
 * join); ringd's --elastic MIN:MAX is RINGD_ELASTIC: say so to whoever mixed them up. */
static ring_status_t load_ring_env(ring_config_t *cfg)
{
    const char *v = getenv("RING_ELASTIC");
    ring_status_t st = ring_config_load_env(cfg);

    if (st != RING_OK && v != NULL && strchr(v, ':') != NULL)
        fprintf(stderr, "ringd: RING_ELASTIC=%s: ringd's --elastic MIN:MAX is RINGD_ELASTIC; "
                "RING_ELASTIC is libringd's on|off\n", v);
    return st;
}

/* --elastic MIN:MAX against the ring it starts with. 0, or 2 (said why). */
static int check_elastic(const daemon_opts_t *opt, ring_config_t *cfg)
{
    if (opt->elastic_min <= 0 || opt->role != ROLE_TRAINER)
        return 0;
    if (cfg->world_size > 0 &&
        (cfg->world_size < opt->elastic_min || cfg->world_size > opt->elastic_max)) {
        fprintf(stderr, "ringd: --elastic %d:%d: the ring starts with %d peer%s, outside MIN:MAX "
                "(give a MIN at most and a MAX at least the world size)\n", opt->elastic_min,
                opt->elastic_max, cfg->world_size, cfg->world_size > 1 ? "s" : "");
        return 2;
    }
    /* a ring that peers may join: libringd keeps the rendezvous store up (unless the
     * caller set libringd's own setting) */
    if (ring_config_source(cfg, "elastic") == RING_SRC_DEFAULT)
        (void)ring_config_set(cfg, "elastic", "on", RING_SRC_DEFAULT);
    return 0;
}

/* Settings from defaults, environment and argv. 0, 1 (exit 0 now), or 2 (usage error). */
static int parse_settings(int argc, char **argv, daemon_opts_t *opt, ring_config_t *cfg,
                          int *print_config, int *print_env_only)
{
    char err[DAEMON_ERR_MAX];
    int i = 1, rc;

    ring_config_init(cfg);
    ringd_ring_defaults(cfg);
    daemon_opts_init(opt);
    if (load_ring_env(cfg) != RING_OK) {
        fprintf(stderr, "ringd: %s\n", ring_last_error());
        return 2;
    }
    if (daemon_opts_load_env(opt, err, sizeof(err)) != 0) {
        fprintf(stderr, "ringd: %s\n", err);
        return 2;
    }
    /* TF_CONFIG's evaluator task; RING_ROLE and --role still win */
    if (strcmp(cfg->launch.role, "evaluator") == 0 && getenv("RING_ROLE") == NULL)
        opt->role = ROLE_EVALUATOR;
    while (i < argc) {
        const char *a = argv[i];

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "--version") == 0) {
            printf("ringd %s\n", ring_version());
            return 1;
        }
        if (strcmp(a, "--print-config") == 0) {
            *print_config = 1;
            i++;
            continue;
        }
        if (strcmp(a, "--print-env") == 0) {
            *print_env_only = 1;
            i++;
            continue;
        }
        rc = daemon_opts_parse_arg(opt, argc, argv, &i, err, sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "ringd: %s\n", err);
            return 2;
        }
        if (rc > 0)
            continue;
        switch (ring_config_parse_arg(cfg, argc, argv, &i)) {
        case RING_OK:
            continue;
        case RING_ERR_UNSUPPORTED: {
            char near[128];

            if (daemon_opts_suggest(a, near, sizeof(near)) ||
                ring_config_suggest(a, near, sizeof(near)))
                fprintf(stderr, "ringd: unknown option '%s': did you mean '%s'?\nTry 'ringd "
                                "--help'.\n", a, near);
            else
                fprintf(stderr, "ringd: unknown option '%s'\nTry 'ringd --help'.\n", a);
            return 2;
        }
        default:
            fprintf(stderr, "ringd: %s\n", ring_last_error());
            return 2;
        }
    }
    /* the background modes' engine thread shares the cores with the trainer: busy-polling
     * for the network there takes CPU the gradients need (measured: 1.5x samples/s) */
    if (opt->mode != MODE_LOCKSTEP && getenv("RING_SPIN_US") == NULL && !spin_flag_given(argc, argv))
        (void)ring_config_set(cfg, "spin-us", "0", RING_SRC_DEFAULT);
    if (*print_env_only)
        return 0; /* report what was found, valid or not */
    /* no ring given at all: train alone */
    if (cfg->world_size == 0 && cfg->rank < 0 && (cfg->peers == NULL || !cfg->peers[0])) {
        (void)ring_config_set(cfg, "world-size", "1", RING_SRC_DEFAULT);
        (void)ring_config_set(cfg, "rank", "0", RING_SRC_DEFAULT);
        (void)ring_config_set(cfg, "peers", "127.0.0.1:0", RING_SRC_DEFAULT);
    }
    if (daemon_opts_validate(opt, err, sizeof(err)) != 0) {
        fprintf(stderr, "ringd: %s\n", err);
        return 2;
    }
    /* said once (rank 0, or alone): settings this mode or workload would not read */
    if (cfg->rank <= 0 && daemon_opts_ignored(opt, err, sizeof(err)) > 0)
        fprintf(stderr, "ringd: warning: %s; ignored\n", err);
    if (check_elastic(opt, cfg) != 0)
        return 2;
    if (opt->role == ROLE_TRAINER && ring_config_validate(cfg) != RING_OK) {
        fprintf(stderr, "ringd: %s\n", ring_last_error());
        return 2;
    }
    if (opt->straggler_rank >= cfg->world_size && opt->role == ROLE_TRAINER) {
        fprintf(stderr, "ringd: --straggler %d:%g: there is no rank %d in a ring of %d\n",
                opt->straggler_rank, opt->straggler_factor, opt->straggler_rank,
                cfg->world_size);
        return 2;
    }
    return 0;
}

/* a peer admitted into a running ring (--elastic): no start-up exchanges */
static int joiner(const run_t *r)
{
    return ring_comm_joined(r->comm);
}

static int trainer_main(const daemon_opts_t *opt, const ring_config_t *cfg)
{
    const workload_ops_t *ops = workload_find(opt->workload);
    char err[DAEMON_ERR_MAX];
    wl_settings_t s;
    run_t r;
    int rc = 1;

    memset(&r, 0, sizeof(r));
    r.opt = opt;
    r.cfg = cfg;
    r.rank = cfg->rank;
    r.world = cfg->world_size;
    r.chatty = r.rank == 0 || opt->log_all;
    r.test_acc = r.time_to_85 = -1;
    signals_install();
    if (ring_comm_open(cfg, &r.comm) != RING_OK) {
        fprintf(stderr, "ringd[rank %d]: %s\n", r.rank, ring_last_error());
        return 1;
    }
    if (ring_comm_joined(r.comm)) { /* admitted into a running ring: elastic_joined */
        r.rank = ring_comm_rank(r.comm);
        r.world = ring_comm_size(r.comm);
        r.chatty = opt->log_all;
    }
    if (r.world > 1 && !joiner(&r) && agree_settings(r.comm, opt, cfg, err, sizeof(err)) != 0)
        goto fail;
    /* a codec over shared memory may cost more than the bytes it saves: timed
     * once, so that the summary can say so (--codec auto picks at open) */
    if (r.world > 1 && !joiner(&r) &&
        (cfg->codec == RING_CFG_CODEC_FP16 || cfg->codec == RING_CFG_CODEC_BF16) &&
        strcmp(ring_comm_transport(r.comm), "shm") == 0 &&
        ring_comm_time_codec(r.comm, (size_t)4 << 20, &r.codec_fp32_us, &r.codec_wire_us) !=
            RING_OK) {
        snprintf(err, sizeof(err), "timing the codec over shared memory: %s", ring_last_error());
        goto fail;
    }
    if (r.rank == 0 && r.world > 1 && opt->progress != PROGRESS_OFF) {
        char order[16];

        if (ring_config_get(cfg, "ring-order", order, sizeof(order)) != RING_OK)
            snprintf(order, sizeof(order), "?");
        printf("ringd: ring order (%s): %s\n", order, ring_comm_ring_order(r.comm));
        if (ring_comm_autotune_report(r.comm)[0] != '\0')
            printf("ringd: %s\n", ring_comm_autotune_report(r.comm));
    }
    if ((opt->doctor || opt->doctor_only) && !joiner(&r)) {
        /* before the first allreduce: every peer runs it at the same point */
        int d = doctor_main(opt, r.comm, r.rank);
        if (d == 1 || opt->doctor_only) {
            rc = d;
            goto out;
        }
    }
    /* after the ring is up: a peer that cannot load its data closes the ring, and the
     * others hear of it at once instead of waiting for a connect timeout */
    daemon_opts_workload(opt, cfg->launch.local_rank, &s);
    if (ops->create(&s, &r.w, err, sizeof(err)) != 0)
        goto fail;
    if (sgd_init(&r.sgd, r.w->nparams, opt->lr, opt->momentum, opt->weight_decay) != 0 ||
        shard_init(&r.shard, r.w->ntrain, r.rank, r.world, opt->seed, opt->shuffle) != 0) {
        snprintf(err, sizeof(err), "out of memory (or a training set of %zu samples for %d "
                 "peers)", r.w->ntrain, r.world);
        goto fail;
    }
    if (metrics_open(opt, r.rank, &r.metrics, err, sizeof(err)) != 0 ||
        elastic_open(&r, err, sizeof(err)) != 0)
        goto fail;
    if (!joiner(&r) && resume_start(&r, err, sizeof(err)) != 0)
        goto fail;
    if (run_eval_open(&r, err, sizeof(err)) != 0)
        goto fail;
    if (opt->mode == MODE_LOCKSTEP) {
        if (train_run(&r, err, sizeof(err)) != 0)
            goto fail;
        if (r.chatty) {
            progress_summary(&r);
            progress_peer_wait(&r, r.peer_wait);
        }
    } else if (ssp_run(&r, err, sizeof(err)) != 0) { /* prints its own summary */
        goto fail;
    }
    if (r.metrics != NULL)
        metrics_final(r.metrics, &r);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "ringd[rank %d]: error: %s\n", r.rank, err);
out:
    run_eval_close(&r);
    elastic_close(&r);
    ring_comm_close(r.comm);
    if (r.metrics != NULL)
        fclose(r.metrics);
    shard_free(&r.shard);
    sgd_free(&r.sgd);
    free(r.peer_wait);
    if (r.w != NULL)
        r.w->ops->destroy(r.w);
    return rc;
}

int main(int argc, char **argv)
{
    daemon_opts_t opt;
    ring_config_t cfg;
    int print_config = 0, print_env_only = 0, rc;

    rc = parse_settings(argc, argv, &opt, &cfg, &print_config, &print_env_only);
    if (rc != 0) {
        ring_config_free(&cfg);
        return rc == 1 ? 0 : 2;
    }
    check_env();
    if (print_env_only) {
        print_env(&opt, &cfg, stdout);
        ring_config_free(&cfg);
        return 0;
    }
    if (cfg.launch.note[0] != '\0' && cfg.rank <= 0)
        fprintf(stderr, "ringd: note: %s\n", cfg.launch.note);
    if (print_config) {
        printf("# ringd %s: effective settings (value, source, environment variable)\n",
               ring_version());
        daemon_opts_print(&opt, stdout);
        ring_config_print(&cfg, stdout);
        ring_config_free(&cfg);
        return 0;
    }
    /* several peers share the cores: one BLAS thread each */
    openblas_set_num_threads(1);
    check_blas(cfg.rank);
    rc = opt.role == ROLE_EVALUATOR ? evaluator_main(&opt, &cfg) : trainer_main(&opt, &cfg);
    ring_config_free(&cfg);
    return rc;
}
