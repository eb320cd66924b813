/*
 * print_env.c - ringd --print-env: what the launcher's variables say
 * (ringd/launch.h) and what ringd makes of them after RING_* variables and
 * flags, each with where it came from. One "NAME VALUE (SOURCE)" line per
 * item, so scripts and tests can read it.
 */
#include "ring_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "blas_core.h"
#include "daemon/daemon.h"

static void line(FILE *out, const char *name, const char *value, const char *source)
{
    if (source != NULL && source[0] != '\0')
        fprintf(out, "%-15s %-24s (%s)\n", name, value[0] ? value : "-", source);
    else
        fprintf(out, "%-15s %s\n", name, value[0] ? value : "-");
}

static void line_int(FILE *out, const char *name, int value, int known, const char *source)
{
    char buf[16];

    snprintf(buf, sizeof(buf), "%d", value);
    line(out, name, known ? buf : "", known ? source : "");
}

/* "launcher SLURM_PROCID", "RING_RANK", "flag" or "default": where a setting came from */
static const char *origin(const ring_config_t *cfg, const char *name, const char *env,
                          const char *launcher_var, char *buf, size_t len)
{
    switch (ring_config_source(cfg, name)) {
    case RING_SRC_LAUNCHER:
        snprintf(buf, len, "launcher: %s", launcher_var);
        break;
    case RING_SRC_ENV:
        snprintf(buf, len, "%s", env);
        break;
    case RING_SRC_FLAG:
        snprintf(buf, len, "--%s", name);
        break;
    default:
        snprintf(buf, len, "default");
    }
    return buf;
}

static void print_blas(FILE *out);

void print_env(const daemon_opts_t *opt, const ring_config_t *cfg, FILE *out)
{
    const ring_launch_t *l = &cfg->launch;
    char src[300], num[16], order[16];

    fprintf(out, "# ringd %s: the launcher's variables (NAME VALUE (SOURCE))\n", ring_version());
    line(out, "launcher", l->launcher[0] ? l->launcher : "none", "");
    line_int(out, "rank", l->rank, l->rank >= 0, l->rank_var);
    line_int(out, "world-size", l->world_size, l->world_size > 0, l->world_var);
    line_int(out, "local-rank", l->local_rank, l->local_rank >= 0, l->local_var);
    line_int(out, "local-size", l->local_size, l->local_size > 0, "");
    line_int(out, "hosts", l->nhosts, l->nhosts > 0, "");
    line(out, "rendezvous", l->rendezvous, l->rendezvous_why);
    line(out, "peers", l->peers, l->peers_var);
    line(out, "job-id", l->job_id, l->job_var);
    line(out, "role", l->role, l->role_var);
    if (l->note[0] != '\0')
        line(out, "note", l->note, "");
    fprintf(out, "# what ringd uses (flags > RING_* variables > the launcher > defaults)\n");
    snprintf(num, sizeof(num), "%d", cfg->rank);
    line(out, "use-rank", cfg->rank >= 0 ? num : "", origin(cfg, "rank", "RING_RANK",
                                                            l->rank_var, src, sizeof(src)));
    snprintf(num, sizeof(num), "%d", cfg->world_size);
    line(out, "use-world-size", cfg->world_size > 0 ? num : "",
         origin(cfg, "world-size", "RING_WORLD_SIZE", l->world_var, src, sizeof(src)));
    if (ring_config_uses_rendezvous(cfg))
        line(out, "use-rendezvous", cfg->rendezvous, origin(cfg, "rendezvous", "RING_RENDEZVOUS",
                                                      l->rendezvous_why, src, sizeof(src)));
    else
        line(out, "use-peers", cfg->peers != NULL ? cfg->peers : "",
             origin(cfg, "peers", "RING_PEERS", l->peers_var, src, sizeof(src)));
    line(out, "use-job-id", cfg->job_id, origin(cfg, "job-id", "RING_JOB_ID", l->job_var, src,
                                                sizeof(src)));
    line(out, "use-role", opt->role == ROLE_EVALUATOR ? "evaluator" : "trainer", "");
    if (ring_config_get(cfg, "ring-order", order, sizeof(order)) != RING_OK)
        snprintf(order, sizeof(order), "?");
    line(out, "use-ring-order", order,
         origin(cfg, "ring-order", "RING_RING_ORDER", "", src, sizeof(src)));
    if (cfg->host_id[0] != '\0')
        line(out, "use-host-id", cfg->host_id,
             origin(cfg, "host-id", "RING_HOST_ID", "", src, sizeof(src)));
    else
        line(out, "use-host-id", "-", "the host name");
    print_blas(out);
}

/* OpenBLAS's kernel set; *advice the OPENBLAS_CORETYPE that runs faster ones on this
 * CPU of *level when OpenBLAS fell back to generic code, else NULL */
static const char *blas_kernels(const char **advice, ring_cpu_level_t *level)
{
    const char *core = openblas_get_corename();

    *level = ring_cpu_level_detect();
    *advice = ring_blas_coretype_advice(core, *level);
    return core != NULL ? core : "";
}

static void print_blas(FILE *out)
{
    const char *advice, *core, *chosen = getenv("OPENBLAS_CORETYPE");
    ring_cpu_level_t level;
    char why[160];

    core = blas_kernels(&advice, &level);
    if (chosen != NULL && chosen[0] != '\0')
        snprintf(why, sizeof(why), "OPENBLAS_CORETYPE=%s", chosen);
    else if (advice != NULL)
        snprintf(why, sizeof(why), "OpenBLAS's fallback: this CPU has %s, "
                 "set OPENBLAS_CORETYPE=%s", ring_cpu_level_name(level), advice);
    else
        snprintf(why, sizeof(why), "OpenBLAS's choice for this CPU (%s)",
                 ring_cpu_level_name(level));
    line(out, "blas-kernels", core, why);
}
