/*
 * t-idx.c - the IDX reader (src/workloads/idx.c) and Fashion-MNIST on top of
 * it (src/workloads/fmnist.c). Crafted files, good and broken, are written
 * with zlib into a fresh temporary directory (removed at the end); every
 * error is checked by its text, which must name the file. Then, when
 * dataset-fashion-mnist is installed, the real dataset: sizes, class
 * balance and the pixel statistics fmnist.h hard-codes. Under a second.
 */
#include "ring_build.h" /* _GNU_SOURCE for mkdtemp, nftw */

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "tap.h"
#include "workloads/fmnist.h"
#include "workloads/idx.h"

#define REAL_CHECKS 8 /* checks of the real dataset, skipped without it */

static char tmpdir[PATH_MAX];
static char err[2048];

/* ---- writing crafted files ---------------------------------------------------------- */

static void tmp_path(char *buf, const char *name)
{
    if ((size_t)snprintf(buf, PATH_MAX, "%s/%s", tmpdir, name) >= PATH_MAX)
        bail("temporary path too long");
}

static void write_gz(const char *path, const uint8_t *buf, size_t len)
{
    gzFile gz = gzopen(path, "wb");

    if (gz == NULL)
        bail("gzopen %s: %s", path, strerror(errno));
    if (len > 0 && gzwrite(gz, buf, (unsigned)len) != (int)len)
        bail("gzwrite %s failed", path);
    if (gzclose(gz) != Z_OK)
        bail("gzclose %s failed", path);
}

static void write_plain(const char *path, const uint8_t *buf, size_t len)
{
    FILE *f = fopen(path, "wb");

    if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
        bail("writing %s: %s", path, strerror(errno));
}

/* The whole of a file we wrote, malloc'ed. */
static uint8_t *slurp(const char *path, size_t *len_p)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = malloc(1 << 20);
    size_t len;

    if (f == NULL || buf == NULL)
        bail("reading %s: %s", path, strerror(errno));
    len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    *len_p = len;
    return buf;
}

/* An IDX image of header (magic 00 00 type ndim, dims) and data into buf; its length. */
static size_t idx_image(uint8_t *buf, uint8_t type, int ndim, const uint32_t *dims,
                        const uint8_t *data, size_t ndata)
{
    size_t n = 0;

    buf[n++] = 0;
    buf[n++] = 0;
    buf[n++] = type;
    buf[n++] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[n++] = (uint8_t)(dims[i] >> 24);
        buf[n++] = (uint8_t)(dims[i] >> 16);
        buf[n++] = (uint8_t)(dims[i] >> 8);
        buf[n++] = (uint8_t)dims[i];
    }
    if (ndata > 0)
        memcpy(buf + n, data, ndata);
    return n + ndata;
}

/* Write an IDX file of unsigned bytes, gzip-compressed; its full path in path. */
static void write_idx(char *path, const char *name, int ndim, const uint32_t *dims,
                      const uint8_t *data, size_t ndata)
{
    uint8_t *buf = malloc(4 + 4 * 8 + ndata);

    if (buf == NULL)
        bail("out of memory");
    tmp_path(path, name);
    write_gz(path, buf, idx_image(buf, 0x08, ndim, dims, data, ndata));
    free(buf);
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    if (remove(path) != 0)
        diag("cannot remove %s: %s", path, strerror(errno));
    return 0;
}

/* ---- the IDX reader ----------------------------------------------------------------- */

static const uint32_t dims234[3] = {2, 3, 4};
static uint8_t data24[24];

static void test_valid(void)
{
    static const uint8_t labels[5] = {9, 0, 3, 255, 1};
    static const uint32_t dims5[1] = {5};
    char path[PATH_MAX];
    uint8_t raw[64];
    idx_file_t f = {0};

    write_idx(path, "valid3.gz", 3, dims234, data24, sizeof(data24));
    is_int(idx_load(path, &f, err, sizeof(err)), 0, "valid 3-D file loads");
    ok(f.ndim == 3 && f.dims[0] == 2 && f.dims[1] == 3 && f.dims[2] == 4,
       "its dimensions are 2 x 3 x 4");
    is_int((long long)f.nbytes, 24, "24 bytes of data");
    ok(f.data != NULL && memcmp(f.data, data24, 24) == 0, "the data reads back exactly");
    idx_free(&f);
    ok(f.data == NULL && f.ndim == 0 && f.nbytes == 0, "idx_free zeroes the struct");

    write_idx(path, "valid1.gz", 1, dims5, labels, sizeof(labels));
    is_int(idx_load(path, &f, err, sizeof(err)), 0, "valid 1-D file loads");
    ok(f.ndim == 1 && f.dims[0] == 5 && f.nbytes == 5, "its dimension is 5");
    ok(f.data != NULL && memcmp(f.data, labels, 5) == 0, "the labels read back exactly");
    idx_free(&f);

    tmp_path(path, "plain-idx3-ubyte");
    write_plain(path, raw, idx_image(raw, 0x08, 3, dims234, data24, sizeof(data24)));
    is_int(idx_load(path, &f, err, sizeof(err)), 0, "an uncompressed IDX file loads too");
    ok(f.ndim == 3 && f.dims[2] == 4 && f.nbytes == 24 && memcmp(f.data, data24, 24) == 0,
       "with the same dimensions and data");
    idx_free(&f);
}

