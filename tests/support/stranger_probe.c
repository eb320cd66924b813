/*
 * stranger_probe.c - a process that probes a ring's bootstrap port as a
 * stranger would, and reports what it saw (stranger_probe.h).
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "le.h"
#include "stranger_probe.h"
#include "verbs_record.h"

#define PROBE_WAIT_S 8.0

static const char *probe_job = "ringd"; /* the job id the stranger knows */

const char *const stranger_probe_name[PROBES] = {
    "256 bytes of garbage",
    "a fake verbs record (96 bytes, magic RNGV, framed)",
    "a real connector challenge, then a fake verbs record instead of its proof",
};

/* A TCP connection to 127.0.0.1:port, retried while nobody listens there (<= 20 s). */
static int stranger_connect(int port)
{
    double until = h_now() + 20.0;

    while (h_now() < until) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        if (fd < 0)
            return -1;
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
            return fd;
        close(fd);
        usleep(50000);
    }
    return -1;
}

/* Read into in (cap bytes kept, *got counts all) until *got >= want, the other
 * side closes or resets (*closed = 1), or PROBE_WAIT_S pass. */
static void stranger_read(int fd, unsigned char *in, size_t cap, size_t *got, size_t want,
                          int *closed)
{
    double until = h_now() + PROBE_WAIT_S;

    while (*got < want && !*closed && h_now() < until) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        unsigned char buf[512];
        ssize_t n;

        if (poll(&pfd, 1, 100) <= 0)
            continue;
        n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            *closed = 1;
            return;
        }
        for (ssize_t i = 0; i < n; i++)
            if (*got + (size_t)i < cap)
                in[*got + (size_t)i] = buf[i];
        *got += (size_t)n;
    }
}

/* One probe on a fresh connection; what came back goes into res. */
static void stranger_probe(int port, int kind, uint64_t *res)
{
    unsigned char out[256], in[1024];
    size_t len, got = 0, kept;
    int closed = 0, fd = stranger_connect(port);

    if (fd < 0) {
        res[S_BYTES + kind] = 999999; /* never connected */
        return;
    }
    if (kind == 0) {
        for (int i = 0; i < 256; i++)
            out[i] = (unsigned char)(0x5a ^ (i * 37));
        le_put32(out, 0xefbeaddeu); /* as a length prefix: far larger than a challenge */
        len = 256;
    } else {
        le_put32(out, VB_RECORD_BYTES);
        memset(out + 4, 0x11, VB_RECORD_BYTES);
        le_put32(out + 4, VB_RECORD_MAGIC);
        le_put16(out + 8, VB_RECORD_VERSION);
        len = 4 + VB_RECORD_BYTES;
    }
    if (kind == 2) {
        /* a challenge needs no secret: rank 0 answers it with its own, and no more.
         * The stranger knows the job id and calls rank 0 as rank 1, as a peer would */
        unsigned char ch[CHALLENGE_FRAMED];
        ring_auth_key_t none = {0};
        ring_auth_party_t me;
        ring_auth_hs_t hs;

        ring_auth_party_init(&me, &none, probe_job, RING_AUTH_FOR_VERBS_BOOT, 1, 0);
        le_put32(ch, RING_AUTH_CHALLENGE_BYTES);
        if (ring_auth_hs_start(&hs, &me, 0, ch + 4) != 0)
            memset(ch + 4, 0, RING_AUTH_CHALLENGE_BYTES);
        (void)!send(fd, ch, sizeof(ch), MSG_NOSIGNAL);
        stranger_read(fd, in, sizeof(in), &got, CHALLENGE_FRAMED, &closed);
    }
    if (!closed)
        (void)!send(fd, out, len, MSG_NOSIGNAL);
    stranger_read(fd, in, sizeof(in), &got, (size_t)-1, &closed);
    close(fd);
    res[S_BYTES + kind] = got;
    res[S_CLOSED + kind] = (uint64_t)closed;
    kept = got < sizeof(in) ? got : sizeof(in);
    if (kind == 2)
        res[S_CHALLENGE] = got == CHALLENGE_FRAMED && le_get32(in) == RING_AUTH_CHALLENGE_BYTES &&
                           le_get32(in + 4) == RING_AUTH_MAGIC &&
                           le_get16(in + 8) == RING_AUTH_VERSION && le_get16(in + 10) == 1;
    for (size_t i = 0; i + 4 <= kept; i++)
        if (le_get32(in + i) == VB_RECORD_MAGIC)
            res[S_RECORD] = 1;
}

int stranger_probe_port(int port, const char *job, uint64_t res[S_COUNT])
{
    int fds[2], wstatus;
    struct pollfd pfd;
    pid_t pid;
    ssize_t n = -1;

    if (port <= 0 || pipe(fds) != 0)
        return -1;
    if (job != NULL && job[0] != '\0')
        probe_job = job;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        memset(res, 0, S_COUNT * sizeof(res[0]));
        close(fds[0]);
        for (int k = 0; k < PROBES; k++)
            stranger_probe(port, k, res);
        (void)!write(fds[1], res, S_COUNT * sizeof(res[0]));
        _exit(0);
    }
    close(fds[1]);
    pfd = (struct pollfd){.fd = fds[0], .events = POLLIN};
    if (poll(&pfd, 1, 90000) > 0)
        n = read(fds[0], res, S_COUNT * sizeof(res[0]));
    close(fds[0]);
    kill(pid, SIGKILL);
    waitpid(pid, &wstatus, 0);
    return n == (ssize_t)(S_COUNT * sizeof(res[0])) ? 0 : -1;
}
