/*
 * t-grow.c - peers joining a running elastic ring (ring_comm_grow and a late
 * ring_comm_open) across real processes on 127.0.0.1, with a tcp
 * rendezvous store: a fifth peer joins four; a replacement joins after a
 * peer was lost and the ring shrank; a joiner with other settings, one with
 * another secret, and one that dies before the new ring is up are turned
 * away while the members train on. After every change the members must
 * agree on the ring, and a joiner must receive the members' state exactly.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "store.h"
#include "tap.h"

#define STATE 1031             /* floats of "parameters" a joiner must receive */
#define MAX_STEPS 20000
#define QUIET_STEPS 1200       /* when nobody joins: about 3 s of steps */
#define STEP_US 2000           /* a step's "compute": the ring stays busy, as in training */
enum { V_SIZE, V_RANK, V_JOINED, V_CHECK, V_GROWS, V_STEPS, V_T_ASK, V_T_IN };

typedef struct gcase {
    const char *label;
    int founders;            /* ranks 0..founders-1 start at once; the rest join later */
    int kill_rank;           /* a founder SIGKILLed (-1 none): the others shrink first */
    int joiner_dies;         /* the joiner kills itself once it asked to join */
    int expect_join;         /* the joiner gets in */
    const char *why;         /* a joiner turned away: its error names this */
    const h_setting_t *settings;
    int launcher_store;      /* the parent serves the store (ring_rendezvous_server_start) */
} gcase_t;

static char store_url[64];
static int store_port;

/* ---- child ------------------------------------------------------------ */

/* The members' "parameters": the same on every member at every step. */
static void state_step(float *p, int step)
{
    for (int i = 0; i < STATE; i++)
        p[i] = p[i] * 0.5f + (float)((step * 31 + i) % 17);
}

static uint64_t state_check(const float *p)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < STATE; i++) {
        uint32_t b;
        memcpy(&b, &p[i], 4);
        h = (h ^ b) * 1099511628211ull;
    }
    return h;
}

/* The joiner that dies: once its join request is in the store (it then waits
 * for the answer), it is killed, before the members can have opened the new
 * ring with it. The thread watches the store through a client of its own. */
static void *die_soon(void *arg)
{
    ring_store_t *store = NULL;
    int present = 0;

    (void)arg;
    if (ring_store_tcp_open("127.0.0.1", store_port, "t-grow", NULL, h_now() + 5, &store) !=
        RING_OK)
        raise(SIGKILL);
    for (int i = 0; i < 5000 && !present; i++) {
        if (store->ops->check(store, "join/0", &present) != RING_OK)
            break;
        if (!present)
            usleep(200);
    }
    raise(SIGKILL);
    return NULL;
}

static int joiner(const gcase_t *c, const ring_config_t *cfg)
{
    static float p[STATE];
    ring_comm_t *comm;
    ring_status_t st;
    int steps = 0;

    usleep(c->kill_rank >= 0 ? 1500 * 1000 : 600 * 1000); /* the ring is up, training */
    h_put_double(V_T_ASK, h_now());
    if (c->joiner_dies) {
        pthread_t t;
        pthread_create(&t, NULL, die_soon, NULL);
    }
    if ((st = ring_comm_open(cfg, &comm)) != RING_OK)
        return h_fail(st, "join");
    h_put_double(V_T_IN, h_now());
    h_put(V_JOINED, (uint64_t)ring_comm_joined(comm));
    /* the members send their state first, then step with it, as the joiner does */
    if ((st = ring_broadcast(comm, p, sizeof(p), 0)) != RING_OK)
        return h_fail(st, "broadcast of the state");
    while (steps < 5) {
        float one = 1.0f;
        if ((st = ring_allreduce(comm, &one, &one, 1, RING_FLOAT32, RING_SUM)) != RING_OK)
            return h_fail(st, "allreduce");
        state_step(p, (int)one * 1000 + steps++);
    }
    h_put(V_SIZE, (uint64_t)ring_comm_size(comm));
    h_put(V_RANK, (uint64_t)ring_comm_rank(comm));
    h_put(V_CHECK, state_check(p));
    ring_comm_close(comm);
    return 0;
}

