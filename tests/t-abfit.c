/*
 * t-abfit - the alpha-beta fit behind tools/ring-abfit: known alpha and B
 * come back from synthetic timings (exact, and with +-2 % deterministic
 * noise within the stated standard errors), degenerate data are refused
 * with a message that says why, and the CSV reader selects rows and names
 * the line of anything malformed.
 */
#include "ring_build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/abfit.h"
#include "tap.h"

#define MiB 1048576.0

/* deterministic noise in [-1, 1] (a 64-bit LCG; the same on every machine) */
static double noise(unsigned long long *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

/* N = 2..8 x 1, 2, 4, ..., 64 MiB, timed by the model, times (1 + amp * noise) */
static size_t synth(ring_abfit_point_t *p, double alpha, double bw, double amp,
                    unsigned long long seed)
{
    size_t k = 0;

    for (int n = 2; n <= 8; n++)
        for (double s = MiB; s <= 64 * MiB; s *= 2) {
            double t = ring_abfit_predict(alpha, 1e6 / bw, n, s);
            p[k] = (ring_abfit_point_t){.n = n, .bytes = s, .time_us = t, .line = (long)k + 2};
            if (amp > 0)
                p[k].time_us *= 1.0 + amp * noise(&seed);
            k++;
        }
    return k;
}

static void test_predict(void)
{
    /* n=4: 6 steps of alpha, and 6/4 S bytes at B (slope = 1/B in us per byte) */
    ok(fabs(ring_abfit_predict(10, 1e-3, 4, 1000) - (60 + 1.5)) < 1e-12,
       "predict: 2(N-1) alpha + 2(N-1)/N S/B");
    ok(fabs(ring_abfit_predict(7, 0.5, 2, 8) - (14 + 4)) < 1e-12, "predict: n=2 sends S once");
}

static void test_exact(void)
{
    static const double cases[][2] = {{50, 1.25e9}, {30, 0.119e9}, {200, 10e9}, {5, 2e9}};
    ring_abfit_point_t p[64];
    char err[512];

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        double alpha = cases[c][0], bw = cases[c][1];
        size_t np = synth(p, alpha, bw, 0, 0);
        ring_abfit_result_t r;
        int rc = ring_abfit_fit(p, np, &r, err, sizeof(err));

        if (!is_int(rc, RING_ABFIT_OK, "exact alpha %g us, B %g GB/s: fitted", alpha, bw / 1e9)) {
            diag("%s", err);
            continue;
        }
        ok(fabs(r.alpha_us - alpha) < 1e-6 * alpha && fabs(r.bw_Bps - bw) < 1e-9 * bw,
           "exact: alpha %.9g (want %g), B %.9g (want %g)", r.alpha_us, alpha, r.bw_Bps, bw);
        ok(r.r2 > 1 - 1e-12 && r.max_abs_err_pct < 1e-7 && r.alpha_se_us < 1e-6 * alpha &&
               r.bw_se_Bps < 1e-9 * bw,
           "exact: R^2 %.15f, max error %.2g %%, standard errors %.2g us and %.2g B/s", r.r2,
           r.max_abs_err_pct, r.alpha_se_us, r.bw_se_Bps);
        ok(r.points == 49 && r.distinct == 49 && r.n_min == 2 && r.n_max == 8 &&
               !r.alpha_unresolved,
           "exact: 49 points, n 2..8");
    }
}

/* +-2 % noise: the true values lie within 3 standard errors, the errors are
 * small enough to mean something, and the model predicts within ~the noise */
