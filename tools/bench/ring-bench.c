/*
 * ring-bench - collective bandwidth and latency, nccl-tests style.
 *
 * Runs as one peer: start N of them with ring-launch (or any launcher that
 * sets RING_RANK, RING_WORLD_SIZE and RING_PEERS). For each size it prints,
 * on rank 0: bytes, count, dtype, time per call in microseconds (the
 * slowest rank's mean), algbw = bytes / time and busbw = algbw * the
 * collective's factor in GB/s (1e9 bytes/s), and #wrong from the
 * correctness check (-c). --coll picks the collective (ring-bench-coll.c).
 * With --doctor it runs the ring doctor instead (ring_comm_doctor): every
 * ring edge measured on its own, slow ones named; with --overlap it measures
 * how much of an allreduce hides behind computation (ring-bench-overlap.c).
 */
#include "ring_build.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ringd/ringd.h>

#include "parse.h"
#include "ring-bench.h"
#include "suggest.h"

static void bench_usage(FILE *out)
{
    fprintf(out,
            "Usage: ring-launch -n N -- ring-bench [options]\n"
            "       mpirun -np N ring-bench [options], srun -n N ring-bench [options]\n"
            "       ring-bench [options]   (with RING_RANK, RING_WORLD_SIZE and RING_PEERS\n"
            "                              or RING_RENDEZVOUS set; see ringd --print-env)\n"
            "\n"
            "Measures one collective of float32 buffers (allreduce unless --coll says\n"
            "otherwise), size by size, and prints a table on rank 0, as nccl-tests does:\n"
            "  bytes    the size: the buffer (allreduce, broadcast), the whole output of\n"
            "           allgather or the whole input of reducescatter (N blocks of\n"
            "           bytes/N; sizes are rounded down to whole float32 elements, and\n"
            "           for those two to a multiple of N of them)\n"
            "  count    float32 elements of the call's count argument: bytes/4, or one\n"
            "           rank's block (bytes/4/N) for allgather and reducescatter\n"
            "  time     microseconds per call, the slowest rank's mean\n"
            "  algbw    bytes / time, GB/s (1e9 bytes/s)\n"
            "  busbw    algbw * 2(N-1)/N for allreduce, * (N-1)/N for allgather and\n"
            "           reducescatter, * 1 for broadcast: the bandwidth each link carried,\n"
            "           comparable across N and with the hardware (busbw = algbw when N = 1)\n"
            "  #wrong   elements -c found wrong, summed over the ranks\n"
            "\n"
            "Benchmark options:\n"
            "  -b, --minbytes SIZE   smallest buffer (default 4K; K/M/G suffixes)\n"
            "  -e, --maxbytes SIZE   largest buffer (default 256M)\n"
            "  -f, --stepfactor F    multiply the size by F each step (default 4)\n"
            "  -n, --iters N         timed calls per size (default: enough for -t)\n"
            "  -w, --warmup N        untimed calls per size first (default 3)\n"
            "  -t, --target SECS     time to spend per size when -n is not given (default 0.3)\n"
            "  -c, --check           after the timed calls, one more call per size with known\n"
            "                        data, checked on every rank: allreduce and reducescatter\n"
            "                        against the exact sums of small integers (within the\n"
            "                        codec's rounding for fp16 and bf16), broadcast bit for\n"
            "                        bit against the root's bytes, allgather bit for bit\n"
            "                        against every rank's block\n"
            "  -o, --op sum|avg      reduction of allreduce and reducescatter (default sum)\n"
            "      --coll NAME       the collective: allreduce (default), broadcast,\n"
            "                        allgather or reducescatter\n"
            "  -r, --root R          the rank broadcast sends from (default 0; 0..N-1; the\n"
            "                        other collectives have no root)\n"
            "      --inplace         one buffer: sendbuf == recvbuf for allreduce, this\n"
            "                        rank's block of the output (allgather) or of the input\n"
            "                        (reducescatter); broadcast is always in place\n"
            "      --register        register the buffers with the communicator first\n"
            "                        (ring_comm_register: over verbs they are sent\n"
            "                        without a copy)\n"
            "      --sparsity F      fraction of zeros in the timed data (default 0: dense\n"
            "                        gradient-like values, which lz4 cannot shrink)\n"
            "      --sparse-shared   zeros at the same places on every peer (default: each\n"
            "                        peer's own, so the sums are denser than the inputs)\n"
            "      --csv             print CSV instead of the table:\n"
            "                        bytes,count,dtype,time_us,algbw_GBps,busbw_GBps,wrong,coll\n"
            "                        (the first seven columns as before --coll existed)\n"
            "      --doctor          the ring doctor instead: measure every edge of the ring\n"
            "                        (a peer to its right neighbour) on its own, the others\n"
            "                        idle: bandwidth (bursts back to back, the best of 5 laps\n"
            "                        round the ring) and one-way latency (half the median\n"
            "                        round trip of a 64-byte frame). Rank 0 prints a table and\n"
            "                        names every edge more than 20%% below the median\n"
            "                        bandwidth, both peers with rank and host\n"
            "      --doctor-bytes SIZE  bytes per burst (default 8M; less on an edge too slow\n"
            "                        to move them in 0.2 s)\n"
            "      --overlap         how much of an allreduce hides behind computation:\n"
            "                        per size (default 16M and 64M; -b, -e and -f choose\n"
            "                        others) and per step, ring_allreduce_start, then C ms of\n"
            "                        single-threaded float arithmetic (64x64 matrix\n"
            "                        products: the core stays busy), then ring_request_wait.\n"
            "                        It runs twice, on a communicator with the progress\n"
            "                        thread off and then on one with it on, and prints per\n"
            "                        size and mode: compute alone, allreduce alone, the\n"
            "                        step, its compute part (longer than alone when the\n"
            "                        thread takes the core from it), the ratio\n"
            "                        step / max(compute, allreduce) (1.0: the shorter\n"
            "                        one is hidden entirely; 2.0 when both are equal and\n"
            "                        nothing overlaps) and the hidden share of the shorter\n"
            "                        one. -n sets the timed steps (default 10), -w the\n"
            "                        untimed ones (default 3), -c checks one overlapped\n"
            "                        result. The header gives the cores online: a progress\n"
            "                        thread per peer needs a core of its own to overlap (on\n"
            "                        loopback, moving the bytes is CPU work too;\n"
            "                        --rate-limit makes the link the bottleneck instead).\n"
            "                        It opens the two communicators one after the other\n"
            "                        (progress-thread is set for each, whatever was given)\n"
            "      --device cuda[:N] allreduce buffers in the memory of GPU N (default 0),\n"
            "                        through libringd's device path (fp16/bf16 encoded on\n"
            "                        the GPU); values are made and checked on the host and\n"
            "                        copied outside the timed calls. Needs a CUDA build of\n"
            "                        libringd and libcudart.so on the library path\n"
            "      --compute-ms MS   --overlap's C (default: the allreduce's own time with\n"
            "                        the progress thread off, per size, so both are equal)\n"
            "      --sweep ARGS...   (first) sizes x codecs x N x link rate in many rings,\n"
            "                        with CSV, plots and the alpha-beta fit: the ring-sweep\n"
            "                        driver; see ring-bench --sweep --help\n"
            "  -h, --help            this text\n"
            "      --version         print the version\n"
            "\n"
            "Ring options (flag, environment variable, default):\n");
    ring_config_print_help(out);
    fprintf(out,
            "\n"
            "Exit status: 0 on success; 1 when a collective failed or a check found\n"
            "wrong values (the message names the peer and phase); 2 on bad usage\n"
            "(an unknown --coll, a --root that is not a rank of the ring...); 3 with\n"
            "--doctor when it found a slow edge (on every rank: all know the results;\n"
            "the measurement itself succeeded).\n"
            "\n"
            "Examples:\n"
            "  ring-launch -n 4 -- ring-bench -b 1M -e 256M -f 4 -c\n"
            "      allreduce from 1 MiB to 256 MiB, checked\n"
            "  ring-launch -n 4 -- ring-bench --coll allgather -b 4K -e 64M -c --csv\n"
            "      allgather, CSV rows; the size is the whole gathered output\n"
            "  ring-launch -n 4 -- ring-bench --coll broadcast --root 2 -b 64M -e 64M\n"
            "      one size, broadcast from rank 2\n"
            "  ring-launch -n 2 -- ring-bench --overlap --compute-ms 20\n"
            "      allreduce of 16M and 64M against 20 ms of computation\n"
            "  ring-launch -n 4 -- ring-bench --doctor\n");
}

