/*
 * t-cuda.c - the CUDA part (category gpu): allreduce of host and device
 * buffers in a library built with CUDA.
 *
 * Built without CUDA: 1..0 # SKIP built without CUDA.
 *
 * Built with CUDA, what runs everywhere, GPU or not (on a machine without a
 * driver, as in CI, this is the point: such a build must still work there):
 *   - ring_cuda_available() in a fresh process returns, and prints nothing;
 *   - allreduces of host buffers through 2-peer rings (fp32, fp16 codec),
 *     which load no CUDA driver and open no GPU (on a GPU host, the point);
 *     and a 1-peer ring, in a library linked with the CUDA runtime;
 *   - ring_cuda_is_device_ptr() of host memory is 0, and without a device
 *     every device call fails cleanly with -1;
 *   - no libcudart.so is mapped (the runtime is linked statically).
 * With a device, and only then (reported as "ok # SKIP no CUDA device"
 * otherwise): 1-peer and 2-peer allreduces of device buffers. (The kernels
 * against the CPU's oracle are t-cuda-kernels'; the staging logic runs
 * everywhere in t-cuda-staging, against a fake device.)
 *
 * CUDA cannot be used in a child forked after the parent initialised it,
 * so everything that forks (the probe, the rings) runs before this process
 * makes its first CUDA call.
 */
#include "ring_build.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codec.h"
#include "cuda/ring_cuda.h"
#include "half.h"
#include "harness.h"
#include "tap.h"

#define NO_DEVICE "no CUDA device"

/* ---- allreduce in rings of processes -------------------------------------- */

typedef enum place {
    PLACE_HOST,        /* host sendbuf, host recvbuf */
    PLACE_DEV,         /* device sendbuf, another device recvbuf */
    PLACE_DEV_INPLACE, /* one device buffer */
    PLACE_DEV_TO_HOST, /* device sendbuf, host recvbuf */
    PLACE_HOST_TO_DEV, /* host sendbuf, device recvbuf */
    PLACE_COUNT
} place_t;

static const char *const place_names[] = {"host", "device", "device in place", "device to host",
                                          "host to device"};

#define MAX_RING_OPS 12
#define V_BAD 0      /* wrong elements of op i: V_BAD + i */
#define V_STATUS 20  /* status of op i: V_STATUS + i */
#define V_CUDA_USED 40 /* after close: 1 libcuda mapped, 2 a /dev/nvidia* open (bits) */

typedef struct ring_op_case {
    size_t count;
    ring_dtype_t dtype;
    ring_op_t op;
    place_t place;
} ring_op_case_t;

typedef struct ring_case {
    int nops;
    ring_op_case_t ops[MAX_RING_OPS];
} ring_case_t;

/* Small integers: every sum and half-sum of two is exact in fp32, fp16 and bf16. */
static float ring_value(int rank, size_t i)
{
    return (float)((int)((i * 7u + (size_t)rank * 13u) % 61u) - 30);
}

static uint16_t to_half(ring_dtype_t dtype, float f)
{
    return dtype == RING_FLOAT16 ? ring_f32_to_f16(f) : ring_f32_to_bf16(f);
}

/* Fill the user's input and the expected result, in the user's dtype. */
static void ring_fill(const ring_op_case_t *o, int rank, int n, unsigned char *in,
                      unsigned char *want)
{
    for (size_t i = 0; i < o->count; i++) {
        float x = ring_value(rank, i), sum = 0;

        for (int r = 0; r < n; r++)
            sum += ring_value(r, i);
        if (o->op == RING_AVG)
            sum /= (float)n;
        if (o->dtype == RING_FLOAT32) {
            memcpy(in + 4 * i, &x, 4);
            memcpy(want + 4 * i, &sum, 4);
        } else {
            uint16_t hx = to_half(o->dtype, x), hs = to_half(o->dtype, sum);

            memcpy(in + 2 * i, &hx, 2);
            memcpy(want + 2 * i, &hs, 2);
        }
    }
}

