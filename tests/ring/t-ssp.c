/*
 * t-ssp.c - libringd's SSP sessions (include/ringd/ssp.h) across real
 * processes on 127.0.0.1, through the public API alone:
 *   - S = 0 is synchronous SGD: every rank's parameters follow the update a
 *     single process computes from the same gradients (momentum, weight
 *     decay), and all ranks end bitwise identical;
 *   - bounded S = 2 with a slow rank: no step starts more than 2 ahead of
 *     the slowest, the fast ranks do run ahead, every push is applied once;
 *   - async: no step ever blocks;
 *   - fresh reads: with a long fresh_wait no step of a bounded session is
 *     ever stale, even beside a slower rank (each waits for the round that
 *     brings its peers' last steps); a straggler two steps behind is waited
 *     for once, not at every step, and not even once past fresh_late times
 *     its step time, once a round says its step is late;
 *   - late steps in the warm-up: a rank whose step takes a second holds no
 *     one; its step is dropped and counted, every other push is applied, the
 *     parameters agree; with warmup_late 0, or S = 0, every peer waits for it;
 *   - gathering: steps of ranks in phase travel in one round, as a round
 *     that would carry some waits once for a step about to land; held steps
 *     and steps pushed meanwhile go together, each applied once;
 *   - request_stop on one rank stops all of them; a wait with a short
 *     timeout times out and can be retried;
 *   - a rank killed mid-session: the others fail naming it, within the timeout;
 *   - a rank that sends control values that are not counts (huge, negative,
 *     fractions), or a flag that is not 0 or 1, through the session's own
 *     allreduce: the others refuse them before converting any, naming it;
 *   - misuse: bad options, push without wait, wait twice.
 * Gradients are pure functions of (rank, step, index), small multiples of
 * 2^-8, so their sums are exact and every rank can compute the reference.
 */
#include "ring_build.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ringd/ringd.h>

#include "harness.h"
#include "tap.h"

#define COUNT 1000
#define V_STEPS 0      /* steps this rank pushed */
#define V_HASH 1       /* hash of the final parameters */
#define V_MAXTAU 2
#define V_BADREF 3     /* elements off the single-process reference */
#define V_CONTRIB 4    /* contributions the rounds applied (stats) */
#define V_BLOCKED_US 5
#define V_STATUS 6     /* the failing status, or 0 */
#define V_TIMEDOUT 7   /* a short wait timed out, then a retry went on */
#define V_MISUSE 8     /* misuse calls refused as they should be */
#define V_FRESH_US 9   /* the time wait held steps for fresher parameters */
#define V_LATE 10      /* steps dropped as late in the warm-up (stats) */
#define V_ROUNDS 11    /* rounds that applied steps (stats) */
#define V_GATHER 12    /* rounds held for a step about to land (stats) */
#define V_FRESH_CUT 13 /* fresh waits ended early for a late peer (stats) */
#define V_FRESH_MAX_US 14 /* the longest time one step was held for freshness */
#define CTL 8          /* the session's control slots a rank (ssp_session.h) */

enum kind { K_SYNC, K_BOUNDED, K_ASYNC, K_STOP, K_TIMEOUT, K_KILLED, K_ROGUE, K_FRESH,
            K_FRESH_STRAGGLER, K_LATE, K_LATE_UNIT, K_GATHER, K_GATHER_ASYNC, K_ROGUE_FLAG };

typedef struct ssp_case {
    enum kind kind;
    long staleness;
    int steps;
    double fresh_wait_s;   /* 0: the default (auto) */
    double warmup_late;    /* K_LATE(_UNIT): 0 = the default (1.5), < 0 = off */
    double gather_s;       /* 0: the default (auto), < 0 = off */
    double fresh_late;     /* 0: the default (1.25), < 0 = off */
} ssp_case_t;

/* K_LATE_UNIT is K_LATE with every rank pushing UNIT_GRAD under plain SGD: a round
 * applying one step's worth moves each parameter by exactly lr * UNIT_GRAD */
