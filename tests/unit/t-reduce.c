/*
 * t-reduce.c - the one-pass n-input sum (kernels/sum_n_scalar.c, and
 * kernels/sum_n_simd.c's AVX2 and AVX-512 variants, each one this CPU can
 * run) that the ring and the direct allreduce run: the sum and its
 * non-temporal twin must give,
 * bit for bit, what nsrc - 1 pairwise passes in source order then a scale
 * give (every peer of a direct allreduce adds the same way, and its small
 * calls the same as its large ones), for every length (block remainders),
 * unaligned outputs, an output aliasing an input, and 1..9 inputs; the
 * non-temporal copy must equal memcpy at any alignment and length. Both sums
 * report an inf or NaN in their result (an input's, or an overflow) wherever
 * it is, and nothing when every sum is finite: the direct allreduce's only
 * inf/NaN check.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "mix64.h"
#include "reduce.h"
#include "tap.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rng32(void)
{
    return xorshift64_u32(&rng_state);
}

/* values whose sums round: mixed magnitudes and signs, some inf/NaN-free zeros */
static float rand_value(void)
{
    uint32_t k = rng32() % 8;
    float v = (float)(rng32() % 2000001) / 1000.0f - 1000.0f;

    return k == 0 ? 0.0f : k == 1 ? v * 1e-20f : k == 2 ? v * 1e20f : v;
}

#define MAXN 5000
#define MAXSRC 9
#define GUARD 12345.0f /* past the end of an output */

/* the reference: pairwise passes in source order, then the scale (plain
 * loops of its own: the library's pairwise sum runs the kernels under test) */
static void reference(float *out, float *const *src, int nsrc, float scale, size_t n)
{
    memcpy(out, src[0], n * sizeof(float));
    for (int s = 1; s < nsrc; s++)
        for (size_t i = 0; i < n; i++)
            out[i] = out[i] + src[s][i];
    if (scale != 1.0f)
        for (size_t i = 0; i < n; i++)
            out[i] = out[i] * scale;
}

static float in[MAXSRC][MAXN + 8];
static const size_t lens[] = {0, 1, 3, 15, 16, 17, 63, 64, 65, 127, 1000, 4099, MAXN};

typedef int (*sum_fn)(float *dst, float *dst2, const float *const *src, int nsrc, float scale,
                      size_t n, int stream);

