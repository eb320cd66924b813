/* launch-relay.h - ring-launch's relay of the ranks' output (launch-relay.c). */
#ifndef RING_LAUNCH_RELAY_H
#define RING_LAUNCH_RELAY_H

#include <stddef.h>

#include "launch-pty.h"

#define LAUNCH_LINE_MAX 8192      /* longer lines are split, never lost */
#define LAUNCH_POLL_MS 250        /* upper bound on any single wait */

struct launch_stream {
    int fd, out_fd;               /* read end (-1 once closed); 1 or 2 */
    size_t len;                   /* bytes of an unfinished line in buf (a pty: of a cut \r\e[K) */
    char *buf;
    int tty;                      /* fd is the master of the rank's pseudo-terminal */
    int gen;                      /* --elastic: 0, or k for the rank's k-th replacement */
};

struct launch_relay {
    int prefix;                   /* "[RANK] " before every line */
    int out_tty[3];               /* whether ring-launch's fd 1 and 2 are terminals */
    const struct launch_stream *tty;  /* the pty's stream, relayed as it comes, or NULL */
    struct launch_tty_line tty_line;  /* where its output stands on the terminal */
};

/* The line prefix of a rank's output into buf: "[RANK] ", or "[RANK rK] " for its
 * k-th replacement (--elastic); its length. */
int launch_prefix_format(char *buf, size_t len, long rank, int gen);

/* A relay for this run: ring-launch's terminals looked up once. */
void launch_relay_init(struct launch_relay *rl, int prefix);

/* Reads what the rank wrote on s and passes it on: whole lines from a pipe,
 * everything from a pty (with the prefix after each redraw). Closes s at its end. */
void launch_stream_read(struct launch_relay *rl, struct launch_stream *s, long rank);

/* Passes on what s still holds (an unfinished line ends with a newline) and closes it. */
void launch_stream_close(struct launch_relay *rl, struct launch_stream *s, long rank);

#endif /* RING_LAUNCH_RELAY_H */
