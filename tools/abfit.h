/*
 * abfit.h - the alpha-beta model of the ring allreduce and its fit, apart
 * from any I/O so tests/t-abfit.c can check the numbers (ring-abfit.c is the
 * program around it).
 *
 * The model (DESIGN.md, "The ring allreduce"): N peers run 2(N-1) dependent
 * steps, each paying a latency alpha, and every peer sends 2(N-1)/N x S bytes
 * through a link of bandwidth B:
 *
 *     t = 2(N-1) alpha + 2(N-1)/N S / B
 *
 * Units throughout: t and alpha in microseconds, S in bytes, so the fitted
 * slope 1/B is in microseconds per byte; B in bytes/s is 1e6 / slope.
 *
 * Errors are reported as text in a caller's buffer (err, errlen), one
 * sentence that says what is wrong and, for input, where. Functions return
 * RING_ABFIT_OK (0) on success and a negative value on error; outputs are
 * set only on success.
 */
#ifndef RING_ABFIT_H
#define RING_ABFIT_H

#include <stddef.h>
#include <stdio.h>

enum {
    RING_ABFIT_OK = 0,
    RING_ABFIT_BAD_INPUT = -1, /* not a table we can read: malformed, unreadable, columns missing */
    RING_ABFIT_NO_ROWS = -2,   /* a valid table without data rows, or none selected */
    RING_ABFIT_NO_FIT = -3,    /* the points cannot be fitted (see ring_abfit_fit) */
};

/* One measurement. */
typedef struct ring_abfit_point {
    int n;          /* peers in the ring, >= 2 */
    double bytes;   /* buffer size S, >= 0 */
    double time_us; /* time per allreduce, > 0 */
    long line;      /* line of the input it came from (0: not from a file) */
} ring_abfit_point_t;

typedef struct ring_abfit_result {
    double alpha_us, alpha_se_us; /* per-step latency and its standard error */
    double slope, slope_se;       /* 1/B in microseconds per byte, and its standard error */
    double bw_Bps, bw_se_Bps;     /* B = 1/slope in bytes/s; its standard error by the
                                     delta method (slope_se / slope^2) */
    double r2;                    /* R^2 of the weighted fit (see ring_abfit_fit) */
    double max_abs_err_pct;       /* largest |predicted - measured| / measured, in % */
    size_t worst;                 /* index of the point with that error */
    size_t points;                /* measurements used */
    size_t distinct;              /* distinct (n, bytes) pairs among them */
    int n_min, n_max;             /* range of n */
    double t95;                   /* Student's t for a 95 % two-sided interval on
                                     points - 2 degrees of freedom: alpha +- t95 x
                                     alpha_se_us is alpha's 95 % confidence interval */
    int alpha_unresolved;         /* alpha < 0 but its 95 % confidence interval holds 0:
                                     the latency term is too small for these data to see
                                     (also set when alpha_pinned) */
    int alpha_pinned;             /* ring_abfit_fit_nonneg: alpha came out clearly < 0 and
                                     was fixed at 0, B fitted alone */
    double alpha_free_us, alpha_free_se_us; /* ... what the free fit said, then */
} ring_abfit_result_t;

/* The model's time in microseconds for n peers and `bytes`. */
double ring_abfit_predict(double alpha_us, double slope, int n, double bytes);

/*
 * Fits alpha and 1/B by least squares weighted by 1/t^2 (see abfit.c for
 * why), with standard errors from the covariance of the fit. Fails with a
 * message when there are fewer than 3 distinct (n, bytes) points, only one
 * value of n, a design where alpha and 1/B cannot be told apart, B <= 0 (the
 * data do not follow the model), or alpha clearly negative (0 outside its
 * 95 % confidence interval). A point with n < 2 or t <= 0 is an error naming
 * its line. R^2 is 1 - sum w r^2 / sum w (t - tw)^2 with w = 1/t^2 and tw the
 * weighted mean time: the share of the weighted variation the model explains.
 */
int ring_abfit_fit(const ring_abfit_point_t *pts, size_t npts, ring_abfit_result_t *res_p,
                   char *err, size_t errlen); /* RING_ABFIT_OK or RING_ABFIT_NO_FIT */

/*
 * As ring_abfit_fit, but alpha clearly < 0 is not a refusal: alpha is fixed
 * at 0 and 1/B fitted alone (weighted least squares on points - 1 degrees of
 * freedom), with alpha_pinned set and the free fit's alpha kept. For links
 * capped by a token bucket (--rate-limit, tc tbf): a peer that waits between
 * ring steps gets tokens meanwhile and sends ahead of the rate, which takes
 * a little off every step and so looks like a negative latency.
 */
int ring_abfit_fit_nonneg(const ring_abfit_point_t *pts, size_t npts, ring_abfit_result_t *res_p,
                          char *err, size_t errlen);

/* A --where condition: rows whose `column` equals `value` (as text, exactly). */
typedef struct ring_abfit_filter {
    const char *column;
    const char *value;
} ring_abfit_filter_t;

/*
 * Reads a CSV table from f: a header line naming the columns (at least n,
 * bytes and time_us; others are ignored but may be filtered on), then one row
 * a line. Fields are separated by commas and may be double-quoted ("" is a
 * quote); empty lines and lines starting with '#' are skipped; CRLF is fine.
 * Rows that match every filter become points (in input order, *points_p
 * allocated with malloc, the caller frees it); *rows_p is the number of data
 * rows read. A row with a field count other than the header's, or a selected
 * row whose n, bytes or time_us is not a number (or out of range), fails with
 * "NAME:LINE: ..." in err, and so does a filter on a column the header lacks
 * (RING_ABFIT_BAD_INPUT, also for an empty or unreadable input). A table
 * without data rows, or a selection that is empty, is RING_ABFIT_NO_ROWS (the
 * message names the values the filtered column holds).
 */
int ring_abfit_csv_read(FILE *f, const char *name, const ring_abfit_filter_t *filters,
                        size_t nfilters, ring_abfit_point_t **points_p, size_t *npoints_p,
                        size_t *rows_p, char *err, size_t errlen);

#endif /* RING_ABFIT_H */
