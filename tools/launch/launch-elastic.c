/*
 * launch-elastic.c - ring-launch --elastic MIN:MAX (torchrun's notation).
 *
 * Without it the first rank that fails stops every other. With it a rank that
 * dies while no rank has finished is lost, not fatal: the others go on without
 * it (libringd shrinks their ring, ring_comm_shrink; ringd --elastic), and
 * while --max-restarts K allows (K in all) a replacement starts in its place,
 * with its environment, and joins the running ring through the store at the
 * members' next ring_comm_grow. Below MIN ranks, with no replacement left, the
 * job is stopped as without --elastic. A stopped rank (SIGSTOP) is not
 * replaced: its peers time out on it and go on, and it is killed once every
 * other rank has exited. A replacement left alone running after the others
 * finished came too late to join (the members of a lockstep ring finish
 * together): it is stopped after --grace, and lost. The store the ranks meet
 * at is launch-store.c's; the options are launch-opts.c's.
 */
#include "ring_build.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "launch-elastic.h"
#include "launch-job.h"
#include "launch-nodes.h"
#include "launch-stopped.h"

#define ELASTIC_DRAIN_READS 256

/* "killed by signal 9 (Killed)" or "exited with status 3" */
static const char *elastic_why(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    return buf;
}

/* What the lost process wrote is passed on before its streams make room for the
 * replacement's: it is dead, so what its pipes hold is all there is (unless a
 * process it left behind keeps writing: cut off after a bound). */
static void elastic_streams_finish(struct launch_state *st, long i)
{
    struct launch_child *c = &st->kids[i];
    long rank = launch_global_rank(&st->opt, i);

    for (int k = 0; k < 2; k++) {
        struct launch_stream *s = &c->io[k];

        for (int reads = 0; s->fd >= 0 && reads < ELASTIC_DRAIN_READS; reads++) {
            struct pollfd pf = { .fd = s->fd, .events = POLLIN };

            if (poll(&pf, 1, 0) <= 0 || pf.revents == 0)
                break;
            launch_stream_read(&st->relay, s, rank);
        }
        if (s->fd >= 0)
            launch_stream_close(&st->relay, s, rank);
        free(s->buf);
        s->buf = NULL;
    }
}

/* When every rank still running is stopped (SIGSTOP), nobody is left to go on
 * with them: the others have exited. Such a rank cannot act on SIGTERM: SIGKILL,
 * and it counts as lost. */
static void elastic_stopped_last(struct launch_state *st)
{
    long i, n = st->opt.n;
    pid_t *groups;
    unsigned char *stopped;

    if (st->running == 0 || st->stop_at)
        return;
    groups = calloc((size_t)n, sizeof(*groups));
    stopped = calloc((size_t)n, 1);
    if (groups != NULL && stopped != NULL) {
        for (i = 0; i < n; i++)
            groups[i] = st->kids[i].running ? st->kids[i].pid : 0;
        if (launch_stopped_find(groups, n, stopped) == st->running)
            for (i = 0; i < n; i++) {
                if (!stopped[i])
                    continue;
                st->kids[i].stopped = 1;
                st->kids[i].end = LAUNCH_END_LOST;
                fprintf(stderr, "ring-launch: rank %ld (pid %ld) is stopped (SIGSTOP: state T) "
                        "and every other rank has exited: killed it (a stopped process cannot "
                        "act on SIGTERM)\n", launch_global_rank(&st->opt, i),
                        (long)st->kids[i].pid);
                if (kill(-st->kids[i].pid, SIGKILL) != 0 && errno != ESRCH)
                    perror("ring-launch: kill");
            }
    }
    free(groups);
    free(stopped);
}

