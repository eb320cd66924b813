/*
 * t-cuda-device.c - the device data path on a real GPU (category gpu; the
 * same logic runs everywhere against a fake device in t-cuda-pipeline):
 *   - rings of 2 and 3 processes sharing the GPU, fp32 device buffers with
 *     fp16 and bf16 on the wire, 4 KiB chunks (many chunks, stage slots
 *     reused), values spread over 2^-30..2^30 so the scaling exponents
 *     matter: every result bitwise equal to the same allreduce of host
 *     buffers on the same rank (the kernels compute the oracle's bits),
 *     and the same on every rank;
 *   - the caller's stream: on a stream of the test's own, a long copy and
 *     then the input's copy are queued right before
 *     ring_allreduce_start_stream (a library that read the buffer before
 *     the stream reached the call would read the garbage under it), and
 *     the output's copy right after ring_request_wait_stream; the host
 *     then waits for that stream alone;
 *   - ring_request_wait: the result is in device memory when it returns;
 *   - ring_cuda_absmax_ranges against the CPU's absmax of each range.
 * Without a device (or built without CUDA): skipped, as t-cuda is.
 * T_CUDA_DEVICE_QUICK=1 runs one ring of 2 and the four smallest sizes (for
 * compute-sanitizer, under which every launch is slow).
 *
 * CUDA cannot be used in a child forked after the parent initialised it:
 * the probe and the rings fork before this process makes a CUDA call.
 */
#include "ring_build.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codec.h"
#include "cuda/ring_cuda.h"
#include "harness.h"
#include "mix64.h"
#include "tap.h"

#define NOPS 8
#define V_BAD 0      /* elements of op i unlike the host run: V_BAD + i */
#define V_STATUS 10  /* status of op i */
#define V_HASH 20    /* FNV-1a of op i's result */
#define V_STAGE 40   /* 1 when a setup call (malloc, stream, copies) failed */
#define BIG_COPY ((size_t)64 << 20) /* the long copy queued before the input */

static const size_t sizes[NOPS] = {1, 7, 4099, 65537, 1048579, 262147, 12289, 40961};

/* about N(0,1) * 2^e with e in [-30, 30], one value in 16 exactly 0 */
static float wide_value(uint64_t *s)
{
    uint64_t x = mix64((*s)++);
    double m;
    int e;

    if ((x & 15) == 0)
        return 0.0f;
    m = ((double)(x >> 11 & 0xfffff) / 1048576.0 - 0.5) * 4.0;
    e = (int)((x >> 40) % 61) - 30;
    return (float)ldexp(m, e);
}

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* One op on the device: stream semantics (odd ops) or ring_request_wait (even ops). */
static ring_status_t device_op(ring_comm_t *comm, int i, const float *in, float *out, size_t count,
                               void *d_send, void *d_recv, void *d_big, void *stream)
{
    size_t bytes = count * sizeof(float);
    ring_op_t op = i % 2 ? RING_SUM : RING_AVG;
    ring_request_t *req;
    ring_status_t st;

    /* garbage under the input, then the long copy and the input on the caller's stream */
    memset(out, 0xa5, bytes);
    if (ring_cuda_memcpy_h2d(d_send, out, bytes) != 0 ||
        ring_cuda_memcpy_d2d_async((char *)d_big + BIG_COPY, d_big, BIG_COPY, stream) != 0 ||
        ring_cuda_memcpy_h2d_async(d_send, in, bytes, stream) != 0)
        return RING_ERR_IO;
    st = ring_allreduce_start_stream(comm, d_send, d_recv, count, RING_FLOAT32, op, (uint32_t)i, 0,
                                     stream, &req);
    if (st != RING_OK)
        return st;
    if (i % 2) {
        st = ring_request_wait_stream(req, stream);
        if (ring_cuda_memcpy_d2h_async(out, d_recv, bytes, stream) != 0 ||
            ring_cuda_stream_sync(stream) != 0)
            return RING_ERR_IO;
    } else {
        st = ring_request_wait(req);
        if (ring_cuda_memcpy_d2h(out, d_recv, bytes) != 0)
            return RING_ERR_IO;
    }
    return st;
}

static int nops(void)
{
    const char *quick = getenv("T_CUDA_DEVICE_QUICK");

    return quick != NULL && strcmp(quick, "1") == 0 ? 4 : NOPS;
}

static int ring_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    size_t most = sizes[4] * sizeof(float);
    float *in = malloc(most), *want = malloc(most), *out = malloc(most);
    void *d_send = NULL, *d_recv = NULL, *d_big = NULL, *stream = NULL;
    uint64_t seed = 0x1234567ull * (uint64_t)(rank + 1);
    ring_comm_t *comm;
    ring_status_t st;
    int failed = 0;

    (void)n, (void)arg;
    if (in == NULL || want == NULL || out == NULL)
        return h_fail(RING_ERR_NO_MEMORY, "malloc");
    st = ring_comm_open(cfg, &comm);
    if (st != RING_OK)
        return h_fail(st, "ring_comm_open");
    if (ring_cuda_malloc(most, &d_send) != 0 || ring_cuda_malloc(most, &d_recv) != 0 ||
        ring_cuda_malloc(2 * BIG_COPY, &d_big) != 0 || ring_cuda_stream_create(&stream) != 0) {
        h_put(V_STAGE, 1);
        h_msg("device set-up failed (malloc or stream)");
        ring_comm_close(comm);
        return 1;
    }
    for (int i = 0; i < nops(); i++) {
        size_t count = sizes[i];
        int inplace = i % 4 >= 2;
        uint64_t bad = 0;

        for (size_t e = 0; e < count; e++)
            in[e] = wide_value(&seed);
        st = ring_allreduce(comm, in, want, count, RING_FLOAT32, i % 2 ? RING_SUM : RING_AVG);
        if (st == RING_OK)
            st = device_op(comm, i, in, out, count, d_send, inplace ? d_send : d_recv, d_big,
                           stream);
        for (size_t e = 0; st == RING_OK && e < count; e++)
            bad += memcmp(&out[e], &want[e], sizeof(float)) != 0;
        h_put(V_STATUS + i, (uint64_t)st);
        h_put(V_BAD + i, bad);
        h_put(V_HASH + i, fnv(out, count * sizeof(float)));
        if (st != RING_OK)
            h_msg("op %d: %s", i, ring_last_error());
        failed += st != RING_OK || bad != 0;
    }
    ring_comm_close(comm);
    (void)ring_cuda_stream_destroy(stream);
    (void)ring_cuda_free(d_send), (void)ring_cuda_free(d_recv), (void)ring_cuda_free(d_big);
    free(in), free(want), free(out);
    return failed ? 1 : 0;
}

