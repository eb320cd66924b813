/*
 * store_file.c - the file store (store.h): key K of job J is the file
 * DIR/J/K ('/' in K becomes '.'), written to a temporary name, fsynced and
 * renamed, so a reader sees all of a value or nothing. Readers poll for
 * the file with a backoff up to 100 ms. The owner removes J's directory
 * when it closes; a job that crashed leaves its files behind, and a peer
 * of the next run may read one before it is replaced: the ring's connect
 * reads a record again when its address refuses (ring_rendezvous_refresh).
 *
 * A shared directory is shared with others too: the job directory is opened
 * once without following a symbolic link, must belong to this user and be
 * writable by nobody else, and every file is reached through that open
 * directory (openat, renameat, unlinkat), so a link planted at any name is
 * never followed. The owner's clean-up removes only the regular files this
 * user's ringd peers write there (rank.N and their temporary files).
 */
#include "ring_build.h"

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
    char dir[4096];   /* DIR/JOB, for messages */
    int dfd;          /* DIR/JOB, opened without following links */
    int owner;
} store_file_t;

/* The file name of a key inside the job directory ('/' becomes '.'). */
static void key_name(const char *key, char *name, size_t len)
{
    size_t n = 0;

    for (const char *k = key; *k != '\0' && n + 1 < len; k++)
        name[n++] = *k == '/' ? '.' : *k;
    name[n] = '\0';
}

/* A name this store writes: rank.N, or rank.N.tmp.PID. */
static int own_file_name(const char *name)
{
    const char *p = name + 5;

    if (strncmp(name, "rank.", 5) != 0 || *p < '0' || *p > '9')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '\0')
        return 1;
    if (strncmp(p, ".tmp.", 5) != 0 || p[5] == '\0')
        return 0;
    for (p += 5; *p >= '0' && *p <= '9'; p++)
        ;
    return *p == '\0';
}

static ring_status_t file_set(ring_store_t *s, const char *key, const char *value)
{
    store_file_t *sf = (store_file_t *)s;
    char path[600], tmp[700];
    size_t len = strlen(value);
    int fd;

    key_name(key, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    (void)unlinkat(sf->dfd, tmp, 0); /* a leftover (or planted) one: O_EXCL below */
    fd = openat(sf->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return ring_error_set(RING_ERR_IO, "rendezvous %s: cannot create %s: %s", s->where, tmp,
                              strerror(errno));
    if (write(fd, value, len) != (ssize_t)len || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlinkat(sf->dfd, tmp, 0);
        return ring_error_set(RING_ERR_IO, "rendezvous %s: cannot write %s: %s", s->where, tmp,
                              strerror(e));
    }
    close(fd);
    if (renameat(sf->dfd, tmp, sf->dfd, path) != 0) {
        int e = errno;
        unlinkat(sf->dfd, tmp, 0);
        return ring_error_set(RING_ERR_IO, "rendezvous %s: cannot rename %s to %s: %s", s->where,
                              tmp, path, strerror(e));
    }
    return RING_OK;
}

static ring_status_t file_get(ring_store_t *s, const char *key, char *value, size_t len,
                              double deadline)
{
    store_file_t *sf = (store_file_t *)s;
    char path[600];
    double backoff = 0.005;
    ssize_t n;
    int fd;

    key_name(key, path, sizeof(path));
    while ((fd = openat(sf->dfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
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
    char path[600];

    key_name(key, path, sizeof(path));
    *present = faccessat(((store_file_t *)s)->dfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
    return RING_OK;
}

static void file_close(ring_store_t *s, int clean)
{
    store_file_t *sf = (store_file_t *)s;
    int dfd2;
    DIR *d;
    struct dirent *e;

    /* only this user's regular files with the names this store writes: never
     * what a link points to, never anybody's other files */
    if (clean && sf->owner && (dfd2 = dup(sf->dfd)) >= 0 && (d = fdopendir(dfd2)) != NULL) {
        while ((e = readdir(d)) != NULL) {
            struct stat st;

            if (own_file_name(e->d_name) &&
                fstatat(sf->dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISREG(st.st_mode) && st.st_uid == geteuid())
                (void)unlinkat(sf->dfd, e->d_name, 0);
        }
        closedir(d);
        (void)rmdir(sf->dir); /* only when empty; a link there is not a directory */
    }
    close(sf->dfd);
    free(sf);
}

static const ring_store_ops_t store_file_ops = {RING_STORE_FILE, file_set, file_get, file_check,
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
    if (mkdir(sf->dir, 0700) != 0 && errno != EEXIST) {
        ring_status_t rs = ring_error_set(RING_ERR_IO, "rendezvous %s: cannot create %s: %s",
                                          sf->base.where, sf->dir, strerror(errno));
        free(sf);
        return rs;
    }
    sf->dfd = open(sf->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sf->dfd < 0 || fstat(sf->dfd, &st) != 0) {
        int e = errno;
        ring_status_t rs = ring_error_set(
            RING_ERR_INVALID, "rendezvous %s: cannot open %s: %s", sf->base.where, sf->dir,
            e == ELOOP || e == ENOTDIR ? "it is a symbolic link or not a directory, and ringd "
                                         "does not follow links there (someone may have "
                                         "planted it: remove it, or use another directory)"
                                       : strerror(e));
        if (sf->dfd >= 0)
            close(sf->dfd);
        free(sf);
        return rs;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
        ring_status_t rs = ring_error_set(
            RING_ERR_INVALID, "rendezvous %s: %s %s; ringd keeps its records only in a "
            "directory of its own user that nobody else can write (remove it, or chmod 700 it)",
            sf->base.where, sf->dir, st.st_uid != geteuid() ? "belongs to another user"
                                                            : "is writable by others");
        close(sf->dfd);
        free(sf);
        return rs;
    }
    *s_p = &sf->base;
    return RING_OK;
}