/* One allreduce with its buffers where o->place says; the result lands in host `out`. */
static ring_status_t ring_run_op(ring_comm_t *comm, const ring_op_case_t *o, unsigned char *in,
                                 unsigned char *out, size_t bytes)
{
    void *d_send = NULL, *d_recv = NULL;
    ring_status_t st = RING_ERR_INTERNAL;

    switch (o->place) {
    case PLACE_HOST:
        return ring_allreduce(comm, in, out, o->count, o->dtype, o->op);
    case PLACE_DEV:
        if (ring_cuda_malloc(bytes, &d_send) == 0 && ring_cuda_malloc(bytes, &d_recv) == 0 &&
            ring_cuda_memcpy_h2d(d_send, in, bytes) == 0) {
            st = ring_allreduce(comm, d_send, d_recv, o->count, o->dtype, o->op);
            if (st == RING_OK && ring_cuda_memcpy_d2h(out, d_recv, bytes) != 0)
                st = RING_ERR_IO;
        }
        break;
    case PLACE_DEV_INPLACE:
        if (ring_cuda_malloc(bytes, &d_send) == 0 && ring_cuda_memcpy_h2d(d_send, in, bytes) == 0) {
            st = ring_allreduce(comm, d_send, d_send, o->count, o->dtype, o->op);
            if (st == RING_OK && ring_cuda_memcpy_d2h(out, d_send, bytes) != 0)
                st = RING_ERR_IO;
        }
        break;
    case PLACE_DEV_TO_HOST:
        if (ring_cuda_malloc(bytes, &d_send) == 0 && ring_cuda_memcpy_h2d(d_send, in, bytes) == 0)
            st = ring_allreduce(comm, d_send, out, o->count, o->dtype, o->op);
        break;
    case PLACE_HOST_TO_DEV:
        if (ring_cuda_malloc(bytes, &d_recv) == 0) {
            st = ring_allreduce(comm, in, d_recv, o->count, o->dtype, o->op);
            if (st == RING_OK && ring_cuda_memcpy_d2h(out, d_recv, bytes) != 0)
                st = RING_ERR_IO;
        }
        break;
    default:
        break;
    }
    if (d_send != NULL)
        (void)ring_cuda_free(d_send);
    if (d_recv != NULL)
        (void)ring_cuda_free(d_recv);
    return st;
}

/* Every op of a case on an open communicator; returns how many went wrong. */
static int ring_run_case(ring_comm_t *comm, const ring_case_t *c, int rank, int n, int report)
{
    int failed = 0;

    for (int i = 0; i < c->nops; i++) {
        const ring_op_case_t *o = &c->ops[i];
        size_t esz = o->dtype == RING_FLOAT32 ? 4 : 2, bytes = o->count * esz;
        unsigned char *in = malloc(bytes + 1), *want = malloc(bytes + 1), *out = calloc(1, bytes + 1);
        ring_status_t st;
        uint64_t bad = 0;

        if (in == NULL || want == NULL || out == NULL) {
            free(in), free(want), free(out);
            return c->nops;
        }
        ring_fill(o, rank, n, in, want);
        st = ring_run_op(comm, o, in, out, bytes);
        for (size_t e = 0; st == RING_OK && e < o->count; e++)
            bad += memcmp(out + e * esz, want + e * esz, esz) != 0;
        if (report) {
            h_put(V_STATUS + i, (uint64_t)st);
            h_put(V_BAD + i, bad);
            if (st != RING_OK)
                h_msg("op %d: %s", i, ring_last_error());
        }
        failed += st != RING_OK || bad != 0;
        free(in), free(want), free(out);
    }
    return failed;
}

/* What this process holds of the CUDA driver: 1 libcuda is mapped, 2 one of its
 * devices (/dev/nvidia*) is open. */
