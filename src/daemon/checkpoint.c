/*
 * checkpoint.c - write, read, list and prune checkpoint files (format in
 * checkpoint.h).
 */
#include "ring_build.h"

#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c writes floats in host order, which must be little-endian"
#endif

#define CKPT_MAGIC "RINGDCKP"
#define CKPT_PREFIX "ckpt-"
#define CKPT_SUFFIX ".ringd"

/* ---- the fixed-width header ---------------------------------------------- */

typedef struct cursor {
    unsigned char *p;
    size_t at;
} cursor_t;

static void put(cursor_t *c, const void *v, size_t n)
{
    memcpy(c->p + c->at, v, n);
    c->at += n;
}

static void get(cursor_t *c, void *v, size_t n)
{
    memcpy(v, c->p + c->at, n);
    c->at += n;
}

static void header_encode(const ckpt_state_t *st, unsigned char *h)
{
    cursor_t c = {h, 0};
    uint32_t version = CKPT_VERSION, hbytes = CKPT_HEADER_BYTES, zero = 0;
    uint64_t n = st->nparams;

    memset(h, 0, CKPT_HEADER_BYTES);
    put(&c, CKPT_MAGIC, 8);
    put(&c, &version, 4);
    put(&c, &hbytes, 4);
    put(&c, &st->step, 8);
    put(&c, &st->epoch, 8);
    put(&c, &st->step_in_epoch, 8);
    put(&c, &st->seed, 8);
    put(&c, &n, 8);
    put(&c, &st->total_samples, 8);
    put(&c, &st->world_size, 4);
    put(&c, &st->batch_size, 4);
    put(&c, &st->final, 4);
    put(&c, &zero, 4);
    put(&c, &st->elapsed_s, 8);
    put(&c, st->workload, sizeof(st->workload));
    put(&c, st->shape, sizeof(st->shape));
    put(&c, st->settings, sizeof(st->settings));
}

/* 0, or -1 with what is wrong with the header */
static int header_decode(unsigned char *h, ckpt_state_t *st, char *why, size_t len)
{
    cursor_t c = {h, 0};
    char magic[8];
    uint32_t version, hbytes, zero;
    uint64_t n;

    get(&c, magic, 8);
    get(&c, &version, 4);
    get(&c, &hbytes, 4);
    if (memcmp(magic, CKPT_MAGIC, 8) != 0) {
        snprintf(why, len, "not a ringd checkpoint (wrong magic)");
        return -1;
    }
    if (version != CKPT_VERSION || hbytes != CKPT_HEADER_BYTES) {
        snprintf(why, len, "format version %u (header %u bytes); this ringd reads version %d",
                 version, hbytes, CKPT_VERSION);
        return -1;
    }
    get(&c, &st->step, 8);
    get(&c, &st->epoch, 8);
    get(&c, &st->step_in_epoch, 8);
    get(&c, &st->seed, 8);
    get(&c, &n, 8);
    get(&c, &st->total_samples, 8);
    get(&c, &st->world_size, 4);
    get(&c, &st->batch_size, 4);
    get(&c, &st->final, 4);
    get(&c, &zero, 4);
    get(&c, &st->elapsed_s, 8);
    get(&c, st->workload, sizeof(st->workload));
    get(&c, st->shape, sizeof(st->shape));
    get(&c, st->settings, sizeof(st->settings));
    st->workload[sizeof(st->workload) - 1] = '\0';
    st->shape[sizeof(st->shape) - 1] = '\0';
    st->settings[sizeof(st->settings) - 1] = '\0';
    if (n > ((uint64_t)1 << 34)) {
        snprintf(why, len, "implausible parameter count %" PRIu64, n);
        return -1;
    }
    st->nparams = (size_t)n;
    return 0;
}

/* ---- writing --------------------------------------------------------------- */

void ckpt_path(const char *dir, uint64_t step, char *buf, size_t len)
{
    snprintf(buf, len, "%s/" CKPT_PREFIX "%012" PRIu64 CKPT_SUFFIX, dir, step);
}

static int write_all(int fd, const void *buf, size_t n, uLong *crc)
{
    const unsigned char *p = buf;

    for (size_t done = 0; done < n;) {
        size_t piece = n - done > (1u << 30) ? (1u << 30) : n - done;
        ssize_t w = write(fd, p + done, piece);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        *crc = crc32(*crc, p + done, (uInt)w);
        done += (size_t)w;
    }
    return 0;
}

int ckpt_dir_prepare(const char *dir, char *err, size_t errlen)
{
    struct stat sb;

    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create checkpoint directory %s (--checkpoint-dir): %s", dir,
                 strerror(errno));
        return -1;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "checkpoint directory %s (--checkpoint-dir) is not a directory",
                 dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "cannot write checkpoints into %s (--checkpoint-dir): %s", dir,
                 strerror(errno));
        return -1;
    }
    return 0;
}