/* idx_load(path) must fail with needle in its message, name the file and leave *out alone. */
static void expect_error(const char *path, const char *needle, const char *what)
{
    idx_file_t f, before;

    memset(&f, 0x5a, sizeof(f));
    before = f;
    err[0] = '\0';
    is_int(idx_load(path, &f, err, sizeof(err)), -1, "%s: an error", what);
    diag("%s", err);
    like(err, needle, "%s: says what is wrong", what);
    like(err, path, "%s: names the file", what);
    ok(memcmp(&f, &before, sizeof(f)) == 0, "%s: the output is untouched", what);
}

/* Header and data, written as a .gz with the body cut or padded. */
static void test_bad_lengths(void)
{
    static const uint8_t half_magic[2] = {0, 0};
    char path[PATH_MAX];
    uint8_t raw[128];
    size_t n = idx_image(raw, 0x08, 3, dims234, data24, sizeof(data24));

    tmp_path(path, "short-data.gz");
    write_gz(path, raw, n - 4);
    expect_error(path, "truncated: expected 24 bytes of data, found 20", "truncated data");

    tmp_path(path, "short-magic.gz");
    write_gz(path, half_magic, sizeof(half_magic));
    expect_error(path, "truncated header: expected 4 bytes of magic, found 2",
                 "truncated magic");

    tmp_path(path, "short-dims.gz");
    write_gz(path, raw, 4 + 6);
    expect_error(path, "truncated header: expected 12 bytes of dimensions, found 6",
                 "truncated dimensions");

    tmp_path(path, "empty.gz");
    write_gz(path, raw, 0);
    expect_error(path, "truncated header: expected 4 bytes of magic, found 0", "empty file");

    memset(raw + n, 0xee, 3);
    tmp_path(path, "extra.gz");
    write_gz(path, raw, n + 3);
    expect_error(path, "extra data after the 24 bytes the dimensions describe",
                 "3 trailing bytes");
}