static h_run_t the_run; /* large: not on the stack */

static void test_ring(int n, const char *codec, const char *channels)
{
    h_setting_t settings[] = {{-1, "codec", codec}, {-1, "chunk-size", "4K"},
                              {-1, "channels", channels}, {0, NULL, NULL}};
    h_ring_spec_t rs = {.n = n, .settings = settings, .fn = ring_child, .budget = 120,
                        .run = &the_run};
    int good = 1;

    h_run_ring(&rs);
    for (int r = 0; r < n; r++) {
        const h_result_t *res = &the_run.r[r];

        good &= res->exited && res->code == 0 && h_val(res, V_STAGE, 0) == 0;
        for (int i = 0; i < nops(); i++)
            good &= h_val(res, V_STATUS + i, 99) == RING_OK && h_val(res, V_BAD + i, 1) == 0 &&
                    h_val(res, V_HASH + i, 0) == h_val(&the_run.r[0], V_HASH + i, 1);
    }
    if (!ok(good, "%d peers, codec %s, %s channel(s), 4K chunks: every device result bitwise "
            "equal to the host run and on every rank; the caller's stream respected", n, codec,
            channels)) {
        h_diag(&the_run);
        for (int r = 0; r < n; r++)
            for (int i = 0; i < nops(); i++)
                diag("    rank %d op %d (%zu floats): status %llu, %llu unlike the host run", r, i,
                     sizes[i], (unsigned long long)h_val(&the_run.r[r], V_STATUS + i, 99),
                     (unsigned long long)h_val(&the_run.r[r], V_BAD + i, 1));
    }
}

/* 1 when a fresh process sees a device (so this one has not touched CUDA) */
static int probe_device(void)
{
    int wstatus;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid < 0)
        bail("fork: %m");
    if (pid == 0) {
        alarm(30);
        _exit(ring_cuda_available() ? 1 : 0);
    }
    if (waitpid(pid, &wstatus, 0) != pid)
        bail("waitpid: %m");
    return WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 1;
}

static void test_absmax_ranges(void)
{
    enum { N = 300007, R = 7 };
    size_t offs[R] = {0, 1, 4096, 100000, 250000, 299999, 17}, lens[R] = {0, 4095, 95904, 150000,
                                                                           50007, 8, 1};
    float *h = malloc(N * sizeof(float)), max[R];
    int nonfinite[R], good = 1;
    uint64_t seed = 42;
    void *d = NULL;
    const ring_codec_ops_t *k = ring_codec_ops_get("scalar");

    if (h == NULL || k == NULL)
        bail("absmax_ranges: set-up");
    for (size_t i = 0; i < N; i++)
        h[i] = wide_value(&seed);
    h[100500] = INFINITY; /* in range 3 */
    h[299999] = NAN;      /* in range 5: NaNs do not count as the largest, but are nonfinite */
    if (ring_cuda_malloc(N * sizeof(float), &d) != 0 || ring_cuda_memcpy_h2d(d, h, N * sizeof(float)) ||
        ring_cuda_absmax_ranges(d, offs, lens, R, max, nonfinite, NULL) != 0)
        good = 0;
    for (int r = 0; good && r < R; r++) {
        int nf = 0;
        float want = k->absmax_f32(h + offs[r], lens[r], &nf);

        good &= memcmp(&want, &max[r], sizeof(float)) == 0 && nf == nonfinite[r];
        if (!good)
            diag("    range %d: absmax %g (CPU %g), nonfinite %d (CPU %d)", r, max[r], want,
                 nonfinite[r], nf);
    }
    ok(good, "ring_cuda_absmax_ranges: 7 ranges (empty, one element, 150000; an inf, a NaN) "
       "as the CPU's absmax of each");
    if (d != NULL)
        (void)ring_cuda_free(d);
    free(h);
}

int main(void)
{
    if (!ring_cuda_built())
        skip_all("built without CUDA");
    if (!probe_device())
        skip_all("no CUDA device");
    if (nops() < NOPS) {
        plan(2);
        test_ring(2, "fp16", "1");
        test_absmax_ranges();
        return done_testing();
    }
    plan(5);
    test_ring(2, "fp16", "1");
    test_ring(3, "fp16", "2");
    test_ring(2, "bf16", "1");
    test_ring(3, "bf16", "1");
    /* this process, from here on */
    test_absmax_ranges();
    return done_testing();
}
