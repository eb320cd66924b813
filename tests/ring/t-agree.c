/*
 * t-agree.c - the survivors' agreement itself (src/elastic/agree.c), across
 * real processes on 127.0.0.1, each started with the view of the failure a
 * test gives it: views that differ (each knows of another lost rank), a rank
 * nobody knows is lost (found by its silence), a live rank that one survivor
 * counts lost (it is out, and told so), and attackers without the job's
 * secret: one that votes (a hello claiming a member's rank and counting
 * everyone else lost), one that sends garbage, one that holds many idle
 * connections. Every member must decide the same, and the right, set.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agree.h"
#include "clock.h"
#include "hash.h"
#include "harness.h"
#include "tap.h"

enum { V_STATUS, V_MEMBERS, V_N, V_ROUNDS, V_SECONDS };

#define SECRET "t-agree's job secret, long enough."

typedef struct acase {
    const char *label;
    int n;
    unsigned absent;          /* dead from the start */
    unsigned lost[8];         /* each rank's view: the ranks it knows are lost */
    unsigned want;            /* the decision */
    unsigned excluded;        /* live ranks the others count lost: told to leave */
    int attacker;             /* rank n-1 attacks instead: 1 votes, 2 garbage, 3 idle flood */
    int secret;
    int late;                 /* this rank starts agreeing 1 s late (-1: none): the others
                               * wait for it, and the attacker has the time to attack */
} acase_t;

/* ---- children --------------------------------------------------------- */

static int agree_child(int rank, int n, const ring_config_t *cfg, void *arg);

/* A stranger without the secret: it calls every member's port while they agree. */
static int attacker(const acase_t *c, const ring_peer_addr_t *peers)
{
    int fds[64], nfd = 0;
    double until = ring_now() + 2.5;

    while (ring_now() < until) {
        for (int r = 0; r < c->n - 1; r++) {
            struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(peers[r].port)};
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
            if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
                if (fd >= 0)
                    close(fd);
                continue;
            }
            if (c->attacker == 1) { /* "I am rank r+1, and everyone else is lost" */
                ring_agree_msg_t m;
                unsigned char buf[4 + RING_AGREE_MSG_MAX];
                size_t len = ring_agree_msg_bytes((uint32_t)(c->n - 1)); /* the members' ring */
                memset(&m, 0, sizeof(m));
                m.type = RING_AGREE_HELLO;
                m.job_hash = ring_hash_bytes(RING_HASH_INIT, "t-agree", 7);
                m.generation = 1;
                m.world = (uint32_t)(c->n - 1);
                m.origin = (uint32_t)((r + c->n - 2) % (c->n - 1)); /* its left neighbour */
                for (int k = 0; k < c->n - 1; k++)
                    if (k != (int)m.origin)
                        ring_agree_set_add(m.set, k);
                ring_agree_encode(&m, buf + 4);
                buf[0] = (unsigned char)len; /* the tcp transport's length prefix */
                buf[1] = (unsigned char)(len >> 8);
                buf[2] = buf[3] = 0;
                (void)!write(fd, buf, 4 + len);
            } else if (c->attacker == 2) {
                unsigned char junk[300];
                for (size_t i = 0; i < sizeof(junk); i++)
                    junk[i] = (unsigned char)(rand() & 0xff);
                (void)!write(fd, junk, sizeof(junk));
            }
            if (c->attacker == 3 && nfd < 64) {
                fds[nfd++] = fd; /* say nothing, hold it */
                continue;
            }
            usleep(20000);
            close(fd);
        }
        usleep(10000);
    }
    while (nfd > 0)
        close(fds[--nfd]);
    return 0;
}

