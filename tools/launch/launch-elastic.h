/* launch-elastic.h - ring-launch --elastic MIN:MAX (launch-elastic.c): what a
 * lost rank does to the job, replacements, and the job's end. Its options are
 * launch-opts.c's; ring-launch.c starts and stops the processes it decides on. */
#ifndef RING_LAUNCH_ELASTIC_H
#define RING_LAUNCH_ELASTIC_H

struct launch_state;

/* What ring-launch.c does after launch_elastic_record */
enum launch_elastic_act {
    LAUNCH_EL_FAIL,       /* the rank failed the job, as without --elastic */
    LAUNCH_EL_SETTLED,    /* nothing to do: it finished, or was lost and the others go on */
    LAUNCH_EL_REPLACE,    /* start a replacement in its place (launch_child_spawn), then
                           * call launch_elastic_replaced */
    LAUNCH_EL_STOP        /* fewer than MIN left: stop the job (launch_stop_begin) */
};

/* Rank i of this node exited with wait status `status` (already counted out of
 * st->running): what to do. A lost rank is named on stderr; for a replacement
 * its output so far is passed on and its streams closed, and kids[i].gen counts
 * one more. LAUNCH_EL_FAIL after another rank finished, or while the job is
 * being stopped. */
enum launch_elastic_act launch_elastic_record(struct launch_state *st, long i, int status);

/* After LAUNCH_EL_REPLACE: started says whether the replacement runs (a line says
 * so, or why not). LAUNCH_EL_SETTLED, or LAUNCH_EL_STOP when it could not start
 * and fewer than MIN are left. */
enum launch_elastic_act launch_elastic_replaced(struct launch_state *st, long i, int started);

/* Once every rank has exited (not after --timeout, a signal or a failed start):
 * says how the job ended and returns the exit status, or -1 when a rank failed as
 * without --elastic and the usual report applies (the lost ranks named first). */
int launch_elastic_report(const struct launch_state *st);

/* At each turn of the loop (now: ms): 1 when the ranks still running are all
 * replacements, --grace (at least 1 s) after a rank finished: the ring they were
 * to join has ended (in lockstep the members finish together), so each waits
 * for a grow that never comes; they are named and marked, to be stopped
 * (launch_stop_begin) and counted lost, not failed. */
int launch_elastic_late(struct launch_state *st, long long now);

#endif /* RING_LAUNCH_ELASTIC_H */