static int grow_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const gcase_t *c = arg;
    static float p[STATE];
    ring_comm_t *comm, *nc;
    ring_status_t st;
    int grows = 0, after = -1, step;
    double until;

    (void)n;
    if (rank >= c->founders)
        return joiner(c, cfg);
    if ((st = ring_comm_open(cfg, &comm)) != RING_OK)
        return h_fail(st, "open");
    /* with a joiner: until 5 steps after the grow (every member sees it at the same step);
     * without: a fixed number of steps (a member that stopped on its own clock would
     * leave the others in a call) */
    until = h_now() + 15.0;
    for (step = 0; step < (c->expect_join ? MAX_STEPS : QUIET_STEPS) && h_now() < until &&
                   after < 5;
         step++) {
        float one = 1.0f;
        if (step == 20)
            h_ready();
        usleep(STEP_US);
        st = ring_allreduce(comm, &one, &one, 1, RING_FLOAT32, RING_SUM);
        if (st != RING_OK) { /* a founder was lost: shrink, and go on */
            if ((st = ring_comm_shrink(comm, &nc)) != RING_OK)
                return h_fail(st, "shrink");
            ring_comm_close(comm);
            comm = nc;
            continue;
        }
        if (after >= 0) { /* with the joiner: step as it does */
            state_step(p, (int)one * 1000 + after++);
            continue;
        }
        if ((st = ring_comm_grow(comm, &nc)) != RING_OK) { /* a member lost: shrink */
            if ((st = ring_comm_shrink(comm, &nc)) != RING_OK)
                return h_fail(st, "shrink after a grow failed");
            ring_comm_close(comm);
            comm = nc;
            continue;
        }
        if (nc != comm) {
            grows++;
            ring_comm_close(comm);
            comm = nc;
            if ((st = ring_broadcast(comm, p, sizeof(p), 0)) != RING_OK)
                return h_fail(st, "broadcast of the state");
            after = 0;
        }
    }
    h_put(V_SIZE, (uint64_t)ring_comm_size(comm));
    h_put(V_RANK, (uint64_t)ring_comm_rank(comm));
    h_put(V_GROWS, (uint64_t)grows);
    h_put(V_STEPS, (uint64_t)step);
    h_put(V_CHECK, state_check(p));
    ring_comm_close(comm);
    return 0;
}

/* ---- parent ----------------------------------------------------------- */

/* A free port below the kernel's ephemeral range (as the harness picks the ranks'),
 * so no outgoing connection takes it as its source port. */
static int free_port(void)
{
    for (int tries = 0; tries < 200; tries++) {
        struct sockaddr_in a = {.sin_family = AF_INET};
        int fd = socket(AF_INET, SOCK_STREAM, 0), port = 10000 + rand() % 20000, ok;

        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)port);
        ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return port;
    }
    return 29999;
}

