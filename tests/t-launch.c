/*
 * t-launch.c - what a launcher's variables say (src/launch_env.c,
 * src/tf_config.c; the rules: ringd/launch.h): Open MPI, PMI, torchrun,
 * Slurm, TF_CONFIG and indexed Kubernetes Jobs, their order, the
 * rendezvous each implies, every malformed value refused naming its
 * variable; how ring_config_load_env applies them below the RING_*
 * variables (src/config.c); the rendezvous URL parser (src/rendezvous.c);
 * and the ring's order by host and its description (src/ring_order.c).
 *
 * The test may itself run under Slurm, mpirun or torchrun: clear_env()
 * removes every variable the detection reads before each case.
 */
#include "ring_build.h" /* _GNU_SOURCE for setenv */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/config.h>
#include <ringd/launch.h>
#include <ringd/ringd.h>

#include "errors.h"
#include "rendezvous.h"
#include "ring_order.h"
#include "tap.h"

extern char **environ;

/* ---- the environment ------------------------------------------------- */

static const char *const env_prefixes[] = {"RING_", "OMPI_", "PMI_", "MPI_LOCAL", "SLURM_",
                                           NULL};
static const char *const env_names[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RUN_ID", "TF_CONFIG", "JOB_COMPLETION_INDEX", NULL};

static int env_is_ours(const char *var, size_t len)
{
    for (size_t i = 0; env_prefixes[i] != NULL; i++)
        if (strncmp(var, env_prefixes[i], strlen(env_prefixes[i])) == 0)
            return 1;
    for (size_t i = 0; env_names[i] != NULL; i++)
        if (strlen(env_names[i]) == len && strncmp(var, env_names[i], len) == 0)
            return 1;
    return 0;
}

/* Unset every variable the detection (or ring_config_load_env) reads. The
 * names are copied first: unsetenv reshuffles environ under the loop. */
static void clear_env(void)
{
    char names[256][128];
    size_t n;

    do {
        n = 0;
        for (char **e = environ; e != NULL && *e != NULL && n < 256; e++) {
            size_t len = strcspn(*e, "=");
            if (len < sizeof(names[0]) && env_is_ours(*e, len))
                snprintf(names[n++], sizeof(names[0]), "%.*s", (int)len, *e);
        }
        for (size_t i = 0; i < n; i++)
            unsetenv(names[i]);
    } while (n == 256);
}

/* clear_env(), then set NAME, VALUE pairs up to a NULL name */
static void only_env(const char *name, ...) __attribute__((sentinel));
static void only_env(const char *name, ...)
{
    va_list ap;

    clear_env();
    va_start(ap, name);
    while (name != NULL) {
        const char *value = va_arg(ap, const char *);
        if (setenv(name, value, 1) != 0)
            bail("setenv %s failed", name);
        name = va_arg(ap, const char *);
    }
    va_end(ap);
}

/* ---- detection ------------------------------------------------------- */

#define PORT 29500 /* RING_LAUNCH_PORT: the store's port when nothing chooses one */

static ring_launch_t L;

/* as ring_config_load_env calls it without RING_PORT: the job id may pick the port */
static ring_status_t detect(void)
{
    return ring_launch_detect(&L, 0);
}

/* The tcp port of a rendezvous URL, or -1 when it does not parse as one. */
static int url_port(const char *url)
{
    ring_rdzv_url_t u;
    char why[256];

    if (ring_rdzv_url_parse(url, &u, why, sizeof(why)) != 0 || u.kind != RING_RDZV_TCP)
        return -1;
    return u.port;
}

/* The tcp host of a rendezvous URL, "" when it does not parse as one. */
static const char *url_host(const char *url)
{
    static ring_rdzv_url_t u;
    char why[256];

    if (ring_rdzv_url_parse(url, &u, why, sizeof(why)) != 0 || u.kind != RING_RDZV_TCP)
        return "";
    return u.host;
}

static int job_port_ok(int port)
{
    return port >= 20000 && port <= 31999;
}

/* detection must succeed as launcher with rank/world and their variables */
static void found(const char *what, const char *launcher, int rank, const char *rank_var,
                  int world, const char *world_var)
{
    ring_status_t st = detect();

    if (!is_int(st, RING_OK, "%s: detected", what))
        diag("error: %s", ring_last_error());
    is_str(L.launcher, launcher, "%s: launcher %s", what, launcher);
    is_int(L.rank, rank, "%s: rank %d", what, rank);
    is_str(L.rank_var, rank_var, "%s: rank from '%s'", what, rank_var);
    is_int(L.world_size, world, "%s: world size %d", what, world);
    is_str(L.world_var, world_var, "%s: world size from '%s'", what, world_var);
}

/* detection must fail with RING_ERR_INVALID naming each of the words */
static void refused(const char *what, const char *word1, const char *word2)
{
    ring_status_t st;

    ring_error_set(RING_ERR_INTERNAL, "(stale)");
    st = detect();
    is_int(st, RING_ERR_INVALID, "%s: RING_ERR_INVALID", what);
    like(ring_last_error(), word1, "%s: the message names %s", what, word1);
    if (word2 != NULL)
        like(ring_last_error(), word2, "%s: the message names %s", what, word2);
}

static void test_none(void)
{
    /* clear_env must really take away what a launcher set */
    setenv("SLURM_PROCID", "0", 1);
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("RANK", "0", 1);
    setenv("RING_RANK", "0", 1);
    setenv("TF_CONFIG", "{", 1);
    setenv("JOB_COMPLETION_INDEX", "0", 1);
    setenv("MASTER_ADDR", "somewhere", 1);
    clear_env();
    ok(getenv("SLURM_PROCID") == NULL && getenv("OMPI_COMM_WORLD_RANK") == NULL &&
           getenv("RANK") == NULL && getenv("RING_RANK") == NULL && getenv("TF_CONFIG") == NULL &&
           getenv("JOB_COMPLETION_INDEX") == NULL && getenv("MASTER_ADDR") == NULL,
       "clear_env removes the launchers' variables");
    found("nothing set", "", -1, "", 0, "");
    is_int(L.local_rank, -1, "nothing set: local rank -1");
    is_int(L.local_size, 0, "nothing set: local size 0");
    is_int(L.nhosts, 0, "nothing set: hosts 0");
    is_str(L.rendezvous, "", "nothing set: no rendezvous");
    is_str(L.rendezvous_why, "", "nothing set: no rendezvous reason");
    is_str(L.peers, "", "nothing set: no peer list");
    is_str(L.job_id, "", "nothing set: no job id");
    is_str(L.role, "trainer", "nothing set: role trainer");
    is_str(L.note, "", "nothing set: no note");
    /* empty variables are unset ones */
    only_env("RANK", "", "WORLD_SIZE", "", "SLURM_PROCID", "", "TF_CONFIG", "",
             "JOB_COMPLETION_INDEX", "", NULL);
    found("empty variables", "", -1, "", 0, "");
}

static void test_openmpi(void)
{
    char first[RING_LAUNCH_STR];
    int port;

    only_env("OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "4",
             "OMPI_COMM_WORLD_LOCAL_RANK", "2", "OMPI_COMM_WORLD_LOCAL_SIZE", "4", NULL);
    found("openmpi, one host", "openmpi", 2, "OMPI_COMM_WORLD_RANK", 4, "OMPI_COMM_WORLD_SIZE");
    is_int(L.local_rank, 2, "openmpi: local rank 2");
    is_str(L.local_var, "OMPI_COMM_WORLD_LOCAL_RANK", "openmpi: local rank's variable");
    is_int(L.local_size, 4, "openmpi: local size 4");
    is_str(L.rendezvous, "tcp://127.0.0.1:29500", "openmpi, every rank local: store on "
           "127.0.0.1 at the port argument");
    like(L.rendezvous_why, "OMPI_COMM_WORLD_LOCAL_SIZE", "openmpi: the reason names "
         "OMPI_COMM_WORLD_LOCAL_SIZE");
    is_str(L.job_id, "", "openmpi without a job id variable: no job id");
    is_str(L.note, "", "openmpi: no note");

    setenv("OMPI_MCA_ess_base_jobid", "3735879681", 1);
    found("openmpi with a job id", "openmpi", 2, "OMPI_COMM_WORLD_RANK", 4,
          "OMPI_COMM_WORLD_SIZE");
    is_str(L.job_id, "ompi-3735879681", "openmpi: job id ompi-<OMPI_MCA_ess_base_jobid>");
    is_str(L.job_var, "OMPI_MCA_ess_base_jobid", "openmpi: the job id's variable");
    port = url_port(L.rendezvous);
    is_str(url_host(L.rendezvous), "127.0.0.1", "openmpi with a job id: store on 127.0.0.1");
    ok(job_port_ok(port), "openmpi: the port from the job id is in 20000..31999 (%d)", port);
    ok(port != PORT, "openmpi: the job id's port replaces the default port");
    like(L.rendezvous_why, "job id", "openmpi: the reason says the port is from the job id");
    snprintf(first, sizeof(first), "%s", L.rendezvous);
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    ok(detect() == RING_OK && strcmp(L.rendezvous, first) == 0,
       "openmpi: every rank of the job derives the same store (%s)", L.rendezvous);
    ok(ring_launch_detect(&L, 40000) == RING_OK &&
           strcmp(L.rendezvous, "tcp://127.0.0.1:40000") == 0,
       "openmpi: a port given (RING_PORT) beats the job id's (%s)", L.rendezvous);
    setenv("OMPI_MCA_ess_base_jobid", "3735879682", 1);
    ok(detect() == RING_OK && job_port_ok(url_port(L.rendezvous)) &&
           strcmp(L.rendezvous, first) != 0,
       "openmpi: another job id gives another port (%s)", L.rendezvous);

    only_env("OMPI_COMM_WORLD_RANK", "5", "OMPI_COMM_WORLD_SIZE", "8",
             "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "4",
             "OMPI_MCA_ess_base_jobid", "77", NULL);
    found("openmpi, two hosts", "openmpi", 5, "OMPI_COMM_WORLD_RANK", 8, "OMPI_COMM_WORLD_SIZE");
    is_int(L.local_size, 4, "openmpi, two hosts: local size 4");
    is_str(L.rendezvous, "", "openmpi, local size < size: no rendezvous guessed");
    is_str(L.job_id, "ompi-77", "openmpi, two hosts: job id still read");

    only_env("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", NULL);
    found("openmpi without local variables", "openmpi", 1, "OMPI_COMM_WORLD_RANK", 2,
          "OMPI_COMM_WORLD_SIZE");
    ok(L.local_rank == -1 && L.local_size == 0 && L.local_var[0] == '\0',
       "openmpi without local variables: local rank and size unknown");
    is_str(L.rendezvous, "", "openmpi, local size unknown: no rendezvous guessed");
}

static void test_pmi(void)
{
    only_env("PMI_RANK", "1", "PMI_SIZE", "2", "MPI_LOCALRANKID", "1", "MPI_LOCALNRANKS", "2",
             NULL);
    found("pmi", "pmi", 1, "PMI_RANK", 2, "PMI_SIZE");
    is_int(L.local_rank, 1, "pmi: local rank from MPI_LOCALRANKID");
    is_str(L.local_var, "MPI_LOCALRANKID", "pmi: the local rank's variable");
    is_int(L.local_size, 2, "pmi: local size from MPI_LOCALNRANKS");
    is_str(L.rendezvous, "tcp://127.0.0.1:29500", "pmi, every rank local: store on 127.0.0.1");
    like(L.rendezvous_why, "MPI_LOCALNRANKS", "pmi: the reason names MPI_LOCALNRANKS");

    only_env("PMI_RANK", "3", "PMI_SIZE", "6", "MPI_LOCALRANKID", "0", "MPI_LOCALNRANKS", "3",
             NULL);
    found("pmi, two hosts", "pmi", 3, "PMI_RANK", 6, "PMI_SIZE");
    is_str(L.rendezvous, "", "pmi, local size < size: no rendezvous guessed");

    only_env("PMI_RANK", "0", NULL);
    refused("PMI_RANK without PMI_SIZE", "PMI_RANK", "PMI_SIZE");
    only_env("PMI_RANK", "0", "PMI_SIZE", "2", "MPI_LOCALNRANKS", "0", NULL);
    refused("MPI_LOCALNRANKS=0", "MPI_LOCALNRANKS", "'0'");
}

static void test_torchrun(void)
{
    only_env("RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "3", "LOCAL_WORLD_SIZE", "4",
             "MASTER_ADDR", "10.1.2.3", "MASTER_PORT", "29400", NULL);
    found("torchrun", "torchrun", 3, "RANK", 8, "WORLD_SIZE");
    is_int(L.local_rank, 3, "torchrun: local rank from LOCAL_RANK");
    is_str(L.local_var, "LOCAL_RANK", "torchrun: the local rank's variable");
    is_int(L.local_size, 4, "torchrun: local size from LOCAL_WORLD_SIZE");
    is_str(L.rendezvous, "tcp://10.1.2.3:29400", "torchrun: MASTER_ADDR:MASTER_PORT");
    like(L.rendezvous_why, "MASTER_PORT", "torchrun: the reason names MASTER_PORT");
    is_str(L.job_id, "", "torchrun without TORCHELASTIC_RUN_ID: no job id");

    setenv("TORCHELASTIC_RUN_ID", "exp42", 1);
    found("torchrun elastic", "torchrun", 3, "RANK", 8, "WORLD_SIZE");
    is_str(L.rendezvous, "tcp://10.1.2.3:29401", "torchrun elastic: MASTER_PORT+1 (the "
           "agent's store holds MASTER_PORT)");
    like(L.rendezvous_why, "MASTER_PORT+1", "torchrun elastic: the reason says MASTER_PORT+1");
    is_str(L.job_id, "torch-exp42", "torchrun elastic: job id torch-<TORCHELASTIC_RUN_ID>");
    is_str(L.job_var, "TORCHELASTIC_RUN_ID", "torchrun elastic: the job id's variable");
    setenv("MASTER_PORT", "65535", 1);
    ok(detect() == RING_OK && url_port(L.rendezvous) == 65535,
       "torchrun elastic, MASTER_PORT=65535: no port 65536 (%s)", L.rendezvous);

    only_env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "fd00::1", "MASTER_PORT", "29400",
             NULL);
    found("torchrun, IPv6 MASTER_ADDR", "torchrun", 0, "RANK", 2, "WORLD_SIZE");
    is_str(L.rendezvous, "tcp://[fd00::1]:29400", "torchrun: an IPv6 MASTER_ADDR in brackets");
    is_str(url_host(L.rendezvous), "fd00::1", "torchrun: the IPv6 rendezvous parses back");

    only_env("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "master.example", NULL);
    found("torchrun, MASTER_ADDR alone", "torchrun", 1, "RANK", 2, "WORLD_SIZE");
    is_str(L.rendezvous, "tcp://master.example:29500",
           "MASTER_ADDR without MASTER_PORT: the port argument");
    like(L.rendezvous_why, "no MASTER_PORT", "MASTER_ADDR alone: the reason says so");
    ok(ring_launch_detect(&L, 31337) == RING_OK &&
           strcmp(L.rendezvous, "tcp://master.example:31337") == 0,
       "MASTER_ADDR alone: another port argument, another port (%s)", L.rendezvous);
    setenv("TORCHELASTIC_RUN_ID", "r1", 1);
    ok(detect() == RING_OK && strcmp(L.rendezvous, "tcp://master.example:29500") == 0,
       "MASTER_ADDR alone under torchrun elastic: the port argument, not +1 (%s)",
       L.rendezvous);

    only_env("RANK", "1", "WORLD_SIZE", "4", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4", NULL);
    found("torchrun, one host", "torchrun", 1, "RANK", 4, "WORLD_SIZE");
    is_str(L.rendezvous, "tcp://127.0.0.1:29500", "torchrun, every rank local, no MASTER_ADDR: "
           "127.0.0.1");
    like(L.rendezvous_why, "LOCAL_WORLD_SIZE", "torchrun, one host: the reason names "
         "LOCAL_WORLD_SIZE");
    setenv("TORCHELASTIC_RUN_ID", "abc", 1);
    ok(detect() == RING_OK && strcmp(url_host(L.rendezvous), "127.0.0.1") == 0 &&
           job_port_ok(url_port(L.rendezvous)) && strcmp(L.job_id, "torch-abc") == 0,
       "torchrun, one host, elastic: port from the job id (%s)", L.rendezvous);

    only_env("RANK", "0", NULL);
    refused("RANK without WORLD_SIZE", "RANK", "WORLD_SIZE");
    only_env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "m", "MASTER_PORT", "0", NULL);
    refused("MASTER_PORT=0", "MASTER_PORT", "'0'");
    only_env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "m", "MASTER_PORT", "http", NULL);
    refused("MASTER_PORT=http", "MASTER_PORT", "'http'");
    only_env("RANK", "0", "WORLD_SIZE", "2", "LOCAL_RANK", "zero", NULL);
    refused("LOCAL_RANK=zero", "LOCAL_RANK", "'zero'");
}

