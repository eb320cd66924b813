/*
 * t-auth-splice.c - a man in the middle between two real peers that share a
 * secret (src/core/frame_mac.c, src/core/frame_check.c). Rank 0 reaches rank
 * 1 through a proxy process (its peer list names the proxy's port for rank
 * 1, and rank 1's the proxy's other port for rank 0), two streams, so two
 * proxied connections each way. Each rank's hello names its own peer list;
 * the proxy rewrites that hash, as if it were the network itself.
 * The proxy passes the handshakes and hellos unchanged (they succeed: it is
 * the network, not a peer) and then, per case:
 *   - watch:  passes everything, and looks for rank 0's values (a known float
 *             pattern) in what it carries: found with --auth frames, never
 *             with --auth encrypt;
 *   - splice: moves one data frame from the first connection to the second;
 *   - replay: sends one data frame twice on its own connection;
 *   - flip:   changes one payload byte of a data frame.
 * With --auth frames and --auth encrypt, a spliced, replayed or changed frame
 * is refused by rank 1, both peers fail naming the tag, and none hangs.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm_int.h"
#include "harness.h"
#include "loopback.h"
#include "hash.h"
#include "le.h"
#include "magic.h"
#include "tap.h"

#define SECRET "0123456789abcdef-t-auth-splice"
#define PROXY_RANK 2
#define COUNT (64 * 1024)
#define PATTERN 1234.5f
#define PROXY_S 8.0

typedef enum { C_WATCH, C_SPLICE, C_REPLAY, C_FLIP } pcase_t;
static const char *const case_name[] = {"watch", "splice", "replay", "flip"};

enum { V_STATUS, V_BAD, V_CONNS, V_FRAMES, V_PATTERN, V_DONE };

/* ---- the proxy -------------------------------------------------------------------- */

/* 127.0.0.1:port, retried while nobody listens there (the rank may not yet): <= 5 s. */
static int dial(int port)
{
    for (int i = 0; i < 100; i++) {
        int fd = lo_dial(port);

        if (fd >= 0)
            return fd;
        usleep(50000);
    }
    return -1;
}

/* A framed message (4-byte length, then it) read whole from fd, or -1. */
static long read_msg(int fd, unsigned char *buf, size_t cap)
{
    unsigned char *p = buf;
    size_t want = 4, have = 0;
    int got_len = 0;

    while (have < want) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&pfd, 1, 3000) <= 0)
            return -1;
        n = recv(fd, p + have, want - have, 0);
        if (n <= 0)
            return -1;
        have += (size_t)n;
        if (!got_len && have == 4) {
            uint32_t len = le_get32(buf);

            if (len + 4 > cap)
                return -1;
            want = 4 + len;
            got_len = 1;
        }
    }
    return (long)have;
}

