/*
 * mix64.h - test data. SplitMix64's finalizer: a well-mixed 64-bit value from a
 * counter, for data every rank can regenerate from (seed, rank, index) alone; and
 * xorshift64, a stream of values for one process's own cases. Header-only.
 */
#ifndef RING_TESTS_MIX64_H
#define RING_TESTS_MIX64_H

#include <stdint.h>

static inline uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* the next 32 bits of a xorshift64 stream (Marsaglia, 2003); *state must not be 0 */
static inline uint32_t xorshift64_u32(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (uint32_t)(*state >> 32);
}

#endif
