/*
 * elastic.c - --elastic MIN:MAX: the lockstep ring shrinks past a lost peer
 * and trains on (elastic.h says how; docs/training.md, "Elastic training").
 *
 * The daemon's side only: ring_comm_shrink (libringd, src/elastic) agrees on
 * the survivors and opens their ring. Here: which step every survivor goes on
 * from, the re-dealt shards, the re-planned schedule, and the record of every
 * change (rank 0's lines, the summary, the metrics).
 */
#include "ring_build.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ringd/elastic.h>

#include "clock.h"
#include "daemon/daemon.h"
#include "daemon/elastic.h"

#define EL_LOST_MAX 16

/* one change of the ring */
typedef struct el_change {
    uint64_t step;            /* steps done when the ring changed */
    double time;              /* training time of the failed call */
    int from, to;             /* peers before and after */
    int nlost;                /* the old ring's ranks lost (nlost > EL_LOST_MAX: the first) */
    int lost[EL_LOST_MAX], lost_origin[EL_LOST_MAX]; /* ... and their ranks at start */
    int joined;               /* peers that joined (grow) */
    int rolled_forward;       /* the interrupted step's update came from a survivor */
    double t_call, t_detect, t_shrunk, t_done; /* ring_now() */
    double unix_done;         /* the wall clock when the next step completed */
    int done;
} el_change_t;

struct elastic {
    int min, max;
    float *saved;             /* the averaged gradient of the last step applied */
    uint64_t saved_after;     /* r->step after applying it; 0: none */
    int saved_nonfinite;
    uint64_t ctl_step;        /* the step whose control values the loop's ctl holds */
    int ctl_world, ctl_valid;
    int *origin;              /* rank at start of every current rank (-1: joined) */
    int final_agreed;         /* every survivor had done the final evaluation */
    /* the schedule since the last change: angle theta0 at step s0, dtheta per step */
    int sched_on;
    uint64_t s0;
    double theta0, dtheta;
    el_change_t *changes;
    int nchanges, cap;
};

/* survivors' records in the agreement after a shrink */
enum { F_SAVED = 1, F_NONFINITE = 2, F_CTL = 4, F_FINAL = 8 };
typedef struct el_rec {
    uint64_t step, flags;
} el_rec_t;

int elastic_open(run_t *r, char *err, size_t errlen)
{
    elastic_t *e;

    if (r->opt->elastic_min <= 0)
        return 0;
    e = calloc(1, sizeof(*e));
    if (e != NULL) {
        e->saved = malloc((r->w->nparams > 0 ? r->w->nparams : 1) * sizeof(float));
        e->origin = malloc((size_t)r->world * sizeof(int));
    }
    if (e == NULL || e->saved == NULL || e->origin == NULL) {
        if (e != NULL) {
            free(e->saved);
            free(e->origin);
        }
        free(e);
        snprintf(err, errlen, "out of memory (--elastic keeps a copy of the gradient)");
        return -1;
    }
    e->min = r->opt->elastic_min;
    e->max = r->opt->elastic_max;
    for (int i = 0; i < r->world; i++)
        e->origin[i] = i;
    r->el = e;
    return 0;
}

void elastic_close(run_t *r)
{
    if (r->el == NULL)
        return;
    free(r->el->saved);
    free(r->el->origin);
    free(r->el->changes);
    free(r->el);
    r->el = NULL;
}

void elastic_control_done(run_t *r, int world)
{
    if (r->el == NULL)
        return;
    r->el->ctl_step = r->step;
    r->el->ctl_world = world;
    r->el->ctl_valid = 1;
}

void elastic_step_applied(run_t *r, int nonfinite)
{
    elastic_t *e = r->el;

    if (e == NULL)
        return;
    if (!nonfinite)
        memcpy(e->saved, r->w->grads, r->w->nparams * sizeof(float));
    e->saved_nonfinite = nonfinite;
    e->saved_after = r->step;
    e->ctl_valid = 0;
}

/* ---- the record of changes ------------------------------------------------------- */

static el_change_t *change_new(elastic_t *e)
{
    el_change_t *c;

    if (e->nchanges == e->cap) {
        int cap = e->cap ? 2 * e->cap : 4;
        el_change_t *p = realloc(e->changes, (size_t)cap * sizeof(*p));
        if (p == NULL)
            return NULL;
        e->changes = p;
        e->cap = cap;
    }
    c = &e->changes[e->nchanges++];
    memset(c, 0, sizeof(*c));
    return c;
}

