/*
 * ring-abfit - fits the alpha-beta model of the ring allreduce,
 * t = 2(N-1) alpha + 2(N-1)/N S/B, to measured times (a CSV table, such as
 * ring-sweep's results.csv) and says how well it predicts them. The math is
 * in abfit.c; this file is the command line and the output.
 */
#include "ring_build.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abfit.h"

#define ABFIT_MAX_FILTERS 32

static void abfit_usage(FILE *out)
{
    fprintf(out, "Usage: ring-abfit [--where COLUMN=VALUE]... [--predictions] [--csv]\n"
                 "                  [--nonneg-alpha] [FILE]\n"
                 "\n"
                 "Fits the alpha-beta model of the ring allreduce to measured times:\n"
                 "\n"
                 "    t = 2(N-1) alpha + 2(N-1)/N S / B\n"
                 "\n"
                 "N peers, S buffer bytes, alpha the latency of one of the 2(N-1) ring steps,\n"
                 "B the link bandwidth (each peer sends 2(N-1)/N S bytes). alpha and 1/B are\n"
                 "found by linear least squares weighted by 1/t^2, so every point counts by\n"
                 "its relative error. Prints alpha (us) and B (GB/s = 1e9 B/s, and Gbit/s),\n"
                 "each with its standard error, R^2 of the weighted fit and the largest\n"
                 "prediction error in %%.\n"
                 "\n"
                 "FILE (default: standard input; '-' too) is a CSV table with a header line\n"
                 "naming at least the columns n, bytes and time_us (time per allreduce, us);\n"
                 "other columns are ignored unless --where names them. Lines starting with\n"
                 "'#' and empty lines are skipped. ring-sweep's results.csv is one.\n"
                 "B is in the bytes of the table: for a compressed codec that is the user's\n"
                 "fp32 bytes, so fp16 shows about twice the link's bandwidth.\n"
                 "\n"
                 "Options:\n"
                 "  -w, --where COLUMN=VALUE  use only the rows whose COLUMN is VALUE (text,\n"
                 "                            exactly); repeat to require several\n"
                 "  -p, --predictions         also print, for every row used, the model's time\n"
                 "                            and its error in %% of the measured time\n"
                 "      --csv                 print CSV for scripts (see below)\n"
                 "      --nonneg-alpha        when alpha comes out clearly negative, fix it at 0\n"
                 "                            and fit B alone instead of refusing: links capped\n"
                 "                            by a token bucket (--rate-limit, tc tbf) let a peer\n"
                 "                            that waited between ring steps send ahead of the\n"
                 "                            rate, which looks like a negative latency\n"
                 "  -h, --help                this text\n"
                 "      --version             print the version\n"
                 "\n"
                 "CSV output: the header\n"
                 "  kind,line,n,bytes,time_us,model_us,error_pct,points,alpha_us,alpha_se_us,\n"
                 "  bw_GBps,bw_se_GBps,bw_Gbps,bw_se_Gbps,r2,max_abs_error_pct,alpha_resolved\n"
                 "(one line), then one row of kind 'fit' (the columns from points on), then\n"
                 "with --predictions one row of kind 'point' per input row used (line to\n"
                 "error_pct). alpha_resolved is 0 when alpha came out negative but its 95 %%\n"
                 "confidence interval holds 0: the latency term is too small for the data;\n"
                 "also when --nonneg-alpha fixed it at 0.\n"
                 "\n"
                 "The fit needs at least 3 distinct (n, bytes) points and two values of n\n"
                 "(with one n, alpha cannot be told apart from a fixed cost per call).\n"
                 "\n"
                 "Exit status: 0 fitted; 1 the data cannot be fitted (too few points, one n,\n"
                 "no row selected, B <= 0 or alpha clearly < 0: the data do not follow the\n"
                 "model); 2 bad usage, an unreadable file or malformed CSV (the message names\n"
                 "the line).\n"
                 "\n"
                 "Example:\n"
                 "  ring-abfit --where codec=none --where rate=1gbit --predictions results.csv\n");
}

