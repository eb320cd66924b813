"""The alpha-beta model of the ring allreduce and its fit: the one
implementation (ring-analyze fit, ring-sweep's fits, ring-exp saturation's
model all use it).

N peers run 2(N-1) dependent steps, each paying a latency alpha, and every
peer sends 2(N-1)/N x S bytes through a link of bandwidth B:

    t = 2(N-1) alpha + 2(N-1)/N S / B

Units: t and alpha in microseconds, S in bytes, so the fitted slope 1/B is
in microseconds per byte and B in bytes/s is 1e6 / slope.
"""

import math
from collections import namedtuple

import numpy as np

from .readers import DataError, NoRows, iter_csv, parse_number, read_text

Point = namedtuple("Point", "n bytes time_us line")


class FitError(Exception):
    """The points cannot be fitted; str() says why."""


class Fit:
    """A fitted model. alpha_us/alpha_se_us, slope/slope_se (1/B, us per
    byte), bw_Bps/bw_se_Bps (B and its standard error by the delta method),
    r2 (of the weighted fit), max_abs_err_pct and worst (the point with that
    error), points, distinct ((n, bytes) pairs), n_min, n_max, t95 (Student's
    t for alpha's 95 % interval), alpha_unresolved (alpha < 0 but its 95 %
    interval holds 0; also set when pinned), alpha_pinned (fit_nonneg fixed
    a clearly negative alpha at 0; alpha_free_us/alpha_free_se_us are what
    the free fit said)."""

    alpha_unresolved = alpha_pinned = 0
    alpha_free_us = alpha_free_se_us = 0.0

    @property
    def alpha_resolved(self):
        return 0 if self.alpha_unresolved else 1


def predict(alpha_us, slope, n, nbytes):
    """The model's time in microseconds for n peers and nbytes (arrays too)."""
    steps = 2.0 * (n - 1)
    return steps * alpha_us + steps / n * nbytes * slope


