/*
 * t-auth.c - peers prove the job's secret before they are told anything
 * (src/auth.c, src/connect.c):
 *   (the handshake's messages, attacked one by one: t-auth-handshake.c)
 *   - N=3 real processes with the same secret form a ring and allreduce;
 *   - a peer with another secret: the ring never forms, and every peer's
 *     start-up error says authentication failed;
 *   - a stranger without the secret on an absent rank's port (it knows the
 *     job id, the default): it is told nothing and cannot join; the real
 *     peers fail naming authentication;
 *   - with every peer present, a stranger that connects to rank 0 and sends a
 *     hello gets no byte back, and the ring trains on.
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "harness.h"
#include "le.h"
#include "tap.h"
#include "transport.h"
#include "wire.h"

#define SECRET "0123456789abcdef-t-auth"
#define V_STATUS 0
#define V_SUM 1
#define V_STRANGER_BYTES 2

/* ---- real rings ----------------------------------------------------------------- */

typedef enum { R_ALL_SAME, R_OTHER_SECRET, R_STRANGER_ABSENT, R_STRANGER_HELLO, R_FLOOD } ring_case_t;

#define FLOOD_CONNECTIONS 500

/* 500, or fewer where this process may not open that many descriptors */
static int flood_target(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < FLOOD_CONNECTIONS + 64)
        return rl.rlim_cur > 64 + 10 ? (int)(rl.rlim_cur - 64) / 10 * 10 : 10;
    return FLOOD_CONNECTIONS;
}

#define FLOOD_HOLD_S 10.0

/* A process that opens FLOOD_CONNECTIONS silent connections to host:port (as
 * soon as it listens), says so on done_fd, and holds them until FLOOD_HOLD_S;
 * exits with how many it opened / 10. */
static int flood(const char *host, int port, int done_fd)
{
    int opened = 0;
    double until = h_now() + FLOOD_HOLD_S;

    for (int i = 0; i < flood_target() && h_now() < until; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        inet_pton(AF_INET, host, &a.sin_addr);
        if (fd < 0)
            break;
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
            close(fd);
            usleep(20000); /* not listening yet */
            i--;
            continue;
        }
        opened++;
    }
    (void)!write(done_fd, "x", 1);
    while (h_now() < until)
        usleep(100000);
    return opened / 10;
}

/* A process without the secret: connect to host:port, send a hello-sized
 * message that starts like a hello, and count what comes back in 3 s. */
static int stranger_hello(const char *host, int port)
{
    const ring_tp_ops_t *ops = ring_tp_find("tcp");
    ring_tp_params_t params = {0};
    ring_tp_t *tp;
    ring_tp_ep_t *ep;
    ring_tp_req_t s = {0}, r = {0};
    unsigned char out[RING_HELLO_BYTES] = {0}, in[4096];
    double until;
    int got = 0;

    if (ops == NULL || ops->init(&params, &tp) != RING_OK)
        return 255;
    for (int attempt = 0; attempt < 100; attempt++) { /* until rank 0 listens */
        if (ops->connect(tp, host, port, &ep) != RING_OK)
            return 255;
        le_put32(out, RING_HELLO_MAGIC);
        s.iov[0].iov_base = out;
        s.iov[0].iov_len = sizeof(out);
        s.iovcnt = 1;
        r.iov[0].iov_base = in;
        r.iov[0].iov_len = sizeof(in);
        r.iovcnt = 1;
        (void)ops->post_send(ep, &s);
        (void)ops->post_recv(ep, &r);
        until = h_now() + 3.0;
        while (!r.done && h_now() < until) {
            ops->progress(tp);
            ops->wait(tp, 10);
        }
        if (r.done && r.sys_errno == ECONNREFUSED) {
            ops->ep_close(ep);
            usleep(50000);
            continue;
        }
        got = r.done && r.status == RING_OK ? (int)r.bytes : 0;
        ops->ep_close(ep);
        break;
    }
    ops->fini(tp);
    return got;
}

