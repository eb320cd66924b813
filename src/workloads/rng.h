/*
 * rng.h - a small deterministic random number generator: xoshiro256**
 * seeded through splitmix64. Header-only.
 *
 * Used wherever "the same seed gives the same numbers on every peer" must
 * hold (parameter initialisation, the daemon's shuffling): the stream
 * depends only on the seed words, never on the platform's rand() or on
 * time. Not for cryptography.
 */
#ifndef RING_RNG_H
#define RING_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct rng {
    uint64_t s[4];
} rng_t;

/* splitmix64's finaliser: a bijection that spreads every input bit over the output. */
static inline uint64_t rng_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static inline uint64_t rng_splitmix64_next(uint64_t *x)
{
    *x += 0x9e3779b97f4a7c15ULL;
    return rng_mix64(*x);
}

/*
 * Seed from three words (e.g. the user's seed, a tag naming the purpose,
 * and a layer or epoch number), so that independent streams need no
 * arithmetic on seeds by the caller. Each word goes through the mixer
 * before the next is folded in, so (a, b, c) and (b, a, c) differ.
 */
static inline void rng_seed(rng_t *r, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t x = rng_mix64(a + 0x9e3779b97f4a7c15ULL);

    x = rng_mix64(x ^ b);
    x = rng_mix64(x ^ c);
    for (int i = 0; i < 4; i++)
        r->s[i] = rng_splitmix64_next(&x);
    /* all-zero is xoshiro's one fixed point; splitmix64 cannot give four zeros, but be sure */
    if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0)
        r->s[0] = 1;
}

static inline uint64_t rng_rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** (Blackman and Vigna, 2018). */
static inline uint64_t rng_next_u64(rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rng_rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl64(s[3], 45);
    return result;
}

/*
 * Uniform in [0, n) without modulo bias (Lemire's multiply-and-reject:
 * the low half of the 64-bit product is rejected below 2^32 mod n).
 * n == 0 gives 0.
 */
static inline uint32_t rng_uniform_u32_below(rng_t *r, uint32_t n)
{
    if (n == 0)
        return 0;
    uint64_t m = (uint64_t)(uint32_t)(rng_next_u64(r) >> 32) * n;
    uint32_t low = (uint32_t)m;

    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;

        while (low < threshold) {
            m = (uint64_t)(uint32_t)(rng_next_u64(r) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* Uniform in [0, 1): the top 24 bits, so every value is exactly representable. */
static inline float rng_uniform_float(rng_t *r)
{
    return (float)(rng_next_u64(r) >> 40) * 0x1.0p-24f;
}

/* Uniform in (0, 1] with 53 bits: never 0, so log() below is finite. */
static inline double rng_uniform_open0(rng_t *r)
{
    return (double)((rng_next_u64(r) >> 11) + 1) * 0x1.0p-53;
}

/*
 * Standard normal by Box-Muller. The second value of each pair is thrown
 * away: then every call consumes exactly two words and the state is only
 * s[], which keeps streams easy to reason about (and to reproduce).
 */
static inline double rng_normal(rng_t *r)
{
    double u1 = rng_uniform_open0(r);
    double u2 = (double)(rng_next_u64(r) >> 11) * 0x1.0p-53;

    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif /* RING_RNG_H */
