/*
 * abfit.c - fitting the alpha-beta model of the ring allreduce, and reading
 * the CSV tables it is fitted to. No output here: see abfit.h for the
 * contracts and ring-abfit.c for the program.
 */
#include "ring_build.h"

#include "abfit.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* writes the message; returns rc, so that "return abfit_err(RC, ...)" reads well */
static int abfit_err(int rc, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int abfit_err(int rc, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

double ring_abfit_predict(double alpha_us, double slope, int n, double bytes)
{
    double steps = 2.0 * (n - 1);

    return steps * alpha_us + steps / n * bytes * slope;
}

/* ---- the fit ---------------------------------------------------------------- */

/*
 * Student's t quantile 0.975 for dof degrees of freedom: a sweep has a handful
 * of points, and with 2 degrees of freedom "2 standard errors" is an 82 %
 * interval, not a 95 % one. Exact to 3 decimals up to 30, then 1.96 + 2.4/dof
 * (within 0.002 of the true value beyond).
 */
static double abfit_t95(size_t dof)
{
    static const double t[] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                               2.306, 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                               2.120, 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                               2.064, 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};

    if (dof < sizeof(t) / sizeof(t[0]))
        return t[dof];
    return 1.96 + 2.4 / (double)dof;
}

/*
 * Why weights 1/t^2. The points span two orders of magnitude in time (1 MiB
 * on 2 peers to 64 MiB on 8), and timing noise on a shared machine is
 * roughly proportional to the time measured (a busy core slows a whole
 * call, not a fixed number of microseconds). Plain least squares would let
 * the few largest times decide both parameters and leave the small ones,
 * where alpha shows, to fit as they may. Minimising sum ((t - model) / t)^2
 * instead gives every point the same say in relative terms, which is also
 * how the model is judged (prediction error in %). Using the measured t in
 * the weight, not the model's, biases the fit by about the square of the
 * relative noise (4e-4 at 2 %), far below the noise itself.
 *
 * The two columns differ by eight orders of magnitude (2(N-1) against bytes),
 * so each is scaled to unit weighted norm before the 2x2 normal equations are
 * solved; the standard errors come from sigma^2 (X'WX)^-1 with sigma^2 the
 * weighted residual variance on npts - 2 degrees of freedom.
 */
/* 1/B alone, with alpha = 0: the weighted least squares of t = x S' / B, S' = 2(N-1)/N S. */
static void abfit_fit_slope_only(const ring_abfit_point_t *pts, size_t npts,
                                 ring_abfit_result_t *r)
{
    double sxx = 0, sxy = 0, ssr = 0, sw = 0, swy = 0, sst = 0, tw;

    for (size_t i = 0; i < npts; i++) {
        double t = pts[i].time_us, w = 1.0 / (t * t);
        double x = 2.0 * (pts[i].n - 1) / pts[i].n * pts[i].bytes;
        sxx += w * x * x;
        sxy += w * x * t;
        sw += w;
        swy += w * t;
    }
    r->alpha_free_us = r->alpha_us;
    r->alpha_free_se_us = r->alpha_se_us;
    r->alpha_us = r->alpha_se_us = 0;
    r->slope = sxy / sxx;
    tw = swy / sw;
    r->max_abs_err_pct = 0;
    for (size_t i = 0; i < npts; i++) {
        double t = pts[i].time_us, w = 1.0 / (t * t);
        double m = ring_abfit_predict(0, r->slope, pts[i].n, pts[i].bytes);
        double e = fabs(m - t) / t * 100.0;
        ssr += w * (t - m) * (t - m);
        sst += w * (t - tw) * (t - tw);
        if (e > r->max_abs_err_pct || i == 0) {
            r->max_abs_err_pct = e;
            r->worst = i;
        }
    }
    r->slope_se = sqrt(ssr / (double)(npts - 1) / sxx);
    r->r2 = sst > 0 ? 1.0 - ssr / sst : (ssr > 0 ? 0.0 : 1.0);
    r->bw_Bps = 1e6 / r->slope;
    r->bw_se_Bps = r->bw_Bps * (r->slope_se / r->slope);
    r->alpha_pinned = r->alpha_unresolved = 1;
}

static int abfit_fit(const ring_abfit_point_t *pts, size_t npts, int nonneg,
                     ring_abfit_result_t *res_p, char *err, size_t errlen)
{
    ring_abfit_result_t r = {0};
    double s1 = 0, s2 = 0, m12 = 0, g1 = 0, g2 = 0, det, th1, th2, inv11, inv22;
    double ssr = 0, sw = 0, swy = 0, sst = 0, tw, sigma2;

    if (npts == 0)
        return abfit_err(RING_ABFIT_NO_FIT, err, errlen, "no measurements to fit");
    r.n_min = r.n_max = pts[0].n;
    for (size_t i = 0; i < npts; i++) {
        const ring_abfit_point_t *p = &pts[i];
        int seen = 0;

        if (p->n < 2)
            return abfit_err(RING_ABFIT_NO_FIT, err, errlen,
                             "point %zu (line %ld): n = %d, but a ring has at least 2 peers", i + 1,
                             p->line, p->n);
        if (!(p->time_us > 0) || !isfinite(p->time_us))
            return abfit_err(RING_ABFIT_NO_FIT, err, errlen,
                             "point %zu (line %ld): time_us = %g, but times must be positive",
                             i + 1, p->line, p->time_us);
        if (!(p->bytes >= 0) || !isfinite(p->bytes))
            return abfit_err(RING_ABFIT_NO_FIT, err, errlen,
                             "point %zu (line %ld): bytes = %g, but sizes must be >= 0", i + 1,
                             p->line, p->bytes);
        if (p->n < r.n_min)
            r.n_min = p->n;
        if (p->n > r.n_max)
            r.n_max = p->n;
        for (size_t j = 0; j < i && !seen; j++)
            seen = pts[j].n == p->n && pts[j].bytes == p->bytes;
        r.distinct += !seen;
    }
    r.points = npts;
    if (r.distinct < 3)
        return abfit_err(
            RING_ABFIT_NO_FIT, err, errlen,
            "too few distinct points: %zu distinct (n, bytes) pair%s, but fitting alpha and "
            "B with standard errors needs at least 3",
            r.distinct, r.distinct == 1 ? "" : "s");
    if (r.n_min == r.n_max)
        return abfit_err(
            RING_ABFIT_NO_FIT, err, errlen,
            "every point has n = %d: with one ring size the per-step latency alpha cannot be "
            "told apart from a fixed cost per call (both add the same to every time); "
            "measure at least two values of n",
            r.n_min);

    /* column norms, then the scaled normal equations [1 m12; m12 1] th = g */
    for (size_t i = 0; i < npts; i++) {
        double w = 1.0 / (pts[i].time_us * pts[i].time_us);
        double x1 = 2.0 * (pts[i].n - 1), x2 = x1 / pts[i].n * pts[i].bytes;
        s1 += w * x1 * x1;
        s2 += w * x2 * x2;
    }
    s1 = sqrt(s1);
    s2 = sqrt(s2);
    if (!(s2 > 0))
        return abfit_err(RING_ABFIT_NO_FIT, err, errlen,
                         "every point has bytes = 0: the bandwidth term cannot be fitted");
    for (size_t i = 0; i < npts; i++) {
        double w = 1.0 / (pts[i].time_us * pts[i].time_us);
        double u1 = 2.0 * (pts[i].n - 1) / s1,
               u2 = 2.0 * (pts[i].n - 1) / pts[i].n * pts[i].bytes / s2;
        m12 += w * u1 * u2;
        g1 += w * u1 * pts[i].time_us;
        g2 += w * u2 * pts[i].time_us;
    }
    det = 1.0 - m12 * m12;
    /* |m12| = 1 exactly when bytes/n is the same for every point */
    if (!(det > 1e-12))
        return abfit_err(
            RING_ABFIT_NO_FIT, err, errlen,
            "alpha and B cannot be told apart: bytes/n is (nearly) the same for every point, so "
            "the latency and bandwidth terms grow together; measure more sizes");
    th1 = (g1 - m12 * g2) / det;
    th2 = (g2 - m12 * g1) / det;
    inv11 = inv22 = 1.0 / det;
    r.alpha_us = th1 / s1;
    r.slope = th2 / s2;

    for (size_t i = 0; i < npts; i++) {
        double w = 1.0 / (pts[i].time_us * pts[i].time_us);
        sw += w;
        swy += w * pts[i].time_us;
    }
    tw = swy / sw;
    for (size_t i = 0; i < npts; i++) {
        double t = pts[i].time_us, w = 1.0 / (t * t);
        double m = ring_abfit_predict(r.alpha_us, r.slope, pts[i].n, pts[i].bytes);
        double e = fabs(m - t) / t * 100.0;
        ssr += w * (t - m) * (t - m);
        sst += w * (t - tw) * (t - tw);
        if (e > r.max_abs_err_pct || i == 0) {
            r.max_abs_err_pct = e;
            r.worst = i;
        }
    }
    sigma2 = ssr / (double)(npts - 2);
    r.alpha_se_us = sqrt(sigma2 * inv11) / s1;
    r.slope_se = sqrt(sigma2 * inv22) / s2;
    r.r2 = sst > 0 ? 1.0 - ssr / sst : (ssr > 0 ? 0.0 : 1.0);

    if (!(r.slope > 0))
        return abfit_err(
            RING_ABFIT_NO_FIT, err, errlen,
            "the data do not follow the model: the fitted 1/B is %.4g us/byte (B would be %s), "
            "i.e. the times do not grow with the bytes each peer sends, 2(N-1)/N x S",
            r.slope, r.slope == 0 ? "infinite" : "negative");
    r.bw_Bps = 1e6 / r.slope;
    r.bw_se_Bps = r.bw_Bps * (r.slope_se / r.slope);
    r.t95 = abfit_t95(npts - 2);
    if (r.alpha_us < 0) {
        if (r.alpha_us + r.t95 * r.alpha_se_us < 0 && nonneg) {
            abfit_fit_slope_only(pts, npts, &r);
            if (!(r.slope > 0))
                return abfit_err(RING_ABFIT_NO_FIT, err, errlen,
                                 "the data do not follow the model: with alpha fixed at 0 the "
                                 "fitted 1/B is %.4g us/byte", r.slope);
            *res_p = r;
            return 0;
        }
        if (r.alpha_us + r.t95 * r.alpha_se_us < 0)
            return abfit_err(
                RING_ABFIT_NO_FIT, err, errlen,
                "the data do not follow the model: alpha = %.4g +- %.4g us (with B = %.4g GB/s) "
                "is negative beyond its 95 %% confidence interval (%.3g standard errors for %zu "
                "degrees of freedom): the times grow less with n than the bandwidth term alone says",
                r.alpha_us, r.alpha_se_us, r.bw_Bps / 1e9, r.t95, npts - 2);
        r.alpha_unresolved = 1;
    }
    *res_p = r;
    return 0;
}

int ring_abfit_fit(const ring_abfit_point_t *pts, size_t npts, ring_abfit_result_t *res_p,
                   char *err, size_t errlen)
{
    return abfit_fit(pts, npts, 0, res_p, err, errlen);
}

int ring_abfit_fit_nonneg(const ring_abfit_point_t *pts, size_t npts, ring_abfit_result_t *res_p,
                          char *err, size_t errlen)
{
    return abfit_fit(pts, npts, 1, res_p, err, errlen);
}

/* ---- CSV input ---------------------------------------------------------------- */

/*
 * Splits line (modified in place) into fields. Unquoted fields lose their
 * surrounding blanks; a quoted field keeps everything between the quotes,
 * with "" read as one quote. Returns the field count, or -1 with a reason.
 */
static long csv_split(char *line, char ***fields_p, size_t *cap_p, const char **why_p)
{
    size_t nf = 0;
    char *p = line;

    for (;;) {
        char *start, *dst;

        if (nf == *cap_p) {
            size_t cap = *cap_p ? *cap_p * 2 : 16;
            char **f = realloc(*fields_p, cap * sizeof(*f));
            if (f == NULL) {
                *why_p = "out of memory";
                return -1;
            }
            *fields_p = f;
            *cap_p = cap;
        }
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '"') {
            start = dst = ++p;
            for (;;) {
                if (*p == '\0') {
                    *why_p = "a quoted field has no closing quote";
                    return -1;
                }
                if (*p == '"') {
                    if (p[1] == '"') {
                        *dst++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *dst++ = *p++;
            }
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p != ',' && *p != '\0') {
                *why_p = "text after a quoted field's closing quote";
                return -1;
            }
            *dst = '\0';
        } else {
            char *end;
            start = p;
            while (*p != ',' && *p != '\0')
                p++;
            end = p;
            while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
            if (*p == ',') {
                *end = '\0';
                (*fields_p)[nf++] = start;
                p++;
                continue;
            }
            *end = '\0';
            (*fields_p)[nf++] = start;
            return (long)nf;
        }
        (*fields_p)[nf++] = start;
        if (*p == '\0')
            return (long)nf;
        p++; /* the comma */
    }
}

/* values a filter's column holds, for the message when nothing matches */
#define CSV_SEEN_MAX 8

typedef struct csv_filter_state {
    long col;
    size_t matches;
    char *seen[CSV_SEEN_MAX];
    size_t nseen;
    int more; /* more distinct values than fit in seen[] */
} csv_filter_state_t;

static void csv_filter_note(csv_filter_state_t *fs, const char *value)
{
    for (size_t i = 0; i < fs->nseen; i++)
        if (strcmp(fs->seen[i], value) == 0)
            return;
    if (fs->nseen < CSV_SEEN_MAX) {
        char *s = strdup(value);
        if (s != NULL)
            fs->seen[fs->nseen++] = s;
    } else {
        fs->more = 1;
    }
}

static int csv_number(const char *name, long line, const char *col, const char *text, double *v_p,
                      char *err, size_t errlen)
{
    char *end;
    double v;

    if (*text == '\0')
        return abfit_err(RING_ABFIT_BAD_INPUT, err, errlen, "%s:%ld: %s is empty", name, line, col);
    errno = 0;
    v = strtod(text, &end);
    if (*end != '\0' || end == text || !isfinite(v) || errno == ERANGE)
        return abfit_err(RING_ABFIT_BAD_INPUT, err, errlen, "%s:%ld: %s is '%s', not a number",
                         name, line, col, text);
    *v_p = v;
    return 0;
}

static int csv_point(const char *name, long line, char **fields, long cn, long cb, long ct,
                     ring_abfit_point_t *p, char *err, size_t errlen)
{
    double n, bytes, t;

    if (csv_number(name, line, "n", fields[cn], &n, err, errlen) != 0 ||
        csv_number(name, line, "bytes", fields[cb], &bytes, err, errlen) != 0 ||
        csv_number(name, line, "time_us", fields[ct], &t, err, errlen) != 0)
        return -1;
    if (n != floor(n) || n < 2 || n > 1e6)
        return abfit_err(RING_ABFIT_BAD_INPUT, err, errlen,
                         "%s:%ld: n = %s, but a ring has a whole number of peers, at least 2", name,
                         line, fields[cn]);
    if (bytes < 0)
        return abfit_err(RING_ABFIT_BAD_INPUT, err, errlen,
                         "%s:%ld: bytes = %s, but sizes must be >= 0", name, line, fields[cb]);
    if (!(t > 0))
        return abfit_err(RING_ABFIT_BAD_INPUT, err, errlen,
                         "%s:%ld: time_us = %s, but times must be positive", name, line,
                         fields[ct]);
    p->n = (int)n;
    p->bytes = bytes;
    p->time_us = t;
    p->line = line;
    return 0;
}

/* one "--where a=b --where c=d" for messages */
static void csv_where_text(const ring_abfit_filter_t *filters, size_t nfilters, char *buf,
                           size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < nfilters && used < len; i++) {
        int k = snprintf(buf + used, len - used, "%s--where %s=%s", i ? " " : "", filters[i].column,
                         filters[i].value);
        if (k < 0)
            break;
        used += (size_t)k;
    }
}

