/* launch-pty.h - rank 0's pseudo-terminal and its output's rank prefix
 * (launch-pty.c). */
#ifndef RING_LAUNCH_PTY_H
#define RING_LAUNCH_PTY_H

#include <stddef.h>

/* Where a terminal stream's output stands on ring-launch's terminal. */
struct launch_tty_line {
    int fresh;    /* the next byte shown starts a line: the prefix goes first */
    int open;     /* the terminal's last line holds this stream's unfinished output */
    int redraw;   /* that line was drawn after a \r (a progress bar): the next draw replaces it */
};

/* A pseudo-terminal for a rank's stdout: output is passed as written (no \n to
 * \r\n), the window is ring-launch's own less cols_used columns (the prefix).
 * 0 with the master (non-blocking, close-on-exec) and the terminal side, or -1
 * with errno. */
int launch_pty_open(int cols_used, int *master_p, int *slave_p);

/* Copy in[0..len) to out[0..cap) with prefix at the start of each line and
 * again after each \r (after a whole \r\e[K, the redraw that clears the line),
 * so a redrawn line keeps it. Returns the bytes written; *used_p is the bytes
 * of in consumed: fewer when out is full, or when in ends in the middle of a
 * \r\e[K or \r\n, which waits for the next read unless final. cap must hold a
 * prefix and 8 bytes more. */
size_t launch_tty_rewrite(struct launch_tty_line *ln, const char *prefix, const char *in,
                          size_t len, int final, char *out, size_t cap, size_t *used_p);

#endif /* RING_LAUNCH_PTY_H */
