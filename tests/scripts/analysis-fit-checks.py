"""TAP: the alpha-beta fit of tools/experiments/ring_analysis (alphabeta.py), ported
from tests/t-abfit.c when the C fit (tools/abfit.c, ring-abfit) was
retired: known alpha and B come back from synthetic timings (exact, and
with +-2 % deterministic noise within the stated standard errors),
degenerate data are refused with a message that says why, the non-negative
alpha option pins only a clearly negative alpha, and the CSV reader selects
rows and names the line of anything malformed. Run by tests/scripts/analysis-fit.test
with the interpreter tools/experiments/ring-analyze picks."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."), "tools", "experiments"))
from ring_analysis import alphabeta as ab  # noqa: E402
from ring_analysis.readers import DataError, NoRows  # noqa: E402
from analysis_tap import done, ok  # noqa: E402

MiB = 1048576.0
PLAN = 85


def noise(state):
    """Deterministic noise in [-1, 1]: t-abfit's 64-bit LCG, the same numbers."""
    state[0] = (state[0] * 6364136223846793005 + 1442695040888963407) % (1 << 64)
    return (state[0] >> 11) / float(1 << 53) * 2.0 - 1.0


def synth(alpha, bw, amp=0.0, seed=0):
    """N = 2..8 x 1, 2, 4, ..., 64 MiB, timed by the model, times (1 + amp * noise)."""
    pts, st = [], [seed]
    for n in range(2, 9):
        s = MiB
        while s <= 64 * MiB:
            t = ab.predict(alpha, 1e6 / bw, n, s)
            if amp > 0:
                t *= 1.0 + amp * noise(st)
            pts.append(ab.Point(n, s, t, len(pts) + 2))
            s *= 2
    return pts


def fit(pts, nonneg=False):
    try:
        return (ab.fit_nonneg if nonneg else ab.fit)(pts), None
    except ab.FitError as e:
        return None, str(e)


def test_predict():
    ok(abs(ab.predict(10, 1e-3, 4, 1000) - (60 + 1.5)) < 1e-12,
       "predict: 2(N-1) alpha + 2(N-1)/N S/B")
    ok(abs(ab.predict(7, 0.5, 2, 8) - (14 + 4)) < 1e-12, "predict: n=2 sends S once")


def test_exact():
    for alpha, bw in ((50, 1.25e9), (30, 0.119e9), (200, 10e9), (5, 2e9)):
        r, err = fit(synth(alpha, bw))
        if not ok(r is not None, "exact alpha %g us, B %g GB/s: fitted" % (alpha, bw / 1e9), err):
            continue
        ok(abs(r.alpha_us - alpha) < 1e-6 * alpha and abs(r.bw_Bps - bw) < 1e-9 * bw,
           "exact: alpha %.9g (want %g), B %.9g (want %g)" % (r.alpha_us, alpha, r.bw_Bps, bw))
        ok(r.r2 > 1 - 1e-12 and r.max_abs_err_pct < 1e-7 and r.alpha_se_us < 1e-6 * alpha
           and r.bw_se_Bps < 1e-9 * bw,
           "exact: R^2 %.15f, max error %.2g %%, standard errors %.2g us and %.2g B/s"
           % (r.r2, r.max_abs_err_pct, r.alpha_se_us, r.bw_se_Bps))
        ok(r.points == 49 and r.distinct == 49 and r.n_min == 2 and r.n_max == 8
           and not r.alpha_unresolved, "exact: 49 points, n 2..8")