static unsigned cuda_driver_used(void)
{
    unsigned used = 0;
    char line[1024], path[64], target[256];
    FILE *f = fopen("/proc/self/maps", "r");

    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strstr(line, "libcuda.so") != NULL)
            used |= 1;
    if (f != NULL)
        fclose(f);
    for (int fd = 0; fd < 1024; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len > 0) {
            target[len] = '\0';
            if (strncmp(target, "/dev/nvidia", 11) == 0)
                used |= 2;
        }
    }
    return used;
}

static int ring_child(int rank, int n, const ring_config_t *cfg, void *arg)
{
    ring_comm_t *comm;
    ring_status_t st = ring_comm_open(cfg, &comm);
    int failed;

    if (st != RING_OK)
        return h_fail(st, "ring_comm_open");
    failed = ring_run_case(comm, arg, rank, n, 1);
    ring_comm_close(comm);
    h_put(V_CUDA_USED, cuda_driver_used());
    return failed ? 1 : 0;
}

static h_run_t the_run; /* large: not on the stack */
static unsigned driver_at_start; /* cuda_driver_used() when main began: a tool's (compute-sanitizer
                                  * injects libcuda into the processes it watches) */

/* Every op of every placement in `places` (bits), sum and avg, fp32 and the given half type. */
static void ring_case_build(ring_case_t *c, unsigned places, ring_dtype_t half)
{
    c->nops = 0;
    for (int p = 0; p < PLACE_COUNT; p++) {
        if (!(places & (1u << p)))
            continue;
        if (c->nops + 2 > MAX_RING_OPS)
            bail("too many ops in one case");
        c->ops[c->nops++] = (ring_op_case_t){100003, RING_FLOAT32, RING_SUM, (place_t)p};
        c->ops[c->nops++] = (ring_op_case_t){4099, half, RING_AVG, (place_t)p};
    }
}

static void test_ring(const char *label, const ring_case_t *c, const char *codec)
{
    h_setting_t settings[] = {{-1, "codec", codec}, {-1, "chunk-size", "64K"}, {0, NULL, NULL}};
    h_ring_spec_t rs = {.label = label, .n = 2, .settings = settings, .fn = ring_child,
                        .arg = (void *)c, .budget = 30, .run = &the_run};
    int good = 1;

    h_run_ring(&rs);
    for (int r = 0; r < 2; r++) {
        const h_result_t *res = &the_run.r[r];

        good &= res->exited && res->code == 0;
        for (int i = 0; i < c->nops; i++)
            good &= h_val(res, V_STATUS + i, 99) == RING_OK && h_val(res, V_BAD + i, 1) == 0;
    }
    if (c->ops[0].place == PLACE_HOST) {
        /* a CPU-only user on a GPU host: the allreduces' device-pointer checks load
         * no driver and open no device (they did: 7 /dev/nvidia* per rank) */
        unsigned used = 0;
        for (int r = 0; r < 2; r++)
            used |= (unsigned)h_val(&the_run.r[r], V_CUDA_USED, 4);
        if (driver_at_start & 1)
            skip("libcuda was mapped before the test began (under compute-sanitizer?): nothing "
                 "to tell");
        else
            ok(good && used == 0, "%s, codec %s: the ranks loaded no CUDA driver and opened no "
               "GPU (%s%s%s)", label, codec, used == 0 ? "none" : "",
               used & 1 ? "libcuda mapped " : "", used & 2 ? "/dev/nvidia* open" : "");
    }
    if (!ok(good, "%s: 2 peers, codec %s: every result exact on both ranks", label, codec)) {
        h_diag(&the_run);
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < c->nops; i++)
                diag("    rank %d op %d (%s, %zu elements): status %llu, %llu wrong", r, i,
                     place_names[c->ops[i].place], c->ops[i].count,
                     (unsigned long long)h_val(&the_run.r[r], V_STATUS + i, 99),
                     (unsigned long long)h_val(&the_run.r[r], V_BAD + i, 1));
    }
}