# Student's t quantile 0.975 for dof degrees of freedom: a sweep has a
# handful of points, and with 2 degrees of freedom "2 standard errors" is an
# 82 % interval, not a 95 % one. Exact to 3 decimals up to 30, then
# 1.96 + 2.4/dof (within 0.002 of the true value beyond).
_T95 = (0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
        2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
        2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(dof):
    return _T95[dof] if dof < len(_T95) else 1.96 + 2.4 / dof


def _check(points):
    """Validates the points; returns (n, bytes, t) arrays and fills a Fit's
    counts. Raises FitError with a sentence that says why."""
    if not points:
        raise FitError("no measurements to fit")
    for i, p in enumerate(points, 1):
        if p.n < 2:
            raise FitError("point %d (line %d): n = %d, but a ring has at least 2 peers"
                           % (i, p.line, p.n))
        if not (p.time_us > 0) or not math.isfinite(p.time_us):
            raise FitError("point %d (line %d): time_us = %g, but times must be positive"
                           % (i, p.line, p.time_us))
        if not (p.bytes >= 0) or not math.isfinite(p.bytes):
            raise FitError("point %d (line %d): bytes = %g, but sizes must be >= 0"
                           % (i, p.line, p.bytes))
    r = Fit()
    r.points = len(points)
    r.distinct = len({(p.n, p.bytes) for p in points})
    r.n_min = min(p.n for p in points)
    r.n_max = max(p.n for p in points)
    if r.distinct < 3:
        raise FitError("too few distinct points: %d distinct (n, bytes) pair%s, but fitting alpha "
                       "and B with standard errors needs at least 3"
                       % (r.distinct, "" if r.distinct == 1 else "s"))
    if r.n_min == r.n_max:
        raise FitError("every point has n = %d: with one ring size the per-step latency alpha "
                       "cannot be told apart from a fixed cost per call (both add the same to "
                       "every time); measure at least two values of n" % r.n_min)
    n = np.array([float(p.n) for p in points])
    s = np.array([float(p.bytes) for p in points])
    t = np.array([float(p.time_us) for p in points])
    return r, n, s, t


def _judge(r, n, s, t, w):
    """R^2 of the weighted fit, the worst point and the weighted residual sum
    of squares, for the model in r."""
    m = predict(r.alpha_us, r.slope, n, s)
    e = np.abs(m - t) / t * 100.0
    tw = np.sum(w * t) / np.sum(w)
    ssr = float(np.sum(w * (t - m) ** 2))
    sst = float(np.sum(w * (t - tw) ** 2))
    r.worst = int(np.argmax(e))
    r.max_abs_err_pct = float(e[r.worst])
    r.r2 = 1.0 - ssr / sst if sst > 0 else (0.0 if ssr > 0 else 1.0)
    return ssr


def _fit(points, nonneg):
    # Why weights 1/t^2: the points span two orders of magnitude in time, and
    # timing noise on a shared machine is roughly proportional to the time
    # (a busy core slows a whole call). Plain least squares would let the
    # largest times decide both parameters; minimising sum ((t - model)/t)^2
    # gives every point the same say in relative terms, which is also how
    # the model is judged (prediction error in %).
    r, n, s, t = _check(points)
    w = 1.0 / (t * t)
    x1 = 2.0 * (n - 1)
    x2 = x1 / n * s
    # the columns differ by eight orders of magnitude: scale each to unit
    # weighted norm before solving the 2x2 normal equations [1 m12; m12 1]
    s1 = math.sqrt(np.sum(w * x1 * x1))
    s2 = math.sqrt(np.sum(w * x2 * x2))
    if not s2 > 0:
        raise FitError("every point has bytes = 0: the bandwidth term cannot be fitted")
    u1, u2 = x1 / s1, x2 / s2
    m12 = float(np.sum(w * u1 * u2))
    g1 = float(np.sum(w * u1 * t))
    g2 = float(np.sum(w * u2 * t))
    det = 1.0 - m12 * m12
    if not det > 1e-12:  # |m12| = 1 exactly when bytes/n is the same for every point
        raise FitError("alpha and B cannot be told apart: bytes/n is (nearly) the same for every "
                       "point, so the latency and bandwidth terms grow together; measure more "
                       "sizes")
    r.alpha_us = (g1 - m12 * g2) / det / s1
    r.slope = (g2 - m12 * g1) / det / s2
    ssr = _judge(r, n, s, t, w)
    sigma2 = ssr / (len(points) - 2)
    inv = 1.0 / det  # the diagonal of [1 m12; m12 1]^-1
    r.alpha_se_us = math.sqrt(sigma2 * inv) / s1
    r.slope_se = math.sqrt(sigma2 * inv) / s2
    if not r.slope > 0:
        raise FitError("the data do not follow the model: the fitted 1/B is %.4g us/byte (B would "
                       "be %s), i.e. the times do not grow with the bytes each peer sends, "
                       "2(N-1)/N x S" % (r.slope, "infinite" if r.slope == 0 else "negative"))
    r.bw_Bps = 1e6 / r.slope
    r.bw_se_Bps = r.bw_Bps * (r.slope_se / r.slope)
    r.t95 = t95(len(points) - 2)
    if r.alpha_us < 0:
        if r.alpha_us + r.t95 * r.alpha_se_us < 0:
            if nonneg:
                return _pin_alpha(r, n, s, t, w)
            raise FitError(
                "the data do not follow the model: alpha = %.4g +- %.4g us (with B = %.4g GB/s) "
                "is negative beyond its 95 %% confidence interval (%.3g standard errors for %d "
                "degrees of freedom): the times grow less with n than the bandwidth term alone "
                "says"
                % (r.alpha_us, r.alpha_se_us, r.bw_Bps / 1e9, r.t95, len(points) - 2))
        r.alpha_unresolved = 1
    return r


def _pin_alpha(r, n, s, t, w):
    """1/B alone with alpha = 0: weighted least squares of t = x/B,
    x = 2(N-1)/N S, on points - 1 degrees of freedom."""
    x = 2.0 * (n - 1) / n * s
    sxx = float(np.sum(w * x * x))
    r.alpha_free_us, r.alpha_free_se_us = r.alpha_us, r.alpha_se_us
    r.alpha_us = r.alpha_se_us = 0.0
    r.slope = float(np.sum(w * x * t)) / sxx
    ssr = _judge(r, n, s, t, w)
    if not r.slope > 0:
        raise FitError("the data do not follow the model: with alpha fixed at 0 the fitted 1/B "
                       "is %.4g us/byte" % r.slope)
    r.slope_se = math.sqrt(ssr / (len(t) - 1) / sxx)
    r.bw_Bps = 1e6 / r.slope
    r.bw_se_Bps = r.bw_Bps * (r.slope_se / r.slope)
    r.alpha_pinned = r.alpha_unresolved = 1
    return r


def fit(points):
    """Fits alpha and 1/B by least squares weighted by 1/t^2, with standard
    errors from the covariance of the fit. FitError when there are fewer
    than 3 distinct (n, bytes) points, one value of n, a design where alpha
    and 1/B cannot be told apart, B <= 0, or alpha clearly negative (0
    outside its 95 % interval)."""
    return _fit(points, False)


def fit_nonneg(points):
    """As fit, but a clearly negative alpha is fixed at 0 and 1/B fitted
    alone. For links capped by a token bucket (--rate-limit, tc tbf): a peer
    that waits between ring steps gets tokens meanwhile and sends ahead of
    the rate, which looks like a negative latency."""
    return _fit(points, True)


# ---- points from a CSV table ---------------------------------------------------------


def _point(name, line, fields, cn, cb, ct):
    vals = []
    for col, i in (("n", cn), ("bytes", cb), ("time_us", ct)):
        text = fields[i]
        if text == "":
            raise DataError("%s:%d: %s is empty" % (name, line, col))
        try:
            vals.append(parse_number(text))
        except ValueError:
            raise DataError("%s:%d: %s is '%s', not a number" % (name, line, col, text)) from None
    n, nbytes, t = vals
    if n != math.floor(n) or n < 2 or n > 1e6:
        raise DataError("%s:%d: n = %s, but a ring has a whole number of peers, at least 2"
                        % (name, line, fields[cn]))
    if nbytes < 0:
        raise DataError("%s:%d: bytes = %s, but sizes must be >= 0" % (name, line, fields[cb]))
    if not t > 0:
        raise DataError("%s:%d: time_us = %s, but times must be positive"
                        % (name, line, fields[ct]))
    return Point(int(n), nbytes, t, line)


def select_points(lines, name, filters=()):
    """The points of a CSV table (lines of text) whose rows match every
    (column, value) filter exactly, and the number of data rows. The table
    needs the columns n, bytes and time_us; other columns may be filtered
    on. DataError for a malformed table, a selected row whose numbers are
    not numbers (or out of range), or a filter on a missing column; NoRows
    for no data rows or an empty selection (naming the values the first
    unmatched column holds)."""
    rows = 0
    points = []
    seen = [[] for _ in filters]  # up to 8 distinct values per filter, for the message
    more = [False] * len(filters)
    matches = [0] * len(filters)
    header = None
    for line, fields in iter_csv(lines, name):
        if header is None:
            header = fields
            idx = {}
            for col in ("n", "bytes", "time_us"):
                if col not in header:
                    raise DataError("%s:%d: the header has no column '%s' (it needs n, bytes and "
                                    "time_us)" % (name, line, col))
                idx[col] = header.index(col)
            fcols = []
            for col, val in filters:
                if col not in header:
                    raise DataError("%s:%d: --where %s=%s: the header has no column '%s'"
                                    % (name, line, col, val, col))
                fcols.append(header.index(col))
            continue
        rows += 1
        take = True
        for k, (col, val) in enumerate(filters):
            v = fields[fcols[k]]
            if v == val:
                matches[k] += 1
            else:
                take = False
            if v not in seen[k]:
                if len(seen[k]) < 8:
                    seen[k].append(v)
                else:
                    more[k] = True
        if take:
            points.append(_point(name, line, fields, idx["n"], idx["bytes"], idx["time_us"]))
    if header is None:
        raise DataError("%s: empty (no header line)" % name)
    if rows == 0:
        raise NoRows("%s: no data rows after the header" % name)
    if not points:
        where = " ".join("--where %s=%s" % f for f in filters)
        k = next((k for k in range(len(filters)) if matches[k] == 0), None)
        if k is None:
            raise NoRows("%s: none of the %d rows matches all of %s together" % (name, rows, where))
        col, val = filters[k]
        raise NoRows("%s: none of the %d rows has %s=%s (column %s holds %s%s)"
                     % (name, rows, col, val, col, ", ".join("'%s'" % v for v in seen[k]),
                        ", ..." if more[k] else ""))
    return points, rows


def select_points_file(path, filters=()):
    """select_points on a file ('-': standard input)."""
    return select_points(read_text(path), "(standard input)" if path == "-" else path, filters)


# ---- reports (the C ring-abfit's formats, to the character: scripts read its columns) --------


def _size_str(nbytes):
    """'16 MiB' when it is a whole number of KiB/MiB/GiB, else the bytes."""
    for unit, scale in (("GiB", 1073741824.0), ("MiB", 1048576.0), ("KiB", 1024.0)):
        if nbytes >= scale and nbytes / scale == int(nbytes / scale):
            return "%d %s" % (int(nbytes / scale), unit)
    return "%.0f B" % nbytes


def report_text(points, r, predictions, rows):
    """The human-readable report: the fit, a note on alpha, the predictions."""
    w = points[r.worst]
    sizes = [p.bytes for p in points]
    out = ["alpha-beta fit: t = 2(N-1) alpha + 2(N-1)/N S/B, least squares weighted by 1/t^2",
           "  points       %d of %d rows (%d distinct (n, bytes); n %d..%d; bytes %s..%s)"
           % (r.points, rows, r.distinct, r.n_min, r.n_max, _size_str(min(sizes)),
              _size_str(max(sizes))),
           "  alpha        %.4g +- %.4g us per step" % (r.alpha_us, r.alpha_se_us),
           "  B            %.5g +- %.2g GB/s = %.5g +- %.2g Gbit/s"
           % (r.bw_Bps / 1e9, r.bw_se_Bps / 1e9, r.bw_Bps * 8 / 1e9, r.bw_se_Bps * 8 / 1e9),
           "  R^2          %.6f (weighted)" % r.r2,
           "  max |error|  %.2f %% (line %d: n=%d, bytes=%.0f)"
           % (r.max_abs_err_pct, w.line, w.n, w.bytes)]
    note = alpha_note(r)
    if note:
        out.append("  note: " + note)
    if predictions:
        out.append("")
        out.append("%8s %5s %14s %14s %14s %9s" % ("line", "n", "bytes", "time_us", "model_us",
                                                   "error%"))
        for p in points:
            m = predict(r.alpha_us, r.slope, p.n, p.bytes)
            out.append("%8d %5d %14.0f %14.2f %14.2f %+9.2f"
                       % (p.line, p.n, p.bytes, p.time_us, m, (m - p.time_us) / p.time_us * 100.0))
    return "\n".join(out) + "\n"


def alpha_note(r):
    """What the report says about an alpha it does not give as a value ('' when resolved)."""
    if r.alpha_pinned:
        return ("alpha fixed at 0 (--nonneg-alpha): the free fit gave %.4g +- %.4g us, clearly "
                "negative, as links capped by a token bucket do: a peer that waited between ring "
                "steps sends ahead of the rate" % (r.alpha_free_us, r.alpha_free_se_us))
    if r.alpha_unresolved:
        return ("alpha < 0 but its 95 % confidence interval holds 0: these times do not resolve "
                "the per-step latency (try smaller sizes)")
    return ""


CSV_HEADER = ("kind,line,n,bytes,time_us,model_us,error_pct,points,alpha_us,alpha_se_us,bw_GBps,"
              "bw_se_GBps,bw_Gbps,bw_se_Gbps,r2,max_abs_error_pct,alpha_resolved")


def fit_row(r):
    """points,alpha_us,...,alpha_resolved: the fit's columns of the CSV report."""
    return "%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6f,%.4f,%d" % (
        r.points, r.alpha_us, r.alpha_se_us, r.bw_Bps / 1e9, r.bw_se_Bps / 1e9,
        r.bw_Bps * 8 / 1e9, r.bw_se_Bps * 8 / 1e9, r.r2, r.max_abs_err_pct, r.alpha_resolved)


def point_rows(points, r):
    """[(line, n, bytes, time_us, model_us, error_pct)] as text, per point."""
    out = []
    for p in points:
        m = predict(r.alpha_us, r.slope, p.n, p.bytes)
        out.append(("%d" % p.line, "%d" % p.n, "%.0f" % p.bytes, "%.6g" % p.time_us, "%.6g" % m,
                    "%.4f" % ((m - p.time_us) / p.time_us * 100.0)))
    return out


def report_csv(points, r, predictions):
    """The CSV report: the header, a 'fit' row, with predictions a 'point' row each."""
    out = [CSV_HEADER, "fit,,,,,,," + fit_row(r)]
    if predictions:
        out += ["point," + ",".join(p) + ",,,,,,,,,," for p in point_rows(points, r)]
    return "\n".join(out) + "\n"