def test_noise():
    """+-2 % noise: the true values lie within 3 standard errors, the errors are
    small enough to mean something, and the model predicts within ~the noise."""
    for alpha, bw, seed in ((50, 1.25e9, 1), (30, 0.119e9, 2), (200, 10e9, 3), (100, 2e9, 4),
                            (50, 1.25e9, 5)):
        r, err = fit(synth(alpha, bw, 0.02, seed))
        if not ok(r is not None, "2%% noise, alpha %g us, B %g GB/s: fitted" % (alpha, bw / 1e9),
                  err):
            continue
        ok(abs(r.alpha_us - alpha) <= 3 * r.alpha_se_us,
           "2%% noise: alpha %.4g +- %.3g us, true %g within 3 standard errors"
           % (r.alpha_us, r.alpha_se_us, alpha))
        ok(abs(r.bw_Bps - bw) <= 3 * r.bw_se_Bps and r.bw_se_Bps < 0.01 * bw,
           "2%% noise: B %.5g +- %.2g GB/s, true %g within 3 standard errors (< 1 %%)"
           % (r.bw_Bps / 1e9, r.bw_se_Bps / 1e9, bw / 1e9))
        ok(r.max_abs_err_pct < 4.5 and r.r2 > 0.99,
           "2%% noise: max error %.2f %% (< 4.5), R^2 %.5f" % (r.max_abs_err_pct, r.r2))


def pairs(q, e):
    out = []
    for p in q:
        out += [p._replace(time_us=p.time_us * (1 + e)), p._replace(time_us=p.time_us * (1 - e))]
    return out


def test_pairs():
    """Every (n, bytes) twice, at +2 % and -2 %: the 1/t^2 weights pull the fit
    to c = (1 - e^2) / (1 + e^2) times the truth, exactly, for both parameters."""
    q = synth(40, 1e9)
    e = 0.02
    c = (1 - e * e) / (1 + e * e)
    r, err = fit(pairs(q, e))
    ok(r is not None, "+-2 % pairs: fitted", err)
    ok(r and abs(r.alpha_us - 40 * c) < 1e-9 * 40 and abs(r.slope - 1e-3 * c) < 1e-9 * 1e-3,
       "+-2 %% pairs: alpha and 1/B are the truth times %.9f" % c,
       r and "alpha %.12g, 1/B %.12g" % (r.alpha_us, r.slope))
    ok(r and r.points == 2 * len(q) and r.distinct == len(q), "+-2 % pairs: 98 points, 49 distinct")
    ok(r and abs(r.max_abs_err_pct - 100 * (1 + e - c) / (1 + e)) < 1e-6,
       "+-2 % pairs: the max error is the +2 % points'", r and r.max_abs_err_pct)
    # alpha slightly negative (-1 us, where 2 % noise on these sizes leaves a
    # standard error of about 1.4 us): not resolved, not an error
    r, err = fit(pairs(synth(-1, 1e9), e))
    ok(r is not None, "alpha -1 us under 2 % noise: fitted, not refused", err)
    ok(r and r.alpha_us < 0 and r.alpha_us + r.t95 * r.alpha_se_us >= 0 and r.alpha_unresolved
       and r.alpha_resolved == 0 and abs(r.t95 - 1.96 - 2.4 / 96) < 1e-12,
       "alpha -1 us: 0 within its 95% interval, flagged unresolved",
       r and "alpha %.3g +- %.3g" % (r.alpha_us, r.alpha_se_us))


def test_few_points():
    """Four points (2 degrees of freedom): the 95 % interval is 4.303 standard
    errors wide on each side, not 2."""
    pts = []
    for n in (2, 3):
        for s in (MiB, 4 * MiB):
            pts.append(ab.Point(n, s, ab.predict(10, 8e-3, n, s), len(pts) + 2))
    pts[0] = pts[0]._replace(time_us=pts[0].time_us * 0.99)
    r, err = fit(pts)
    ok(r is not None and r.t95 == 4.303, "4 points: fitted, t = 4.303 for 2 degrees of freedom",
       err or r.t95)


def fails_with(pts, want, what):
    r, err = fit(pts)
    return ok(r is None and want in err, "%s: refused with '...%s...'" % (what, want), err)


