/*
 * launch-pty.c - rank 0's stdout as a pseudo-terminal. A program decides by
 * isatty() whether to draw a progress bar (ringd's --progress auto, tqdm), and
 * a pipe says no; so when ring-launch's own stdout is a terminal, the rank
 * whose output is shown writes to a pty, and ring-launch relays what it reads
 * from the master as it comes, not line by line, since a bar never ends its
 * line. A redraw (\r, then \e[K to clear) would wipe the "[rank] " prefix:
 * launch_tty_rewrite puts it back after each one.
 */
#include "ring_build.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "launch-pty.h"

static const char launch_redraw[] = "\r\033[K";

int launch_pty_open(int cols_used, int *master_p, int *slave_p)
{
    struct termios tio;
    struct winsize ws;
    char name[128];
    int saved, fl, master = posix_openpt(O_RDWR | O_NOCTTY), slave = -1;

    if (master < 0)
        return -1;
    if (grantpt(master) != 0 || unlockpt(master) != 0 || ptsname_r(master, name, sizeof(name)) ||
        fcntl(master, F_SETFD, FD_CLOEXEC) != 0 || (fl = fcntl(master, F_GETFL)) < 0 ||
        fcntl(master, F_SETFL, fl | O_NONBLOCK) != 0 ||
        (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || tcgetattr(slave, &tio) != 0)
        goto fail;
    /* raw: no \n -> \r\n (the relay's lines stay lines), no echo, no signals */
    cfmakeraw(&tio);
    if (tcsetattr(slave, TCSANOW, &tio) != 0)
        goto fail;
    /* a program that fits its bar to the width must leave room for the prefix */
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        ws.ws_col = (unsigned short)(ws.ws_col > cols_used + 20 ? ws.ws_col - cols_used
                                                                  : ws.ws_col);
        if (ioctl(slave, TIOCSWINSZ, &ws) != 0)
            goto fail;
    }
    *master_p = master;
    *slave_p = slave;
    return 0;
fail:
    saved = errno;
    if (slave >= 0)
        close(slave);
    close(master);
    errno = saved;
    return -1;
}

/* How many bytes of a \r\e[K (k = 4) or \r\n (-2) start at in[0] == '\r';
 * 0: in ends inside one of them. */
static int launch_cr_span(const char *in, size_t len)
{
    size_t k = 1;

    if (len > 1 && in[1] == '\n')
        return -2;
    while (k < 4 && k < len && in[k] == launch_redraw[k])
        k++;
    if (k == 4)
        return 4;
    return k == len ? 0 : 1;
}

size_t launch_tty_rewrite(struct launch_tty_line *ln, const char *prefix, const char *in,
                          size_t len, int final, char *out, size_t cap, size_t *used_p)
{
    size_t plen = strlen(prefix), o = 0, i = 0;

    while (i < len && o + plen + 8 <= cap) {
        char c = in[i];

        if (c == '\r') {
            int span = launch_cr_span(in + i, len - i);

            if (span == 0 && !final)
                break;   /* the rest of the sequence comes with the next read */
            if (span == -2) {   /* \r\n ends a line like \n */
                memcpy(out + o, "\r\n", 2);
                o += 2;
                i += 2;
                *ln = (struct launch_tty_line){ .fresh = 1 };
                continue;
            }
            span = span == 4 ? 4 : 1;
            memcpy(out + o, in + i, (size_t)span);
            o += (size_t)span;
            i += (size_t)span;
            ln->fresh = ln->redraw = 1;
            continue;
        }
        if (ln->fresh && (c != '\n' || !ln->redraw)) {
            memcpy(out + o, prefix, plen);   /* an empty line keeps its prefix too */
            o += plen;
        }
        out[o++] = c;
        i++;
        if (c == '\n') {
            *ln = (struct launch_tty_line){ .fresh = 1 };
        } else {
            ln->fresh = 0;
            ln->open = 1;
        }
    }
    *used_p = i;
    return o;
}
