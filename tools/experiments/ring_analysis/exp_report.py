"""ring-exp (sync vs stale): one run's figures from ringd's metrics, and the
experiment's tables, summary and plots from the runs tools/experiments/ring-exp made
(its OUT/plan.csv lists them: run,mode,scenario,n,status)."""

import glob
import math
import os
import re
import sys

from . import charts, repeats
from .readers import (DataError, number_field, number_or_none, read_csv, read_jsonl, read_text,
                      whole)

LOSS_WINDOW = 20  # steps in the moving average of the loss plots


def never_blocks_label(mode):
    """A mode's name under its cluster of blocked.png: async has no bound, so its
    bars are 0 by design, and the label says so (not an empty, unlabelled group)."""
    return "async\n(never blocks)" if mode == "async" else str(mode)


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


def _read_plan(out, seed=None):
    """plan.csv's runs as dicts: run, mode, scenario, n, status, and repeat
    and seed (a plan from before --repeats has neither: repeat 1, seed the
    --seed given)."""
    plan = read_csv(os.path.join(out, "plan.csv"))
    extra = [c for c in ("repeat", "seed") if c in plan.header]
    runs = []
    for line, rec in plan.records("run", "mode", "scenario", "n", "status", *extra):
        rec["repeat"] = whole(rec.get("repeat", "1"), plan.name, line, "repeat")
        rec.setdefault("seed", "" if seed is None else str(seed))
        runs.append(rec)
    return runs


def figures(s, target):
    """A run's figures by runs.csv column (None: none; time_to_target_s
    None: never reached)."""
    return {"wall_s": s["wall"], "samples_per_s": number_or_none(s["sps"] or ""),
            "final_accuracy": s["final_acc"], "time_to_target_s": time_to_target(s, target),
            "blocked_share": s["blocked_share"], "mean_tau": s["mean_tau"]}


# the figures of summary.csv and of the table with repeats: runs.csv column,
# heading, format, unit after the median, scale (the table's, not the CSV's)
FIGURES = (("final_accuracy", "final test accuracy", "%.4f", "", 1),
           ("time_to_target_s", "training time to reach TARGET", "%.1f", "s", 1),
           ("samples_per_s", "samples/s (all peers)", "%.0f", "", 1),
           ("blocked_share", "blocked (% of the peers' training time)", "%.1f", "%", 100),
           ("mean_tau", "mean staleness tau (steps)", "%.2f", "", 1),
           ("wall_s", "training time (s, the slowest peer)", "%.1f", "s", 1))


def cell_summary(cell, stats, target):
    """One (mode, scenario) cell's repeats: {'repeats': planned runs,
    'failed': [status of each run that failed or could not be read],
    'ok': runs that count, FIGURE: repeats.Spread or None, 'median_curve_s':
    their median curve's time to target or None}. Only the runs
    that succeeded and could be read count; time to target counts the
    repeats that never reached it as never (repeats.time_spread)."""
    good = [stats[r["run"]] for r in cell if r["status"] == "ok" and stats.get(r["run"])]
    c = {"repeats": len(cell), "ok": len(good),
         "failed": [r["status"] if r["status"] != "ok" else "unreadable" for r in cell
                    if r["status"] != "ok" or not stats.get(r["run"])]}
    figs = [figures(s, target) for s in good]
    for key, _, _, _, _ in FIGURES:
        vals = [f[key] for f in figs]
        c[key] = repeats.time_spread(vals) if key == "time_to_target_s" else repeats.spread(vals)
    c["median_curve_s"] = repeats.median_curve_crossing(
        [[(t, acc) for t, _, acc, _ in s["evals"]] for s in good], target)
    return c


def _seeds_text(runs):
    seeds = sorted(set(r["seed"] for r in runs if r["seed"] != ""),
                   key=lambda t: (len(t), t))
    if not seeds:
        return ""
    if all(t.isdigit() for t in seeds) and len(seeds) > 2 and \
            int(seeds[-1]) - int(seeds[0]) == len(seeds) - 1:
        return " (seeds %s..%s)" % (seeds[0], seeds[-1])
    return " (seed%s %s)" % ("" if len(seeds) == 1 else "s", ",".join(seeds))


