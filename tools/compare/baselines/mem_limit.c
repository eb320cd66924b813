/*
 * mem_limit.c - the memory-speed limit of an allreduce of S bytes over n peers
 * of one host, measured with n processes at once (compare-baselines.sh prints
 * it beside the shared-memory rows).
 *
 * At the least, each peer adds its 1/n block of the n inputs (one pass: n
 * reads of S/n bytes, one write) and copies the S-byte result into its own
 * buffer. So each of n processes, started together, times
 *   reduce  out = in[0] + ... + in[n-1], n inputs of S/n bytes, one pass;
 *   copy    S bytes, by memcpy and by non-temporal stores (SSE2), the faster
 *           (a copy past the caches need not read the lines it overwrites);
 * REPS times each, and the limit is S / (median reduce + median copy) as
 * algbw, times 2(n-1)/n as busbw (nccl-tests' conventions, GB = 1e9 B). The
 * buffers are touched first; S defaults to 256 MiB (beyond the caches).
 *
 * Build: cc -O3 -march=native -o mem_limit mem_limit.c
 * Usage: mem_limit N [MiB=256] [reps=5]
 * Prints: "mem-limit n=N bytes=S reduce_s=... copy_s=... algbw=... busbw=..."
 * (the slowest process's medians), or an error on stderr and exit 1.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MAX_N 64
#define MAX_REPS 50

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* one pass: each element of out reads every input once */
static void reduce_n(float *out, float *const *in, int n, size_t count)
{
    for (size_t base = 0; base < count; base += 256) {
        size_t len = count - base < 256 ? count - base : 256;
        float acc[256];

        memcpy(acc, in[0] + base, len * sizeof(float));
        for (int s = 1; s < n; s++)
            for (size_t i = 0; i < len; i++)
                acc[i] += in[s][base + i];
        memcpy(out + base, acc, len * sizeof(float));
    }
}

/* a copy with non-temporal stores (dst 16-byte aligned, n a multiple of 16) */
static void copy_stream(float *dst, const float *src, size_t n)
{
#if defined(__SSE2__)
    for (size_t i = 0; i < n; i += 16) {
        _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
        _mm_stream_ps(dst + i + 4, _mm_loadu_ps(src + i + 4));
        _mm_stream_ps(dst + i + 8, _mm_loadu_ps(src + i + 8));
        _mm_stream_ps(dst + i + 12, _mm_loadu_ps(src + i + 12));
    }
    _mm_sfence();
#else
    memcpy(dst, src, n * sizeof(float));
#endif
}

/* One process: wait for the start byte, time reps of each kernel, write the medians. */
static int worker(int n, size_t bytes, int reps, int ready_fd, int go_fd, int out_fd)
{
    size_t block = bytes / (size_t)n / sizeof(float), count = bytes / sizeof(float);
    float *src = malloc(bytes), *dst = malloc(bytes), *in[MAX_N], *out = malloc(block * 4);
    double t_red[MAX_REPS], t_copy[MAX_REPS], t_stream[MAX_REPS], res[2];
    char c;

    int ok = src != NULL && dst != NULL && out != NULL;

    for (int s = 0; s < n; s++)
        ok &= (in[s] = malloc(block * sizeof(float))) != NULL;
    if (!ok) /* says so at once: the others are not started */
        return write(ready_fd, "x", 1), 1;
    for (size_t i = 0; i < count; i++)
        src[i] = (float)(i & 1023), dst[i] = 0.0f;
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < block; i++)
            in[s][i] = (float)s;
    memset(out, 0, block * sizeof(float));
    if (write(ready_fd, "r", 1) != 1 || read(go_fd, &c, 1) != 1)
        return 1;
    for (int r = 0; r < reps; r++) {
        double t0 = now();

        reduce_n(out, in, n, block);
        t_red[r] = now() - t0;
        t0 = now();
        memcpy(dst, src, bytes);
        t_copy[r] = now() - t0;
        t0 = now();
        copy_stream(dst, src, count);
        t_stream[r] = now() - t0;
    }
    qsort(t_red, (size_t)reps, sizeof(double), cmp_double);
    qsort(t_copy, (size_t)reps, sizeof(double), cmp_double);
    qsort(t_stream, (size_t)reps, sizeof(double), cmp_double);
    res[0] = t_red[reps / 2];
    res[1] = t_copy[reps / 2] < t_stream[reps / 2] ? t_copy[reps / 2] : t_stream[reps / 2];
    /* keep the results observable so the kernels are not optimised away */
    if (out[block / 2] != (float)(n * (n - 1) / 2) || dst[7] != 7.0f)
        return 1;
    return write(out_fd, res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 0;
    size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 256;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    int ready[2], go[2], res[2], failed = 0;
    double worst[2] = {0, 0};
    size_t bytes;

    if (n < 1 || n > MAX_N || mib < 1 || mib > 4096 || reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "usage: mem_limit N(1..%d) [MiB(1..4096)=256] [reps(1..%d)=5]\n",
                MAX_N, MAX_REPS);
        return 1;
    }
    bytes = mib << 20;
    if (pipe(ready) != 0 || pipe(go) != 0 || pipe(res) != 0) {
        perror("mem_limit: pipe");
        return 1;
    }
    for (int p = 0; p < n; p++) {
        pid_t pid = fork();

        if (pid < 0) {
            perror("mem_limit: fork");
            return 1;
        }
        if (pid == 0) {
            close(ready[0]);
            close(go[1]);
            close(res[0]);
            _exit(worker(n, bytes, reps, ready[1], go[0], res[1]));
        }
    }
    close(ready[1]);
    close(go[0]);
    close(res[1]);
    for (int p = 0; p < n && !failed; p++) { /* every worker has touched its buffers */
        char c;

        failed = read(ready[0], &c, 1) != 1 || c != 'r';
    }
    for (int p = 0; p < n && !failed; p++)
        failed = write(go[1], "g", 1) != 1;
    close(go[1]); /* a worker still waiting sees EOF */
    for (int p = 0; p < n; p++) {
        double r[2];

        if (read(res[0], r, sizeof(r)) != (ssize_t)sizeof(r)) {
            failed = 1;
            break;
        }
        worst[0] = r[0] > worst[0] ? r[0] : worst[0];
        worst[1] = r[1] > worst[1] ? r[1] : worst[1];
    }
    for (int p = 0; p < n; p++) {
        int status;

        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = 1;
    }
    if (failed) {
        fprintf(stderr, "mem_limit: a worker failed (out of memory for %zu MiB x 3?)\n", mib);
        return 1;
    }
    {
        double algbw = (double)bytes / (worst[0] + worst[1]) / 1e9;

        printf("mem-limit n=%d bytes=%zu reduce_s=%.6f copy_s=%.6f algbw=%.3f busbw=%.3f\n", n,
               bytes, worst[0], worst[1], algbw, n > 1 ? algbw * 2.0 * (n - 1) / n : algbw);
    }
    return 0;
}