#define UNIT_GRAD 0.25f

static float grad_at(int rank, int step, size_t i)
{
    /* small multiples of 2^-8: exact in float, and so are their sums */
    return (float)((int)((rank * 7 + step * 13 + (int)i * 3) % 17) - 8) / 256.0f;
}

static uint64_t hash_floats(const float *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The single-process reference of S = 0: SGD with momentum on the average. */
static int reference_bad(const float *got, int n, int steps, const ring_ssp_options_t *o)
{
    float w[COUNT], v[COUNT];
    int bad = 0;

    for (size_t i = 0; i < COUNT; i++) {
        w[i] = (float)i / COUNT;
        v[i] = 0;
    }
    for (int t = 0; t < steps; t++)
        for (size_t i = 0; i < COUNT; i++) {
            float sum = 0;
            for (int r = 0; r < n; r++)
                sum += grad_at(r, t, i);
            float g = sum / (float)n + (float)o->weight_decay * w[i];
            v[i] = (float)o->momentum * v[i] + g;
            w[i] -= (float)o->lr * v[i];
        }
    for (size_t i = 0; i < COUNT; i++)
        bad += !(fabsf(got[i] - w[i]) <= 1e-5f * (1.0f + fabsf(w[i])));
    return bad;
}

static int misuse_checks(ring_comm_t *comm)
{
    ring_ssp_options_t o;
    ring_ssp_t *s = NULL;
    float p[4] = {0};
    int good = 0;

    ring_ssp_options_init(&o);
    o.staleness = -5;
    good += ring_ssp_open(comm, p, 4, &o, &s) == RING_ERR_INVALID && s == NULL &&
            strstr(ring_last_error(), "staleness -5") != NULL;
    ring_ssp_options_init(&o);
    o.momentum = 1.5;
    good += ring_ssp_open(comm, p, 4, &o, &s) == RING_ERR_INVALID;
    ring_ssp_options_init(&o);
    o.warmup_late = 0.5; /* would drop steps of the usual length */
    good += ring_ssp_open(comm, p, 4, &o, &s) == RING_ERR_INVALID &&
            strstr(ring_last_error(), "warmup_late 0.5") != NULL;
    ring_ssp_options_init(&o);
    o.fresh_late = 0.5; /* every step would be late */
    good += ring_ssp_open(comm, p, 4, &o, &s) == RING_ERR_INVALID &&
            strstr(ring_last_error(), "fresh_late 0.5") != NULL;
    ring_ssp_options_init(&o);
    o.gather_s = NAN;
    good += ring_ssp_open(comm, p, 4, &o, &s) == RING_ERR_INVALID &&
            strstr(ring_last_error(), "round gather") != NULL;
    ring_ssp_options_init(&o);
    good += ring_ssp_open(comm, p, 0, &o, &s) == RING_ERR_INVALID;
    return good;
}

static int rank_main(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const ssp_case_t *c = arg;
    ring_comm_t *comm;
    ring_ssp_options_t o;
    ring_ssp_t *s;
    ring_ssp_stats_t st;
    ring_status_t rs;
    float *params = malloc(COUNT * sizeof(float)), *g = malloc(COUNT * sizeof(float));
    uint64_t maxtau = 0;
    double fresh_max = 0;
    int steps = 0, misuse = 0;

    if (params == NULL || g == NULL)
        return h_fail(RING_ERR_NO_MEMORY, "malloc");
    rs = ring_comm_open(cfg, &comm);
    if (rs != RING_OK)
        return h_fail(rs, "ring_comm_open");
    if (c->kind == K_SYNC)
        misuse = misuse_checks(comm);
    if ((c->kind == K_ROGUE || c->kind == K_ROGUE_FLAG) && rank == n - 1) {
        /* the session's first call: the exact control allreduce, CTL floats a rank
         * (tensor id 2); this rank fills its slots with what no count can be */
        float ctl[CTL * H_MAX_RANKS] = {0};
        ring_request_t *req;
        if (c->kind == K_ROGUE) {
            ctl[CTL * rank + 0] = 1e30f; /* (a NaN the ring itself refuses as non-finite) */
            ctl[CTL * rank + 1] = -3.0f;
            ctl[CTL * rank + 2] = 0.5f;
            ctl[CTL * rank + 6] = 2.0f; /* "my step is due" is a flag */
        } else {
            ctl[CTL * rank + 7] = 3.0f; /* every count valid, but "my step is late" is a flag */
        }
        if (ring_allreduce_start_flags(comm, ctl, ctl, (size_t)n * CTL, RING_FLOAT32, RING_SUM, 2,
                                       RING_CALL_EXACT, &req) == RING_OK)
            (void)ring_request_wait(req);
        sleep_ms(300);
        ring_comm_close(comm);
        return 0;
    }
    for (size_t i = 0; i < COUNT; i++)
        params[i] = (float)i / COUNT;
    ring_ssp_options_init(&o);
    o.staleness = c->staleness;
    o.lr = 0.125;
    o.momentum = 0.5;
    o.weight_decay = 0.0078125;
    if (c->fresh_wait_s > 0)
        o.fresh_wait_s = c->fresh_wait_s;
    if (c->gather_s < 0)
        o.gather_s = 0;
    if (c->fresh_late < 0)
        o.fresh_late = 0;
    if (c->kind == K_GATHER_ASYNC)
        o.fresh_wait_s = 0; /* the fast ranks push on while a round is held */
    if (c->kind == K_LATE || c->kind == K_LATE_UNIT) {
        o.warmup_steps = 1000; /* every step in the lockstep warm-up */
        if (c->warmup_late < 0)
            o.warmup_late = 0;
        if (c->kind == K_LATE_UNIT) {
            o.momentum = o.weight_decay = 0;
            /* every rank stops together, before the late one trains alone at the end
             * (a round without a peer that is done applies sum / N, as ever) */
            o.stop_at_steps = 27;
        }
    }
    rs = ring_ssp_open(comm, params, COUNT, &o, &s);
    if (rs != RING_OK)
        return h_fail(rs, "ring_ssp_open");
    if (c->kind == K_SYNC) {
        ring_ssp_step_t tmp;
        misuse += ring_ssp_push(s, g) == RING_ERR_INVALID; /* before any wait */
        if (ring_ssp_wait(s, 30, &tmp) != RING_OK)
            return h_fail(RING_ERR_INTERNAL, "first wait");
        misuse += ring_ssp_wait(s, 30, &tmp) == RING_ERR_INVALID; /* twice */
        for (size_t i = 0; i < COUNT; i++)
            g[i] = grad_at(rank, 0, i);
        if (ring_ssp_push(s, g) != RING_OK)
            return h_fail(RING_ERR_INTERNAL, "first push");
        steps = 1;
    }
    while (steps < c->steps) {
        ring_ssp_step_t step;

        if (c->kind == K_TIMEOUT && rank == 0 && steps == 3) {
            /* rank 1 sleeps before its step 1: rank 0's step 3 waits on the bound (S = 1) */
            rs = ring_ssp_wait(s, 0.2, &step);
            if (rs == RING_ERR_TIMED_OUT)
                h_put(V_TIMEDOUT, 1);
            if (rs != RING_ERR_TIMED_OUT && rs != RING_OK)
                return h_fail(rs, "short wait");
            if (rs == RING_OK) /* did not time out: let the check fail on V_TIMEDOUT */
                goto have_step;
        }
        rs = ring_ssp_wait(s, 30, &step);
        if (rs == RING_ERR_CANCELED)
            break;
        if (rs != RING_OK) {
            h_put(V_STATUS, (uint64_t)rs);
            return h_fail(rs, "ring_ssp_wait");
        }
have_step:
        if (step.tau > maxtau)
            maxtau = step.tau;
        if (step.fresh_s > fresh_max)
            fresh_max = step.fresh_s;
        if (c->kind == K_BOUNDED && rank == n - 1)
            sleep_ms(20); /* the straggler */
        if (c->kind == K_TIMEOUT && rank == 1 && step.clock == 1)
            sleep_ms(1500);
        if (c->kind == K_KILLED)
            sleep_ms(10);
        if (c->kind == K_FRESH)
            sleep_ms(rank == n - 1 ? 15 : 5); /* rank n-1 slower, but never a step behind */
        if (c->kind == K_FRESH_STRAGGLER)
            sleep_ms(rank == n - 1 && step.clock == 5 ? 2000 : 5);
        if (c->kind == K_LATE || c->kind == K_LATE_UNIT)
            sleep_ms(rank == n - 1 && steps == 4 ? 1000 : 10);
        if (c->kind == K_GATHER)
            sleep_ms(30 + 3 * rank); /* in phase: the steps land 3 ms apart */
        if (c->kind == K_GATHER_ASYNC)
            sleep_ms(rank == n - 1 ? 20 : 4);
        if (c->kind == K_KILLED && rank == 2 && step.clock == 10)
            h_ready(); /* the parent kills it now */
        for (size_t i = 0; i < COUNT; i++)
            g[i] = c->kind == K_LATE_UNIT ? UNIT_GRAD : grad_at(rank, (int)step.clock, i);
        rs = ring_ssp_push(s, g);
        if (rs != RING_OK) {
            h_put(V_STATUS, (uint64_t)rs);
            return h_fail(rs, "ring_ssp_push");
        }
        steps++;
        if (c->kind == K_STOP && rank == 1 && steps == 5)
            ring_ssp_request_stop(s);
    }
    rs = ring_ssp_finish(s, 30);
    if (rs != RING_OK) {
        h_put(V_STATUS, (uint64_t)rs);
        return h_fail(rs, "ring_ssp_finish");
    }
    ring_ssp_get_stats(s, &st);
    h_put(V_STEPS, (uint64_t)steps);
    h_put(V_HASH, hash_floats(params, COUNT));
    h_put(V_MAXTAU, maxtau);
    h_put(V_CONTRIB, st.contributions);
    h_put(V_BLOCKED_US, (uint64_t)(st.blocked_s * 1e6));
    h_put(V_MISUSE, (uint64_t)misuse);
    h_put(V_FRESH_US, (uint64_t)(st.fresh_s * 1e6));
    h_put(V_LATE, st.late_steps);
    h_put(V_ROUNDS, st.rounds_applied);
    h_put(V_GATHER, st.gather_rounds);
    h_put(V_FRESH_CUT, st.fresh_cut);
    h_put(V_FRESH_MAX_US, (uint64_t)(fresh_max * 1e6));
    if (c->kind == K_SYNC)
        h_put(V_BADREF, (uint64_t)reference_bad(params, n, steps, &o));
    if (c->kind == K_LATE_UNIT) {
        /* a warm-up round without a late step applies the mean of the others' steps:
         * lockstep's step, not (N-1)/N of it (a round of 2 of 3 would be lr/12 short) */
        uint64_t bad = 0;
        for (size_t i = 0; i < COUNT; i++) {
            double want = (double)i / COUNT - o.lr * UNIT_GRAD * (double)st.rounds_applied;
            bad += fabs((double)params[i] - want) > 1e-4;
        }
        h_put(V_BADREF, bad);
    }
    ring_ssp_close(s);
    ring_comm_close(comm);
    free(params);
    free(g);
    return 0;
}

static int run_ring(h_run_t *run, int n, const ssp_case_t *c, const h_action_t *act, int nact)
{
    h_ring_spec_t rs = {.n = n, .fn = rank_main, .arg = (void *)c, .budget = 40,
                        .timeout = "3s", .actions = act, .nactions = nact, .on_error = H_DIAG,
                        .run = run};

    return h_run_ring(&rs) != NULL ? 0 : -1;
}

static int all_exit0(const h_run_t *run, int n)
{
    for (int r = 0; r < n; r++)
        if (!run->r[r].exited || run->r[r].code != 0) {
            h_diag(run);
            return 0;
        }
    return 1;
}

static int same_hash(const h_run_t *run, int n)
{
    for (int r = 1; r < n; r++)
        if (h_val(&run->r[r], V_HASH, 1) != h_val(&run->r[0], V_HASH, 2))
            return 0;
    return 1;
}

/* The largest tau any of the n ranks saw, and their steps added up. */
static uint64_t max_tau(const h_run_t *run, int n, uint64_t *steps)
{
    uint64_t maxtau = 0;

    *steps = 0;
    for (int r = 0; r < n; r++) {
        if (h_val(&run->r[r], V_MAXTAU, 99) > maxtau)
            maxtau = h_val(&run->r[r], V_MAXTAU, 99);
        *steps += h_val(&run->r[r], V_STEPS, 0);
    }
    return maxtau;
}

int main(void)
{
    static h_run_t run;
    const int ns[] = {2, 3, 4};
    uint64_t sum;

    setvbuf(stdout, NULL, _IOLBF, 0);
    plan(30);
    for (size_t k = 0; k < 3; k++) {
        int n = ns[k];
        ssp_case_t c = {K_SYNC, 0, 12, 0, 0, 0, 0};
        int ok0 = run_ring(&run, n, &c, NULL, 0) == 0 && all_exit0(&run, n);
        uint64_t bad = 0, misuse = 0;
        for (int r = 0; r < n && ok0; r++) {
            bad += h_val(&run.r[r], V_BADREF, 1);
            misuse += h_val(&run.r[r], V_MISUSE, 0);
        }
        ok(ok0 && bad == 0 && same_hash(&run, n) && h_val(&run.r[0], V_MAXTAU, 9) == 0,
           "N=%d S=0: the parameters are synchronous SGD's (%llu elements off), bitwise the same "
           "on every rank, never stale", n, (unsigned long long)bad);
        ok(ok0 && misuse == (uint64_t)n * 8, "N=%d: bad options, push before wait and wait twice "
           "are refused (%llu of %d)", n, (unsigned long long)misuse, n * 8);
    }
    {
        ssp_case_t c = {K_BOUNDED, 2, 30, 0, 0, 0, 0};
        int ok0 = run_ring(&run, 3, &c, NULL, 0) == 0 && all_exit0(&run, 3);
        uint64_t maxtau = ok0 ? max_tau(&run, 3, &sum) : 0;
        ok(ok0 && maxtau <= 2, "bounded S=2, a slow rank: no step started more than 2 ahead "
           "of the slowest (max %llu)", (unsigned long long)maxtau);
        ok(ok0 && maxtau >= 1 && h_val(&run.r[0], V_BLOCKED_US, 0) > 0,
           "bounded S=2: the fast ranks ran ahead and were blocked on the bound");
        ok(ok0 && sum == 90 && h_val(&run.r[0], V_CONTRIB, 0) == sum && same_hash(&run, 3),
           "bounded S=2: every push applied once (%llu of 90), the parameters agree",
           (unsigned long long)h_val(&run.r[0], V_CONTRIB, 0));
    }
    {
        ssp_case_t c = {K_ASYNC, RING_SSP_ASYNC, 30, 0, 0, 0, 0};
        int ok0 = run_ring(&run, 3, &c, NULL, 0) == 0 && all_exit0(&run, 3);
        uint64_t blocked = 0;
        for (int r = 0; r < 3 && ok0; r++)
            blocked += h_val(&run.r[r], V_BLOCKED_US, 1);
        ok(ok0 && blocked == 0 && h_val(&run.r[0], V_CONTRIB, 0) == 90 && same_hash(&run, 3),
           "async: no step blocked, every push applied, the parameters agree");
    }
    {
        /* fresh reads, with a limit no step reaches: every step waits for the round
         * holding its peers' previous steps, so none is stale, as in lockstep (with no
         * step ever late: a loaded host may stretch rank 2's 15 ms past 1.25 times) */
        ssp_case_t c = {K_FRESH, 4, 20, 30.0, 0, 0, -1};
        int ok0 = run_ring(&run, 3, &c, NULL, 0) == 0 && all_exit0(&run, 3);
        uint64_t maxtau = ok0 ? max_tau(&run, 3, &sum) : 0;
        ok(ok0 && maxtau == 0 && h_val(&run.r[0], V_FRESH_US, 0) > 0,
           "bounded S=4, fresh_wait 30 s, rank 2 three times slower: no step stale (max tau "
           "%llu), the fast ranks waited %.3f s for fresh parameters", (unsigned long long)maxtau,
           ok0 ? (double)h_val(&run.r[0], V_FRESH_US, 0) / 1e6 : 0.0);
        ok(ok0 && sum == 60 && h_val(&run.r[0], V_CONTRIB, 0) == sum && same_hash(&run, 3),
           "bounded S=4 with fresh reads: every push applied once (%llu of 60), the parameters "
           "agree", (unsigned long long)h_val(&run.r[0], V_CONTRIB, 0));
    }
    {
        /* rank 2 stalls 2 s at its step 5. With fresh_late off, the others wait 0.3 s
         * once when it is one step behind, then go on to the bound without waiting at
         * every step; by default a round soon says its step is late (past 1.25 times
         * its 5 ms), and the wait ends then */
        const double late[] = {-1, 0};
        for (int k = 0; k < 2; k++) {
            ssp_case_t c = {K_FRESH_STRAGGLER, 4, 20, 0.3, 0, 0, late[k]};
            int ok0 = run_ring(&run, 3, &c, NULL, 0) == 0 && all_exit0(&run, 3);
            double f0 = ok0 ? (double)h_val(&run.r[0], V_FRESH_US, 0) / 1e6 : 0;
            double m0 = ok0 ? (double)h_val(&run.r[0], V_FRESH_MAX_US, 0) / 1e6 : 1;
            uint64_t cut = ok0 ? h_val(&run.r[0], V_FRESH_CUT, 99) : 99;
            if (k == 0)
                ok(ok0 && f0 >= 0.25 && f0 < 1.0 && cut == 0,
                   "fresh_wait 0.3 s, fresh_late 0, rank 2 stalls 2 s: rank 0 held %.3f s for "
                   "freshness (once, not at each of its steps while rank 2 was behind)", f0);
            else
                ok(ok0 && m0 < 0.2 && cut >= 1,
                   "fresh_wait 0.3 s, fresh_late 1.25 (the default), rank 2 stalls 2 s: rank 0 "
                   "held %.3f s for freshness (%.3f s the longest step), %llu waits ended as "
                   "rank 2 was late", f0, m0, (unsigned long long)cut);
            ok(ok0 && h_val(&run.r[0], V_MAXTAU, 0) >= 2 && h_val(&run.r[0], V_CONTRIB, 0) == 60 &&
               same_hash(&run, 3),
               "the straggler: rank 0 ran ahead of it (max tau %llu), every push applied, the "
               "parameters agree", (unsigned long long)h_val(&run.r[0], V_MAXTAU, 0));
        }
    }
    {
        /* the warm-up is lockstep; rank 2's fifth step takes 1 s against 10 ms */
        const struct { long s; double late; const char *what; } lc[] = {
            {4, 0, "S=4, warmup_late 1.5 (the default)"},
            {4, -1, "S=4, warmup_late 0 (off)"},
            {0, 0, "S=0 (lockstep, never drops)"}};
        for (int k = 0; k < 4; k++) {
            ssp_case_t c = {k == 3 ? K_LATE_UNIT : K_LATE, lc[k % 3].s, 12, 0, lc[k % 3].late,
                            0, 0};
            int ok0 = run_ring(&run, 3, &c, NULL, 0) == 0 && all_exit0(&run, 3);
            uint64_t late = 0, pushed = ok0 ? 0 : 1;
            double b0 = ok0 ? (double)h_val(&run.r[0], V_BLOCKED_US, 0) / 1e6 : 0;
            int apply_all = 0;
            for (int r = 0; r < 3 && ok0; r++) {
                late += h_val(&run.r[r], V_LATE, 99);
                pushed += h_val(&run.r[r], V_STEPS, 0);
            }
            apply_all = ok0 && (pushed == 36 || k == 3) && same_hash(&run, 3) &&
                        h_val(&run.r[0], V_CONTRIB, 0) == pushed - late;
            if (k == 3) {
                uint64_t bad = 0;
                for (int r = 0; r < 3 && ok0; r++)
                    bad += h_val(&run.r[r], V_BADREF, 1);
                ok(apply_all && h_val(&run.r[2], V_LATE, 0) >= 1 && bad == 0,
                   "S=4, the same gradient on every rank, plain SGD, a stop at 27 steps: with "
                   "rank 2's step dropped (%llu late) each of the %llu rounds moved the "
                   "parameters by one step, not by the steps it held / 3 (%llu elements off on "
                   "the 3 ranks)", (unsigned long long)late,
                   (unsigned long long)h_val(&run.r[0], V_ROUNDS, 0), (unsigned long long)bad);
            } else if (k == 0)
                ok(apply_all && h_val(&run.r[2], V_LATE, 0) >= 1 && b0 < 0.6,
                   "%s: rank 2's 1 s step is dropped (%llu late), rank 0 was held %.3f s (not "
                   "the second), the other %llu pushes are applied once, the parameters agree",
                   lc[k].what, (unsigned long long)late, b0,
                   (unsigned long long)(pushed - late));
            else
                ok(apply_all && late == 0 && b0 >= 0.8,
                   "%s: no step dropped (%llu), rank 0 waited %.3f s for rank 2's long step, "
                   "every push applied, the parameters agree", lc[k].what,
                   (unsigned long long)late, b0);
        }
    }
    {
        /* steps in phase, landing 3 ms apart: a round carrying the first waits for the
         * others, so a round holds about one step of every rank (without it, 2 or 3
         * rounds a step); the fresh reads keep them in phase */
        const double g[] = {0, -1};
        double per_round[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            ssp_case_t c = {K_GATHER, 4, 30, 0, 0, g[k], 0};
            int ok0 = run_ring(&run, 3, &c, NULL, 0) == 0 && all_exit0(&run, 3);
            uint64_t rounds = ok0 ? h_val(&run.r[0], V_ROUNDS, 0) : 0;
            per_round[k] = rounds ? (double)h_val(&run.r[0], V_CONTRIB, 0) / (double)rounds : 0;
            ok(ok0 && h_val(&run.r[0], V_CONTRIB, 0) == 90 && same_hash(&run, 3) &&
               (k == 1 ? h_val(&run.r[0], V_GATHER, 1) == 0
                       : h_val(&run.r[0], V_GATHER, 0) > 0 && per_round[k] >= 2.5),
               "in-phase steps, round_gather %s: %.2f steps a round (%llu held for a step "
               "about to land), every push applied once, the parameters agree",
               k == 0 ? "auto" : "0 (off)", per_round[k],
               (unsigned long long)h_val(&run.r[0], V_GATHER, 0));
        }
    }
    {
        /* async, no fresh reads: the fast ranks push again while a round waits for
         * rank 2's step, so the next round sends held and new steps together */
        ssp_case_t c = {K_GATHER_ASYNC, RING_SSP_ASYNC, 40, 0, 0, 0, 0};
        int ok0 = run_ring(&run, 3, &c, NULL, 0) == 0 && all_exit0(&run, 3);
        ok(ok0 && h_val(&run.r[0], V_GATHER, 0) > 0 && h_val(&run.r[0], V_CONTRIB, 0) == 120 &&
           same_hash(&run, 3),
           "async, rank 2 ten times slower: %llu rounds held for its step, every push applied "
           "once (%llu of 120), the parameters agree",
           (unsigned long long)h_val(&run.r[0], V_GATHER, 0),
           (unsigned long long)h_val(&run.r[0], V_CONTRIB, 0));
    }
    {
        ssp_case_t c = {K_STOP, 2, 1000, 0, 0, 0, 0};
        int ok0 = run_ring(&run, 3, &c, NULL, 0) == 0 && all_exit0(&run, 3);
        sum = 0;
        for (int r = 0; r < 3 && ok0; r++)
            sum += h_val(&run.r[r], V_STEPS, 0);
        ok(ok0 && sum < 3 * 1000 && h_val(&run.r[0], V_CONTRIB, 0) == sum && same_hash(&run, 3),
           "request_stop on rank 1: every rank stopped (%llu steps of 3000), finished with the "
           "same parameters", (unsigned long long)sum);
        ok(ok0 && h_val(&run.r[1], V_STEPS, 0) == 5, "request_stop: rank 1 stopped at its step 5");
    }
    {
        ssp_case_t c = {K_TIMEOUT, 1, 6, 0, 0, 0, 0};
        int ok0 = run_ring(&run, 2, &c, NULL, 0) == 0 && all_exit0(&run, 2);
        ok(ok0 && h_val(&run.r[0], V_TIMEDOUT, 0) == 1 && h_val(&run.r[0], V_STEPS, 0) == 6 &&
           same_hash(&run, 2),
           "a wait with a 0.2 s timeout on the bound times out, and a retry goes on");
    }
    {
        ssp_case_t c = {K_KILLED, 2, 100000, 0, 0, 0, 0};
        h_action_t kill2 = {.after_ready = 2, .at = 0.05, .target = 2, .sig = SIGKILL};
        int ran = run_ring(&run, 3, &c, &kill2, 1) == 0;
        int named = 1, failed = 1;
        for (int r = 0; r < 2 && ran; r++) {
            failed &= run.r[r].exited && run.r[r].code != 0 && !run.r[r].hung;
            named &= strstr(run.r[r].msg, "rank 2") != NULL || strstr(run.r[r].msg, "rank") != NULL;
        }
        if (!(ran && failed && named))
            h_diag(&run);
        ok(ran && run.r[2].signo == SIGKILL && failed,
           "rank 2 killed mid-session: ranks 0 and 1 fail (no hang) within %.1f s",
           run.t_done);
        ok(ran && strstr(run.r[0].msg, "rank 2") != NULL && strstr(run.r[1].msg, "rank 2") != NULL,
           "rank 2 killed: both survivors name rank 2 (%s | %s)", run.r[0].msg, run.r[1].msg);
        (void)named;
    }
    for (int k = 0; k < 2; k++) {
        ssp_case_t c = {k == 0 ? K_ROGUE : K_ROGUE_FLAG, 2, 10, 0, 0, 0, 0};
        int ran = run_ring(&run, 3, &c, NULL, 0) == 0, named = ran;
        for (int r = 0; r < 2 && ran; r++)
            named &= run.r[r].exited && run.r[r].code != 0 &&
                     run.r[r].status == RING_ERR_PROTOCOL &&
                     strstr(run.r[r].msg, "rank 2 sent control values") != NULL;
        if (!named)
            h_diag(&run);
        ok(named, "a rank sending %s: the others fail with a protocol error naming it (%s)",
           k == 0 ? "huge/negative/fractional control values" : "a late flag of 3",
           ran ? run.r[0].msg : "");
    }
    return tap_failed ? 1 : 0;
}
