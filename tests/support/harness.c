/*
 * harness.c - fork a ring of real processes on the loopback interface and
 * watch them: ports, configs, reports through pipes, actions, deadlines.
 * See harness.h.
 */
#include "ring_build.h"

#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* records on the pipe: type, 2-byte little-endian length, payload */
#define REC_MSG 'M'
#define REC_READY 'R'
#define REC_STATUS 'S'
#define REC_VALUE 'V'

static int child_fd = -1;

double h_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- child side ------------------------------------------------------- */

static void child_record(int type, const void *data, size_t len)
{
    unsigned char rec[3 + H_MSG_MAX];
    const unsigned char *p = rec;
    size_t left;

    if (child_fd < 0)
        return;
    if (len > H_MSG_MAX - 1)
        len = H_MSG_MAX - 1;
    rec[0] = (unsigned char)type;
    rec[1] = (unsigned char)len;
    rec[2] = (unsigned char)(len >> 8);
    memcpy(rec + 3, data, len);
    left = 3 + len; /* < PIPE_BUF: one atomic write */
    while (left > 0) {
        ssize_t w = write(child_fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        left -= (size_t)w;
    }
}

void h_msg(const char *fmt, ...)
{
    char text[H_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    child_record(REC_MSG, text, strlen(text));
}

int h_fail(ring_status_t st, const char *what)
{
    unsigned char s[4] = {(unsigned char)st, 0, 0, 0};

    h_msg("%s: %s", what, ring_last_error());
    child_record(REC_STATUS, s, sizeof(s));
    return (int)st;
}

void h_put(int idx, uint64_t v)
{
    unsigned char rec[10];

    if (idx < 0 || idx >= H_MAX_VALUES)
        return;
    rec[0] = (unsigned char)idx;
    rec[1] = (unsigned char)(idx >> 8);
    for (int i = 0; i < 8; i++)
        rec[2 + i] = (unsigned char)(v >> (8 * i));
    child_record(REC_VALUE, rec, sizeof(rec));
}

void h_put_double(int idx, double v)
{
    uint64_t u;

    memcpy(&u, &v, sizeof(u));
    h_put(idx, u);
}

void h_ready(void)
{
    child_record(REC_READY, "", 0);
}

ring_status_t h_allreduce_loop(ring_comm_t *comm, float *buf, size_t count, int max_iters,
                               double max_time, int ready_at, int *iters)
{
    double until = h_now() + max_time;
    ring_status_t st = RING_OK;
    int i;

    for (i = 0; i < max_iters && h_now() < until; i++) {
        st = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_AVG);
        if (st != RING_OK)
            break;
        if (i == ready_at)
            h_ready();
    }
    if (iters != NULL)
        *iters = i;
    return st;
}

/* ---- parent side ------------------------------------------------------ */

uint64_t h_val(const h_result_t *r, int idx, uint64_t dflt)
{
    if (idx < 0 || idx >= H_MAX_VALUES || !r->has_val[idx])
        return dflt;
    return r->val[idx];
}

double h_val_double(const h_result_t *r, int idx, double dflt)
{
    double d;
    uint64_t u;

    if (idx < 0 || idx >= H_MAX_VALUES || !r->has_val[idx])
        return dflt;
    u = r->val[idx];
    memcpy(&d, &u, sizeof(d));
    return d;
}

static int is_v6(const char *host)
{
    return strchr(host, ':') != NULL;
}

const char *h_addr(const h_run_t *run, int rank, char *buf, size_t len)
{
    if (is_v6(run->host))
        snprintf(buf, len, "[%s]:%d", run->host, run->port[rank]);
    else
        snprintf(buf, len, "%s:%d", run->host, run->port[rank]);
    return buf;
}

const char *h_describe(const h_result_t *r, char *buf, size_t len)
{
    if (!r->started)
        snprintf(buf, len, "not started");
    else if (r->hung)
        snprintf(buf, len, "hung (killed at the deadline)");
    else if (r->stopped_killed)
        snprintf(buf, len, "stopped, killed after the others ended");
    else if (r->exited && r->code >= RING_ERR_NO_MEMORY && r->code < RING_STATUS_COUNT)
        snprintf(buf, len, "exit %d (%s)", r->code, ring_status_str((ring_status_t)r->code));
    else if (r->exited)
        snprintf(buf, len, "exit %d", r->code);
    else
        snprintf(buf, len, "signal %d (%s)", r->signo, strsignal(r->signo));
    return buf;
}

int h_outcome(const h_result_t *r)
{
    if (r->hung)
        return -200;
    if (!r->exited)
        return -100 - r->signo;
    return r->code;
}

void h_diag(const h_run_t *run)
{
    for (int i = 0; i < run->n; i++) {
        char what[96];
        const h_result_t *r = &run->r[i];

        printf("#   rank %d (%s:%d): %s at %.2f s%s%s\n", i, run->host, run->port[i],
               h_describe(r, what, sizeof(what)), r->t_end, r->msg[0] ? ": " : "", r->msg);
    }
    fflush(stdout);
}

int h_ipv6_usable(void)
{
    struct sockaddr_in6 a;
    socklen_t alen = sizeof(a);
    int l = -1, c = -1, ok = 0;

    memset(&a, 0, sizeof(a));
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    l = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &alen) != 0)
        goto out;
    c = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ok = c >= 0 && connect(c, (struct sockaddr *)&a, sizeof(a)) == 0;
