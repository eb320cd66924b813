"""ring-sweep: the sweep's alpha-beta fits, predictions, summary and plots
from OUT/results.csv
(rate,method,codec,n,bytes,time_us,algbw_GBps,busbw_GBps,wrong,status,run)."""

import os
import re

from . import alphabeta, charts
from .readers import DataError, number_or_none, read_csv, read_text, whole

# the sizes of the time-vs-N plots: 16 MiB and 64 MiB when run, else the largest
VS_N_SIZES = (16 << 20, 64 << 20)


def size_label(nbytes):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return "%d%s" % (nbytes >> shift, unit)
    return "%d" % nbytes


def rate_bits(rate):
    """'1gbit' -> 1e9 (bit/s, decimal as tc); 'none' or anything else -> 0."""
    m = re.match(r"^([0-9]+)(kbit|mbit|gbit)$", rate)
    return int(m.group(1)) * {"kbit": 10**3, "mbit": 10**6, "gbit": 10**9}[m.group(2)] if m else 0


def fit_all(out, table, lines):
    """{(rate, codec): (points, Fit) or the reason there is none}; writes
    fits.csv, predictions.csv and fit-RATE-CODEC.txt. Points: the rows of
    that rate and codec with status ok and wrong 0; on ratelimit links (a
    token bucket) a clearly negative alpha is fixed at 0."""
    name = os.path.join(out, "results.csv")
    fits = {}
    fcsv = ["rate,method,codec,points,alpha_us,alpha_se_us,bw_GBps,bw_se_GBps,bw_Gbps,bw_se_Gbps,"
            "r2,max_abs_error_pct,alpha_resolved"]
    pcsv = ["rate,codec,n,bytes,time_us,model_us,error_pct"]
    for rate in table["rates"]:
        for codec in table["codecs"]:
            method = table["method"].get((rate, codec), "")
            txt = os.path.join(out, "fit-%s-%s.txt" % (rate, codec.replace("+", "-")))
            try:
                pts, nrows = alphabeta.select_points(
                    lines, name,
                    (("rate", rate), ("codec", codec), ("status", "ok"), ("wrong", "0")))
                r = (alphabeta.fit_nonneg if method == "ratelimit" else alphabeta.fit)(pts)
            except (DataError, alphabeta.FitError) as e:
                why = str(e)
                if why.startswith(name + ": "):
                    why = why[len(name) + 2:]
                fits[rate, codec] = why
                with open(txt, "w") as f:
                    f.write("cannot fit: %s\n" % why)
                continue
            fits[rate, codec] = (pts, r)
            fcsv.append("%s,%s,%s,%s" % (rate, method, codec, alphabeta.fit_row(r)))
            pcsv += ["%s,%s,%s" % (rate, codec, ",".join(p[1:]))
                     for p in alphabeta.point_rows(pts, r)]
            with open(txt, "w") as f:
                f.write(alphabeta.report_text(pts, r, True, nrows))
    with open(os.path.join(out, "fits.csv"), "w") as f:
        f.write("\n".join(fcsv) + "\n")
    with open(os.path.join(out, "predictions.csv"), "w") as f:
        f.write("\n".join(pcsv) + "\n")
    return fits


def read_results(out):
    """results.csv as the sweep's lists (in the order they were run) and rows."""
    path = os.path.join(out, "results.csv")
    lines = read_text(path)
    t = read_csv(path)
    rows = []
    for line, r in t.records("rate", "method", "codec", "n", "bytes", "time_us", "busbw_GBps",
                             "wrong", "status", "run"):
        r["n"] = whole(r["n"], path, line, "n")
        r["bytes"] = whole(r["bytes"], path, line, "bytes")
        rows.append(r)
    table = {"rows": rows,
             "rates": list(dict.fromkeys(r["rate"] for r in rows)),
             "codecs": list(dict.fromkeys(r["codec"] for r in rows)),
             "ns": list(dict.fromkeys(r["n"] for r in rows)),
             "sizes": list(dict.fromkeys(r["bytes"] for r in rows)),
             "method": {(r["rate"], r["codec"]): r["method"] for r in rows}}
    return table, lines


