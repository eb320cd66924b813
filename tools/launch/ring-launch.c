/* ring-launch: start N local ranks of a ringd program, like a tiny mpirun.
 *
 * The launcher picks N TCP ports (launch-ports.c), starts each rank in its own
 * process group with RING_* variables describing the ring, relays the ranks'
 * output with a "[rank] " prefix (launch-relay.c; rank 0 on a pseudo-terminal
 * when ours is one, launch-pty.c) and tears the whole job down as soon as one
 * rank fails, so a broken ring never leaves peers blocked forever on a dead
 * neighbour; a rank stopped by a signal, which its peers time out on, is
 * named as the likely cause and killed at once (launch-stopped.c). Each rank
 * also gets torchrun's variables (launch-torch.c) and the path of the job's
 * secret (launch-secret.c). Across nodes, one ring-launch per node, its ranks
 * meet the others' at a rendezvous (launch-nodes.c). With --timeline it
 * merges the ranks' trace-event files once they have exited (timeline-merge.c).
 * With --elastic a lost rank stops nobody and may be replaced (launch-elastic.c),
 * and the ranks meet at a store ring-launch serves (launch-store.c). */
#ifdef HAVE_CONFIG_H
#include "ring_build.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "blas_core.h"
#include "launch-elastic.h"
#include "launch-job.h"
#include "launch-nodes.h"
#include "launch-opts.h"
#include "launch-ports.h"
#include "launch-pty.h"
#include "launch-ranks.h"
#include "launch-relay.h"
#include "launch-secret.h"
#include "launch-stopped.h"
#include "launch-store.h"
#include "launch-torch.h"
#include "timeline-merge.h"

#define LAUNCH_DRAIN_MS 2000      /* grandchildren may hold pipes open */
#define LAUNCH_KILL_WAIT_MS 5000  /* after SIGKILL, give up eventually */

static int launch_sigpipe[2] = { -1, -1 };
static sigset_t launch_sigset;    /* the signals we catch */

static long long launch_clock_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        perror("ring-launch: clock_gettime");
        exit(1);
    }
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs in the forked child and never returns. Errors go out through
 * write/_exit because the stdio buffers are copies of the launcher's. */
static void launch_child_exec(const struct launch_opts *o, long i, char **argv,
                              const char *peers, const struct launch_torch *torch,
                              int out_fd, int err_fd)
{
    char msg[512];
    sigset_t none;
    int devnull, ok, len;
    /* Signals arrive blocked; unblock only once the inherited handlers are
     * gone, since they would write into the launcher's signal pipe. */
    ok = signal(SIGINT, SIG_DFL) != SIG_ERR &&
         signal(SIGTERM, SIG_DFL) != SIG_ERR &&
         signal(SIGCHLD, SIG_DFL) != SIG_ERR &&
         signal(SIGPIPE, SIG_DFL) != SIG_ERR && sigemptyset(&none) == 0 &&
         sigprocmask(SIG_SETMASK, &none, NULL) == 0 && setpgid(0, 0) == 0;
    devnull = open("/dev/null", O_RDONLY);
    ok = ok && devnull >= 0 && dup2(devnull, 0) == 0 &&
         dup2(out_fd, 1) == 1 && dup2(err_fd, 2) == 2;
    /* ring-launch's --timeline beats a RING_TIMELINE of the caller's */
    ok = ok && (!o->timeline || (setenv("RING_TIMELINE", o->timeline_parts, 1) == 0));
    ok = ok && launch_rank_setenv(o, i, peers) == 0 && launch_torch_setenv(o, i, torch) == 0;
    if (ok && o->bind_core) {
        cpu_set_t one;

        CPU_ZERO(&one);
        CPU_SET(o->cpus[i % o->ncpus], &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0) {
            len = snprintf(msg, sizeof(msg), "ring-launch: rank %ld runs unbound: "
                           "sched_setaffinity(CPU %d): %s\n", launch_global_rank(o, i),
                           o->cpus[i % o->ncpus], strerror(errno));
            ssize_t w = write(2, msg, len > 0 ? (size_t)len : 0);
            (void)w;
        }
    }
    if (ok)
        execvp(argv[0], argv);
    len = snprintf(msg, sizeof(msg), "ring-launch: cannot run '%s': %s\n",
                   argv[0], strerror(errno));
    ssize_t r = write(2, msg, len > 0 ? (size_t)len : 0);
    (void)r;    /* nowhere left to report a failed write */
    _exit(127);
}