int ring_abfit_csv_read(FILE *f, const char *name, const ring_abfit_filter_t *filters,
                        size_t nfilters, ring_abfit_point_t **points_p, size_t *npoints_p,
                        size_t *rows_p, char *err, size_t errlen)
{
    char *line = NULL, **fields = NULL, **header = NULL;
    size_t linecap = 0, fcap = 0, npts = 0, ptcap = 0, rows = 0;
    ssize_t len;
    long lineno = 0, nh = -1, cn = -1, cb = -1, ct = -1;
    ring_abfit_point_t *pts = NULL;
    csv_filter_state_t *fs = NULL;
    const char *why = NULL;
    int rc = RING_ABFIT_BAD_INPUT;

    if (nfilters > 0 && (fs = calloc(nfilters, sizeof(*fs))) == NULL) {
        rc = abfit_err(RING_ABFIT_BAD_INPUT, err, errlen, "out of memory");
        goto out;
    }
    while ((len = getline(&line, &linecap, f)) >= 0) {
        long nf;
        char *s = line;
        int take = 1;

        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0' || *s == '#')
            continue;
        if ((nf = csv_split(line, &fields, &fcap, &why)) < 0) {
            rc = abfit_err(RING_ABFIT_BAD_INPUT, err, errlen, "%s:%ld: malformed CSV: %s", name,
                           lineno, why);
            goto out;
        }
        if (nh < 0) {
            /* the header: keep copies of the names, find the columns */
            nh = nf;
            if ((header = calloc((size_t)nh, sizeof(*header))) == NULL) {
                rc = abfit_err(RING_ABFIT_BAD_INPUT, err, errlen, "out of memory");
                goto out;
            }
            for (long i = 0; i < nh; i++) {
                if ((header[i] = strdup(fields[i])) == NULL) {
                    rc = abfit_err(RING_ABFIT_BAD_INPUT, err, errlen, "out of memory");
                    goto out;
                }
                if (cn < 0 && strcmp(fields[i], "n") == 0)
                    cn = i;
                else if (cb < 0 && strcmp(fields[i], "bytes") == 0)
                    cb = i;
                else if (ct < 0 && strcmp(fields[i], "time_us") == 0)
                    ct = i;
            }
            if (cn < 0 || cb < 0 || ct < 0) {
                const char *missing = cn < 0 ? "n" : cb < 0 ? "bytes" : "time_us";
                rc = abfit_err(RING_ABFIT_BAD_INPUT, err, errlen,
                               "%s:%ld: the header has no column '%s' (it needs n, bytes and "
                               "time_us)",
                               name, lineno, missing);
                goto out;
            }
            for (size_t k = 0; k < nfilters; k++) {
                fs[k].col = -1;
                for (long i = 0; i < nh && fs[k].col < 0; i++)
                    if (strcmp(header[i], filters[k].column) == 0)
                        fs[k].col = i;
                if (fs[k].col < 0) {
                    rc = abfit_err(RING_ABFIT_BAD_INPUT, err, errlen,
                                   "%s:%ld: --where %s=%s: the header has no column '%s'", name,
                                   lineno, filters[k].column, filters[k].value, filters[k].column);
                    goto out;
                }
            }
            continue;
        }
        if (nf != nh) {
            rc = abfit_err(RING_ABFIT_BAD_INPUT, err, errlen,
                           "%s:%ld: malformed CSV: %ld field%s, but the header has %ld", name,
                           lineno, nf, nf == 1 ? "" : "s", nh);
            goto out;
        }
        rows++;
        for (size_t k = 0; k < nfilters; k++) {
            const char *v = fields[fs[k].col];
            if (strcmp(v, filters[k].value) == 0)
                fs[k].matches++;
            else
                take = 0;
            csv_filter_note(&fs[k], v);
        }
        if (!take)
            continue;
        if (npts == ptcap) {
            size_t cap = ptcap ? ptcap * 2 : 64;
            ring_abfit_point_t *p = realloc(pts, cap * sizeof(*p));
            if (p == NULL) {
                rc = abfit_err(RING_ABFIT_BAD_INPUT, err, errlen, "out of memory");
                goto out;
            }
            pts = p;
            ptcap = cap;
        }
        if ((rc = csv_point(name, lineno, fields, cn, cb, ct, &pts[npts], err, errlen)) != 0)
            goto out;
        rc = RING_ABFIT_BAD_INPUT;
        npts++;
    }
    if (ferror(f)) {
        rc = abfit_err(RING_ABFIT_BAD_INPUT, err, errlen, "%s: read error: %s", name,
                       strerror(errno));
        goto out;
    }
    if (nh < 0) {
        rc = abfit_err(RING_ABFIT_BAD_INPUT, err, errlen, "%s: empty (no header line)", name);
        goto out;
    }
    if (rows == 0) {
        rc = abfit_err(RING_ABFIT_NO_ROWS, err, errlen, "%s: no data rows after the header", name);
        goto out;
    }
    if (npts == 0) {
        char where[512], vals[512];
        size_t k = 0, used = 0;

        while (k < nfilters && fs[k].matches > 0)
            k++;
        csv_where_text(filters, nfilters, where, sizeof(where));
        if (k == nfilters) {
            rc =
                abfit_err(RING_ABFIT_NO_ROWS, err, errlen,
                          "%s: none of the %zu rows matches all of %s together", name, rows, where);
            goto out;
        }
        vals[0] = '\0';
        for (size_t i = 0; i < fs[k].nseen && used < sizeof(vals); i++) {
            int m =
                snprintf(vals + used, sizeof(vals) - used, "%s'%s'", i ? ", " : "", fs[k].seen[i]);
            if (m < 0)
                break;
            used += (size_t)m;
        }
        rc = abfit_err(RING_ABFIT_NO_ROWS, err, errlen,
                       "%s: none of the %zu rows has %s=%s (column %s holds %s%s)", name, rows,
                       filters[k].column, filters[k].value, filters[k].column, vals,
                       fs[k].more ? ", ..." : "");
        goto out;
    }
    *points_p = pts;
    *npoints_p = npts;
    *rows_p = rows;
    pts = NULL;
    rc = RING_ABFIT_OK;
out:
    if (fs != NULL)
        for (size_t k = 0; k < nfilters; k++)
            for (size_t i = 0; i < fs[k].nseen; i++)
                free(fs[k].seen[i]);
    free(fs);
    if (header != NULL)
        for (long i = 0; i < nh; i++)
            free(header[i]);
    free(header);
    free(fields);
    free(line);
    free(pts);
    return rc;
}
