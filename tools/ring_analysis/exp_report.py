"""ring-exp (sync vs stale): one run's figures from ringd's metrics, and the
experiment's tables, summary and plots from the runs tools/ring-exp made
(its OUT/plan.csv lists them: run,mode,scenario,n,status)."""

import glob
import math
import os
import re
import sys

from . import charts
from .readers import DataError, number_field, read_csv, read_jsonl, read_text

LOSS_WINDOW = 20  # steps in the moving average of the loss plots


def run_stats(rundir):
    """What one run's metrics files (RUNDIR/m-RANK.jsonl) and ring-launch's
    output (RUNDIR/output.txt) say: a dict with wall (the longest of the
    peers' last step times), samples, blocked_share, mean_tau, steps, evals
    (rank 0's: [(time, step, accuracy, loss)], a repeated final evaluation
    once), loss (rank 0's: [(step, moving average)]), taus ({tau: steps})
    and sps (ringd's summary figure, else samples / wall). DataError for a
    malformed metrics line."""
    last, blocked = {}, {}
    taus = {}
    samples = 0.0
    steps = 0
    evals, losses = [], []
    for path in sorted(glob.glob(os.path.join(rundir, "m-*.jsonl"))):
        m = re.search(r"m-(\d+)\.jsonl$", path)
        if not m:
            continue
        rank = int(m.group(1))
        for line, rec in read_jsonl(path):
            kind = rec.get("type")
            if kind == "step":
                t = number_field(rec, "time", path, line)
                last[rank] = max(last.get(rank, 0.0), t)
                samples += number_field(rec, "samples", path, line)
                blocked[rank] = blocked.get(rank, 0.0) + number_field(rec, "blocked_s", path, line)
                tau = int(number_field(rec, "tau", path, line))
                taus[tau] = taus.get(tau, 0) + 1
                st = int(number_field(rec, "step", path, line))
                steps = max(steps, st)
                if rank == 0:
                    losses.append((st, number_field(rec, "loss", path, line)))
            elif kind == "eval" and rank == 0:
                ev = tuple(number_field(rec, k, path, line)
                           for k in ("time", "step", "accuracy", "loss"))
                if evals and evals[-1][1] == ev[1]:
                    evals.pop()  # the final evaluation repeats the last one
                evals.append(ev)
    ma, window = [], []
    for st, v in losses:
        window.append(v)
        if len(window) > LOSS_WINDOW:
            window.pop(0)
        ma.append((st, sum(window) / len(window)))
    wall = max(last.values()) if last else 0.0
    tw = sum(last.values())
    ntau = sum(taus.values())
    s = {"wall": wall if wall > 0 else None, "samples": samples, "steps": steps,
         "blocked_share": sum(blocked.values()) / tw if tw > 0 else None,
         "mean_tau": sum(t * c for t, c in taus.items()) / ntau if ntau else None,
         "evals": evals, "loss": ma, "taus": taus, "sps": None}
    s["final_acc"] = evals[-1][2] if evals else None
    out = os.path.join(rundir, "output.txt")
    if os.path.exists(out):
        for line in read_text(out):
            m = re.match(r"\[0\] *samples/s *([0-9.]*)", line)
            if m and m.group(1):
                s["sps"] = m.group(1)
    if s["sps"] is None and s["wall"]:
        s["sps"] = "%.0f" % (samples / s["wall"])
    return s


def time_to_target(s, target):
    """The training time of the first evaluation at or above target, or None."""
    return next((t for t, _, acc, _ in s["evals"] if acc >= target), None)


def _fmt(v, f):
    return "" if v is None else f % v


def progress_text(s, target_text):
    """The figures ring-exp prints after a run."""
    ttt = time_to_target(s, float(target_text))
    return "accuracy %s, %s, %s samples/s, blocked %s, mean tau %s" % (
        _fmt(s["final_acc"], "%.4f") or "-",
        "never reached %s" % target_text if ttt is None else "%s at %.3fs" % (target_text, ttt),
        s["sps"] or "?",
        "-" if s["blocked_share"] is None else "%.0f%%" % (100 * s["blocked_share"]),
        _fmt(s["mean_tau"], "%.3f") or "-")


def mode_parts(label):
    """'bounded:4' -> ('bounded', '4'); 'async' -> ('async', '')."""
    kind, _, bound = label.partition(":")
    return kind, bound


