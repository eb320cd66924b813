/*
 * launch-store.c - the rendezvous store of an elastic job, served by
 * ring-launch (libringd's ring_rendezvous_server_start, ringd/elastic.h) so
 * that it outlives every rank: a replacement of any rank, rank 0 too, finds
 * the running ring there and joins it. With --elastic on one node the store
 * listens on --host (default 127.0.0.1) and a free port; with --rendezvous
 * tcp://HOST:PORT node 0's ring-launch serves it there (libringd's rank 0
 * finds it served and does not serve one itself); a file:/// store has no
 * server. --serve-store serves it alone, for ranks another launcher starts.
 * The store holds the ranks' job id and secret: ring-launch reads them as a
 * rank would (ring_config_load_env) and gives the ranks that job id.
 */
#include "ring_build.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ringd/config.h>
#include <ringd/elastic.h>
#include <ringd/status.h>

#include "launch-nodes.h"
#include "launch-ports.h"
#include "launch-store.h"

#define STORE_PORT_TRIES 32
#define STORE_SERVE_WORLD 16    /* --serve-store without -n: room for 4 x 16 peers */

static ring_rendezvous_server_t *store_srv;
static int store_sigpipe[2] = { -1, -1 };

static void store_signal_note(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t r = write(store_sigpipe[1], &b, 1);

    (void)r;    /* a full pipe already wakes the wait */
    errno = saved;
}

/* --serve-store's wait: the first of SIGINT, SIGTERM and SIGHUP (its number), or 0
 * after timeout_s (0: none). Handlers and a pipe, not sigwait: threads that
 * libraries start before main (OpenBLAS's) would take a signal blocked here only,
 * and die of it. -1 when the pipe or the handlers cannot be set up. */