static void send_all(int fd, const unsigned char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

/* How often rank 0's value pattern (4 floats in a row) shows in a message. */
static uint64_t pattern_hits(const unsigned char *m, size_t len)
{
    float f[4] = {PATTERN, PATTERN, PATTERN, PATTERN};
    uint64_t hits = 0;

    for (size_t i = 0; i + sizeof(f) <= len; i += 4)
        hits += memcmp(m + i, f, sizeof(f)) == 0;
    return hits;
}

/* A proxied connection: accepted from rank `from` (on the port it knows for
 * its neighbour), dialed to rank `to`'s real port. */
typedef struct pair {
    int a, b, from, to;
    int eof[2]; /* a side that has closed: its direction is over, the other goes on */
} pair_t;

/* The first pair from rank `from` other than `skip`, or -1. */
static int first_of(const pair_t *pr, int np, int from, int skip)
{
    for (int j = 0; j < np; j++)
        if (pr[j].from == from && j != skip)
            return j;
    return -1;
}

/* A hello from rank `from`, as the one rank `to` expects: each names its own
 * peer list, in which the proxy stands for the other rank. */
static void hello_fix(unsigned char *m, long len, const char *list_of_to)
{
    ring_hello_t h;

    if (len != 4 + RING_HELLO_BYTES || le_get32(m + 4) != RING_HELLO_MAGIC ||
        ring_hello_decode(m + 4, &h) != 0)
        return;
    h.peers_hash = ring_hash_bytes(RING_HASH_INIT, list_of_to, strlen(list_of_to));
    ring_hello_encode(&h, m + 4);
}

/* Listen on ports 2 (rank 0's way to rank 1) and 3 (rank 1's way to rank 0);
 * pass messages, and do the case's one deed to rank 0's 3rd data frame on its
 * first connection to rank 1. */
static int proxy(const char *peers, pcase_t kind)
{
    static unsigned char m[2 * 1024 * 1024];
    char lists[2][128];
    int lfd[2] = {lo_listen(lo_port_of(peers, 2)), lo_listen(lo_port_of(peers, 3))};
    pair_t pr[8];
    uint64_t frames = 0, hits = 0, done = 0;
    int np = 0, data_seen = 0, from0 = 0;
    double until = h_now() + PROXY_S;

    if (lfd[0] < 0 || lfd[1] < 0)
        return h_fail(RING_ERR_IO, "the proxy cannot listen"), 1;
    /* each rank's peer list: the proxy's port for the other rank */
    snprintf(lists[0], sizeof(lists[0]), "127.0.0.1:%d,127.0.0.1:%d", lo_port_of(peers, 0),
             lo_port_of(peers, 2));
    snprintf(lists[1], sizeof(lists[1]), "127.0.0.1:%d,127.0.0.1:%d", lo_port_of(peers, 3),
             lo_port_of(peers, 1));
    while (h_now() < until) {
        struct pollfd pfd[2 + 2 * 8];
        int n = 0;

        pfd[n++] = (struct pollfd){.fd = lfd[0], .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = lfd[1], .events = POLLIN};
        int open_sides = 0;

        for (int i = 0; i < np; i++) {
            /* poll skips a negative fd: a direction that ended is read no more */
            pfd[n++] = (struct pollfd){.fd = pr[i].eof[0] ? -1 : pr[i].a, .events = POLLIN};
            pfd[n++] = (struct pollfd){.fd = pr[i].eof[1] ? -1 : pr[i].b, .events = POLLIN};
            open_sides += !pr[i].eof[0] + !pr[i].eof[1];
        }
        if (np > 0 && open_sides == 0)
            break; /* every rank has closed every connection */
        if (poll(pfd, (nfds_t)n, 100) <= 0)
            continue;
        for (int l = 0; l < 2; l++)
            if ((pfd[l].revents & POLLIN) && np < 8) {
                pair_t *p = &pr[np];

                p->from = l == 0 ? 0 : 1;
                p->to = 1 - p->from;
                p->eof[0] = p->eof[1] = 0;
                p->a = accept4(lfd[l], NULL, NULL, SOCK_CLOEXEC);
                p->b = p->a >= 0 ? dial(lo_port_of(peers, p->to)) : -1;
                if (p->a >= 0 && p->b >= 0)
                    np++;
                from0 += p->from == 0;
            }
        for (int i = 0; i < np; i++) {
            for (int side = 0; side < 2; side++) {
                int src = side == 0 ? pr[i].a : pr[i].b, sender = side == 0 ? pr[i].from : pr[i].to;
                int dst = side == 0 ? pr[i].b : pr[i].a;
                long len;

                if (!pfd[2 + 2 * i + side].revents)
                    continue;
                if ((len = read_msg(src, m, sizeof(m))) <= 0) {
                    /* this direction is over: pass the close on, and keep forwarding the
                     * rest (ending everything here dropped frames still on their way to
                     * rank 0 once ranks 1 and 2 had finished and closed) */
                    pr[i].eof[side] = 1;
                    shutdown(dst, SHUT_WR);
                    continue;
                }
                hello_fix(m, len, lists[1 - sender]);
                if (sender == 0 && len >= 8 && le_get32(m + 4) == RING_FRAME_MAGIC) {
                    frames++;
                    hits += pattern_hits(m + 4, (size_t)len - 4);
                    /* rank 0's 3rd data frame with a payload, on its first connection */
                    if (i == first_of(pr, np, 0, -1) && len > 4 + 64 + 24 + 64 &&
                        ++data_seen == 3) {
                        int other = first_of(pr, np, 0, i);

                        done = kind != C_WATCH;
                        if (kind == C_SPLICE && other >= 0)
                            dst = pr[other].b; /* onto rank 0's other connection */
                        else if (kind == C_SPLICE)
                            done = 0;
                        else if (kind == C_REPLAY)
                            send_all(dst, m, (size_t)len);
                        else if (kind == C_FLIP)
                            m[len - 7] ^= 0x20;
                    }
                }
                send_all(dst, m, (size_t)len);
            }
        }
    }
    for (int i = 0; i < np; i++) {
        close(pr[i].a);
        close(pr[i].b);
    }
    close(lfd[0]);
    close(lfd[1]);
    h_put(V_CONNS, (uint64_t)from0);
    h_put(V_FRAMES, frames);
    h_put(V_PATTERN, hits);
    h_put(V_DONE, done);
    return 0;
}

/* ---- the peers ---------------------------------------------------------------------- */

static int child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    pcase_t kind = *(const pcase_t *)arg;
    ring_config_t mine;
    ring_comm_t *comm = NULL;
    ring_status_t st;
    char peers[256];
    float *x;
    uint64_t bad = 0;

    (void)n;
    if (rank == PROXY_RANK)
        return proxy(cfg->peers, kind);
    /* each reaches the other through the proxy (ports 2 and 3 of the run) */
    snprintf(peers, sizeof(peers), "127.0.0.1:%d,127.0.0.1:%d",
             lo_port_of(cfg->peers, rank == 0 ? 0 : 3),
             lo_port_of(cfg->peers, rank == 0 ? 2 : 1));
    ring_config_init(&mine);
    if (ring_config_copy(&mine, cfg) != RING_OK ||
        ring_config_set(&mine, "peers", peers, RING_SRC_API) != RING_OK ||
        ring_config_set(&mine, "world-size", "2", RING_SRC_API) != RING_OK)
        return h_fail(RING_ERR_INVALID, "config"), 1;
    x = malloc(COUNT * sizeof(float));
    st = x == NULL ? RING_ERR_NO_MEMORY : ring_comm_open(&mine, &comm);
    for (int call = 0; st == RING_OK && call < 4; call++) {
        for (int i = 0; i < COUNT; i++)
            x[i] = rank == 0 ? PATTERN : 1.0f;
        st = ring_allreduce(comm, x, x, COUNT, RING_FLOAT32, RING_SUM);
        for (int i = 0; st == RING_OK && i < COUNT; i++)
            bad += x[i] != PATTERN + 1.0f;
    }
    h_put(V_STATUS, (uint64_t)st);
    h_put(V_BAD, bad);
    if (st != RING_OK)
        h_fail(st, "allreduce");
    if (comm != NULL)
        ring_comm_close(comm);
    ring_config_free(&mine);
    free(x);
    return st == RING_OK && bad == 0 ? 0 : 1;
}

