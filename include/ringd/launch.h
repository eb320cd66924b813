/*
 * ringd/launch.h - what the launcher that started this process says about
 * it: rank, world size, local rank, how to find the peers, the job id.
 *
 * ring_config_load_env applies it to the settings still at their defaults,
 * so flags and RING_* variables always win. The launchers, in the order
 * they are tried (the first that gives a rank wins):
 *
 *   ring       RING_RANK, RING_WORLD_SIZE, RING_LOCAL_RANK (ring-launch)
 *   openmpi    OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
 *   pmi        PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
 *              (MPICH's Hydra, Intel MPI)
 *   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
 *   slurm      SLURM_PROCID, SLURM_STEP_NUM_TASKS (or SLURM_NTASKS),
 *              SLURM_LOCALID, SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST)
 *   tf_config  TF_CONFIG: cluster.chief + cluster.worker, task.type/index
 *   kubernetes JOB_COMPLETION_INDEX (an indexed Job; the world size must
 *              come from RING_WORLD_SIZE or --world-size)
 *
 * MPI comes before Slurm because mpirun inside an allocation inherits the
 * batch step's SLURM_PROCID=0; torchrun before Slurm because srun may start
 * one torchrun per node.
 *
 * How peers meet, when neither RING_PEERS nor RING_RENDEZVOUS is set:
 * TF_CONFIG's worker addresses are the static peer list; else MASTER_ADDR
 * (and MASTER_PORT) name a tcp store; else a Slurm step's first node
 * serves the store (127.0.0.1 when the step has one node); else, when the
 * launcher says every rank is on this host, a tcp store on 127.0.0.1.
 */
#ifndef RINGD_LAUNCH_H
#define RINGD_LAUNCH_H

#include <stddef.h>

#include <ringd/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RING_LAUNCH_STR 256

typedef struct ring_launch {
    char launcher[16];       /* "" when none was found, else a name listed above */
    int rank;                /* -1 when the launcher does not say */
    int world_size;          /* 0 when the launcher does not say */
    int local_rank;          /* rank among the peers on this host, -1 = unknown */
    int local_size;          /* peers on this host, 0 = unknown */
    int nhosts;              /* hosts of the job, 0 = unknown */
    char rank_var[64];       /* the variable each value came from */
    char world_var[64];
    char local_var[64];
    char rendezvous[RING_LAUNCH_STR]; /* "tcp://HOST:PORT" or "" */
    char rendezvous_why[RING_LAUNCH_STR];
    char peers[4096];        /* a static peer list (TF_CONFIG), "" = none */
    char peers_var[64];
    char job_id[RING_LAUNCH_STR];
    char job_var[64];
    char role[16];           /* "trainer", or "evaluator" (TF_CONFIG task.type) */
    char role_var[64];
    char note[RING_LAUNCH_STR]; /* one line worth telling the user, or "" */
} ring_launch_t;

#define RING_LAUNCH_PORT 29500 /* the store's port when nothing else gives one */

/*
 * Read the launcher variables of the environment into *l. port is the
 * store's port when no variable names one (MASTER_PORT); 0 lets the job id
 * choose one (20000..31999, so two jobs sharing a first host do not collide),
 * else RING_LAUNCH_PORT. RING_ERR_INVALID
 * with a message naming the variable when one is malformed (a rank that is
 * not a number, TF_CONFIG that is not the JSON it should be).
 */
RING_API
ring_status_t ring_launch_detect(ring_launch_t *l, int port);

/*
 * Does this process's OpenBLAS run kernels several times slower than the CPU
 * allows? An OpenBLAS older than the CPU does not know its model and falls
 * back to generic SSE3 kernels (Debian 12's 0.3.21 on an Emerald Rapids Xeon:
 * sgemm 4.8x slower); OPENBLAS_CORETYPE, read when OpenBLAS loads, picks the
 * right ones. Returns 1, the value to set in coretype ("Cooperlake",
 * "SkylakeX", "Haswell") and a sentence for the user in why, when OpenBLAS is
 * loaded in the process (linked, or loaded by a framework such as PyTorch),
 * OPENBLAS_CORETYPE is unset, and OpenBLAS runs one of its pre-AVX fallbacks
 * on a CPU with AVX2 or more; else 0, nothing written. ring-launch sets the
 * variable for its ranks; other launchers' users are told by ringd and by
 * ringd.init() (Python).
 */
RING_API
int ring_launch_blas_advice(char *coretype, size_t coretype_len, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* RINGD_LAUNCH_H */
