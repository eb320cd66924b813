/*
 * t-store-avail.c - the tcp rendezvous store stays available to a job's
 * peers while strangers hold or flood its port (issue 43, "Store
 * availability"; src/bootstrap/store_server.c, store_tcp.c). Real processes
 * on 127.0.0.1, the default log level, a secret unless said otherwise:
 *
 *  1. 200 idle connections, opened by a process of their own as soon as the
 *     store (rank 0's) listens and held while ranks 1..3 start: the 4 peers
 *     form the ring and their first allreduce is exact. The time from the
 *     last peer's start to every peer's first allreduce is reported beside
 *     the same run without the connections; rank 0's stderr names the
 *     evictions in a few lines (a rate-limited security notice). Also with
 *     each connection reconnected as soon as the store drops it, and
 *     without a secret.
 *  2. A store whose every connection belongs to a proven client (with and
 *     without a secret) turns a newcomer away with "RNGR" BUSY; the client's
 *     error names the store's capacity after retrying until its deadline; a
 *     client turned away gets in once a proven client leaves, within its
 *     deadline; the store's stderr says it turned a newcomer away.
 * (Mid-way drops, a full store and the notices' rate limit: t-store-limits.c.)
 * Against 284fe00 (newcomers closed at the cap, no retry, a full store
 * answered like a claimed rank, refusals logged at warn only) every check
 * but the set-ups and the run without the flood fails (the mid-way checks
 * need the new handshake, so were not run there). Against caac373 the
 * mid-way checks and the busy store without a secret fail, and the flood
 * runs with a secret fail in some runs (a peer dropped mid-way through the
 * handshake blamed the secret and gave up; rank 0 doing so ends the job).
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "errors.h"
#include "harness.h"
#include "le.h"
#include "log.h"
#include "magic.h"
#include "store.h"
#include "store_proc.h"
#include "tap.h"

#define WORLD 4
#define FLOOD 200          /* idle connections held against rank 0's store */
#define FLOOD_HOLD_S 15.0  /* at most; released once the run is over */
#define STRANGERS 500      /* garbage challenges of check 4 */
#define BATCH 20           /* of them at a time: below the store's 2 x 4 + 16 */
#define COUNT 4096         /* floats of the allreduce */

/* ---- check 1: 200 idle connections while the ring forms ------------------------- */

/* What the flooding process reports when it ends */
typedef struct flood_res {
    int connected;          /* connections it opened */
    int closed;             /* of them closed by the store while it held them */
    double t_listen;        /* h_now() of its first connection (the store listens) */
    double t_gate;          /* h_now() when all were open (ranks 1..3 start) */
} flood_res_t;

typedef struct flood {
    pid_t pid;
    int gate_rd;            /* EOF once the flood is in place */
    int stop_wr;            /* closed by the parent: release the connections */
    int res_rd;
} flood_t;

/*
 * Fork the flooding process: it connects to port as soon as something
 * listens there (every millisecond, at most 10 s), opens count connections
 * in all (count 0: the first is closed at once, a probe), closes the gate,
 * and holds them, saying nothing, for FLOOD_HOLD_S or until told to stop;
 * with reconnect, it connects again at once for every one the store drops.
 */
static int flood_start(flood_t *fl, int port, int count, int reconnect)
{
    int gate[2], stop[2], res[2];

    if (pipe(gate) != 0 || pipe(stop) != 0 || pipe(res) != 0)
        return -1;
    fflush(stdout);
    fl->pid = fork();
    if (fl->pid == 0) {
        static int fds[FLOOD];
        flood_res_t r = {0};
        double until;
        int first = -1, open_now;

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(gate[0]);
        close(stop[1]);
        close(res[0]);
        for (until = h_now() + 10; first < 0 && h_now() < until;)
            if ((first = lo_dial(port)) < 0)
                usleep(1000);
        r.t_listen = h_now();
        if (first >= 0 && count == 0) {
            close(first);
        } else if (first >= 0) {
            fds[r.connected++] = first;
            while (r.connected < count && r.connected < FLOOD) {
                int fd = lo_dial(port);

                if (fd < 0)
                    break;
                fds[r.connected++] = fd;
            }
        }
        r.t_gate = h_now();
        close(gate[1]); /* the peers may start */
        open_now = r.connected;
        for (until = h_now() + FLOOD_HOLD_S; h_now() < until && open_now > 0;) {
            struct pollfd pfd[FLOOD + 1];
            int n = 0, idx[FLOOD + 1];

            pfd[n] = (struct pollfd){.fd = stop[0], .events = POLLIN};
            idx[n++] = -1;
            for (int i = 0; i < r.connected; i++)
                if (fds[i] >= 0) {
                    pfd[n] = (struct pollfd){.fd = fds[i], .events = POLLIN};
                    idx[n++] = i;
                }
            if (poll(pfd, (nfds_t)n, 100) <= 0)
                continue;
            if (pfd[0].revents)
                break;
            for (int k = 1; k < n; k++)
                if (pfd[k].revents) {
                    unsigned char b[64];

                    if (recv(fds[idx[k]], b, sizeof(b), MSG_DONTWAIT) > 0)
                        continue; /* the store said something: still open */
                    close(fds[idx[k]]);
                    fds[idx[k]] = reconnect ? lo_dial(port) : -1;
                    r.closed++;
                    open_now -= fds[idx[k]] < 0;
                }
        }
        if (count == 0) /* the probe: nothing held */
            for (until = h_now() + FLOOD_HOLD_S; h_now() < until;) {
                struct pollfd p = {.fd = stop[0], .events = POLLIN};
                if (poll(&p, 1, 100) > 0)
                    break;
            }
        (void)!write(res[1], &r, sizeof(r));
        _exit(0);
    }
    close(gate[1]);
    close(stop[0]);
    close(res[1]);
    fl->gate_rd = gate[0];
    fl->stop_wr = stop[1];
    fl->res_rd = res[0];
    return fl->pid > 0 ? 0 : -1;
}