static void run_case(pcase_t kind, const char *auth)
{
    h_setting_t settings[] = {{-1, "secret", SECRET}, {-1, "auth", auth},
                              {-1, "transport", "tcp"}, {-1, "tcp-streams", "2"},
                              {-1, "chunk-size", "16K"}, {0, NULL, NULL}};
    /* rank 3 only lends the proxy its port */
    h_spec_t spec = {.n = 4, .absent = 1u << 3, .fn = child, .arg = &kind, .child_timeout = 25,
                     .connect_timeout = "6s", .timeout = "4s", .settings = settings};
    h_run_t *run = calloc(1, sizeof(*run));
    const h_result_t *p;
    int all = 1;

    if (run == NULL || h_run(&spec, run) != 0) {
        ok(0, "--auth %s, %s: the run ran", auth, case_name[kind]);
        free(run);
        return;
    }
    p = &run->r[PROXY_RANK];
    all &= p->exited && p->code == 0 && h_val(p, V_CONNS, 0) == 2 && h_val(p, V_FRAMES, 0) > 4;
    if (kind == C_WATCH) {
        int encrypt = strcmp(auth, "encrypt") == 0;

        for (int r = 0; r < 2; r++)
            all &= run->r[r].exited && run->r[r].code == 0 && h_val(&run->r[r], V_BAD, 1) == 0;
        /* the watcher sees rank 0's values in the clear, unless they are encrypted */
        all &= encrypt ? h_val(p, V_PATTERN, 1) == 0 : h_val(p, V_PATTERN, 0) > 100;
        if (!ok(all, "--auth %s, a proxy watching rank 0's connections: the ring sums right, and "
                "the proxy %s rank 0's values (%llu hits of its pattern)", auth,
                encrypt ? "never sees" : "sees", (unsigned long long)h_val(p, V_PATTERN, 0)))
            h_diag(run);
        free(run);
        return;
    }
    all &= h_val(p, V_DONE, 0) == 1;
    for (int r = 0; r < 2; r++)
        all &= run->r[r].exited && run->r[r].code != 0 && run->r[r].t_end < 15;
    /* rank 1 names rank 0 and the tag. A splice also leaves a gap where the frame
     * was taken: when rank 1 reads that connection first, the frame after the gap
     * (its tag valid) is refused as out of sequence instead, and rank 0 hears
     * that rank 1 failed. The spliced frame is never taken either way. */
    all &= strstr(run->r[1].msg, "rank 0") != NULL &&
           (strstr(run->r[1].msg, "tag") != NULL ||
            (kind == C_SPLICE && strstr(run->r[1].msg, "expected") != NULL));
    all &= strstr(run->r[0].msg, "tag") != NULL ||
           (kind == C_SPLICE && strstr(run->r[0].msg, "rank 1 failed") != NULL);
    if (!ok(all, "--auth %s, a proxy that %ss one of rank 0's data frames: refused by rank 1, "
            "which names the tag (a splice: or the gap it leaves) and rank 0; both fail, no "
            "hang", auth,
            kind == C_SPLICE ? "splice" : kind == C_REPLAY ? "replay" : "flip"))
        h_diag(run);
    else
        diag("--auth %s, %s: rank 1: %s", auth, case_name[kind], run->r[1].msg);
    free(run);
}

int main(void)
{
    static const char *const auths[] = {"frames", "encrypt"};

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int a = 0; a < 2; a++)
        for (pcase_t k = C_WATCH; k <= C_FLIP; k++)
            run_case(k, auths[a]);
    return done_testing();
}