def tau_bin(t):
    """Staleness bins: 0..4 on their own, then 5-8, 9-16, ... (async can run
    hundreds of steps apart). Returns (order, label)."""
    if t <= 4:
        return t, str(t)
    hi = 8
    while t > hi:
        hi *= 2
    return 4 + int(math.log2(hi)) - 2, "%d-%d" % (hi // 2 + 1, hi)


def _read_plan(out):
    plan = read_csv(os.path.join(out, "plan.csv"))
    return [rec for _, rec in plan.records("run", "mode", "scenario", "n", "status")]


def report(out, target_text, model=None, epochs=None, seed=None, elapsed=None, plots=True):
    """Writes OUT/runs.csv, evals.csv, staleness.csv, summary.txt and the
    PNGs; prints the summary and the files. Returns the exit status: 0, or 1
    when a run's metrics could not be read or a plot could not be drawn."""
    target = float(target_text)
    runs = _read_plan(out)
    rc = 0
    stats = {}
    for r in runs:
        try:
            stats[r["run"]] = run_stats(os.path.join(out, r["run"]))
        except DataError as e:
            print("ring-analyze: %s: %s" % (r["run"], e), file=sys.stderr)
            rc = 1
    modes = list(dict.fromkeys(r["mode"] for r in runs))
    scens = list(dict.fromkeys(r["scenario"] for r in runs))
    n = runs[0]["n"] if runs else "?"
    with open(os.path.join(out, "runs.csv"), "w") as f:
        f.write("run,mode,staleness,scenario,n,wall_s,samples_per_s,final_accuracy,"
                "time_to_target_s,blocked_share,mean_tau,steps,status\n")
        for r in runs:
            s = stats.get(r["run"])
            kind, bound = mode_parts(r["mode"])
            if s is None:
                f.write("%s,%s,%s,%s,%s,,,,,,,0,%s\n" % (r["run"], kind, bound, r["scenario"],
                                                         r["n"], r["status"]))
                continue
            f.write(",".join([r["run"], kind, bound, r["scenario"], r["n"], _fmt(s["wall"], "%.3f"),
                              s["sps"] or "", _fmt(s["final_acc"], "%.4f"),
                              _fmt(time_to_target(s, target), "%.3f"),
                              _fmt(s["blocked_share"], "%.4f"), _fmt(s["mean_tau"], "%.3f"),
                              "%d" % s["steps"], r["status"]]) + "\n")
    with open(os.path.join(out, "evals.csv"), "w") as f:
        f.write("run,mode,scenario,time_s,step,accuracy,loss\n")
        for r in runs:
            for t, st, acc, loss in stats.get(r["run"], {}).get("evals", []):
                f.write("%s,%s,%s,%.6f,%d,%.6f,%.6g\n" % (r["run"], r["mode"], r["scenario"], t,
                                                          st, acc, loss))
    with open(os.path.join(out, "staleness.csv"), "w") as f:
        f.write("run,tau,count\n")
        for r in runs:
            for tau, c in sorted(stats.get(r["run"], {}).get("taus", {}).items()):
                f.write("%s,%d,%d\n" % (r["run"], tau, c))

    failed = sum(1 for r in runs if r["status"] != "ok")
    lines = ["ring-exp summary: %s peers%s%s%s, target accuracy %s" % (
        n, ", " + model if model else "",
        ", %s epoch%s" % (epochs, "" if str(epochs) == "1" else "s") if epochs else "",
        ", seed %s" % seed if seed is not None else "", target_text),
        "each cell: final test accuracy / training time to reach %s (- = never) / samples/s "
        "(all peers)" % target_text,
        "%-12s" % "mode" + "".join(" | %-24s" % sc for sc in scens)]
    by = {(r["mode"], r["scenario"]): r for r in runs}
    for m in modes:
        row = "%-12s" % m
        for sc in scens:
            r = by.get((m, sc))
            s = stats.get(r["run"]) if r else None
            if r is not None and r["status"] != "ok":
                row += " | %-24s" % ("FAILED(%s)" % r["status"].replace("exit ", ""))
            elif s is None:
                row += " | %-6s %7s %9s" % ("-", "-", "-")
            else:
                ttt = time_to_target(s, target)
                row += " | %-6s %7s %9s" % (_fmt(s["final_acc"], "%.4f") or "-",
                                            "-" if ttt is None else "%.1fs" % ttt, s["sps"] or "-")
        lines.append(row)
    lines.append("%d runs in %ss, %d failed" % (len(runs), elapsed if elapsed else "?", failed))
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    pngs = []
    if plots:
        pngs, failed = charts.draw_all(
            lambda: _plots(out, runs, stats, modes, scens, n, model, target, target_text))
        rc = rc or failed
    print()
    print("\n".join(lines))
    print()
    print("files written in %s:" % out)
    for f in ["runs.csv", "evals.csv", "staleness.csv", "summary.txt", "plan.csv",
              "analyze.sh"] + pngs:
        if os.path.exists(os.path.join(out, f)):
            print("  %s" % os.path.join(out, f))
    print("  %s/NN-MODE-SCENARIO/ (%d run%s: metrics m-RANK.jsonl, output.txt, command)"
          % (out, len(runs), "" if len(runs) == 1 else "s"))
    return rc


def _plots(out, runs, stats, modes, scens, n, model, target, target_text):
    pngs = []
    for sc in scens:
        slug = sc.replace(":", "-")
        mine = [r for r in runs if r["scenario"] == sc and stats.get(r["run"])]

        def label(r):
            return r["mode"] + ("" if r["status"] == "ok" else " (%s)" % r["status"])

        with_evals = [r for r in mine if stats[r["run"]]["evals"]]
        if with_evals:
            fig, ax = charts.figure()
            for r in with_evals:
                ev = stats[r["run"]]["evals"]
                ax.plot([e[0] for e in ev], [e[2] for e in ev], marker="o", markersize=3,
                        linewidth=2, label=label(r))
            ax.axhline(target, linestyle="--", color="0.4", label="target %s" % target_text)
            ax.set_xlim(left=0)
            ax.set_xlabel("training time (s)")
            ax.set_ylabel("test accuracy")
            charts.save(fig, os.path.join(out, "accuracy-%s.png" % slug),
                        "test accuracy vs wall time - scenario %s, %s peers%s"
                        % (sc, n, ", " + model if model else ""))
            pngs.append("accuracy-%s.png" % slug)
        with_loss = [r for r in mine if stats[r["run"]]["loss"]]
        if with_loss:
            fig, ax = charts.figure()
            for r in with_loss:
                lo = stats[r["run"]]["loss"]
                ax.plot([p[0] for p in lo], [p[1] for p in lo], linewidth=2, label=label(r))
            if all(p[1] > 0 for r in with_loss for p in stats[r["run"]]["loss"]):
                ax.set_yscale("log")
            ax.set_xlim(left=0)
            ax.set_xlabel("step")
            ax.set_ylabel("loss")
            charts.save(fig, os.path.join(out, "loss-%s.png" % slug),
                        "rank 0 training loss (moving average of %d steps) - scenario %s"
                        % (LOSS_WINDOW, sc))
            pngs.append("loss-%s.png" % slug)

    ok = {(r["mode"], r["scenario"]): stats.get(r["run"]) for r in runs if r["status"] == "ok"}

    def sps(m, sc):
        s = ok.get((m, sc))
        return float(s["sps"]) if s and s["sps"] else None

    def blocked(m, sc):
        s = ok.get((m, sc))
        return 100 * s["blocked_share"] if s and s["blocked_share"] is not None else None

    for name, value, fmt, ylabel, title in (
            ("throughput", sps, "%.0f", "samples/s",
             "throughput per mode and scenario (%s peers, all peers' samples/s)" % n),
            ("blocked", blocked, "%.1f", "blocked (% of training time)",
             "share of training time blocked (lockstep: waiting for the slowest peer; "
             "bounded/async: for the bound)")):
        if not any(value(m, sc) is not None for m in modes for sc in scens):
            continue
        fig, ax = charts.figure()
        charts.grouped_bars(ax, modes, scens, value, lambda v, f=fmt: f % v)
        ax.set_xlabel("mode")
        ax.set_ylabel(ylabel)
        charts.save(fig, os.path.join(out, name + ".png"), title)
        pngs.append(name + ".png")

    for sc in scens:
        hist = {}  # mode -> {bin order: count}
        labels = {}
        for r in runs:
            s = stats.get(r["run"])
            if r["scenario"] != sc or not s:
                continue
            h = hist.setdefault(r["mode"], {})
            for tau, c in s["taus"].items():
                b, lab = tau_bin(tau)
                labels[b] = lab
                h[b] = h.get(b, 0) + c
        if not labels:
            continue
        share = {m: {b: 100.0 * c / sum(h.values()) for b, c in h.items()} for m, h in hist.items()
                 if sum(h.values())}
        bins = sorted(labels)
        fig, ax = charts.figure()
        order = {labels[b]: b for b in bins}
        charts.grouped_bars(ax, [labels[b] for b in bins], [m for m in modes if m in share],
                            lambda lab, m: share[m].get(order[lab], 0.0),
                            lambda v: "%.0f" % v if v >= 10 else "%.1f" % v, label_zero=False)
        ax.set_xlabel("tau (steps the slowest peer was behind)")
        ax.set_ylabel("% of steps")
        slug = sc.replace(":", "-")
        charts.save(fig, os.path.join(out, "staleness-%s.png" % slug),
                    "staleness of the steps (all peers) - scenario %s" % sc)
        pngs.append("staleness-%s.png" % slug)
    return pngs
