/*
 * launch_env.c - rank, world size and the way to the peers, from the
 * variables a launcher sets (the list and its order: ringd/launch.h).
 */
#include "ring_build.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/launch.h>

#include "errors.h"
#include "hostlist.h"
#include "launch_int.h"
#include "parse.h"
#include "hash.h"

/* 0 when var is unset or empty, 1 with *out set, or an error naming var. */
static int env_int(const char *var, long min, long max, long *out, ring_status_t *status)
{
    const char *v = getenv(var);

    if (v == NULL || *v == '\0')
        return 0;
    if (ring_parse_long(v, out) != 0 || *out < min || *out > max) {
        *status = ring_error_set(RING_ERR_INVALID, "environment variable %s='%s' is not a "
                                 "number in %ld..%ld (set by the launcher, or by hand?)", var,
                                 v, min, max);
        return -1;
    }
    return 1;
}

static void set_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src);
}

typedef struct launcher_vars {
    const char *name, *rank, *size, *local_rank, *local_size;
} launcher_vars_t;

/* The launchers that say rank and size in plain variables, in the order they are tried. */
static const launcher_vars_t launchers[] = {
    {"ring", "RING_RANK", "RING_WORLD_SIZE", "RING_LOCAL_RANK", NULL},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", NULL},
};

static ring_status_t detect_plain(ring_launch_t *l, const launcher_vars_t *v, int *found)
{
    ring_status_t status = RING_OK;
    const char *size_var = v->size;
    long rank, size = 0, local = -1, lsize = 0;
    int r;

    *found = 0;
    r = env_int(v->rank, 0, 65535, &rank, &status);
    if (r <= 0)
        return status;
    /* RING_RANK alone (the table applies it) leaves the world size to a launcher below */
    if (strcmp(v->name, "ring") == 0 && getenv("RING_WORLD_SIZE") == NULL)
        return RING_OK;
    if (env_int(size_var, 1, 65536, &size, &status) < 0)
        return status;
    if (size == 0 && strcmp(v->name, "slurm") == 0) {
        size_var = "SLURM_NTASKS";
        if (env_int(size_var, 1, 65536, &size, &status) < 0)
            return status;
    }
    if (size == 0 && strcmp(v->name, "ring") != 0 && strcmp(v->name, "slurm") != 0)
        return ring_error_set(RING_ERR_INVALID, "%s=%ld is set but %s is not: is this really "
                              "a %s job?", v->rank, rank, v->size, v->name);
    /* RING_* values are checked with the rest of the settings (ring_config_validate) */
    if (size > 0 && rank >= size && strcmp(v->name, "ring") != 0)
        return ring_error_set(RING_ERR_INVALID, "%s=%ld is out of range for %s=%ld", v->rank,
                              rank, size_var, size);
    if (v->local_rank != NULL && env_int(v->local_rank, 0, 65535, &local, &status) < 0)
        return status;
    if (v->local_size != NULL && env_int(v->local_size, 1, 65536, &lsize, &status) < 0)
        return status;
    snprintf(l->launcher, sizeof(l->launcher), "%s", v->name);
    l->rank = (int)rank;
    snprintf(l->rank_var, sizeof(l->rank_var), "%s", v->rank);
    if (size > 0) {
        l->world_size = (int)size;
        snprintf(l->world_var, sizeof(l->world_var), "%s", size_var);
    }
    if (local >= 0) {
        l->local_rank = (int)local;
        snprintf(l->local_var, sizeof(l->local_var), "%s", v->local_rank);
    }
    l->local_size = (int)lsize;
    if (strcmp(size_var, "SLURM_NTASKS") == 0)
        set_str(l->note, sizeof(l->note), "SLURM_STEP_NUM_TASKS is not set: in a batch "
                "script, start ringd with srun so every task gets its rank");
    *found = 1;
    return RING_OK;
}

/* A port for the store from the job id, so two jobs sharing a first host
 * do not fight over one port: 20000..31999, below Linux's ephemeral range. */
static int port_from_job(const char *job)
{
    return 20000 + (int)(ring_hash_bytes(RING_HASH_INIT, job, strlen(job)) % 12000u);
}

/* The Slurm step's node list: how many hosts, and the first (the store's host). */
static ring_status_t slurm_nodes(ring_launch_t *l, char *first, size_t first_len)
{
    const char *var = "SLURM_STEP_NODELIST";
    const char *spec = getenv(var);
    char **hosts, err[256];
    size_t n;

    if (spec == NULL || *spec == '\0') {
        var = "SLURM_JOB_NODELIST";
        spec = getenv(var);
    }
    first[0] = '\0';
    if (spec == NULL || *spec == '\0')
        return RING_OK;
    if (ring_hostlist_expand(spec, &hosts, &n, err, sizeof(err)) != 0)
        return ring_error_set(RING_ERR_INVALID, "environment variable %s='%s' is not a Slurm "
                              "host list: %s", var, spec, err);
    if (n > 0)
        set_str(first, first_len, hosts[0]);
    l->nhosts = (int)n;
    ring_hostlist_free(hosts, n);
    return RING_OK;
}