/* The job after a loss with no replacement: below MIN (on one node) it stops. */
static enum launch_elastic_act elastic_go_on(struct launch_state *st, long i, int status)
{
    if (st->opt.nnodes <= 1 && st->running < st->opt.elastic_min) {
        st->el.below_rank = i;
        st->el.below_status = status;
        st->el.left = st->running;
        fprintf(stderr, "ring-launch: %ld rank%s left, fewer than --elastic MIN %ld%s: %s\n",
                st->running, st->running == 1 ? "" : "s", st->opt.elastic_min,
                st->opt.max_restarts > 0 ? ", and no replacement left (--max-restarts)" : "",
                st->running > 0 ? "stopping the job" : "the job fails");
        return st->running > 0 ? LAUNCH_EL_STOP : LAUNCH_EL_SETTLED;
    }
    elastic_stopped_last(st);
    return LAUNCH_EL_SETTLED;
}

enum launch_elastic_act launch_elastic_record(struct launch_state *st, long i, int status)
{
    struct launch_child *c = &st->kids[i];
    long rank = launch_global_rank(&st->opt, i);
    char why[128], gen[16] = "";

    if (c->stopped && c->end == LAUNCH_END_LOST) {  /* killed by elastic_stopped_last */
        c->lost++;
        c->lost_status = status;
        c->lost_pid = c->pid;
        return LAUNCH_EL_SETTLED;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        c->end = LAUNCH_END_OK;
        st->el.finished++;
        elastic_stopped_last(st);
        return LAUNCH_EL_SETTLED;
    }
    if (c->late) {      /* stopped by launch_elastic_late */
        c->lost++;
        c->lost_status = status;
        c->lost_pid = c->pid;
        c->end = LAUNCH_END_LOST;
        return LAUNCH_EL_SETTLED;
    }
    if (st->stop_at || st->got_signal || st->timed_out || st->el.finished > 0) {
        c->end = LAUNCH_END_FAILED;   /* the job ends (or ended): as without --elastic */
        return LAUNCH_EL_FAIL;
    }
    c->lost++;
    c->lost_status = status;
    c->lost_pid = c->pid;
    c->end = LAUNCH_END_LOST;
    if (c->gen > 0)
        snprintf(gen, sizeof(gen), " r%d", c->gen);
    fprintf(stderr, "ring-launch: rank %ld%s (pid %ld) lost: %s; %ld rank%s still running "
            "(--elastic %ld:%ld)\n", rank, gen, (long)c->pid, elastic_why(status, why,
                                                                         sizeof(why)),
            st->running, st->running == 1 ? "" : "s", st->opt.elastic_min, st->opt.elastic_max);
    if (st->el.replaced >= st->opt.max_restarts)
        return elastic_go_on(st, i, status);
    /* the replacement's output gets streams of its own */
    elastic_streams_finish(st, i);
    c->gen++;
    st->el.replaced++;
    return LAUNCH_EL_REPLACE;
}

enum launch_elastic_act launch_elastic_replaced(struct launch_state *st, long i, int started)
{
    struct launch_child *c = &st->kids[i];
    long rank = launch_global_rank(&st->opt, i);

    if (!started) {
        fprintf(stderr, "ring-launch: cannot start a replacement for rank %ld: %s\n", rank,
                strerror(errno));
        return elastic_go_on(st, i, c->lost_status);
    }
    c->end = LAUNCH_END_NONE;
    fprintf(stderr, "ring-launch: rank %ld r%d (pid %ld) started in place of the lost rank %ld, "
            "with its environment; it joins the ring at the next grow (replacement %ld of "
            "--max-restarts %ld)\n", rank, c->gen, (long)c->pid, rank, st->el.replaced,
            st->opt.max_restarts);
    return LAUNCH_EL_SETTLED;
}