/* An argument getopt did not take: unknown, or a flag without its value. Names it,
 * with the closest flag of ring-bench's or of the ring's when one is near. */
static void bench_bad_option(const char *arg, const struct option *longopts)
{
    char ring_flag[64];
    const char *name = arg;
    ring_suggest_t sg;

    if (optopt != 0 && strchr("befnwtor", optopt) != NULL) { /* a short flag without its value */
        fprintf(stderr, "ring-bench: -%c needs a value; see ring-bench --help\n", optopt);
        return;
    }
    while (*name == '-')
        name++;
    ring_suggest_init(&sg, name, strcspn(name, "="));
    for (const struct option *lo = longopts; lo->name != NULL; lo++) {
        if (strlen(lo->name) == strcspn(name, "=") && strncmp(lo->name, name, strlen(lo->name)) == 0) {
            fprintf(stderr, "ring-bench: %s needs a value; see ring-bench --help\n", arg);
            return;
        }
        ring_suggest_offer(&sg, lo->name, strlen(lo->name));
    }
    if (ring_suggest_best(&sg) != NULL)
        fprintf(stderr, "ring-bench: unknown option '%s': did you mean '--%s'? (ring-bench --help "
                "lists them)\n", arg, ring_suggest_best(&sg));
    else if (ring_config_suggest(name, ring_flag, sizeof(ring_flag)))
        fprintf(stderr, "ring-bench: unknown option '%s': did you mean '%s'? (ring-bench --help "
                "lists them)\n", arg, ring_flag);
    else
        fprintf(stderr, "ring-bench: unknown option '%s' (ring-bench --help lists them)\n", arg);
}