static int launch_fd_prepare(int fd, int nonblock)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
        return -1;
    return nonblock ? fcntl(fd, F_SETFL, fl | O_NONBLOCK) : 0;
}

/* Rank 0's stdout as a pseudo-terminal when ring-launch's is a terminal, so
 * its progress bar shows (launch-pty.c); p is then {master, terminal side}. */
static int launch_child_pty(struct launch_state *st, long i, int p[2])
{
    static int warned;
    char prefix[32];
    int cols = st->opt.prefix ? launch_prefix_format(prefix, sizeof(prefix),
                                                     launch_global_rank(&st->opt, i),
                                                     st->kids[i].gen)
                              : 0;

    if (!st->opt.tty || launch_global_rank(&st->opt, i) != 0 || !st->relay.out_tty[1])
        return 0;
    if (launch_pty_open(cols, &p[0], &p[1]) == 0)
        return 1;
    if (!warned++)
        fprintf(stderr, "ring-launch: no pseudo-terminal for rank 0 (%s): its output comes "
                "line by line, without a progress bar (--no-tty says so quietly)\n",
                strerror(errno));
    return 0;
}

static int launch_child_spawn(struct launch_state *st, long i, const char *peers)
{
    struct launch_child *c = &st->kids[i];
    sigset_t old;
    int p[2][2], k, tty;
    /* built before fork: the child only execs */
    char **argv = launch_rank_argv(&st->opt, i);
    if (argv == NULL)
        return -1;
    for (k = 0; k < 2; k++) {
        tty = k == 0 && launch_child_pty(st, i, p[k]);
        if (!tty && (pipe(p[k]) != 0 || launch_fd_prepare(p[k][0], 1) != 0 ||
                     launch_fd_prepare(p[k][1], 0) != 0))
            goto fail;
        c->io[k] = (struct launch_stream){ .fd = p[k][0], .out_fd = k + 1, .tty = tty,
                                           .gen = c->gen, .buf = malloc(LAUNCH_LINE_MAX) };
        if (!c->io[k].buf)
            goto fail;
        if (tty)
            st->relay.tty = &c->io[k];
    }
    if (sigprocmask(SIG_BLOCK, &launch_sigset, &old) != 0)
        goto fail;
    c->pid = fork();
    if (c->pid == 0)
        launch_child_exec(&st->opt, i, argv, peers, &st->torch, p[0][1], p[1][1]);
    launch_rank_argv_free(argv);
    if (sigprocmask(SIG_SETMASK, &old, NULL) != 0 || c->pid < 0)
        return -1;
    /* Set the group here too, as we may signal it before the child runs.
     * EACCES means the child already exec'd, after its own setpgid. */
    if (setpgid(c->pid, c->pid) != 0 && errno != EACCES && errno != ESRCH)
        perror("ring-launch: setpgid");
    c->running = 1;
    st->running++;
    /* the rank holds the other ends now: closing ours makes its exit an EOF (EIO on a pty) */
    return close(p[0][1]) == 0 && close(p[1][1]) == 0 ? 0 : -1;
fail:
    launch_rank_argv_free(argv);
    return -1;
}

static void launch_signal_note(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t r = write(launch_sigpipe[1], &b, 1);
    (void)r;    /* a full pipe already guarantees a wakeup */
    errno = saved;
}

