/*
 * t-auth-relay.c - a stranger without the secret attacks the handshake of
 * real peers the way issue 43 found it could (src/bootstrap/auth*.c,
 * src/core/connect.c, src/bootstrap/store_server.c). The stranger is a
 * process on the port of an absent rank 1; the honest peers (rank 0, and
 * rank 2 when N=3) share a secret, run with the default log level, and call
 * rank 1 as their ring says. It works at the message level (tcp framing:
 * a 4-byte length, then the message) and tries, for every connection rank 0
 * opens to it, one of:
 *   - relay:   hand rank 0's challenge to rank 0's own listener (and at N=3
 *              to rank 2's), pass every answer back and forth unchanged;
 *   - rewrite: the same, but rewrite the ranks each challenge names so every
 *              check on names passes; only the proofs can stop it;
 *   - reflect: send rank 0's challenge, then its proof, back to it;
 *   - store:   hand rank 0's ring challenge to the job's tcp store, and the
 *              store's answer to a challenge of its own back to rank 0.
 * For N=2 and N=3, with --auth connect and frames (and encrypt: the relays);
 * in the Soft-RoCE guest also over the verbs transport's bootstrap
 * (T_AUTH_RELAY_TRANSPORT=verbs, tests/lab/verbs-guest.sh), where no queue-pair
 * record may reach the stranger either.
 * Every case:
 *   - the stranger never receives a hello, a frame, or an acceptor's proof
 *     from an honest peer (no byte of the job's data or settings);
 *   - every honest peer fails at its start-up timeout, its error naming
 *     authentication, and its stderr (default log level) names the refused
 *     connection in a security notice.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "harness.h"
#include "loopback.h"
#include "le.h"
#include "magic.h"
#include "store.h"
#include "tap.h"
#include "verbs_record.h"

#define SECRET "0123456789abcdef-t-auth-relay"
#define JOB "t-auth-relay"
#define STRANGER_RANK 1
#define ATTACK_S 4.5

typedef enum { A_RELAY, A_REWRITE, A_REFLECT, A_STORE } attack_t;
static const char *const attack_name[] = {"relay", "rewrite", "reflect", "store"};

typedef struct rcase {
    attack_t attack;
    const char *auth;
    int store_port;                 /* A_STORE: the job's tcp store (a process of its own) */
} rcase_t;

/* What the stranger saw, reported by its rank (values) */
enum { V_STATUS, V_ACCEPTED, V_SENT_ON, V_CHALLENGES_BACK, V_PROOFS_BACK, V_HELLOS, V_FRAMES,
       V_RECORDS, V_OTHER, V_NOTICE, V_NOTICE_LINES };

/* ---- the stranger's sockets ------------------------------------------------------ */