def _cell_text(c, key, fmt, unit, scale):
    if c["ok"] == 0:
        return "FAILED(%s)" % ",".join(dict.fromkeys(f.replace("exit ", "") for f in c["failed"]))
    sp = c[key]
    if sp is not None and scale != 1:
        sp = sp._replace(median=sp.median * scale, lo=sp.lo * scale, hi=sp.hi * scale)
    text = repeats.spread_text(sp, fmt, unit)
    if c["failed"]:
        text += " +%d failed" % len(c["failed"])
    return text


def _repeat_tables(modes, scens, cells, target_text):
    """The summary's tables with repeats: one a figure, MEDIAN [MIN..MAX]."""
    counts = sorted(set(c["repeats"] for c in cells.values()))
    nrep = "%d repeats" % counts[0] if len(counts) == 1 else "%s repeats" % "-".join(
        str(c) for c in (counts[0], counts[-1]))
    lines = []
    for key, head, fmt, unit, scale in FIGURES:
        texts = {(m, sc): _cell_text(cells[(m, sc)], key, fmt, unit, scale)
                 for m in modes for sc in scens if (m, sc) in cells}
        lines += _grid("%s: median [min..max] of %s" % (head.replace("TARGET", target_text), nrep),
                       modes, scens, texts)
    return lines


def _grid(title, modes, scens, texts):
    """A summary table: a blank line, title, a row per mode, a column per
    scenario; texts[(mode, scenario)] the cells ('-' where missing)."""
    w = max([len(t) for t in texts.values()] + [len(sc) for sc in scens])
    lines = ["", title, ("%-12s" % "mode" + "".join(" | %-*s" % (w, sc) for sc in scens)).rstrip()]
    for m in modes:
        lines.append(("%-12s" % m + "".join(" | %-*s" % (w, texts.get((m, sc), "-"))
                                            for sc in scens)).rstrip())
    return lines


def _crossing_table(modes, scens, cells, target_text):
    """The summary's table of the cells' repeats.median_curve_crossing."""
    def text(c):
        if c["ok"] == 0:
            return "FAILED"
        return "never" if c["median_curve_s"] is None else "%.1fs" % c["median_curve_s"]

    texts = {k: text(c) for k, c in cells.items()}
    return _grid("training time to reach %s on the median curve (at each time, the median of "
                 "the repeats' last accuracies)" % target_text, modes, scens, texts)