/* Self-pipe: handlers only write the signal number; the loop does the work. */
static int launch_signals_install(void)
{
    const int sigs[] = { SIGINT, SIGTERM, SIGCHLD };
    struct sigaction sa = { .sa_handler = launch_signal_note,
                            .sa_flags = SA_RESTART };
    size_t i;
    if (pipe(launch_sigpipe) != 0 || launch_fd_prepare(launch_sigpipe[0], 1) ||
        launch_fd_prepare(launch_sigpipe[1], 1) ||
        sigemptyset(&sa.sa_mask) != 0 || sigemptyset(&launch_sigset) != 0)
        return -1;
    for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigaction(sigs[i], &sa, NULL) != 0 ||
            sigaddset(&launch_sigset, sigs[i]) != 0)
            return -1;
    /* A closed launcher stdout must not kill us before ranks are reaped. */
    return signal(SIGPIPE, SIG_IGN) == SIG_ERR ? -1 : 0;
}

/* Counts the pipes still open; with CLOSE_THEM, flushes and closes them. */
static long launch_streams_sweep(struct launch_state *st, int close_them)
{
    long i, open_fds = 0;
    int k;
    for (i = 0; i < st->opt.n; i++)
        for (k = 0; k < 2; k++)
            if (st->kids[i].io[k].fd >= 0) {
                open_fds++;
                if (close_them)
                    launch_stream_close(&st->relay, &st->kids[i].io[k],
                                        launch_global_rank(&st->opt, i));
            }
    return open_fds;
}

/* A stopped rank cannot act on SIGTERM, which stays pending until a SIGCONT
 * (and one continued only to be told to stop would wait on peers that are
 * gone): waiting the grace period for it only delays the end, so its group
 * gets SIGKILL now. Its peers fail because it stopped answering, so it is
 * named as the likely cause (launch_result_report). */
static void launch_stopped_kill(struct launch_state *st)
{
    long i, n = st->opt.n;
    pid_t *groups = calloc((size_t)n, sizeof(*groups));
    unsigned char *stopped = calloc((size_t)n, 1);

    if (groups != NULL && stopped != NULL) {
        for (i = 0; i < n; i++)
            groups[i] = st->kids[i].running && !st->kids[i].stopped ? st->kids[i].pid : 0;
        if (launch_stopped_find(groups, n, stopped) > 0)
            for (i = 0; i < n; i++)
                if (stopped[i]) {
                    st->kids[i].stopped = 1;
                    if (kill(-st->kids[i].pid, SIGKILL) != 0 && errno != ESRCH)
                        perror("ring-launch: kill");
                }
    }
    free(groups);
    free(stopped);
}

/* Signals each live rank's process group so helpers it forked die too. */
static void launch_stop_begin(struct launch_state *st, int sig)
{
    long i;
    if (sig != SIGKILL)
        launch_stopped_kill(st);
    for (i = 0; i < st->opt.n; i++)
        if (st->kids[i].running && (!st->kids[i].stopped || sig == SIGKILL) &&
            kill(-st->kids[i].pid, sig) != 0 && errno != ESRCH)
            perror("ring-launch: kill");
    if (!st->stop_at)
        st->stop_at = launch_clock_now() + (long long)(st->opt.grace * 1000);
}

static void launch_child_record(struct launch_state *st, long rank, int status)
{
    st->kids[rank].running = 0;
    st->running--;
    if (st->opt.elastic_min > 0) {    /* a lost rank: the others go on */
        enum launch_elastic_act act = launch_elastic_record(st, rank, status);

        if (act == LAUNCH_EL_REPLACE)
            act = launch_elastic_replaced(st, rank,
                                          launch_child_spawn(st, rank, st->peers) == 0);
        if (act == LAUNCH_EL_STOP)
            launch_stop_begin(st, SIGTERM);
        if (act != LAUNCH_EL_FAIL)
            return;
    }
    if (st->first_rank >= 0 || (WIFEXITED(status) && !WEXITSTATUS(status)))
        return;
    st->first_rank = rank;
    st->first_status = status;
    st->others_stopped = st->running;
    if (st->running > 0 && !st->timed_out)
        launch_stop_begin(st, SIGTERM);
}

