/*
 * store_file.c - the file store (store.h): key K of job J is the file
 * DIR/J/K ('/' in K becomes '.'), written to a temporary name, fsynced and
 * renamed, so a reader sees all of a value or nothing. Readers poll for
 * the file with a backoff up to 100 ms. The owner removes J's directory
 * when it closes; a job that crashed leaves its files behind, and a peer
 * of the next run may read one before it is replaced: the ring's connect
 * reads a record again when its address refuses (ring_rendezvous_refresh).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "errors.h"
#include "store.h"

typedef struct store_file {
    ring_store_t base;
    char dir[4096];   /* DIR/JOB */
    int owner;
} store_file_t;

static void key_path(const store_file_t *sf, const char *key, char *path, size_t len)
{
    size_t n = (size_t)snprintf(path, len, "%s/", sf->dir);

    for (const char *k = key; *k != '\0' && n + 1 < len; k++)
        path[n++] = *k == '/' ? '.' : *k;
    path[n] = '\0';
}

static ring_status_t file_set(ring_store_t *s, const char *key, const char *value)
{
    store_file_t *sf = (store_file_t *)s;
    char path[4400], tmp[4500];
    size_t len = strlen(value);
    int fd;

    key_path(sf, key, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return ring_error_set(RING_ERR_IO, "rendezvous %s: cannot create %s: %s", s->where, tmp,
                              strerror(errno));
    if (write(fd, value, len) != (ssize_t)len || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return ring_error_set(RING_ERR_IO, "rendezvous %s: cannot write %s: %s", s->where, tmp,
                              strerror(e));
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ring_error_set(RING_ERR_IO, "rendezvous %s: cannot rename %s to %s: %s", s->where,
                              tmp, path, strerror(e));
    }
    return RING_OK;
}

static ring_status_t file_get(ring_store_t *s, const char *key, char *value, size_t len,
                              double deadline)
{
    store_file_t *sf = (store_file_t *)s;
    char path[4400];
    double backoff = 0.005;
    ssize_t n;
    int fd;

    key_path(sf, key, path, sizeof(path));
    while ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        if (errno != ENOENT)
            return ring_error_set(RING_ERR_IO, "rendezvous %s: cannot read %s: %s", s->where,
                                  path, strerror(errno));
        if (ring_now() >= deadline)
            return RING_ERR_TIMED_OUT;
        usleep((useconds_t)(backoff * 1e6));
        backoff = backoff < 0.1 ? backoff * 2 : 0.1;
    }
    n = read(fd, value, len - 1);
    close(fd);
    if (n < 0)
        return ring_error_set(RING_ERR_IO, "rendezvous %s: cannot read %s: %s", s->where, path,
                              strerror(errno));
    value[n] = '\0';
    return RING_OK;
}

static ring_status_t file_check(ring_store_t *s, const char *key, int *present)
{
    char path[4400];

    key_path((store_file_t *)s, key, path, sizeof(path));
    *present = access(path, F_OK) == 0;
    return RING_OK;
}

static void file_close(ring_store_t *s, int clean)
{
    store_file_t *sf = (store_file_t *)s;
    DIR *d;
    struct dirent *e;

    if (clean && sf->owner && (d = opendir(sf->dir)) != NULL) {
        char path[4400];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", sf->dir, e->d_name);
            unlink(path);
        }
        closedir(d);
        rmdir(sf->dir);
    }
    free(sf);
}

static const ring_store_ops_t store_file_ops = {"file", file_set, file_get, file_check,
                                                file_close};

ring_status_t ring_store_file_open(const char *dir, const char *job, int owner,
                                   ring_store_t **s_p)
{
    store_file_t *sf;
    struct stat st;
    size_t n;

    if (stat(dir, &st) != 0)
        return ring_error_set(RING_ERR_INVALID, "rendezvous file://%s: %s (it must be a "
                              "directory every peer shares)", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ring_error_set(RING_ERR_INVALID, "rendezvous file://%s: not a directory (it must "
                              "be a directory every peer shares)", dir);
    sf = calloc(1, sizeof(*sf));
    if (sf == NULL)
        return ring_error_set(RING_ERR_NO_MEMORY, "out of memory for a rendezvous store");
    sf->base.ops = &store_file_ops;
    sf->owner = owner;
    snprintf(sf->base.where, sizeof(sf->base.where), "file://%s", dir);
    /* the job id names a directory: keep it one path component */
    n = (size_t)snprintf(sf->dir, sizeof(sf->dir), "%s/ringd-job-", dir);
    for (const char *j = job; *j != '\0' && n + 1 < sizeof(sf->dir); j++)
        sf->dir[n++] = (*j == '/' || (*j == '.' && j == job)) ? '_' : *j;
    sf->dir[n] = '\0';
    if (mkdir(sf->dir, 0755) != 0 && errno != EEXIST) {
        ring_status_t rs = ring_error_set(RING_ERR_IO, "rendezvous %s: cannot create %s: %s",
                                          sf->base.where, sf->dir, strerror(errno));
        free(sf);
        return rs;
    }
    *s_p = &sf->base;
    return RING_OK;
}