out:
    if (c >= 0)
        close(c);
    if (l >= 0)
        close(l);
    return ok;
}

/* The kernel's first ephemeral port: outgoing connections take theirs above it. */
static int ephemeral_low(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int lo = 32768;

    if (f != NULL) {
        if (fscanf(f, "%d", &lo) != 1)
            lo = 32768;
        fclose(f);
    }
    return lo < 32768 ? lo : 32768;
}

/* Bind fd to a free port below the ephemeral range (a port chosen by binding
 * port 0 can be taken as the source port of another process's outgoing
 * connection before the rank that is to listen on it starts); 0, or -1. */
static int bind_below_ephemeral(int fd, struct sockaddr_storage *ss, socklen_t len)
{
    static unsigned seed;
    int span = ephemeral_low() - 1 - 10000;

    if (seed == 0)
        seed = (unsigned)getpid() * 2654435761u ^ (unsigned)(h_now() * 1e6);
    for (int attempt = 0; attempt < 500 && span > 0; attempt++) {
        uint16_t port = (uint16_t)(10000 + (int)(rand_r(&seed) % (unsigned)span));

        if (ss->ss_family == AF_INET6)
            ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
        else
            ((struct sockaddr_in *)ss)->sin_port = htons(port);
        if (bind(fd, (struct sockaddr *)ss, len) == 0)
            return 0;
    }
    return -1;
}

/* Bind one socket per rank to a free port of the host below the ephemeral range;
 * all stay open until every port is chosen. */
static int pick_ports(h_run_t *run)
{
    int fds[H_MAX_RANKS];
    int rc = 0;

    for (int i = 0; i < run->n; i++)
        fds[i] = -1;
    for (int i = 0; i < run->n && rc == 0; i++) {
        struct sockaddr_storage ss;
        socklen_t len;

        memset(&ss, 0, sizeof(ss));
        if (is_v6(run->host)) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            a->sin6_family = AF_INET6;
            rc = inet_pton(AF_INET6, run->host, &a->sin6_addr) == 1 ? 0 : -1;
            len = sizeof(*a);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            a->sin_family = AF_INET;
            rc = inet_pton(AF_INET, run->host, &a->sin_addr) == 1 ? 0 : -1;
            len = sizeof(*a);
        }
        if (rc != 0) {
            snprintf(run->error, sizeof(run->error), "bad host '%s'", run->host);
            break;
        }
        fds[i] = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || bind_below_ephemeral(fds[i], &ss, len) != 0 ||
            getsockname(fds[i], (struct sockaddr *)&ss, &len) != 0) {
            snprintf(run->error, sizeof(run->error), "cannot pick a port on %s: %s", run->host,
                     strerror(errno));
            rc = -1;
            break;
        }
        run->port[i] = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                       : ((struct sockaddr_in *)&ss)->sin_port);
    }
    for (int i = 0; i < run->n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return rc;
}