/* Read exactly len bytes within ms: 0, or -1 (closed, error, time). */
static int read_all(int fd, unsigned char *p, size_t len, int ms)
{
    double until = h_now() + ms / 1000.0;

    while (len > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;
        int left = (int)((until - h_now()) * 1000);

        if (left <= 0 || poll(&pfd, 1, left) <= 0)
            return -1;
        n = recv(fd, p, len, 0);
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* One framed message (tcp transport: 4-byte length, then it), at most cap
 * bytes kept: its length, or -1. With framed 0 (the store speaks raw bytes),
 * exactly cap bytes. */
static long read_msg(int fd, unsigned char *buf, size_t cap, int framed, int ms)
{
    unsigned char len4[4];
    uint32_t len;

    if (!framed)
        return read_all(fd, buf, cap, ms) == 0 ? (long)cap : -1;
    if (read_all(fd, len4, 4, ms) != 0)
        return -1;
    len = le_get32(len4);
    if (len > cap)
        return -1;
    return read_all(fd, buf, len, ms) == 0 ? (long)len : -1;
}

static void send_msg(int fd, const unsigned char *buf, size_t len, int framed)
{
    unsigned char len4[4];

    if (framed) {
        le_put32(len4, (uint32_t)len);
        (void)!send(fd, len4, 4, MSG_NOSIGNAL);
    }
    (void)!send(fd, buf, len, MSG_NOSIGNAL);
}

/* What an honest peer sent the stranger: a leak is anything past a challenge
 * or a connector's proof. */
static uint64_t seen[V_NOTICE];

static void classify(const unsigned char *m, long len, int from_acceptor)
{
    uint32_t magic = len >= 4 ? le_get32(m) : 0;

    if (len <= 0)
        return;
    if (magic == RING_AUTH_MAGIC)
        seen[V_CHALLENGES_BACK] += from_acceptor;
    else if (magic == RING_AUTH_PROOF_MAGIC)
        seen[V_PROOFS_BACK] += from_acceptor;
    else if (magic == RING_HELLO_MAGIC)
        seen[V_HELLOS]++;
    else if (magic == RING_FRAME_MAGIC)
        seen[V_FRAMES]++;
    else if (magic == VB_RECORD_MAGIC) /* a verbs queue-pair record */
        seen[V_RECORDS]++;
    else
        seen[V_OTHER]++;
}

/* Pass messages between x (rank 0 calling "rank 1") and y (an honest listener)
 * until either closes or 1.5 s pass; rewrite: make every name fit. */
static void relay_loop(int x, int y, int framed_y, int rewrite, int victim_rank)
{
    double until = h_now() + 1.5;

    while (h_now() < until) {
        struct pollfd pfd[2] = {{.fd = x, .events = POLLIN}, {.fd = y, .events = POLLIN}};
        unsigned char m[8192];
        long len;

        if (poll(pfd, 2, 100) <= 0)
            continue;
        if (pfd[1].revents) {
            len = read_msg(y, m, framed_y ? sizeof(m) : RING_AUTH_CHALLENGE_BYTES, framed_y, 500);
            if (len <= 0) {
                /* the store speaks raw: a proof after the challenge */
                if (!framed_y && (len = read_msg(y, m, RING_AUTH_PROOF_BYTES, 0, 200)) > 0)
                    classify(m, len, 1);
                return;
            }
            classify(m, len, 1);
            if (rewrite && len == RING_AUTH_CHALLENGE_BYTES && le_get32(m) == RING_AUTH_MAGIC) {
                le_put32(m + 16, STRANGER_RANK); /* "I am rank 1" */
                le_put32(m + 20, 0);             /* "answering rank 0" */
            }
            send_msg(x, m, (size_t)len, 1);
        }
        if (pfd[0].revents) {
            len = read_msg(x, m, sizeof(m), 1, 500);
            if (len <= 0)
                return;
            if (rewrite && len == RING_AUTH_CHALLENGE_BYTES && le_get32(m) == RING_AUTH_MAGIC)
                le_put32(m + 20, (uint32_t)victim_rank); /* "meant for you" */
            send_msg(y, m, (size_t)len, framed_y);
        }
    }
}

static int stranger(int n, const ring_config_t *cfg, const rcase_t *c)
{
    int lfd = lo_listen(lo_port_of(cfg->peers, STRANGER_RANK)), turn = 0;
    double until = h_now() + ATTACK_S;

    if (lfd < 0)
        return h_fail(RING_ERR_IO, "the stranger cannot listen on rank 1's port"), 1;
    while (h_now() < until) {
        struct pollfd pfd = {.fd = lfd, .events = POLLIN};
        unsigned char ch[512];
        long len;
        int x, y, victim;

        if (poll(&pfd, 1, 100) <= 0)
            continue;
        x = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (x < 0)
            continue;
        seen[V_ACCEPTED]++;
        len = read_msg(x, ch, sizeof(ch), 1, 2000);
        if (len != RING_AUTH_CHALLENGE_BYTES) {
            close(x);
            continue;
        }
        if (c->attack == A_REFLECT) {
            unsigned char back[512];
            long blen;

            send_msg(x, ch, (size_t)len, 1); /* its own challenge ... */
            blen = read_msg(x, back, sizeof(back), 1, 1000);
            classify(back, blen, 0);
            if (blen > 0 && le_get32(back) == RING_AUTH_PROOF_MAGIC) {
                send_msg(x, back, (size_t)blen, 1); /* ... and its own proof */
                classify(back, read_msg(x, back, sizeof(back), 1, 1000), 1);
            }
            close(x);
            continue;
        }
        /* the victim: rank 0's own listener, or at N=3 every other turn rank 2's */
        victim = c->attack == A_STORE ? -1 : (n == 3 && turn % 2 == 1) ? 2 : 0;
        turn++;
        y = lo_dial(victim < 0 ? c->store_port : lo_port_of(cfg->peers, victim));
        if (y < 0) {
            close(x);
            continue;
        }
        seen[V_SENT_ON]++;
        if (c->attack == A_STORE) {
            unsigned char own[RING_AUTH_CHALLENGE_BYTES], ans[RING_AUTH_CHALLENGE_BYTES];
            ring_auth_key_t none = {0};
            ring_auth_party_t me;
            ring_auth_hs_t hs;
            int z;

            /* rank 0's ring challenge to the store: refused there */
            send_msg(y, ch, (size_t)len, 0);
            classify(ans, read_msg(y, ans, sizeof(ans), 0, 1000), 1);
            close(y);
            /* the store's answer to the stranger's own store challenge, to rank 0 */
            ring_auth_party_init(&me, &none, cfg->job_id, RING_AUTH_FOR_STORE,
                                 RING_AUTH_NO_RANK, RING_AUTH_NO_RANK);
            z = lo_dial(c->store_port);
            if (z >= 0 && ring_auth_hs_start(&hs, &me, 0, own) == 0) {
                send_msg(z, own, sizeof(own), 0);
                if (read_msg(z, ans, sizeof(ans), 0, 1000) == (long)sizeof(ans)) {
                    send_msg(x, ans, sizeof(ans), 1);
                    /* a proof from rank 0 here would be a leak: it must refuse */
                    classify(ans, read_msg(x, ans, sizeof(ans), 1, 1000), 1);
                }
            }
            if (z >= 0)
                close(z);
            close(x);
            continue;
        }
        if (c->attack == A_REWRITE && le_get32(ch) == RING_AUTH_MAGIC)
            le_put32(ch + 20, (uint32_t)victim);
        send_msg(y, ch, (size_t)len, 1);
        relay_loop(x, y, 1, c->attack == A_REWRITE, victim);
        close(x);
        close(y);
    }
    close(lfd);
    for (int v = V_ACCEPTED; v < V_NOTICE; v++)
        h_put(v, seen[v]);
    return 0;
}

/* ---- the honest peers -------------------------------------------------------------- */

static int peer(int rank, const ring_config_t *cfg, const rcase_t *c)
{
    char path[64], text[16384];
    int fd, saved = dup(2), lines = 0;
    ring_comm_t *comm = NULL;
    ring_status_t st;
    ssize_t got;
    FILE *f;

    /* stderr to a file, to read what this peer said at the default level */
    snprintf(path, sizeof(path), "/tmp/t-auth-relay-%d-%d.err", (int)getpid(), rank);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || saved < 0)
        return h_fail(RING_ERR_IO, "stderr to a file"), 1;
    dup2(fd, 2);
    st = ring_comm_open(cfg, &comm);
    if (st == RING_OK)
        ring_comm_close(comm);
    h_put(V_STATUS, (uint64_t)st);
    if (st != RING_OK)
        h_fail(st, "ring_comm_open");
    fflush(stderr);
    dup2(saved, 2);
    got = pread(fd, text, sizeof(text) - 1, 0);
    text[got > 0 ? got : 0] = '\0';
    close(fd);
    unlink(path);
    f = fmemopen(text, strlen(text), "r");
    for (char line[2048]; f != NULL && fgets(line, sizeof(line), f) != NULL;)
        lines += strstr(line, "refused") != NULL;
    if (f != NULL)
        fclose(f);
    /* rank 0's listener names the relayed challenge; rank 0's connector the
     * answer that failed its checks (rewrite, reflect, store) */
    h_put(V_NOTICE, strstr(text, " warn: ") != NULL && strstr(text, "refused") != NULL);
    h_put(V_NOTICE_LINES, (uint64_t)lines);
    (void)rank;
    return st == RING_OK ? 0 : 1;
}

static int child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const rcase_t *c = arg;

    return rank == STRANGER_RANK ? stranger(n, cfg, c) : peer(rank, cfg, c);
}

