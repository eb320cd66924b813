/*
 * idx.c - read one IDX file of unsigned bytes through zlib (idx.h).
 *
 * gzread decompresses a .gz file and passes a plain one through, so one
 * path serves both. zlib reports two kinds of trouble differently: a
 * corrupt stream makes gzread return -1 (Z_DATA_ERROR: a bad block or a
 * wrong CRC), while a stream cut short only makes it return fewer bytes and
 * leaves Z_BUF_ERROR in gzerror. Both are checked, so a damaged download
 * is reported as such rather than as a short or silently wrong dataset.
 */
#include "ring_build.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <zlib.h>

#include "idx.h"

/* Data must stay below this: far more than any dataset we read (Fashion-MNIST's
 * biggest file holds 47 MB), it bounds the allocation a damaged header can ask for. */
#define IDX_MAX_BYTES ((uint64_t)1 << 30)

#define IDX_TYPE_UBYTE 0x08

/* zlib's default 8 KiB buffer makes the 26 MB training images slow to inflate */
#define IDX_GZ_BUFFER (128u * 1024u)

static const char *idx_type_name(uint8_t type)
{
    switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "16-bit integer";
    case 0x0C: return "32-bit integer";
    case 0x0D: return "float";
    case 0x0E: return "double";
    default: return NULL;
    }
}

/* Read up to n bytes into buf; *got_p is short only at the end of the file.
 * -1 when zlib reports an error (a corrupt stream or a read error). */