static void job_from_env(ring_launch_t *l)
{
    const char *v;

    if ((v = getenv("SLURM_JOB_ID")) != NULL && strcmp(l->launcher, "slurm") == 0) {
        const char *step = getenv("SLURM_STEP_ID");
        snprintf(l->job_id, sizeof(l->job_id), "slurm-%s.%s", v, step != NULL ? step : "0");
        set_str(l->job_var, sizeof(l->job_var), "SLURM_JOB_ID.SLURM_STEP_ID");
    } else if ((v = getenv("OMPI_MCA_ess_base_jobid")) != NULL &&
               strcmp(l->launcher, "openmpi") == 0) {
        snprintf(l->job_id, sizeof(l->job_id), "ompi-%s", v);
        set_str(l->job_var, sizeof(l->job_var), "OMPI_MCA_ess_base_jobid");
    } else if ((v = getenv("TORCHELASTIC_RUN_ID")) != NULL) {
        snprintf(l->job_id, sizeof(l->job_id), "torch-%s", v);
        set_str(l->job_var, sizeof(l->job_var), "TORCHELASTIC_RUN_ID");
    }
}

/* How peers meet when nothing says otherwise (the rules: ringd/launch.h). */
static ring_status_t rendezvous_default(ring_launch_t *l, int port)
{
    const char *addr = getenv("MASTER_ADDR");
    char first[RING_HOST_NAME_MAX];
    const char *port_note = "";
    long p;
    ring_status_t status = RING_OK;

    if (l->peers[0] != '\0')
        return RING_OK;
    if (addr != NULL && *addr != '\0') {
        int r = env_int("MASTER_PORT", 1, 65535, &p, &status);
        if (r < 0)
            return status;
        /* under torchrun its agent's own store holds MASTER_PORT */
        if (r > 0 && strcmp(l->launcher, "torchrun") == 0 &&
            getenv("TORCHELASTIC_RUN_ID") != NULL && p < 65535) {
            p++;
            snprintf(l->rendezvous_why, sizeof(l->rendezvous_why),
                     "MASTER_ADDR, MASTER_PORT+1 (torchrun's agent holds MASTER_PORT)");
        } else {
            snprintf(l->rendezvous_why, sizeof(l->rendezvous_why), "MASTER_ADDR, %s",
                     r > 0 ? "MASTER_PORT" : "--port (no MASTER_PORT)");
        }
        if (port <= 0)
            port = RING_LAUNCH_PORT;
        /* an IPv6 MASTER_ADDR may come with its brackets or without */
        if (addr[0] == '[' && addr[strlen(addr) - 1] == ']')
            snprintf(l->rendezvous, sizeof(l->rendezvous), "tcp://%s:%d", addr,
                     r > 0 ? (int)p : port);
        else
            snprintf(l->rendezvous, sizeof(l->rendezvous), strchr(addr, ':') != NULL
                     ? "tcp://[%s]:%d" : "tcp://%s:%d", addr, r > 0 ? (int)p : port);
        return RING_OK;
    }
    if (port <= 0 && l->job_id[0] != '\0') {
        port = port_from_job(l->job_id);
        port_note = "; port from the job id";
    } else if (port <= 0) {
        port = RING_LAUNCH_PORT;
    }
    if (strcmp(l->launcher, "slurm") == 0) {
        RING_CHECK(slurm_nodes(l, first, sizeof(first)));
        if (l->nhosts == 1 || first[0] == '\0') {
            snprintf(l->rendezvous, sizeof(l->rendezvous), "tcp://127.0.0.1:%d", port);
            snprintf(l->rendezvous_why, sizeof(l->rendezvous_why), "a one-node Slurm step%s",
                     port_note);
        } else {
            snprintf(l->rendezvous, sizeof(l->rendezvous), "tcp://%s:%d", first, port);
            snprintf(l->rendezvous_why, sizeof(l->rendezvous_why),
                     "the first node of the Slurm step%s", port_note);
        }
        return RING_OK;
    }
    if (l->world_size > 0 && l->local_size == l->world_size) {
        snprintf(l->rendezvous, sizeof(l->rendezvous), "tcp://127.0.0.1:%d", port);
        snprintf(l->rendezvous_why, sizeof(l->rendezvous_why),
                 "every rank is on this host (%s)%s", strcmp(l->launcher, "openmpi") == 0
                 ? "OMPI_COMM_WORLD_LOCAL_SIZE" : strcmp(l->launcher, "pmi") == 0
                 ? "MPI_LOCALNRANKS" : "LOCAL_WORLD_SIZE", port_note);
    }
    return RING_OK;
}

ring_status_t ring_launch_detect(ring_launch_t *l, int port)
{
    ring_status_t status = RING_OK;
    const char *tf;
    int found = 0;
    long index;

    memset(l, 0, sizeof(*l));
    l->rank = -1;
    l->local_rank = -1;
    set_str(l->role, sizeof(l->role), "trainer");
    for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]) && !found; i++)
        RING_CHECK(detect_plain(l, &launchers[i], &found));
    tf = getenv("TF_CONFIG");
    if (!found && tf != NULL && *tf != '\0') {
        RING_CHECK(ring_tf_config_parse(tf, l));
        found = 1;
    }
    if (!found) {
        int r = env_int("JOB_COMPLETION_INDEX", 0, 65535, &index, &status);
        if (r < 0)
            return status;
        if (r > 0) {
            set_str(l->launcher, sizeof(l->launcher), "kubernetes");
            l->rank = (int)index;
            set_str(l->rank_var, sizeof(l->rank_var), "JOB_COMPLETION_INDEX");
        }
    }
    job_from_env(l);
    return rendezvous_default(l, port);
}
