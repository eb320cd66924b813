/*
 * fmnist.h - the Fashion-MNIST dataset from Debian's dataset-fashion-mnist
 * (/usr/share/datasets/fashion-mnist: train-images-idx3-ubyte.gz,
 * train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz,
 * t10k-labels-idx1-ubyte.gz): 60000 training and 10000 test images of
 * 28x28 pixels, labels 0..9.
 *
 * Pixels stay bytes in memory (47 MB rather than 188 MB per peer);
 * fmnist_batch turns the samples of a batch into normalised floats.
 */
#ifndef RING_FMNIST_H
#define RING_FMNIST_H

#include <stddef.h>
#include <stdint.h>

#define FMNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define FMNIST_ROWS 28
#define FMNIST_COLS 28
#define FMNIST_PIXELS 784
#define FMNIST_CLASSES 10
/* the training set's pixel mean and standard deviation (of x/255) */
#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f

typedef struct fmnist {
    size_t ntrain, ntest;
    uint8_t *train_images;    /* ntrain x 784 */
    uint8_t *train_labels;    /* ntrain, each 0..9 */
    uint8_t *test_images;     /* ntest x 784 */
    uint8_t *test_labels;
} fmnist_t;

/*
 * Load the four files from dir (NULL: FMNIST_DEFAULT_DIR). A missing or
 * corrupt file is an error naming the file, what is wrong, and the Debian
 * package that provides it. Labels outside 0..9 and image/label count
 * mismatches are errors too.
 */
int fmnist_load(const char *dir, fmnist_t *d, char *err, size_t errlen);

void fmnist_free(fmnist_t *d);

/*
 * Samples idx[0..n) of (images, labels) as normalised floats
 * ((p/255 - FMNIST_MEAN) / FMNIST_STD) into x (n x 784, row-major) and
 * their labels into y.
 */
void fmnist_batch(const uint8_t *images, const uint8_t *labels, const uint32_t *idx, int n,
                  float *x, int *y);

#endif /* RING_FMNIST_H */
