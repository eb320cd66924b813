/*
 * fmnist.c - Fashion-MNIST from its four IDX files (fmnist.h).
 *
 * idx.c checks each file on its own; this file checks what makes them a
 * dataset: 28x28 images, one label per image, labels 0..9. Every error
 * about a file ends with where the files come from, since the usual fix is
 * installing (or reinstalling) the Debian package or pointing --data-dir
 * elsewhere.
 */
#include "ring_build.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fmnist.h"
#include "idx.h"

#define FMNIST_HINT_WHERE "or point --data-dir at a directory with the four files)"
#define FMNIST_HINT_INSTALL \
    "(Debian package dataset-fashion-mnist: apt-get install dataset-fashion-mnist, " \
    FMNIST_HINT_WHERE
#define FMNIST_HINT_REINSTALL \
    "(Debian package dataset-fashion-mnist: apt-get install --reinstall " \
    "dataset-fashion-mnist, " FMNIST_HINT_WHERE

/* Append the package hint: install it when the file is not there to read,
 * reinstall it when the file is there but wrong. */
static void fmnist_hint(const char *path, char *err, size_t errlen)
{
    size_t used;

    if (errlen == 0)
        return;
    used = strlen(err);
    snprintf(err + used, errlen - used, " %s",
             access(path, R_OK) != 0 ? FMNIST_HINT_INSTALL : FMNIST_HINT_REINSTALL);
}

static int fmnist_path(const char *dir, const char *name, char *path, size_t len, char *err,
                       size_t errlen)
{
    size_t dlen = strlen(dir);
    const char *sep = dlen > 0 && dir[dlen - 1] == '/' ? "" : "/";
    int n = snprintf(path, len, "%s%s%s", dir, sep, name);

    if (n < 0 || (size_t)n >= len) {
        snprintf(err, errlen, "data directory path too long: %s", dir);
        return -1;
    }
    return 0;
}

/* "60000 x 28 x 28", for saying what a file holds */
static void fmnist_dims_str(const idx_file_t *f, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < f->ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%u", i ? " x " : "", f->dims[i]);
}

static int fmnist_check_images(const char *path, const idx_file_t *img, char *err,
                               size_t errlen)
{
    char found[64];

    if (img->ndim == 3 && img->dims[1] == FMNIST_ROWS && img->dims[2] == FMNIST_COLS)
        return 0;
    fmnist_dims_str(img, found, sizeof(found));
    snprintf(err, errlen, "%s: expected N x %d x %d images, found %s", path, FMNIST_ROWS,
             FMNIST_COLS, found);
    return -1;
}

static int fmnist_check_labels(const char *path, const idx_file_t *lab, const char *img_path,
                               const idx_file_t *img, char *err, size_t errlen)
{
    char found[64];

    if (lab->ndim != 1) {
        fmnist_dims_str(lab, found, sizeof(found));
        snprintf(err, errlen, "%s: expected 1 dimension (N labels), found %s", path, found);
        return -1;
    }
    if (lab->dims[0] != img->dims[0]) {
        snprintf(err, errlen, "%s: %u labels for the %u images of %s", path, lab->dims[0],
                 img->dims[0], img_path);
        return -1;
    }
    for (size_t i = 0; i < lab->nbytes; i++) {
        if (lab->data[i] >= FMNIST_CLASSES) {
            snprintf(err, errlen, "%s: label %u at index %zu is outside 0..%d", path,
                     lab->data[i], i, FMNIST_CLASSES - 1);
            return -1;
        }
    }
    return 0;
}

/* One split (training or test): its images and their labels, checked against each other. */
static int fmnist_load_split(const char *dir, const char *img_name, const char *lab_name,
                             idx_file_t *img, idx_file_t *lab, char *err, size_t errlen)
{
    char img_path[PATH_MAX], lab_path[PATH_MAX];

    if (fmnist_path(dir, img_name, img_path, sizeof(img_path), err, errlen) < 0 ||
        fmnist_path(dir, lab_name, lab_path, sizeof(lab_path), err, errlen) < 0)
        return -1;

    if (idx_load(img_path, img, err, errlen) < 0) {
        fmnist_hint(img_path, err, errlen);
        return -1;
    }
    if (fmnist_check_images(img_path, img, err, errlen) < 0) {
        fmnist_hint(img_path, err, errlen);
        goto free_img;
    }
    if (idx_load(lab_path, lab, err, errlen) < 0) {
        fmnist_hint(lab_path, err, errlen);
        goto free_img;
    }
    if (fmnist_check_labels(lab_path, lab, img_path, img, err, errlen) < 0) {
        fmnist_hint(lab_path, err, errlen);
        goto free_lab;
    }
    return 0;

free_lab:
    idx_free(lab);
free_img:
    idx_free(img);
    return -1;
}

int fmnist_load(const char *dir, fmnist_t *d, char *err, size_t errlen)
{
    idx_file_t train_img = {0}, train_lab = {0}, test_img = {0}, test_lab = {0};

    memset(d, 0, sizeof(*d));
    if (dir == NULL)
        dir = FMNIST_DEFAULT_DIR;
    if (fmnist_load_split(dir, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                          &train_img, &train_lab, err, errlen) < 0)
        return -1;
    if (fmnist_load_split(dir, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
                          &test_img, &test_lab, err, errlen) < 0) {
        idx_free(&train_lab);
        idx_free(&train_img);
        return -1;
    }
    d->ntrain = train_img.dims[0];
    d->train_images = train_img.data;
    d->train_labels = train_lab.data;
    d->ntest = test_img.dims[0];
    d->test_images = test_img.data;
    d->test_labels = test_lab.data;
    return 0;
}

void fmnist_free(fmnist_t *d)
{
    free(d->train_images);
    free(d->train_labels);
    free(d->test_images);
    free(d->test_labels);
    memset(d, 0, sizeof(*d));
}

void fmnist_batch(const uint8_t *images, const uint8_t *labels, const uint32_t *idx, int n,
                  float *x, int *y)
{
    float value[256];

    /* 256 values cover every pixel, computed exactly as documented */
    for (int p = 0; p < 256; p++)
        value[p] = ((float)p / 255.0f - FMNIST_MEAN) / FMNIST_STD;
    for (int i = 0; i < n; i++) {
        const uint8_t *img = images + (size_t)idx[i] * FMNIST_PIXELS;
        float *row = x + (size_t)i * FMNIST_PIXELS;

        for (int j = 0; j < FMNIST_PIXELS; j++)
            row[j] = value[img[j]];
        y[i] = labels[idx[i]];
    }
}