static void launch_children_reap(struct launch_state *st)
{
    int status;
    long i;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) != 0) {
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            return;     /* ECHILD: nothing left to reap */
        for (i = 0; i < st->opt.n; i++)
            if (st->kids[i].pid == pid && st->kids[i].running)
                launch_child_record(st, i, status);
    }
}

/* The same signal again within this many ms is the same request: timeout(1)
 * and other wrappers signal both ring-launch and its process group, and a
 * second signal makes ringd abort at once instead of checkpointing. */
#define LAUNCH_SIGNAL_SAME_MS 100

static void launch_signals_handle(struct launch_state *st)
{
    unsigned char b;
    while (read(launch_sigpipe[0], &b, 1) == 1) {
        long long now;

        if (b != SIGINT && b != SIGTERM)
            continue;   /* SIGCHLD only needs to wake poll */
        now = launch_clock_now();
        if (b == st->got_signal && now - st->signal_at < LAUNCH_SIGNAL_SAME_MS)
            continue;
        if (!st->got_signal)
            fprintf(stderr, "ring-launch: caught signal %d (%s); forwarding "
                    "to %ld ranks\n", b, strsignal(b), st->running);
        st->got_signal = b;
        st->signal_at = now;
        launch_stop_begin(st, b);
    }
}

/* Fires whichever deadlines have passed; returns ms until the next one. */
static int launch_deadlines_check(struct launch_state *st, long long now)
{
    long long next = now + LAUNCH_POLL_MS;
    if (st->opt.elastic_min > 0 && launch_elastic_late(st, now))
        launch_stop_begin(st, SIGTERM);     /* replacements the ended ring never took */
    if (st->timeout_at && !st->stop_at && st->running > 0) {
        if (now >= st->timeout_at) {
            fprintf(stderr, "ring-launch: timed out after %g s; killing all "
                    "%ld ranks\n", st->opt.timeout, st->opt.n);
            st->timed_out = 1;
            launch_stop_begin(st, SIGTERM);
        }
        next = st->timeout_at < next ? st->timeout_at : next;
    }
    if (st->stop_at && !st->killed && st->running > 0) {
        if (now >= st->stop_at) {
            launch_stop_begin(st, SIGKILL);
            st->killed = 1;
            st->kill_at = now + LAUNCH_KILL_WAIT_MS;
        }
        next = st->stop_at < next ? st->stop_at : next;
    }
    if (st->killed && st->running > 0 && now >= st->kill_at) {
        fprintf(stderr, "ring-launch: %ld ranks survived SIGKILL; giving up\n",
                st->running);
        st->abandoned = 1;
    }
    if (st->running == 0 && !st->drain_until)
        st->drain_until = now + LAUNCH_DRAIN_MS;
    return (int)(next > now ? next - now : 0);
}

static int launch_job_run(struct launch_state *st)
{
    long n = st->opt.n, i;
    struct pollfd *pfd = calloc((size_t)(2 * n + 1), sizeof(*pfd));
    int k;
    if (!pfd) {
        launch_stop_begin(st, SIGKILL);   /* cannot supervise them */
        return -1;
    }
    while (st->running > 0 || launch_streams_sweep(st, 0) > 0) {
        long long now = launch_clock_now();
        int wait_ms = launch_deadlines_check(st, now);
        if (st->abandoned || (st->drain_until && now >= st->drain_until))
            break;
        pfd[0] = (struct pollfd){ .fd = launch_sigpipe[0], .events = POLLIN };
        /* Closed streams keep their slot with fd -1, which poll ignores. */
        for (i = 0; i < 2 * n; i++)
            pfd[i + 1] = (struct pollfd){ .fd = st->kids[i / 2].io[i % 2].fd,
                                          .events = POLLIN };
        if (poll(pfd, (nfds_t)(2 * n + 1), wait_ms) < 0 && errno != EINTR) {
            perror("ring-launch: poll");
            launch_stop_begin(st, SIGKILL);   /* cannot supervise them */
            st->abandoned = 1;
            break;
        }
        launch_signals_handle(st);
        for (i = 0; i < n; i++)
            for (k = 0; k < 2; k++)
                if (pfd[1 + 2 * i + k].fd >= 0 && pfd[1 + 2 * i + k].revents)
                    launch_stream_read(&st->relay, &st->kids[i].io[k],
                                       launch_global_rank(&st->opt, i));
        launch_children_reap(st);
    }
    launch_streams_sweep(st, 1);
    free(pfd);
    return 0;
}