/* -h/--help and --version are handled in main, before the environment is read. */
static int bench_parse(int argc, char **argv, bench_opts_t *o, ring_config_t *cfg)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'}, {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'}, {"iters", required_argument, NULL, 'n'},
        {"warmup", required_argument, NULL, 'w'}, {"target", required_argument, NULL, 't'},
        {"check", no_argument, NULL, 'c'}, {"op", required_argument, NULL, 'o'},
        {"csv", no_argument, NULL, 'C'}, {"inplace", no_argument, NULL, 'I'},
        {"sparsity", required_argument, NULL, 'S'},
        {"sparse-shared", no_argument, NULL, 'Z'}, {"register", no_argument, NULL, 'R'},
        {"doctor", no_argument, NULL, 'D'}, {"doctor-bytes", required_argument, NULL, 'Y'},
        {"coll", required_argument, NULL, 'K'}, {"root", required_argument, NULL, 'r'},
        {"overlap", no_argument, NULL, 'V'}, {"compute-ms", required_argument, NULL, 'M'},
        {"device", required_argument, NULL, 'G'},
        {NULL, 0, NULL, 0}};
    char **rest = calloc((size_t)argc + 1, sizeof(char *));
    int nrest = 0, opt;
    long l;

    if (rest == NULL)
        return 1;
    /* ring settings first: they are the config table's flags */
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc;) {
        ring_status_t st = ring_config_parse_arg(cfg, argc, argv, &i);
        if (st == RING_ERR_UNSUPPORTED) {
            rest[nrest++] = argv[i++];
        } else if (st != RING_OK) {
            fprintf(stderr, "ring-bench: %s\n", ring_last_error());
            free(rest);
            return 2;
        }
    }
    optind = 1;
    opterr = 0; /* bench_bad_option says it, with a suggestion */
    while ((opt = getopt_long(nrest, rest, "b:e:f:n:w:t:co:r:", longopts, NULL)) != -1) {
        const char *bad = NULL;
        switch (opt) {
        case 'b':
            if (ring_parse_size(optarg, &o->min_bytes) != 0) bad = "-b";
            o->sizes_given = 1;
            break;
        case 'e':
            if (ring_parse_size(optarg, &o->max_bytes) != 0) bad = "-e";
            o->sizes_given = 1;
            break;
        case 'f': {
            char *end;
            o->factor = strtod(optarg, &end);
            if (*end != '\0' || !(o->factor > 1.0) || o->factor > 1e6) bad = "-f";
            break;
        }
        case 'n':
            if (ring_parse_long(optarg, &l) != 0 || l < 1 || l > 100000000) bad = "-n";
            else o->iters = (int)l;
            break;
        case 'w':
            if (ring_parse_long(optarg, &l) != 0 || l < 0 || l > 1000000) bad = "-w";
            else o->warmup = (int)l;
            break;
        case 't': if (ring_parse_duration(optarg, &o->target_s) != 0) bad = "-t"; break;
        case 'c': o->check = 1; break;
        case 'o':
            if (strcmp(optarg, "sum") == 0) o->op = RING_SUM;
            else if (strcmp(optarg, "avg") == 0) o->op = RING_AVG;
            else bad = "--op";
            break;
        case 'C': o->csv = 1; break;
        case 'Z': o->sparse_shared = 1; break;
        case 'S': {
            char *end;
            o->sparsity = strtod(optarg, &end);
            if (*end != '\0' || !(o->sparsity >= 0 && o->sparsity <= 1)) bad = "--sparsity";
            break;
        }
        case 'I': o->inplace = 1; break;
        case 'R': o->register_bufs = 1; break;
        case 'D': o->doctor = 1; break;
        case 'Y':
            if (ring_parse_size(optarg, &o->doctor_bytes) != 0 || o->doctor_bytes < 4096)
                bad = "--doctor-bytes";
            else
                o->doctor = 1;
            break;
        case 'K':
            if (bench_coll_parse(optarg, &o->coll) != 0) {
                fprintf(stderr, "ring-bench: unknown collective '%s' for --coll: use allreduce, "
                        "broadcast, allgather or reducescatter\n", optarg);
                free(rest);
                return 2;
            }
            o->coll_given = 1;
            break;
        case 'r':
            if (ring_parse_long(optarg, &l) != 0 || l < 0 || l > 1000000) bad = "--root";
            else o->root = (int)l;
            break;
        case 'V': o->overlap = 1; break;
        case 'G': {
            char *end = NULL;
            long d = 0;
            if (strncmp(optarg, "cuda", 4) != 0 ||
                (optarg[4] != '\0' && (optarg[4] != ':' || (d = strtol(optarg + 5, &end, 10)) < 0 ||
                                       end == optarg + 5 || *end != '\0' || d > 1023)))
                bad = "--device (cuda or cuda:N)";
            o->device = (int)d;
            break;
        }
        case 'M': {
            char *end;
            o->compute_ms = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(o->compute_ms > 0 && o->compute_ms <= 1e6))
                bad = "--compute-ms";
            break;
        }
        default:
            bench_bad_option(rest[optind - 1], longopts);
            free(rest);
            return 2;
        }
        if (bad != NULL) {
            fprintf(stderr, "ring-bench: invalid value '%s' for %s; see ring-bench --help\n",
                    optarg, bad);
            free(rest);
            return 2;
        }
    }
    if (optind < nrest) {
        fprintf(stderr, "ring-bench: unexpected argument '%s'; see ring-bench --help\n",
                rest[optind]);
        free(rest);
        return 2;
    }
    free(rest);
    if (o->overlap && (o->doctor || (o->coll_given && o->coll != BENCH_ALLREDUCE))) {
        fprintf(stderr, "ring-bench: --overlap measures allreduce; it takes neither --doctor "
                "nor --coll %s\n", o->doctor ? "(any)" : bench_coll_name(o->coll));
        return 2;
    }
    if (o->device >= 0 && (o->overlap || o->doctor || (o->coll_given && o->coll != BENCH_ALLREDUCE))) {
        fprintf(stderr, "ring-bench: --device cuda measures allreduce; it takes neither "
                "--overlap, --doctor nor another --coll\n");
        return 2;
    }
    if (o->compute_ms > 0 && !o->overlap) {
        fprintf(stderr, "ring-bench: --compute-ms is --overlap's; see ring-bench --help\n");
        return 2;
    }
    if (o->overlap && !o->sizes_given) {
        o->min_bytes = (size_t)16 << 20;
        o->max_bytes = (size_t)64 << 20;
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, "ring-bench: -b %zu is larger than -e %zu\n", o->min_bytes, o->max_bytes);
        return 2;
    }
    return 0;
}