static int store_signal_wait(double timeout_s)
{
    const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    struct sigaction sa = { .sa_handler = store_signal_note, .sa_flags = SA_RESTART };
    double left = timeout_s;
    unsigned char b;

    if (pipe2(store_sigpipe, O_CLOEXEC | O_NONBLOCK) != 0 || sigemptyset(&sa.sa_mask) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            return -1;
    for (;;) {
        struct pollfd pf = { .fd = store_sigpipe[0], .events = POLLIN };
        int ms = timeout_s > 0 ? (left > 3600 ? 3600000 : (int)(left * 1000)) : 3600000;
        struct timespec t0, t1;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (poll(&pf, 1, ms) > 0 && read(store_sigpipe[0], &b, 1) == 1)
            return b;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        left -= (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (timeout_s > 0 && left <= 0)
            return 0;
    }
}

int launch_store_port_pick(struct launch_opts *o)
{
    int v6 = strchr(o->host, ':') != NULL, port = 0, next;

    if (!o->elastic_min || o->rendezvous)
        return 0;
    /* a port whose next one is free too: MASTER_PORT is the store's + 1 (launch-torch.c) */
    for (int t = 0; t < STORE_PORT_TRIES; t++) {
        int fd = launch_port_hold(0, &port), fd2 = -1;

        if (fd < 0)
            break;
        if (port < 65535)
            fd2 = launch_port_hold(port + 1, &next);
        close(fd);
        if (fd2 >= 0) {
            close(fd2);
            break;
        }
        port = 0;
    }
    if (port == 0) {
        fprintf(stderr, "ring-launch: --elastic: no free port for the rendezvous store: %s\n",
                strerror(errno));
        return -1;
    }
    if (asprintf(&o->elastic_store, "tcp://%s%s%s:%d", v6 ? "[" : "", o->host, v6 ? "]" : "",
                 port) < 0) {
        o->elastic_store = NULL;
        fputs("ring-launch: out of memory\n", stderr);
        return -1;
    }
    o->rendezvous = o->elastic_store;
    return 0;
}

static int store_config_set(ring_config_t *cfg, const char *name, const char *value)
{
    if (ring_config_set(cfg, name, value, RING_SRC_API) == RING_OK)
        return 0;
    fprintf(stderr, "ring-launch: %s\n", ring_last_error());
    return -1;
}

int launch_store_start(const struct launch_opts *o)
{
    struct launch_rdzv rv;
    ring_config_t cfg;
    char range[48], job[256], why[400];
    long world = launch_world_size(o);
    int serve, rc = -1;

    if (!o->elastic_min)
        return 0;
    snprintf(range, sizeof(range), "%ld:%ld", o->elastic_min, o->elastic_max);
    if (setenv("RING_ELASTIC", "on", 1) != 0 || setenv("RINGD_ELASTIC", range, 1) != 0) {
        perror("ring-launch: setenv");
        return -1;
    }
    ring_config_init(&cfg);
    /* the job id and the secret as every rank reads them */
    if (ring_config_load_env(&cfg) != RING_OK) {
        fprintf(stderr, "ring-launch: --elastic: %s\n", ring_last_error());
        goto out;
    }
    if (store_config_set(&cfg, "rendezvous", o->rendezvous) != 0 ||
        ring_config_get(&cfg, "job-id", job, sizeof(job)) != RING_OK ||
        setenv("RING_JOB_ID", job, 1) != 0)
        goto out;
    serve = launch_rdzv_parse(o->rendezvous, &rv, why, sizeof(why)) == 0 && rv.port != 0 &&
            o->node_rank == 0;
    cfg.world_size = (int)(world > o->elastic_max ? world : o->elastic_max);
    if (serve && ring_rendezvous_server_start(&cfg, &store_srv) != RING_OK) {
        fprintf(stderr, "ring-launch: --elastic: cannot serve the rendezvous store at %s: %s\n",
                o->rendezvous, ring_last_error());
        goto out;
    }
    fprintf(stderr, "ring-launch: elastic job (--elastic %s, up to %ld replacement%s): the ranks "
            "meet at %s%s, job id %s\n", range, o->max_restarts, o->max_restarts == 1 ? "" : "s",
            serve ? "the store ring-launch serves at " : "", o->rendezvous, job);
    rc = 0;
out:
    ring_config_free(&cfg);
    return rc;
}

void launch_store_stop(void)
{
    ring_rendezvous_server_stop(store_srv);
    store_srv = NULL;
}

/* --serve-store's secret: --secret-file, else the environment's; "" for none */
static int store_secret(const struct launch_opts *o, ring_config_t *cfg, const char **shown)
{
    const char *f = o->secret_file ? o->secret_file : getenv("RING_SECRET_FILE");
    const char *s = getenv("RING_SECRET");

    *shown = "";
    if (f != NULL && *f != '\0') {
        *shown = f;
        return store_config_set(cfg, "secret-file", f);
    }
    if (s != NULL && *s != '\0') {
        *shown = "RING_SECRET";
        return store_config_set(cfg, "secret", s);
    }
    fprintf(stderr, "ring-launch: note: --serve-store without a secret (--secret-file, "
            "RING_SECRET_FILE): anyone who can reach %s can join the job\n", o->serve_store);
    return 0;
}

int launch_store_serve_only(const struct launch_opts *o)
{
    const char *job = o->job_id ? o->job_id : getenv("RING_JOB_ID"), *secret;
    ring_config_t cfg;
    int sig, rc = 1;

    if (job == NULL || *job == '\0')
        launch_usage_die("--serve-store needs --job-id ID (or RING_JOB_ID), the job id every "
                         "rank gives in RING_JOB_ID");
    ring_config_init(&cfg);
    if (store_config_set(&cfg, "rendezvous", o->serve_store) != 0 ||
        store_config_set(&cfg, "job-id", job) != 0 || store_secret(o, &cfg, &secret) != 0)
        goto out;
    cfg.world_size = (int)(o->n > 0 ? o->n : STORE_SERVE_WORLD);
    if (ring_rendezvous_server_start(&cfg, &store_srv) != RING_OK) {
        fprintf(stderr, "ring-launch: --serve-store: %s\n", ring_last_error());
        goto out;
    }
    fprintf(stderr, "ring-launch: serving the rendezvous store of job %s on %s (room for %d "
            "peers%s%s) until SIGINT or SIGTERM; the ranks meet there with RING_RENDEZVOUS=%s "
            "RING_ELASTIC=on RING_JOB_ID=%s%s\n", job, o->serve_store, 4 * cfg.world_size,
            *secret ? ", secret " : ", no secret", secret, o->serve_store, job,
            *secret ? " and the same secret" : "");
    sig = store_signal_wait(o->timeout);
    launch_store_stop();
    if (sig < 0) {
        perror("ring-launch: --serve-store: cannot wait for a signal");
    } else if (sig == 0) {
        fprintf(stderr, "ring-launch: --timeout: the store of job %s stopped\n", job);
        rc = 124;
    } else {
        fprintf(stderr, "ring-launch: caught signal %d (%s): the store of job %s stopped\n", sig,
                strsignal(sig), job);
        rc = 0;
    }
out:
    ring_config_free(&cfg);
    return rc;
}
