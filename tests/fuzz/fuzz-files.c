/* fuzz-files.c - libFuzzer: files ringd reads that anyone with access to the
 * directory may have written: an IDX data file (plain or gzip) and a
 * checkpoint. The first byte picks which; the rest is the file, served from a
 * memfd through /proc/self/fd. */
#define _GNU_SOURCE
#include "ring_build.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checkpoint.h"
#include "idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[512];
    int fd;

    if (size < 1)
        return 0;
    fd = memfd_create("fuzz", 0);
    if (fd < 0)
        return 0;
    if (write(fd, data + 1, size - 1) != (ssize_t)(size - 1)) {
        close(fd);
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    if (data[0] % 2 == 0) {
        idx_file_t f;
        if (idx_load(path, &f, err, sizeof(err)) == 0)
            idx_free(&f);
    } else {
        /* a small model, so a header that promises more is refused before any read */
        static float params[4096], momentum[4096];
        ckpt_state_t st = {0};
        st.params = params;
        st.momentum = momentum;
        (void)ckpt_read(path, &st, 1, "synthetic", "", 4096, err, sizeof(err));
    }
    close(fd);
    return 0;
}