static void test_noise(void)
{
    static const struct {
        double alpha, bw;
        unsigned long long seed;
    } cases[] = {{50, 1.25e9, 1}, {30, 0.119e9, 2}, {200, 10e9, 3}, {100, 2e9, 4}, {50, 1.25e9, 5}};
    ring_abfit_point_t p[64];
    char err[512];

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        double alpha = cases[c].alpha, bw = cases[c].bw;
        size_t np = synth(p, alpha, bw, 0.02, cases[c].seed);
        ring_abfit_result_t r;
        int rc = ring_abfit_fit(p, np, &r, err, sizeof(err));

        if (!is_int(rc, RING_ABFIT_OK, "2%% noise, alpha %g us, B %g GB/s: fitted", alpha,
                    bw / 1e9)) {
            diag("%s", err);
            continue;
        }
        ok(fabs(r.alpha_us - alpha) <= 3 * r.alpha_se_us,
           "2%% noise: alpha %.4g +- %.3g us, true %g within 3 standard errors", r.alpha_us,
           r.alpha_se_us, alpha);
        ok(fabs(r.bw_Bps - bw) <= 3 * r.bw_se_Bps && r.bw_se_Bps < 0.01 * bw,
           "2%% noise: B %.5g +- %.2g GB/s, true %g within 3 standard errors (< 1 %%)",
           r.bw_Bps / 1e9, r.bw_se_Bps / 1e9, bw / 1e9);
        ok(r.max_abs_err_pct < 4.5 && r.r2 > 0.99, "2%% noise: max error %.2f %% (< 4.5), R^2 %.5f",
           r.max_abs_err_pct, r.r2);
    }
}

/* every (n, bytes) twice, at +2 % and -2 %: the 1/t^2 weights pull the fit
 * to c = (1 - e^2) / (1 + e^2) times the truth, exactly, for both parameters */
static void test_pairs(void)
{
    ring_abfit_point_t p[128], q[64];
    size_t np = synth(q, 40, 1e9, 0, 0);
    double e = 0.02, c = (1 - e * e) / (1 + e * e);
    ring_abfit_result_t r;
    char err[512];
    int rc;

    for (size_t i = 0; i < np; i++) {
        p[2 * i] = p[2 * i + 1] = q[i];
        p[2 * i].time_us *= 1 + e;
        p[2 * i + 1].time_us *= 1 - e;
    }
    rc = ring_abfit_fit(p, 2 * np, &r, err, sizeof(err));
    is_int(rc, RING_ABFIT_OK, "+-2 %% pairs: fitted");
    ok(fabs(r.alpha_us - 40 * c) < 1e-9 * 40 && fabs(r.slope - 1e-3 * c) < 1e-9 * 1e-3,
       "+-2 %% pairs: alpha %.9g and 1/B %.9g are the truth times %.9f", r.alpha_us, r.slope, c);
    ok(r.points == 2 * np && r.distinct == np, "+-2 %% pairs: %zu points, %zu distinct", r.points,
       r.distinct);
    ok(fabs(r.max_abs_err_pct - 100 * (1 + e - c) / (1 + e)) < 1e-6,
       "+-2 %% pairs: max error %.4f %% (the +2 %% points)", r.max_abs_err_pct);

    /* the same with alpha slightly negative (-1 us, where 2 % noise on these
     * sizes leaves a standard error of about 1.4 us): not resolved, not an error */
    np = synth(q, -1, 1e9, 0, 0);
    for (size_t i = 0; i < np; i++) {
        p[2 * i] = p[2 * i + 1] = q[i];
        p[2 * i].time_us *= 1 + e;
        p[2 * i + 1].time_us *= 1 - e;
    }
    rc = ring_abfit_fit(p, 2 * np, &r, err, sizeof(err));
    is_int(rc, RING_ABFIT_OK, "alpha -1 us under 2 %% noise: fitted, not refused");
    ok(r.alpha_us < 0 && r.alpha_us + r.t95 * r.alpha_se_us >= 0 && r.alpha_unresolved &&
           fabs(r.t95 - 1.96 - 2.4 / 96) < 1e-12,
       "alpha %.3g +- %.3g us: 0 within its 95%% interval, flagged unresolved", r.alpha_us,
       r.alpha_se_us);
}

/* four points (2 degrees of freedom): the 95 % interval is 4.303 standard
 * errors wide on each side, not 2 */
static void test_few_points(void)
{
    ring_abfit_point_t p[4];
    ring_abfit_result_t r;
    char err[512];
    size_t k = 0;
    int rc;

    for (int n = 2; n <= 3; n++)
        for (double s = MiB; s <= 4 * MiB; s *= 4, k++)
            p[k] = (ring_abfit_point_t){n, s, ring_abfit_predict(10, 8e-3, n, s), (long)k + 2};
    p[0].time_us *= 0.99; /* n=2, 1 MiB: 1 % fast */
    rc = ring_abfit_fit(p, 4, &r, err, sizeof(err));
    ok(rc == RING_ABFIT_OK && r.t95 == 4.303, "4 points: fitted, t = %.3f for 2 degrees of freedom",
       r.t95);
}