static void build_peers(h_run_t *run)
{
    size_t off = 0;

    run->peers[0] = '\0';
    for (int i = 0; i < run->n; i++) {
        char a[80];
        off += (size_t)snprintf(run->peers + off, sizeof(run->peers) - off, "%s%s",
                                i > 0 ? "," : "", h_addr(run, i, a, sizeof(a)));
    }
}

static void child_exit(int code)
{
    fflush(stderr);
    _exit(code & 255);
}

static void child_main(h_run_t *run, int rank, int fd)
{
    const h_spec_t *sp = &run->spec;
    ring_config_t cfg;
    char num[32];
    double alarm_s = sp->child_timeout > 0 ? sp->child_timeout : 20;
    struct {
        const char *name, *value;
    } base[5];
    int code;

    /* die with the parent; stdout belongs to TAP */
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(2, 1);
    child_fd = fd;
    signal(SIGPIPE, SIG_IGN);
    alarm((unsigned)(alarm_s + 0.999));

    ring_config_init(&cfg);
    base[0].name = "rank";
    snprintf(num, sizeof(num), "%d", rank);
    base[0].value = num;
    base[1].name = "world-size";
    base[1].value = NULL;
    base[2].name = "peers";
    base[2].value = run->peers;
    base[3].name = "timeout";
    base[3].value = sp->timeout != NULL ? sp->timeout : "10s";
    base[4].name = "connect-timeout";
    base[4].value = sp->connect_timeout != NULL ? sp->connect_timeout : "10s";
    for (int i = 0; i < 5; i++) {
        char ws[16];
        const char *v = base[i].value;
        ring_status_t st;

        if (v == NULL) {
            snprintf(ws, sizeof(ws), "%d", run->n);
            v = ws;
        }
        st = ring_config_set(&cfg, base[i].name, v, RING_SRC_API);
        if (st != RING_OK) {
            h_fail(st, "harness: ring_config_set");
            child_exit(90);
        }
    }
    for (const h_setting_t *s = sp->settings; s != NULL && s->name != NULL; s++) {
        ring_status_t st;

        if (s->rank >= 0 && s->rank != rank)
            continue;
        st = ring_config_set(&cfg, s->name, s->value, RING_SRC_API);
        if (st != RING_OK) {
            h_fail(st, "harness: ring_config_set");
            child_exit(90);
        }
    }
    code = sp->fn(rank, run->n, &cfg, sp->arg);
    ring_config_free(&cfg);
    child_exit(code);
}

int h_signal(h_run_t *run, int rank, int sig)
{
    if (rank < 0 || rank >= run->n || !run->live[rank])
        return -1;
    if (kill(run->r[rank].pid, sig) != 0)
        return -1;
    run->t_signal[rank] = h_now() - run->t0;
    run->last_signal[rank] = sig;
    if (sig == SIGSTOP)
        run->stopped[rank] = 1;
    else if (sig == SIGCONT || sig == SIGKILL)
        run->stopped[rank] = 0;
    return 0;
}

static void parse_records(h_run_t *run, int rank)
{
    h_result_t *r = &run->r[rank];
    unsigned char *b = run->buf[rank];
    size_t off = 0;

    while (run->buflen[rank] - off >= 3) {
        size_t len = (size_t)b[off + 1] | (size_t)b[off + 2] << 8;
        const unsigned char *p = b + off + 3;

        if (run->buflen[rank] - off - 3 < len)
            break;
        switch (b[off]) {
        case REC_MSG:
            memcpy(r->msg, p, len < H_MSG_MAX - 1 ? len : H_MSG_MAX - 1);
            r->msg[len < H_MSG_MAX - 1 ? len : H_MSG_MAX - 1] = '\0';
            break;
        case REC_READY:
            if (r->t_ready < 0)
                r->t_ready = h_now() - run->t0;
            break;
        case REC_STATUS:
            if (len >= 1)
                r->status = p[0];
            break;
        case REC_VALUE:
            if (len == 10) {
                int idx = p[0] | p[1] << 8;
                uint64_t v = 0;
                for (int i = 0; i < 8; i++)
                    v |= (uint64_t)p[2 + i] << (8 * i);
                if (idx < H_MAX_VALUES) {
                    r->val[idx] = v;
                    r->has_val[idx] = 1;
                }
            }
            break;
        default:
            break;
        }
        off += 3 + len;
    }
    memmove(b, b + off, run->buflen[rank] - off);
    run->buflen[rank] -= off;
}