static void test_bad_headers(void)
{
    static const uint32_t dims_zero[3] = {2, 0, 4};
    static const uint32_t dims_huge[2] = {65536, 65536};
    static const uint32_t dims_wrap[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    static const uint32_t dims_none[IDX_MAX_DIMS + 1] = {1, 1, 1, 1, 1};
    static const uint8_t gif[8] = {'G', 'I', 'F', '8', '9', 'a', 0, 0};
    char path[PATH_MAX];
    uint8_t raw[128];

    tmp_path(path, "float.gz");
    write_gz(path, raw, idx_image(raw, 0x0D, 3, dims234, data24, sizeof(data24)));
    expect_error(path, "wrong magic 00 00 0d 03", "type 0x0D (float)");
    like(err, "not an IDX file of unsigned bytes (its type is float)",
         "type 0x0D (float): says why it is refused");

    tmp_path(path, "gif.gz");
    write_gz(path, gif, sizeof(gif));
    expect_error(path, "wrong magic 47 49 46 38", "not IDX at all");
    like(err, "not an IDX file of unsigned bytes", "not IDX at all: says so");

    write_idx(path, "ndim0.gz", 0, dims_none, data24, 1);
    expect_error(path, "0 dimensions in the header, expected 1 to 4", "NDIM 0");
    write_idx(path, "ndim5.gz", 5, dims_none, data24, 1);
    expect_error(path, "5 dimensions in the header, expected 1 to 4", "NDIM 5");
    write_idx(path, "zero-dim.gz", 3, dims_zero, NULL, 0);
    expect_error(path, "dimension 1 is 0", "a zero dimension");
    write_idx(path, "huge.gz", 2, dims_huge, NULL, 0);
    expect_error(path, "1 GiB of data or more", "65536 x 65536 (4 GiB)");
    write_idx(path, "wrap.gz", 4, dims_wrap, NULL, 0);
    expect_error(path, "1 GiB of data or more", "four dimensions of 2^32-1 (overflow)");
}

static void test_bad_gzip(void)
{
    /* a gzip header, then a deflate block of the reserved type 3 */
    static const uint8_t garbage[16] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3,
                                        0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    char path[PATH_MAX], big_path[PATH_MAX];
    uint8_t *gz, big[4096];
    size_t len;

    tmp_path(path, "garbage.gz");
    write_plain(path, garbage, sizeof(garbage));
    expect_error(path, "corrupt gzip data (zlib: invalid block type)", "garbage after a gzip header");

    /* a valid .gz whose CRC (the trailer's first 4 bytes) no longer matches */
    write_idx(path, "bad-crc.gz", 3, dims234, data24, sizeof(data24));
    gz = slurp(path, &len);
    gz[len - 8] ^= 0x55;
    write_plain(path, gz, len);
    expect_error(path, "corrupt gzip data (zlib: incorrect data check)", "a flipped CRC");

    /* all the data is there but the trailer is not: nothing checked the CRC */
    tmp_path(path, "no-trailer.gz");
    write_plain(path, gz, len - 8);
    expect_error(path, "the gzip stream ends early", "a .gz without its trailer");
    free(gz);

    /* cut in the middle of the data: incompressible bytes so the cut falls in them */
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)((i * 2654435761u) >> 13);
    uint32_t dims_big[1] = {sizeof(big)};
    write_idx(big_path, "cut.gz", 1, dims_big, big, sizeof(big));
    gz = slurp(big_path, &len);
    write_plain(big_path, gz, len / 2);
    free(gz);
    expect_error(big_path, "truncated: expected 4096 bytes of data, found", "a .gz cut in half");
    like(err, "the gzip stream ends early", "a .gz cut in half: says the gzip stream is cut");
}

static void test_missing(void)
{
    char path[PATH_MAX], want[PATH_MAX + 128];

    tmp_path(path, "no-such-file.gz");
    snprintf(want, sizeof(want), "cannot open %s: No such file or directory", path);
    expect_error(path, want, "a missing file");
}

/* ---- Fashion-MNIST on crafted files -------------------------------------------------- */

#define T_NTRAIN 3
#define T_NTEST 2

/* Pixel j of crafted image s; image 2 starts with a white then a black pixel. */
static uint8_t crafted_pixel(size_t s, size_t j)
{
    if (s == 2 && j < 2)
        return j == 0 ? 255 : 0;
    return (uint8_t)(s * 31 + j * 7);
}

/* A small dataset in tmpdir/name, broken as asked: train images rows x 28,
 * nlab training labels, label 1 of the training set = label1. */
static void write_fmnist(const char *name, uint32_t rows, uint32_t nlab, uint8_t label1)
{
    static uint8_t pix[T_NTRAIN * FMNIST_PIXELS];
    uint8_t lab[T_NTRAIN] = {0, 1, 2};
    uint32_t img_dims[3] = {T_NTRAIN, rows, FMNIST_COLS};
    char dir[PATH_MAX], path[PATH_MAX], file[PATH_MAX];

    tmp_path(dir, name);
    if (mkdir(dir, 0700) != 0)
        bail("mkdir %s: %s", dir, strerror(errno));
    for (size_t s = 0; s < T_NTRAIN; s++)
        for (size_t j = 0; j < FMNIST_PIXELS; j++)
            pix[s * FMNIST_PIXELS + j] = crafted_pixel(s, j);
    lab[1] = label1;
    snprintf(file, sizeof(file), "%s/train-images-idx3-ubyte.gz", name);
    write_idx(path, file, 3, img_dims, pix, (size_t)T_NTRAIN * rows * FMNIST_COLS);
    snprintf(file, sizeof(file), "%s/train-labels-idx1-ubyte.gz", name);
    write_idx(path, file, 1, &nlab, lab, nlab);

    img_dims[0] = T_NTEST;
    img_dims[1] = FMNIST_ROWS;
    nlab = T_NTEST;
    lab[1] = 7;
    snprintf(file, sizeof(file), "%s/t10k-images-idx3-ubyte.gz", name);
    write_idx(path, file, 3, img_dims, pix, (size_t)T_NTEST * FMNIST_PIXELS);
    snprintf(file, sizeof(file), "%s/t10k-labels-idx1-ubyte.gz", name);
    write_idx(path, file, 1, &nlab, lab, nlab);
}

