/*
 * elastic.h - --elastic MIN:MAX in lockstep: a lost peer costs the others the
 * step it interrupted, not the run (docs/training.md, "Elastic training").
 *
 * When a collective of the lockstep loop fails naming a lost peer (killed,
 * or silent past --timeout), every survivor:
 *   1. shrinks the ring (ring_comm_shrink, ringd/elastic.h): the survivors
 *      agree on who is left and are renumbered in the old ring's order; a
 *      peer lost meanwhile is shrunk away too (each shrink is one change);
 *      fewer than MIN left: every survivor stops, naming the lost and MIN;
 *   2. agrees on the last step: one allgather of every survivor's steps. A
 *      survivor's gradient allreduce may have finished while another's
 *      failed (the lost peer fell silent during the allgather half), so
 *      survivors can be one step apart, never more (finishing a collective
 *      takes every member's part in it). Those ahead keep the averaged
 *      gradient of their last step; the lowest-ranked of them broadcasts it
 *      and those behind apply it (with their own copy of that step's control
 *      values). Nothing is rolled back and nothing is computed twice: the
 *      parameters and the momentum are those of the same completed step on
 *      every survivor, bit for bit. A step nobody finished is done again on
 *      the new ring (its gradient is recomputed: the failed allreduce left
 *      the buffer undefined; the update comes after the allreduce, so the
 *      parameters were not touched);
 *   3. re-deals the rest of the epoch's samples among the survivors
 *      (shard.h) and re-plans the learning-rate schedule over the steps now
 *      left, continuously (no jump at the change).
 * In-line evaluations (--eval-sync) that a change interrupted are skipped;
 * the final evaluation is always done. The change is reported when the next
 * step completes: the time from the failed call to it, by part.
 *
 * Growing: at each step boundary the members call ring_comm_grow_upto (MAX);
 * a peer started later with the same rendezvous (and --elastic) is admitted,
 * receives rank 0's parameters, optimizer state, schedule and the epoch's
 * samples not yet taken, and every member re-deals them.
 */
#ifndef RINGD_DAEMON_ELASTIC_H
#define RINGD_DAEMON_ELASTIC_H

#include <stddef.h>
#include <stdio.h>

#include "daemon/daemon.h"

/* where the lockstep loop was when a collective failed */
enum elastic_phase {
    EL_CONTROL,    /* the step's control values: nothing of the step is applied */
    EL_GRADIENT,   /* its gradient allreduce: the control values of the step are known */
    EL_EVAL,       /* an in-line evaluation after a step */
    EL_FINAL_EVAL, /* the final evaluation */
    EL_END,        /* the last exchange (agree_root_end) */
    EL_GROW        /* a commit point (ring_comm_grow) */
};

/* what elastic_recover asks of the loop */
enum { EL_REDO = 0, EL_APPLY = 1 };

/* --elastic: r->el set up for this run (world as started). 0, or -1 with err. */
int elastic_open(run_t *r, char *err, size_t errlen);
void elastic_close(run_t *r);
static inline int elastic_on(const run_t *r) { return r->el != NULL; }

/* The control values of step r->step were exchanged (the loop's ctl holds them,
 * from world peers). */
void elastic_control_done(run_t *r, int world);
/* Step r->step - 1's averaged gradient (r->w->grads, or none: nonfinite) was applied:
 * kept for survivors that missed it. */
void elastic_step_applied(run_t *r, int nonfinite);

/*
 * A collective of phase failed (err: why; t_call: when the call began): shrink, agree,
 * and say what to do. EL_REDO: go on at the top of the loop (the step r->step is done
 * again); EL_APPLY: this peer missed step r->step's update: r->w->grads holds the
 * averaged gradient (or *nonfinite: the step was skipped everywhere), to be applied
 * with the control values it has, the world those came from in *ctl_world. Either way
 * elastic_commit follows. -1 with err: stop (not a lost peer, too few left, ...).
 */
int elastic_recover(run_t *r, int phase, double t_call, int *nonfinite, int *ctl_world,
                    char *err, size_t errlen);

/* After elastic_recover (and the apply): the shards re-dealt, the schedule re-planned,
 * interrupted in-line evaluations dropped (no collective). 0, or -1 with err. */
int elastic_commit(run_t *r, char *err, size_t errlen);

/* A step completed: the changes waiting for it are finished (timed, written to the
 * metrics). How many; elastic_change_line formats the i-th last of them. */
int elastic_step_done(run_t *r);
void elastic_change_line(const run_t *r, int back, char *buf, size_t len);

/* The learning rate of step r->step. */
double elastic_lr(const run_t *r);

/* The summary's membership lines (rank 0), nothing without a change. */
void elastic_summary(const run_t *r, FILE *out);

/* A commit point before a step (every member, same step): admit the
 * peers waiting to join. 0 (nobody), 2 (the ring grew: the change is finished by the next
 * step), 1 (comm failed: recover with EL_GROW), -1 with err. Without it: 0. */
int elastic_grow_point(run_t *r, char *err, size_t errlen);
/* This peer joined a running ring: receive the state. 0 / -1. */
int elastic_joined(run_t *r, char *err, size_t errlen);

#endif /* RINGD_DAEMON_ELASTIC_H */
