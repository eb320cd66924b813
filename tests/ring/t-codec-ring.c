/*
 * t-codec-ring.c - allreduce with fp16 and bf16 on the wire, across real
 * processes on 127.0.0.1: results bitwise identical on every peer and
 * within a derived error bound of a double-precision reference; scaling
 * against overflow and underflow; inf/NaN reported on every peer.
 *
 * Error bound. A ring encodes the running partial sum of element i N times:
 * once when its first peer sends it at reduce-scatter step 0, then once on
 * every one of the N-1 reduce-scatter steps, when the receiver adds its own
 * value and encodes the sum again; allgather forwards the encoded bits
 * unchanged and decoding is exact.
 * Each encode adds at most u * |partial sum| (u = 2^-11 for fp16, whose
 * significand has 11 bits, 2^-8 for bf16), plus, for scaled fp16, half the
 * smallest subnormal step 2^(e-25) with 2^e <= bound * 2^-14 (while the
 * scale's clamp to 2^-100..2^100 does not bind; below it, 2^-125: see
 * t-codec-range.c, which tests the edges of the range); the fp32
 * additions add 2^-24 * |partial|. Every partial sum is at most
 * S = sum over ranks of |x_r,i|, so
 *     |err| <= N * (u + 2^-24) * S + N * 2^-39 * B
 * where B is the chunk's bound (<= max over the chunk of S). Averages
 * pre-scale by 1/N (exact for N a power of two, within 2^-24 otherwise):
 * the same bound divided by N, plus 2^-24 * S / N.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "harness.h"
#include "mix64.h"
#include "tap.h"

#define V_STATUS 0     /* status of each allreduce: 10 + i */
#define V_WRONG 40     /* elements outside the bound: 40 + i */
#define V_HASH 80      /* result hash: 80 + i */
#define V_RATIO 120    /* largest err / bound, as a double: 120 + i */
#define V_FRAMES 160   /* ring_comm_stats after the last op */
#define V_LZ4 161
#define V_PAYLOAD 162
#define V_RAW 163
#define V_ACC_ERR 170  /* error feedback: largest accumulated error, as a double */
#define V_EXACT 171    /* RING_CALL_EXACT: the result equals the exact sum */
#define MAX_OPS 24

typedef enum gen_kind {
    GEN_UNIFORM,
    GEN_BIG,
    GEN_TINY,
    GEN_NAN_ON_RANK1,
    GEN_SPARSE,
    GEN_BIG_HALF /* 2.5e4..3.5e4: fits fp16, but three of them do not */
} gen_kind_t;

typedef struct cop {
    size_t count;
    ring_op_t op;
    ring_dtype_t dtype;    /* the user's buffer: float32, or float16/bfloat16 */
    gen_kind_t kind;
    int expect_nonfinite;
} cop_t;

typedef struct ccase {
    const char *codec;
    uint64_t seed;
    int corrupt_rank;      /* this rank sends corrupt lz4 chunks (RING_FAULT), or -1 */
    int rounds;            /* error feedback: rounds of the same allreduce */
    int nops;
    cop_t ops[MAX_OPS];
} ccase_t;