static int fails_with(const ring_abfit_point_t *p, size_t np, const char *want, const char *what)
{
    ring_abfit_result_t r = {.alpha_us = 12345};
    char err[512] = "";
    int rc = ring_abfit_fit(p, np, &r, err, sizeof(err));
    int good = rc == RING_ABFIT_NO_FIT && strstr(err, want) != NULL && r.alpha_us == 12345;

    ok(good, "%s: refused with '...%s...'", what, want);
    if (!good)
        diag("rc %d, message: %s", rc, err);
    return good;
}

static void test_degenerate(void)
{
    ring_abfit_point_t p[64];
    size_t k = 0;

    /* one N only: alpha is a constant per call, indistinguishable from overhead */
    for (double s = MiB; s <= 64 * MiB; s *= 4, k++)
        p[k] = (ring_abfit_point_t){4, s, ring_abfit_predict(50, 1e-3, 4, s), (long)k + 2};
    fails_with(p, k, "every point has n = 4", "one n only");
    fails_with(p, k, "measure at least two values of n", "one n only: says what to do");

    /* two distinct points, even if repeated */
    p[0] = (ring_abfit_point_t){2, MiB, 1000, 2};
    p[1] = (ring_abfit_point_t){4, MiB, 1600, 3};
    p[2] = p[1];
    fails_with(p, 3, "too few distinct points: 2 distinct", "two distinct points");
    fails_with(p, 0, "no measurements", "no points");

    /* bytes / n the same everywhere: the two terms grow together */
    k = 0;
    for (int n = 2; n <= 8; n *= 2, k++)
        p[k] =
            (ring_abfit_point_t){n, n * MiB, ring_abfit_predict(50, 1e-3, n, n * MiB), (long)k + 2};
    fails_with(p, k, "cannot be told apart", "bytes/n constant");

    /* times that fall as the buffer grows: B < 0 */
    k = 0;
    for (int n = 2; n <= 4; n++)
        for (double s = MiB; s <= 16 * MiB; s *= 4, k++)
            p[k] = (ring_abfit_point_t){n, s, 1e5 * n / (s / MiB), (long)k + 2};
    fails_with(p, k, "do not follow the model", "times falling with size");
    fails_with(p, k, "B would be negative", "times falling with size: B < 0 named");

    /* exact data with alpha = -200 us (all times still positive): clearly negative */
    k = synth(p, -200, 0.1e9, 0, 0);
    fails_with(p, k, "negative beyond its 95 % confidence interval", "alpha clearly negative");

    /* bad points (the CSV reader refuses these first; the fit checks too) */
    k = synth(p, 50, 1e9, 0, 0);
    p[5].n = 1;
    fails_with(p, k, "point 6 (line 7): n = 1", "n = 1");
    p[5].n = 2;
    p[7].time_us = 0;
    fails_with(p, k, "time_us = 0", "time 0");
    p[7].time_us = 1;
    p[8].bytes = -1;
    fails_with(p, k, "bytes = -1", "negative size");
}