/* --device: the host buffers' bytes to the device ones (to 1) or back (to 0) */
static int bench_dev_sync(float *sbuf, float *rbuf, float *dsbuf, float *drbuf, size_t bytes,
                          int to)
{
    if (dsbuf == NULL)
        return 0;
    if (to)
        return bench_cuda_put(dsbuf, sbuf, bytes) | bench_cuda_put(drbuf, rbuf, bytes);
    return bench_cuda_get(sbuf, dsbuf, bytes) | bench_cuda_get(rbuf, drbuf, bytes);
}

/* dsbuf, drbuf: --device's buffers (the calls use them), else NULL */
static int bench_size(ring_comm_t *comm, const bench_opts_t *o, size_t want_bytes, float *sbuf,
                      float *rbuf, float *dsbuf, float *drbuf, float *slots)
{
    float *cs = dsbuf != NULL ? dsbuf : sbuf, *cr = dsbuf != NULL ? drbuf : rbuf;
    bench_shape_t s;
    int n = ring_comm_size(comm);
    double t0, per_call, iters_d, worst, wrong_all = 0;
    int iters;

    bench_coll_shape(o->coll, want_bytes, n, &s);
    for (int i = 0; i < o->warmup; i++)
        if (bench_coll_call(comm, o, &s, cs, cr) != RING_OK)
            return -1;
    iters = o->iters;
    if (iters == 0) {
        /* estimate from one timed call; all ranks must agree on the count */
        t0 = bench_now();
        if (bench_coll_call(comm, o, &s, cs, cr) != RING_OK)
            return -1;
        per_call = bench_now() - t0;
        if (bench_max(comm, slots, per_call, &worst) != RING_OK)
            return -1;
        iters_d = o->target_s / (worst > 1e-7 ? worst : 1e-7);
        iters = iters_d < 3 ? 3 : iters_d > 100000 ? 100000 : (int)iters_d;
    }
    t0 = bench_now();
    for (int i = 0; i < iters; i++)
        if (bench_coll_call(comm, o, &s, cs, cr) != RING_OK)
            return -1;
    per_call = (bench_now() - t0) / iters;
    if (bench_max(comm, slots, per_call, &worst) != RING_OK)
        return -1;
    if (o->check) {
        bench_coll_fill_check(comm, o, &s, sbuf, rbuf);
        if (bench_dev_sync(sbuf, rbuf, dsbuf, drbuf, o->max_bytes, 1) != 0 ||
            bench_coll_call(comm, o, &s, cs, cr) != RING_OK ||
            bench_dev_sync(sbuf, rbuf, dsbuf, drbuf, o->max_bytes, 0) != 0 ||
            bench_sum(comm, slots, (double)bench_coll_verify(comm, o, &s, sbuf, rbuf),
                      &wrong_all) != RING_OK)
            return -1;
    }
    if (ring_comm_rank(comm) == 0) {
        double algbw = worst > 0 ? (double)s.bytes / worst / 1e9 : 0;
        double busbw = algbw * bench_coll_busbw_factor(o->coll, n);
        if (o->csv)
            printf("%zu,%zu,float32,%.2f,%.4f,%.4f,%.0f,%s\n", s.bytes, s.count, worst * 1e6,
                   algbw, busbw, wrong_all, bench_coll_name(o->coll));
        else
            printf("%12zu %12zu %8s %12.1f %10.3f %10.3f %8.0f\n", s.bytes, s.count, "float32",
                   worst * 1e6, algbw, busbw, wrong_all);
        fflush(stdout);
    }
    return wrong_all > 0 ? 1 : 0;
}

