/* lz4_chunk.h - a received lz4 chunk (a frame flagged RING_FRAME_LZ4): its
 * bytes and its header's payload_bytes come from the left neighbour, the
 * size it must decompress to from this peer's schedule. codec_pipeline.c decodes
 * every such chunk with this; tests/fuzz/fuzz-lz4.c fuzzes it. */
#ifndef RING_LZ4_CHUNK_H
#define RING_LZ4_CHUNK_H

#include <stddef.h>

/* Decompress in_bytes of in into out, which holds want_bytes: 0 when they
 * decompress to exactly want_bytes, else -1. *got is what they decompressed
 * to (LZ4_decompress_safe's count, negative for a corrupt chunk), for the
 * message. Reads no byte past in + in_bytes, writes none past out + want_bytes. */
int ring_enc_lz4_unpack(const void *in, size_t in_bytes, void *out, size_t want_bytes, int *got);

#endif /* RING_LZ4_CHUNK_H */
