/*
 * metrics.c - the metrics file: one JSON object per line (JSON Lines), one
 * line per step and one per evaluation, flushed as written so a crash
 * loses at most the line being written and `tail -f` works.
 *
 * Step line: {"type":"step","step":S,"epoch":E,"time":T,"loss":L,
 *   "samples":B,"wire_bytes":W,"compute_s":C,"wait_s":A,"comm_s":M}
 *   time: training seconds (across resumes); loss: this peer's batch loss;
 *   wire_bytes: payload bytes this peer sent in the step; wait_s: time
 *   waiting for the slowest peer; comm_s: the gradient allreduce; tau (0) and
 *   blocked_s (= wait_s) as in the bounded modes' lines, for comparisons.
 * Bounded/async step line (ssp.c): {"type":"step","rank","step","epoch","time",
 *   "loss","samples","clock","min_clock","tau","blocked_s","compute_s","rounds"}:
 *   step counts this peer's steps (as the eval lines do); clock = the
 *   session's clock when the step started: the steps this peer had finished,
 *   and ahead of them once a late warm-up step was left out (--warmup-late);
 *   min_clock = M then, tau = clock - min_clock, blocked_s = time waiting for the bound,
 *   wait_s = that and the time held for fresher parameters (--fresh-wait).
 * Round line (bounded/async): {"type":"round","rank","round","steps",
 *   "min_clock","comm_s","idle_s"}: steps = all peers' steps the round
 *   applied; idle_s = how long this peer's allreduces sat waiting for a
 *   neighbour in the round (mostly the left one: the peers the others wait
 *   for show the least).
 * Eval line: {"type":"eval","step":S,"epoch":E,"time":T,"loss":L,"accuracy":A}
 *   step, epoch, time: those of the parameters evaluated (a background
 *   evaluation's line comes later, when its result does).
 * Membership line (--elastic, elastic.c writes it when the next step completed):
 *   {"type":"membership","rank","step","time","unix_time","from","to","lost":[...],
 *   "lost_at_start":[...],"joined","lost_s","detect_s","shrink_s","redo_s",
 *   "rolled_forward"}: the ring went from `from` to `to` peers after `step` steps; lost:
 *   the old ring's ranks (their ranks at start beside); lost_s: from the start of the
 *   failed call to the next completed step (unix_time: then), its parts: until the
 *   failure was seen, the shrink, the rest; rolled_forward: the interrupted step's
 *   update came from a survivor that had finished it.
 * Final line: {"type":"final","rank":R,"step":S,"params_fnv1a64":"HEX"}: a hash
 *   of the parameters' bytes, equal on every peer of a lockstep ring.
 */
#include "ring_build.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "daemon/daemon.h"

int metrics_open(const daemon_opts_t *opt, int rank, FILE **f_out, char *err, size_t errlen)
{
    char path[OPT_STR_MAX + 16];
    const char *mark = strstr(opt->metrics, "{rank}");
    FILE *f;

    *f_out = NULL;
    if (opt->metrics[0] == '\0' || (mark == NULL && rank != 0))
        return 0;
    if (mark != NULL)
        snprintf(path, sizeof(path), "%.*s%d%s", (int)(mark - opt->metrics), opt->metrics, rank,
                 mark + 6);
    else
        snprintf(path, sizeof(path), "%s", opt->metrics);
    f = fopen(path, "a");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open the metrics file %s: %m", path);
        return -1;
    }
    *f_out = f;
    return 0;
}

void metrics_step(FILE *f, int rank, const metrics_step_t *m)
{
    fprintf(f,
            "{\"type\":\"step\",\"rank\":%d,\"step\":%" PRIu64 ",\"epoch\":%" PRIu64
            ",\"time\":%.6f,\"loss\":%.6g,\"samples\":%d,\"wire_bytes\":%" PRIu64
            ",\"compute_s\":%.6f,\"wait_s\":%.6f,\"comm_s\":%.6f,\"tau\":%" PRIu64
            ",\"blocked_s\":%.6f,\"clock\":%" PRIu64 ",\"min_clock\":%" PRIu64
            ",\"rounds\":%" PRIu64 "}\n",
            rank, m->step, m->epoch, m->time, m->loss, m->samples, m->wire_bytes, m->compute_s,
            m->wait_s, m->comm_s, m->tau, m->blocked_s, m->clock, m->min_clock, m->rounds);
    fflush(f);
}

void metrics_eval(FILE *f, uint64_t step, uint64_t epoch, double elapsed, double loss, double acc)
{
    fprintf(f,
            "{\"type\":\"eval\",\"step\":%" PRIu64 ",\"epoch\":%" PRIu64
            ",\"time\":%.6f,\"loss\":%.6g,\"accuracy\":%.6f}\n",
            step, epoch, elapsed, loss, acc);
    fflush(f);
}

/* FNV-1a over the bytes: order-sensitive, and a single changed bit shows */
static uint64_t fnv1a64(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

void metrics_final(FILE *f, const run_t *r)
{
    fprintf(f, "{\"type\":\"final\",\"rank\":%d,\"step\":%" PRIu64
               ",\"params_fnv1a64\":\"%016" PRIx64 "\"}\n",
            r->rank, r->step, fnv1a64(r->w->params, r->w->nparams * sizeof(float)));
    fflush(f);
}
