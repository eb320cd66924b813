/*
 * t-verbs-dl.c - libibverbs is loaded at run time (transport/verbs_dl.c),
 * so a host without it runs every other transport and says why verbs is
 * off. Each case runs in fresh processes: the library is loaded once per
 * process, and RING_IBVERBS_LIBRARY chooses what it loads.
 *
 * With RING_IBVERBS_LIBRARY=/nonexistent/libibverbs.so.1:
 *   - ring_verbs_dl_load fails, from 4 threads at once with the same text,
 *     naming libibverbs, the path, dlopen's error and the fix; the probe
 *     of --transport auto says "verbs unavailable: ..." and auto picks shm;
 *   - a ring of 2 processes asked for --transport verbs fails at start,
 *     every rank's error naming libibverbs and the fix;
 *   - a ring of 2 with the default transport (auto; shm, every peer being on
 *     127.0.0.1), and one under --rate-limit (auto looks for verbs, then
 *     runs tcp: the cap is tcp's) allreduce right.
 * A library that is not libibverbs (libc) fails naming the missing symbol.
 * Where libibverbs.so.1 is installed (no RDMA device needed): it loads, and
 * listing the devices gives none on a host without them, reported as no
 * device, not as verbs unavailable. That libringd.so does not link
 * libibverbs at all is tests/scripts/verbs-dl.test's.
 */
#include "ring_build.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ringd/ringd.h>

#include "harness.h"
#include "rdma_devices.h"
#include "tap.h"
#include "transport.h"
#if RING_HAVE_VERBS
#include "verbs.h"
#include "verbs_dl.h"
#endif

#define MISSING "/nonexistent/libibverbs.so.1"
#define FIX "apt-get install libibverbs1 ibverbs-providers"
#define NOT_LOADED \
    "libibverbs (" MISSING ", from RING_IBVERBS_LIBRARY) could not be loaded (" MISSING ": "
#define V_SUM 0

#if RING_HAVE_VERBS
/* What a child process found, sent back through a pipe. */
typedef struct finding {
    int rc[4];                 /* ring_verbs_dl_load's answer in each thread */
    char why[4][1024];
    int probe;                 /* ring_verbs_probe */
    char probe_why[1024];
    char chose[16];            /* ring_tp_choose(RING_TP_NONE): auto */
    char choose_why[1024];
    int ndev;                  /* rdma_devices_find */
    char dev_why[1024];
} finding_t;

typedef struct loader {
    int rc;
    char why[1024];
} loader_t;

static void *load_in_thread(void *arg)
{
    loader_t *l = arg;

    l->rc = ring_verbs_dl_load(l->why, sizeof(l->why));
    return NULL;
}

static void find(finding_t *f)
{
    pthread_t t[4];
    loader_t l[4];
    ring_tp_params_t params = {.rank = 0, .ib_dev = "", .gid_index = -1, .one_host_why = ""};
    rdma_dev_t devs[RDMA_MAX_DEVS];
    const ring_tp_ops_t *ops;

    memset(l, 0, sizeof(l));
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, load_in_thread, &l[i]) != 0)
            l[i].rc = 99;
    for (int i = 0; i < 4; i++) {
        if (l[i].rc != 99)
            pthread_join(t[i], NULL);
        f->rc[i] = l[i].rc;
        snprintf(f->why[i], sizeof(f->why[i]), "%s", l[i].why);
    }
    f->probe = ring_verbs_probe(&params, f->probe_why, sizeof(f->probe_why));
    ops = ring_tp_choose(RING_TP_NONE, &params, f->choose_why, sizeof(f->choose_why));
    snprintf(f->chose, sizeof(f->chose), "%s", ops != NULL ? ops->name : "none");
    f->ndev = rdma_devices_find(devs, RDMA_MAX_DEVS, f->dev_why, sizeof(f->dev_why));
}

