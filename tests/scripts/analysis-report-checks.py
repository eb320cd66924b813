"""TAP: tools/experiments/ring_analysis's input and reports, and tools/experiments/ring-analyze's
command line. Malformed JSON lines and CSV rows are refused naming the file
and line (a peer's cut-off last line is not); one run's figures from
ringd's metrics; bar charts keep no empty, unlabelled cluster and label a
bar of 0, and blocked.png calls async's group "never blocks"; repeats of a
ring-exp cell give medians and ranges, a repeat that never reached the
target counted as never, a failed one left out and
counted (repeats.py alone, then ring-analyze exp on synthetic metrics);
a plot title never gives an alpha the fit calls unresolved; the
saturation model is the fit's predict(); ring-analyze names the
interpreters it tried, says what to install and exits 3 without a usable
one (no traceback); fit's exit statuses. Run by tests/scripts/analysis-report.test
with the interpreter tools/experiments/ring-analyze picks."""

import os
import shutil
import subprocess
import sys
import tempfile

TOOLS = os.path.join(os.path.abspath(os.environ.get("top_srcdir", ".")), "tools", "experiments")
sys.path.insert(0, TOOLS)
from ring_analysis import alphabeta, charts, exp_report, readers, repeats  # noqa: E402
from ring_analysis import saturation_report as sat  # noqa: E402
from ring_analysis import sweep_report as sweep  # noqa: E402
from analysis_tap import done, ok  # noqa: E402

PLAN = 45
T = tempfile.mkdtemp(prefix="analysis-test.")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def raises(fn, want):
    try:
        fn()
    except readers.DataError as e:
        return want in str(e), str(e)
    return False, "no error"