/*
 * ring-bench --sweep ARGS: the sweep is a driver that starts many rings
 * (tools/experiments/ring-sweep, a script); exec it with the remaining arguments. It
 * is looked for in $RING_SWEEP, next to this program, in the source tree's
 * tools/ (an uninstalled build), then on PATH.
 */
static int run_sweep(int argc, char **argv)
{
    const char *env = getenv("RING_SWEEP");
    const char *slash = strrchr(argv[0], '/');
    char path[4096];

    argv[1] = "ring-sweep";
    /* the sweep runs this build's ring-bench, not whichever it would find first */
    if (slash != NULL) {
        snprintf(path, sizeof(path), "%.*s", (int)(slash - argv[0]), argv[0]);
        (void)setenv("RINGD_BUILD", path, 0);
    }
    if (env != NULL && *env != '\0')
        execv(env, argv + 1);
    if (slash != NULL) {
        snprintf(path, sizeof(path), "%.*s/ring-sweep", (int)(slash - argv[0]), argv[0]);
        execv(path, argv + 1);
    }
#ifdef RING_TOOLS_DIR
    execv(RING_TOOLS_DIR "/ring-sweep", argv + 1);
#endif
    execvp("ring-sweep", argv + 1);
    fprintf(stderr, "ring-bench: --sweep needs the ring-sweep script (tools/experiments/ring-sweep; set "
                    "RING_SWEEP=/path/to/ring-sweep): %s\n", strerror(errno));
    return 2;
}

