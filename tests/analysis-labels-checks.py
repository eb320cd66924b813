"""TAP: the plots of tools/ring_analysis say what the tables say. ring-exp's
blocked.png labels the async group, which is 0 by design ("never blocks"),
instead of leaving an empty, unlabelled cluster; ring-sweep's time-vs-N
title and its summary both call an alpha whose 95 % interval holds 0 "not
resolved" and neither plot gives it as a value. Run by
tests/analysis-labels.test with the interpreter tools/ring-analyze picks."""

import os
import shutil
import subprocess
import sys
import tempfile

TOOLS = os.path.join(os.path.abspath(os.environ.get("top_srcdir", ".")), "tools")
sys.path.insert(0, TOOLS)
from ring_analysis import alphabeta, charts, exp_report  # noqa: E402
from analysis_tap import done, ok  # noqa: E402

PLAN = 4
T = tempfile.mkdtemp(prefix="analysis-labels.")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def analyze(*args):
    p = subprocess.run([os.path.join(TOOLS, "ring-analyze")] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return p.returncode, p.stdout, p.stderr


def png_title(path):
    """The PNG's Title chunk (charts.save writes it)."""
    with open(path, "rb") as f:
        data = f.read()
    i = data.find(b"tEXtTitle\0")
    if i < 0:
        return ""
    n = int.from_bytes(data[i - 4:i], "big")
    return data[i + 10:i + 4 + n].decode("latin-1")


def fake_run(d, blocked):
    """Two ranks of 4 steps of a ring-exp run; rank 0 evaluates twice."""
    step = ('{"type":"step","rank":%d,"step":%d,"epoch":0,"time":%.6f,"loss":1.5,'
            '"samples":64,"tau":1,"blocked_s":%.6f}\n')
    for rank in (0, 1):
        text = "".join(step % (rank, s + 1, 0.1 * (s + 1), blocked) for s in range(4))
        if rank == 0:
            text += ('{"type":"eval","step":2,"epoch":0,"time":0.2,"loss":0.5,"accuracy":0.4}\n'
                     '{"type":"eval","step":4,"epoch":0,"time":0.4,"loss":0.5,"accuracy":0.6}\n')
        write(os.path.join(d, "m-%d.jsonl" % rank), text)
    write(os.path.join(d, "output.txt"), "[0]   samples/s            1234 (all peers)\n")


def test_blocked():
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
    exp = os.path.join(T, "exp")
    fake_run(os.path.join(exp, "01-lockstep-none"), 0.05)
    fake_run(os.path.join(exp, "02-async-none"), 0.0)
    write(os.path.join(exp, "plan.csv"), "run,mode,scenario,n,status\n"
          "01-lockstep-none,lockstep,none,2,ok\n02-async-none,async,none,2,ok\n")
    rc, out, err = analyze("exp", exp, "--target", "0.5")
    title = png_title(os.path.join(exp, "blocked.png"))
    ok(rc == 0 and "async never blocks (no bound): its bars are 0" in title,
       "exp: blocked.png's title says async never blocks", "%s\n%s" % (title, err))


def sweep_rows():
    """A free fit (tc links) whose alpha is -1.1 us, 0 inside its 95 % interval."""
    rows = ["rate,method,codec,n,bytes,time_us,algbw_GBps,busbw_GBps,wrong,status,run"]
    for n in (2, 3, 4):
        for k, s in enumerate((1 << 20, 4 << 20, 16 << 20)):
            t = alphabeta.predict(-1.1, 1e-3, n, s) * (1.02 if (n + k) % 2 else 0.98)
            rows.append("1gbit,tc,none,%d,%d,%.2f,1,1,0,ok,r" % (n, s, t))
    return "\n".join(rows) + "\n"


def test_sweep():
    d = os.path.join(T, "sweep")
    write(os.path.join(d, "results.csv"), sweep_rows())
    rc, out, err = analyze("sweep", d)
    fits = open(os.path.join(d, "fits.csv")).read().splitlines() if rc == 0 else []
    title = png_title(os.path.join(d, "time-vs-n-1gbit-none.png"))
    ok(rc == 0 and len(fits) == 2 and fits[1].endswith(",0")
       and "(alpha not resolved: < 0, 0 within its 95 % interval)" in out,
       "sweep: an alpha of about -1 us within its interval: the summary says 'not resolved'",
       "%s\n%s\n%s" % (fits, out, err))
    ok("model: alpha not resolved" in title and "alpha -" not in title and "us," not in title,
       "sweep: the time-vs-N title says 'not resolved' too, with no alpha value", title)


print("1..%d" % PLAN)
try:
    test_blocked()
    test_sweep()
finally:
    shutil.rmtree(T, ignore_errors=True)
done(PLAN)
