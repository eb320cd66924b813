/*
 * t-fault.c - failures across real processes on 127.0.0.1: settings and
 * argument mismatches, a peer killed or stopped mid-allreduce, a peer that
 * never starts, strangers on the port, a peer that leaves. Every case
 * checks the exit code (the ring status each rank got), the message
 * (which peer, its address, the phase, the cause) and how long it took:
 * a failure must never hang the others. What each rank does is
 * fault_rank.c.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <regex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fault_rank.h"
#include "harness.h"
#include "tap.h"

/* ---- parent helpers --------------------------------------------------- */

static h_run_t the_run;

static const h_run_t *run_it(int n, const fcase_t *c, const h_setting_t *settings,
                             const char *timeout, const char *connect_timeout, unsigned absent,
                             const h_action_t *actions, int nactions, h_tick_fn tick, void *targ,
                             double budget)
{
    h_ring_spec_t rs = {.n = n, .fn = f_child, .arg = (void *)c, .settings = settings,
                        .timeout = timeout, .connect_timeout = connect_timeout,
                        .absent = absent, .actions = actions, .nactions = nactions,
                        .tick = tick, .tick_arg = targ, .budget = budget, .grace = 2,
                        .run = &the_run};

    return h_run_ring(&rs);
}

static int text_matches(const char *text, const char *pattern)
{
    regex_t re;
    int m;

    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
        return 0;
    m = regexec(&re, text, 0, NULL, 0) == 0;
    regfree(&re);
    return m;
}