/* ring_abfit_fit_nonneg: alpha pinned at 0 only when the free fit finds it clearly < 0 */
static void test_nonneg(void)
{
    ring_abfit_point_t p[64];
    ring_abfit_result_t r, free_r;
    char err[512];
    size_t k;
    int rc;

    /* a token bucket's advance: every step 100 us ahead of the 1 Gbit/s rate */
    k = synth(p, -100, 0.125e9, 0.002, 7);
    rc = ring_abfit_fit_nonneg(p, k, &r, err, sizeof(err));
    ok(rc == 0 && r.alpha_pinned && r.alpha_unresolved && r.alpha_us == 0 &&
           r.alpha_free_us < -50 && r.alpha_free_us > -150,
       "nonneg: alpha -100 us is fixed at 0 (the free fit said %.1f us)", rc == 0 ? r.alpha_free_us : 0);
    ok(rc == 0 && fabs(r.bw_Bps / 0.125e9 - 1) < 0.05 && r.bw_se_Bps > 0 && r.bw_se_Bps < 0.01e9,
       "nonneg: B = %.4g GB/s +- %.2g, within 5 %% of 0.125 with alpha's part folded in",
       rc == 0 ? r.bw_Bps / 1e9 : 0, rc == 0 ? r.bw_se_Bps / 1e9 : 0);
    ok(rc == 0 && r.max_abs_err_pct < 15 && r.r2 > 0.99,
       "nonneg: the pinned model still predicts every point within 15 %% (worst %.1f %%)",
       rc == 0 ? r.max_abs_err_pct : 0);
    /* data that follow the model: the same fit as ring_abfit_fit */
    k = synth(p, 40, 1e9, 0.01, 3);
    rc = ring_abfit_fit_nonneg(p, k, &r, err, sizeof(err)) |
         ring_abfit_fit(p, k, &free_r, err, sizeof(err));
    ok(rc == 0 && !r.alpha_pinned && r.alpha_us == free_r.alpha_us && r.bw_Bps == free_r.bw_Bps,
       "nonneg: a positive alpha is left as the free fit found it");
}

/* ---- CSV ---------------------------------------------------------------------- */

typedef struct csv_case {
    int rc;
    size_t npts, rows;
    ring_abfit_point_t p[16];
    char err[512];
} csv_case_t;

static void csv_read(const char *text, const ring_abfit_filter_t *f, size_t nf, csv_case_t *c)
{
    FILE *fp = fmemopen((void *)text, strlen(text), "r");
    ring_abfit_point_t *pts = NULL;

    memset(c, 0, sizeof(*c));
    if (fp == NULL)
        bail("fmemopen failed");
    c->rc =
        ring_abfit_csv_read(fp, "t.csv", f, nf, &pts, &c->npts, &c->rows, c->err, sizeof(c->err));
    fclose(fp);
    if (c->rc == RING_ABFIT_OK) {
        if (c->npts <= 16)
            memcpy(c->p, pts, c->npts * sizeof(*pts));
        free(pts);
    }
}

static void csv_fails(const char *text, const ring_abfit_filter_t *f, size_t nf, int want_rc,
                      const char *want, const char *what)
{
    csv_case_t c;

    csv_read(text, f, nf, &c);
    if (!ok(c.rc == want_rc && strstr(c.err, want) != NULL, "csv %s: '...%s...'", what, want))
        diag("rc %d, message: %s", c.rc, c.err);
}