def report(out, target_text, model=None, epochs=None, seed=None, elapsed=None, plots=True):
    """Writes OUT/runs.csv, evals.csv, staleness.csv, summary.csv,
    summary.txt and the PNGs; prints the summary and the files. Returns the
    exit status: 0, or 1 when a run's metrics could not be read or a plot
    could not be drawn. A plan with more than one run of a (mode, scenario)
    cell (ring-exp --repeats) gets repeat and seed columns in runs.csv and
    evals.csv, medians and ranges in the summary and spreads in the plots;
    with one run a cell, the files are as they were before --repeats."""
    target = float(target_text)
    runs = _read_plan(out, seed)
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
    cells = {}
    for r in runs:
        cells.setdefault((r["mode"], r["scenario"]), []).append(r)
    multi = any(len(c) > 1 for c in cells.values())
    n = runs[0]["n"] if runs else "?"

    def rep_cols(r):
        return ",%d,%s" % (r["repeat"], r["seed"]) if multi else ""

    with open(os.path.join(out, "runs.csv"), "w") as f:
        f.write("run,mode,staleness,scenario,n,wall_s,samples_per_s,final_accuracy,"
                "time_to_target_s,blocked_share,mean_tau,steps,status%s\n"
                % (",repeat,seed" if multi else ""))
        for r in runs:
            s = stats.get(r["run"])
            kind, bound = mode_parts(r["mode"])
            if s is None:
                f.write("%s,%s,%s,%s,%s,,,,,,,0,%s%s\n" % (r["run"], kind, bound, r["scenario"],
                                                           r["n"], r["status"], rep_cols(r)))
                continue
            f.write(",".join([r["run"], kind, bound, r["scenario"], r["n"], _fmt(s["wall"], "%.3f"),
                              s["sps"] or "", _fmt(s["final_acc"], "%.4f"),
                              _fmt(time_to_target(s, target), "%.3f"),
                              _fmt(s["blocked_share"], "%.4f"), _fmt(s["mean_tau"], "%.3f"),
                              "%d" % s["steps"], r["status"]]) + rep_cols(r) + "\n")
    with open(os.path.join(out, "evals.csv"), "w") as f:
        f.write("run,mode,scenario,time_s,step,accuracy,loss%s\n"
                % (",repeat,seed" if multi else ""))
        for r in runs:
            for t, st, acc, loss in stats.get(r["run"], {}).get("evals", []):
                f.write("%s,%s,%s,%.6f,%d,%.6f,%.6g%s\n" % (r["run"], r["mode"], r["scenario"], t,
                                                            st, acc, loss, rep_cols(r)))
    with open(os.path.join(out, "staleness.csv"), "w") as f:
        f.write("run,tau,count\n")
        for r in runs:
            for tau, c in sorted(stats.get(r["run"], {}).get("taus", {}).items()):
                f.write("%s,%d,%d\n" % (r["run"], tau, c))
    summaries = {k: cell_summary(c, stats, target) for k, c in cells.items()}
    with open(os.path.join(out, "summary.csv"), "w") as f:
        f.write("mode,staleness,scenario,n,repeats,ok,reached_target,"
                + ",".join("%s_median,%s_min,%s_max" % (k, k, k) for k, *_ in FIGURES)
                + ",median_curve_time_to_target_s\n")
        for (m, sc), c in summaries.items():
            kind, bound = mode_parts(m)
            ttt = c["time_to_target_s"]
            row = [kind, bound, sc, cells[(m, sc)][0]["n"], "%d" % c["repeats"], "%d" % c["ok"],
                   "%d" % (ttt.reached if ttt else 0)]
            for key, _, fmt, _, _ in FIGURES:
                sp = c[key]
                # never (the median repeat, or the slowest) is empty, as in runs.csv
                row += ["" if sp is None or v == repeats.NEVER else "%.6g" % v
                        for v in ((sp.median, sp.lo, sp.hi) if sp else (None,) * 3)]
            row.append(_fmt(c["median_curve_s"], "%.6g"))
            f.write(",".join(row) + "\n")

    failed = sum(1 for r in runs if r["status"] != "ok")
    nrep = max([len(c) for c in cells.values()] + [1])
    lines = ["ring-exp summary: %s peers%s%s%s, target accuracy %s" % (
        n, ", " + model if model else "",
        ", %s epoch%s" % (epochs, "" if str(epochs) == "1" else "s") if epochs else "",
        ", %d repeats per cell%s" % (nrep, _seeds_text(runs)) if multi
        else ", seed %s" % seed if seed is not None else "", target_text)]
    if multi:
        lines += ["each cell: the median of the repeats that succeeded [the smallest..the "
                  "largest]; a failed run is left out and counted (+K failed)",
                  "time to %s: a repeat that never reached it counts as slower than any that "
                  "did (never: the median repeat never did); (K/N): K of the N repeats reached it"
                  % target_text]
        lines += _repeat_tables(modes, scens, summaries, target_text)
        lines += _crossing_table(modes, scens, summaries, target_text)
        lines.append("")
    else:
        lines += ["each cell: final test accuracy / training time to reach %s (- = never) / "
                  "samples/s (all peers)" % target_text,
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
                                                "-" if ttt is None else "%.1fs" % ttt,
                                                s["sps"] or "-")
            lines.append(row)
    lines.append("%d runs in %ss, %d failed" % (len(runs), elapsed if elapsed else "?", failed))
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    pngs = []
    if plots:
        pngs, failed = charts.draw_all(
            lambda: _plots(out, cells, stats, summaries, modes, scens, n, model, target,
                           target_text))
        rc = rc or failed
    print()
    print("\n".join(lines))
    print()
    print("files written in %s:" % out)
    for f in ["runs.csv", "evals.csv", "staleness.csv", "summary.csv", "summary.txt", "plan.csv",
              "analyze.sh"] + pngs:
        if os.path.exists(os.path.join(out, f)):
            print("  %s" % os.path.join(out, f))
    print("  %s/NN-MODE-SCENARIO%s/ (%d run%s: metrics m-RANK.jsonl, output.txt, command)"
          % (out, "-rREPEAT" if multi else "", len(runs), "" if len(runs) == 1 else "s"))
    return rc