static int idx_read(gzFile gz, const char *path, uint8_t *buf, size_t n, size_t *got_p,
                    char *err, size_t errlen)
{
    size_t got = 0;

    while (got < n) {
        /* gzread takes an unsigned int; IDX_MAX_BYTES keeps n below that anyway */
        size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
        int r = gzread(gz, buf + got, (unsigned)want);

        if (r < 0) {
            int zerr;
            const char *msg = gzerror(gz, &zerr);
            size_t plen = strlen(path);

            /* zlib puts the path first too; say it once */
            if (strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0)
                msg += plen + 2;

            if (zerr == Z_ERRNO)
                snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
            else if (zerr == Z_MEM_ERROR)
                snprintf(err, errlen, "%s: out of memory while decompressing", path);
            else
                snprintf(err, errlen, "%s: corrupt gzip data (zlib: %s)", path, msg);
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    *got_p = got;
    return 0;
}

/* A gzip stream cut off mid-way is no read error to gzread: it leaves Z_BUF_ERROR. */
static int idx_gz_cut(gzFile gz)
{
    int zerr;

    gzerror(gz, &zerr);
    return zerr == Z_BUF_ERROR;
}

/* Why a read came up short, for the end of a "truncated" message. */
static const char *idx_short_reason(gzFile gz)
{
    return idx_gz_cut(gz) ? " (the gzip stream ends early: the file is cut short)" : "";
}

static int idx_check_magic(const char *path, const uint8_t magic[4], char *err, size_t errlen)
{
    if (magic[0] != 0 || magic[1] != 0 || magic[2] != IDX_TYPE_UBYTE) {
        const char *type = magic[0] == 0 && magic[1] == 0 ? idx_type_name(magic[2]) : NULL;

        snprintf(err, errlen,
                 "%s: wrong magic %02x %02x %02x %02x (expected 00 00 08 NDIM): "
                 "not an IDX file of unsigned bytes%s%s%s",
                 path, magic[0], magic[1], magic[2], magic[3], type ? " (its type is " : "",
                 type ? type : "", type ? ")" : "");
        return -1;
    }
    if (magic[3] < 1 || magic[3] > IDX_MAX_DIMS) {
        snprintf(err, errlen, "%s: %u dimensions in the header, expected 1 to %d", path,
                 magic[3], IDX_MAX_DIMS);
        return -1;
    }
    return 0;
}

/* Decode the big-endian dimensions; their product, bounded by IDX_MAX_BYTES. */
static int idx_parse_dims(const char *path, const uint8_t *raw, int ndim, uint32_t *dims,
                          size_t *nbytes_p, char *err, size_t errlen)
{
    uint64_t total = 1;

    for (int i = 0; i < ndim; i++) {
        const uint8_t *b = raw + 4 * i;

        dims[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        if (dims[i] == 0) {
            snprintf(err, errlen, "%s: dimension %d is 0", path, i);
            return -1;
        }
        /* total < IDX_MAX_BYTES (2^30) and dims[i] < 2^32: the product fits in 64 bits */
        total *= dims[i];
        if (total >= IDX_MAX_BYTES) {
            snprintf(err, errlen, "%s: the dimensions describe 1 GiB of data or more: "
                     "too large for an IDX dataset (a damaged header?)", path);
            return -1;
        }
    }
    *nbytes_p = (size_t)total;
    return 0;
}

/* Header and data from an open file; on error nothing is left allocated. */
static int idx_read_all(gzFile gz, const char *path, idx_file_t *f, char *err, size_t errlen)
{
    uint8_t head[4 + 4 * IDX_MAX_DIMS], extra;
    size_t got;

    if (idx_read(gz, path, head, 4, &got, err, errlen) < 0)
        return -1;
    if (got < 4) {
        snprintf(err, errlen, "%s: truncated header: expected 4 bytes of magic, found %zu%s",
                 path, got, idx_short_reason(gz));
        return -1;
    }
    if (idx_check_magic(path, head, err, errlen) < 0)
        return -1;
    f->ndim = head[3];

    size_t dim_bytes = 4 * (size_t)f->ndim;

    if (idx_read(gz, path, head + 4, dim_bytes, &got, err, errlen) < 0)
        return -1;
    if (got < dim_bytes) {
        snprintf(err, errlen, "%s: truncated header: expected %zu bytes of dimensions, found %zu%s",
                 path, dim_bytes, got, idx_short_reason(gz));
        return -1;
    }
    if (idx_parse_dims(path, head + 4, f->ndim, f->dims, &f->nbytes, err, errlen) < 0)
        return -1;

    f->data = malloc(f->nbytes);
    if (f->data == NULL) {
        snprintf(err, errlen, "%s: out of memory for %zu bytes of data", path, f->nbytes);
        return -1;
    }
    if (idx_read(gz, path, f->data, f->nbytes, &got, err, errlen) < 0)
        goto fail;
    if (got < f->nbytes) {
        snprintf(err, errlen, "%s: truncated: expected %zu bytes of data, found %zu%s", path,
                 f->nbytes, got, idx_short_reason(gz));
        goto fail;
    }
    /* One more read: it must find the end. It also makes zlib check the gzip
     * trailer (CRC and length) when the last data came out of the previous read. */
    if (idx_read(gz, path, &extra, 1, &got, err, errlen) < 0)
        goto fail;
    if (got != 0) {
        snprintf(err, errlen, "%s: extra data after the %zu bytes the dimensions describe", path,
                 f->nbytes);
        goto fail;
    }
    /* all the data came, but a gzip file without its trailer went unchecked */
    if (idx_gz_cut(gz)) {
        snprintf(err, errlen, "%s: the gzip stream ends early, after the data but before "
                 "its trailer (CRC and length): the file is cut short", path);
        goto fail;
    }
    return 0;

fail:
    free(f->data);
    f->data = NULL;
    return -1;
}

int idx_load(const char *path, idx_file_t *out, char *err, size_t errlen)
{
    idx_file_t f = {0};
    gzFile gz;
    int rc;

    errno = 0;
    gz = gzopen(path, "rb");
    if (gz == NULL) {
        /* gzopen leaves errno at 0 when it is zlib's own allocation that failed */
        snprintf(err, errlen, "cannot open %s: %s", path,
                 errno ? strerror(errno) : "out of memory");
        return -1;
    }
    gzbuffer(gz, IDX_GZ_BUFFER);
    rc = idx_read_all(gz, path, &f, err, errlen);
    gzclose(gz);
    if (rc < 0)
        return -1;
    *out = f;
    return 0;
}

void idx_free(idx_file_t *f)
{
    free(f->data);
    memset(f, 0, sizeof(*f));
}