def test_degenerate():
    pts = [ab.Point(4, s, ab.predict(50, 1e-3, 4, s), k + 2)
           for k, s in enumerate((MiB, 4 * MiB, 16 * MiB, 64 * MiB))]
    fails_with(pts, "every point has n = 4", "one n only")
    fails_with(pts, "measure at least two values of n", "one n only: says what to do")
    two = [ab.Point(2, MiB, 1000, 2), ab.Point(4, MiB, 1600, 3), ab.Point(4, MiB, 1600, 4)]
    fails_with(two, "too few distinct points: 2 distinct", "two distinct points")
    fails_with([], "no measurements", "no points")
    same = [ab.Point(n, n * MiB, ab.predict(50, 1e-3, n, n * MiB), k + 2)
            for k, n in enumerate((2, 4, 8))]
    fails_with(same, "cannot be told apart", "bytes/n constant")
    falling = []
    for n in (2, 3, 4):
        for s in (MiB, 4 * MiB, 16 * MiB):
            falling.append(ab.Point(n, s, 1e5 * n / (s / MiB), len(falling) + 2))
    fails_with(falling, "do not follow the model", "times falling with size")
    fails_with(falling, "B would be negative", "times falling with size: B < 0 named")
    fails_with(synth(-200, 0.1e9), "negative beyond its 95 % confidence interval",
               "alpha clearly negative")
    pts = synth(50, 1e9)
    pts[5] = pts[5]._replace(n=1)
    fails_with(pts, "point 6 (line 7): n = 1", "n = 1")
    pts[5] = pts[5]._replace(n=2)
    pts[7] = pts[7]._replace(time_us=0)
    fails_with(pts, "time_us = 0", "time 0")
    pts[7] = pts[7]._replace(time_us=1)
    pts[8] = pts[8]._replace(bytes=-1)
    fails_with(pts, "bytes = -1", "negative size")


def test_nonneg():
    # a token bucket's advance: every step 100 us ahead of the 1 Gbit/s rate
    r, err = fit(synth(-100, 0.125e9, 0.002, 7), nonneg=True)
    ok(r is not None and r.alpha_pinned and r.alpha_unresolved and r.alpha_us == 0
       and -150 < r.alpha_free_us < -50,
       "nonneg: alpha -100 us is fixed at 0 (the free fit said about -100 us)",
       err or r.alpha_free_us)
    ok(r is not None and abs(r.bw_Bps / 0.125e9 - 1) < 0.05 and 0 < r.bw_se_Bps < 0.01e9,
       "nonneg: B within 5 % of 0.125 GB/s with alpha's part folded in",
       r and "B %.4g +- %.2g" % (r.bw_Bps / 1e9, r.bw_se_Bps / 1e9))
    ok(r is not None and r.max_abs_err_pct < 15 and r.r2 > 0.99,
       "nonneg: the pinned model still predicts every point within 15 %",
       r and r.max_abs_err_pct)
    # data that follow the model: the same fit as without the option
    pts = synth(40, 1e9, 0.01, 3)
    (r, _), (f, _) = fit(pts, nonneg=True), fit(pts)
    ok(r is not None and f is not None and not r.alpha_pinned and r.alpha_us == f.alpha_us
       and r.bw_Bps == f.bw_Bps, "nonneg: a positive alpha is left as the free fit found it")
    # the free fit would refuse what nonneg pins
    ok(fit(synth(-100, 0.125e9, 0.002, 7))[0] is None,
       "without nonneg the same data are refused (alpha clearly < 0)")


TABLE = ("# a comment line\n"
         "rate,method,codec,n,bytes,time_us,wrong,status\r\n"
         "1gbit,tc,none,2,16777216,144938.5,0,ok\r\n"
         "\n"
         "1gbit,tc,fp16,2,16777216,73000,0,ok\n"
         "1gbit , tc , \"none\",4, 1.6777216e7 ,215000,0,ok\n"
         "none,tc,none,4,16777216,,,\"exit 124, timeout\"\n"
         "1gbit,tc,\"fp16\"\"x\",3,1024,100,0,ok\n")


def select(text, filters=()):
    try:
        pts, rows = ab.select_points(text.split("\n"), "t.csv", filters)
        return pts, rows, None, None
    except NoRows as e:
        return None, None, "norows", str(e)
    except DataError as e:
        return None, None, "bad", str(e)


def csv_fails(text, filters, kind, want, what):
    _, _, k, err = select(text, filters)
    ok(k == kind and want in (err or ""), "csv %s: '...%s...'" % (what, want), "%s: %s" % (k, err))