int launch_elastic_late(struct launch_state *st, long long now)
{
    int only = st->el.finished > 0 && st->running > 0 && !st->stop_at;
    long long wait_ms = st->opt.grace > 1 ? (long long)(st->opt.grace * 1000) : 1000;

    for (long i = 0; only && i < st->opt.n; i++)
        only = !st->kids[i].running || st->kids[i].gen > 0;
    if (!only) {
        st->el.late_at = 0;
        return 0;
    }
    if (st->el.late_at == 0)
        st->el.late_at = now + wait_ms;
    if (now < st->el.late_at)
        return 0;
    for (long i = 0; i < st->opt.n; i++) {
        struct launch_child *c = &st->kids[i];

        if (!c->running)
            continue;
        c->late = 1;
        fprintf(stderr, "ring-launch: rank %ld r%d (pid %ld) still runs %.1f s after the other "
                "ranks finished: a replacement that came too late to join (the ring it was "
                "to join has ended); stopping it\n", launch_global_rank(&st->opt, i), c->gen,
                (long)c->pid, (double)wait_ms / 1000);
    }
    return 1;
}

/* "rank 2 (killed by signal 9 (Killed)), rank 3 (...)": the ranks lost, or "none" */
static void elastic_lost_list(const struct launch_state *st, char *buf, size_t len)
{
    size_t used = 0;
    char why[128];

    buf[0] = '\0';
    for (long i = 0; i < st->opt.n && used < len; i++) {
        const struct launch_child *c = &st->kids[i];

        if (c->lost == 0)
            continue;
        used += (size_t)snprintf(buf + used, len - used, "%srank %ld (pid %ld: %s%s",
                                 used ? ", " : "", launch_global_rank(&st->opt, i),
                                 (long)c->lost_pid, c->late ? "still waiting to join when the "
                                 "others had finished, stopped: " : c->stopped &&
                                 c->end == LAUNCH_END_LOST ? "stopped, then " : "",
                                 elastic_why(c->lost_status, why, sizeof(why)));
        if (c->lost > 1 && used < len)
            used += (size_t)snprintf(buf + used, len - used, "; lost %d times", c->lost);
        if (c->end == LAUNCH_END_OK && used < len)
            used += (size_t)snprintf(buf + used, len - used, "; replacement r%d exited 0",
                                     c->gen);
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, ")");
    }
    if (used == 0)
        snprintf(buf, len, "none");
}

int launch_elastic_report(const struct launch_state *st)
{
    long ok = 0, n = st->opt.n, min = st->opt.elastic_min;
    int s = st->el.below_status;
    char lost[2048];

    for (long i = 0; i < n; i++)
        ok += st->kids[i].end == LAUNCH_END_OK;
    elastic_lost_list(st, lost, sizeof(lost));
    if (st->el.below_rank >= 0) {
        fprintf(stderr, "ring-launch: the job failed: losing rank %ld left %ld rank%s, fewer "
                "than --elastic MIN %ld (lost: %s)\n",
                launch_global_rank(&st->opt, st->el.below_rank), st->el.left,
                st->el.left == 1 ? "" : "s", min, lost);
        return WIFSIGNALED(s) ? 128 + WTERMSIG(s) : WEXITSTATUS(s) ? WEXITSTATUS(s) : 1;
    }
    if (st->first_rank >= 0) {
        if (strcmp(lost, "none") != 0)
            fprintf(stderr, "ring-launch: lost before: %s\n", lost);
        return -1;
    }
    if (st->opt.nnodes > 1 ? ok == 0 : ok < min) {
        if (st->opt.nnodes > 1)
            fprintf(stderr, "ring-launch: the job failed: no rank of this node exited 0 "
                    "(lost: %s)\n", lost);
        else
            fprintf(stderr, "ring-launch: the job failed: %ld rank%s exited 0, fewer than "
                    "--elastic MIN %ld (lost: %s)\n", ok, ok == 1 ? "" : "s", min, lost);
        return 1;
    }
    if (strcmp(lost, "none") != 0)
        fprintf(stderr, "ring-launch: the job finished: %ld of %ld rank%s exited 0 (--elastic "
                "%ld:%ld, %ld replacement%s started); lost: %s\n", ok, n, n == 1 ? "" : "s",
                min, st->opt.elastic_max, st->el.replaced, st->el.replaced == 1 ? "" : "s",
                lost);
    return 0;
}
