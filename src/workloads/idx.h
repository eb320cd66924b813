/*
 * idx.h - read IDX files (the MNIST/Fashion-MNIST format), gzip-compressed
 * or not, through zlib.
 *
 * Format: a big-endian header 0x00 0x00 TYPE NDIM, then NDIM big-endian
 * uint32 dimensions, then the data, row-major. Only TYPE 0x08 (unsigned
 * byte) is accepted: it is all Fashion-MNIST uses. The whole file is
 * checked: magic, type, dimension count, and that the data is exactly as
 * long as the dimensions say (a truncated or padded file is an error).
 * A corrupt gzip stream (bad block, wrong CRC, cut short) is an error too,
 * and so is 1 GiB of data or more: that bounds what a damaged header
 * can make us allocate.
 */
#ifndef RING_IDX_H
#define RING_IDX_H

#include <stddef.h>
#include <stdint.h>

#define IDX_MAX_DIMS 4

typedef struct idx_file {
    int ndim;
    uint32_t dims[IDX_MAX_DIMS];
    uint8_t *data;            /* dims[0] x ... x dims[ndim-1] bytes (owned) */
    size_t nbytes;
} idx_file_t;

/*
 * Read path into *out. 0, or -1 with a message in err naming the file and
 * what is wrong; *out is then untouched and nothing is left allocated.
 * Never prints. A file that cannot be opened reads "cannot open PATH: ...".
 */
int idx_load(const char *path, idx_file_t *out, char *err, size_t errlen);

/* Free the data and zero *f (safe on a zeroed struct). */
void idx_free(idx_file_t *f);

#endif /* RING_IDX_H */