def _colour(i):
    cycle = charts.pyplot().rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    return cycle[i % len(cycle)]


def _lines(ax, cells, stats, modes, sc, points, what):
    """A line per mode of scenario sc: with one run in a cell, that run's
    (labelled with its status when it failed); with repeats, each repeat
    thin and faint (dotted when it failed) and the median of those that
    succeeded thick. points(stats) -> [(key, x, y)]. Returns the lines'
    y values (for the log-scale test)."""
    ys, i = [], 0
    for m in modes:
        cell = [r for r in cells.get((m, sc), []) if stats.get(r["run"])
                and points(stats[r["run"]])]
        if not cell:
            continue
        colour = _colour(i)
        i += 1
        if len(cells[(m, sc)]) == 1:
            r = cell[0]
            p = points(stats[r["run"]])
            ax.plot([e[1] for e in p], [e[2] for e in p], linewidth=2, color=colour,
                    label=m + ("" if r["status"] == "ok" else " (%s)" % r["status"]),
                    **({"marker": "o", "markersize": 3} if what == "accuracy" else {}))
            ys += [e[2] for e in p]
            continue
        nfail = sum(1 for r in cells[(m, sc)] if r["status"] != "ok")
        label = m + ("" if nfail == 0 else " (%d of %d failed)" % (nfail, len(cells[(m, sc)])))
        for r in cell:
            p = points(stats[r["run"]])
            ax.plot([e[1] for e in p], [e[2] for e in p], linewidth=1, alpha=0.35, color=colour,
                    linestyle="-" if r["status"] == "ok" else ":", label="_repeat")
            ys += [e[2] for e in p]
        med = repeats.curve_median([points(stats[r["run"]]) for r in cell if r["status"] == "ok"])
        if med:
            ax.plot([x for x, _ in med], [y for _, y in med], linewidth=2.2, color=colour,
                    label=label, **({"marker": "o", "markersize": 3} if what == "accuracy" else {}))
        else:
            ax.plot([], [], linestyle=":", color=colour, label=label)
    return ys