static void test_csv(void)
{
    static const char table[] = "# a comment line\n"
                                "rate,method,codec,n,bytes,time_us,wrong,status\r\n"
                                "1gbit,tc,none,2,16777216,144938.5,0,ok\r\n"
                                "\n"
                                "1gbit,tc,fp16,2,16777216,73000,0,ok\n"
                                "1gbit , tc , \"none\",4, 1.6777216e7 ,215000,0,ok\n"
                                "none,tc,none,4,16777216,,,\"exit 124, timeout\"\n"
                                "1gbit,tc,\"fp16\"\"x\",3,1024,100,0,ok\n";
    ring_abfit_filter_t none[] = {{"codec", "none"}, {"rate", "1gbit"}};
    ring_abfit_filter_t quoted[] = {{"codec", "fp16\"x"}};
    ring_abfit_filter_t bad[] = {{"codec", "bf16"}};
    ring_abfit_filter_t both[] = {{"codec", "fp16"}, {"n", "4"}};
    ring_abfit_filter_t nocol[] = {{"colour", "red"}};
    csv_case_t c;

    csv_read(table, none, 2, &c);
    is_int(c.rc, RING_ABFIT_OK, "csv: a table with comments, blank lines, CRLF, quotes");
    ok(c.rows == 5 && c.npts == 2,
       "csv: 5 data rows, --where codec=none rate=1gbit selects 2 (%zu, %zu)", c.rows, c.npts);
    ok(c.p[0].n == 2 && c.p[0].bytes == 16777216 && c.p[0].time_us == 144938.5 &&
           c.p[0].line == 3 && c.p[1].n == 4 && c.p[1].bytes == 16777216 &&
           c.p[1].time_us == 215000 && c.p[1].line == 6,
       "csv: values, blanks around fields and the line numbers");
    csv_read(table, quoted, 1, &c);
    ok(c.rc == RING_ABFIT_OK && c.npts == 1 && c.p[0].n == 3 && c.p[0].line == 8,
       "csv: a quoted field with a doubled quote matches");

    /* the unselected row with an empty time does not matter; selected, it does */
    csv_fails(table, NULL, 0, RING_ABFIT_BAD_INPUT, "t.csv:7: time_us is empty",
              "empty time, selected");
    csv_fails(table, bad, 1, RING_ABFIT_NO_ROWS,
              "none of the 5 rows has codec=bf16 (column codec holds 'none', 'fp16', 'fp16\"x')",
              "no row selected: the values are named");
    csv_fails(table, both, 2, RING_ABFIT_NO_ROWS, "matches all of --where codec=fp16 --where n=4",
              "filters that only fail together");
    csv_fails(table, nocol, 1, RING_ABFIT_BAD_INPUT,
              "t.csv:2: --where colour=red: the header has no column 'colour'",
              "filter on a missing column");

    csv_fails("n,bytes,time_us\n2,1024,5\n3,1024\n", NULL, 0, RING_ABFIT_BAD_INPUT,
              "t.csv:3: malformed CSV: 2 fields, but the header has 3", "too few fields");
    csv_fails("n,bytes,time_us\n2,1024,5,6\n", NULL, 0, RING_ABFIT_BAD_INPUT,
              "t.csv:2: malformed CSV: 4 fields", "too many fields");
    csv_fails("n,bytes,time_us\n2,1024,5\n2,1k,5\n", NULL, 0, RING_ABFIT_BAD_INPUT,
              "t.csv:3: bytes is '1k', not a number", "a size with a suffix");
    csv_fails("n,bytes,time_us\n2.5,1024,5\n", NULL, 0, RING_ABFIT_BAD_INPUT,
              "t.csv:2: n = 2.5, but a ring has a whole number of peers", "fractional n");
    csv_fails("n,bytes,time_us\n1,1024,5\n", NULL, 0, RING_ABFIT_BAD_INPUT, "t.csv:2: n = 1",
              "n = 1");
    csv_fails("n,bytes,time_us\n2,1024,-5\n", NULL, 0, RING_ABFIT_BAD_INPUT,
              "t.csv:2: time_us = -5, but times must be positive", "negative time");
    csv_fails("n,bytes,time_us\n2,-1,5\n", NULL, 0, RING_ABFIT_BAD_INPUT, "t.csv:2: bytes = -1",
              "negative size");
    csv_fails("n,bytes,time_us\n2,1024,nan\n", NULL, 0, RING_ABFIT_BAD_INPUT,
              "time_us is 'nan', not a number", "nan");
    csv_fails("n,bytes,time_us\n2,\"1024,5\n", NULL, 0, RING_ABFIT_BAD_INPUT,
              "t.csv:2: malformed CSV: a quoted field has no closing quote", "unclosed quote");
    csv_fails("n,bytes,time_us\n2,\"1024\"x,5\n", NULL, 0, RING_ABFIT_BAD_INPUT,
              "text after a quoted field's closing quote", "text after a quote");
    csv_fails("n,bytes,time\n2,1024,5\n", NULL, 0, RING_ABFIT_BAD_INPUT,
              "t.csv:1: the header has no column 'time_us'", "missing column");
    csv_fails("# only a comment\n\n", NULL, 0, RING_ABFIT_BAD_INPUT,
              "t.csv: empty (no header line)", "empty input");
    csv_fails("n,bytes,time_us\n", NULL, 0, RING_ABFIT_NO_ROWS,
              "t.csv: no data rows after the header", "header only");
}

int main(void)
{
    plan(81);
    test_predict();
    test_exact();
    test_noise();
    test_pairs();
    test_few_points();
    test_degenerate();
    test_nonneg();
    test_csv();
    return done_testing();
}
