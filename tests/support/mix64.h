/*
 * mix64.h - SplitMix64's finalizer: a well-mixed 64-bit value from a counter,
 * for test data every rank can regenerate from (seed, rank, index) alone.
 * Header-only.
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

#endif