int ckpt_write(const char *dir, const ckpt_state_t *st, char *path_out, size_t path_len,
               char *err, size_t errlen)
{
    char tmp[CKPT_PATH_MAX], path[CKPT_PATH_MAX];
    unsigned char header[CKPT_HEADER_BYTES], tail[4];
    uLong crc = crc32(0L, Z_NULL, 0);
    uint32_t crc32v;
    int fd, dfd;

    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
        return -1;
    }
    ckpt_path(dir, st->step, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s/.tmp-" CKPT_PREFIX "%012" PRIu64 "-%ld", dir, st->step,
             (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    header_encode(st, header);
    if (write_all(fd, header, sizeof(header), &crc) != 0 ||
        write_all(fd, st->params, st->nparams * sizeof(float), &crc) != 0 ||
        write_all(fd, st->momentum, st->nparams * sizeof(float), &crc) != 0)
        goto fail;
    crc32v = (uint32_t)crc;
    memcpy(tail, &crc32v, 4);
    if (write_all(fd, tail, 4, &crc) != 0 || fsync(fd) != 0)
        goto fail;
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto fail;
    /* the rename itself must reach the disk */
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    if (path_out != NULL)
        snprintf(path_out, path_len, "%s", path);
    return 0;
fail:
    snprintf(err, errlen, "cannot write checkpoint %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    (void)unlink(tmp);
    return -1;
}

/* ---- reading --------------------------------------------------------------- */

static int read_all(FILE *f, void *buf, size_t n, uLong *crc)
{
    if (fread(buf, 1, n, f) != n)
        return -1;
    for (size_t done = 0; done < n;) {
        size_t piece = n - done > (1u << 30) ? (1u << 30) : n - done;
        *crc = crc32(*crc, (const unsigned char *)buf + done, (uInt)piece);
        done += piece;
    }
    return 0;
}

/* Checksum the rest of f (body and stored CRC): 0 intact, -1 not. For a header
 * that names another model: is it really another model, or a damaged header? */
static int crc_rest_ok(FILE *f, size_t body, uLong crc)
{
    unsigned char buf[65536], tail[4];
    uint32_t stored;

    while (body > 0) {
        size_t piece = body < sizeof(buf) ? body : sizeof(buf);
        if (fread(buf, 1, piece, f) != piece)
            return -1;
        crc = crc32(crc, buf, (uInt)piece);
        body -= piece;
    }
    if (fread(tail, 1, 4, f) != 4)
        return -1;
    memcpy(&stored, tail, 4);
    return stored == (uint32_t)crc ? 0 : -1;
}

int ckpt_read(const char *path, ckpt_state_t *st, int want_body, const char *expect_workload,
              const char *expect_shape, size_t expect_nparams, char *err, size_t errlen)
{
    unsigned char header[CKPT_HEADER_BYTES], tail[4];
    uLong crc = crc32(0L, Z_NULL, 0);
    uint32_t stored;
    char why[256];
    struct stat sb;
    FILE *f = fopen(path, "rb");
    float *params = st->params, *momentum = st->momentum;
    size_t body;

    if (f == NULL) {
        snprintf(err, errlen, "cannot open checkpoint %s: %s", path, strerror(errno));
        return -1;
    }
    if (read_all(f, header, sizeof(header), &crc) != 0) {
        snprintf(err, errlen, "checkpoint %s is truncated (shorter than its header)", path);
        goto corrupt;
    }
    if (header_decode(header, st, why, sizeof(why)) != 0) {
        st->params = params, st->momentum = momentum;
        snprintf(err, errlen, "checkpoint %s: %s", path, why);
        goto corrupt;
    }
    st->params = params, st->momentum = momentum;
    body = st->nparams * sizeof(float) * 2;
    if (fstat(fileno(f), &sb) == 0 && (uint64_t)sb.st_size != CKPT_HEADER_BYTES + body + 4) {
        snprintf(err, errlen, "checkpoint %s is %lld bytes, its header says %zu: truncated or "
                 "damaged", path, (long long)sb.st_size, (size_t)CKPT_HEADER_BYTES + body + 4);
        goto corrupt;
    }
    if (expect_workload != NULL &&
        (strcmp(st->workload, expect_workload) != 0 || strcmp(st->shape, expect_shape) != 0 ||
         st->nparams != expect_nparams)) {
        if (crc_rest_ok(f, body, crc) != 0) {
            snprintf(err, errlen, "checkpoint %s is corrupt: checksum mismatch", path);
            goto corrupt;
        }
        snprintf(err, errlen, "checkpoint %s holds %s (%zu parameters) but this run trains %s "
                 "(%zu parameters): a checkpoint of another model cannot be resumed (use "
                 "another --checkpoint-dir, or --no-resume to start over)", path, st->shape,
                 st->nparams, expect_shape, expect_nparams);
        fclose(f);
        return -2;
    }
    if (!want_body) {
        fclose(f);
        return 0;
    }
    if (st->nparams != expect_nparams) {
        /* never read more than the caller's buffers hold */
        snprintf(err, errlen, "checkpoint %s holds %zu parameters, the buffers %zu", path,
                 st->nparams, expect_nparams);
        fclose(f);
        return -2;
    }
    if (read_all(f, st->params, st->nparams * sizeof(float), &crc) != 0 ||
        read_all(f, st->momentum, st->nparams * sizeof(float), &crc) != 0 ||
        fread(tail, 1, 4, f) != 4) {
        snprintf(err, errlen, "checkpoint %s is truncated", path);
        goto corrupt;
    }
    memcpy(&stored, tail, 4);
    if (stored != (uint32_t)crc) {
        snprintf(err, errlen, "checkpoint %s is corrupt: checksum %08x, stored %08x", path,
                 (unsigned)crc, (unsigned)stored);
        goto corrupt;
    }
    fclose(f);
    return 0;
corrupt:
    fclose(f);
    return -1;
}

/* ---- the directory ----------------------------------------------------------- */

static int parse_name(const char *name, uint64_t *step)
{
    size_t pl = strlen(CKPT_PREFIX), sl = strlen(CKPT_SUFFIX), n = strlen(name);
    uint64_t v = 0;

    if (n != pl + 12 + sl || strncmp(name, CKPT_PREFIX, pl) != 0 ||
        strcmp(name + pl + 12, CKPT_SUFFIX) != 0)
        return -1;
    for (size_t i = pl; i < pl + 12; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    *step = v;
    return 0;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int ckpt_list(const char *dir, uint64_t *steps, int max, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    uint64_t *all = NULL;
    size_t n = 0, cap = 0;

    if (d == NULL) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "cannot read checkpoint directory %s: %s", dir, strerror(errno));
        return -1;
    }
    while ((de = readdir(d)) != NULL) {
        uint64_t s;
        if (parse_name(de->d_name, &s) != 0)
            continue;
        if (n == cap) {
            uint64_t *grown = realloc(all, (cap = cap ? cap * 2 : 64) * sizeof(*all));
            if (grown == NULL) {
                free(all);
                closedir(d);
                snprintf(err, errlen, "out of memory listing %s", dir);
                return -1;
            }
            all = grown;
        }
        all[n++] = s;
    }
    closedir(d);
    if (n > 0)
        qsort(all, n, sizeof(*all), cmp_desc);
    if (n > (size_t)max)
        n = (size_t)max;
    if (n > 0)
        memcpy(steps, all, n * sizeof(*steps));
    free(all);
    return (int)n;
}

int ckpt_prune(const char *dir, int keep)
{
    uint64_t steps[4096];
    char err[256], path[CKPT_PATH_MAX];
    int n = ckpt_list(dir, steps, 4096, err, sizeof(err)), deleted = 0;

    for (int i = keep; i < n; i++) {
        ckpt_path(dir, steps[i], path, sizeof(path));
        if (unlink(path) == 0)
            deleted++;
    }
    return deleted;
}

/* --no-resume: an earlier run's checkpoints move to DIR/previous-run (out of
 * what resume and the evaluator read), and are deleted only once this run's
 * first checkpoint is safely written: a run killed before that loses nothing. */
int ckpt_set_aside(const char *dir, char *err, size_t errlen)
{
    uint64_t steps[4096];
    char aside[CKPT_PATH_MAX - 64], from[CKPT_PATH_MAX], to[CKPT_PATH_MAX];
    int n = ckpt_list(dir, steps, 4096, err, errlen), moved = 0;

    if (n <= 0)
        return n;
    snprintf(aside, sizeof(aside), "%s/" CKPT_ASIDE, dir);
    if (mkdir(aside, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "--no-resume: cannot create %s to keep the earlier run's "
                 "checkpoints until this run writes one: %s", aside, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        ckpt_path(dir, steps[i], from, sizeof(from));
        ckpt_path(aside, steps[i], to, sizeof(to));
        if (rename(from, to) != 0) {
            snprintf(err, errlen, "--no-resume: cannot move %s to %s: %s", from, to,
                     strerror(errno));
            return -1;
        }
        moved++;
    }
    return moved;
}

int ckpt_drop_aside(const char *dir)
{
    char aside[CKPT_PATH_MAX - 64];
    int gone;

    snprintf(aside, sizeof(aside), "%s/" CKPT_ASIDE, dir);
    gone = ckpt_prune(aside, 0);
    (void)rmdir(aside); /* only when empty: anything else there is not ours */
    return gone;
}
