/* fuzz-lz4.c - libFuzzer: a received lz4 chunk (src/core/codec_pipeline.c decodes every
 * frame flagged RING_FRAME_LZ4 with ring_enc_lz4_unpack): the first two
 * bytes are the size it must decompress to (little-endian; the receiver's
 * schedule says it), the rest the chunk, whose length is the frame header's
 * payload_bytes. Into a buffer of exactly that size, from one of exactly the
 * chunk's: ASan sees any byte read or written past them. */
#include "ring_build.h"

#include <lz4.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lz4_chunk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t want, in_bytes;
    unsigned char *in, *out, *again;
    int got, rc;

    if (size < 2)
        return 0;
    want = (size_t)data[0] | (size_t)data[1] << 8;
    in_bytes = size - 2;
    in = malloc(in_bytes ? in_bytes : 1);
    out = malloc(want ? want : 1);
    if (in == NULL || out == NULL)
        goto done;
    memcpy(in, data + 2, in_bytes);
    rc = ring_enc_lz4_unpack(in, in_bytes, out, want, &got);
    /* 0 exactly when it gave the bytes asked for; never more than fit */
    if ((rc == 0) != (got == (int)want) || got > (int)want)
        __builtin_trap();
    if (rc == 0 && want > 0) {
        /* what decompressed compresses and comes back the same */
        int cap = LZ4_compressBound((int)want), packed;
        unsigned char *z = malloc((size_t)cap);

        again = malloc(want);
        if (z != NULL && again != NULL) {
            packed = LZ4_compress_default((const char *)out, (char *)z, (int)want, cap);
            if (packed <= 0 || ring_enc_lz4_unpack(z, (size_t)packed, again, want, &got) != 0 ||
                memcmp(out, again, want) != 0)
                __builtin_trap();
        }
        free(z);
        free(again);
    }
done:
    free(in);
    free(out);
    return 0;
}