/* The ranks that were stopped when the job was torn down: the likely cause. */
static void launch_stopped_report(const struct launch_state *st)
{
    for (long i = 0; i < st->opt.n; i++) {
        if (!st->kids[i].stopped)
            continue;
        fprintf(stderr, "ring-launch: rank %ld (pid %ld) was stopped (SIGSTOP: state T)",
                launch_global_rank(&st->opt, i), (long)st->kids[i].pid);
        if (st->timed_out)
            fputs(", the likely reason the job did not end in time", stderr);
        else if (st->first_rank >= 0 && !st->got_signal)
            fprintf(stderr, ", the likely cause of rank %ld's failure: a stopped rank stops "
                    "answering and its peers time out on it",
                    launch_global_rank(&st->opt, st->first_rank));
        fputs("; killed it at once (a stopped process cannot act on SIGTERM)\n", stderr);
    }
}

/* A signal to the launcher is forwarded, and the status is then what the
 * ranks made of it, as srun's ("the highest exit code of all tasks"): ranks
 * that stop cleanly on it (ringd finishes its step, checkpoints and exits 0)
 * make a job that ended as asked, 0; a rank that dies of it makes 128+SIG, so
 * a script running ring-launch in a loop stops too. torchrun instead always
 * fails after a signal, which would call a clean, checkpointed stop an error. */
static int launch_result_report(const struct launch_state *st)
{
    int status = st->first_status;
    long r = st->first_rank;
    if (st->opt.elastic_min > 0 && !st->spawn_failed && !st->timed_out && !st->got_signal &&
        !st->abandoned && (status = launch_elastic_report(st)) >= 0)
        return status;
    status = st->first_status;
    if (st->spawn_failed || st->timed_out) {
        launch_stopped_report(st);
        return st->spawn_failed ? 1 : 124;
    }
    if (r < 0 && st->got_signal && !st->abandoned)
        fprintf(stderr, "ring-launch: every rank exited 0 after the forwarded signal %d (%s): "
                "the job stopped cleanly\n", st->got_signal, strsignal(st->got_signal));
    if (r < 0) {
        launch_stopped_report(st);
        return st->abandoned;
    }
    fprintf(stderr, "ring-launch: rank %ld (pid %ld) ", launch_global_rank(&st->opt, r),
            (long)st->kids[r].pid);
    if (WIFSIGNALED(status))
        fprintf(stderr, "was killed by signal %d (%s)%s", WTERMSIG(status),
                strsignal(WTERMSIG(status)),
                WTERMSIG(status) == st->got_signal ? ", which ring-launch forwarded" : "");
    else
        fprintf(stderr, "exited with status %d", WEXITSTATUS(status));
    if (st->others_stopped > 0)
        fprintf(stderr, " first; stopped the other %ld rank%s",
                st->others_stopped, st->others_stopped == 1 ? "" : "s");
    fputc('\n', stderr);
    launch_stopped_report(st);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* Probing holds a socket per rank and each rank needs two pipes, so the
 * usual soft limit of 1024 descriptors is too small for large N. Also
 * keeps fds 0-2 occupied: a pipe end landing there would make the child's
 * dup2 a no-op that leaves FD_CLOEXEC set. */
static void launch_fds_prepare(long n)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)(3 * n + 32);
    int fd;
    while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
        continue;
    if (fd > 2 && close(fd) != 0)
        perror("ring-launch: close");
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
        return;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        fprintf(stderr, "ring-launch: %ld ranks need %lu open files but the "
                "limit is %lu\n", n, (unsigned long)need,
                (unsigned long)rl.rlim_max);
        exit(1);
    }
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        perror("ring-launch: setrlimit");
        exit(1);
    }
}