/* Runs find() in a child with RING_IBVERBS_LIBRARY=lib (NULL: unset); 0 when it reported. */
static int find_in_child(const char *lib, finding_t *f)
{
    int fd[2], status = 0;
    size_t got = 0;
    pid_t pid;

    memset(f, 0, sizeof(*f));
    if (pipe(fd) != 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        finding_t mine;

        close(fd[0]);
        memset(&mine, 0, sizeof(mine));
        if (lib != NULL)
            setenv("RING_IBVERBS_LIBRARY", lib, 1);
        else
            unsetenv("RING_IBVERBS_LIBRARY");
        alarm(20);
        find(&mine);
        _exit(write(fd[1], &mine, sizeof(mine)) == (ssize_t)sizeof(mine) ? 0 : 1);
    }
    close(fd[1]);
    while (got < sizeof(*f)) {
        ssize_t r = read(fd[0], (char *)f + got, sizeof(*f) - got);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd[0]);
    waitpid(pid, &status, 0);
    return got == sizeof(*f) && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* ---- rings of real processes ------------------------------------------------ */

typedef enum { R_VERBS, R_DEFAULT, R_CAPPED } ring_case_t;

static int ring_main(int rank, int n, const ring_config_t *cfg, void *arg)
{
    ring_case_t kind = *(const ring_case_t *)arg;
    ring_comm_t *comm;
    ring_status_t st;
    float x[1000];
    char why[1024] = "";

    st = ring_comm_open(cfg, &comm);
    if (st != RING_OK) {
        h_fail(st, "ring_comm_open");
        return 1;
    }
    if (kind == R_CAPPED) { /* what auto said when it looked for verbs */
        ring_tp_params_t params = {.rank = rank, .ib_dev = "", .gid_index = -1,
                                   .one_host_why = "", .rate_limit_bps = 1.25e9};

        (void)ring_tp_choose(RING_TP_NONE, &params, why, sizeof(why));
    }
    for (int i = 0; i < 1000; i++)
        x[i] = (float)(rank + 1);
    st = ring_allreduce(comm, x, x, 1000, RING_FLOAT32, RING_SUM);
    h_put(V_SUM, (uint64_t)x[999]);
    h_msg("transport %s; %s", ring_comm_transport(comm), why);
    if (st != RING_OK)
        h_fail(st, "ring_allreduce");
    ring_comm_close(comm);
    return st == RING_OK ? 0 : 1;
}

static void run_ring(const char *label, ring_case_t kind)
{
    static const h_setting_t verbs[] = {{-1, "transport", "verbs"}, {0, NULL, NULL}};
    /* under a cap auto skips the one-host shortcut, looks for verbs, then runs tcp */
    static const h_setting_t capped[] = {{-1, "transport", "auto"}, {-1, "rate-limit", "10gbit"},
                                         {0, NULL, NULL}};
    h_spec_t spec = {.n = 2, .fn = ring_main, .arg = &kind, .child_timeout = 20,
                     .settings = kind == R_VERBS ? verbs : kind == R_CAPPED ? capped : NULL};
    h_run_t *run = calloc(1, sizeof(*run));
    int all = 1;

    setenv("RING_IBVERBS_LIBRARY", MISSING, 1);
    if (run == NULL || h_run(&spec, run) != 0) {
        unsetenv("RING_IBVERBS_LIBRARY");
        ok(0, "%s: the ring ran", label);
        free(run);
        return;
    }
    unsetenv("RING_IBVERBS_LIBRARY");
    for (int r = 0; r < 2; r++) {
        const h_result_t *res = &run->r[r];

        if (kind == R_VERBS)
            all &= res->exited && res->code == 1 && res->status == RING_ERR_UNSUPPORTED &&
                   strstr(res->msg, "--transport verbs: verbs unavailable: libibverbs") != NULL &&
                   strstr(res->msg, MISSING) != NULL && strstr(res->msg, FIX) != NULL;
        else
            all &= res->exited && res->code == 0 && h_val(res, V_SUM, 0) == 3;
        if (kind == R_CAPPED)
            all &= strncmp(res->msg, "transport tcp; verbs unavailable: libibverbs", 44) == 0;
    }
    if (!ok(all, "%s", label))
        h_diag(run);
    else
        diag("rank 0: %s", run->r[0].msg);
    free(run);
}
#endif /* RING_HAVE_VERBS */

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
#if !RING_HAVE_VERBS
    skip_all("libringd built without verbs (configure --with-verbs, needs libibverbs-dev)");
#else
    finding_t f;
    int same = 1;

    plan(12);
    /* 1-3: no libibverbs */
    if (find_in_child(MISSING, &f) != 0)
        bail("the child that loads " MISSING " did not report");
    for (int i = 1; i < 4; i++)
        same &= f.rc[i] == f.rc[0] && strcmp(f.why[i], f.why[0]) == 0;
    ok(f.rc[0] == -1 && same, "RING_IBVERBS_LIBRARY=" MISSING ": ring_verbs_dl_load fails, "
       "the same in 4 threads at once");
    if (!ok(strncmp(f.why[0], NOT_LOADED, strlen(NOT_LOADED)) == 0 &&
                strstr(f.why[0], "No such file or directory): the verbs transport needs "
                       "rdma-core's libibverbs1 and a provider (" FIX ", or dnf install "
                       "libibverbs)") != NULL,
            "... naming the library, dlopen's error and the fix"))
        diag("%s", f.why[0]);
    ok(f.probe == 0 && strncmp(f.probe_why, "verbs unavailable: libibverbs", 29) == 0 &&
           strcmp(f.chose, "shm") == 0 && strstr(f.choose_why, "verbs unavailable") != NULL &&
           f.ndev == 0 && strncmp(f.dev_why, "verbs unavailable", 17) == 0,
       "auto's probe: 0, 'verbs unavailable: ...'; auto picks shm; no device is listed");
    if (f.probe != 0 || strcmp(f.chose, "shm") != 0)
        diag("probe %d (%s); auto chose %s (%s)", f.probe, f.probe_why, f.chose, f.choose_why);

    /* 4-6: rings of 2 processes without libibverbs */
    run_ring("N=2, --transport verbs without libibverbs: every rank fails at start naming "
             "libibverbs and the fix", R_VERBS);
    run_ring("N=2, the default transport (auto) without libibverbs: the allreduce sums (3)",
             R_DEFAULT);
    run_ring("N=2, auto under --rate-limit (auto looks for verbs) without libibverbs: tcp, the "
             "allreduce sums (3), auto says verbs is unavailable", R_CAPPED);

    /* 7: a library that is not libibverbs */
    if (find_in_child("libc.so.6", &f) != 0)
        bail("the child that loads libc.so.6 did not report");
    ok(f.rc[0] == -1 && strstr(f.why[0], "libibverbs (libc.so.6, from RING_IBVERBS_LIBRARY) has "
                                         "no ibv_get_device_list") != NULL &&
           strstr(f.why[0], FIX) != NULL,
       "RING_IBVERBS_LIBRARY=libc.so.6: fails naming the first symbol it lacks, and the fix");
    if (f.rc[0] != -1)
        diag("%s", f.why[0]);

    /* 8-12: the system's libibverbs */
    if (find_in_child(NULL, &f) != 0)
        bail("the child that loads libibverbs.so.1 did not report");
    if (f.rc[0] != 0 && strstr(f.why[0], "could not be loaded") != NULL) {
        diag("%s", f.why[0]);
        for (int i = 0; i < 5; i++)
            skip("libibverbs.so.1 is not installed here (apt-get install libibverbs1)");
        return done_testing();
    }
    same = 1;
    for (int i = 0; i < 4; i++)
        same &= f.rc[i] == 0;
    ok(same, "libibverbs.so.1 loads (4 threads at once), every symbol resolved");
    if (!same)
        diag("%s", f.why[0]);
    ok(strstr(f.probe_why, "verbs unavailable") == NULL,
       "auto's probe does not call verbs unavailable: %s",
       f.probe == 1 ? "an active RDMA port" : f.probe_why);
    if (access("/sys/class/infiniband", F_OK) != 0) {
        is_int(f.ndev, 0, "no /sys/class/infiniband: listing the devices gives none");
        like(f.dev_why, "no RDMA devices", "... reported as no device, not as an error");
        ok(f.probe == 0 && strncmp(f.probe_why, "no RDMA device", 14) == 0,
           "auto's probe: no RDMA device (not 'verbs unavailable')");
    } else {
        diag("this host has RDMA devices: %d with an active port (%s)", f.ndev, f.dev_why);
        for (int i = 0; i < 3; i++)
            skip("this host has RDMA devices (/sys/class/infiniband)");
    }
    return done_testing();
#endif
}