static void flood_stop(flood_t *fl, flood_res_t *r)
{
    struct pollfd p = {.fd = fl->res_rd, .events = POLLIN};

    memset(r, 0, sizeof(*r));
    close(fl->stop_wr);
    if (poll(&p, 1, 3000) <= 0 || read(fl->res_rd, r, sizeof(*r)) != (ssize_t)sizeof(*r))
        memset(r, 0, sizeof(*r));
    kill(fl->pid, SIGKILL);
    waitpid(fl->pid, NULL, 0);
    close(fl->res_rd);
    close(fl->gate_rd);
}

enum { V_START, V_DONE, V_WRONG, V_STORE_LINES, V_EVICT_LINES };

typedef struct ring_case {
    int gate_rd;
} ring_case_t;

static int ring_peer(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const ring_case_t *rc = arg;
    char path[96];
    int fd, saved = dup(2), wrong = 0, code = 0;
    ring_comm_t *comm = NULL;
    ring_status_t st;
    float *x = malloc(COUNT * sizeof(float));

    if (rank != 0) {
        /* ranks 1..n-1 start once the flood (or the probe) is in place */
        struct pollfd p = {.fd = rc->gate_rd, .events = POLLIN};
        char b;

        if (poll(&p, 1, 12000) <= 0 || read(rc->gate_rd, &b, 1) != 0) {
            h_msg("the flood's gate never opened");
            return 2;
        }
    }
    snprintf(path, sizeof(path), "/tmp/t-store-avail-%d-%d.err", (int)getpid(), rank);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || saved < 0 || x == NULL)
        return h_fail(RING_ERR_IO, "stderr to a file"), 1;
    dup2(fd, 2);
    h_put_double(V_START, h_now());
    st = ring_comm_open(cfg, &comm);
    if (st == RING_OK) {
        for (int i = 0; i < COUNT; i++)
            x[i] = (float)((rank + 1) * (i % 1000 + 1));
        st = ring_allreduce(comm, x, x, COUNT, RING_FLOAT32, RING_SUM);
        if (st == RING_OK) {
            h_put_double(V_DONE, h_now());
            for (int i = 0; i < COUNT; i++)
                wrong += x[i] != (float)(n * (n + 1) / 2 * (i % 1000 + 1));
            h_put(V_WRONG, (uint64_t)wrong);
        } else {
            h_fail(st, "ring_allreduce");
        }
        ring_comm_close(comm);
    } else {
        h_fail(st, "ring_comm_open");
    }
    code = st != RING_OK ? 1 : wrong != 0 ? 3 : 0;
    fflush(stderr);
    dup2(saved, 2);
    close(fd);
    h_put(V_STORE_LINES, (uint64_t)count_lines(path, "rendezvous store", NULL, 0));
    h_put(V_EVICT_LINES, (uint64_t)count_lines(path, "dropped the oldest", NULL, 0));
    if (code != 0) { /* show what it said */
        FILE *f = fopen(path, "r");
        char line[1024];

        while (f != NULL && fgets(line, sizeof(line), f) != NULL)
            fputs(line, stderr);
        if (f != NULL)
            fclose(f);
    }
    unlink(path);
    free(x);
    return code;
}

/* One ring of WORLD peers meeting at rank 0's store, with `flood` idle
 * connections against it: the seconds from the last peer's start to every
 * peer's first allreduce, or -1 when the ring did not form right. */