static float gen(const ccase_t *c, int op, int rank, size_t i)
{
    uint64_t h = mix64(mix64(c->seed * 31 + (uint64_t)op * 1009 + (uint64_t)rank) ^ i);
    double u = (double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0; /* [-1, 1) */

    switch (c->ops[op].kind) {
    case GEN_BIG:
        return (float)(1e5 * (1.0 + 0.5 * u)); /* 5e4..1.5e5: fp16 overflows without scaling */
    case GEN_TINY:
        return (float)(1e-8 * (1.0 + 0.5 * u)); /* below fp16's smallest subnormal (6e-8) */
    case GEN_BIG_HALF:
        return (float)(3e4 * (1.0 + u / 6.0));
    case GEN_SPARSE:
        /* 90% exact zeros, like a sparse gradient */
        return (h >> 56) % 10 < 9 ? 0.0f : (float)(u * 0.01);
    case GEN_NAN_ON_RANK1:
        if (rank == 1 && i == c->ops[op].count / 2)
            return NAN;
        return (float)u;
    default:
        /* a few orders of magnitude, like gradients */
        return (float)(u * ldexp(1.0, (int)(h & 7) - 4));
    }
}

/* Input element as the user's dtype holds it (half buffers round it first). */
static double input(const ccase_t *c, int op, int rank, size_t i)
{
    float x = gen(c, op, rank, i);

    switch (c->ops[op].dtype) {
    case RING_FLOAT16:
        return ring_f16_to_f32(ring_f32_to_f16(x));
    case RING_BFLOAT16:
        return ring_bf16_to_f32(ring_f32_to_bf16(x));
    default:
        return x;
    }
}

static double result_at(const cop_t *o, const void *buf, size_t i)
{
    switch (o->dtype) {
    case RING_FLOAT16:
        return ring_f16_to_f32(((const uint16_t *)buf)[i]);
    case RING_BFLOAT16:
        return ring_bf16_to_f32(((const uint16_t *)buf)[i]);
    default:
        return ((const float *)buf)[i];
    }
}

static uint64_t hash_floats(const float *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)p;

    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int codec_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const ccase_t *c = arg;
    ring_comm_t *comm;
    ring_comm_stats_t stats;
    ring_status_t st;

    if (rank == c->corrupt_rank)
        setenv("RING_FAULT", "lz4-corrupt", 1);
    st = ring_comm_open(cfg, &comm);

    if (st != RING_OK)
        return h_fail(st, "open");
    for (int k = 0; k < c->nops; k++) {
        const cop_t *o = &c->ops[k];
        size_t esize = o->dtype == RING_FLOAT32 ? 4 : 2;
        float *buf = malloc((o->count + 1) * sizeof(float));
        uint16_t *half = (uint16_t *)buf;
        /* a half-precision result is rounded once more, to the user's dtype */
        double u_out = o->dtype == RING_FLOAT16    ? ldexp(1, -11)
                       : o->dtype == RING_BFLOAT16 ? ldexp(1, -8)
                                                   : 0;
        /* what travels: the codec, or else the user's dtype */
        int wire_bf16 = strcmp(c->codec, "bf16") == 0 ||
                        (strcmp(c->codec, "none") == 0 && o->dtype == RING_BFLOAT16);
        double u = wire_bf16 ? ldexp(1, -8) : ldexp(1, -11);
        size_t wrong = 0;
        double worst = 0;

        if (buf == NULL)
            return h_fail(RING_ERR_NO_MEMORY, "malloc");
        for (size_t i = 0; i < o->count; i++) {
            if (o->dtype == RING_FLOAT16)
                half[i] = ring_f32_to_f16(gen(c, k, rank, i));
            else if (o->dtype == RING_BFLOAT16)
                half[i] = ring_f32_to_bf16(gen(c, k, rank, i));
            else
                buf[i] = gen(c, k, rank, i);
        }
        st = ring_allreduce(comm, buf, buf, o->count, o->dtype, o->op);
        h_put(V_STATUS + k, (uint64_t)st);
        if (st != RING_OK && st != RING_ERR_NONFINITE) {
            free(buf);
            h_fail(st, "allreduce");
            ring_comm_close(comm);
            return 3;
        }
        if (st == RING_ERR_NONFINITE)
            h_msg("%s", ring_last_error());
        h_put(V_HASH + k, hash_floats(buf, o->count * esize / sizeof(float)));
        if (!o->expect_nonfinite) {
            double bmax = 0;
            for (size_t i = 0; i < o->count; i++) {
                double a = 0;
                for (int r = 0; r < n; r++)
                    a += fabs(input(c, k, r, i));
                if (a > bmax)
                    bmax = a;
            }
            for (size_t i = 0; i < o->count; i++) {
                double s = 0, a = 0, tol, err;
                for (int r = 0; r < n; r++) {
                    double x = input(c, k, r, i);
                    s += x;
                    a += fabs(x);
                }
                tol = n * (u + ldexp(1, -24)) * a + n * ldexp(1, -39) * bmax;
                if (o->op == RING_AVG) {
                    s /= n;
                    tol = tol / n + ldexp(1, -24) * a / n;
                }
                tol += u_out * (fabs(s) + tol);
                tol = tol * 1.0001 + 1e-38;
                err = fabs(result_at(o, buf, i) - s);
                if (!(err <= tol))
                    wrong++;
                if (err / tol > worst)
                    worst = err / tol;
            }
        }
        h_put(V_WRONG + k, wrong);
        h_put_double(V_RATIO + k, worst);
        free(buf);
    }
    ring_comm_get_stats(comm, &stats);
    h_put(V_FRAMES, stats.frames_sent);
    h_put(V_LZ4, stats.frames_lz4);
    h_put(V_PAYLOAD, stats.payload_bytes);
    h_put(V_RAW, stats.raw_bytes);
    ring_comm_close(comm);
    return 0;
}