/* Read what is there; closes the pipe at EOF. */
static void read_pipe(h_run_t *run, int rank)
{
    for (;;) {
        ssize_t got;

        if (run->fd[rank] < 0)
            return;
        if (run->buflen[rank] == sizeof(run->buf[rank]))
            run->buflen[rank] = 0; /* a record larger than the buffer cannot happen */
        got = read(run->fd[rank], run->buf[rank] + run->buflen[rank],
                   sizeof(run->buf[rank]) - run->buflen[rank]);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(run->fd[rank]);
                run->fd[rank] = -1;
            }
            return;
        }
        run->buflen[rank] += (size_t)got;
        parse_records(run, rank);
    }
}

static void reap(h_run_t *run, int rank, int wstatus)
{
    h_result_t *r = &run->r[rank];

    run->live[rank] = 0;
    r->t_end = h_now() - run->t0;
    if (WIFEXITED(wstatus)) {
        r->exited = 1;
        r->code = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
        r->signo = WTERMSIG(wstatus);
    }
    read_pipe(run, rank); /* the child is gone: what it wrote is all there */
    if (run->fd[rank] >= 0) {
        close(run->fd[rank]);
        run->fd[rank] = -1;
    }
}

static void kill_rank(h_run_t *run, int rank)
{
    kill(run->r[rank].pid, SIGKILL);
    kill(run->r[rank].pid, SIGCONT);
}

