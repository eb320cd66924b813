/*
 * elastic_worker.c - a tiny elastic program for tests/scripts/launch-elastic.test,
 * on libringd's public API alone: it opens a ring from the environment (what
 * ring-launch --elastic gives it: RING_RENDEZVOUS, RING_ELASTIC=on, ...), and
 * each step allreduces [1, rank + 1], folds the sums into a checksum and calls
 * ring_comm_grow (its commit point). A failed step shrinks the ring
 * (ring_comm_shrink) and is done again; after every change of the ring rank 0
 * sends {step, checksum} to every member, so a joiner (a replacement) gets the
 * state and the members agree on it. At the end it prints
 *   final size=N rank=R steps=S check=HEX joined=0|1
 * Environment:
 *   ELASTIC_STEPS=S      steps to run at least (default 30)
 *   ELASTIC_SIZE=N       then go on until the ring has N members again
 *                        (default 0: do not wait), at most 40 x S steps
 *   ELASTIC_STEP_MS=MS   sleep of each step (default 20)
 *   ELASTIC_DIE=R:K[:stop]
 *                        the first process of rank R (not a replacement, which
 *                        joined) SIGKILLs itself (:stop: SIGSTOPs itself) at step K
 * Exit: 0; 1 when the ring cannot be opened or a collective fails for another
 * reason than a lost peer; 3 when the others counted this peer lost.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* nanosleep, strsignal */
#endif
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ringd/ringd.h>

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? strtol(v, NULL, 10) : dflt;
}

static void nap(long ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* {step, checksum} from rank 0 to every member: after every change of the ring */
static ring_status_t state_sync(ring_comm_t *comm, uint64_t st[2])
{
    return ring_broadcast(comm, st, 2 * sizeof(uint64_t), 0);
}

static int fail(const char *what)
{
    printf("worker: %s: %s\n", what, ring_last_error());
    fflush(stdout);
    return 1;
}

/* The ring failed (a peer lost): shrink past it, and agree on the state again. */
static int recover(ring_comm_t **comm, uint64_t st[2])
{
    ring_comm_t *nc = NULL;
    ring_status_t rc = ring_comm_shrink(*comm, &nc);

    if (rc == RING_ERR_REMOTE) {
        printf("worker: the others counted this peer lost: %s\n", ring_last_error());
        fflush(stdout);
        exit(3);
    }
    if (rc != RING_OK)
        return fail("shrink");
    ring_comm_close(*comm);
    *comm = nc;
    printf("worker: %s\n", ring_comm_shrink_report(nc));
    fflush(stdout);
    return state_sync(nc, st) == RING_OK ? 0 : -1;
}

int main(void)
{
    long steps = env_long("ELASTIC_STEPS", 30), want = env_long("ELASTIC_SIZE", 0);
    long step_ms = env_long("ELASTIC_STEP_MS", 20), die_rank = -1, die_step = -1;
    const char *die = getenv("ELASTIC_DIE");
    int die_sig = SIGKILL, joined;
    uint64_t st[2] = { 0, 1469598103934665603ull };   /* step, checksum */
    ring_config_t cfg;
    ring_comm_t *comm, *nc;

    if (die != NULL && sscanf(die, "%ld:%ld", &die_rank, &die_step) == 2 &&
        strstr(die, ":stop") != NULL)
        die_sig = SIGSTOP;
    ring_config_init(&cfg);
    if (ring_config_load_env(&cfg) != RING_OK)
        return fail("config");
    if (ring_comm_open(&cfg, &comm) != RING_OK)
        return fail("open");
    joined = ring_comm_joined(comm);
    if (joined) {
        if (state_sync(comm, st) != RING_OK)
            return fail("the state from rank 0");
        printf("worker: joined a running ring of %d as rank %d at step %" PRIu64 "\n",
               ring_comm_size(comm), ring_comm_rank(comm), st[0]);
        fflush(stdout);
    }
    while (!((long)st[0] >= steps && ring_comm_size(comm) >= want) && (long)st[0] < 40 * steps) {
        float v[2] = { 1.0f, (float)(ring_comm_rank(comm) + 1) };

        if (!joined && cfg.rank == die_rank && (long)st[0] == die_step) {
            printf("worker: rank %d raises %s at step %ld\n", cfg.rank, strsignal(die_sig),
                   die_step);
            fflush(stdout);
            raise(die_sig);
        }
        nap(step_ms);
        if (ring_allreduce(comm, v, v, 2, RING_FLOAT32, RING_SUM) != RING_OK) {
            if (recover(&comm, st) != 0)
                return fail("after the shrink");
            continue;   /* the step again, on the survivors' state */
        }
        st[0]++;
        st[1] = (st[1] ^ (uint64_t)(v[0] * 1000.0f + v[1])) * 1099511628211ull;
        if (ring_comm_grow(comm, &nc) != RING_OK) {
            if (recover(&comm, st) != 0)
                return fail("after the shrink");
            continue;
        }
        if (nc != comm) {
            ring_comm_close(comm);
            comm = nc;
            if (state_sync(comm, st) != RING_OK && recover(&comm, st) != 0)
                return fail("after the shrink");
            printf("worker: the ring grew to %d at step %" PRIu64 "\n", ring_comm_size(comm),
                   st[0]);
            fflush(stdout);
        }
    }
    printf("final size=%d rank=%d steps=%" PRIu64 " check=%016" PRIx64 " joined=%d\n",
           ring_comm_size(comm), ring_comm_rank(comm), st[0], st[1], joined);
    fflush(stdout);
    ring_comm_close(comm);
    ring_config_free(&cfg);
    return 0;
}