def model_title(fit):
    """The model's part of a plot title: alpha only where the fit resolved it."""
    if isinstance(fit, str):
        return "no fit: " + fit
    r = fit[1]
    bw = "B %.4g GB/s" % (r.bw_Bps / 1e9)
    if r.alpha_pinned:
        return "model: alpha fixed at 0 (clearly < 0 on these links), " + bw
    if r.alpha_unresolved:
        return "model: alpha not resolved (0 within its 95 % interval), " + bw
    return "model: alpha %.4g us, %s" % (r.alpha_us, bw)


def summary(table, fits, elapsed, links):
    rows = table["rows"]
    failed = sum(1 for r in rows if r["status"] != "ok")
    k = len(rows)
    out = ["ring-sweep summary: %d run%s in %ss, %d failed" % (k, "" if k == 1 else "s",
                                                              elapsed or "?", failed)]
    if links:
        out.append("links: %s" % links)
    if fits is not None:
        out += ["", "alpha-beta fits, t = 2(N-1) alpha + 2(N-1)/N S/B (least squares weighted by "
                "1/t^2; B in the user's fp32 bytes):",
                "%-8s %-10s %-9s %6s  %-22s %-24s %-20s %-9s %s" % (
                    "rate", "method", "codec", "points", "alpha (us)", "B (GB/s)", "B (Gbit/s)",
                    "R^2", "max |err|")]
        for rate in table["rates"]:
            for codec in table["codecs"]:
                method = table["method"].get((rate, codec), "")
                f = fits.get((rate, codec), "not run")
                if isinstance(f, str):
                    out.append("%-8s %-10s %-9s no fit: %s" % (rate, method, codec, f))
                    continue
                r = f[1]
                note = ""
                if r.alpha_pinned:
                    note = ("  (alpha fixed at 0: the free fit gave %.4g +- %.3g us, clearly < 0, "
                            "as on token-bucket links)" % (r.alpha_free_us, r.alpha_free_se_us))
                elif r.alpha_unresolved:
                    note = "  (alpha not resolved: < 0, 0 within its 95 % interval)"
                out.append("%-8s %-10s %-9s %6d  %-22s %-24s %-20s %-9s %s%s" % (
                    rate, method, codec, r.points, "%.4g +- %.3g" % (r.alpha_us, r.alpha_se_us),
                    "%.5g +- %.2g" % (r.bw_Bps / 1e9, r.bw_se_Bps / 1e9),
                    "%.4g +- %.2g" % (r.bw_Bps * 8 / 1e9, r.bw_se_Bps * 8 / 1e9),
                    "%.5f" % r.r2, "%.1f %%" % r.max_abs_err_pct, note))
    out += ["", "busbw (GB/s) per size; - = failed:",
            "%-8s %-9s %4s" % ("rate", "codec", "N") +
            "".join(" %9s" % size_label(b) for b in table["sizes"])]
    cell = {(r["rate"], r["codec"], r["n"], r["bytes"]): r for r in rows}
    for rate in table["rates"]:
        for codec in table["codecs"]:
            for n in table["ns"]:
                line = "%-8s %-9s %4d" % (rate, codec, n)
                for b in table["sizes"]:
                    r = cell.get((rate, codec, n, b))
                    line += " %9s" % (r["busbw_GBps"] if r and r["status"] == "ok" else "-")
                out.append(line)
    out.append("(timings on a shared machine are noisy; N peers share this host's CPUs)")
    return out


def report(out, fit=True, plots=True, elapsed=None, links=None):
    """Writes fits.csv, predictions.csv, fit-RATE-CODEC.txt (unless not
    fit), summary.txt and the PNGs; prints the summary and the files.
    Returns 0, or 1 when a plot could not be drawn (a fit that cannot be
    made is reported, and does not change the status)."""
    table, lines = read_results(out)
    fits = fit_all(out, table, lines) if fit else None
    text = summary(table, fits, elapsed, links)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(text) + "\n")
    rc = 0
    pngs = []
    if plots:
        pngs, rc = charts.draw_all(lambda: _plots(out, table, fits or {}))
    print()
    print("\n".join(text))
    print()
    print("files written in %s:" % out)
    for f in ["results.csv", "fits.csv", "predictions.csv", "summary.txt", "analyze.sh",
              "lab.log"] + pngs:
        if os.path.exists(os.path.join(out, f)):
            print("  %s" % os.path.join(out, f))
    if fit:
        print("  %s/fit-RATE-CODEC.txt (the fits' reports)" % out)
    k = len(table["rows"])
    print("  %s/runs/ (%d run%s: command, rank0.out, rankI.err)" % (out, k, "" if k == 1 else "s"))
    return rc