/* --doctor: every ring edge on its own; rank 0 prints the report. 0, 3 (slow edge) or 1. */
static int bench_doctor(ring_comm_t *comm, const bench_opts_t *o)
{
    int n = ring_comm_size(comm), slow = 0;
    float one = 1;
    ring_edge_report_t *edges = calloc((size_t)n, sizeof(*edges));

    if (edges == NULL) {
        fprintf(stderr, "ring-bench: rank %d: out of memory for %d edge reports\n",
                ring_comm_rank(comm), n);
        return 1;
    }
    if (ring_comm_doctor(comm, o->doctor_bytes, edges) != RING_OK) {
        fprintf(stderr, "ring-bench: rank %d: %s\n", ring_comm_rank(comm), ring_last_error());
        free(edges);
        return 1;
    }
    if (ring_comm_rank(comm) == 0) {
        printf("# ring-bench --doctor (ringd %s): %d peers, transport %s, bursts of up to %zu "
               "bytes\n", ring_version(), n, ring_comm_transport(comm),
               o->doctor_bytes > 0 ? o->doctor_bytes : RING_DOCTOR_DEFAULT_BYTES);
        slow = ring_doctor_print(comm, edges, stdout);
    } else {
        for (int p = 0; p < n; p++)
            slow += edges[p].slow;
    }
    free(edges);
    /* a barrier after rank 0 has printed: under a launcher that stops every
     * peer when one exits non-zero, no peer's exit 3 may cut the report short */
    if (ring_allreduce(comm, &one, &one, 1, RING_FLOAT32, RING_SUM) != RING_OK) {
        fprintf(stderr, "ring-bench: rank %d: %s\n", ring_comm_rank(comm), ring_last_error());
        return 1;
    }
    return slow > 0 ? 3 : 0;
}