/*
 * Error feedback: the same average, c->rounds times. Without it every round
 * rounds the same way and the error of the running total grows with the
 * rounds; with it what one round lost is sent in the next, so the total
 * stays within about one round's error.
 */
static int ef_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    const ccase_t *c = arg;
    size_t count = c->ops[0].count;
    float *buf = malloc(count * sizeof(float));
    double *acc = calloc(count, sizeof(double)), worst = 0;
    ring_comm_t *comm;
    ring_status_t st = ring_comm_open(cfg, &comm);

    if (st != RING_OK || buf == NULL || acc == NULL)
        return h_fail(st != RING_OK ? st : RING_ERR_NO_MEMORY, "open");
    for (int t = 0; t < c->rounds; t++) {
        for (size_t i = 0; i < count; i++)
            buf[i] = gen(c, 0, rank, i);
        st = ring_allreduce(comm, buf, buf, count, RING_FLOAT32, RING_AVG);
        if (st != RING_OK) {
            h_fail(st, "allreduce");
            ring_comm_close(comm);
            return 3;
        }
        for (size_t i = 0; i < count; i++)
            acc[i] += buf[i];
    }
    for (size_t i = 0; i < count; i++) {
        double s = 0;
        for (int r = 0; r < n; r++)
            s += gen(c, 0, r, i);
        s = s / n * c->rounds;
        if (fabs(acc[i] - s) > worst)
            worst = fabs(acc[i] - s);
    }
    h_put_double(V_ACC_ERR, worst);
    free(buf);
    free(acc);
    ring_comm_close(comm);
    return 0;
}

/*
 * RING_CALL_EXACT under codec fp16: values fp16 cannot hold (1 + rank/2^20)
 * arrive as their exact fp32 sum. corrupt_rank names a rank that leaves the
 * flag out: then every rank must fail instead of mixing wire formats.
 */
static int exact_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    int odd_rank = ((const ccase_t *)arg)->corrupt_rank;
    float v[3], want[3] = {0, 0, 0};
    ring_comm_t *comm;
    ring_request_t *req;
    ring_status_t st = ring_comm_open(cfg, &comm);

    if (st != RING_OK)
        return h_fail(st, "open");
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 3; i++)
            want[i] += 1.0f + (float)(r + i) / (float)(1 << 20);
    for (int i = 0; i < 3; i++)
        v[i] = 1.0f + (float)(rank + i) / (float)(1 << 20);
    st = ring_allreduce_start_flags(comm, v, v, 3, RING_FLOAT32, RING_SUM, 5,
                                    rank == odd_rank ? 0 : RING_CALL_EXACT, &req);
    if (st == RING_OK)
        st = ring_request_wait(req);
    if (st != RING_OK) {
        h_fail(st, "exact allreduce");
        ring_comm_close(comm);
        return 3;
    }
    h_put(V_EXACT, memcmp(v, want, sizeof(v)) == 0);
    ring_comm_close(comm);
    return 0;
}

static h_run_t the_run;

static void run_ring(const char *label, int n, ccase_t *c, const h_setting_t *extra,
                     h_rank_fn fn)
{
    h_setting_t settings[8];
    int ns = 0;
    h_ring_spec_t rs = {.label = label, .n = n, .settings = settings, .fn = fn, .arg = c,
                        .budget = 60, .run = &the_run};

    settings[ns++] = (h_setting_t){-1, "codec", c->codec};
    for (int i = 0; extra != NULL && extra[i].name != NULL; i++)
        settings[ns++] = extra[i];
    settings[ns] = (h_setting_t){0, NULL, NULL};
    h_run_ring(&rs);
}