static void test_slurm(void)
{
    char first[RING_LAUNCH_STR];
    int port;

    only_env("SLURM_PROCID", "1", "SLURM_STEP_NUM_TASKS", "4", "SLURM_NTASKS", "8",
             "SLURM_LOCALID", "1", "SLURM_STEP_NODELIST", "node[01-04]", "SLURM_JOB_NODELIST",
             "node[01-08]", "SLURM_JOB_ID", "777", "SLURM_STEP_ID", "3", NULL);
    found("slurm", "slurm", 1, "SLURM_PROCID", 4, "SLURM_STEP_NUM_TASKS");
    is_int(L.local_rank, 1, "slurm: local rank from SLURM_LOCALID");
    is_str(L.local_var, "SLURM_LOCALID", "slurm: the local rank's variable");
    is_int(L.nhosts, 4, "slurm: 4 hosts from SLURM_STEP_NODELIST (not the job's 8)");
    is_str(L.job_id, "slurm-777.3", "slurm: job id slurm-<job>.<step>");
    is_str(L.job_var, "SLURM_JOB_ID.SLURM_STEP_ID", "slurm: the job id's variables");
    is_str(url_host(L.rendezvous), "node01", "slurm, four nodes: the store on the first node");
    port = url_port(L.rendezvous);
    ok(job_port_ok(port), "slurm: the port from the job id is in 20000..31999 (%d)", port);
    like(L.rendezvous, "tcp://node01:", "slurm: rendezvous tcp://node01:PORT");
    like(L.rendezvous_why, "first node", "slurm: the reason says the first node");
    is_str(L.note, "", "slurm step: no note");
    snprintf(first, sizeof(first), "%s", L.rendezvous);
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_LOCALID", "0", 1);
    ok(detect() == RING_OK && L.rank == 3 && strcmp(L.rendezvous, first) == 0,
       "slurm: every rank of the step derives the same store");
    setenv("SLURM_STEP_ID", "4", 1);
    ok(detect() == RING_OK && strcmp(L.job_id, "slurm-777.4") == 0 &&
           job_port_ok(url_port(L.rendezvous)) && strcmp(L.rendezvous, first) != 0,
       "slurm: the next step gets another port (%s)", L.rendezvous);
    unsetenv("SLURM_STEP_ID");
    ok(detect() == RING_OK && strcmp(L.job_id, "slurm-777.0") == 0,
       "slurm without SLURM_STEP_ID: step 0 (%s)", L.job_id);

    /* one node: the store on 127.0.0.1 */
    only_env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_STEP_NODELIST", "node07",
             "SLURM_JOB_ID", "12", NULL);
    found("slurm, one node", "slurm", 0, "SLURM_PROCID", 2, "SLURM_STEP_NUM_TASKS");
    is_int(L.nhosts, 1, "slurm, one node: 1 host");
    is_str(url_host(L.rendezvous), "127.0.0.1", "slurm, one node: store on 127.0.0.1");
    ok(job_port_ok(url_port(L.rendezvous)), "slurm, one node: port from the job id (%s)",
       L.rendezvous);
    like(L.rendezvous_why, "one-node", "slurm, one node: the reason says so");
    only_env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_STEP_NODELIST", "n[5-5]",
             NULL);
    ok(detect() == RING_OK && strcmp(L.rendezvous, "tcp://127.0.0.1:29500") == 0,
       "slurm, one node, no job id: 127.0.0.1 at the port argument (%s)", L.rendezvous);

    /* the job's node list when the step's is missing */
    only_env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_JOB_NODELIST",
             "gpu[1-2]", NULL);
    found("slurm, SLURM_JOB_NODELIST", "slurm", 0, "SLURM_PROCID", 2, "SLURM_STEP_NUM_TASKS");
    is_int(L.nhosts, 2, "SLURM_JOB_NODELIST: 2 hosts");
    is_str(L.rendezvous, "tcp://gpu1:29500", "SLURM_JOB_NODELIST: store on its first node, "
           "port argument without a job id");
    setenv("SLURM_STEP_NODELIST", "", 1);
    ok(detect() == RING_OK && strcmp(L.rendezvous, "tcp://gpu1:29500") == 0,
       "an empty SLURM_STEP_NODELIST falls back to SLURM_JOB_NODELIST too (%s)", L.rendezvous);

    /* SLURM_NTASKS when the step's task count is missing (a batch script without srun) */
    only_env("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_JOB_NODELIST", "a,b", NULL);
    found("slurm, SLURM_NTASKS", "slurm", 0, "SLURM_PROCID", 2, "SLURM_NTASKS");
    like(L.note, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS: the note names SLURM_STEP_NUM_TASKS");
    like(L.note, "srun", "SLURM_NTASKS: the note says to use srun");
    is_str(L.rendezvous, "tcp://a:29500", "slurm, plain host list: store on the first host");
    only_env("SLURM_PROCID", "0", NULL);
    found("slurm, no task count", "slurm", 0, "SLURM_PROCID", 0, "");

    /* malformed node lists, named */
    only_env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_STEP_NODELIST",
             "node[01-", "SLURM_JOB_NODELIST", "node[01-02]", NULL);
    refused("SLURM_STEP_NODELIST=node[01-", "SLURM_STEP_NODELIST", "node[01-");
    only_env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_JOB_NODELIST",
             "node[3-1]", NULL);
    refused("SLURM_JOB_NODELIST=node[3-1]", "SLURM_JOB_NODELIST", "node[3-1]");

    /* malformed numbers, named */
    only_env("SLURM_PROCID", "abc", "SLURM_STEP_NUM_TASKS", "2", NULL);
    refused("SLURM_PROCID=abc", "SLURM_PROCID", "'abc'");
    only_env("SLURM_PROCID", "2", "SLURM_STEP_NUM_TASKS", "2", NULL);
    refused("SLURM_PROCID=2 of 2", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS");
    only_env("SLURM_PROCID", "2", "SLURM_NTASKS", "2", NULL);
    refused("SLURM_PROCID=2 of SLURM_NTASKS=2", "SLURM_PROCID", "SLURM_NTASKS");
    only_env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "-3", NULL);
    refused("SLURM_STEP_NUM_TASKS=-3", "SLURM_STEP_NUM_TASKS", "'-3'");
    only_env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_LOCALID", "1.5", NULL);
    refused("SLURM_LOCALID=1.5", "SLURM_LOCALID", "'1.5'");
}