static void launch_ranks_start(struct launch_state *st, int *probe_fds, int torch_fd,
                               const char *peers)
{
    long i;
    for (i = 0; i < st->opt.n; i++) {
        st->kids[i].io[0].fd = st->kids[i].io[1].fd = -1;
        if (probe_fds[i] >= 0 && close(probe_fds[i]) != 0)
            perror("ring-launch: close");
    }
    if (torch_fd >= 0 && close(torch_fd) != 0)
        perror("ring-launch: close");
    for (i = 0; i < st->opt.n; i++) {
        if (launch_child_spawn(st, i, peers) != 0) {
            fprintf(stderr, "ring-launch: cannot start rank %ld: %s\n",
                    launch_global_rank(&st->opt, i), strerror(errno));
            st->spawn_failed = 1;
            launch_stop_begin(st, SIGTERM);
            return;
        }
    }
    if (st->opt.timeout > 0)
        st->timeout_at = launch_clock_now() +
                         (long long)(st->opt.timeout * 1000);
}

static void launch_state_free(struct launch_state *st)
{
    for (long i = 0; st->kids != NULL && i < st->opt.n; i++) {
        free(st->kids[i].io[0].buf);
        free(st->kids[i].io[1].buf);
    }
    free(st->kids);
}

/* FILE.R.part: what libringd of rank R makes of RING_TIMELINE=FILE.{rank}.part */
static char *launch_timeline_part(const struct launch_opts *o, long rank)
{
    char *p;
    return asprintf(&p, "%s.%ld.part", o->timeline, rank) < 0 ? NULL : p;
}

/* The ranks' RING_TIMELINE; parts an earlier job left must not join this one. */
static int launch_timeline_prepare(struct launch_opts *o)
{
    long r;
    if (!o->timeline)
        return 0;
    if (asprintf(&o->timeline_parts, "%s.{rank}.part", o->timeline) < 0) {
        o->timeline_parts = NULL;
        return -1;
    }
    for (r = 0; r < o->n; r++) {
        char *p = launch_timeline_part(o, launch_global_rank(o, r));
        if (!p)
            return -1;
        if (unlink(p) != 0 && errno != ENOENT)
            fprintf(stderr, "ring-launch: cannot remove the old %s: %s\n", p,
                    strerror(errno));
        free(p);
    }
    return 0;
}

/* Merges the parts the ranks wrote into FILE and deletes them; 0 or 1. */
static int launch_timeline_merge(const struct launch_opts *o)
{
    char **parts = calloc((size_t)o->n + 1, sizeof(*parts));
    long r, found = 0, first_missing = -1, events = 0;
    int rc = 0;
    if (!parts) {
        fputs("ring-launch: out of memory\n", stderr);
        return 1;
    }
    for (r = 0; r < o->n; r++) {
        char *p = launch_timeline_part(o, launch_global_rank(o, r));
        if (p && access(p, F_OK) == 0) {
            parts[found++] = p;
            continue;
        }
        if (first_missing < 0)
            first_missing = launch_global_rank(o, r);
        free(p);
    }
    if (found == 0) {
        fprintf(stderr, "ring-launch: --timeline: no rank wrote %s (does PROGRAM use "
                "libringd? a --timeline flag of its own beats RING_TIMELINE)\n",
                o->timeline_parts);
    } else {
        if (found < o->n)
            fprintf(stderr, "ring-launch: --timeline: %ld of %ld ranks wrote no "
                    "timeline (rank %ld first)\n", o->n - found, o->n, first_missing);
        if (tl_merge_files(o->timeline, parts, (int)found, "ring-launch", &events) != 0) {
            fprintf(stderr, "ring-launch: the ranks' timelines stay in %s\n",
                    o->timeline_parts);
            rc = 1;
        } else {
            for (r = 0; r < found; r++)
                if (unlink(parts[r]) != 0)
                    fprintf(stderr, "ring-launch: cannot remove %s: %s\n", parts[r],
                            strerror(errno));
            fprintf(stderr, "ring-launch: timeline of %ld rank%s (%ld events) in %s\n",
                    found, found == 1 ? "" : "s", events, o->timeline);
        }
    }
    for (r = 0; r < found; r++)
        free(parts[r]);
    free(parts);
    return rc;
}