def _plots(out, cells, stats, summaries, modes, scens, n, model, target, target_text):
    pngs = []
    multi = any(len(c) > 1 for c in cells.values())
    nrep = max([len(c) for c in cells.values()] + [1])
    lines_note = ("; thin lines: each of the %d repeats, thick: their median at each %s"
                  if multi else "")
    for sc in scens:
        slug = sc.replace(":", "-")
        mine = [r for (_, s), c in cells.items() if s == sc for r in c if stats.get(r["run"])]
        if any(stats[r["run"]]["evals"] for r in mine):
            fig, ax = charts.figure()
            _lines(ax, cells, stats, modes, sc,
                   lambda s: [(e[1], e[0], e[2]) for e in s["evals"]], "accuracy")
            ax.axhline(target, linestyle="--", color="0.4", label="target %s" % target_text)
            ax.set_xlim(left=0)
            ax.set_xlabel("training time (s)")
            ax.set_ylabel("test accuracy")
            charts.save(fig, os.path.join(out, "accuracy-%s.png" % slug),
                        "test accuracy vs wall time - scenario %s, %s peers%s%s"
                        % (sc, n, ", " + model if model else "",
                           lines_note % (nrep, "evaluation") if multi else ""))
            pngs.append("accuracy-%s.png" % slug)
        if any(stats[r["run"]]["loss"] for r in mine):
            fig, ax = charts.figure()
            ys = _lines(ax, cells, stats, modes, sc,
                        lambda s: [(p[0], p[0], p[1]) for p in s["loss"]], "loss")
            if all(y > 0 for y in ys):
                ax.set_yscale("log")
            ax.set_xlim(left=0)
            ax.set_xlabel("step")
            ax.set_ylabel("loss")
            charts.save(fig, os.path.join(out, "loss-%s.png" % slug),
                        "rank 0 training loss (moving average of %d steps) - scenario %s%s"
                        % (LOSS_WINDOW, sc, lines_note % (nrep, "step") if multi else ""))
            pngs.append("loss-%s.png" % slug)

    def median_of(key, scale):
        def value(m, sc):
            c = summaries.get((m, sc))
            sp = c and c[key]
            return sp.median * scale if sp else None

        def spread(m, sc):
            c = summaries.get((m, sc))
            sp = c and c[key]
            return (sp.lo * scale, sp.hi * scale) if sp and sp.count > 1 else None
        return value, spread

    bars_note = ("; bars: the median of the %d repeats, whiskers: their range (min..max)" % nrep
                 if multi else "")
    for name, key, scale, fmt, ylabel, title in (
            ("throughput", "samples_per_s", 1, "%.0f", "samples/s",
             "throughput per mode and scenario (%s peers, all peers' samples/s)" % n),
            ("blocked", "blocked_share", 100, "%.1f", "blocked (% of training time)",
             "share of training time blocked (lockstep: waiting for the slowest peer; "
             "bounded/async: for the bound)")):
        value, spread = median_of(key, scale)
        if not any(value(m, sc) is not None for m in modes for sc in scens):
            continue
        fig, ax = charts.figure()
        charts.grouped_bars(ax, modes, scens, value, lambda v, f=fmt: f % v,
                            spread=spread if multi else None,
                            group_label=never_blocks_label if name == "blocked" else str)
        if name == "blocked" and any(value("async", sc) is not None for sc in scens):
            title += "; async never blocks (no bound): its bars are 0"
        ax.set_xlabel("mode")
        ax.set_ylabel(ylabel)
        charts.save(fig, os.path.join(out, name + ".png"), title + bars_note)
        pngs.append(name + ".png")

    for sc in scens:
        shares = {}  # mode -> [{bin order: % of steps}], one a run
        labels = {}
        for m in modes:
            cell = cells.get((m, sc), [])
            # with repeats only the runs that succeeded count, as in the table
            use = [r for r in cell
                   if stats.get(r["run"]) and (len(cell) == 1 or r["status"] == "ok")]
            for r in use:
                h = {}
                for tau, c in stats[r["run"]]["taus"].items():
                    b, lab = tau_bin(tau)
                    labels[b] = lab
                    h[b] = h.get(b, 0) + c
                total = sum(h.values())
                if total:
                    shares.setdefault(m, []).append({b: 100.0 * c / total for b, c in h.items()})
        if not labels:
            continue
        bins = sorted(labels)
        order = {labels[b]: b for b in bins}

        def share(lab, m):
            return repeats.median([h.get(order[lab], 0.0) for h in shares[m]])

        def share_range(lab, m):
            v = [h.get(order[lab], 0.0) for h in shares[m]]
            return (min(v), max(v)) if len(v) > 1 else None

        fig, ax = charts.figure()
        charts.grouped_bars(ax, [labels[b] for b in bins], [m for m in modes if m in shares],
                            share, lambda v: "%.0f" % v if v >= 10 else "%.1f" % v,
                            label_zero=False, spread=share_range if multi else None)
        ax.set_xlabel("tau (steps the slowest peer was behind)")
        ax.set_ylabel("% of steps")
        slug = sc.replace(":", "-")
        charts.save(fig, os.path.join(out, "staleness-%s.png" % slug),
                    "staleness of the steps (all peers) - scenario %s%s"
                    % (sc, bars_note.replace("bars: the median", "bars: the median share")))
        pngs.append("staleness-%s.png" % slug)
    return pngs