def _plots(out, table, fits):
    import numpy as np

    rows = table["rows"]
    ok = [r for r in rows if r["status"] == "ok"]
    method = next(iter(table["method"].values()), "")
    sizes = sorted(table["sizes"])
    pngs = []
    for rate in table["rates"]:
        for n in table["ns"]:
            got = [r for r in ok if r["rate"] == rate and r["n"] == n]
            if not got:
                continue
            fig, ax = charts.figure()
            for codec in table["codecs"]:
                v = {r["bytes"]: number_or_none(r["busbw_GBps"])
                     for r in got if r["codec"] == codec}
                ax.plot(sizes, [v.get(b) if v.get(b) is not None else float("nan") for b in sizes],
                        marker="o", linewidth=2, label=codec)
            if rate_bits(rate):
                ax.axhline(rate_bits(rate) / 8e9, linestyle="--", color="0.4",
                           label="link rate %s" % rate)
            ax.set_xscale("log", base=2)
            ax.set_xticks(sizes)
            ax.set_xticklabels([size_label(b) for b in sizes])
            ax.minorticks_off()
            ax.set_xlim(sizes[0] / 1.5, sizes[-1] * 1.5)
            ax.set_ylim(bottom=0)
            ax.set_xlabel("buffer size (bytes)")
            ax.set_ylabel("busbw (GB/s, user fp32 bytes)")
            name = "busbw-%s-n%d.png" % (rate, n)
            charts.save(fig, os.path.join(out, name),
                        "busbw vs buffer size - %d peers, link %s (%s)" % (n, rate, method))
            pngs.append(name)
    vs_n = [b for b in VS_N_SIZES if b in sizes]
    for b in sorted(sizes, reverse=True):
        if len(vs_n) < 2 and b not in vs_n:
            vs_n.append(b)
    vs_n.sort()
    ns = sorted(table["ns"])
    for rate in table["rates"]:
        for codec in table["codecs"]:
            f = fits.get((rate, codec), "not run")
            fig, ax = charts.figure()
            drawn = False
            for i, b in enumerate(vs_n):
                got = sorted((r["n"], number_or_none(r["time_us"])) for r in ok
                             if r["rate"] == rate and r["codec"] == codec and r["bytes"] == b)
                got = [(n, t / 1000) for n, t in got if t is not None]
                if not got:
                    continue
                drawn = True
                ax.plot([g[0] for g in got], [g[1] for g in got], "o", markersize=7,
                        color="C%d" % i, label="%s measured" % size_label(b))
                if not isinstance(f, str):
                    x = np.linspace(max(2.0, ns[0] - 0.5), ns[-1] + 0.5, 200)
                    ax.plot(x, alphabeta.predict(f[1].alpha_us, f[1].slope, x, b) / 1000,
                            linewidth=2, color="C%d" % i, label="%s model" % size_label(b))
            if not drawn:
                charts.pyplot().close(fig)
                continue
            ax.set_xlim(ns[0] - 0.5, ns[-1] + 0.5)
            ax.set_xticks(range(ns[0], ns[-1] + 1))
            ax.set_ylim(bottom=0)
            ax.set_xlabel("peers N")
            ax.set_ylabel("time per allreduce (ms)")
            name = "time-vs-n-%s-%s.png" % (rate, codec.replace("+", "-"))
            charts.save(fig, os.path.join(out, name),
                        "time per allreduce vs N - %s, link %s (%s); %s"
                        % (codec, rate, method, model_title(f)))
            pngs.append(name)
    return pngs