static int launch_merge_only(char **merge)
{
    int nin = 0;
    long events = 0;
    while (merge[1 + nin])
        nin++;
    if (tl_merge_files(merge[0], merge + 1, nin, "ring-launch", &events) != 0)
        return 1;
    fprintf(stderr, "ring-launch: %d timeline%s (%ld events) merged into %s\n", nin,
            nin == 1 ? "" : "s", events, merge[0]);
    return 0;
}

/* One run of the job: ports, peers, the ranks, until they end; the exit status. */
static int launch_attempt(struct launch_state *st)
{
    char *peers = NULL;
    int *ports, *probe_fds = NULL;
    int rc;

    launch_relay_init(&st->relay, st->opt.prefix);
    ports = calloc((size_t)st->opt.n, sizeof(*ports));
    st->kids = calloc((size_t)st->opt.n, sizeof(*st->kids));
    if (!ports || !st->kids) {
        fputs("ring-launch: out of memory\n", stderr);
        rc = 1;
    } else if ((probe_fds = launch_ports_probe(&st->opt, ports)) == NULL) {
        rc = 1; /* it said why */
    } else if ((peers = launch_peers_build(&st->opt, ports)) == NULL) {
        fputs("ring-launch: out of memory\n", stderr);
        rc = 1;
    } else {
        /* while the ranks' ports are held, so that MASTER_PORT is none of them */
        int torch_fd = launch_torch_prepare(&st->opt, &st->torch);

        st->peers = peers;

        launch_ranks_start(st, probe_fds, torch_fd, peers);
        if (launch_job_run(st) != 0) {
            fputs("ring-launch: out of memory\n", stderr);
            rc = 1;
        } else {
            rc = launch_result_report(st);
        }
    }
    free(probe_fds);
    free(peers);
    free(ports);
    launch_state_free(st);
    return rc;
}

/*
 * As torchrun does: several ranks on one host each starting a thread per CPU
 * for OpenMP or OpenBLAS oversubscribe the cores, and OpenBLAS's idle threads
 * spin (sched_yield) between calls: 4 PyTorch peers on 2 cores spent most of
 * their CPU there (torch.set_num_threads does not reach Debian's OpenBLAS).
 * Each rank gets CPUs / ranks threads, unless the caller chose.
 */