/* fmnist_load(tmpdir/name) must fail with each needle in its message and leave d zeroed. */
static void expect_fmnist_error(const char *name, const char *needle, const char *hint,
                                const char *what)
{
    static const fmnist_t zero;
    char dir[PATH_MAX];
    fmnist_t d;

    tmp_path(dir, name);
    memset(&d, 0x5a, sizeof(d));
    err[0] = '\0';
    is_int(fmnist_load(dir, &d, err, sizeof(err)), -1, "fmnist %s: an error", what);
    diag("%s", err);
    like(err, needle, "fmnist %s: says what is wrong", what);
    like(err, hint, "fmnist %s: names the package", what);
    ok(memcmp(&d, &zero, sizeof(d)) == 0, "fmnist %s: the dataset is left zeroed", what);
}

static void test_fmnist_good(void)
{
    static float x[2 * FMNIST_PIXELS];
    const uint32_t pick[2] = {2, 0};
    char dir[PATH_MAX];
    fmnist_t d;
    int y[2] = {-1, -1}, same = 1;

    write_fmnist("good", FMNIST_ROWS, T_NTRAIN, 1);
    tmp_path(dir, "good");
    is_int(fmnist_load(dir, &d, err, sizeof(err)), 0, "fmnist: a crafted dataset loads");
    ok(d.ntrain == T_NTRAIN && d.ntest == T_NTEST, "fmnist: 3 training and 2 test samples");
    ok(d.train_labels[0] == 0 && d.train_labels[1] == 1 && d.train_labels[2] == 2 &&
           d.test_labels[1] == 7, "fmnist: the labels read back");
    ok(d.train_images[2 * FMNIST_PIXELS] == 255 &&
           d.test_images[FMNIST_PIXELS + 9] == crafted_pixel(1, 9), "fmnist: the pixels read back");

    fmnist_batch(d.train_images, d.train_labels, pick, 2, x, y);
    ok(fabsf(x[0] - 2.0226629f) < 1e-5f, "batch: a white pixel is (1 - 0.286) / 0.353 (%f)",
       (double)x[0]);
    ok(fabsf(x[1] + 0.8101983f) < 1e-5f, "batch: a black pixel is -0.286 / 0.353 (%f)",
       (double)x[1]);
    for (int j = 0; j < FMNIST_PIXELS; j++)
        same &= fabs(x[FMNIST_PIXELS + j] -
                     (crafted_pixel(0, (size_t)j) / 255.0 - 0.2860) / 0.3530) < 1e-5;
    ok(same, "batch: the second row is sample 0, normalised pixel by pixel");
    ok(y[0] == 2 && y[1] == 0, "batch: the labels follow the indices");
    fmnist_free(&d);
    ok(d.train_images == NULL && d.ntrain == 0, "fmnist_free zeroes the dataset");
}

static void test_fmnist_broken(void)
{
    static const uint8_t garbage[12] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff};
    const char *reinstall = "apt-get install --reinstall dataset-fashion-mnist";
    char want[PATH_MAX + 128], path[PATH_MAX], path2[PATH_MAX];
    uint8_t raw[4 + 12 + T_NTEST * FMNIST_PIXELS];
    uint32_t dims[3] = {T_NTEST, FMNIST_ROWS, FMNIST_COLS};

    tmp_path(path, "nothere");
    snprintf(want, sizeof(want),
             "cannot open %s/train-images-idx3-ubyte.gz: No such file or directory", path);
    expect_fmnist_error("nothere", want,
                        "(Debian package dataset-fashion-mnist: apt-get install "
                        "dataset-fashion-mnist, or point --data-dir at a directory with the "
                        "four files)", "missing directory");

    write_fmnist("rows27", 27, T_NTRAIN, 1);
    expect_fmnist_error("rows27",
                        "train-images-idx3-ubyte.gz: expected N x 28 x 28 images, found 3 x 27 x 28",
                        reinstall, "27x28 images");
    write_fmnist("count", FMNIST_ROWS, T_NTRAIN - 1, 1);
    expect_fmnist_error("count", "train-labels-idx1-ubyte.gz: 2 labels for the 3 images of",
                        reinstall, "a label count mismatch");
    write_fmnist("label10", FMNIST_ROWS, T_NTRAIN, 10);
    expect_fmnist_error("label10",
                        "train-labels-idx1-ubyte.gz: label 10 at index 1 is outside 0..9",
                        reinstall, "label 10");

    /* the training set loads, then the test set fails: the training set is freed */
    write_fmnist("notest", FMNIST_ROWS, T_NTRAIN, 1);
    tmp_path(path, "notest/t10k-images-idx3-ubyte.gz");
    unlink(path);
    snprintf(want, sizeof(want), "cannot open %s: No such file or directory", path);
    expect_fmnist_error("notest", want, "apt-get install dataset-fashion-mnist",
                        "a missing test set");

    /* images where the labels should be */
    write_fmnist("labels3d", FMNIST_ROWS, T_NTRAIN, 1);
    tmp_path(path, "labels3d/t10k-labels-idx1-ubyte.gz");
    memset(raw, 0, sizeof(raw));
    write_gz(path, raw, idx_image(raw, 0x08, 3, dims, NULL, 0) + T_NTEST * FMNIST_PIXELS);
    expect_fmnist_error("labels3d",
                        "t10k-labels-idx1-ubyte.gz: expected 1 dimension (N labels), found 2 x 28 x 28",
                        reinstall, "3-D labels");

    write_fmnist("corrupt", FMNIST_ROWS, T_NTRAIN, 1);
    tmp_path(path2, "corrupt/train-labels-idx1-ubyte.gz");
    write_plain(path2, garbage, sizeof(garbage));
    snprintf(want, sizeof(want), "%s: corrupt gzip data", path2);
    expect_fmnist_error("corrupt", want, reinstall, "a corrupt .gz");
}