static double ring_case(int flood, int secret, int reconnect)
{
    char url[64], label[160];
    int port = free_port();
    h_setting_t settings[] = {{-1, "job-id", JOB}, {-1, "transport", "tcp"},
                              {-1, "rendezvous", url}, {-1, "secret", SECRET},
                              {0, NULL, NULL}};
    ring_case_t rc;
    h_spec_t spec = {.n = WORLD, .fn = ring_peer, .arg = &rc, .child_timeout = 30,
                     .connect_timeout = "10s", .settings = settings};
    h_run_t *run = calloc(1, sizeof(*run));
    flood_t fl;
    flood_res_t fr;
    int all = 1;
    double first_start = 1e30, last_start = 0, last_done = 0, r0_start = 0;

    snprintf(label, sizeof(label), "%d peers%s with %d idle connections held against the "
             "store%s", WORLD, secret ? "" : " without a secret", flood,
             reconnect ? ", each reconnected once dropped" : "");
    if (!secret)
        settings[3].name = NULL;
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
    if (run == NULL || port < 0 || flood_start(&fl, port, flood, reconnect) != 0) {
        ok(0, "%s: set up", label);
        free(run);
        return -1;
    }
    rc.gate_rd = fl.gate_rd;
    if (h_run(&spec, run) != 0) {
        ok(0, "%s: the run ran (%s)", label, run->error);
        flood_stop(&fl, &fr);
        free(run);
        return -1;
    }
    flood_stop(&fl, &fr);
    for (int r = 0; r < WORLD; r++) {
        const h_result_t *p = &run->r[r];
        double s = h_val_double(p, V_START, 0), d = h_val_double(p, V_DONE, 0);

        all &= p->exited && p->code == 0 && h_val(p, V_WRONG, 1) == 0 && d > 0;
        if (r == 0)
            r0_start = s;
        else if (s < first_start)
            first_start = s;
        if (s > last_start)
            last_start = s;
        if (d > last_done)
            last_done = d;
    }
    all &= fr.connected == (flood > 0 ? flood : 0);
    if (!ok(all, "%s: the ring forms and the first allreduce is exact on every peer (the "
            "flooder held %d, the store closed %d of its connections)", label, fr.connected,
            fr.closed))
        h_diag(run);
    if (all) {
        diag("%s: the flooder's connections were open %.3f s after the store listened, ranks "
             "1..3 started %.3f s after that (%.3f s after rank 0); from the last peer's start "
             "to every peer's first allreduce: %.3f s (from rank 0's start: %.3f s)", label,
             fr.t_gate - fr.t_listen, first_start - fr.t_gate, first_start - r0_start,
             last_done - last_start, last_done - r0_start);
    }
    if (flood > 0) {
        uint64_t lines = h_val(&run->r[0], V_STORE_LINES, 0);
        uint64_t evict = h_val(&run->r[0], V_EVICT_LINES, 0);

        ok(evict >= 1 && lines <= 2 * RING_LOG_SECURITY_LINES,
           "%s: rank 0's stderr (default level) names the evictions (%llu line(s)) in %llu "
           "line(s) of the store, at most %d", label, (unsigned long long)evict,
           (unsigned long long)lines, 2 * RING_LOG_SECURITY_LINES);
    }
    free(run);
    return all ? last_done - last_start : -1;
}

/* ---- check 2: a store full of proven clients ------------------------------------ */

