/*
 * t-checkpoint.c - the checkpoint file: round trip, listing and pruning,
 * and every way a file can be bad (corrupt, truncated, wrong magic or
 * version, another model), each with its message.
 */
#include "ring_build.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/checkpoint.h"
#include "tap.h"

#define N 1000

static char dir[256];

static void fill(ckpt_state_t *st, uint64_t step, float *p, float *m)
{
    memset(st, 0, sizeof(*st));
    st->step = step;
    st->epoch = 2;
    st->step_in_epoch = 17;
    st->seed = 42;
    st->total_samples = step * 256;
    st->world_size = 4;
    st->batch_size = 64;
    st->elapsed_s = 12.5;
    snprintf(st->workload, sizeof(st->workload), "fmnist-mlp");
    snprintf(st->shape, sizeof(st->shape), "fmnist-mlp 784-256-128-10");
    snprintf(st->settings, sizeof(st->settings), "lr=0.05");
    st->nparams = N;
    for (int i = 0; i < N; i++) {
        p[i] = (float)i * 0.5f - (float)step;
        m[i] = -(float)i / 7.0f;
    }
    p[3] = -0.0f;
    st->params = p;
    st->momentum = m;
}

/* flip one byte of path at offset (from the end when negative) */
static void poke(const char *path, long offset)
{
    int fd = open(path, O_RDWR);
    unsigned char b;
    struct stat sb;

    fstat(fd, &sb);
    if (offset < 0)
        offset += (long)sb.st_size;
    pread(fd, &b, 1, offset);
    b ^= 0x40;
    pwrite(fd, &b, 1, offset);
    close(fd);
}

static void cut(const char *path, long size)
{
    if (truncate(path, size) != 0)
        bail("truncate %s", path);
}

static void copy(const char *from, const char *to)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
    if (system(cmd) != 0)
        bail("%s", cmd);
}