/* ---- the real dataset --------------------------------------------------------------- */

static int counts_all(const uint8_t *labels, size_t n, size_t want)
{
    size_t count[FMNIST_CLASSES] = {0};
    int good = 1;

    for (size_t i = 0; i < n; i++)
        count[labels[i]]++;
    for (int c = 0; c < FMNIST_CLASSES; c++) {
        if (count[c] != want)
            diag("label %d: %zu samples, expected %zu", c, count[c], want);
        good &= count[c] == want;
    }
    return good;
}

static void test_real(void)
{
    struct stat st;
    fmnist_t d;
    uint64_t sum = 0, sum2 = 0;
    size_t npix;
    double mean, std;
    int rc;

    if (stat(FMNIST_DEFAULT_DIR, &st) != 0) {
        for (int i = 0; i < REAL_CHECKS; i++)
            skip(FMNIST_DEFAULT_DIR " absent: apt-get install dataset-fashion-mnist");
        return;
    }
    rc = fmnist_load(NULL, &d, err, sizeof(err));
    if (!is_int(rc, 0, "real dataset loads from " FMNIST_DEFAULT_DIR))
        diag("%s", err);
    is_int((long long)d.ntrain, 60000, "real: 60000 training samples");
    is_int((long long)d.ntest, 10000, "real: 10000 test samples");
    ok(rc == 0 && counts_all(d.train_labels, d.ntrain, 6000), "real: 6000 of each label in train");
    ok(rc == 0 && counts_all(d.test_labels, d.ntest, 1000), "real: 1000 of each label in test");

    npix = d.ntrain * FMNIST_PIXELS;
    for (size_t i = 0; i < npix; i++) {
        sum += d.train_images[i];
        sum2 += (uint64_t)d.train_images[i] * d.train_images[i];
    }
    mean = npix ? (double)sum / npix / 255.0 : 0.0;
    std = npix ? sqrt((double)sum2 / npix / (255.0 * 255.0) - mean * mean) : 0.0;
    ok(fabs(mean - FMNIST_MEAN) < 0.001, "real: training pixel mean %.4f is FMNIST_MEAN", mean);
    ok(fabs(std - FMNIST_STD) < 0.001, "real: training pixel std %.4f is FMNIST_STD", std);
    /* both splits start with an ankle boot (9): the data begins where it should */
    ok(rc == 0 && d.train_labels[0] == 9 && d.test_labels[0] == 9,
       "real: the first training and test labels are 9 (ankle boot)");
    fmnist_free(&d);
}

int main(void)
{
    const char *base = getenv("TMPDIR");

    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    if ((size_t)snprintf(tmpdir, sizeof(tmpdir), "%s/t-idx.XXXXXX", base) >= sizeof(tmpdir) ||
        mkdtemp(tmpdir) == NULL)
        bail("mkdtemp under %s: %s", base, strerror(errno));
    for (size_t i = 0; i < sizeof(data24); i++)
        data24[i] = (uint8_t)(i * 7 + 1);

    plan(126);
    test_valid();
    test_bad_lengths();
    test_bad_headers();
    test_bad_gzip();
    test_missing();
    test_fmnist_good();
    test_fmnist_broken();
    test_real();

    if (nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        diag("cannot remove %s", tmpdir);
    return done_testing();
}
