/*
 * launch_env_test.h - what t-launch and t-launch-config share: a clean
 * environment for each case (the test may itself run under Slurm, mpirun or
 * torchrun), and TF_CONFIG's JSON. Header-only: tap.h's counters live in
 * each program.
 */
#ifndef RING_TESTS_LAUNCH_ENV_TEST_H
#define RING_TESTS_LAUNCH_ENV_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

extern char **environ;

static const char *const env_prefixes[] = {"RING_", "OMPI_", "PMI_", "MPI_LOCAL", "SLURM_",
                                           NULL};
static const char *const env_names[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RUN_ID", "TF_CONFIG", "JOB_COMPLETION_INDEX", NULL};

static inline int env_is_ours(const char *var, size_t len)
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
static inline void clear_env(void)
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
static inline void only_env(const char *name, ...) __attribute__((sentinel));
static inline void only_env(const char *name, ...)
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

/* TF_CONFIG's JSON with "cluster" and "task" around the given parts */
static inline void tf(const char *cluster, const char *task)
{
    char json[2048];

    snprintf(json, sizeof(json), "{\"cluster\": {%s}, \"task\": {%s}}", cluster, task);
    only_env("TF_CONFIG", json, NULL);
}

#define TF_CW "\"chief\": [\"c0:2222\"], \"worker\": [\"w0:2222\", \"w1:2222\"]"

#endif