/* "16 MiB" when it is a whole number of KiB/MiB/GiB, else the bytes */
static const char *abfit_size_str(double bytes, char *buf, size_t len)
{
    static const char *const units[] = {"GiB", "MiB", "KiB"};
    static const double scale[] = {1073741824.0, 1048576.0, 1024.0};

    for (int i = 0; i < 3; i++)
        if (bytes >= scale[i] && bytes / scale[i] == (double)(long long)(bytes / scale[i])) {
            snprintf(buf, len, "%lld %s", (long long)(bytes / scale[i]), units[i]);
            return buf;
        }
    snprintf(buf, len, "%.0f B", bytes);
    return buf;
}

static void abfit_print_text(const ring_abfit_point_t *pts, const ring_abfit_result_t *r,
                             int predictions, size_t rows)
{
    const ring_abfit_point_t *w = &pts[r->worst];
    double smin = pts[0].bytes, smax = pts[0].bytes;
    char a[32], b[32];

    for (size_t i = 1; i < r->points; i++) {
        if (pts[i].bytes < smin)
            smin = pts[i].bytes;
        if (pts[i].bytes > smax)
            smax = pts[i].bytes;
    }
    printf("alpha-beta fit: t = 2(N-1) alpha + 2(N-1)/N S/B, least squares weighted by 1/t^2\n");
    printf("  points       %zu of %zu rows (%zu distinct (n, bytes); n %d..%d; bytes %s..%s)\n",
           r->points, rows, r->distinct, r->n_min, r->n_max, abfit_size_str(smin, a, sizeof(a)),
           abfit_size_str(smax, b, sizeof(b)));
    printf("  alpha        %.4g +- %.4g us per step\n", r->alpha_us, r->alpha_se_us);
    printf("  B            %.5g +- %.2g GB/s = %.5g +- %.2g Gbit/s\n", r->bw_Bps / 1e9,
           r->bw_se_Bps / 1e9, r->bw_Bps * 8 / 1e9, r->bw_se_Bps * 8 / 1e9);
    printf("  R^2          %.6f (weighted)\n", r->r2);
    printf("  max |error|  %.2f %% (line %ld: n=%d, bytes=%.0f)\n", r->max_abs_err_pct, w->line,
           w->n, w->bytes);
    if (r->alpha_pinned)
        printf("  note: alpha fixed at 0 (--nonneg-alpha): the free fit gave %.4g +- %.4g us, "
               "clearly negative, as links capped by a token bucket do: a peer that waited "
               "between ring steps sends ahead of the rate\n", r->alpha_free_us,
               r->alpha_free_se_us);
    else if (r->alpha_unresolved)
        printf("  note: alpha < 0 but its 95 %% confidence interval holds 0: these times do not "
               "resolve the per-step latency (try smaller sizes)\n");
    if (!predictions)
        return;
    printf("\n%8s %5s %14s %14s %14s %9s\n", "line", "n", "bytes", "time_us", "model_us", "error%");
    for (size_t i = 0; i < r->points; i++) {
        double m = ring_abfit_predict(r->alpha_us, r->slope, pts[i].n, pts[i].bytes);
        printf("%8ld %5d %14.0f %14.2f %14.2f %+9.2f\n", pts[i].line, pts[i].n, pts[i].bytes,
               pts[i].time_us, m, (m - pts[i].time_us) / pts[i].time_us * 100.0);
    }
}