static void run_codec(const char *label, int n, ccase_t *c, const h_setting_t *extra)
{
    char d[96];

    run_ring(label, n, c, extra, codec_child);
    for (int r = 0; r < n; r++)
        if (!ok(the_run.r[r].exited && the_run.r[r].code == 0, "%s: rank %d exits 0 (%s)", label,
                r, h_describe(&the_run.r[r], d, sizeof(d))))
            h_diag(&the_run);
    for (int k = 0; k < c->nops; k++) {
        const cop_t *o = &c->ops[k];
        int same = 1, status_ok = 1, within = 1;
        double worst = 0;
        ring_status_t want = o->expect_nonfinite ? RING_ERR_NONFINITE : RING_OK;

        for (int r = 0; r < n; r++) {
            same &= h_val(&the_run.r[r], V_HASH + k, 1) == h_val(&the_run.r[0], V_HASH + k, 2);
            status_ok &= h_val(&the_run.r[r], V_STATUS + k, 99) == (uint64_t)want;
            within &= h_val(&the_run.r[r], V_WRONG + k, 1) == 0;
            if (h_val_double(&the_run.r[r], V_RATIO + k, 0) > worst)
                worst = h_val_double(&the_run.r[r], V_RATIO + k, 0);
        }
        ok(status_ok, "%s: #%d count %zu %s: every rank gets %s", label, k, o->count,
           o->op == RING_AVG ? "avg" : "sum", ring_status_str(want));
        if (!o->expect_nonfinite) {
            ok(same, "%s: #%d: bitwise identical on all %d ranks", label, k, n);
            ok(within, "%s: #%d: every element within the derived bound (worst err/bound %.3f)",
               label, k, worst);
        } else {
            like(the_run.r[0].msg, "inf or NaN", "%s: #%d: the message says inf or NaN", label,
                 k);
        }
    }
}

static void add_typed(ccase_t *c, size_t count, ring_op_t op, ring_dtype_t dtype, gen_kind_t kind,
                      int nonfinite)
{
    c->ops[c->nops++] = (cop_t){count, op, dtype, kind, nonfinite};
}

static void add(ccase_t *c, size_t count, ring_op_t op, gen_kind_t kind, int nonfinite)
{
    add_typed(c, count, op, RING_FLOAT32, kind, nonfinite);
}

