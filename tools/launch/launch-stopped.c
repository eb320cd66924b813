/*
 * launch-stopped.c - which of ring-launch's ranks are stopped. A rank stopped
 * by SIGSTOP (a user's kill -STOP, a job-control stop) neither runs nor
 * exits: its peers time out on it and exit non-zero, so the first rank to
 * fail is a victim, and the stopped one would sit out the whole grace period,
 * since SIGTERM stays pending on a stopped process until a SIGCONT. Each rank
 * runs in a process group of its own, whose id is its pid; a rank started
 * through --exec-prefix may be a descendant of that pid, so every process of
 * the group counts, as /proc says (the state after the command name in
 * /proc/PID/stat, then the parent's pid and the group's).
 */
#include "ring_build.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "launch-stopped.h"

/* The state and process group of process `name` (a /proc entry); 0 or -1. */
static int stopped_stat_read(int procfd, const char *name, char *state_p, long *pgrp_p)
{
    char path[64], buf[512];
    const char *close_paren;
    ssize_t got;
    long ppid;
    int fd;

    snprintf(path, sizeof(path), "%s/stat", name);
    if ((fd = openat(procfd, path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;      /* it exited meanwhile */
    got = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (got <= 0)
        return -1;
    buf[got] = '\0';
    /* the command name may hold blanks and parentheses: the last ')' ends it */
    if ((close_paren = strrchr(buf, ')')) == NULL ||
        sscanf(close_paren + 1, " %c %ld %ld", state_p, &ppid, pgrp_p) != 3)
        return -1;
    return 0;
}

long launch_stopped_find(const pid_t *pgids, long n, unsigned char *stopped)
{
    DIR *proc = opendir("/proc");
    struct dirent *e;
    long found = 0, k, pgrp;
    char state;

    memset(stopped, 0, (size_t)n);
    if (proc == NULL)
        return -1;
    while ((e = readdir(proc)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]) ||
            stopped_stat_read(dirfd(proc), e->d_name, &state, &pgrp) != 0 || state != 'T')
            continue;
        for (k = 0; k < n; k++)
            if (pgids[k] > 0 && pgids[k] == pgrp && !stopped[k]) {
                stopped[k] = 1;
                found++;
            }
    }
    closedir(proc);
    return found;
}