int main(int argc, char **argv)
{
    bench_opts_t o = {.min_bytes = 4096, .max_bytes = 256u << 20, .factor = 4, .warmup = 3,
                      .target_s = 0.3, .op = RING_SUM, .device = -1};
    float *dsbuf = NULL, *drbuf = NULL;
    char why[256];
    ring_config_t cfg;
    ring_comm_t *comm = NULL;
    float *sbuf = NULL, *rbuf = NULL, *slots = NULL;
    int rc, failed = 0;

    if (argc > 1 && strcmp(argv[1], "--sweep") == 0)
        return run_sweep(argc, argv);
    /* help and version must work whatever the environment holds */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            bench_usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("ring-bench (ringd) %s\n", ring_version());
            return 0;
        }
    }
    ring_config_init(&cfg);
    if (ring_config_load_env(&cfg) != RING_OK) {
        fprintf(stderr, "ring-bench: %s\n", ring_last_error());
        rc = 2;
        goto out;
    }
    ring_config_check_env(stderr);
    rc = bench_parse(argc, argv, &o, &cfg);
    if (rc != 0)
        goto out;
    if (ring_config_validate(&cfg) != RING_OK) {
        fprintf(stderr, "ring-bench: %s\n", ring_last_error());
        rc = 2;
        goto out;
    }
    if (o.root >= cfg.world_size) {
        fprintf(stderr, "ring-bench: --root %d is not a rank of this ring of %d (0..%d)\n",
                o.root, cfg.world_size, cfg.world_size - 1);
        rc = 2;
        goto out;
    }
    /* -c: integer sums are exact in fp32; fp16 and bf16 round them after the average */
    o.tolerance = cfg.codec == RING_CFG_CODEC_FP16 || cfg.codec == RING_CFG_CODEC_AUTO
                      ? 0.002 * cfg.world_size
                  : cfg.codec == RING_CFG_CODEC_BF16 ? 0.016 * cfg.world_size
                                                     : 1e-5;
    if (o.overlap) {
        rc = bench_overlap(&o, &cfg);
        goto out;
    }
    if (o.doctor) {
        if (ring_comm_open(&cfg, &comm) != RING_OK) {
            fprintf(stderr, "ring-bench: rank %d: %s\n", cfg.rank, ring_last_error());
            rc = 1;
        } else {
            rc = bench_doctor(comm, &o);
        }
        goto out;
    }
    if (posix_memalign((void **)&sbuf, 4096, o.max_bytes + 64) != 0 ||
        posix_memalign((void **)&rbuf, 4096, o.max_bytes + 64) != 0 ||
        (slots = calloc((size_t)cfg.world_size, sizeof(float))) == NULL) {
        fprintf(stderr, "ring-bench: rank %d: out of memory for two %zu-byte buffers\n", cfg.rank,
                o.max_bytes);
        rc = 1;
        goto out;
    }
    memset(sbuf, 0, o.max_bytes);
    memset(rbuf, 0, o.max_bytes);
    bench_fill_timed(sbuf, o.max_bytes / sizeof(float), cfg.rank, o.sparsity, o.sparse_shared);
    if (o.device >= 0 &&
        (bench_cuda_open(o.device, why, sizeof(why)) != 0 ||
         (dsbuf = bench_cuda_alloc(o.max_bytes + 64, why, sizeof(why))) == NULL ||
         (drbuf = bench_cuda_alloc(o.max_bytes + 64, why, sizeof(why))) == NULL ||
         (bench_dev_sync(sbuf, rbuf, dsbuf, drbuf, o.max_bytes, 1) != 0 &&
          snprintf(why, sizeof(why), "--device cuda: copying to the GPU failed") > 0))) {
        fprintf(stderr, "ring-bench: rank %d: %s\n", cfg.rank, why);
        rc = 1;
        goto out;
    }
    if (ring_comm_open(&cfg, &comm) != RING_OK ||
        (o.register_bufs &&
         (ring_comm_register(comm, dsbuf != NULL ? dsbuf : sbuf, o.max_bytes) != RING_OK ||
          ring_comm_register(comm, drbuf != NULL ? drbuf : rbuf, o.max_bytes) != RING_OK))) {
        fprintf(stderr, "ring-bench: rank %d: %s\n", cfg.rank, ring_last_error());
        rc = 1;
        goto out;
    }
    if (cfg.rank == 0) {
        if (o.csv) {
            printf("bytes,count,dtype,time_us,algbw_GBps,busbw_GBps,wrong,coll\n");
        } else {
            char what[64], codec[16], lz4[16];
            int exact = o.coll == BENCH_BROADCAST || o.coll == BENCH_ALLGATHER;

            (void)ring_config_get(&cfg, "codec", codec, sizeof(codec));
            (void)ring_config_get(&cfg, "lz4", lz4, sizeof(lz4));
            if (o.coll == BENCH_BROADCAST)
                snprintf(what, sizeof(what), "broadcast from rank %d", o.root);
            else if (exact)
                snprintf(what, sizeof(what), "%s", bench_coll_name(o.coll));
            else
                snprintf(what, sizeof(what), "%s, op %s", bench_coll_name(o.coll),
                         o.op == RING_SUM ? "sum" : "avg");
            printf("# ring-bench (ringd %s): %s, %d peers, transport %s, chunk %zu, channels %d, "
                   "streams %d, codec %s, lz4 %s, %s, sparsity %g%s%s\n", ring_version(), what,
                   cfg.world_size, ring_comm_transport(comm), cfg.chunk_bytes, cfg.channels,
                   cfg.tcp_streams, codec, lz4,
                   o.inplace || o.coll == BENCH_BROADCAST ? "in place" : "out of place",
                   o.sparsity, o.sparse_shared ? " (shared)" : "",
                   o.device >= 0 ? ", buffers in GPU memory" : "");
            printf("# algbw = bytes/time, busbw = algbw * %.3f (%s), counting the user's "
                   "float32 bytes%s\n", bench_coll_busbw_factor(o.coll, cfg.world_size),
                   cfg.world_size == 1                               ? "one peer"
                   : o.coll == BENCH_ALLREDUCE                       ? "2(N-1)/N"
                   : o.coll == BENCH_BROADCAST                       ? "1"
                                                                     : "(N-1)/N",
                   exact ? " (bytes move unencoded, whatever the codec)" : ", whatever the codec");
            if (ring_comm_autotune_report(comm)[0] != '\0')
                printf("# %s\n", ring_comm_autotune_report(comm));
            printf("# %10s %12s %8s %12s %10s %10s %8s\n", "bytes", "count", "dtype", "time(us)",
                   "algbw", "busbw", "#wrong");
        }
        fflush(stdout);
    }
    for (double b = (double)o.min_bytes; b <= (double)o.max_bytes; b *= o.factor) {
        size_t bytes = ((size_t)b / sizeof(float)) * sizeof(float);
        int r = bench_size(comm, &o, bytes, sbuf, rbuf, dsbuf, drbuf, slots);
        if (r < 0) {
            fprintf(stderr, "ring-bench: rank %d: %s\n", cfg.rank, ring_last_error());
            rc = 1;
            goto out;
        }
        failed |= r;
        if (o.check) {
            bench_fill_timed(sbuf, o.max_bytes / sizeof(float), cfg.rank, o.sparsity, o.sparse_shared);
            (void)bench_dev_sync(sbuf, rbuf, dsbuf, drbuf, o.max_bytes, 1);
        }
    }
    if (cfg.rank == 0 && !o.csv) {
        ring_comm_stats_t st;
        char algo[16];

        ring_comm_get_stats(comm, &st);
        (void)ring_config_get(&cfg, "algo", algo, sizeof(algo));
        printf("# rank 0 sent %llu data frames, %llu of them lz4; payload %.1f MB on the wire "
               "for %.1f MB encoded (%.2fx)\n", (unsigned long long)st.frames_sent,
               (unsigned long long)st.frames_lz4, st.payload_bytes / 1e6, st.raw_bytes / 1e6,
               st.payload_bytes > 0 ? (double)st.raw_bytes / (double)st.payload_bytes : 0.0);
        printf("# %llu of %llu allreduces ran as recursive doubling (up to %llu bytes), %llu "
               "as Rabenseifner's (up to %llu bytes), %llu as direct (--algo %s)\n",
               (unsigned long long)st.rd_allreduces, (unsigned long long)st.allreduces,
               (unsigned long long)st.rd_max_bytes, (unsigned long long)st.rh_allreduces,
               (unsigned long long)st.rh_max_bytes, (unsigned long long)st.direct_allreduces,
               algo);
        if (st.codec_fit_fp32_us > 0)
            printf("# codec timed at open (rank 0): a %llu-byte allreduce took %llu us as fp32, "
                   "%llu us through the codec; calls travel as %s\n",
                   (unsigned long long)st.codec_fit_bytes,
                   (unsigned long long)st.codec_fit_fp32_us,
                   (unsigned long long)st.codec_fit_codec_us,
                   st.codec == 1 ? "fp16" : st.codec == 2 ? "bf16" : "fp32");
    }
    rc = failed ? 1 : 0;
    if (failed && cfg.rank == 0)
        fprintf(stderr, "ring-bench: the correctness check found wrong values\n");
out:
    ring_comm_close(comm);
    bench_cuda_free(dsbuf);
    bench_cuda_free(drbuf);
    free(sbuf);
    free(rbuf);
    free(slots);
    ring_config_free(&cfg);
    return rc;
}