static int ring_main(int rank, int n, const ring_config_t *cfg, void *arg)
{
    ring_case_t kind = *(const ring_case_t *)arg;
    ring_comm_t *comm;
    ring_status_t st;
    float x[1000];
    pid_t stranger = -1;
    int wstatus = 0;

    if ((kind == R_STRANGER_HELLO || kind == R_FLOOD) && rank == n - 1) {
        /* rank 0's port from the peers list: its first entry's port */
        const char *colon = strrchr(strtok(strdup(cfg->peers), ","), ':');
        int port = colon != NULL ? atoi(colon + 1) : 0;

        int flooded[2];

        if (pipe(flooded) != 0)
            return h_fail(RING_ERR_IO, "pipe");
        stranger = fork();
        if (stranger == 0)
            _exit(kind == R_FLOOD ? flood("127.0.0.1", port, flooded[1])
                                  : stranger_hello("127.0.0.1", port));
        if (kind == R_FLOOD) { /* rank 0 is listening: this rank joins once the flood is in */
            struct pollfd pfd = {.fd = flooded[0], .events = POLLIN};
            (void)poll(&pfd, 1, 8000);
        }
        close(flooded[0]);
        close(flooded[1]);
    }
    st = ring_comm_open(cfg, &comm);
    if (st != RING_OK) {
        h_put(V_STATUS, (uint64_t)st);
        h_fail(st, "ring_comm_open");
        return 1;
    }
    for (int i = 0; i < 1000; i++)
        x[i] = (float)(rank + 1);
    st = ring_allreduce(comm, x, x, 1000, RING_FLOAT32, RING_SUM);
    h_put(V_STATUS, (uint64_t)st);
    h_put(V_SUM, (uint64_t)x[999]);
    if (stranger > 0) {
        waitpid(stranger, &wstatus, 0);
        h_put(V_STRANGER_BYTES, WIFEXITED(wstatus) ? (uint64_t)WEXITSTATUS(wstatus) : 254);
    }
    ring_comm_close(comm);
    return st == RING_OK ? 0 : 1;
}

static void run_ring(const char *label, ring_case_t kind)
{
    static const h_setting_t same[] = {{-1, "secret", SECRET}, {0, NULL, NULL}};
    static const h_setting_t other[] = {{-1, "secret", SECRET}, {2, "secret", SECRET "-other"},
                                        {0, NULL, NULL}};
    /* rank 3 is the stranger: a ringd peer without the secret */
    static const h_setting_t stranger[] = {{0, "secret", SECRET}, {1, "secret", SECRET},
                                           {2, "secret", SECRET}, {0, NULL, NULL}};
    int n = kind == R_STRANGER_ABSENT ? 4 : 3;
    int fails = kind == R_OTHER_SECRET || kind == R_STRANGER_ABSENT;
    h_spec_t spec = {.n = n, .fn = ring_main, .arg = &kind, .child_timeout = 25,
                     .connect_timeout = fails ? "3s" : "10s",
                     .settings = kind == R_OTHER_SECRET      ? other
                                 : kind == R_STRANGER_ABSENT ? stranger
                                                             : same};
    h_run_t *run = calloc(1, sizeof(*run));
    int all = 1;

    if (run == NULL || h_run(&spec, run) != 0) {
        ok(0, "%s: the ring ran", label);
        free(run);
        return;
    }
    for (int r = 0; r < n; r++) {
        const h_result_t *res = &run->r[r];

        if (!fails)
            all &= res->exited && res->code == 0 && h_val(res, V_SUM, 0) == 6;
        else if (kind == R_STRANGER_ABSENT && r == 3)
            /* told nothing: no settings, no job, no ranks, only that nobody answered */
            all &= res->exited && res->code == 1 && strstr(res->msg, "mismatch") == NULL &&
                   strstr(res->msg, "connection closed") != NULL;
        else if (kind == R_STRANGER_ABSENT && r == 1)
            /* both its neighbours are real: it hears of the failure from them */
            all &= res->exited && res->code == 1 && res->t_end < 15;
        else
            all &= res->exited && res->code == 1 && res->t_end < 15 &&
                   strstr(res->msg, "authentication") != NULL;
    }
    if (kind == R_STRANGER_HELLO)
        all &= h_val(&run->r[n - 1], V_STRANGER_BYTES, 99) == 0;
    /* rank 0 is done long before the flood lets go: the strangers never locked
     * its neighbour out (the oldest pending connection makes room) */
    if (kind == R_FLOOD)
        all &= h_val(&run->r[n - 1], V_STRANGER_BYTES, 0) == (uint64_t)flood_target() / 10 &&
               run->r[0].t_end < FLOOD_HOLD_S - 2.0;
    if (kind == R_FLOOD)
        diag("the flood opened %d0+ connections; rank 0 was done at %.2f s",
             (int)h_val(&run->r[n - 1], V_STRANGER_BYTES, 0), run->r[0].t_end);
    if (!ok(all, "%s", label))
        h_diag(run);
    else
        diag("%s: rank 0: %s", label, run->r[0].msg[0] != '\0' ? run->r[0].msg : "ok");
    free(run);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    run_ring("N=3, one secret: the ring forms and sums (6 = 1+2+3)", R_ALL_SAME);
    run_ring("N=3, rank 2 has another secret: no ring; every peer's error says authentication "
             "failed", R_OTHER_SECRET);
    run_ring("a stranger without the secret as rank 3: told nothing, cannot join; the others "
             "name authentication", R_STRANGER_ABSENT);
    run_ring("N=3 and a stranger's hello to rank 0: not a byte back, and the ring sums",
             R_STRANGER_HELLO);
    run_ring("N=3 and 500 silent connections (fewer under a low fd limit) to rank 0 before its "
             "neighbour comes: the ring "
             "forms and sums long before they let go", R_FLOOD);
    done_testing();
}
