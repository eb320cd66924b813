/* Origin: verbatim copy of /work/shared/bench/mpi_allreduce.c (baseline benchmark, see RESULTS.md there). */
/*
 * mpi_allreduce.c - OSU / nccl-tests style MPI_Allreduce benchmark (fp32, MPI_SUM).
 *
 * For each message size (default 4 KiB .. 256 MiB, x4 steps):
 *   - warm-up iterations (also used to estimate the time per call),
 *   - timed iterations: enough for ~target seconds (default 0.3 s), capped,
 *   - time_us = max over ranks of the average time per call,
 *   - algbw   = bytes / time            (GB/s, 1 GB = 1e9 bytes)
 *   - busbw   = algbw * 2(n-1)/n        (nccl-tests convention for allreduce)
 *   - one correctness check per size (integer-valued floats, exact sums).
 *
 * Build: mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 * Usage: mpirun -n N ./mpi_allreduce [-b minbytes] [-e maxbytes] [-f factor]
 *                    [-t target_s] [-w warmup] [-m max_iters] [-l label]
 *        sizes accept K/M/G suffixes (binary).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024.0; break;
    case 'g': case 'G': v *= 1024.0 * 1024.0 * 1024.0; break;
    default: break;
    }
    return (size_t)v;
}

static void fill(float *buf, size_t count, int rank)
{
    /* integer-valued floats: every partial sum is exact in fp32 */
    for (size_t i = 0; i < count; i++)
        buf[i] = (float)((rank + 1) * (int)((i % 13) + 1));
}

int main(int argc, char **argv)
{
    size_t min_bytes = 4096, max_bytes = 256UL << 20;
    int factor = 4, warmup = 3, max_iters = 10000, min_iters = 3;
    double target = 0.3;
    const char *label = "";
    int rank, n;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    int opt;
    while ((opt = getopt(argc, argv, "b:e:f:t:w:m:l:")) != -1) {
        switch (opt) {
        case 'b': min_bytes = parse_size(optarg); break;
        case 'e': max_bytes = parse_size(optarg); break;
        case 'f': factor = atoi(optarg); break;
        case 't': target = atof(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'm': max_iters = atoi(optarg); break;
        case 'l': label = optarg; break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: %s [-b min] [-e max] [-f factor] [-t target_s] "
                                "[-w warmup] [-m max_iters] [-l label]\n", argv[0]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (factor < 2) factor = 2;
    if (warmup < 1) warmup = 1;
    if (max_iters < min_iters) max_iters = min_iters;

    size_t max_count = max_bytes / sizeof(float);
    float *sbuf = NULL, *rbuf = NULL;
    if (posix_memalign((void **)&sbuf, 4096, max_count * sizeof(float)) ||
        posix_memalign((void **)&rbuf, 4096, max_count * sizeof(float))) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fill(sbuf, max_count, rank);
    memset(rbuf, 0, max_count * sizeof(float));

    if (rank == 0) {
        int vlen = 0;
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        MPI_Get_library_version(lib, &vlen);
        char *nl = strchr(lib, '\n');
        if (nl) *nl = 0;
        printf("# mpi_allreduce %s  nranks=%d  dtype=fp32 op=sum  target=%.2fs/size\n",
               label, n, target);
        printf("# lib: %s\n", lib);
        printf("# busbw = algbw * 2(n-1)/n ; GB/s = 1e9 B/s ; time = max over ranks of mean per call\n");
        printf("%12s %10s %8s %12s %10s %10s %6s\n",
               "bytes", "count", "iters", "time_us", "algbw_GB/s", "busbw_GB/s", "check");
        fflush(stdout);
    }

    int total_errors = 0;
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= (size_t)factor) {
        int count = (int)(bytes / sizeof(float));

        /* warm-up, and estimate per-call time (rank 0 decides, broadcast) */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < warmup; i++)
            MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double est = (MPI_Wtime() - t0) / warmup;
        MPI_Allreduce(MPI_IN_PLACE, &est, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        int iters = (int)(target / (est > 1e-9 ? est : 1e-9));
        if (iters < min_iters) iters = min_iters;
        if (iters > max_iters) iters = max_iters;
        MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);

        /* correctness check (once per size) */
        memset(rbuf, 0, bytes);
        MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        int errors = 0;
        const int tri = n * (n + 1) / 2;
        for (int i = 0; i < count; i++) {
            float expect = (float)(tri * (int)((i % 13) + 1));
            if (rbuf[i] != expect) {
                if (errors < 3)
                    fprintf(stderr, "rank %d: bytes=%zu idx=%d got %g expected %g\n",
                            rank, bytes, i, rbuf[i], expect);
                errors++;
            }
        }
        MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        total_errors += errors;

        /* timed iterations */
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / iters;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

        if (rank == 0) {
            double algbw = (double)bytes / t / 1e9;
            double busbw = algbw * 2.0 * (n - 1) / n;
            printf("%12zu %10d %8d %12.1f %10.3f %10.3f %6s\n",
                   bytes, count, iters, t * 1e6, algbw, busbw, errors ? "FAIL" : "ok");
            fflush(stdout);
        }
        if (bytes > max_bytes / (size_t)factor) break; /* avoid overflow */
    }

    if (rank == 0)
        printf("# correctness: %s (%d wrong elements)\n", total_errors ? "FAIL" : "PASS", total_errors);

    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return total_errors ? 1 : 0;
}