static int agree_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const acase_t *c = arg;
    ring_peer_addr_t *peers = NULL;
    unsigned char lost[RING_AGREE_SET_BYTES] = {0};
    int order[16];
    ring_auth_key_t key;
    ring_agree_params_t p;
    ring_agree_result_t res;
    ring_status_t st;
    uint64_t members = 0;

    if (ring_peers_parse(cfg->peers, n, 0, 0, &peers) != RING_OK)
        return h_fail(RING_ERR_INVALID, "peers");
    if (c->attacker && rank == n - 1)
        return attacker(c, peers);
    memset(&key, 0, sizeof(key));
    if (c->secret && ring_auth_key_from(SECRET, strlen(SECRET), &key) != RING_OK)
        return h_fail(RING_ERR_INVALID, "key");
    for (int r = 0; r < n; r++) {
        order[r] = r;
        if (c->lost[rank] >> r & 1)
            ring_agree_set_add(lost, r);
    }
    memset(&p, 0, sizeof(p));
    /* the attacker is no member: the ring it attacks has n - 1 */
    p.world = c->attacker ? n - 1 : n;
    p.me = rank;
    p.order = order;
    p.peers = peers;
    p.bind = "127.0.0.1";
    p.job_id = "t-agree";
    p.key = &key;
    p.generation = 1;
    p.answer_timeout_s = 1.5;
    p.deadline = ring_now() + 12;
    p.lost = lost;
    memset(&res, 0, sizeof(res));
    if (rank == c->late)
        usleep(1000 * 1000);
    st = ring_agree(&p, &res);
    h_put(V_STATUS, (uint64_t)st);
    if (st != RING_OK) {
        h_fail(st, "agree");
        free(peers);
        return 0; /* the parent judges */
    }
    for (int r = 0; r < p.world; r++)
        if (ring_agree_set_has(res.members, r))
            members |= 1ull << r;
    h_put(V_MEMBERS, members);
    h_put(V_N, (uint64_t)res.nmembers);
    h_put(V_ROUNDS, (uint64_t)res.rounds);
    h_put_double(V_SECONDS, res.seconds);
    free(peers);
    return 0;
}

/* ---- parent ----------------------------------------------------------- */

static void run_case(const acase_t *c)
{
    static h_run_t run;
    h_setting_t set[] = {{-1, "job-id", "t-agree"}, {0}};
    int same = 1, excluded_told = 1, members = c->attacker ? c->n - 1 : c->n;
    double slowest = 0;
    h_ring_spec_t rs = {.label = c->label, .n = c->n, .fn = agree_child, .arg = (void *)c,
                        .settings = set, .absent = c->absent, .budget = 20, .grace = 3,
                        .run = &run};

    if (h_run_ring(&rs) == NULL)
        return;
    for (int r = 0; r < members; r++) {
        const h_result_t *res = &run.r[r];
        if (c->absent >> r & 1)
            continue;
        if (c->excluded >> r & 1) {
            excluded_told &= h_val(res, V_STATUS, 0) == RING_ERR_REMOTE &&
                             strstr(res->msg, "lost") != NULL;
            continue;
        }
        same &= h_outcome(res) == 0 && h_val(res, V_STATUS, 99) == RING_OK &&
                h_val(res, V_MEMBERS, 0) == c->want;
        if (h_val_double(res, V_SECONDS, 0) > slowest)
            slowest = h_val_double(res, V_SECONDS, 0);
    }
    if (!ok(same, "%s: every member decided the same members (mask 0x%x)", c->label, c->want))
        h_diag(&run);
    if (c->excluded)
        if (!ok(excluded_told, "%s: the rank counted lost is told it is out", c->label))
            h_diag(&run);
    diag("%s: decided in %.3f s at most", c->label, slowest);
}

int main(void)
{
    static const acase_t cases[] = {
        /* ranks 2 and 4 dead; 0 knows of 2, 3 of 4, the others of neither */
        {"views differ", 6, 0x14, {0x4, 0, 0, 0x10, 0, 0}, 0x2b, 0, 0, 0, -1},
        {"views differ, with the secret", 6, 0x14, {0x4, 0, 0, 0x10, 0, 0}, 0x2b, 0, 0, 1, -1},
        {"views differ, one member 1 s late", 6, 0x14, {0x4, 0, 0, 0x10, 0, 0}, 0x2b, 0, 0, 1,
         5},
        /* rank 2 dead and nobody knows: found by its silence (the answer timeout) */
        {"a lost rank nobody knows of", 4, 0x4, {0, 0, 0, 0}, 0xb, 0, 0, 0, -1},
        /* rank 0 counts rank 2 lost, wrongly: 2 is out all the same, and told */
        {"a live rank one member counts lost", 4, 0, {0x4, 0, 0, 0}, 0xb, 0x4, 0, 0, -1},
        /* rank 4 of 5 dead, known to all; a stranger (rank 5 of the harness) attacks */
        {"a stranger votes without the secret", 6, 0x10, {0x10, 0x10, 0x10, 0x10, 0, 0}, 0xf, 0,
         1, 1, 3},
        {"a stranger sends garbage", 6, 0x10, {0x10, 0x10, 0x10, 0x10, 0, 0}, 0xf, 0, 2, 1, 3},
        {"a stranger holds many idle connections", 6, 0x10, {0x10, 0x10, 0x10, 0x10, 0, 0}, 0xf,
         0, 3, 1, 3},
    };
    int nc = (int)(sizeof(cases) / sizeof(cases[0])), nplan = 0;

    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < nc; i++)
        nplan += 1 + (cases[i].excluded != 0);
    plan(nplan);
    for (int i = 0; i < nc; i++)
        run_case(&cases[i]);
    return done_testing();
}