/* "rank 2", "ranks 0 and 2 (3 at start)", "ranks 1, 2 and 3" */
static void lost_text(const el_change_t *c, char *buf, size_t len)
{
    size_t at = 0;
    int n = c->nlost < EL_LOST_MAX ? c->nlost : EL_LOST_MAX, moved = 0;

    buf[0] = '\0';
    at += (size_t)snprintf(buf, len, "rank%s ", c->nlost > 1 ? "s" : "");
    for (int i = 0; i < n && at < len; i++) {
        at += (size_t)snprintf(buf + at, len - at, "%s%d", i == 0 ? "" : i + 1 == n ? " and " : ", ",
                               c->lost[i]);
        moved |= c->lost_origin[i] != c->lost[i];
    }
    if (c->nlost > n && at < len)
        at += (size_t)snprintf(buf + at, len - at, " and %d more", c->nlost - n);
    if (moved && at < len) {
        at += (size_t)snprintf(buf + at, len - at, " (");
        for (int i = 0; i < n && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? ", " : "", c->lost_origin[i]);
        if (at < len)
            snprintf(buf + at, len - at, " at start)");
    }
}

void elastic_change_line(const run_t *r, int back, char *buf, size_t len)
{
    const elastic_t *e = r->el;
    const el_change_t *c;
    char who[160];

    buf[0] = '\0';
    if (e == NULL || back < 1 || back > e->nchanges)
        return;
    c = &e->changes[e->nchanges - back];
    if (c->joined > 0)
        snprintf(who, sizeof(who), "%d peer%s joined", c->joined, c->joined > 1 ? "s" : "");
    else {
        char lost[128];
        lost_text(c, lost, sizeof(lost));
        snprintf(who, sizeof(who), "lost %s", lost);
    }
    if (c->joined > 0) { /* admitted at a grow point: nothing failed, nothing to notice */
        snprintf(buf, len, "membership: step %" PRIu64 ", %s (%d -> %d peers), %.3f s (ring "
                 "grown and the state sent in %.3f s, next step done %.3f s later)", c->step, who,
                 c->from, c->to, c->t_done - c->t_call, c->t_shrunk - c->t_call,
                 c->t_done - c->t_shrunk);
        return;
    }
    snprintf(buf, len, "membership: step %" PRIu64 ", %s (%d -> %d peers), %.3f s (noticed after "
             "%.3f s, ring shrunk in %.3f s, next step done %.3f s later%s)", c->step, who,
             c->from, c->to, c->t_done - c->t_call, c->t_detect - c->t_call,
             c->t_shrunk - c->t_detect, c->t_done - c->t_shrunk,
             c->rolled_forward ? "; the interrupted step's update came from a survivor that "
                                 "had it" : "");
}

int elastic_step_done(run_t *r)
{
    elastic_t *e = r->el;
    double now, unix_now;
    struct timespec ts;
    int n = 0;

    if (e == NULL || e->nchanges == 0 || e->changes[e->nchanges - 1].done)
        return 0;
    now = ring_now();
    clock_gettime(CLOCK_REALTIME, &ts);
    unix_now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    for (int i = e->nchanges - 1; i >= 0 && !e->changes[i].done; i--) {
        el_change_t *c = &e->changes[i];

        c->done = 1;
        c->t_done = now;
        c->unix_done = unix_now;
        n++;
    }
    for (int i = e->nchanges - n; i < e->nchanges && r->metrics != NULL; i++) {
        el_change_t *c = &e->changes[i];
        char lost[160] = "", origin[160] = "";
        size_t a = 0, b = 0;

        for (int k = 0; k < c->nlost && k < EL_LOST_MAX; k++) {
            a += (size_t)snprintf(lost + a, sizeof(lost) - a, "%s%d", k ? "," : "", c->lost[k]);
            b += (size_t)snprintf(origin + b, sizeof(origin) - b, "%s%d", k ? "," : "",
                                  c->lost_origin[k]);
        }
        fprintf(r->metrics,
                "{\"type\":\"membership\",\"rank\":%d,\"step\":%" PRIu64 ",\"time\":%.6f,"
                "\"unix_time\":%.6f,\"from\":%d,\"to\":%d,\"lost\":[%s],\"lost_at_start\":[%s],"
                "\"joined\":%d,\"lost_s\":%.6f,\"detect_s\":%.6f,\"shrink_s\":%.6f,"
                "\"redo_s\":%.6f,\"rolled_forward\":%d}\n",
                r->rank, c->step, c->time, c->unix_done, c->from, c->to, lost, origin, c->joined,
                c->t_done - c->t_call, c->t_detect - c->t_call, c->t_shrunk - c->t_detect,
                c->t_done - c->t_shrunk, c->rolled_forward);
        fflush(r->metrics);
    }
    return n;
}

