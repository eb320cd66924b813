/* launch-secret.h - ring-launch's per-run secret (see launch-secret.c). */
#ifndef RING_LAUNCH_SECRET_H
#define RING_LAUNCH_SECRET_H

#include <stddef.h>

/* Set RING_SECRET to a fresh random secret unless the caller gave one;
 * 0 on success, -1 with a message in err. */
int launch_secret_setenv(char *err, size_t errlen);

#endif /* RING_LAUNCH_SECRET_H */