static void launch_threads_setenv(const struct launch_opts *o)
{
    static const char *const vars[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"};
    cpu_set_t mine;
    long cpus = sched_getaffinity(0, sizeof(mine), &mine) == 0 ? CPU_COUNT(&mine) : 1, per;
    char val[24];
    int set = 0;

    if (o->n < 2)
        return;
    per = cpus > o->n ? cpus / o->n : 1;
    snprintf(val, sizeof(val), "%ld", per);
    for (size_t k = 0; k < sizeof(vars) / sizeof(vars[0]); k++)
        if (getenv(vars[k]) == NULL && setenv(vars[k], val, 1) == 0)
            set++;
    if (set == 2)
        fprintf(stderr, "ring-launch: OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=%s for each of the "
                "%ld ranks (%ld CPUs / %ld ranks); set them to choose another count\n", val,
                o->n, cpus, o->n);
}

/*
 * An OpenBLAS older than the CPU runs its generic kernels there (Debian 12's
 * 0.3.21 runs "Prescott" code on an Emerald Rapids Xeon: sgemm 4.8x slower than
 * its own Cooperlake kernels). The ranks get the kernel set the CPU can run,
 * unless the caller chose one. OpenBLAS reads OPENBLAS_CORETYPE when it loads,
 * so it must be in the environment before the rank starts. Ranks started through
 * --exec-prefix may run on another machine (ssh), whose CPU this one cannot
 * vouch for: kernels it lacks would crash them, so they only get the advice.
 */
static void launch_blas_setenv(const struct launch_opts *o)
{
    const char *chosen = getenv("OPENBLAS_CORETYPE"), *core = openblas_get_corename(), *advice;
    ring_cpu_level_t level = ring_cpu_level_detect();

    if (chosen != NULL && chosen[0] != '\0')
        return;
    advice = ring_blas_coretype_advice(core, level);
    if (advice == NULL)
        return;
    if (o->exec_prefix != NULL)
        fprintf(stderr, "ring-launch: note: this host's OpenBLAS does not know its CPU (%s) "
                "and runs its generic %s kernels, several times slower; where the ranks run "
                "on such CPUs, set OPENBLAS_CORETYPE=%s for them\n",
                ring_cpu_level_name(level), core, advice);
    else if (setenv("OPENBLAS_CORETYPE", advice, 1) == 0)
        fprintf(stderr, "ring-launch: OPENBLAS_CORETYPE=%s for each rank: this OpenBLAS does "
                "not know this CPU (%s) and would run its generic %s kernels, several times "
                "slower; set OPENBLAS_CORETYPE to choose\n", advice, ring_cpu_level_name(level),
                core);
}

int main(int argc, char **argv)
{
    struct launch_opts opt;
    char err[256];
    int rc;

    launch_opts_parse(argc, argv, &opt);
    if (opt.merge)
        return launch_merge_only(opt.merge);
    if (opt.serve_store)
        return launch_store_serve_only(&opt);
    if (launch_store_port_pick(&opt) != 0)
        return 1;   /* it said why */
    if (launch_timeline_prepare(&opt) != 0) {
        fputs("ring-launch: out of memory\n", stderr);
        return 1;
    }
    launch_rdzv_port_check(&opt);
    launch_fds_prepare(opt.n);
    launch_threads_setenv(&opt);
    launch_blas_setenv(&opt);
    launch_torch_check(&opt);
    if (launch_signals_install() != 0) {
        perror("ring-launch: cannot set up signal handling");
        free(opt.timeline_parts);
        return 1;
    }
    /* after the handlers: from here SIGINT and SIGTERM end the job through the
     * loop below, which removes the secret's file */
    if (launch_nodes_secret_usable(&opt) && launch_secret_setup(err, sizeof(err)) != 0) {
        fprintf(stderr, "ring-launch: %s\n", err);
        free(opt.timeline_parts);
        free(opt.hosts);
        free(opt.hosts_text);
        return 1;
    }
    /* --elastic: the store the ranks meet at, served here so that it outlives them */
    if (launch_store_start(&opt) != 0) {
        launch_secret_remove();
        return 1;
    }
    for (long attempt = 0;; attempt++) {
        struct launch_state st = { .first_rank = -1, .opt = opt, .el = { .below_rank = -1 } };

        rc = launch_attempt(&st);
        /* torchrun's --max-restarts: a rank failed, so every rank starts again
         * (ringd resumes from its newest checkpoint); never after a signal or
         * --timeout, which ask the job to end; with --elastic it counted
         * replacements instead */
        if (rc == 0 || attempt >= opt.max_restarts || st.got_signal || st.timed_out ||
            st.spawn_failed || opt.elastic_min > 0)
            break;
        fprintf(stderr, "ring-launch: restarting all %ld ranks (restart %ld of %ld); a program "
                "that checkpoints resumes from its newest checkpoint\n", opt.n, attempt + 1,
                opt.max_restarts);
    }
    launch_store_stop();
    launch_secret_remove();     /* the ranks are gone: nobody reads it any more */
    /* after the ranks: a failed job's timeline shows where it stopped */
    if (opt.timeline && launch_timeline_merge(&opt) != 0 && rc == 0)
        rc = 1;
    free(opt.timeline_parts);
    free(opt.hosts);
    free(opt.hosts_text);
    free(opt.elastic_store);
    return rc;
}
