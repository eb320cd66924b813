/*
 * launch-relay.c - how ring-launch passes the ranks' output on. A pipe is
 * relayed line by line, one write per line, so lines of different ranks never
 * interleave. Rank 0's pseudo-terminal (launch-pty.c) is relayed as it comes,
 * because a progress bar never ends its line; a whole line of another stream
 * that arrives while the bar is drawn first clears the bar (the next redraw
 * brings it back), or ends an unfinished ordinary line, instead of being
 * glued to its end.
 */
#include "ring_build.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "launch-relay.h"

static char launch_out[LAUNCH_LINE_MAX + 32];

int launch_prefix_format(char *buf, size_t len, long rank, int gen)
{
    int n = gen > 0 ? snprintf(buf, len, "[%ld r%d] ", rank, gen)
                    : snprintf(buf, len, "[%ld] ", rank);
    return n < 0 ? 0 : n >= (int)len ? (int)len - 1 : n;
}

void launch_relay_init(struct launch_relay *rl, int prefix)
{
    *rl = (struct launch_relay){ .prefix = prefix, .tty_line = { .fresh = 1 } };
    rl->out_tty[1] = isatty(STDOUT_FILENO);
    rl->out_tty[2] = isatty(STDERR_FILENO);
}

static void launch_output_write(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t r = write(fd, p, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN) {
            struct pollfd pf = { .fd = fd, .events = POLLOUT };
            if (poll(&pf, 1, LAUNCH_POLL_MS) >= 0)
                continue;
        }
        if (r <= 0)
            return;     /* output is gone; keep draining the ranks anyway */
        p += r;
        len -= (size_t)r;
    }
}

/* A line of another stream is coming to a terminal where the pty's output
 * has an unfinished line: wipe a bar, end anything else. */
static void launch_tty_line_yield(struct launch_relay *rl, int out_fd)
{
    if (rl->tty == NULL || !rl->tty_line.open || !rl->out_tty[out_fd])
        return;
    if (rl->tty_line.redraw)
        launch_output_write(out_fd, "\r\033[K", 4);
    else
        launch_output_write(out_fd, "\n", 1);
    rl->tty_line = (struct launch_tty_line){ .fresh = 1 };
}

/* One write per line keeps lines of different ranks from interleaving. */
static void launch_line_emit(struct launch_relay *rl, int out_fd, long rank, int gen,
                             const char *p, size_t len, int add_nl)
{
    size_t off = 0;

    launch_tty_line_yield(rl, out_fd);
    if (rl->prefix)
        off = (size_t)launch_prefix_format(launch_out, 32, rank, gen);
    memcpy(launch_out + off, p, len);
    off += len;
    if (add_nl && rl->prefix)
        launch_out[off++] = '\n';
    launch_output_write(out_fd, launch_out, off);
}

/* Passes on s's bytes with the prefix after every redraw; final: nothing more comes. */
static void launch_tty_relay(struct launch_relay *rl, struct launch_stream *s, long rank,
                             int final)
{
    char prefix[32] = "";
    size_t off = 0, used, n;

    if (rl->prefix)
        launch_prefix_format(prefix, sizeof(prefix), rank, s->gen);
    while (off < s->len) {
        n = launch_tty_rewrite(&rl->tty_line, prefix, s->buf + off, s->len - off, final,
                               launch_out, sizeof(launch_out), &used);
        if (used == 0)
            break;      /* a cut \r\e[K: its rest comes with the next read */
        launch_output_write(s->out_fd, launch_out, n);
        off += used;
    }
    s->len -= off;
    memmove(s->buf, s->buf + off, s->len);
    if (final && rl->tty_line.open && rl->prefix)
        launch_output_write(s->out_fd, "\n", 1);
    if (final)
        rl->tty_line = (struct launch_tty_line){ .fresh = 1 };
}

void launch_stream_close(struct launch_relay *rl, struct launch_stream *s, long rank)
{
    if (s->tty)
        launch_tty_relay(rl, s, rank, 1);
    else if (s->len > 0)
        launch_line_emit(rl, s->out_fd, rank, s->gen, s->buf, s->len, 1);
    s->len = 0;
    if (close(s->fd) != 0)
        perror("ring-launch: close");
    s->fd = -1;
    if (rl->tty == s)
        rl->tty = NULL;
}

void launch_stream_read(struct launch_relay *rl, struct launch_stream *s, long rank)
{
    ssize_t r = read(s->fd, s->buf + s->len, LAUNCH_LINE_MAX - s->len);
    char *nl, *p = s->buf;

    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (r <= 0) {   /* a pty's master says EIO once the rank's side is closed */
        launch_stream_close(rl, s, rank);
        return;
    }
    s->len += (size_t)r;
    if (s->tty) {
        launch_tty_relay(rl, s, rank, 0);
        return;
    }
    while ((nl = memchr(p, '\n', s->len - (size_t)(p - s->buf)))) {
        launch_line_emit(rl, s->out_fd, rank, s->gen, p, (size_t)(nl - p) + 1, 0);
        p = nl + 1;
    }
    s->len -= (size_t)(p - s->buf);
    memmove(s->buf, p, s->len);
    if (s->len == LAUNCH_LINE_MAX) {
        launch_line_emit(rl, s->out_fd, rank, s->gen, s->buf, s->len, 1);
        s->len = 0;
    }
}