def analyze(*args, env=None, stdin=None):
    e = dict(os.environ, **(env or {}))
    p = subprocess.run([os.path.join(TOOLS, "ring-analyze")] + list(args), env=e, input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return p.returncode, p.stdout, p.stderr


def png_text(path):
    """The PNG's Title and Description chunks (charts.save writes them)."""
    with open(path, "rb") as f:
        data = f.read()
    out = {}
    for key in (b"Title", b"Description"):
        i = data.find(b"tEXt" + key + b"\0")
        if i >= 0:
            n = int.from_bytes(data[i - 4:i], "big")
            out[key.decode()] = data[i + 4 + len(key) + 1:i + 4 + n].decode("latin-1")
    return out


STEP = ('{"type":"step","rank":%d,"step":%d,"epoch":0,"time":%.6f,"loss":%s,"samples":64,'
        '"tau":%d,"blocked_s":%.6f}\n')
EVAL = '{"type":"eval","step":%d,"epoch":0,"time":%.6f,"loss":0.5,"accuracy":%.6f}\n'


def fake_run(d, taus=(0, 1, 2, 1), blocked=0.1, evals=((2, 0.1, 0.4), (4, 0.2, 0.6)),
             sps_line=True):
    """Two ranks of 4 steps each; rank 0 evaluates (the last one twice)."""
    for rank in (0, 1):
        text = "".join(STEP % (rank, s + 1, 0.1 * (s + 1) + 0.01 * rank, "nan" if s == 0 else "1.5",
                               taus[s], blocked) for s in range(4))
        if rank == 0:
            text += "".join(EVAL % (st, t, a) for st, t, a in evals)
            text += EVAL % evals[-1]
        write(os.path.join(d, "m-%d.jsonl" % rank), text)
    write(os.path.join(d, "output.txt"),
          "[0]   samples/s            1234 (all peers)\n" if sps_line else "[0] done\n")


def test_readers():
    p = write(os.path.join(T, "j", "a.jsonl"),
              '{"type":"step","loss":nan,"x":-inf}\n\n{"type":"eval"}\n{"type":"st')
    recs = readers.read_jsonl(p)
    ok(len(recs) == 2 and recs[0][0] == 1 and recs[1][0] == 3
       and recs[0][1]["loss"] != recs[0][1]["loss"] and recs[0][1]["x"] == float("-inf"),
       "jsonl: ringd's nan/inf read, the blank line skipped, the cut-off last line left out", recs)
    p = write(os.path.join(T, "j", "b.jsonl"), '{"type":"step"}\n{"type":"step",}\n{"a":1}\n')
    good, msg = raises(lambda: readers.read_jsonl(p), p + ":2: not JSON")
    ok(good, "jsonl: a malformed line in the middle is an error naming file:line", msg)
    p = write(os.path.join(T, "j", "c.jsonl"), '{"a":1}\n[1, 2]\n')
    good, msg = raises(lambda: readers.read_jsonl(p), p + ":2: not a JSON object")
    ok(good, "jsonl: a line that is JSON but not an object names its line", msg)
    good, msg = raises(lambda: readers.number_field({"type": "step"}, "tau", "m-0.jsonl", 7),
                       "m-0.jsonl:7: a 'step' record's 'tau' is missing")
    ok(good, "jsonl: a missing number names the line, the record type and the key", msg)
    good, msg = raises(lambda: readers.number_field({"type": "eval", "accuracy": "high"},
                                                    "accuracy", "m-0.jsonl", 3),
                       "'accuracy' is \"high\", not a number")
    ok(good, "jsonl: a number that is text is refused, quoted", msg)
    good, msg = raises(lambda: readers.read_jsonl(os.path.join(T, "nope.jsonl")), "cannot open")
    ok(good, "jsonl: a missing file is named, no traceback", msg)
    p = write(os.path.join(T, "c", "t.csv"), 'a,b\r\n1, "x,y" \n# c\n2,3,4\n')
    good, msg = raises(lambda: readers.read_csv(p),
                       p + ":4: malformed CSV: 3 fields, but the header has 2")
    ok(good, "csv: a row with a field too many names its line (CRLF, quotes, comments read)",
       msg)
    p = write(os.path.join(T, "c", "b.out"),
              "[0] ring-bench: autotune chose chunk 1M\n[0] bytes,count,dtype,time_us,algbw_GBps,"
              "busbw_GBps,wrong,coll\n[0] 4096,1024,float32,48.80,0.0839,0.0839,0,allreduce\n")
    rows = readers.bench_rows(p)
    ok(len(rows) == 1 and rows[0]["time_us"] == "48.80" and rows[0]["wrong"] == "0",
       "bench_rows: ring-bench --csv under ring-launch's [rank] prefix, messages left out", rows)


def test_exp():
    d = os.path.join(T, "exp", "01-lockstep-none")
    fake_run(d)
    s = exp_report.run_stats(d)
    ok(abs(s["wall"] - 0.41) < 1e-9 and s["steps"] == 4 and s["sps"] == "1234"
       and abs(s["blocked_share"] - 0.8 / (0.4 + 0.41)) < 1e-9 and s["mean_tau"] == 1.0
       and s["taus"] == {0: 2, 1: 4, 2: 2},
       "run_stats: wall (slowest peer), blocked share, tau histogram, ringd's samples/s", s)
    ok(len(s["evals"]) == 2 and s["final_acc"] == 0.6 and exp_report.time_to_target(s, 0.5) == 0.2
       and exp_report.time_to_target(s, 0.9) is None,
       "run_stats: the repeated final evaluation counted once; time to target", s["evals"])
    ok(exp_report.progress_text(s, "0.5") ==
       "accuracy 0.6000, 0.5 at 0.200s, 1234 samples/s, blocked 99%, mean tau 1.000",
       "progress_text: the run's line", exp_report.progress_text(s, "0.5"))
    d2 = os.path.join(T, "exp", "02-async-none")
    fake_run(d2, taus=(0, 3, 7, 12), blocked=0.0, sps_line=False)
    s2 = exp_report.run_stats(d2)
    ok(s2["sps"] == "%.0f" % (512 / 0.41) and s2["blocked_share"] == 0.0,
       "run_stats: samples/s from the metrics when ringd's summary is missing", s2["sps"])
    d3 = os.path.join(T, "exp", "03-bounded4-none")
    fake_run(d3)
    write(os.path.join(d3, "m-1.jsonl"), '{"type":"step","rank":1}\n{}\n')
    rc, out, err = analyze("exp-run", d3, "--target", "0.5")
    ok(rc == 2 and "m-1.jsonl:1: a 'step' record's 'time' is missing" in err
       and "Traceback" not in err, "exp-run: a record without a number exits 2 naming the line",
       err)
    write(os.path.join(T, "exp", "plan.csv"), "run,mode,scenario,n,status\n"
          "01-lockstep-none,lockstep,none,2,ok\n02-async-none,async,none,2,ok\n"
          "03-bounded4-none,bounded:4,none,2,exit 124\n")
    os.remove(os.path.join(d3, "m-1.jsonl"))
    rc, out, err = analyze("exp", os.path.join(T, "exp"), "--target", "0.5", "--model", "m")
    runs = open(os.path.join(T, "exp", "runs.csv")).read().splitlines()
    ok(rc == 0 and len(runs) == 4 and runs[2].startswith("02-async-none,async,,none,2,0.410,")
       and runs[3].startswith("03-bounded4-none,bounded,4,none,2,")
       and runs[3].endswith(",exit 124"),
       "exp: runs.csv, a row per planned run, mode and staleness split", "%s\n%s" % (runs, err))
    ok("| FAILED(124)" in out and "3 runs in ?s, 1 failed" in out
       and "async        | 0.6000    0.2s      1249" in out,
       "exp: the summary table, a failed run marked, the count", out)
    blocked = png_text(os.path.join(T, "exp", "blocked.png"))
    ok(blocked.get("Description") == "series: none" and "blocked" in blocked.get("Title", ""),
       "exp: blocked.png drawn (matplotlib), its legend in the PNG", blocked)
    ok("async never blocks (no bound): its bars are 0" in blocked.get("Title", ""),
       "exp: blocked.png's title says async never blocks", blocked)


def test_repeats():
    inf = repeats.NEVER
    try:
        repeats.median([])
        empty = "no error"
    except ValueError:
        empty = True
    got = [repeats.median(v) for v in ([3, 1, 2], [4, 1, 3, 2], [1, inf, inf], [1, 2, inf, inf],
                                       [1, 2, 3, inf], [0.7])]
    ok(got == [2, 2.5, inf, inf, 2.5, 0.7] and empty is True
       and repeats.spread([0.5, None, 0.7, 0.6]) == (0.6, 0.5, 0.7, 3, 3)
       and repeats.spread([None, None]) is None,
       "repeats: the median (odd, even, never as the largest), the range, None left out",
       (got, empty))
    texts = [repeats.spread_text(repeats.time_spread(t), "%.1f", "s")
             for t in ([1.0, 3.0, 2.0], [2.0, None, 1.0], [None, None, 1.5], [None, None])]
    sp = repeats.time_spread([2.0, None, 1.0])
    ok(texts == ["2.0s [1.0..3.0]", "2.0s [1.0..never] (2/3)", "never [1.5..never] (1/3)",
                 "never (0/2)"]
       and sp == (2.0, 1.0, inf, 3, 2) and repeats.time_spread([]) is None
       and repeats.spread_text(repeats.spread([0.85, 0.8, 0.9]), "%.4f")
       == "0.8500 [0.8000..0.9000]" and repeats.spread_text(None, "%.1f") == "-",
       "repeats: time to target counts never-reached repeats as never, not as missing", texts)
    by_step = repeats.curve_median([[(2, 0.1, 0.4), (4, 0.2, 0.6), (6, 0.3, 0.7)],
                                    [(2, 0.3, 0.2), (4, 0.5, 0.5)],
                                    [(2, 0.2, 0.3), (4, 0.4, 0.9), (6, 0.6, 0.8)]])
    by_pos = repeats.curve_median([[(3, 1.0, 0.1), (7, 2.0, 0.2)], [(4, 3.0, 0.3), (8, 4.0, 0.4)]])
    near = [(round(x, 9), round(y, 9)) for x, y in by_step + by_pos]
    ok(near == [(0.2, 0.3), (0.4, 0.6), (2.0, 0.2), (3.0, 0.3)] and len(by_step) == 2
       and repeats.curve_median([]) == [],
       "repeats: the median curve at the steps all repeats have, else by position",
       (by_step, by_pos))
    # a plateau: first crossings at 2, 1 and 4 s (median 2), the median curve only at 4 s
    plateau = [[(1, .84), (2, .86), (3, .84), (4, .86)], [(1, .86), (2, .84), (3, .85), (4, .86)],
               [(1, .80), (2, .84), (3, .84), (4, .86)]]
    got = [repeats.median_curve_crossing(plateau, .85),
           repeats.median_curve_crossing([[(1, .9)], [(2, .9)], [(3, .9)]], .85),
           repeats.median_curve_crossing([[(3, .9)], [(1, .8)]], .85),
           repeats.median_curve_crossing(plateau, .9), repeats.median_curve_crossing([], .5)]
    ok(got == [4, 2, 3, None, None],
       "repeats: the median curve's crossing (a repeat not yet evaluated is below it; two "
       "curves: the mean of both), not the median of first crossings", got)
    fig, ax = charts.figure()
    vals = {("A", "x"): 10.0, ("A", "y"): 4.0}
    charts.grouped_bars(ax, ["A"], ["x", "y"], lambda g, s: vals.get((g, s)),
                        lambda v: "%.0f" % v,
                        spread=lambda g, s: (8.0, 30.0) if s == "x" else None)
    caps = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    segs = [seg for c in caps for lc in c.lines[2] for seg in lc.get_segments()]
    where = sorted((t.get_text(), t.xy[1]) for t in ax.texts)
    ok(len(segs) == 1 and segs[0][0][1] == 8.0 and segs[0][1][1] == 30.0
       and where == [("10", 30.0), ("4", 4.0)] and ax.get_ylim()[1] >= 30,
       "bars: an error bar from min to max where a spread is given, the label above it",
       (segs, where, ax.get_ylim()))
    charts.pyplot().close(fig)

    # 2 modes x 1 scenario x 3 repeats, and a mode whose 3 repeats all failed
    d = os.path.join(T, "rep")
    plan = ["run,mode,scenario,n,status,repeat,seed"]
    lock = {1: (0.6, 0.2), 2: (0.7, 0.3), 3: (0.65, 0.1)}  # final accuracy, time to 0.5
    k = 0
    for rep in (1, 2, 3):
        for mode in ("lockstep", "async", "bounded:4"):
            k += 1
            run = "%02d-%s-none-r%d" % (k, mode.replace(":", ""), rep)
            status = "ok"
            if mode == "lockstep":
                acc, t = lock[rep]
                fake_run(os.path.join(d, run), evals=((2, t, 0.5), (4, 0.35, acc)))
            elif mode == "async" and rep == 2:
                fake_run(os.path.join(d, run), evals=((2, 0.1, 0.3), (4, 0.2, 0.4)))
            elif mode == "async":
                fake_run(os.path.join(d, run), evals=((2, 0.2, 0.55), (4, 0.3, 0.6)))
                status = "ok" if rep == 1 else "exit 124"
            else:
                os.makedirs(os.path.join(d, run))
                status = "exit 124"
            plan.append("%s,%s,none,2,%s,%d,%d" % (run, mode, status, rep, 6 + rep))
    write(os.path.join(d, "plan.csv"), "\n".join(plan) + "\n")
    rc, out, err = analyze("exp", d, "--target", "0.5", "--seed", "7")
    runs = open(os.path.join(d, "runs.csv")).read().splitlines()
    ok(rc == 0 and len(runs) == 10 and runs[0].endswith(",steps,status,repeat,seed")
       and runs[1].startswith("01-lockstep-none-r1,lockstep,,none,2,")
       and runs[1].endswith(",ok,1,7") and runs[9].endswith(",exit 124,3,9")
       and open(os.path.join(d, "evals.csv")).readline().strip()
       == "run,mode,scenario,time_s,step,accuracy,loss,repeat,seed",
       "exp with repeats: every repeat's row in runs.csv, with its repeat and seed",
       "%s\n%s" % ("\n".join(runs), err))
    summ = readers.read_csv(os.path.join(d, "summary.csv"))
    rows = {r["mode"] + r["staleness"]: r for _, r in summ.records()}
    lk, asy, b4 = rows.get("lockstep", {}), rows.get("async", {}), rows.get("bounded4", {})
    ok(len(rows) == 3
       and [lk.get(c) for c in ("repeats", "ok", "reached_target", "final_accuracy_median",
                                "final_accuracy_min", "final_accuracy_max",
                                "time_to_target_s_median", "time_to_target_s_min",
                                "time_to_target_s_max", "samples_per_s_median")]
       == ["3", "3", "3", "0.65", "0.6", "0.7", "0.2", "0.1", "0.3", "1234"]
       and [asy.get(c) for c in ("repeats", "ok", "reached_target", "final_accuracy_median",
                                 "time_to_target_s_median", "time_to_target_s_min",
                                 "time_to_target_s_max")]
       == ["3", "2", "1", "0.5", "", "0.2", ""]
       and [b4.get(c) for c in ("repeats", "ok", "reached_target", "final_accuracy_median")]
       == ["3", "0", "0", ""]
       and [r.get("median_curve_time_to_target_s") for r in (lk, asy, b4)] == ["0.2", "0.3", ""],
       "summary.csv: medians and ranges per cell; never reached and failed repeats counted",
       "%s\n%s" % (open(os.path.join(d, "summary.csv")).read(), err))
    ok("3 repeats per cell (seeds 7..9)" in out
       and "final test accuracy: median [min..max] of 3 repeats" in out
       and "lockstep     | 0.6500 [0.6000..0.7000]" in out
       and "async        | 0.5000 [0.4000..0.6000] +1 failed" in out
       and "lockstep     | 0.2s [0.1..0.3]" in out
       and "async        | never [0.2..never] (1/2) +1 failed" in out
       and "bounded:4    | FAILED(124)" in out and "9 runs in ?s, 4 failed" in out
       and "training time to reach 0.5 on the median curve (at each time, the median of the "
       "repeats' last accuracies)\nmode         | none\nlockstep     | 0.2s\n"
       "async        | 0.3s\nbounded:4    | FAILED\n" in out,
       "exp with repeats: a table per figure, MEDIAN [MIN..MAX], never and failures said", out)
    acc = png_text(os.path.join(d, "accuracy-none.png"))
    thr = png_text(os.path.join(d, "throughput.png"))
    ok(acc.get("Description") == "series: lockstep; async (1 of 3 failed); target 0.5"
       and "thin lines: each of the 3 repeats" in acc.get("Title", "")
       and "whiskers: their range (min..max)" in thr.get("Title", ""),
       "exp with repeats: the plots say what the thick lines and the whiskers are", (acc, thr))


def test_bars():
    fig, ax = charts.figure()
    vals = {("A", "x"): 0.0, ("A", "y"): 0.0, ("C", "x"): 5.0}
    dropped = charts.grouped_bars(ax, ["A", "B", "C"], ["x", "y"], lambda g, s: vals.get((g, s)),
                                  lambda v: "%.0f" % v)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    labels = sorted(t.get_text() for t in ax.texts)
    ok(dropped == ["B"] and ticks == ["A", "C"] and labels == ["0", "0", "5"],
       "bars: a cluster without values is left out, a bar of 0 is labelled '0'",
       (dropped, ticks, labels))
    charts.pyplot().close(fig)
    fig, ax = charts.figure()
    charts.grouped_bars(ax, ["lockstep", "async"], ["none"],
                        lambda m, s: 0.0 if m == "async" else 12.5, lambda v: "%.1f" % v,
                        group_label=exp_report.never_blocks_label)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    labels = sorted(t.get_text() for t in ax.texts)
    ok(ticks == ["lockstep", "async\n(never blocks)"] and labels == ["0.0", "12.5"],
       "bars: the async group is labelled 'never blocks', its bar of 0 labelled '0.0'",
       (ticks, labels))
    charts.pyplot().close(fig)


def sweep_rows(alpha, bw, method, ns=(2, 3, 4), sizes=(1 << 20, 4 << 20, 16 << 20), spread=None):
    """Times of the alpha-beta model, off by +-1 % (or +-spread, alternating: enough to
    leave a small alpha unresolved)."""
    rows = ["rate,method,codec,n,bytes,time_us,algbw_GBps,busbw_GBps,wrong,status,run"]
    for n in ns:
        for k, s in enumerate(sizes):
            wiggle = ((1 + spread if (n + k) % 2 else 1 - spread) if spread is not None
                      else (1.01 if (n + s) % 3 else 0.99))
            t = alphabeta.predict(alpha, 1e6 / bw, n, s) * wiggle
            rows.append("1gbit,%s,none,%d,%d,%.2f,0.1,0.1,0,ok,r" % (method, n, s, t))
    return "\n".join(rows) + "\n"


def test_sweep():
    # alpha -1 us under +-2 % (t-abfit's case): fitted, 0 within its 95 % interval
    r = alphabeta.fit([alphabeta.Point(n, s, alphabeta.predict(-1, 1e-3, n, s) * (1 + e), 0)
                       for n in range(2, 9) for s in (2.0**k for k in range(20, 27))
                       for e in (0.02, -0.02)])
    ok(r.alpha_unresolved and "alpha not resolved" in sweep.model_title(([], r))
       and "alpha -" not in sweep.model_title(([], r)),
       "model_title: an unresolved alpha is not given as a value", sweep.model_title(([], r)))
    # the same through ring-analyze sweep on tc links (a free fit): summary and title agree
    d = os.path.join(T, "sweep-tc")
    write(os.path.join(d, "results.csv"), sweep_rows(-1.1, 1e9, "tc", spread=0.02))
    rc, out, err = analyze("sweep", d)
    fits = open(os.path.join(d, "fits.csv")).read().splitlines() if rc == 0 else []
    title = png_text(os.path.join(d, "time-vs-n-1gbit-none.png")).get("Title", "")
    ok(rc == 0 and len(fits) == 2 and fits[1].endswith(",0")
       and "(alpha not resolved: < 0, 0 within its 95 % interval)" in out,
       "sweep: an alpha of about -1 us within its interval: the summary says 'not resolved'",
       "%s\n%s\n%s" % (fits, out, err))
    ok("model: alpha not resolved" in title and "alpha -" not in title and "us," not in title,
       "sweep: the time-vs-N title says 'not resolved' too, with no alpha value", title)
    d = os.path.join(T, "sweep")
    write(os.path.join(d, "results.csv"), sweep_rows(-300, 0.125e9, "ratelimit"))
    rc, out, err = analyze("sweep", d, "--elapsed", "1.5", "--links", "ratelimit: test")
    fits = open(os.path.join(d, "fits.csv")).read().splitlines()
    title = png_text(os.path.join(d, "time-vs-n-1gbit-none.png")).get("Title", "")
    ok(rc == 0 and fits[1].endswith(",0") and "alpha fixed at 0" in title and "alpha -" not in title
       and "16M model" in png_text(os.path.join(d, "time-vs-n-1gbit-none.png"))["Description"],
       "sweep: a pinned alpha (ratelimit): fits.csv alpha_resolved 0, the title says fixed at 0",
       "%s\n%s\n%s" % (fits, title, err))
    ok("(alpha fixed at 0: the free fit gave -" in out and "not resolved" not in out
       and "ring-sweep summary: 9 runs in 1.5s, 0 failed" in out,
       "sweep: the summary says a pinned alpha was fixed, not 'not resolved'", out)
    bad = os.path.join(T, "sweep-bad")
    write(os.path.join(bad, "results.csv"),
          sweep_rows(50, 1e9, "tc").replace(",tc,none,3,", ",tc,none,3x,", 1))
    rc, out, err = analyze("sweep", bad)
    ok(rc == 2 and "results.csv:5: n is '3x', not a whole number" in err and "Traceback" not in err,
       "sweep: a results.csv row whose n is not a whole number: exit 2 naming the line", err)
    pts, _ = alphabeta.select_points_file(os.path.join(d, "results.csv"))
    ok(fits[1] == "1gbit,ratelimit,none," + alphabeta.fit_row(alphabeta.fit_nonneg(pts)),
       "sweep: fits.csv's row is the fit's, ring-abfit's columns", fits)
    rc, out, err = analyze("sweep-run", os.path.join(T, "c"))
    write(os.path.join(T, "sr", "rank0.out"), "bytes,count,dtype,time_us,algbw_GBps,busbw_GBps,"
          "wrong,coll\n1048576,262144,float32,8380.05,0.1251,0.1251,0,allreduce\n")
    rc, out, err = analyze("sweep-run", os.path.join(T, "sr"))
    ok(rc == 0 and out == "1048576 8380.05 0.1251 0.1251 0\nbusbw 0.1251 GB/s, 8.38 ms\n",
       "sweep-run: ring-bench's row and the progress text", out + err)


def test_saturation():
    ok(sat.rate_bytes_per_s("1gbit") == 1.25e8 and sat.rate_bytes_per_s("100mbps") == 1e8
       and sat.rate_bytes_per_s("1000") == 1000 and sat.rate_bytes_per_s("0gbit") is None
       and sat.rate_bytes_per_s("fast") is None,
       "rates: tc units, bytes/s bare, 0 and words refused")
    d = os.path.join(T, "sat")
    write(os.path.join(d, "runs", "alpha", "out.txt"), "[0] bytes,count,dtype,time_us,algbw_GBps,"
          "busbw_GBps,wrong,coll\n[0] 4096,1024,float32,48.00,0.08,0.08,0,allreduce\n")
    plan = ["params,compute_ms,codec,n,status,run"]
    for n, step in ((1, 0.030), (2, 0.040), (3, 0.060)):
        run = "1M-30ms-none-n%d" % n
        plan.append("1M,30,none,%d,ok,%s" % (n, run))
        write(os.path.join(d, "runs", run, "m.jsonl"),
              "".join('{"type":"step","step":%d,"time":%.6f}\n' % (s, s * step)
                      for s in range(1, 6)))
    write(os.path.join(d, "plan.csv"), "\n".join(plan) + "\n")
    rc, out, err = analyze("saturation", d, "--rate", "1gbit", "--method", "tc", "--batch", "64")
    rows = [l.split(",") for l in open(os.path.join(d, "saturation.csv")).read().splitlines()]
    a, bw = 24e-6, round(1.25e8 * 1448 / 1514)
    model3 = 3 * 0.03 / (0.03 + 2 * 2 * a + 2 * 2 / 3 * 4e6 / bw)
    ok(rc == 0 and rows[1][8] == "1.000" and rows[1][10] == "1.000" and rows[3][8] == "1.500"
       and rows[3][10] == "%.3f" % model3 and rows[3][7] == "3200.0",
       "saturation: speedup 1 for one peer; N=3 measured and modelled (alpha-beta, tc payload)",
       "%s\n%s" % (rows, err))
    points = open(os.path.join(d, "points.csv")).read().splitlines()
    ok(points == ["params,compute_ms,codec,saturation_n", "1M,30,none,2"]
       and "a = 0.000024 s, B = %d B/s" % bw in out
       and "saturation none: N=2"
       in png_text(os.path.join(d, "speedup-1M-30ms.png"))["Description"],
       "saturation: the point (N=3 gains < 5 %), the model's parameters, the plot's marker",
       "%s\n%s" % (points, out))
    rc, out, err = analyze("saturation", d, "--rate", "1gbit", "--method", "tc", "--progress",
                           "last", "--elapsed", "3")
    ok(rc == 0 and out.strip() == "3200.0 samples/s, speedup 1.500 (model %.3f) [ok, 3 s]" % model3,
       "saturation --progress last: the last run's line", out + err)


def test_cli():
    nosite = write(os.path.join(T, "bin", "python-without-site"),
                   "#!/bin/sh\nexec %s -S \"$@\"\n" % sys.executable)
    os.chmod(nosite, 0o755)
    rc, out, err = analyze("fit", env={"RING_PYTHON": "/nonexistent/python3",
                                       "RINGD_BUILD_PYTHON": "", "RING_PYTHON_FALLBACK": nosite})
    ok(rc == 3 and "/nonexistent/python3 (not found)" in err
       and nosite + " (no numpy and no matplotlib)" in err
       and "install python3-numpy python3-matplotlib" in err and "Traceback" not in err,
       "no usable Python: exit 3 naming each one tried and why, what to install", err)
    rc, out, err = analyze("--which-python", env={"RING_PYTHON": sys.executable})
    ok(rc == 0 and out.strip() == sys.executable, "--which-python: RING_PYTHON first", out + err)
    rc, out, _ = analyze("--help")
    ok(rc == 0 and all(s in out for s in ("NAME", "SYNOPSIS", "DESCRIPTION", "INPUT",
                                          "ENVIRONMENT", "EXIT STATUS", "EXAMPLES",
                                          "--nonneg-alpha", "RING_PYTHON", "sweep-run",
                                          "saturation")),
       "--help: the manual's sections and every subcommand")
    csv = os.path.join(T, "sweep", "results.csv")
    results = [analyze("fit", "--csv", "--nonneg-alpha", csv)[0],
               analyze("fit", "--where", "n=2", csv)[0],
               analyze("fit", "--where", "codec=fp16", csv)[0],
               analyze("fit", "--where", "codec", csv)[0],
               analyze("fit", stdin="n,bytes,time_us\n2,1,1\n3,1\n")]
    ok(results[:4] == [0, 1, 1, 2] and results[4][0] == 2
       and "(standard input):3: malformed CSV" in results[4][2],
       "fit: exit 0 fitted, 1 one n or no row, 2 bad --where or a malformed line (named)", results)
    rc, out, err = analyze("plot-everything")
    ok(rc == 2 and "invalid choice" in err and "Try 'ring-analyze --help'" in err,
       "an unknown subcommand: exit 2, where to look", err)


print("1..%d" % PLAN)
try:
    test_readers()
    test_exp()
    test_repeats()
    test_bars()
    test_sweep()
    test_saturation()
    test_cli()
finally:
    shutil.rmtree(T, ignore_errors=True)
done(PLAN)