static void battery(const char *name, sum_fn sum)
{
    static float want[MAXN + 8], a[MAXN + 8], b[MAXN + 8];
    int bad_sum = 0, bad_stream = 0, bad_alias = 0, bad_copy = 0, cases = 0;
    int bad_finite = 0, bad_flag = 0, flag_cases = 0;

    for (int nsrc = 1; nsrc <= MAXSRC; nsrc++) {
        for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
            for (int shift = 0; shift < 4; shift++) { /* outputs 0..3 floats off alignment */
                size_t n = lens[li];
                float scale = shift & 1 ? 1.0f / (float)nsrc : 1.0f;
                float *src[MAXSRC];
                const float *csrc[MAXSRC];

                for (int s = 0; s < nsrc; s++)
                    src[s] = in[s] + (size_t)s % 3, csrc[s] = src[s];
                reference(want, src, nsrc, scale, n);
                a[shift + n] = b[shift + n] = GUARD; /* nothing may be written past n */
                bad_finite += sum(a + shift, b + shift, csrc, nsrc, scale, n, 0);
                bad_sum += memcmp(a + shift, want, n * sizeof(float)) != 0 ||
                           memcmp(b + shift, want, n * sizeof(float)) != 0 ||
                           a[shift + n] != GUARD || b[shift + n] != GUARD;
                memset(a, 0, sizeof(a));
                memset(b, 0, sizeof(b));
                a[shift + n] = b[shift + n] = GUARD;
                bad_finite += sum(a + shift, b + shift, csrc, nsrc, scale, n, 1);
                bad_stream += memcmp(a + shift, want, n * sizeof(float)) != 0 ||
                              memcmp(b + shift, want, n * sizeof(float)) != 0 ||
                              a[shift + n] != GUARD || b[shift + n] != GUARD;
                /* the second output on the first input, as direct_big.c's in-place calls */
                {
                    static float own[MAXN + 8];

                    memcpy(own, src[0], n * sizeof(float));
                    csrc[0] = own;
                    sum(a, own, csrc, nsrc, scale, n, 1);
                    bad_alias += memcmp(own, want, n * sizeof(float)) != 0;
                }
                memset(a, 0, sizeof(a));
                ring_copy_f32_stream(a + shift, in[0] + (size_t)shift * 2, n);
                bad_copy += memcmp(a + shift, in[0] + (size_t)shift * 2, n * sizeof(float)) != 0 ||
                            a[shift + n] != 0.0f;
                cases++;
            }
        }
    }
    /* one inf, -inf or NaN in one input, or two FLT_MAX that overflow, at the
     * first, a middle and the last element (block remainders included) */
    for (int nsrc = 1; nsrc <= MAXSRC; nsrc += 2) {
        for (size_t li = 1; li < sizeof(lens) / sizeof(lens[0]); li++) {
            size_t n = lens[li], where[3] = {0, n / 2, n - 1};

            for (int w = 0; w < 3; w++) {
                for (int kind = 0; kind < 4; kind++) {
                    const float *csrc[MAXSRC];
                    int s = (int)(where[w] % (size_t)nsrc), got, got_stream;
                    float keep = in[s][where[w]], keep2 = in[(s + 1) % nsrc][where[w]];

                    if (kind == 3 && nsrc < 2)
                        continue;
                    in[s][where[w]] = kind == 0 ? INFINITY : kind == 1 ? -INFINITY
                                      : kind == 2 ? NAN : FLT_MAX;
                    if (kind == 3)
                        in[(s + 1) % nsrc][where[w]] = FLT_MAX;
                    for (int k = 0; k < nsrc; k++)
                        csrc[k] = in[k];
                    got = sum(a, b, csrc, nsrc, 1.0f / (float)nsrc, n, 0);
                    got_stream = sum(a, b + 1, csrc, nsrc, 1.0f, n, 1);
                    bad_flag += got != 1 || got_stream != 1;
                    in[s][where[w]] = keep;
                    in[(s + 1) % nsrc][where[w]] = keep2;
                    flag_cases++;
                }
            }
        }
    }
    ok(bad_finite == 0, "%s: both sums report no inf/NaN when every sum is finite (%d of %d "
       "cases did)", name, bad_finite, 2 * cases);
    ok(bad_flag == 0, "%s: both sums report an inf, -inf, NaN or overflow at the first, a "
       "middle or the last element (%d of %d cases missed it)", name, bad_flag, flag_cases);
    ok(bad_sum == 0, "%s: the sum has the bits of pairwise passes in source order, then the "
       "scale, in both outputs, nothing past them (%d of %d cases differ)", name, bad_sum, cases);
    ok(bad_stream == 0, "%s: the streamed sum, the same bits, the second output streamed at any "
       "alignment (%d of %d differ)", name, bad_stream, cases);
    ok(bad_alias == 0, "%s: the streamed output on its first input (in place): the same bits "
       "(%d of %d differ)", name, bad_alias, cases);
    if (strcmp(name, "scalar") == 0) /* one copy, whatever the variant */
        ok(bad_copy == 0, "ring_copy_f32_stream equals memcpy at any alignment and length, "
           "writing nothing past it (%d of %d differ)", bad_copy, cases);
}

int main(void)
{
    static const char *const variants[] = {"scalar", "avx2", "avx512"};
    static float want[MAXN], got[MAXN + 1], second[MAXN];
    int bad_pair = 0;

    plan(1 + 5 * 3 + 2);
    for (int s = 0; s < MAXSRC; s++)
        for (size_t i = 0; i < MAXN + 8; i++)
            in[s][i] = rand_value();
    for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
        const ring_codec_ops_t *ops = ring_codec_ops_get(variants[v]);

        if (ops == NULL) {
            for (int k = 0; k < 5; k++)
                skip(strcmp(variants[v], "avx512") == 0
                         ? "avx512: this CPU (or build) cannot run it"
                         : "avx2: this CPU (or build) cannot run it");
            continue;
        }
        battery(variants[v], ops->sum_n_f32);
    }
    /* what the library calls: the chosen variant, and the pairwise sum on it */
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        size_t n = lens[li];

        for (size_t i = 0; i < n; i++)
            want[i] = in[0][i] + in[1][i];
        got[n] = 1.0f;
        ring_reduce_sum_f32(got, in[0], in[1], n);
        bad_pair += memcmp(got, want, n * sizeof(float)) != 0 || got[n] != 1.0f;
        memcpy(got, in[0], n * sizeof(float));
        ring_reduce_sum_f32(got, got, in[1], n); /* in place, as the ring's steps */
        bad_pair += memcmp(got, want, n * sizeof(float)) != 0;
    }
    ok(bad_pair == 0, "ring_reduce_sum_f32 (%s): a + b, in place too, writing nothing past n "
       "(%d differ)", ring_codec_ops()->name, bad_pair);
    {
        const float *csrc[3] = {in[0], in[1], in[2]};
        int flagged;

        reference(want, (float *const[]){in[0], in[1], in[2]}, 3, 0.5f, MAXN);
        flagged = ring_reduce_sum_n_f32_stream(got, second, csrc, 3, 0.5f, MAXN);
        ok(flagged == 0 && memcmp(got, want, sizeof(want)) == 0 &&
               memcmp(second, want, sizeof(want)) == 0,
           "ring_reduce_sum_n_f32_stream on the variant chosen (%s) gives the same bits",
           ring_codec_ops_choice());
    }
    return done_testing();
}
