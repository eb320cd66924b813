/* launch-stopped.h - which of ring-launch's ranks are stopped (launch-stopped.c). */
#ifndef RING_LAUNCH_STOPPED_H
#define RING_LAUNCH_STOPPED_H

#include <sys/types.h>

/* For each of n process groups pgids[k] (0: skip it), stopped[k] = 1 when a
 * process of the group is stopped by a signal (SIGSTOP, SIGTSTP: state T in
 * /proc/PID/stat), else 0. Returns how many groups are, or -1 when /proc
 * cannot be read (every stopped[k] is 0 then). */
long launch_stopped_find(const pid_t *pgids, long n, unsigned char *stopped);

#endif /* RING_LAUNCH_STOPPED_H */
