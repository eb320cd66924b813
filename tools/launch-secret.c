/*
 * launch-secret.c - ring-launch's per-run secret: 32 random bytes from the
 * kernel (getrandom), hex-encoded into RING_SECRET for the ranks it starts,
 * so the ring's connections are authenticated (src/auth.h) without the user
 * doing anything. A secret the caller set already (RING_SECRET or
 * RING_SECRET_FILE) is kept: the ranks may have to meet peers of other hosts.
 */
#include "ring_build.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "launch-secret.h"

int launch_secret_setenv(char *err, size_t errlen)
{
    unsigned char raw[32];
    char hex[2 * sizeof(raw) + 1];
    size_t got = 0;

    if ((getenv("RING_SECRET") != NULL && getenv("RING_SECRET")[0] != '\0') ||
        (getenv("RING_SECRET_FILE") != NULL && getenv("RING_SECRET_FILE")[0] != '\0'))
        return 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "no random bytes for the job's secret: %s", strerror(errno));
            return -1;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    memset(raw, 0, sizeof(raw));
    if (setenv("RING_SECRET", hex, 1) != 0) {
        snprintf(err, errlen, "cannot set RING_SECRET: %s", strerror(errno));
        return -1;
    }
    memset(hex, 0, sizeof(hex));
    return 0;
}