static int like_re(const char *text, const char *pattern, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int like_re(const char *text, const char *pattern, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = tap_vok(text_matches(text, pattern), fmt, ap);
    va_end(ap);
    if (!r)
        diag("    '%s'\n#   does not match /%s/", text, pattern);
    return r;
}

static const char *status_name(int code)
{
    return code >= 0 && code < RING_STATUS_COUNT ? ring_status_str((ring_status_t)code) : "?";
}

/* is_int on a rank's exit code with the status names in the text */
static int rank_status_is(const h_run_t *run, int rank, int want, const char *label)
{
    char d[96];
    int got = h_outcome(&run->r[rank]);

    if (!ok(got == want, "%s: rank %d fails with %s (%s)", label, rank, status_name(want),
            h_describe(&run->r[rank], d, sizeof(d)))) {
        h_diag(run);
        return 0;
    }
    return 1;
}

/* ---- cases ------------------------------------------------------------ */

static void handshake_mismatch(const char *label, const h_setting_t *settings, const char *field)
{
    static const fcase_t c = {.kind = K_OPEN, .count = 1024};
    const h_run_t *run = run_it(2, &c, settings, "10s", "10s", 0, NULL, 0, NULL, NULL, 15);

    for (int r = 0; r < 2; r++) {
        char addr[80];
        int other = 1 - r;

        rank_status_is(run, r, RING_ERR_MISMATCH, label);
        ok(run->r[r].t_end < 3.0, "%s: rank %d fails in %.2f s, well under the 10 s connect "
           "timeout", label, r, run->r[r].t_end);
        like(run->r[r].msg, field, "%s: rank %d's message names the field '%s'", label, r, field);
        like_re(run->r[r].msg, "rank 0.*rank 1|rank 1.*rank 0",
                "%s: rank %d's message names both ranks", label, r);
        h_addr(run, other, addr, sizeof(addr));
        if (!like(run->r[r].msg, addr, "%s: rank %d's message names rank %d's address %s", label,
                  r, other, addr))
            diag("regression (fixed bug): a mismatch seen on an accepted connection names the peer's ephemeral "
                 "source port (ep_peer), not its RING_PEERS address (src/connect.c, "
                 "connect_in_progress -> ring_hello_check(..., ep_peer(hc->ep)))");
    }
}

/* N peers, rank `bad` with another codec: its neighbours name the field, and the
 * peers further round the ring, which never met it, fail too, within seconds (not
 * at their timeout), naming the two ranks and the setting. */
static void mismatch_far(int n, int bad)
{
    static const fcase_t c = {.kind = K_OPEN, .count = 16};
    h_setting_t settings[] = {{bad, "codec", "fp16"}, {0, NULL, NULL}};
    const h_run_t *run = run_it(n, &c, settings, "10s", "10s", 0, NULL, 0, NULL, NULL, 20);
    char label[64], bad_re[64];

    snprintf(label, sizeof(label), "codec mismatch N=%d, rank %d", n, bad);
    snprintf(bad_re, sizeof(bad_re), "rank %d[^0-9]", bad);
    for (int r = 0; r < n; r++) {
        int near = r == bad || r == (bad + 1) % n || r == (bad + n - 1) % n;

        if (!rank_status_is(run, r, RING_ERR_MISMATCH, label))
            continue;
        ok(run->r[r].t_end < 8.0, "%s: rank %d fails in %.2f s, under the 10 s timeouts",
           label, r, run->r[r].t_end);
        like(run->r[r].msg, "codec (RING_CODEC)", "%s: rank %d's message names the codec", label,
             r);
        if (!near) {
            like_re(run->r[r].msg, bad_re, "%s: rank %d (not a neighbour) names rank %d", label,
                    r, bad);
            like(run->r[r].msg, "have different settings", "%s: rank %d says two peers' "
                 "settings differ", label, r);
        }
    }
}

/* A mismatch message of a rank that was in round 0 names that round and two different ranks. */
static void mismatch_phase_and_ranks(const h_run_t *run, int r, const char *label)
{
    if (!like_re(run->r[r].msg, ": round 0[,:]", "%s: rank %d's message names the phase, round 0",
                 label, r))
        diag("regression (fixed bug): an ABORT that is already waiting when ring_allreduce_start runs is read "
             "before the request has started (ring_comm_progress: check_back_channel before "
             "request_begin), so fail.c's fail_active_request() gives NULL and the phase "
             "says 'between allreduces'");
    {
        /* "differ between rank A and rank B" where it was seen, "differ: rank A called
         * ...; rank B (addr) called ..." where it was relayed */
        const char *p = strstr(run->r[r].msg, "differ between rank ");
        const char *q = strstr(run->r[r].msg, "differ: rank ");
        const char *q2 = q != NULL ? strstr(q, "; rank ") : NULL;
        unsigned a = 0, b = 0;
        int two = p != NULL ? sscanf(p, "differ between rank %u and rank %u", &a, &b) == 2
                            : q != NULL && q2 != NULL && sscanf(q, "differ: rank %u", &a) == 1 &&
                                  sscanf(q2, "; rank %u", &b) == 1;

        if (!ok(two && a != b, "%s: rank %d's message blames two different ranks (%u, %u)",
                label, r, a, b))
            diag("regression (fixed bug): a relayed ABORT is re-sent by ring_comm_send_notice (src/fail.c) with "
                 "origin_rank = the relaying rank and its own round/count, so the next rank "
                 "reads 'differ between ranks %u and %u' and the relayer's count", a, b);
    }
}

static void size_mismatch(int n, int odd_rank, double late)
{
    fcase_t c = {.kind = K_SIZE, .count = 1024, .odd_rank = odd_rank, .odd_count = 1000,
                 .delay = late};
    const h_run_t *run = run_it(n, &c, NULL, "10s", "10s", 0, NULL, 0, NULL, NULL, 15);
    char label[96];

    snprintf(label, sizeof(label), "size mismatch N=%d (rank %d: 1000%s, others 1024)", n,
             odd_rank, late > 0 ? " and late" : "");
    for (int r = 0; r < n; r++) {
        if (!rank_status_is(run, r, RING_ERR_MISMATCH, label) &&
            h_outcome(&run->r[r]) == RING_ERR_REMOTE)
            diag("regression (fixed bug): the odd rank got a frame larger than it expected; the TCP transport "
                 "fails the whole endpoint on that (transport/tp_queue.c ring_tp_rx_complete -> "
                 "tcp_ep_fail(RING_ERR_MISMATCH)), so ring_comm_send_notice cannot post the "
                 "ABORT to that neighbour (post_send on a failed endpoint) and the neighbour "
                 "only sees the connection close: RING_ERR_REMOTE 'connection closed' instead "
                 "of RING_ERR_MISMATCH");
        ok(run->r[r].t_end < 3.0 + late, "%s: rank %d fails in %.2f s, no hang (timeout 10 s)",
           label, r, run->r[r].t_end);
        like(run->r[r].msg, "count", "%s: rank %d's message says the count differs", label, r);
        if (!(like(run->r[r].msg, "1000", "%s: rank %d's message names count 1000", label, r) &
              like(run->r[r].msg, "1024", "%s: rank %d's message names count 1024", label, r)))
            diag("regression (fixed bug): a size mismatch relayed in an ABORT frame names only the reporter's own "
                 "count: the other count travels in frame.detail but src/fail.c "
                 "(ring_comm_fail_from_frame, RING_ERR_MISMATCH) never prints it");
        mismatch_phase_and_ranks(run, r, label);
    }
}

static void args_mismatch(const char *label, ring_op_t odd_op, uint32_t odd_tensor,
                          const char *word)
{
    fcase_t c = {.kind = K_ARGS, .count = 4096, .odd_rank = 1, .odd_op = odd_op,
                 .odd_tensor = odd_tensor};
    const h_run_t *run = run_it(3, &c, NULL, "10s", "10s", 0, NULL, 0, NULL, NULL, 15);

    for (int r = 0; r < 3; r++) {
        rank_status_is(run, r, RING_ERR_MISMATCH, label);
        ok(run->r[r].t_end < 3.0, "%s: rank %d fails in %.2f s, no hang", label, r,
           run->r[r].t_end);
        if (!like(run->r[r].msg, word, "%s: rank %d's message mentions '%s'", label, r, word))
            diag("regression (fixed bug): a relayed ABORT carries the relaying rank's own arguments (src/fail.c "
                 "ring_comm_send_notice fills round, count, tensor id, op from its own request), "
                 "so the differing value never reaches ranks two hops away");
        mismatch_phase_and_ranks(run, r, label);
    }
}

static void kill_mid_round(void)
{
    /* 16 MiB allreduces, timeout 10 s; rank 2 is killed 0.4 s after its first one finished */
    static const fcase_t c = {.kind = K_LOOP, .count = 4u << 20, .max_iters = 400,
                              .max_time = 25};
    static const h_action_t act[] = {{2, 0.4, 2, SIGKILL}};
    /* the ring's steps (on one host auto gives these calls to the direct allreduce,
     * whose kills t-direct checks) */
    static const h_setting_t ring[] = {{-1, "algo", "ring"}, {0, NULL, NULL}};
    const char *label = "SIGKILL rank 2 of 4 mid-round";
    const h_run_t *run = run_it(4, &c, ring, "10s", "10s", 0, act, 1, NULL, NULL, 30);
    char addr[80];
    double t_kill = run->t_signal[2];

    h_addr(run, 2, addr, sizeof(addr));
    if (!ok(t_kill > 0 && run->r[2].signo == SIGKILL, "%s: rank 2 was killed at %.2f s", label,
            t_kill))
        h_diag(run);
    for (int r = 0; r < 4; r++) {
        double after = run->r[r].t_end - t_kill;

        if (r == 2)
            continue;
        rank_status_is(run, r, RING_ERR_REMOTE, label);
        ok(t_kill > 0 && after < 3.0, "%s: rank %d fails %.2f s after the kill, well within "
           "the 10 s timeout", label, r, after);
        like(run->r[r].msg, "rank 2", "%s: rank %d's message names rank 2", label, r);
        like(run->r[r].msg, addr, "%s: rank %d's message names rank 2's address %s", label, r,
             addr);
        if (!like_re(run->r[r].msg, "round [0-9]+, (reduce-scatter|allgather) step [0-9]+",
                     "%s: rank %d's message names the phase (round, step)", label, r))
            diag("regression (fixed bug): the phase loses its step when the failure is seen on the back channel "
                 "(src/allreduce.c check_back_channel -> fail_link(..., -1, ...)) or relayed "
                 "in an ABORT frame (src/fail.c ring_comm_fail_from_frame formats step -1)");
    }
    diag("%s: rank 0 failed in round %s", label,
         strstr(run->r[0].msg, "round ") ? strstr(run->r[0].msg, "round ") + 6 : "?");
}

/* A peer of a ring with a stopped rank fails, timed out or told, within the 2 s
 * timeout plus a few seconds (at most max_after) of the stop. */
static void stop_seen(const h_run_t *run, int r, double t_stop, double max_after,
                      const char *label)
{
    int got = h_outcome(&run->r[r]);
    double after = run->r[r].t_end - t_stop;
    char d[96];

    if (!ok(got == RING_ERR_TIMED_OUT || got == RING_ERR_REMOTE,
            "%s: rank %d fails with timed out or remote (%s)", label, r,
            h_describe(&run->r[r], d, sizeof(d))))
        h_diag(run);
    ok(t_stop > 0 && after > 1.5 && after < max_after,
       "%s: rank %d fails %.2f s after the stop (timeout 2 s + a few)", label, r, after);
}

static void stop_mid_round(void)
{
    /* timeout 2 s; rank 1 is stopped 0.3 s after its first allreduce */
    static const fcase_t c = {.kind = K_LOOP, .count = 4u << 20, .max_iters = 400,
                              .max_time = 20};
    static const h_action_t act[] = {{1, 0.3, 1, SIGSTOP}};
    const char *label = "SIGSTOP rank 1 of 3 (timeout 2 s)";
    const h_run_t *run = run_it(3, &c, NULL, "2s", "10s", 0, act, 1, NULL, NULL, 25);
    double t_stop = run->t_signal[1];
    char addr[80];

    h_addr(run, 1, addr, sizeof(addr));
    ok(t_stop > 0, "%s: rank 1 was stopped at %.2f s", label, t_stop);
    for (int r = 0; r < 3; r++) {
        if (r == 1)
            continue;
        stop_seen(run, r, t_stop, 6.0, label);
        like(run->r[r].msg, "timed out", "%s: rank %d's message says timed out", label, r);
        if (r == 2) {
            like(run->r[r].msg, addr, "%s: rank 2, right of the stopped rank, names rank 1 (%s)",
                 label, addr);
        } else {
            /* a peer further on may time out at the same moment as rank 2, before rank
             * 2's notice arrives: it then names the neighbour it was waiting for */
            ok(strstr(run->r[r].msg, addr) != NULL ||
                   strstr(run->r[r].msg, "waiting for data from rank") != NULL,
               "%s: rank %d names the stopped rank 1 (%s) or the neighbour it waited for (%s)",
               label, r, addr, run->r[r].msg);
        }
    }
    ok(run->r[1].stopped_killed && run->r[1].signo == SIGKILL,
       "%s: the stopped rank was killed afterwards, nothing left behind", label);
}

/* A stop further up a longer ring: the peers' timeouts fire at about the same
 * moment, each waiting for its left neighbour; the probe (an ABORT asking the
 * left neighbour, answered WAITING by a peer that waits too) carries the
 * question back to the stopped peer's right neighbour, whose answer names it,
 * so every peer names the stopped one, not the neighbour it waited for. */
static void stop_mid_round_chain(int n)
{
    static const fcase_t c = {.kind = K_LOOP, .count = 1u << 20, .max_iters = 400,
                              .max_time = 20};
    static const h_action_t act[] = {{1, 0.3, 1, SIGSTOP}};
    char label[64], addr[80];
    const h_run_t *run;
    double t_stop;

    snprintf(label, sizeof(label), "SIGSTOP rank 1 of %d (timeout 2 s)", n);
    run = run_it(n, &c, NULL, "2s", "10s", 0, act, 1, NULL, NULL, 25);
    t_stop = run->t_signal[1];
    h_addr(run, 1, addr, sizeof(addr));
    ok(t_stop > 0, "%s: rank 1 was stopped at %.2f s", label, t_stop);
    for (int r = 0; r < n; r++) {
        if (r == 1)
            continue;
        stop_seen(run, r, t_stop, 8.0, label);
        like(run->r[r].msg, addr, "%s: rank %d names the stopped rank 1 (%s)", label, r, addr);
    }
    ok(run->r[1].stopped_killed && run->r[1].signo == SIGKILL,
       "%s: the stopped rank was killed afterwards, nothing left behind", label);
}

static void never_starts(void)
{
    static const fcase_t c = {.kind = K_OPEN, .count = 16};
    const char *label = "rank 1 of 2 never starts (connect-timeout 2 s)";
    const h_run_t *run = run_it(2, &c, NULL, "10s", "2s", 1u << 1, NULL, 0, NULL, NULL, 15);
    char addr[80];

    h_addr(run, 1, addr, sizeof(addr));
    rank_status_is(run, 0, RING_ERR_TIMED_OUT, label);
    ok(run->r[0].t_end > 1.9 && run->r[0].t_end < 4.5, "%s: rank 0 gives up after %.2f s", label,
       run->r[0].t_end);
    like(run->r[0].msg, "rank 1", "%s: the message names rank 1", label);
    like(run->r[0].msg, addr, "%s: the message names rank 1's address %s", label, addr);
    like(run->r[0].msg, "timed out", "%s: the message says timed out", label);
}

/* ---- strangers on the port -------------------------------------------- */

typedef struct stranger {
    int rank;            /* whose port */
    double at;           /* when, seconds after the run start (or after rank's ready) */
    int after_ready;
    int done;
    int fds[3];
    int nconnected;
    double t_connected;  /* seconds since the run start */
} stranger_t;

static int connect_to(const h_run_t *run, int rank)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)run->port[rank]);
    inet_pton(AF_INET, run->host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void stranger_tick(h_run_t *run, double t, void *arg)
{
    stranger_t *s = arg;
    static const char http[] = "GET / HTTP/1.0\r\n\r\n";
    unsigned char junk[132];
    int fd;

    if (s->done || (s->after_ready && run->r[s->rank].t_ready < 0))
        return;
    if (t < s->at + (s->after_ready ? run->r[s->rank].t_ready : 0))
        return;
    if (t > s->at + 3) {
        s->done = 1; /* never listening: give up, the checks will say */
        return;
    }
    fd = connect_to(run, s->rank);
    if (fd < 0)
        return; /* not listening yet: next tick */
    /* 1: an HTTP request, kept open */
    (void)!write(fd, http, sizeof(http) - 1);
    s->fds[s->nconnected++] = fd;
    /* 2: a connection that says nothing, kept open */
    fd = connect_to(run, s->rank);
    if (fd >= 0)
        s->fds[s->nconnected++] = fd;
    /* 3: a message of hello size with the wrong magic, then gone */
    fd = connect_to(run, s->rank);
    if (fd >= 0) {
        memset(junk, 0x5a, sizeof(junk));
        junk[0] = 128;
        junk[1] = junk[2] = junk[3] = 0;
        (void)!write(fd, junk, sizeof(junk));
        close(fd);
        s->nconnected++;
    }
    s->t_connected = t;
    s->done = 1;
}

static void stranger_cleanup(stranger_t *s)
{
    for (int i = 0; i < 2; i++)
        if (s->fds[i] > 0)
            close(s->fds[i]);
}

static void garbage_on_port(void)
{
    static const fcase_t c = {.kind = K_DELAYED, .count = 1009, .delay = 1.0};
    const char *label = "strangers on rank 0's port during start-up";
    stranger_t s = {.rank = 0, .at = 0.2};
    const h_run_t *run = run_it(2, &c, NULL, "10s", "10s", 0, NULL, 0, stranger_tick, &s, 20);

    stranger_cleanup(&s);
    ok(s.nconnected == 3 && s.t_connected < 0.9, "%s: the parent connected 3 strangers (HTTP, "
       "silent, bad magic) at %.2f s, before rank 1 started", label, s.t_connected);
    for (int r = 0; r < 2; r++) {
        char d[96];

        if (!ok(h_outcome(&run->r[r]) == 0 && h_val(&run->r[r], V_RESULT_OK, 0) == 1,
                "%s: rank %d brings the ring up and 3 allreduces are right (%s)", label, r,
                h_describe(&run->r[r], d, sizeof(d))))
            h_diag(run);
    }
    ok(run->t_done < 5.0, "%s: done in %.2f s (rank 1 starts 1 s late)", label, run->t_done);
}

static void stranger_after_startup(int with_stranger)
{
    /* rank 0 waits 2 s in an allreduce for rank 1 (with a stranger in the listen queue) */
    static const fcase_t c = {.kind = K_STRANGER, .count = 1009, .delay = 2.0};
    const char *label = with_stranger ? "stranger on rank 0's port after start-up"
                                      : "rank 0 waits 2 s for rank 1";
    stranger_t s = {.rank = 0, .at = 0.05, .after_ready = 1, .done = !with_stranger};
    const h_run_t *run = run_it(2, &c, NULL, "10s", "10s", 0, NULL, 0, stranger_tick, &s, 20);
    double cpu = h_val_double(&run->r[0], V_CPU, -1), wall = h_val_double(&run->r[0], V_WALL, -1);

    stranger_cleanup(&s);
    /* the listener closes once the ring is up, so strangers may be refused outright */
    if (with_stranger)
        ok(s.nconnected <= 3, "%s: the parent tried 3 strangers (%d got in)", label,
           s.nconnected);
    for (int r = 0; r < 2; r++) {
        char d[96];

        if (!ok(h_outcome(&run->r[r]) == 0 && h_val(&run->r[r], V_RESULT_OK, 0) == 1,
                "%s: rank %d's allreduce is right (%s)", label, r,
                h_describe(&run->r[r], d, sizeof(d))))
            h_diag(run);
    }
    if (!ok(wall > 1.0 && cpu >= 0 && cpu < 0.5 * wall,
            "%s: rank 0 sleeps while it waits, no busy loop (%.2f s CPU in %.2f s)", label, cpu,
            wall) && with_stranger)
        diag("regression: a pending connection on the listener once made every wait return "
             "at once (the listener stayed in the poll set after start-up)");
}

/* ---- a peer that leaves ----------------------------------------------- */

static void peer_closes(int n, int closer)
{
    fcase_t c = {.kind = K_CLOSE, .count = 1u << 20, .delay = 1.0, .closer = closer};
    const h_run_t *run = run_it(n, &c, NULL, "10s", "10s", 0, NULL, 0, NULL, NULL, 15);
    char label[80], addr[80];
    double t_close = h_val_double(&run->r[closer], V_CLOSE_T, -1);

    snprintf(label, sizeof(label), "rank %d of %d closes its communicator", closer, n);
    h_addr(run, closer, addr, sizeof(addr));
    is_int(h_outcome(&run->r[closer]), 0, "%s: the closing rank exits 0", label);
    for (int r = 0; r < n; r++) {
        double after = h_val_double(&run->r[r], V_FAIL_T, 1e9) - t_close;

        if (r == closer)
            continue;
        rank_status_is(run, r, RING_ERR_REMOTE, label);
        ok(t_close > 0 && after < 2.0, "%s: rank %d fails %.2f s after the close, no hang", label,
           r, after);
        if (!like(run->r[r].msg, "closed its communicator", "%s: rank %d's message says rank %d "
                  "closed its communicator", label, r, closer))
            diag("regression (fixed bug): the neighbour's ABORT (back channel) is handled before the CLOSE frame "
                 "waiting on the data connection, and a relayed ABORT keeps only status and "
                 "errno (src/fail.c ring_comm_fail_from_frame), so 'closed its communicator' "
                 "becomes 'connection closed'");
        like(run->r[r].msg, addr, "%s: rank %d's message names rank %d's address %s", label, r,
             closer, addr);
    }
}

/* The harness itself: exit codes, messages, values, the child alarm, the parent deadline. */
static void harness_checks(void)
{
    static const fcase_t alarm_case = {.kind = K_HANG};
    static const fcase_t deadline_case = {.kind = K_HANG, .delay = 1};
    h_spec_t sp;
    const h_run_t *run;

    memset(&sp, 0, sizeof(sp));
    sp.n = 2;
    sp.fn = f_child;
    sp.arg = (void *)&alarm_case;
    sp.child_timeout = 1;
    sp.deadline = 5;
    if (h_run(&sp, &the_run) != 0)
        bail("harness: %s", the_run.error);
    run = &the_run;
    ok(run->r[0].exited && run->r[0].code == 3 && strcmp(run->r[0].msg, "hello from rank 0 of 2") == 0 &&
       h_val(&run->r[0], 7, 0) == 0x1234567890abcdefull,
       "harness: rank 0's exit code, message and value come back");
    ok(run->r[1].signo == SIGALRM && !run->r[1].hung && run->r[1].t_ready >= 0 &&
       run->r[1].t_end > 0.9 && run->r[1].t_end < 2.5,
       "harness: a rank that never returns dies of its alarm after 1 s (%.2f s)", run->r[1].t_end);

    sp.arg = (void *)&deadline_case;
    sp.deadline = 1.5;
    sp.child_timeout = 10;
    if (h_run(&sp, &the_run) != 0)
        bail("harness: %s", the_run.error);
    ok(run->r[1].hung && run->nhung == 1 && run->r[1].signo == SIGKILL && run->r[1].t_end < 3,
       "harness: a rank that ignores its alarm is killed at the 1.5 s deadline and reported hung "
       "(%.2f s)", run->r[1].t_end);
    if (tap_failed)
        h_diag(run);
}

int main(void)
{
    double t_start = h_now();

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN); /* a stranger's write to a closed port must not kill the test */
    harness_checks();
    {
        static const h_setting_t chunk[] = {{1, "chunk-size", "512K"}, {0, NULL, NULL}};
        static const h_setting_t chans[] = {{1, "channels", "2"}, {0, NULL, NULL}};

        handshake_mismatch("chunk-size mismatch", chunk, "chunk size");
        handshake_mismatch("channels mismatch", chans, "channels");
    }
    mismatch_far(5, 2);
    mismatch_far(7, 0);
    {
        static const h_setting_t job[] = {{0, "job-id", "job-alpha"}, {1, "job-id", "job-beta"},
                                          {0, NULL, NULL}};
        static const fcase_t c = {.kind = K_OPEN, .count = 16};
        const char *label = "job id mismatch";
        const h_run_t *run = run_it(2, &c, job, "10s", "10s", 0, NULL, 0, NULL, NULL, 15);

        for (int r = 0; r < 2; r++) {
            rank_status_is(run, r, RING_ERR_MISMATCH, label);
            ok(run->r[r].t_end < 3.0, "%s: rank %d fails in %.2f s", label, r, run->r[r].t_end);
            like(run->r[r].msg, "job id", "%s: rank %d's message names the job id", label, r);
            like_re(run->r[r].msg, "job-alpha.*job-beta|job-beta.*job-alpha",
                    "%s: rank %d's message names both job ids", label, r);
        }
    }
    size_mismatch(2, 1, 0);
    size_mismatch(4, 2, 0);
    size_mismatch(4, 2, 0.3);
    args_mismatch("tensor id mismatch N=3 (rank 1: 8, others 7)", RING_SUM, 8, "tensor id 8");
    args_mismatch("op mismatch N=3 (rank 1: avg, others sum)", RING_AVG, 7, "differ");
    kill_mid_round();
    stop_mid_round();
    stop_mid_round_chain(5);
    never_starts();
    garbage_on_port();
    stranger_after_startup(0);
    stranger_after_startup(1);
    peer_closes(2, 1);
    peer_closes(3, 1);
    diag("t-fault: %.1f s", h_now() - t_start);
    return done_testing();
}
