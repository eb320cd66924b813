/* hash.c - FNV-1a over bytes. */
#include "ring_build.h"

#include "hash.h"

uint64_t ring_hash_bytes(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
