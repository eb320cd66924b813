/*
 * dev_shm.h - leak checks on /dev/shm for the tests that run rings of real
 * processes (t-shm.c, t-direct.c). Header-only.
 *
 * The direct allreduce (src/core/direct.c) holds a /dev/shm name for the few
 * milliseconds of a ring's open, in every test that runs peers on one host
 * over shm; under `make check -j` another test's ring may be opening while
 * this one counts. So a count above the one before is looked at again for a
 * while: a name another ring is opening with is gone within that time, a
 * leaked one stays. dir_count is the shm tests' descriptor count too.
 */
#ifndef RING_TEST_DEV_SHM_H
#define RING_TEST_DEV_SHM_H

#include <dirent.h>
#include <string.h>
#include <time.h>

/* Entries of directory path whose name starts with prefix ("" for all), less
 * . and ..; -1: unreadable. (Counting /proc/self/fd counts the descriptor that
 * reads it too.) */
static inline int dir_count(const char *path, const char *prefix)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

/* Entries of /dev/shm whose name starts with prefix ("" for all); -1: unreadable. */
static inline int dev_shm_count(const char *prefix)
{
    return dir_count("/dev/shm", prefix);
}

/* The count, looked at again every 50 ms for up to 5 s while it is above before. */
static inline int dev_shm_count_settled(const char *prefix, int before)
{
    int n = dev_shm_count(prefix);

    for (int i = 0; i < 100 && n > before; i++) {
        struct timespec ts = {0, 50 * 1000 * 1000};

        nanosleep(&ts, NULL);
        n = dev_shm_count(prefix);
    }
    return n;
}

#endif /* RING_TEST_DEV_SHM_H */