/* The job's tcp store with the job's secret, served by a process of its own (its
 * security notices must not count against the peers', forked from this one):
 * its port, or -1. */
static int store_start(int n, pid_t *pid)
{
    int fds[2], port = -1;

    if (pipe(fds) != 0)
        return -1;
    *pid = fork();
    if (*pid == 0) {
        ring_store_server_t *srv = NULL;
        ring_auth_key_t key;

        close(fds[0]);
        for (int i = 0, base = 29000 + (int)(getpid() % 2000); i < 50 && srv == NULL; i++)
            if (ring_auth_key_from(SECRET, strlen(SECRET), &key) == RING_OK &&
                ring_store_server_start("127.0.0.1", base + 7 * i, JOB, n, &key, &srv) ==
                    RING_OK)
                port = base + 7 * i;
        (void)!write(fds[1], &port, sizeof(port));
        for (int i = 0; i < 300; i++) /* <= 30 s; the parent kills it sooner */
            usleep(100000);
        _exit(0);
    }
    close(fds[1]);
    if (*pid < 0 || read(fds[0], &port, sizeof(port)) != (ssize_t)sizeof(port))
        port = -1;
    close(fds[0]);
    return port;
}

static void store_stop(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* tcp, or verbs where the suite runs in the Soft-RoCE guest (tests/lab/verbs-guest.sh:
 * T_AUTH_RELAY_TRANSPORT=verbs), whose bootstrap connections are attacked */
static const char *transport = "tcp";

static void run_case(int n, attack_t attack, const char *auth)
{
    h_setting_t settings[] = {{-1, "secret", SECRET}, {-1, "auth", auth},
                              {-1, "job-id", JOB}, {-1, "transport", transport},
                              {0, NULL, NULL}};
    rcase_t c = {.attack = attack, .auth = auth};
    h_spec_t spec = {.n = n, .fn = child, .arg = &c, .child_timeout = 25,
                     .connect_timeout = "3s", .settings = settings};
    pid_t store = -1;
    h_run_t *run = calloc(1, sizeof(*run));
    const h_result_t *s;
    int all = 1, notices = 1;
    char label[200];

    snprintf(label, sizeof(label), "N=%d %s --auth %s, a stranger on rank 1's port: %s", n,
             transport, auth, attack_name[attack]);
    if (attack == A_STORE && (c.store_port = store_start(n, &store)) <= 0) {
        ok(0, "%s: the store started", label);
        free(run);
        return;
    }
    if (run == NULL || h_run(&spec, run) != 0) {
        ok(0, "%s: the run ran", label);
        store_stop(store);
        free(run);
        return;
    }
    store_stop(store);
    s = &run->r[STRANGER_RANK];
    all &= s->exited && s->code == 0 && h_val(s, V_ACCEPTED, 0) >= 1;
    /* nothing past a challenge or a connector's proof ever reached it */
    all &= h_val(s, V_HELLOS, 1) == 0 && h_val(s, V_FRAMES, 1) == 0 &&
           h_val(s, V_RECORDS, 1) == 0 && h_val(s, V_PROOFS_BACK, 1) == 0;
    /* a relayed challenge, unchanged, is not even answered */
    if (attack == A_RELAY || attack == A_STORE)
        all &= h_val(s, V_CHALLENGES_BACK, 1) == 0;
    for (int r = 0; r < n; r++) {
        const h_result_t *p = &run->r[r];

        if (r == STRANGER_RANK)
            continue;
        /* rank 0 is attacked every time; rank 2 (N=3) by the relays, every other
         * turn; otherwise it waits for rank 1, which never calls, until its timeout */
        all &= p->exited && p->code == 1 && p->t_end < 15 &&
               (strstr(p->msg, "authentication") != NULL ||
                (r == 2 && attack != A_RELAY && attack != A_REWRITE));
        if (r == 0)
            notices &= h_val(p, V_NOTICE, 0) == 1 && h_val(p, V_NOTICE_LINES, 0) >= 1;
    }
    if (!ok(all, "%s: refused; the stranger got no hello, frame or acceptor proof "
            "(accepted %llu, relayed %llu, answers %llu, proofs %llu, hellos %llu, frames %llu)",
            label, (unsigned long long)h_val(s, V_ACCEPTED, 0),
            (unsigned long long)h_val(s, V_SENT_ON, 0),
            (unsigned long long)h_val(s, V_CHALLENGES_BACK, 0),
            (unsigned long long)h_val(s, V_PROOFS_BACK, 0),
            (unsigned long long)h_val(s, V_HELLOS, 0), (unsigned long long)h_val(s, V_FRAMES, 0)))
        h_diag(run);
    if (!ok(notices, "%s: rank 0's stderr at the default level names the refused connection "
            "(%llu line(s))", label, (unsigned long long)h_val(&run->r[0], V_NOTICE_LINES, 0)))
        h_diag(run);
    diag("%s: rank 0: %s", label, run->r[0].msg);
    free(run);
}

int main(void)
{
    static const char *const auths[] = {"connect", "frames", "encrypt"};

    setvbuf(stdout, NULL, _IOLBF, 0);
    unsetenv("RING_LOG_LEVEL"); /* the default level, as users run it */
    unsetenv("RING_DEBUG");
    if (getenv("T_AUTH_RELAY_TRANSPORT") != NULL && strcmp(getenv("T_AUTH_RELAY_TRANSPORT"),
                                                           "verbs") == 0) {
        /* the verbs bootstrap: the stranger sees only its tcp connections, and
         * no queue-pair record may reach it either */
        transport = "verbs";
        for (int a = 0; a < 2; a++)
            for (int n = 2; n <= 3; n++)
                for (attack_t k = A_RELAY; k <= A_REFLECT; k++)
                    run_case(n, k, auths[a]);
        return done_testing();
    }
    /* the handshake is the same whatever --auth says: encrypt gets the relays only */
    for (int a = 0; a < 3; a++)
        for (int n = 2; n <= 3; n++)
            for (attack_t k = A_RELAY; k <= (a == 2 ? A_REWRITE : A_STORE); k++)
                run_case(n, k, auths[a]);
    return done_testing();
}