def test_csv():
    pts, rows, _, err = select(TABLE, (("codec", "none"), ("rate", "1gbit")))
    ok(pts is not None, "csv: a table with comments, blank lines, CRLF, quotes", err)
    ok(pts and rows == 5 and len(pts) == 2, "csv: 5 data rows, codec=none rate=1gbit selects 2")
    ok(pts and pts[0] == (2, 16777216, 144938.5, 3) and pts[1] == (4, 16777216, 215000, 6),
       "csv: values, blanks around fields and the line numbers", pts)
    pts, _, _, _ = select(TABLE, (("codec", 'fp16"x'),))
    ok(pts and len(pts) == 1 and pts[0].n == 3 and pts[0].line == 8,
       "csv: a quoted field with a doubled quote matches")
    csv_fails(TABLE, (), "bad", "t.csv:7: time_us is empty", "empty time, selected")
    csv_fails(TABLE, (("codec", "bf16"),), "norows",
              "none of the 5 rows has codec=bf16 (column codec holds 'none', 'fp16', 'fp16\"x')",
              "no row selected: the values are named")
    csv_fails(TABLE, (("codec", "fp16"), ("n", "4")), "norows",
              "matches all of --where codec=fp16 --where n=4", "filters that only fail together")
    csv_fails(TABLE, (("colour", "red"),), "bad",
              "t.csv:2: --where colour=red: the header has no column 'colour'",
              "filter on a missing column")
    h = "n,bytes,time_us\n"
    for text, want, what in (
            (h + "2,1024,5\n3,1024\n", "t.csv:3: malformed CSV: 2 fields, but the header has 3",
             "too few fields"),
            (h + "2,1024,5,6\n", "t.csv:2: malformed CSV: 4 fields", "too many fields"),
            (h + "2,1024,5\n2,1k,5\n", "t.csv:3: bytes is '1k', not a number",
             "a size with a suffix"),
            (h + "2.5,1024,5\n", "t.csv:2: n = 2.5, but a ring has a whole number of peers",
             "fractional n"),
            (h + "1,1024,5\n", "t.csv:2: n = 1", "n = 1"),
            (h + "2,1024,-5\n", "t.csv:2: time_us = -5, but times must be positive",
             "negative time"),
            (h + "2,-1,5\n", "t.csv:2: bytes = -1", "negative size"),
            (h + "2,1024,nan\n", "time_us is 'nan', not a number", "nan"),
            (h + "2,1_024,5\n", "bytes is '1_024', not a number", "an underscore (Python's float)"),
            (h + '2,"1024,5\n', "t.csv:2: malformed CSV: a quoted field has no closing quote",
             "unclosed quote"),
            (h + '2,"1024"x,5\n', "text after a quoted field's closing quote",
             "text after a quote"),
            ("n,bytes,time\n2,1024,5\n", "t.csv:1: the header has no column 'time_us'",
             "missing column"),
            ("# only a comment\n\n", "t.csv: empty (no header line)", "empty input")):
        csv_fails(text, (), "bad", want, what)
    csv_fails(h, (), "norows", "t.csv: no data rows after the header", "header only")


def test_reports():
    """ring-abfit's CSV report, column for column, and the text report's notes."""
    pts = synth(50, 1.25e9)
    r, _ = fit(pts)
    lines = ab.report_csv(pts, r, True).splitlines()
    ok(lines[0] == ab.CSV_HEADER and lines[1].startswith("fit,,,,,,,49,50,")
       and lines[1].endswith(",1") and len(lines) == 51
       and all(len(l.split(",")) == 17 for l in lines),
       "report_csv: header, a fit row (alpha 50, resolved), 49 point rows of 17 columns", lines[:2])
    r, _ = fit(pairs(synth(-1, 1e9), 0.02))
    text = ab.report_text(pairs(synth(-1, 1e9), 0.02), r, False, 98)
    ok("note: alpha < 0 but its 95 % confidence interval holds 0" in text
       and ab.fit_row(r).endswith(",0"), "an unresolved alpha: the note, alpha_resolved 0")


print("1..%d" % PLAN)
test_predict()
test_exact()
test_noise()
test_pairs()
test_few_points()
test_degenerate()
test_nonneg()
test_csv()
test_reports()
done(PLAN)