void elastic_summary(const run_t *r, FILE *out)
{
    const elastic_t *e = r->el;

    if (e == NULL || e->nchanges == 0)
        return;
    for (int i = 0; i < e->nchanges; i++) {
        const el_change_t *c = &e->changes[i];
        char who[160];

        if (c->joined > 0)
            snprintf(who, sizeof(who), "%d joined", c->joined);
        else {
            char lost[128];
            lost_text(c, lost, sizeof(lost));
            snprintf(who, sizeof(who), "lost %s", lost);
        }
        fprintf(out, "  %-20s step %" PRIu64 " (%.1f s): %s (%d -> %d peers), %s%.3f s\n",
                i == 0 ? "membership" : "", c->step, c->time, who, c->from, c->to,
                c->done ? "" : "not finished, ", (c->done ? c->t_done : ring_now()) - c->t_call);
    }
}

/* ---- recovering ------------------------------------------------------------------ */

/* This peer's place in comm (new): rank, world, who prints, the ranks at start. */
static void adopt(run_t *r, ring_comm_t *nc, int *origin_old)
{
    elastic_t *e = r->el;
    int n = ring_comm_size(nc);

    for (int i = 0; i < n; i++) {
        int p = ring_comm_parent_rank(nc, i);
        e->origin[i] = p >= 0 ? origin_old[p] : -1;
    }
    r->comm = nc;
    r->rank = ring_comm_rank(nc);
    r->world = n;
    r->chatty = r->rank == 0 || r->opt->log_all;
}

/* The shrink after a failure: the change recorded, this peer renumbered. 0 / -1. */
static int shrink(run_t *r, double t_call, double t_detect, const char *why, char *err,
                  size_t errlen)
{
    elastic_t *e = r->el;
    ring_comm_t *old = r->comm, *nc = NULL;
    int from = r->world, old_rank = r->rank, *origin_old, *kept;
    ring_status_t st = ring_comm_shrink(old, &nc);
    el_change_t *c;
    char lost[160];

    if (st != RING_OK) {
        if (st == RING_ERR_INVALID) /* not a lost peer (a mismatch, a local failure...) */
            return -1;              /* err: the failure itself */
        if (st == RING_ERR_REMOTE)
            snprintf(err, errlen, "%s; the other peers count this peer lost (it answered too "
                     "late for --timeout), so it leaves the ring: %s", why, ring_last_error());
        else
            snprintf(err, errlen, "%s; shrinking the ring to go on without the lost peer "
                     "failed: %s", why, ring_last_error());
        return -1;
    }
    origin_old = malloc((size_t)from * sizeof(int));
    kept = calloc((size_t)from, sizeof(int));
    c = change_new(e);
    if (origin_old == NULL || kept == NULL || c == NULL) {
        free(origin_old);
        free(kept);
        ring_comm_close(nc);
        snprintf(err, errlen, "out of memory after shrinking the ring");
        return -1;
    }
    memcpy(origin_old, e->origin, (size_t)from * sizeof(int));
    for (int i = 0; i < ring_comm_size(nc); i++)
        if (ring_comm_parent_rank(nc, i) >= 0 && ring_comm_parent_rank(nc, i) < from)
            kept[ring_comm_parent_rank(nc, i)] = 1;
    c->step = r->step;
    c->time = r->elapsed_before + (t_call - r->t_start);
    c->from = from;
    c->to = ring_comm_size(nc);
    for (int q = 0; q < from; q++)
        if (!kept[q]) {
            if (c->nlost < EL_LOST_MAX) {
                c->lost[c->nlost] = q;
                c->lost_origin[c->nlost] = origin_old[q];
            }
            c->nlost++;
        }
    c->t_call = t_call;
    c->t_detect = t_detect;
    c->t_shrunk = ring_now();
    adopt(r, nc, origin_old);
    ring_comm_close(old);
    free(origin_old);
    free(kept);
    lost_text(c, lost, sizeof(lost));
    if (c->to < e->min) {
        r->rank = old_rank; /* the ring is given up: named as the others knew this peer */
        snprintf(err, errlen, "%s; lost %s (%d -> %d peer%s): fewer than the --elastic minimum "
                 "of %d peers remain; stopping", why, lost, from, c->to, c->to > 1 ? "s" : "",
                 e->min);
        return -1;
    }
    fprintf(stderr, "ringd[rank %d]: %s; going on without %s: %d peer%s over %s (now rank %d, "
            "--elastic %d:%d)\n", old_rank, why, lost, c->to, c->to > 1 ? "s" : "",
            ring_comm_transport(r->comm), r->rank, e->min, e->max);
    return 0;
}