int h_run(const h_spec_t *spec, h_run_t *run)
{
    double child_timeout, deadline;
    int alive = 0;

    memset(run, 0, sizeof(*run));
    run->spec = *spec;
    run->n = spec->n;
    snprintf(run->host, sizeof(run->host), "%s", spec->host != NULL ? spec->host : "127.0.0.1");
    for (int i = 0; i < H_MAX_RANKS; i++) {
        run->fd[i] = -1;
        run->r[i].t_ready = -1;
        run->r[i].status = -1;
        run->t_signal[i] = -1;
    }
    if (spec->n < 1 || spec->n > H_MAX_RANKS || spec->fn == NULL ||
        spec->nactions > H_MAX_ACTIONS) {
        snprintf(run->error, sizeof(run->error), "bad spec (n = %d)", spec->n);
        return -1;
    }
    child_timeout = spec->child_timeout > 0 ? spec->child_timeout : 20;
    deadline = spec->deadline > 0 ? spec->deadline : child_timeout + 3;
    if (pick_ports(run) != 0)
        return -1;
    build_peers(run);

    fflush(stdout);
    fflush(stderr);
    run->t0 = h_now();
    for (int i = 0; i < run->n; i++) {
        int p[2];
        pid_t pid;

        if (spec->absent & (1u << i))
            continue;
        if (pipe(p) != 0) {
            snprintf(run->error, sizeof(run->error), "pipe: %s", strerror(errno));
            break;
        }
        pid = fork();
        if (pid < 0) {
            snprintf(run->error, sizeof(run->error), "fork: %s", strerror(errno));
            close(p[0]);
            close(p[1]);
            break;
        }
        if (pid == 0) {
            close(p[0]);
            for (int j = 0; j < i; j++)
                if (run->fd[j] >= 0)
                    close(run->fd[j]);
            child_main(run, i, p[1]);
        }
        close(p[1]);
        (void)fcntl(p[0], F_SETFL, O_NONBLOCK);
        (void)fcntl(p[0], F_SETFD, FD_CLOEXEC);
        run->fd[i] = p[0];
        run->r[i].pid = pid;
        run->r[i].started = 1;
        run->live[i] = 1;
        alive++;
    }
    if (run->error[0] != '\0') {
        /* could not start them all: take down what runs */
        for (int i = 0; i < run->n; i++)
            if (run->live[i])
                kill_rank(run, i);
    }

    while (alive > 0) {
        double t = h_now() - run->t0;
        struct pollfd pfd[H_MAX_RANKS];
        int map[H_MAX_RANKS], np = 0, others_live = 0, stopped_live = 0;

        if (t > deadline) {
            for (int i = 0; i < run->n; i++)
                if (run->live[i] && !run->r[i].hung) {
                    run->r[i].hung = 1;
                    run->nhung++;
                    kill_rank(run, i);
                    printf("# harness: rank %d (pid %d) still running at the %.1f s deadline: "
                           "killed\n", i, (int)run->r[i].pid, deadline);
                    fflush(stdout);
                }
        } else if (run->error[0] == '\0') {
            for (int a = 0; a < spec->nactions; a++) {
                const h_action_t *act = &spec->actions[a];
                double when = act->at;

                if (run->action_done[a])
                    continue;
                if (act->after_ready >= 0) {
                    if (act->after_ready >= run->n || run->r[act->after_ready].t_ready < 0)
                        continue;
                    when += run->r[act->after_ready].t_ready;
                }
                if (t >= when) {
                    run->action_done[a] = 1;
                    (void)h_signal(run, act->target, act->sig);
                }
            }
            if (spec->tick != NULL)
                spec->tick(run, t, spec->tick_arg);
            /* a rank we stopped is not waited for once every other rank has ended */
            for (int i = 0; i < run->n; i++) {
                if (!run->live[i])
                    continue;
                if (run->stopped[i])
                    stopped_live++;
                else
                    others_live++;
            }
            if (stopped_live > 0 && others_live == 0)
                for (int i = 0; i < run->n; i++)
                    if (run->live[i] && run->stopped[i]) {
                        run->r[i].stopped_killed = 1;
                        kill_rank(run, i);
                        run->stopped[i] = 0;
                    }
        }
        for (int i = 0; i < run->n; i++)
            if (run->fd[i] >= 0) {
                pfd[np].fd = run->fd[i];
                pfd[np].events = POLLIN;
                map[np++] = i;
            }
        if (np > 0) {
            (void)poll(pfd, (nfds_t)np, 5);
            for (int k = 0; k < np; k++)
                if (pfd[k].revents != 0)
                    read_pipe(run, map[k]);
        } else {
            usleep(5000);
        }
        for (int i = 0; i < run->n; i++) {
            int ws;
            pid_t w;

            if (!run->live[i])
                continue;
            w = waitpid(run->r[i].pid, &ws, WNOHANG);
            if (w == run->r[i].pid) {
                reap(run, i, ws);
                alive--;
            }
        }
    }
    run->t_done = h_now() - run->t0;
    for (int i = 0; i < run->n; i++)
        if (run->fd[i] >= 0) {
            close(run->fd[i]);
            run->fd[i] = -1;
        }
    return run->error[0] != '\0' ? -1 : 0;
}

h_run_t *h_run_ring(const h_ring_spec_t *rs)
{
    static h_run_t own; /* large: not on the stack */
    h_run_t *run = rs->run != NULL ? rs->run : &own;
    double budget = rs->budget > 0 ? rs->budget : 20;
    h_spec_t sp;

    memset(&sp, 0, sizeof(sp));
    sp.n = rs->n;
    sp.host = rs->host;
    sp.timeout = rs->timeout;
    sp.connect_timeout = rs->connect_timeout;
    sp.settings = rs->settings;
    sp.absent = rs->absent;
    sp.child_timeout = budget;
    sp.deadline = budget + (rs->grace > 0 ? rs->grace : 3);
    sp.actions = rs->actions;
    sp.nactions = rs->nactions;
    sp.tick = rs->tick;
    sp.tick_arg = rs->tick_arg;
    sp.fn = rs->fn;
    sp.arg = rs->arg;
    if (h_run(&sp, run) == 0)
        return run;
    printf("%s%s%sharness: %s\n", rs->on_error == H_DIAG ? "# " : "Bail out! ",
           rs->label != NULL ? rs->label : "", rs->label != NULL ? ": " : "", run->error);
    fflush(stdout);
    if (rs->on_error != H_DIAG)
        exit(255);
    return NULL;
}