static void test_numbers(void)
{
    only_env("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "0", NULL);
    refused("OMPI_COMM_WORLD_SIZE=0", "OMPI_COMM_WORLD_SIZE", "'0'");
    only_env("OMPI_COMM_WORLD_RANK", "4", "OMPI_COMM_WORLD_SIZE", "4", NULL);
    refused("OMPI_COMM_WORLD_RANK=4 of 4", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    only_env("OMPI_COMM_WORLD_RANK", "-1", "OMPI_COMM_WORLD_SIZE", "4", NULL);
    refused("OMPI_COMM_WORLD_RANK=-1", "OMPI_COMM_WORLD_RANK", "'-1'");
    only_env("OMPI_COMM_WORLD_RANK", "1x", "OMPI_COMM_WORLD_SIZE", "4", NULL);
    refused("OMPI_COMM_WORLD_RANK=1x", "OMPI_COMM_WORLD_RANK", "'1x'");
    only_env("OMPI_COMM_WORLD_RANK", "99999999999999999999", "OMPI_COMM_WORLD_SIZE", "4", NULL);
    refused("OMPI_COMM_WORLD_RANK overflowing", "OMPI_COMM_WORLD_RANK", "99999999999999999999");
    only_env("OMPI_COMM_WORLD_RANK", "0", NULL);
    refused("OMPI_COMM_WORLD_RANK without its size", "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE");
    only_env("RANK", "2", "WORLD_SIZE", "2", NULL);
    refused("RANK=2 of WORLD_SIZE=2", "RANK", "WORLD_SIZE");
    only_env("RING_RANK", "x", NULL);
    refused("RING_RANK=x", "RING_RANK", "'x'");
    /* RING_RANK out of range is left to ring_config_validate */
    only_env("RING_RANK", "5", "RING_WORLD_SIZE", "2", NULL);
    found("RING_RANK=5 of 2 (checked later)", "ring", 5, "RING_RANK", 2, "RING_WORLD_SIZE");
}

static void test_precedence(void)
{
    only_env("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2",
             "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "2", "SLURM_PROCID",
             "0", "SLURM_STEP_NUM_TASKS", "1", "SLURM_STEP_NODELIST", "node[1-9]",
             "SLURM_JOB_ID", "5", NULL);
    found("openmpi inside a Slurm batch step", "openmpi", 1, "OMPI_COMM_WORLD_RANK", 2,
          "OMPI_COMM_WORLD_SIZE");
    is_str(L.rendezvous, "tcp://127.0.0.1:29500", "openmpi over slurm: not the Slurm node "
           "list's store");
    is_str(L.job_id, "", "openmpi over slurm: not Slurm's job id");
    is_int(L.nhosts, 0, "openmpi over slurm: the Slurm node list is not read");

    only_env("PMI_RANK", "1", "PMI_SIZE", "2", "RANK", "0", "WORLD_SIZE", "3", NULL);
    found("pmi and torchrun variables", "pmi", 1, "PMI_RANK", 2, "PMI_SIZE");
    only_env("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "PMI_RANK", "0",
             "PMI_SIZE", "3", NULL);
    found("openmpi and pmi variables", "openmpi", 1, "OMPI_COMM_WORLD_RANK", 2,
          "OMPI_COMM_WORLD_SIZE");

    only_env("RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4",
             "SLURM_PROCID", "1", "SLURM_STEP_NUM_TASKS", "2", "SLURM_LOCALID", "0",
             "SLURM_STEP_NODELIST", "n[1-2]", NULL);
    found("torchrun started by srun", "torchrun", 5, "RANK", 8, "WORLD_SIZE");
    is_int(L.local_rank, 1, "torchrun over slurm: LOCAL_RANK, not SLURM_LOCALID");
    is_str(L.local_var, "LOCAL_RANK", "torchrun over slurm: the local rank's variable");

    only_env("RING_RANK", "3", "RING_WORLD_SIZE", "6", "RING_LOCAL_RANK", "0",
             "OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "PMI_RANK", "1",
             "PMI_SIZE", "2", "RANK", "1", "WORLD_SIZE", "2", "SLURM_PROCID", "1",
             "SLURM_STEP_NUM_TASKS", "2", "TF_CONFIG", "{}", "JOB_COMPLETION_INDEX", "1", NULL);
    found("RING_RANK and every launcher", "ring", 3, "RING_RANK", 6, "RING_WORLD_SIZE");
    is_int(L.local_rank, 0, "ring: local rank from RING_LOCAL_RANK");
    is_str(L.local_var, "RING_LOCAL_RANK", "ring: the local rank's variable");
    /* RING_RANK alone: the table applies it, and the world size still comes from Slurm */
    only_env("RING_RANK", "1", "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", NULL);
    found("RING_RANK without RING_WORLD_SIZE", "slurm", 0, "SLURM_PROCID", 2,
          "SLURM_STEP_NUM_TASKS");

    only_env("SLURM_PROCID", "1", "SLURM_STEP_NUM_TASKS", "4", "SLURM_STEP_NODELIST",
             "node[01-04]", "SLURM_JOB_ID", "9", "MASTER_ADDR", "trainer-0", "MASTER_PORT",
             "23456", NULL);
    found("slurm with MASTER_ADDR", "slurm", 1, "SLURM_PROCID", 4, "SLURM_STEP_NUM_TASKS");
    is_str(L.rendezvous, "tcp://trainer-0:23456", "MASTER_ADDR beats the Slurm node list");
    like(L.rendezvous_why, "MASTER_ADDR", "MASTER_ADDR over slurm: the reason names it");
    is_str(L.job_id, "slurm-9.0", "MASTER_ADDR over slurm: Slurm's job id still read");

    only_env("SLURM_PROCID", "1", "SLURM_STEP_NUM_TASKS", "2", "TF_CONFIG",
             "{\"cluster\":{\"worker\":[\"a:1\",\"b:1\",\"c:1\"]},\"task\":{\"type\":\"worker\","
             "\"index\":2}}",
             NULL);
    found("slurm and TF_CONFIG", "slurm", 1, "SLURM_PROCID", 2, "SLURM_STEP_NUM_TASKS");
    is_str(L.peers, "", "slurm over TF_CONFIG: no TF peer list");
    only_env("TF_CONFIG", "{\"cluster\":{\"worker\":[\"a:1\",\"b:1\"]},\"task\":{\"type\":"
                          "\"worker\",\"index\":1}}",
             "JOB_COMPLETION_INDEX", "0", NULL);
    found("TF_CONFIG and JOB_COMPLETION_INDEX", "tf_config", 1, "TF_CONFIG task: worker 1", 2,
          "TF_CONFIG cluster: 0 chief + 2 worker");
}

/* TF_CONFIG's JSON with "cluster" and "task" around the given parts */
static void tf(const char *cluster, const char *task)
{
    char json[2048];

    snprintf(json, sizeof(json), "{\"cluster\": {%s}, \"task\": {%s}}", cluster, task);
    only_env("TF_CONFIG", json, NULL);
}

#define TF_CW "\"chief\": [\"c0:2222\"], \"worker\": [\"w0:2222\", \"w1:2222\"]"

static void test_tf_config(void)
{
    tf(TF_CW, "\"type\": \"chief\", \"index\": 0");
    found("TF_CONFIG chief", "tf_config", 0, "TF_CONFIG task: chief 0", 3,
          "TF_CONFIG cluster: 1 chief + 2 worker");
    is_str(L.peers, "c0:2222,w0:2222,w1:2222", "TF_CONFIG: peers are the chief, then the "
           "workers in order");
    is_str(L.peers_var, "TF_CONFIG cluster.chief + cluster.worker", "TF_CONFIG: the peers' "
           "source");
    is_str(L.role, "trainer", "TF_CONFIG chief: role trainer");
    is_str(L.rendezvous, "", "TF_CONFIG: a static peer list, no rendezvous");
    is_str(L.note, "", "TF_CONFIG without ps: no note");
    tf(TF_CW, "\"type\": \"chief\"");
    ok(detect() == RING_OK && L.rank == 0, "TF_CONFIG chief without task.index: rank 0");

    tf(TF_CW, "\"type\": \"worker\", \"index\": 0");
    found("TF_CONFIG worker 0 with a chief", "tf_config", 1, "TF_CONFIG task: worker 0", 3,
          "TF_CONFIG cluster: 1 chief + 2 worker");
    tf(TF_CW, "\"type\": \"worker\", \"index\": 1");
    found("TF_CONFIG worker 1 with a chief", "tf_config", 2, "TF_CONFIG task: worker 1", 3,
          "TF_CONFIG cluster: 1 chief + 2 worker");

    tf("\"worker\": [\"w0:1\", \"w1:1\", \"w2:1\"]", "\"type\": \"worker\", \"index\": 1");
    found("TF_CONFIG worker 1 without a chief", "tf_config", 1, "TF_CONFIG task: worker 1", 3,
          "TF_CONFIG cluster: 0 chief + 3 worker");
    is_str(L.peers, "w0:1,w1:1,w2:1", "TF_CONFIG without a chief: the workers");
    tf("\"worker\": [\"w0:1\", \"w1:1\", \"w2:1\"]", "\"type\": \"worker\", \"index\": 0");
    ok(detect() == RING_OK && L.rank == 0, "TF_CONFIG worker 0 without a chief: rank 0");
    tf("\"chief\": [\"c0:1\"]", "\"type\": \"chief\", \"index\": 0");
    found("TF_CONFIG chief alone", "tf_config", 0, "TF_CONFIG task: chief 0", 1,
          "TF_CONFIG cluster: 1 chief + 0 worker");

    /* TF 1's "master" */
    tf("\"master\": [\"m:1\"], \"worker\": [\"w0:1\", \"w1:1\"]",
       "\"type\": \"master\", \"index\": 0");
    found("TF_CONFIG master", "tf_config", 0, "TF_CONFIG task: master 0", 3,
          "TF_CONFIG cluster: 1 chief + 2 worker");
    is_str(L.peers, "m:1,w0:1,w1:1", "TF_CONFIG master: master then workers");
    tf("\"master\": [\"m:1\"], \"worker\": [\"w0:1\", \"w1:1\"]",
       "\"type\": \"worker\", \"index\": 1");
    ok(detect() == RING_OK && L.rank == 2, "TF_CONFIG worker 1 with a master: rank 2 (%d)",
       L.rank);

    /* parameter servers */
    tf(TF_CW ", \"ps\": [\"p0:1\", \"p1:1\"]", "\"type\": \"worker\", \"index\": 1");
    found("TF_CONFIG with ps", "tf_config", 2, "TF_CONFIG task: worker 1", 3,
          "TF_CONFIG cluster: 1 chief + 2 worker");
    is_str(L.peers, "c0:2222,w0:2222,w1:2222", "TF_CONFIG with ps: no ps among the peers");
    like(L.note, "parameter server", "TF_CONFIG with ps: a note about them");
    like(L.note, "2", "TF_CONFIG with ps: the note counts them");
    tf(TF_CW ", \"ps\": [\"p0:1\"]", "\"type\": \"ps\", \"index\": 0");
    refused("TF_CONFIG task ps", "TF_CONFIG", "parameter server");

    /* the evaluator */
    tf(TF_CW ", \"evaluator\": [\"e:1\"]", "\"type\": \"evaluator\", \"index\": 0");
    found("TF_CONFIG evaluator", "tf_config", -1, "", 3, "TF_CONFIG cluster: 1 chief + 2 worker");
    is_str(L.role, "evaluator", "TF_CONFIG evaluator: role evaluator");
    is_str(L.role_var, "TF_CONFIG task.type", "TF_CONFIG evaluator: the role's source");
    is_str(L.peers, "c0:2222,w0:2222,w1:2222", "TF_CONFIG evaluator: peers without it");

    /* a static peer list beats MASTER_ADDR */
    tf(TF_CW, "\"type\": \"worker\", \"index\": 0");
    setenv("MASTER_ADDR", "elsewhere", 1);
    setenv("MASTER_PORT", "1234", 1);
    ok(detect() == RING_OK && L.rendezvous[0] == '\0' && L.peers[0] != '\0',
       "TF_CONFIG with MASTER_ADDR: the peer list, no rendezvous (%s)", L.rendezvous);

    /* malformed JSON */
    only_env("TF_CONFIG", "{\"cluster\": {\"worker\": [\"w0:1\",}", NULL);
    refused("TF_CONFIG broken JSON", "TF_CONFIG", "not valid JSON");
    like(ring_last_error(), "line 1, column", "TF_CONFIG broken JSON: line and column");
    only_env("TF_CONFIG", "{\"cluster\": {\"worker\": [\"w0:1\"]},\n \"task\": {\"type\" "
                          "\"worker\"}}",
             NULL);
    refused("TF_CONFIG broken on line 2", "TF_CONFIG", "line 2, column");
    only_env("TF_CONFIG", "{\"cluster\": {\"worker\": [\"w0:1\"]}, \"task\": {\"type\": "
                          "\"worker\", \"index\": 0}, \"cluster\": {\"worker\": [\"x:1\"]}}",
             NULL);
    refused("TF_CONFIG duplicate key", "TF_CONFIG", "duplicate");
    tf("\"worker\": [\"w0:1\"], \"worker\": [\"w1:1\"]", "\"type\": \"worker\", \"index\": 0");
    refused("TF_CONFIG duplicate cluster.worker", "TF_CONFIG", "duplicate");
    only_env("TF_CONFIG", "[1, 2]", NULL);
    refused("TF_CONFIG a list", "TF_CONFIG", "top level");

    /* missing or mistyped parts */
    only_env("TF_CONFIG", "{\"task\": {\"type\": \"worker\", \"index\": 0}}", NULL);
    refused("TF_CONFIG without cluster", "TF_CONFIG", "\"cluster\"");
    only_env("TF_CONFIG", "{\"cluster\": {\"worker\": [\"w0:1\"]}}", NULL);
    refused("TF_CONFIG without task", "TF_CONFIG", "\"task\"");
    only_env("TF_CONFIG", "{\"cluster\": [\"w0:1\"], \"task\": {\"type\": \"worker\"}}", NULL);
    refused("TF_CONFIG cluster a list", "TF_CONFIG", "\"cluster\"");
    tf(TF_CW, "\"index\": 0");
    refused("TF_CONFIG without task.type", "TF_CONFIG", "task.type");
    tf(TF_CW, "\"type\": \"trainer\", \"index\": 0");
    refused("TF_CONFIG task.type trainer", "TF_CONFIG", "\"trainer\"");
    tf(TF_CW, "\"type\": \"worker\", \"index\": \"1\"");
    refused("TF_CONFIG task.index a string", "TF_CONFIG", "task.index");
    tf(TF_CW, "\"type\": \"worker\", \"index\": -1");
    refused("TF_CONFIG task.index -1", "TF_CONFIG", "task.index");
    tf(TF_CW, "\"type\": \"worker\", \"index\": 2");
    refused("TF_CONFIG worker 2 of 2", "TF_CONFIG", "cluster.worker has 2 entries");
    tf(TF_CW, "\"type\": \"chief\", \"index\": 1");
    refused("TF_CONFIG chief 1", "TF_CONFIG", "chief 1");
    tf("\"worker\": [\"w0:1\"]", "\"type\": \"chief\", \"index\": 0");
    refused("TF_CONFIG chief task without a chief", "TF_CONFIG", "cluster.chief has 0");
    tf("\"chief\": [\"c0:1\", \"c1:1\"], \"worker\": [\"w0:1\"]",
       "\"type\": \"worker\", \"index\": 0");
    refused("TF_CONFIG two chiefs", "TF_CONFIG", "cluster.chief lists 2");
    tf("\"chief\": [\"c0:1\"], \"worker\": \"w0:1\"", "\"type\": \"chief\", \"index\": 0");
    refused("TF_CONFIG cluster.worker a string", "TF_CONFIG", "cluster.worker must be a list");
    tf("\"chief\": {\"c0\": 1}, \"worker\": [\"w0:1\"]", "\"type\": \"worker\", \"index\": 0");
    refused("TF_CONFIG cluster.chief an object", "TF_CONFIG", "cluster.chief must be a list");
    tf("\"worker\": [\"w0:1\", 2222]", "\"type\": \"worker\", \"index\": 0");
    refused("TF_CONFIG a number among the workers", "TF_CONFIG", "cluster.worker[1]");
    tf("\"worker\": [\"w0:1\", null]", "\"type\": \"worker\", \"index\": 0");
    refused("TF_CONFIG null among the workers", "TF_CONFIG", "cluster.worker[1]");
    tf("\"worker\": [\"\"]", "\"type\": \"worker\", \"index\": 0");
    refused("TF_CONFIG an empty worker address", "TF_CONFIG", "cluster.worker[0]");
    tf("\"worker\": [\"w0:1,w1:1\"]", "\"type\": \"worker\", \"index\": 0");
    refused("TF_CONFIG a comma inside an address", "TF_CONFIG", "cluster.worker[0]");
    tf("\"ps\": [\"p0:1\", 7], \"worker\": [\"w0:1\"]", "\"type\": \"worker\", \"index\": 0");
    refused("TF_CONFIG a number among the ps", "TF_CONFIG", "cluster.ps[1]");
    tf("\"ps\": [\"p0:1\"]", "\"type\": \"ps\", \"index\": 0");
    refused("TF_CONFIG only ps", "TF_CONFIG", "no chief and no worker");
    tf("\"chief\": [], \"worker\": []", "\"type\": \"worker\", \"index\": 0");
    refused("TF_CONFIG empty lists", "TF_CONFIG", "no chief and no worker");
}

static void test_kubernetes(void)
{
    only_env("JOB_COMPLETION_INDEX", "3", NULL);
    found("indexed Job", "kubernetes", 3, "JOB_COMPLETION_INDEX", 0, "");
    ok(L.local_rank == -1 && L.local_size == 0 && L.nhosts == 0,
       "indexed Job: nothing known locally");
    is_str(L.rendezvous, "", "indexed Job alone: no rendezvous");
    only_env("JOB_COMPLETION_INDEX", "0", "MASTER_ADDR", "job-0.svc", "MASTER_PORT", "29500",
             NULL);
    found("indexed Job with MASTER_ADDR", "kubernetes", 0, "JOB_COMPLETION_INDEX", 0, "");
    is_str(L.rendezvous, "tcp://job-0.svc:29500", "indexed Job: MASTER_ADDR:MASTER_PORT");
    only_env("JOB_COMPLETION_INDEX", "three", NULL);
    refused("JOB_COMPLETION_INDEX=three", "JOB_COMPLETION_INDEX", "'three'");
}

/* ---- ring_config_load_env -------------------------------------------- */

#define SLURM4 "SLURM_PROCID", "2", "SLURM_STEP_NUM_TASKS", "4", "SLURM_LOCALID", "0", \
               "SLURM_STEP_NODELIST", "node[01-04]", "SLURM_JOB_ID", "99", "SLURM_STEP_ID", "1"

static const char *src_name(ring_config_source_t s)
{
    static const char *const names[] = {"default", "env", "flag", "api", "launcher"};
    return (unsigned)s < 5 ? names[s] : "?";
}

static void is_src(const ring_config_t *cfg, const char *name, ring_config_source_t want,
                   const char *what)
{
    ring_config_source_t got = ring_config_source(cfg, name);

    ok(got == want, "%s: %s from %s (%s)", what, name, src_name(want), src_name(got));
}

static ring_status_t load(ring_config_t *cfg)
{
    ring_status_t st;

    ring_config_init(cfg);
    st = ring_config_load_env(cfg);
    if (st != RING_OK)
        diag("ring_config_load_env: %s", ring_last_error());
    return st;
}

static void test_config(void)
{
    ring_config_t cfg;
    ring_status_t st;
    char launcher_url[RING_LAUNCH_STR];

    /* nothing set: the defaults */
    clear_env();
    is_int(load(&cfg), RING_OK, "config, no launcher: loads");
    ok(cfg.rank == -1 && cfg.world_size == 0 && cfg.rendezvous[0] == '\0' &&
           strcmp(cfg.job_id, "0") == 0,
       "config, no launcher: rank -1, world 0, no rendezvous, job id 0");
    is_src(&cfg, "rank", RING_SRC_DEFAULT, "config, no launcher");
    is_src(&cfg, "job-id", RING_SRC_DEFAULT, "config, no launcher");
    is_int(ring_config_uses_rendezvous(&cfg), 0, "config, no launcher: no rendezvous");
    is_str(cfg.launch.launcher, "", "config, no launcher: cfg.launch is empty");
    ring_config_free(&cfg);

    /* Slurm fills what no RING_* variable gave */
    only_env(SLURM4, NULL);
    is_int(load(&cfg), RING_OK, "config under slurm: loads");
    is_int(cfg.rank, 2, "config under slurm: rank 2");
    is_int(cfg.world_size, 4, "config under slurm: world size 4");
    like(cfg.rendezvous, "tcp://node01:", "config under slurm: rendezvous on the first node");
    is_str(cfg.job_id, "slurm-99.1", "config under slurm: job id");
    is_src(&cfg, "rank", RING_SRC_LAUNCHER, "config under slurm");
    is_src(&cfg, "world-size", RING_SRC_LAUNCHER, "config under slurm");
    is_src(&cfg, "rendezvous", RING_SRC_LAUNCHER, "config under slurm");
    is_src(&cfg, "job-id", RING_SRC_LAUNCHER, "config under slurm");
    is_src(&cfg, "peers", RING_SRC_DEFAULT, "config under slurm");
    is_src(&cfg, "chunk-size", RING_SRC_DEFAULT, "config under slurm");
    is_src(&cfg, "no-such-setting", RING_SRC_DEFAULT, "config under slurm (unknown name)");
    is_str(cfg.launch.launcher, "slurm", "config under slurm: cfg.launch says slurm");
    is_str(cfg.rendezvous, cfg.launch.rendezvous, "config under slurm: the launcher's URL");
    is_int(ring_config_uses_rendezvous(&cfg), 1, "config under slurm: uses the rendezvous");
    st = ring_config_validate(&cfg);
    if (!is_int(st, RING_OK, "config under slurm: validate accepts a rendezvous without peers"))
        diag("%s", ring_last_error());
    snprintf(launcher_url, sizeof(launcher_url), "%s", cfg.rendezvous);

    /* a flag's peer list after the environment beats the launcher's rendezvous */
    ok(ring_config_set(&cfg, "peers", "a:1,b:1,c:1,d:1", RING_SRC_FLAG) == RING_OK,
       "config under slurm: --peers set");
    is_src(&cfg, "rendezvous", RING_SRC_LAUNCHER, "config under slurm, --peers");
    is_int(ring_config_uses_rendezvous(&cfg), 0, "config under slurm: --peers beats the "
           "launcher's rendezvous");
    is_int(ring_config_validate(&cfg), RING_OK, "config under slurm, --peers: validates");
    /* a bad --iface spec */
    ok(ring_config_set(&cfg, "iface", "^", RING_SRC_API) == RING_OK, "iface '^' is stored");
    ring_error_set(RING_ERR_INTERNAL, "(stale)");
    is_int(ring_config_validate(&cfg), RING_ERR_INVALID, "iface '^': validate refuses it");
    like(ring_last_error(), "--iface", "iface '^': the message names --iface");
    like(ring_last_error(), "RING_SOCKET_IFNAME", "iface '^': the message names "
         "RING_SOCKET_IFNAME");
    ring_config_free(&cfg);

    /* the user's RING_RANK wins */
    only_env(SLURM4, "RING_RANK", "3", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_RANK under slurm: loads");
    is_int(cfg.rank, 3, "config, RING_RANK=3 under slurm: rank 3");
    is_src(&cfg, "rank", RING_SRC_ENV, "config, RING_RANK under slurm");
    ring_config_free(&cfg);
    only_env(SLURM4, "RING_RANK", "3", "RING_WORLD_SIZE", "8", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_RANK and RING_WORLD_SIZE under slurm: loads");
    ok(cfg.rank == 3 && cfg.world_size == 8, "config, RING_* under slurm: rank 3 of 8");
    is_src(&cfg, "world-size", RING_SRC_ENV, "config, RING_* under slurm");
    is_str(cfg.launch.launcher, "ring", "config, RING_* under slurm: launcher ring");
    ring_config_free(&cfg);

    /* RING_PEERS: no rendezvous, though the launcher found one */
    only_env(SLURM4, "RING_PEERS", "a:1,b:1,c:1,d:1", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_PEERS under slurm: loads");
    is_str(cfg.launch.rendezvous, launcher_url, "config, RING_PEERS under slurm: the launcher "
           "found its rendezvous");
    is_src(&cfg, "peers", RING_SRC_ENV, "config, RING_PEERS under slurm");
    is_int(ring_config_uses_rendezvous(&cfg), 0, "config, RING_PEERS under slurm: the peer "
           "list, not the rendezvous");
    is_src(&cfg, "rank", RING_SRC_LAUNCHER, "config, RING_PEERS under slurm");
    is_int(ring_config_validate(&cfg), RING_OK, "config, RING_PEERS under slurm: validates");
    ring_config_free(&cfg);

    /* RING_RENDEZVOUS: used, over the launcher's */
    only_env(SLURM4, "RING_RENDEZVOUS", "file:///shared/rdzv", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_RENDEZVOUS under slurm: loads");
    is_str(cfg.rendezvous, "file:///shared/rdzv", "config, RING_RENDEZVOUS: its value");
    is_src(&cfg, "rendezvous", RING_SRC_ENV, "config, RING_RENDEZVOUS under slurm");
    is_int(ring_config_uses_rendezvous(&cfg), 1, "config, RING_RENDEZVOUS: used");
    is_int(ring_config_validate(&cfg), RING_OK, "config, RING_RENDEZVOUS file://: validates");
    ring_config_free(&cfg);
    only_env("RING_RANK", "0", "RING_WORLD_SIZE", "2", "RING_RENDEZVOUS", "tcp://h:1",
             "RING_PEERS", "a:1,b:1", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_RENDEZVOUS and RING_PEERS: loads");
    is_int(ring_config_uses_rendezvous(&cfg), 1, "config, the user's RING_RENDEZVOUS is used "
           "even with RING_PEERS");
    ring_config_free(&cfg);

    /* a bad RING_RENDEZVOUS, named by validate */
    only_env("RING_RANK", "0", "RING_WORLD_SIZE", "2", "RING_RENDEZVOUS", "tcp://store", NULL);
    is_int(load(&cfg), RING_OK, "config, RING_RENDEZVOUS=tcp://store: loads");
    ring_error_set(RING_ERR_INTERNAL, "(stale)");
    is_int(ring_config_validate(&cfg), RING_ERR_INVALID, "config, RING_RENDEZVOUS=tcp://store: "
           "validate refuses it");
    like(ring_last_error(), "RING_RENDEZVOUS", "bad rendezvous: the message names "
         "RING_RENDEZVOUS");
    like(ring_last_error(), "tcp://store", "bad rendezvous: the message quotes it");
    ring_config_free(&cfg);

    /* the port argument is --port / RING_PORT */
    only_env("RING_PORT", "31000", "OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2",
             "OMPI_COMM_WORLD_LOCAL_SIZE", "2", NULL);
    is_int(load(&cfg), RING_OK, "config, openmpi with RING_PORT: loads");
    is_str(cfg.rendezvous, "tcp://127.0.0.1:31000", "config, openmpi on one host: the store at "
           "RING_PORT");
    ring_config_free(&cfg);

    /* torchrun's job id and store */
    only_env("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29400",
             "TORCHELASTIC_RUN_ID", "xyz", NULL);
    is_int(load(&cfg), RING_OK, "config under torchrun: loads");
    ok(cfg.rank == 1 && cfg.world_size == 2 &&
           strcmp(cfg.rendezvous, "tcp://10.0.0.1:29401") == 0 &&
           strcmp(cfg.job_id, "torch-xyz") == 0,
       "config under torchrun: rank 1 of 2, tcp://10.0.0.1:29401, job torch-xyz");
    is_int(ring_config_validate(&cfg), RING_OK, "config under torchrun: validates");
    ring_config_free(&cfg);

    /* TF_CONFIG's peer list */
    tf(TF_CW, "\"type\": \"worker\", \"index\": 1");
    is_int(load(&cfg), RING_OK, "config, TF_CONFIG: loads");
    ok(cfg.rank == 2 && cfg.world_size == 3 &&
           strcmp(cfg.peers, "c0:2222,w0:2222,w1:2222") == 0,
       "config, TF_CONFIG: rank 2 of 3 with the cluster's peers");
    is_src(&cfg, "peers", RING_SRC_LAUNCHER, "config, TF_CONFIG");
    is_int(ring_config_uses_rendezvous(&cfg), 0, "config, TF_CONFIG: the static peer list");
    is_int(ring_config_validate(&cfg), RING_OK, "config, TF_CONFIG: validates");
    ring_config_free(&cfg);

    /* a launcher's malformed variable fails the load, named */
    only_env("SLURM_PROCID", "abc", NULL);
    ring_config_init(&cfg);
    ring_error_set(RING_ERR_INTERNAL, "(stale)");
    is_int(ring_config_load_env(&cfg), RING_ERR_INVALID, "config, SLURM_PROCID=abc: refused");
    like(ring_last_error(), "SLURM_PROCID", "config, SLURM_PROCID=abc: the message names it");
    ring_config_free(&cfg);
}

/* ---- ring_rdzv_url_parse --------------------------------------------- */

static void url_tcp(const char *url, const char *host, int port)
{
    ring_rdzv_url_t u;
    char why[256] = "";
    int rc = ring_rdzv_url_parse(url, &u, why, sizeof(why));

    ok(rc == 0 && u.kind == RING_RDZV_TCP && strcmp(u.host, host) == 0 && u.port == port,
       "'%s' -> tcp host '%s' port %d%s%s", url, rc == 0 ? u.host : "?", rc == 0 ? u.port : -1,
       rc == 0 ? "" : ": ", why);
}

static void url_file(const char *url, const char *path)
{
    ring_rdzv_url_t u;
    char why[256] = "";
    int rc = ring_rdzv_url_parse(url, &u, why, sizeof(why));

    ok(rc == 0 && u.kind == RING_RDZV_FILE && strcmp(u.path, path) == 0,
       "'%s' -> file '%s'%s%s", url, rc == 0 ? u.path : "?", rc == 0 ? "" : ": ", why);
}

static void url_bad(const char *url, const char *word)
{
    ring_rdzv_url_t u;
    char why[256] = "";
    int rc = ring_rdzv_url_parse(url, &u, why, sizeof(why));

    ok(rc == -1 && strstr(why, word) != NULL, "'%.60s%s' refused: %s", url,
       strlen(url) > 60 ? "..." : "", why);
}

static void test_urls(void)
{
    char long_url[5000];

    url_tcp("tcp://store.example:29500", "store.example", 29500);
    url_tcp("tcp://10.0.0.1:1", "10.0.0.1", 1);
    url_tcp("tcp://h:65535", "h", 65535);
    url_tcp("tcp://[::1]:29500", "::1", 29500);
    url_tcp("tcp://[fd00::1:2]:80", "fd00::1:2", 80);
    url_tcp("tcp://[fe80::1%eth0]:5", "fe80::1%eth0", 5);
    url_file("file:///shared/rdzv", "/shared/rdzv");
    url_file("file:///", "/");
    url_bad("", "expected tcp://HOST:PORT or file:///DIR");
    url_bad("http://h:1", "expected tcp://HOST:PORT or file:///DIR");
    url_bad("store:29500", "expected tcp://HOST:PORT or file:///DIR");
    url_bad("tcp://store", "expected tcp://HOST:PORT");
    url_bad("tcp://::1:29500", "IPv6 as tcp://[ADDR]:PORT");
    url_bad("tcp://[::1]", "brackets and a port");
    url_bad("tcp://[::1]29500", "brackets and a port");
    url_bad("tcp://[::1:29500", "brackets and a port");
    url_bad("tcp://:29500", "empty");
    url_bad("tcp://[]:29500", "empty");
    url_bad("tcp://h:0", "1..65535");
    url_bad("tcp://h:65536", "1..65535");
    url_bad("tcp://h:-1", "1..65535");
    url_bad("tcp://h:", "1..65535");
    url_bad("tcp://h:http", "1..65535");
    url_bad("tcp://h:29500/", "1..65535");
    url_bad("file://relative/dir", "absolute");
    url_bad("file://", "absolute");
    memcpy(long_url, "tcp://", 6);
    memset(long_url + 6, 'h', 300);
    snprintf(long_url + 306, sizeof(long_url) - 306, ":1");
    url_bad(long_url, "too long");
    memcpy(long_url, "file://", 7);
    memset(long_url + 7, '/', 4500);
    long_url[4507] = '\0';
    url_bad(long_url, "too long");
}

/* ---- ring order ------------------------------------------------------ */

static const char *join(const int *order, int n)
{
    static char buf[512];
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && used < sizeof(buf); i++)
        used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%d", i ? "," : "", order[i]);
    return buf;
}

/* order by host, then its description */
static void by_host(const char *const *hosts, int n, const char *want_order, const char *want)
{
    int order[64] = {0}, rc = ring_order_by_host(hosts, n, order);
    char desc[512];

    ok(rc == 0 && strcmp(join(order, n), want_order) == 0, "by host: order %s (want %s)",
       join(order, n), want_order);
    ring_order_describe(hosts, order, n, desc, sizeof(desc));
    is_str(desc, want, "by host: '%s'", want);
}

static void test_order(void)
{
    static const char *const abab[] = {"a", "b", "a", "b"};
    static const char *const baba[] = {"b", "a", "b", "a"};
    static const char *const same[] = {"h", "h", "h", "h"};
    static const char *const xyz[] = {"x", "y", "z"};
    static const char *const aabba[] = {"a", "a", "b", "b", "a"};
    static const char *const solo[] = {"solo"};
    static const char *const two[] = {"a", "b"};
    const char *many[64];
    char names[64][16], full[1024], buf[64];
    int order[64], rc;

    by_host(abab, 4, "0,2,1,3", "a[0,2] -> b[1,3]");
    by_host(baba, 4, "0,2,1,3", "b[0,2] -> a[1,3]");
    by_host(same, 4, "0,1,2,3", "h[0-3]");
    by_host(xyz, 3, "0,1,2", "x[0] -> y[1] -> z[2]");
    by_host(aabba, 5, "0,1,4,2,3", "a[0-1,4] -> b[2-3]");
    by_host(solo, 1, "0", "solo[0]");

    ring_order_by_rank(5, order);
    is_str(join(order, 5), "0,1,2,3,4", "by rank: the identity");
    ring_order_by_rank(4, order);
    ring_order_describe(abab, order, 4, full, sizeof(full));
    is_str(full, "a[0] -> b[1] -> a[2] -> b[3]", "by rank over a,b,a,b: each rank its own hop");

    /* 64 ranks, 8 hosts round robin: a long description */
    for (int i = 0; i < 64; i++) {
        snprintf(names[i], sizeof(names[i]), "host-%02d", i % 8);
        many[i] = names[i];
    }
    rc = ring_order_by_host(many, 64, order);
    ok(rc == 0 && order[0] == 0 && order[1] == 8 &&
           order[7] == 56 && order[8] == 1 && order[63] == 63,
       "by host, 8 hosts x 8 ranks round robin: host-00's ranks first (%d,%d,..,%d,%d)",
       order[0], order[1], order[8], order[63]);
    ring_order_describe(many, order, 64, full, sizeof(full));
    like(full, "host-00[0,8,16,24,32,40,48,56] -> host-01[1,9,", "the full description (%zu "
         "bytes)", strlen(full));
    memset(buf, 0x5a, sizeof(buf));
    ring_order_describe(many, order, 64, buf, 32);
    ok((unsigned char)buf[32] == 0x5a && memchr(buf, '\0', 32) != NULL,
       "a 32-byte buffer: nothing written past it");
    ok(strlen(buf) == 31 && strcmp(buf + 28, "...") == 0 && strncmp(buf, full, 28) == 0,
       "a 32-byte buffer: cut with '...': '%s'", buf);

    /* every buffer size: never past len, the whole text or a prefix cut with "..." */
    {
        static const char *const hosts[] = {"a", "b", "a", "c"};
        int bad_over = 0, bad_cut = 0, worst_len = 0;
        size_t flen;

        ring_order_by_host(hosts, 4, order);
        ring_order_describe(hosts, order, 4, full, sizeof(full));
        flen = strlen(full); /* "a[0,2] -> b[1] -> c[3]" */
        for (size_t len = 1; len <= flen + 2; len++) {
            memset(buf, 0x5a, sizeof(buf));
            ring_order_describe(hosts, order, 4, buf, len);
            if ((unsigned char)buf[len] != 0x5a || memchr(buf, '\0', len) == NULL) {
                bad_over++;
                continue;
            }
            if (len > flen ? strcmp(buf, full) != 0
                           : len > 4 && (strlen(buf) != len - 1 || strcmp(buf + len - 4, "...") != 0 ||
                                         strncmp(buf, full, len - 4) != 0)) {
                if (bad_cut++ == 0)
                    worst_len = (int)len;
            }
        }
        ok(bad_over == 0, "describe with every buffer size 1..%zu: never past the buffer",
           flen + 2);
        ok(bad_cut == 0, "describe with every buffer size 5..%zu: the text, or cut with '...'",
           flen + 2);
        if (bad_cut != 0) {
            ring_order_describe(hosts, order, 4, buf, (size_t)worst_len);
            diag("%d sizes wrong, first len %d: '%s' (full '%s')", bad_cut, worst_len, buf,
                 full);
        }
    }
    ring_order_describe(two, (const int[]){0, 1}, 2, buf, 5);
    ok(strcmp(buf, "a...") == 0, "'a[0] -> b[1]' in 5 bytes: 'a...' (got '%s')", buf);
}

int main(void)
{
    plan(600);
    test_none();
    test_openmpi();
    test_pmi();
    test_torchrun();
    test_slurm();
    test_numbers();
    test_precedence();
    test_tf_config();
    test_kubernetes();
    test_config();
    test_urls();
    test_order();
    clear_env();
    return done_testing();
}