int main(void)
{
    static float p[N], m[N], p2[N], m2[N];
    ckpt_state_t st, rd;
    char path[CKPT_PATH_MAX], bad[CKPT_PATH_MAX], err[1024], cmd[1200];
    uint64_t steps[16];
    int n, rc;
    const char *tmp = getenv("TMPDIR");

    snprintf(dir, sizeof(dir), "%s/t-checkpoint.XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL)
        bail("mkdtemp");

    /* round trip */
    fill(&st, 100, p, m);
    ok(ckpt_write(dir, &st, path, sizeof(path), err, sizeof(err)) == 0, "write step 100 (%s)",
       err);
    like(path, "ckpt-000000000100.ringd", "file name carries the step");
    memset(&rd, 0, sizeof(rd));
    rd.params = p2;
    rd.momentum = m2;
    rc = ckpt_read(path, &rd, 1, "fmnist-mlp", "fmnist-mlp 784-256-128-10", N, err, sizeof(err));
    is_int(rc, 0, "read it back (%s)", rc ? err : "ok");
    ok(memcmp(p, p2, sizeof(p)) == 0 && memcmp(m, m2, sizeof(m)) == 0,
       "parameters and momentum bitwise equal (-0.0 included)");
    ok(rd.step == 100 && rd.epoch == 2 && rd.step_in_epoch == 17 && rd.seed == 42 &&
           rd.total_samples == 25600 && rd.world_size == 4 && rd.batch_size == 64 &&
           rd.elapsed_s == 12.5 && rd.final == 0 && strcmp(rd.settings, "lr=0.05") == 0,
       "counters and settings come back");
    ok(rd.params == p2 && rd.momentum == m2, "the caller's buffers are kept");

    /* header only, no expectations: the evaluator's and a listing's view */
    memset(&rd, 0, sizeof(rd));
    is_int(ckpt_read(path, &rd, 0, NULL, NULL, 0, err, sizeof(err)), 0, "header-only read");
    is_int((long long)rd.nparams, N, "header says %d parameters", N);

    /* another model: refused before reading the body, naming both shapes */
    memset(&rd, 0, sizeof(rd));
    rd.params = p2;
    rd.momentum = m2;
    rc = ckpt_read(path, &rd, 1, "fmnist-mlp", "fmnist-mlp 784-512-10", 407050, err, sizeof(err));
    is_int(rc, -2, "a checkpoint of another shape is refused (-2)");
    like(err, "784-256-128-10", "the message names the checkpoint's shape");
    like(err, "784-512-10", "and this run's");
    like(err, "--no-resume", "and says how to start over");

    /* a damaged shape string is corruption, not another model */
    snprintf(bad, sizeof(bad), "%s/ckpt-000000000101.ringd", dir);
    copy(path, bad);
    poke(bad, 80 + 32 + 12);
    rc = ckpt_read(bad, &rd, 1, "fmnist-mlp", "fmnist-mlp 784-256-128-10", N, err, sizeof(err));
    ok(rc == -1 && strstr(err, "checksum") != NULL,
       "a damaged shape in the header is corruption (-1), not another model (%d: %s)", rc, err);

    /* corruption: a flipped byte in the body, in the header, a cut file */
    snprintf(bad, sizeof(bad), "%s/ckpt-000000000101.ringd", dir);
    copy(path, bad);
    poke(bad, 544 + 4 * 500);
    rc = ckpt_read(bad, &rd, 1, "fmnist-mlp", "fmnist-mlp 784-256-128-10", N, err, sizeof(err));
    is_int(rc, -1, "a flipped parameter byte is caught");
    like(err, "checksum", "by the checksum");
    copy(path, bad);
    poke(bad, -2);
    rc = ckpt_read(bad, &rd, 1, "fmnist-mlp", "fmnist-mlp 784-256-128-10", N, err, sizeof(err));
    ok(rc == -1 && strstr(err, "checksum") != NULL, "a flipped checksum byte is caught (%s)",
       err);
    copy(path, bad);
    cut(bad, 544 + 4 * N);
    rc = ckpt_read(bad, &rd, 1, "fmnist-mlp", "fmnist-mlp 784-256-128-10", N, err, sizeof(err));
    is_int(rc, -1, "a truncated file is refused");
    like(err, "truncated", "as truncated (%s)", err);
    copy(path, bad);
    cut(bad, 100);
    rc = ckpt_read(bad, &rd, 1, "fmnist-mlp", "fmnist-mlp 784-256-128-10", N, err, sizeof(err));
    ok(rc == -1 && strstr(err, "truncated") != NULL, "a file shorter than its header (%s)", err);
    copy(path, bad);
    poke(bad, 0);
    rc = ckpt_read(bad, &rd, 1, NULL, NULL, 0, err, sizeof(err));
    ok(rc == -1 && strstr(err, "magic") != NULL, "wrong magic (%s)", err);
    copy(path, bad);
    poke(bad, 8);
    rc = ckpt_read(bad, &rd, 1, NULL, NULL, 0, err, sizeof(err));
    ok(rc == -1 && strstr(err, "version") != NULL, "another format version (%s)", err);
    copy(path, bad);
    poke(bad, 48); /* the parameter count: the file size no longer matches it */
    rc = ckpt_read(bad, &rd, 1, NULL, NULL, 0, err, sizeof(err));
    ok(rc == -1, "a damaged parameter count is refused, never trusted (%s)", err);
    rc = ckpt_read("/nonexistent/ckpt-000000000001.ringd", &rd, 1, NULL, NULL, 0, err,
                   sizeof(err));
    ok(rc == -1 && strstr(err, "/nonexistent/") != NULL, "a missing file names the path");

    /* listing (newest first, foreign names ignored) and pruning */
    for (uint64_t s = 200; s <= 500; s += 100) {
        fill(&st, s, p, m);
        st.final = s == 500;
        if (ckpt_write(dir, &st, NULL, 0, err, sizeof(err)) != 0)
            bail("write %llu: %s", (unsigned long long)s, err);
    }
    snprintf(cmd, sizeof(cmd), "touch '%s/ckpt-12.ringd' '%s/notes.txt' '%s/ckpt-00000000000x.ringd'",
             dir, dir, dir);
    if (system(cmd) != 0)
        bail("touch");
    n = ckpt_list(dir, steps, 16, err, sizeof(err));
    ok(n == 6 && steps[0] == 500 && steps[1] == 400 && steps[4] == 101 && steps[5] == 100,
       "list: 6 checkpoints, newest first (got %d, first %llu)", n,
       n > 0 ? (unsigned long long)steps[0] : 0ULL);
    is_int(ckpt_list(dir, steps, 2, err, sizeof(err)), 2, "list honours its maximum");
    is_int(ckpt_prune(dir, 3), 3, "prune to 3 deletes 3");
    n = ckpt_list(dir, steps, 16, err, sizeof(err));
    ok(n == 3 && steps[0] == 500 && steps[2] == 300, "the newest 3 are left");
    ckpt_path(dir, 500, path, sizeof(path));
    memset(&rd, 0, sizeof(rd));
    ckpt_read(path, &rd, 0, NULL, NULL, 0, err, sizeof(err));
    is_int(rd.final, 1, "the final flag comes back");
    is_int(ckpt_list("/nonexistent-dir-for-ringd", steps, 16, err, sizeof(err)), 0,
           "a directory that does not exist yet has no checkpoints");
    snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s' | grep tmp)\"", dir);
    ok(system(cmd) == 0, "no temporary files left behind");

    /* writing into a directory that cannot exist */
    fill(&st, 1, p, m);
    ok(ckpt_write("/proc/ringd-cannot-exist", &st, NULL, 0, err, sizeof(err)) == -1 &&
           strstr(err, "/proc/ringd-cannot-exist") != NULL,
       "an unwritable directory is an error naming it (%s)", err);

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    (void)system(cmd);
    return done_testing();
}
