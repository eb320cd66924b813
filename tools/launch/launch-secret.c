/*
 * launch-secret.c - ring-launch's per-run secret: 32 random bytes from the
 * kernel (getrandom), hex-encoded into a file whose path the ranks get as
 * RING_SECRET_FILE, so the ring's connections are authenticated (libringd
 * reads the file when a communicator opens: src/bootstrap/auth.c) without the
 * user doing anything. Not RING_SECRET: a process's environment is readable
 * by its user's other processes (/proc/PID/environ) and ends up in crash
 * reports and job logs, while the file is read and closed.
 *
 * The file (mode 0600, made with O_EXCL) lives in a directory of its own
 * (mkdtemp: mode 0700, a name nobody could have planted) in /dev/shm, memory
 * that is never written to a disk, else in $TMPDIR or /tmp. Both go when the
 * job ends: at exit, and on a signal that would end ring-launch (its SIGINT
 * and SIGTERM end the job normally; for the others a handler removes them,
 * then ring-launch dies of the signal as it would have). Only SIGKILL leaves
 * them behind. A secret the caller set already (RING_SECRET or
 * RING_SECRET_FILE) is kept: the ranks may have to meet peers of other hosts.
 */
#include "ring_build.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch-secret.h"

/* What the signal handler removes: static, as a handler can reach nothing else. */
static char secret_dir[PATH_MAX], secret_path[PATH_MAX + 16];
static volatile sig_atomic_t secret_made;
static pid_t secret_owner;

void launch_secret_remove(void)
{
    int saved = errno;

    /* a rank between fork and exec runs these handlers too: not its files */
    if (secret_made && getpid() == secret_owner) {
        secret_made = 0;
        (void)unlink(secret_path);
        (void)rmdir(secret_dir);
    }
    errno = saved;
}

static void secret_on_signal(int sig)
{
    launch_secret_remove();
    /* SA_RESETHAND restored the default action: die of sig, as without us */
    raise(sig);
}

/* The signals whose default action ends ring-launch and that it does not
 * handle itself; one the caller ignores (nohup: SIGHUP) stays ignored. */
static void secret_handlers_install(void)
{
    static const int sigs[] = { SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM,
                                SIGPROF, SIGXCPU, SIGXFSZ, SIGABRT, SIGSEGV, SIGBUS,
                                SIGFPE, SIGILL, SIGSYS, SIGTRAP };
    struct sigaction sa = { .sa_handler = secret_on_signal, .sa_flags = SA_RESETHAND };

    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction old;

        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
            (void)sigaction(sigs[i], &sa, NULL);
    }
}

/* The private directory: in memory when /dev/shm is there, else $TMPDIR or /tmp. */
static int secret_dir_make(char *err, size_t errlen)
{
    const char *tmp = getenv("TMPDIR");
    const char *bases[] = { "/dev/shm", tmp != NULL && *tmp != '\0' ? tmp : "/tmp", "/tmp" };
    int e = 0;

    for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
        if (snprintf(secret_dir, sizeof(secret_dir), "%s/ring-launch.XXXXXX", bases[i]) >=
            (int)sizeof(secret_dir))
            continue;
        /* mkdtemp's mode is 0700 less the umask: exactly 0700, so the file can be made */
        if (mkdtemp(secret_dir) != NULL) {
            if (chmod(secret_dir, 0700) == 0)
                return 0;
            e = errno;
            (void)rmdir(secret_dir);
            errno = e;
        }
        e = errno;
    }
    snprintf(err, errlen, "cannot make a private directory for the job's secret in /dev/shm, "
             "$TMPDIR or /tmp: %s", strerror(e));
    return -1;
}

static int secret_hex_make(char *hex, size_t hexlen, char *err, size_t errlen)
{
    unsigned char raw[32];
    size_t got = 0;

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
    for (size_t i = 0; i < sizeof(raw) && 2 * i + 2 < hexlen; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    memset(raw, 0, sizeof(raw));
    return 0;
}

/* Write the secret to a new file of the private directory, only for this user. */
static int secret_file_write(const char *hex, char *err, size_t errlen)
{
    size_t len = strlen(hex), off = 0;
    int fd, e;

    snprintf(secret_path, sizeof(secret_path), "%s/secret", secret_dir);
    fd = open(secret_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s for the job's secret: %s", secret_path,
                 strerror(errno));
        return -1;
    }
    if (fchmod(fd, 0600) != 0)
        goto fail;
    while (off < len) {
        ssize_t n = write(fd, hex + off, len - off);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto fail;
        off += (size_t)n;
    }
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    return 0;
fail:
    e = errno;
    if (fd >= 0)
        close(fd);
    snprintf(err, errlen, "cannot write the job's secret to %s: %s", secret_path, strerror(e));
    (void)unlink(secret_path);
    return -1;
}

int launch_secret_setup(char *err, size_t errlen)
{
    char hex[2 * 32 + 1] = "";
    int rc;

    if ((getenv("RING_SECRET") != NULL && getenv("RING_SECRET")[0] != '\0') ||
        (getenv("RING_SECRET_FILE") != NULL && getenv("RING_SECRET_FILE")[0] != '\0'))
        return 0;
    if (secret_hex_make(hex, sizeof(hex), err, errlen) != 0 || secret_dir_make(err, errlen) != 0)
        return -1;
    secret_owner = getpid();
    secret_made = 1;
    /* before the file exists: a signal from here on removes what there is */
    secret_handlers_install();
    if (atexit(launch_secret_remove) != 0) {
        snprintf(err, errlen, "cannot register the removal of the job's secret");
        rc = -1;
    } else {
        rc = secret_file_write(hex, err, errlen);
    }
    memset(hex, 0, sizeof(hex));
    if (rc == 0 && setenv("RING_SECRET_FILE", secret_path, 1) != 0) {
        snprintf(err, errlen, "cannot set RING_SECRET_FILE: %s", strerror(errno));
        rc = -1;
    }
    if (rc != 0)
        launch_secret_remove();
    return rc;
}