/* A ring of one in this process. */
static int ring_one(const ring_case_t *c)
{
    ring_config_t cfg;
    ring_comm_t *comm;
    int failed;

    ring_config_init(&cfg);
    if (ring_config_set(&cfg, "rank", "0", RING_SRC_API) != RING_OK ||
        ring_config_set(&cfg, "world-size", "1", RING_SRC_API) != RING_OK ||
        ring_comm_open(&cfg, &comm) != RING_OK) {
        diag("ring of one: %s", ring_last_error());
        ring_config_free(&cfg);
        return c->nops;
    }
    failed = ring_run_case(comm, c, 0, 1, 0);
    ring_comm_close(comm);
    ring_config_free(&cfg);
    return failed;
}

/* ---- the probe: a fresh process asks for a device ------------------------- */

typedef struct probe {
    int exited, code, signo;
    size_t printed;
    char out[256];
} probe_t;

/* exit code 0: no device, 1: a device (asked twice: the cached answer must agree) */
static void probe_run(probe_t *p)
{
    int fds[2];
    pid_t pid;
    int wstatus;
    ssize_t got;

    memset(p, 0, sizeof(*p));
    if (pipe(fds) != 0)
        bail("pipe: %m");
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        bail("fork: %m");
    if (pid == 0) {
        int a, b;

        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        alarm(30);
        a = ring_cuda_available();
        b = ring_cuda_available();
        exit(a != b ? 3 : a ? 1 : 0); /* exit(): the runtime's exit handlers run too */
    }
    close(fds[1]);
    /* keep the first 255 bytes, count the rest (room never wraps: gcc 13's
     * fortified read() could not tell the old loop's bound) */
    for (;;) {
        size_t room = p->printed < sizeof(p->out) - 1 ? sizeof(p->out) - 1 - p->printed : 0;
        char sink[256];

        got = room > 0 ? read(fds[0], p->out + p->printed, room) : read(fds[0], sink, sizeof sink);
        if (got <= 0)
            break;
        p->printed += (size_t)got;
    }
    close(fds[0]);
    if (waitpid(pid, &wstatus, 0) != pid)
        bail("waitpid: %m");
    p->exited = WIFEXITED(wstatus);
    p->code = p->exited ? WEXITSTATUS(wstatus) : -1;
    p->signo = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
}

/* ---- in this process, no device needed ------------------------------------ */

static void test_host_pointers(void)
{
    static float in_data[16];
    float on_stack[16];
    float *heap = malloc(64 * sizeof(float));

    ok(ring_cuda_is_device_ptr(NULL) == 0 && ring_cuda_is_device_ptr(heap) == 0 &&
           ring_cuda_is_device_ptr(on_stack) == 0 && ring_cuda_is_device_ptr(in_data) == 0,
       "ring_cuda_is_device_ptr: NULL, heap, stack and static memory are not device memory");
    free(heap);
}

/* Without a device every device call fails with -1, without crashing; with one, memory works. */
static void test_device_calls(int have_device)
{
    if (!have_device) {
        float h[4] = {1, 2, 3, 4}, m = 0;
        uint16_t e[4];
        void *d = NULL;
        int nonfinite = 0;

        ok(ring_cuda_malloc(64, &d) == -1 && d == NULL && ring_cuda_free(NULL) == -1 &&
               ring_cuda_memcpy_h2d(e, h, sizeof e) == -1 &&
               ring_cuda_memcpy_d2h(h, e, sizeof e) == -1 && ring_cuda_stream_sync(NULL) == -1 &&
               ring_cuda_encode_f16(e, h, 1.0f, 4, NULL) == -1 &&
               ring_cuda_decode_bf16(h, e, 1.0f, 4, NULL) == -1 &&
               ring_cuda_fused_f16(e, h, e, h, 1.0f, 1.0f, 1.0f, 4, NULL) == -1 &&
               ring_cuda_absmax_f32(h, 4, &m, &nonfinite, NULL) == -1 && h[0] == 1.0f,
           "without a device every device call fails cleanly (-1) and touches nothing");
    } else {
        void *d = NULL;
        int good = ring_cuda_malloc(4096, &d) == 0 && d != NULL &&
                   ring_cuda_is_device_ptr(d) == 1 &&
                   ring_cuda_is_device_ptr((char *)d + 100) == 1;

        ok(good && ring_cuda_free(d) == 0,
           "device memory: ring_cuda_malloc, is_device_ptr (also inside), ring_cuda_free");
    }
}

