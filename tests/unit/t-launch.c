/*
 * t-launch.c - what a launcher's variables say (src/launch_env.c,
 * src/tf_config.c; the rules: ringd/launch.h): Open MPI, PMI, torchrun,
 * Slurm, TF_CONFIG and indexed Kubernetes Jobs, their order, the
 * rendezvous each implies, every malformed value refused naming its
 * variable. t-launch-config.c tests how ring_config_load_env applies them,
 * the rendezvous URL parser and the ring's order by host.
 *
 * The test may itself run under Slurm, mpirun or torchrun: clear_env()
 * removes every variable the detection reads before each case.
 */
#include "ring_build.h" /* _GNU_SOURCE for setenv */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/config.h>
#include <ringd/launch.h>
#include <ringd/ringd.h>

#include "errors.h"
#include "launch_env_test.h"
#include "rendezvous.h"
#include "tap.h"

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

int main(void)
{
    plan(485);
    test_none();
    test_openmpi();
    test_pmi();
    test_torchrun();
    test_slurm();
    test_numbers();
    test_precedence();
    test_tf_config();
    test_kubernetes();
    clear_env();
    return done_testing();
}
