/* launch-secret.h - ring-launch's per-run secret (see launch-secret.c). */
#ifndef RING_LAUNCH_SECRET_H
#define RING_LAUNCH_SECRET_H

#include <stddef.h>

/* Unless the caller gave a secret (RING_SECRET or RING_SECRET_FILE, not
 * empty): write a fresh random one to a file only this user can read, in a
 * directory of its own, and set RING_SECRET_FILE to it for the ranks. The file
 * and directory go at exit and on a signal that ends ring-launch (the handler
 * removes them, then ring-launch dies of the signal as it would have); call
 * launch_secret_remove when the job ends. 0 on success, -1 with a message in err. */
int launch_secret_setup(char *err, size_t errlen);

/* Remove the secret's file and directory, if this process made them; idempotent
 * and async-signal-safe (a forked rank that has not exec'd yet removes nothing). */
void launch_secret_remove(void);

#endif /* RING_LAUNCH_SECRET_H */