static void test_no_shared_runtime(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int found = 0;

    if (f == NULL) {
        skip("no /proc/self/maps");
        return;
    }
    while (fgets(line, sizeof line, f) != NULL)
        found |= strstr(line, "libcudart.so") != NULL;
    fclose(f);
    ok(!found, "no libcudart.so is mapped: the CUDA runtime is linked statically");
}

/* ---- main ------------------------------------------------------------------ */

int main(void)
{
    ring_case_t host_case, dev_case_f16, dev_case_bf16, one_host, one_dev;
    const unsigned all_dev = (1u << PLACE_DEV) | (1u << PLACE_DEV_INPLACE) |
                             (1u << PLACE_DEV_TO_HOST) | (1u << PLACE_HOST_TO_DEV);
    probe_t probe;
    int have_device;

    if (!ring_cuda_built())
        skip_all("built without CUDA");
    /* probe 2, rings 6, this process 6 (the kernels are t-cuda-kernels') */
    plan(14);
    driver_at_start = cuda_driver_used();

    /* forks first: this process has not touched CUDA yet */
    probe_run(&probe);
    ok(probe.exited && probe.code <= 1, "ring_cuda_available() in a fresh process returns (%s)",
       !probe.exited       ? "killed by a signal"
       : probe.code == 0   ? "no device"
       : probe.code == 1   ? "a device"
                           : "its two answers differ");
    if (!ok(probe.printed == 0, "... and prints nothing, at exit neither (stdout, stderr)"))
        diag("    printed %zu bytes: %.200s", probe.printed, probe.out);
    have_device = probe.exited && probe.code == 1;
    diag("CUDA device: %s", have_device ? "yes" : "none (the device tests are skipped)");

    ring_case_build(&host_case, 1u << PLACE_HOST, RING_FLOAT16);
    host_case.ops[host_case.nops++] = (ring_op_case_t){7, RING_FLOAT32, RING_AVG, PLACE_HOST};
    test_ring("host buffers", &host_case, "none");
    test_ring("host buffers", &host_case, "fp16");
    ring_case_build(&dev_case_f16, all_dev, RING_FLOAT16);
    ring_case_build(&dev_case_bf16, all_dev, RING_BFLOAT16);
    if (have_device) {
        test_ring("device buffers", &dev_case_f16, "none");
        test_ring("device buffers", &dev_case_bf16, "bf16");
    } else {
        skip(NO_DEVICE);
        skip(NO_DEVICE);
    }

    /* this process, from here on */
    ok(ring_cuda_available() == have_device && ring_cuda_available() == have_device,
       "ring_cuda_available() here agrees with the fresh process, twice");
    test_host_pointers();
    test_device_calls(have_device);
    ring_case_build(&one_host, 1u << PLACE_HOST, RING_BFLOAT16);
    ok(ring_one(&one_host) == 0, "ring of one, host buffers: exact");
    test_no_shared_runtime();
    if (have_device) {
        ring_case_build(&one_dev, all_dev, RING_FLOAT16);
        ok(ring_one(&one_dev) == 0, "ring of one, device buffers (every placement): exact");
    } else {
        skip(NO_DEVICE);
    }
    return done_testing();
}