int main(void)
{
    static const char *const codecs[] = {"fp16", "bf16"};
    static const h_setting_t small_chunks[] = {{-1, "chunk-size", "4K"}, {0, NULL, NULL}};
    static const h_setting_t no_scaling[] = {{-1, "fp16-scaling", "off"}, {0, NULL, NULL}};
    static const h_setting_t lz4_on[] = {{-1, "lz4", "on"}, {0, NULL, NULL}};
    static const h_setting_t lz4_auto[] = {{-1, "lz4", "auto"}, {0, NULL, NULL}};
    static const h_setting_t ef_on[] = {{-1, "error-feedback", "on"}, {0, NULL, NULL}};
    ccase_t c;
    char label[96];
    double t0 = h_now();

    for (int ci = 0; ci < 2; ci++) {
        for (int n = 2; n <= 4; n++) {
            memset(&c, 0, sizeof(c));
            c.corrupt_rank = -1;
            c.codec = codecs[ci];
            c.seed = 100 + (uint64_t)(ci * 10 + n);
            add(&c, 1, RING_SUM, GEN_UNIFORM, 0);
            add(&c, 1009, RING_AVG, GEN_UNIFORM, 0);
            add(&c, 65537, RING_SUM, GEN_UNIFORM, 0);
            add(&c, (1u << 20) + 5, RING_AVG, GEN_UNIFORM, 0);
            add(&c, 4099, RING_SUM, GEN_BIG, 0);
            add(&c, 4099, RING_SUM, GEN_NAN_ON_RANK1, 1);
            add(&c, 777, RING_SUM, GEN_UNIFORM, 0); /* still usable after a non-finite round */
            snprintf(label, sizeof(label), "%s N=%d", c.codec, n);
            run_codec(label, n, &c, n == 3 ? small_chunks : NULL);
        }
    }

    /* fp16 scaling: 1e5 overflows fp16 (max 65504) and 1e-8 flushes to zero without it */
    memset(&c, 0, sizeof(c));
    c.corrupt_rank = -1;
    c.codec = "fp16";
    c.seed = 7;
    add(&c, 10007, RING_SUM, GEN_BIG, 0);
    add(&c, 10007, RING_AVG, GEN_TINY, 0);
    run_codec("fp16 scaled: 1e5 and 1e-8", 3, &c, NULL);

    memset(&c, 0, sizeof(c));
    c.corrupt_rank = -1;
    c.codec = "fp16";
    c.seed = 8;
    add(&c, 10007, RING_SUM, GEN_BIG, 1);
    run_codec("fp16 without scaling: 1e5 overflows", 3, &c, no_scaling);

    /* fp32 on the wire reports inf/NaN too */
    memset(&c, 0, sizeof(c));
    c.corrupt_rank = -1;
    c.codec = "none";
    c.seed = 9;
    add(&c, 4099, RING_SUM, GEN_NAN_ON_RANK1, 1);
    add(&c, 4099, RING_AVG, GEN_UNIFORM, 0);
    run_codec("fp32 with a NaN on rank 1", 3, &c, NULL);

    /* half-precision user buffers: fp16 or bf16 in and out, fp32 sums inside */
    {
        static const char *const wires[] = {"none", "fp16"};
        for (int wi = 0; wi < 2; wi++) {
            memset(&c, 0, sizeof(c));
            c.corrupt_rank = -1;
            c.codec = wires[wi];
            c.seed = 20 + (uint64_t)wi;
            add_typed(&c, 1009, RING_SUM, RING_FLOAT16, GEN_UNIFORM, 0);
            add_typed(&c, 65537, RING_AVG, RING_FLOAT16, GEN_UNIFORM, 0);
            add_typed(&c, 1009, RING_SUM, RING_BFLOAT16, GEN_UNIFORM, 0);
            add_typed(&c, 65537, RING_AVG, RING_BFLOAT16, GEN_UNIFORM, 0);
            /* sums above 65504 do not fit the user's fp16 buffer: reported, not silent inf */
            add_typed(&c, 4099, RING_SUM, RING_FLOAT16, GEN_BIG_HALF, 1);
            add_typed(&c, 777, RING_SUM, RING_FLOAT16, GEN_UNIFORM, 0);
            snprintf(label, sizeof(label), "half buffers, codec %s", c.codec);
            run_codec(label, 3, &c, NULL);
        }
    }

    /* lz4 on a 90%-sparse gradient: it shrinks, and the result is still right */
    memset(&c, 0, sizeof(c));
    c.corrupt_rank = -1;
    c.codec = "fp16";
    c.seed = 10;
    add(&c, (1u << 20) + 3, RING_AVG, GEN_SPARSE, 0);
    run_codec("fp16 + lz4 on", 3, &c, lz4_on);
    {
        uint64_t lz4 = h_val(&the_run.r[0], V_LZ4, 0), payload = h_val(&the_run.r[0], V_PAYLOAD, 0);
        uint64_t raw = h_val(&the_run.r[0], V_RAW, 1);
        ok(lz4 > 0 && payload * 2 < raw,
           "fp16 + lz4 on: rank 0 sent %llu of %llu frames compressed, %llu of %llu bytes",
           (unsigned long long)lz4, (unsigned long long)h_val(&the_run.r[0], V_FRAMES, 0),
           (unsigned long long)payload, (unsigned long long)raw);
    }

    /* lz4 auto on a dense gradient: gives up after a few chunks */
    memset(&c, 0, sizeof(c));
    c.corrupt_rank = -1;
    c.codec = "fp16";
    c.seed = 11;
    add(&c, (1u << 20) + 3, RING_SUM, GEN_UNIFORM, 0);
    add(&c, (1u << 20) + 3, RING_SUM, GEN_UNIFORM, 0);
    run_codec("fp16 + lz4 auto, dense", 2, &c, lz4_auto);
    {
        uint64_t frames = h_val(&the_run.r[0], V_FRAMES, 0);
        uint64_t lz4 = h_val(&the_run.r[0], V_LZ4, 99);
        ok(lz4 == 0 && frames > 8, "fp16 + lz4 auto, dense: no frame compressed (%llu of %llu)",
           (unsigned long long)lz4, (unsigned long long)frames);
    }

    /* a peer that sends corrupt lz4: its right neighbour says so, naming it; nobody hangs */
    memset(&c, 0, sizeof(c));
    c.corrupt_rank = 1;
    c.codec = "fp16";
    c.seed = 12;
    add(&c, 65537, RING_SUM, GEN_SPARSE, 0);
    run_ring("corrupt lz4 from rank 1", 3, &c, lz4_on, codec_child);
    {
        char addr[80];
        int all_failed = 1;

        h_addr(&the_run, 1, addr, sizeof(addr));
        for (int r = 0; r < 3; r++)
            all_failed &= the_run.r[r].exited && the_run.r[r].code != 0;
        ok(all_failed, "corrupt lz4 from rank 1: every rank fails (no hang)");
        is_int(the_run.r[2].status, RING_ERR_PROTOCOL,
               "corrupt lz4 from rank 1: rank 2 gets RING_ERR_PROTOCOL");
        like(the_run.r[2].msg, "corrupt lz4 chunk", "corrupt lz4: rank 2 says corrupt lz4 chunk");
        like(the_run.r[2].msg, addr, "corrupt lz4: rank 2 names rank 1 (%s)", addr);
    }

    /* per-call exact: control values pass a fp16 ring unrounded; peers must agree on it */
    {
        int all_exact = 1, all_failed = 1;

        memset(&c, 0, sizeof(c));
        c.corrupt_rank = -1;
        c.codec = "fp16";
        run_ring("RING_CALL_EXACT", 3, &c, NULL, exact_child);
        for (int r = 0; r < 3; r++)
            all_exact &= the_run.r[r].exited && the_run.r[r].code == 0 &&
                         h_val(&the_run.r[r], V_EXACT, 0) == 1;
        ok(all_exact, "RING_CALL_EXACT under codec fp16: the exact fp32 sum on all 3 ranks");
        memset(&c, 0, sizeof(c));
        c.corrupt_rank = 1;
        c.codec = "fp16";
        run_ring("RING_CALL_EXACT on 2 of 3", 3, &c, NULL, exact_child);
        for (int r = 0; r < 3; r++)
            all_failed &= the_run.r[r].exited && the_run.r[r].code != 0;
        ok(all_failed, "RING_CALL_EXACT on 2 ranks of 3: every rank fails (no mixed formats)");
        like(the_run.r[1].msg, "bytes", "RING_CALL_EXACT mismatch: rank 1 names the frame sizes");
    }

    /* error feedback over 100 rounds of the same bf16 average */
    {
        double err_off, err_on;

        memset(&c, 0, sizeof(c));
        c.corrupt_rank = -1;
        c.codec = "bf16";
        c.seed = 13;
        c.rounds = 100;
        add(&c, 4099, RING_AVG, GEN_UNIFORM, 0);
        run_ring("bf16, 100 rounds, no error feedback", 2, &c, NULL, ef_child);
        err_off = h_val_double(&the_run.r[0], V_ACC_ERR, -1);
        run_ring("bf16, 100 rounds, error feedback", 2, &c, ef_on, ef_child);
        err_on = h_val_double(&the_run.r[0], V_ACC_ERR, -1);
        ok(err_off > 0 && err_on >= 0 && err_on * 10 < err_off,
           "error feedback: accumulated error over 100 rounds %.3g, without it %.3g (%.0fx less)",
           err_on, err_off, err_on > 0 ? err_off / err_on : 0.0);
    }

    diag("t-codec-ring: %.1f s", h_now() - t0);
    return done_testing();
}
