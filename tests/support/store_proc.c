/*
 * store_proc.c - what tests/ring/t-store-avail.c and tests/ring/t-store-limits.c share:
 * small socket helpers, and the job's tcp store served by a process of its
 * own whose stderr goes to a file (store_proc.h).
 */
#include "ring_build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "errors.h"
#include "harness.h"
#include "le.h"
#include "log.h"
#include "magic.h"
#include "store_proc.h"

/* ---- small socket helpers ------------------------------------------------------ */

/* Read up to len bytes within ms: how many (fewer when the peer closed), or -1 on time. */
long read_some(int fd, unsigned char *p, size_t len, int ms)
{
    double until = h_now() + ms / 1000.0;
    size_t got = 0;

    while (got < len) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int left = (int)((until - h_now()) * 1000);
        ssize_t n;

        if (left <= 0 || poll(&pfd, 1, left) <= 0)
            return -1;
        n = recv(fd, p + got, len - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return (long)got;
}

/* A port in 20000..32767 (below the kernel's ephemeral range, so no outgoing
 * connection of this test holds it) that binds on 127.0.0.1 now; another one
 * each call. */
int free_port(void)
{
    static unsigned calls;

    for (unsigned i = 0; i < 200; i++) {
        unsigned k = calls++ * 7 + i;
        int port = 20000 + (int)(((unsigned)getpid() * 7919u + k * 104729u) % 12768u);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return port;
    }
    return -1;
}

/* Lines of a file that contain needle (NULL: every line); the text of the
 * last such line in last (may be NULL). */
int count_lines(const char *path, const char *needle, char *last, size_t last_len)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;

    if (last != NULL && last_len > 0)
        last[0] = '\0';
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (needle == NULL || strstr(line, needle) != NULL) {
            n++;
            if (last != NULL)
                snprintf(last, last_len, "%s", line);
        }
    fclose(f);
    return n;
}

/* ---- a store of its own, in a process of its own --------------------------------- */

/* The job's tcp store (world peers; with the secret, or without one), served
 * by a forked process whose stderr goes to sp->err: 0, or -1. */
int store_start(store_proc_t *sp, int world, int secret, const char *tag)
{
    int fds[2], port = -1;

    snprintf(sp->err, sizeof(sp->err), "/tmp/t-store-avail-%d-%s.err", (int)getpid(), tag);
    sp->port = -1;
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    sp->pid = fork();
    if (sp->pid == 0) {
        ring_store_server_t *srv = NULL;
        ring_auth_key_t key;
        int fd = open(sp->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(fds[0]);
        if (fd >= 0)
            dup2(fd, 2);
        for (int i = 0; i < 20 && srv == NULL; i++) {
            int p = free_port();

            if (p > 0 && ring_auth_key_from(SECRET, strlen(SECRET), &key) == RING_OK &&
                ring_store_server_start("127.0.0.1", p, JOB, world, secret ? &key : NULL,
                                        &srv) == RING_OK)
                port = p;
        }
        (void)!write(fds[1], &port, sizeof(port));
        for (int i = 0; i < 900; i++) /* <= 90 s; the parent kills it sooner */
            usleep(100000);
        _exit(0);
    }
    close(fds[1]);
    if (sp->pid < 0 || read(fds[0], &port, sizeof(port)) != (ssize_t)sizeof(port))
        port = -1;
    close(fds[0]);
    sp->port = port;
    return port > 0 ? 0 : -1;
}

void store_stop(store_proc_t *sp)
{
    if (sp->pid > 0) {
        kill(sp->pid, SIGKILL);
        waitpid(sp->pid, NULL, 0);
        sp->pid = -1;
    }
    unlink(sp->err);
}

/* A client of the store at port (with the secret, or without one). */
ring_status_t client_open(int port, int secret, double within, ring_store_t **s)
{
    ring_auth_key_t key;

    RING_CHECK(ring_auth_key_from(SECRET, strlen(SECRET), &key));
    return ring_store_tcp_open("127.0.0.1", port, JOB, secret ? &key : NULL,
                               ring_now() + within, s);
}