static void abfit_print_csv(const ring_abfit_point_t *pts, const ring_abfit_result_t *r,
                            int predictions)
{
    printf("kind,line,n,bytes,time_us,model_us,error_pct,points,alpha_us,alpha_se_us,bw_GBps,"
           "bw_se_GBps,bw_Gbps,bw_se_Gbps,r2,max_abs_error_pct,alpha_resolved\n");
    printf("fit,,,,,,,%zu,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6f,%.4f,%d\n", r->points, r->alpha_us,
           r->alpha_se_us, r->bw_Bps / 1e9, r->bw_se_Bps / 1e9, r->bw_Bps * 8 / 1e9,
           r->bw_se_Bps * 8 / 1e9, r->r2, r->max_abs_err_pct, !r->alpha_unresolved);
    if (!predictions)
        return;
    for (size_t i = 0; i < r->points; i++) {
        double m = ring_abfit_predict(r->alpha_us, r->slope, pts[i].n, pts[i].bytes);
        printf("point,%ld,%d,%.0f,%.6g,%.6g,%.4f,,,,,,,,,,\n", pts[i].line, pts[i].n, pts[i].bytes,
               pts[i].time_us, m, (m - pts[i].time_us) / pts[i].time_us * 100.0);
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"where", required_argument, NULL, 'w'}, {"predictions", no_argument, NULL, 'p'},
        {"csv", no_argument, NULL, 'C'},         {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},     {"nonneg-alpha", no_argument, NULL, 'N'},
        {NULL, 0, NULL, 0}};
    ring_abfit_filter_t filters[ABFIT_MAX_FILTERS];
    size_t nfilters = 0, npts = 0, rows = 0;
    ring_abfit_point_t *pts = NULL;
    ring_abfit_result_t res;
    const char *path = "-", *name = "(standard input)";
    char err[1024];
    int opt, csv = 0, predictions = 0, nonneg = 0, rc;
    FILE *f = stdin;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":w:ph", longopts, NULL)) != -1) {
        switch (opt) {
        case 'w': {
            char *eq = strchr(optarg, '=');
            if (eq == NULL || eq == optarg) {
                fprintf(stderr,
                        "ring-abfit: --where '%s': expected COLUMN=VALUE (e.g. codec=none)\n",
                        optarg);
                return 2;
            }
            if (nfilters == ABFIT_MAX_FILTERS) {
                fprintf(stderr, "ring-abfit: more than %d --where conditions\n", ABFIT_MAX_FILTERS);
                return 2;
            }
            *eq = '\0';
            filters[nfilters].column = optarg;
            filters[nfilters].value = eq + 1;
            nfilters++;
            break;
        }
        case 'p': predictions = 1; break;
        case 'C': csv = 1; break;
        case 'N': nonneg = 1; break;
        case 'h': abfit_usage(stdout); return 0;
        case 'V': printf("ring-abfit (ringd) %s\n", PACKAGE_VERSION); return 0;
        case ':':
            fprintf(stderr,
                    "ring-abfit: option '%s' needs a value (COLUMN=VALUE); see ring-abfit --help\n",
                    argv[optind - 1]);
            return 2;
        default:
            if (optopt != 0)
                fprintf(stderr, "ring-abfit: unknown option '-%c'; see ring-abfit --help\n",
                        optopt);
            else
                fprintf(stderr, "ring-abfit: unknown option '%s'; see ring-abfit --help\n",
                        argv[optind - 1]);
            return 2;
        }
    }
    if (argc - optind > 1) {
        fprintf(stderr,
                "ring-abfit: unexpected argument '%s' (one FILE at most); see ring-abfit --help\n",
                argv[optind + 1]);
        return 2;
    }
    if (optind < argc)
        path = argv[optind];
    if (strcmp(path, "-") != 0) {
        if ((f = fopen(path, "r")) == NULL) {
            fprintf(stderr, "ring-abfit: cannot open %s: %s\n", path, strerror(errno));
            return 2;
        }
        name = path;
    } else if (isatty(STDIN_FILENO)) {
        fprintf(stderr,
                "ring-abfit: no input: give a CSV file, or pipe one in; see ring-abfit --help\n");
        return 2;
    }
    rc = ring_abfit_csv_read(f, name, filters, nfilters, &pts, &npts, &rows, err, sizeof(err));
    if (f != stdin)
        fclose(f);
    if (rc != 0) {
        fprintf(stderr, "ring-abfit: %s\n", err);
        /* a valid table that selects nothing is a data problem, not bad usage */
        return rc == RING_ABFIT_NO_ROWS ? 1 : 2;
    }
    if ((nonneg ? ring_abfit_fit_nonneg : ring_abfit_fit)(pts, npts, &res, err, sizeof(err)) != 0) {
        fprintf(stderr, "ring-abfit: %s: cannot fit: %s\n", name, err);
        free(pts);
        return 1;
    }
    if (csv)
        abfit_print_csv(pts, &res, predictions);
    else
        abfit_print_text(pts, &res, predictions, rows);
    free(pts);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "ring-abfit: writing the output: %s\n", strerror(errno));
        return 2;
    }
    return 0;
}