/*
 * The survivors agree on the step to go on from. Returns EL_REDO or EL_APPLY, -1 with
 * err (stop), or -2 with err (a collective failed: shrink again).
 */
static int agree_step(run_t *r, int *nonfinite, int *ctl_world, int *rolled, char *err,
                      size_t errlen)
{
    elastic_t *e = r->el;
    el_rec_t mine, *all = malloc((size_t)r->world * sizeof(el_rec_t));
    uint64_t lo = UINT64_MAX, hi = 0;
    int root = -1, final = 1;
    ring_status_t st;

    if (all == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    mine.step = r->step;
    mine.flags = (e->saved_after == r->step && r->step > 0 ? F_SAVED : 0) |
                 (e->saved_nonfinite ? F_NONFINITE : 0) |
                 (e->ctl_valid && e->ctl_step == r->step ? F_CTL : 0) |
                 (r->final_done ? F_FINAL : 0);
    st = ring_allgather(r->comm, &mine, all, sizeof(mine));
    if (st != RING_OK) {
        snprintf(err, errlen, "step %" PRIu64 ", agreeing on the last step after the ring "
                 "shrank: %s", r->step, ring_last_error());
        free(all);
        return -2;
    }
    for (int i = 0; i < r->world; i++) {
        lo = all[i].step < lo ? all[i].step : lo;
        hi = all[i].step > hi ? all[i].step : hi;
        final &= (all[i].flags & F_FINAL) != 0;
    }
    for (int i = 0; i < r->world && root < 0; i++)
        if (all[i].step == hi && (all[i].flags & F_SAVED))
            root = i;
    e->final_agreed = final;
    *rolled = 0;
    if (hi == lo) {
        free(all);
        return EL_REDO;
    }
    if (hi - lo > 1 || root < 0 || (r->step == lo && !(mine.flags & F_CTL))) {
        /* cannot be: finishing a collective takes every member's part in it */
        snprintf(err, errlen, "internal error: after the ring shrank the survivors are at "
                 "steps %" PRIu64 " to %" PRIu64 "%s; please report it", lo, hi,
                 root < 0 ? " and none kept its last gradient" : "");
        free(all);
        return -1;
    }
    *nonfinite = (all[root].flags & F_NONFINITE) != 0;
    free(all);
    if (!*nonfinite) {
        /* those ahead hold the same averaged gradient; the others' buffers are scratch */
        st = ring_broadcast(r->comm, r->rank == root ? (void *)e->saved : (void *)r->w->grads,
                            r->w->nparams * sizeof(float), root);
        if (st != RING_OK) {
            snprintf(err, errlen, "step %" PRIu64 ", sending step %" PRIu64 "'s update to the "
                     "survivors that missed it: %s", r->step, lo + 1, ring_last_error());
            return -2;
        }
    }
    *rolled = 1;
    *ctl_world = e->ctl_world;
    return r->step == lo ? EL_APPLY : EL_REDO;
}

int elastic_recover(run_t *r, int phase, double t_call, int *nonfinite, int *ctl_world,
                    char *err, size_t errlen)
{
    elastic_t *e = r->el;
    char why[DAEMON_ERR_MAX];
    double t_detect = ring_now();
    int start = e->nchanges;

    (void)phase;
    *nonfinite = 0;
    /* every shrink removes a peer: bounded by the ring's size */
    for (int round = 0; round < 1 + r->world + 1; round++) {
        int rc, rolled = 0;

        snprintf(why, sizeof(why), "%s", err);
        if (shrink(r, t_call, t_detect, why, err, errlen) != 0)
            return -1;
        t_call = ring_now();
        rc = agree_step(r, nonfinite, ctl_world, &rolled, err, errlen);
        if (rolled)
            for (int i = start; i < e->nchanges; i++)
                e->changes[i].rolled_forward = 1;
        if (rc != -2)
            return rc;
        t_detect = ring_now(); /* a peer lost while agreeing: shrink again */
    }
    snprintf(err, errlen, "step %" PRIu64 ": the ring kept losing peers while it shrank",
             r->step);
    return -1;
}

/* ---- the schedule ------------------------------------------------------------------ */

/* the cosine schedule's angle at step: lr_at's own expression until the first change */
static double angle_at(const run_t *r, uint64_t step)
{
    const elastic_t *e = r->el;

    if (e == NULL || !e->sched_on) {
        if (r->total_steps == 0 || step >= r->total_steps)
            return M_PI;
        return M_PI * (double)step / (double)r->total_steps;
    }
    if (step == e->s0)
        return e->theta0;
    return e->theta0 + (double)(step - e->s0) * e->dtheta;
}

double elastic_lr(const run_t *r)
{
    const daemon_opts_t *o = r->opt;
    double th;

    if (r->el == NULL || !r->el->sched_on)
        return lr_at(o->lr_schedule == LR_COSINE, o->lr, r->step, r->total_steps);
    if (o->lr_schedule != LR_COSINE)
        return o->lr;
    th = angle_at(r, r->step);
    if (th >= M_PI)
        return 0;
    return o->lr * 0.5 * (1.0 + cos(th));
}

/* The schedule over the steps left from r->step with this ring: the angle goes on from
 * where it is to pi at the new end, evenly (no jump in the learning rate). */
static void replan(run_t *r)
{
    elastic_t *e = r->el;
    const daemon_opts_t *o = r->opt;
    uint64_t per_epoch = r->shard.ntrain / (size_t)r->world / (size_t)o->batch_size, left;
    double th = angle_at(r, r->step);

    if (r->epoch >= (uint64_t)o->epochs)
        left = 0;
    else if (r->step_in_epoch == 0)
        left = ((uint64_t)o->epochs - r->epoch) * per_epoch;
    else
        left = shard_steps_per_epoch(&r->shard, o->batch_size) - r->step_in_epoch +
               ((uint64_t)o->epochs - r->epoch - 1) * per_epoch;
    e->sched_on = 1;
    e->s0 = r->step;
    e->theta0 = th;
    e->dtheta = left > 0 && th < M_PI ? (M_PI - th) / (double)left : 0;
    r->total_steps = r->step + left;
}

int elastic_commit(run_t *r, char *err, size_t errlen)
{
    elastic_t *e = r->el;

    if (shard_reshard(&r->shard, r->step_in_epoch, r->opt->batch_size, r->rank, r->world) != 0) {
        snprintf(err, errlen, "out of memory re-dealing the training samples");
        return -1;
    }
    replan(r);
    /* the step every survivor goes on from (one that was ahead saw the failure a step later) */
    for (int i = e->nchanges - 1; i >= 0 && !e->changes[i].done; i--)
        e->changes[i].step = r->step;
    r->eval_owed = 0;        /* an interrupted in-line evaluation is skipped */
    if (!e->final_agreed)    /* ... the final one is done (again) by every survivor */
        r->final_done = 0;
    r->force_final = 1;
    r->changes = e->nchanges;
    if (r->metrics == NULL && r->rank == 0) { /* the new rank 0 writes rank 0's file */
        if (metrics_open(r->opt, 0, &r->metrics, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* ---- growing ------------------------------------------------------------------- */

/* Every member, after a grow, and the joiner: the same settings, rank 0's state, the
 * schedule and the rest of the epoch's samples. A failure here stops the run. */
static int share_state(run_t *r, char *err, size_t errlen)
{
    elastic_t *e = r->el;
    double sched[5] = {e->sched_on, (double)e->s0, e->theta0, e->dtheta,
                       (double)r->total_steps};
    uint64_t pos, n64;
    size_t n = 0;
    uint32_t *pool = NULL;

    if (agree_settings(r->comm, r->opt, r->cfg, err, errlen) != 0 ||
        resume_share_state(r, err, errlen) != 0)
        return -1;
    if (ring_broadcast(r->comm, sched, sizeof(sched), 0) != RING_OK)
        goto fail;
    e->sched_on = sched[0] != 0;
    e->s0 = (uint64_t)sched[1];
    e->theta0 = sched[2];
    e->dtheta = sched[3];
    r->total_steps = (uint64_t)sched[4];
    pos = r->step_in_epoch;
    if (pos == 0) {
        if (shard_reshard(&r->shard, 0, r->opt->batch_size, r->rank, r->world) != 0)
            return snprintf(err, errlen, "out of memory"), -1;
        replan(r);
        return 0;
    }
    if (r->rank == 0 && (pool = shard_untaken(&r->shard, pos, r->opt->batch_size, &n)) == NULL)
        return snprintf(err, errlen, "out of memory"), -1;
    n64 = n;
    if (ring_broadcast(r->comm, &n64, sizeof(n64), 0) != RING_OK)
        goto fail;
    n = (size_t)n64;
    if (r->rank != 0 && (pool = malloc((n > 0 ? n : 1) * sizeof(uint32_t))) == NULL)
        return snprintf(err, errlen, "out of memory"), -1;
    if (ring_broadcast(r->comm, pool, n * sizeof(uint32_t), 0) != RING_OK) {
        free(pool);
        goto fail;
    }
    if (shard_deal(&r->shard, r->epoch, pos, pool, n, r->rank, r->world) != 0) /* takes pool */
        return snprintf(err, errlen, "out of memory"), -1;
    replan(r); /* the same on every member: the same state, the same schedule */
    return 0;
fail:
    snprintf(err, errlen, "step %" PRIu64 ", sending the state to the peers that joined: %s",
             r->step, ring_last_error());
    return -1;
}

int elastic_grow_point(run_t *r, char *err, size_t errlen)
{
    elastic_t *e = r->el;
    ring_comm_t *old = r->comm, *nc = NULL;
    double t0 = ring_now();
    int from = r->world, *origin_old;
    el_change_t *c;

    if (e == NULL)
        return 0;
    if (ring_comm_grow_upto(old, e->max, &nc) != RING_OK) { /* beyond MAX: turned away */
        snprintf(err, errlen, "step %" PRIu64 ", admitting peers: %s", r->step,
                 ring_last_error());
        return 1;
    }
    if (nc == old)
        return 0;
    origin_old = malloc((size_t)from * sizeof(int));
    if (origin_old != NULL)
        memcpy(origin_old, e->origin, (size_t)from * sizeof(int));
    e->origin = realloc(e->origin, (size_t)ring_comm_size(nc) * sizeof(int)); /* grows only */
    if (origin_old == NULL || e->origin == NULL || (c = change_new(e)) == NULL) {
        snprintf(err, errlen, "out of memory admitting peers");
        return -1;
    }
    adopt(r, nc, origin_old);
    ring_comm_close(old);
    free(origin_old);
    *c = (el_change_t){.step = r->step, .time = r->elapsed_before + (t0 - r->t_start),
                       .from = from, .to = r->world, .joined = r->world - from, .t_call = t0,
                       .t_detect = t0, .t_shrunk = ring_now()};
    if (r->world > e->max) { /* ring_comm_grow_upto admits no more: cannot happen */
        snprintf(err, errlen, "step %" PRIu64 ": %d peers joined and the ring has %d, above the "
                 "--elastic maximum of %d", r->step, c->joined, r->world, e->max);
        return -1;
    }
    return share_state(r, err, errlen) == 0 ? 2 : -1;
}

int elastic_joined(run_t *r, char *err, size_t errlen)
{
    elastic_t *e = r->el;

    if (e == NULL || !ring_comm_joined(r->comm))
        return 0;
    e->origin = realloc(e->origin, (size_t)ring_comm_size(r->comm) * sizeof(int));
    if (e->origin == NULL)
        return snprintf(err, errlen, "out of memory"), -1;
    for (int i = 0; i < ring_comm_size(r->comm); i++)
        e->origin[i] = ring_comm_parent_rank(r->comm, i);
    return share_state(r, err, errlen);
}