static void check_busy(int secret)
{
    store_proc_t sp;
    size_t max_clients = 2 * WORLD + 16;
    ring_store_t *cl[2 * WORLD + 16] = {0};
    size_t in = 0;
    unsigned char b[16];
    long got;
    int fd, res[2], go[2];
    double t;
    ring_status_t st;
    char err[1024];
    pid_t pid;
    const char *label = secret ? "busy store" : "busy store without a secret";

    if (store_start(&sp, WORLD, secret, secret ? "busy" : "busy-open") != 0) {
        ok(0, "%s: it started", label);
        return;
    }
    /* the late client of the last case, forked now: it must not inherit the
     * proven clients' sockets (one of them closing makes the room) */
    if (pipe(res) != 0 || pipe(go) != 0) {
        ok(0, "%s: pipe", label);
        store_stop(&sp);
        return;
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        ring_store_t *s = NULL;
        double t0, took = -1;
        char v[64] = "", c;
        ring_status_t rs = RING_ERR_INTERNAL;
        struct pollfd p = {.fd = go[0], .events = POLLIN};

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(res[0]);
        close(go[1]);
        snprintf(err, sizeof(err), "not started");
        if (poll(&p, 1, 30000) > 0 && read(go[0], &c, 1) == 1) {
            t0 = h_now();
            rs = client_open(sp.port, secret, 8, &s);
            took = h_now() - t0;
            if (rs == RING_OK && (rs = s->ops->set(s, "late", "in")) == RING_OK)
                rs = s->ops->get(s, "late", v, sizeof(v), ring_now() + 2);
            if (rs == RING_OK && strcmp(v, "in") != 0)
                rs = RING_ERR_INTERNAL;
            snprintf(err, sizeof(err), "%s", rs == RING_OK ? "" : ring_last_error());
        }
        (void)!write(res[1], &rs, sizeof(rs));
        (void)!write(res[1], &took, sizeof(took));
        (void)!write(res[1], err, sizeof(err));
        _exit(0);
    }
    close(res[1]);
    close(go[0]);
    for (in = 0; in < max_clients; in++)
        if (client_open(sp.port, secret, 5, &cl[in]) != RING_OK)
            break;
    if (!ok(in == max_clients, "%s: %zu proven clients of %zu (2 x %d + 16) get in%s%s",
            label, in, max_clients, WORLD, in < max_clients ? ": " : "",
            in < max_clients ? ring_last_error() : ""))
        goto out;

    /* a newcomer on a raw socket: "RNGR", BUSY, then closed */
    fd = lo_dial(sp.port);
    got = fd >= 0 ? read_some(fd, b, sizeof(b), 2000) : -1;
    ok(got == 8 && le_get32(b) == RING_STORE_REFUSE_MAGIC &&
           le_get32(b + 4) == RING_STORE_REFUSE_BUSY,
       "%s: a newcomer is turned away with RNGR BUSY and closed (%ld byte(s)%s)", label, got,
       got >= 4 && le_get32(b) == RING_STORE_REFUSE_MAGIC ? ", RNGR" : "");
    if (fd >= 0)
        close(fd);

    /* a client turned away tries until its deadline, then names the capacity */
    t = h_now();
    st = client_open(sp.port, secret, 1.5, &cl[in]);
    t = h_now() - t;
    snprintf(err, sizeof(err), "%s", st != RING_OK ? ring_last_error() : "(it got in)");
    ok(st != RING_OK && t > 1.2 && strstr(err, "maximum of connections") != NULL &&
           strstr(err, "turned this peer away") != NULL,
       "%s: a client retries for its 1.5 s and then names the capacity (%.2f s: %s)", label,
       t, err);
    if (st == RING_OK)
        cl[in]->ops->close(cl[in], 0), cl[in] = NULL;

    /* one turned away gets in once a proven client leaves, within its deadline */
    (void)!write(go[1], "g", 1);
    usleep(1000000);
    cl[0]->ops->close(cl[0], 0); /* room for one */
    cl[0] = NULL;
    {
        struct pollfd p = {.fd = res[0], .events = POLLIN};
        ring_status_t rs = RING_ERR_TIMED_OUT;
        double took = -1;

        err[0] = '\0';
        if (poll(&p, 1, 12000) > 0 && read(res[0], &rs, sizeof(rs)) == (ssize_t)sizeof(rs) &&
            read(res[0], &took, sizeof(took)) == (ssize_t)sizeof(took) &&
            read(res[0], err, sizeof(err)) > 0)
            err[sizeof(err) - 1] = '\0';
        ok(rs == RING_OK && took >= 0.9 && took < 8,
           "%s: a client turned away gets in once a proven client leaves, within its 8 s "
           "deadline, and sets and gets a key (in after %.2f s; the room was made at 1 s)%s%s",
           label, took, err[0] ? ": " : "", err);
    }
    ok(count_lines(sp.err, "turned a newcomer away", NULL, 0) >= 1,
       "%s: its stderr (default level) says it turned a newcomer away (%d line(s))", label,
       count_lines(sp.err, "turned a newcomer away", NULL, 0));
out:
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(res[0]);
    close(go[1]);
    for (size_t i = 0; i < max_clients; i++)
        if (cl[i] != NULL)
            cl[i]->ops->close(cl[i], 0);
    store_stop(&sp);
}

int main(void)
{
    double with, without;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    unsetenv("RING_LOG_LEVEL"); /* the default level, as users run it */
    unsetenv("RING_DEBUG");
    check_busy(1);
    check_busy(0);
    without = ring_case(0, 1, 0);
    with = ring_case(FLOOD, 1, 0);
    (void)ring_case(FLOOD, 1, 1);
    (void)ring_case(FLOOD, 0, 0);
    if (with >= 0 && without >= 0)
        diag("start-up to every peer's first allreduce, from the last peer's start: %.3f s "
             "with %d idle connections held against the store, %.3f s without", with, FLOOD,
             without);
    return done_testing();
}