static void run_case(const gcase_t *c, int n)
{
    static h_run_t run;
    h_setting_t set[16];
    int k = 0, members = c->founders - (c->kill_rank >= 0), joiner = c->founders;
    int want = c->expect_join ? members + 1 : members, ok_all = 1, same = 1;
    h_action_t kill = {.after_ready = 0, .at = 0.3, .target = c->kill_rank, .sig = SIGKILL};
    char ws[8], buf[200];

    store_port = free_port();
    snprintf(store_url, sizeof(store_url), "tcp://127.0.0.1:%d", store_port);
    snprintf(ws, sizeof(ws), "%d", c->founders);
    set[k++] = (h_setting_t){-1, "rendezvous", store_url};
    set[k++] = (h_setting_t){-1, "elastic", "on"};
    set[k++] = (h_setting_t){-1, "job-id", "t-grow"};
    for (int r = 0; r < c->founders; r++)
        set[k++] = (h_setting_t){r, "world-size", ws};
    for (const h_setting_t *s = c->settings; s != NULL && s->name != NULL; s++)
        set[k++] = *s;
    set[k] = (h_setting_t){0, NULL, NULL};
    h_ring_spec_t rs = {.label = c->label, .n = n, .fn = grow_child, .arg = (void *)c,
                        .settings = set, .timeout = "2s", .connect_timeout = "8s",
                        .actions = c->kill_rank >= 0 ? &kill : NULL,
                        .nactions = c->kill_rank >= 0, .budget = 25, .grace = 3, .run = &run};
    ring_rendezvous_server_t *srv = NULL;
    if (c->launcher_store) {
        ring_config_t scfg;
        ring_config_init(&scfg);
        (void)ring_config_set(&scfg, "rendezvous", store_url, RING_SRC_API);
        (void)ring_config_set(&scfg, "job-id", "t-grow", RING_SRC_API);
        scfg.world_size = c->founders;
        if (ring_rendezvous_server_start(&scfg, &srv) != RING_OK)
            diag("%s: cannot serve the store: %s", c->label, ring_last_error());
        ring_config_free(&scfg);
    }
    h_run_t *done = h_run_ring(&rs);
    ring_rendezvous_server_stop(srv);
    if (done == NULL)
        return;
    for (int r = 0; r < c->founders; r++) {
        if (r == c->kill_rank)
            continue;
        ok_all &= h_outcome(&run.r[r]) == 0 && h_val(&run.r[r], V_SIZE, 0) == (uint64_t)want &&
                  h_val(&run.r[r], V_GROWS, 9) == (uint64_t)(c->expect_join ? 1 : 0);
        same &= h_val(&run.r[r], V_CHECK, 0) == h_val(&run.r[0 == c->kill_rank], V_CHECK, 1);
    }
    if (!ok(ok_all, "%s: every member went on, %d peers in the end", c->label, want))
        h_diag(&run);
    if (c->expect_join) {
        const h_result_t *j = &run.r[joiner];
        ok(h_outcome(j) == 0 && h_val(j, V_JOINED, 0) == 1 &&
               h_val(j, V_RANK, 99) == (uint64_t)members &&
               h_val(j, V_SIZE, 0) == (uint64_t)want,
           "%s: the joiner is rank %d of %d (%s)", c->label, members, want,
           h_describe(j, buf, sizeof(buf)));
        same &= h_val(j, V_CHECK, 0) == h_val(&run.r[0 == c->kill_rank], V_CHECK, 1);
        ok(same, "%s: the joiner received the state: every peer's is bit-identical", c->label);
        diag("%s: the joiner was in %.3f s after it asked", c->label,
             h_val_double(j, V_T_IN, 0) - h_val_double(j, V_T_ASK, 0));
    } else if (c->joiner_dies) {
        ok(run.r[joiner].signo == SIGKILL, "%s: the joiner died (%s)", c->label,
           h_describe(&run.r[joiner], buf, sizeof(buf)));
        ok(same, "%s: the members' state stays bit-identical", c->label);
    } else {
        const h_result_t *j = &run.r[joiner];
        ok(h_outcome(j) != 0 && strstr(j->msg, c->why) != NULL,
           "%s: the joiner is turned away, told why (%s: %s)", c->label,
           h_describe(j, buf, sizeof(buf)), j->msg);
        ok(same, "%s: the members' state stays bit-identical", c->label);
    }
}

static const h_setting_t other_codec[] = {{4, "codec", "fp16"}, {0}};
static const h_setting_t other_secret[] = {{-1, "secret", "the members' secret, 32 bytes.."},
                                           {4, "secret", "another secret, also long enough"},
                                           {0}};
static const h_setting_t same_secret[] = {{-1, "secret", "one secret for all, 32 bytes long"},
                                          {-1, "auth", "frames"}, {0}};

int main(void)
{
    const gcase_t cases[] = {
        {"a fifth peer joins four", 4, -1, 0, 1, NULL, NULL, 0},
        {"rank 0 lost, the launcher serves the store: a replacement joins", 4, 0, 0, 1, NULL,
         NULL, 1},
        {"a replacement joins after rank 2 was lost", 4, 2, 0, 1, NULL, NULL, 0},
        {"with a secret and --auth frames", 4, -1, 0, 1, NULL, same_secret, 0},
        {"a joiner with another codec", 4, -1, 0, 0, "codec (RING_CODEC) differs", other_codec,
         0},
        {"a joiner with another secret", 4, -1, 0, 0, "secret", other_secret, 0},
        {"a joiner that dies before the new ring is up", 4, -1, 1, 0, NULL, NULL, 0},
    };
    int nc = (int)(sizeof(cases) / sizeof(cases[0]));

    signal(SIGPIPE, SIG_IGN);
    srand((unsigned)getpid());
    plan(nc * 3);
    for (int i = 0; i < nc; i++)
        run_case(&cases[i], cases[i].founders + 1);
    return done_testing();
}
