"""ring-exp saturation: training throughput against the number of peers on
capped links, measured and predicted by the alpha-beta model, with the
saturation point. Reads what tools/experiments/ring-exp-saturation left in OUT:
plan.csv (params,compute_ms,codec,n,status,run), runs/RUN/m.jsonl (rank 0's
metrics) and runs/alpha/out.txt (the 4 KiB ring-bench that measures alpha)."""

import os
import re

from . import alphabeta, charts
from .readers import DataError, bench_rows, number_field, read_csv, read_jsonl, whole

WARMUP = 2  # steps left out of the mean step time
GAIN = 1.05  # a peer "pays" while it adds 5 % to samples/s
DEFAULT_ALPHA_S = 1e-4


def rate_bytes_per_s(text):
    """A tc rate ('1gbit', '500mbit', '100mbps', a bare number of bytes/s)
    in bytes/s, or None when it is not one."""
    m = re.match(r"^([0-9]+\.?[0-9]*|\.[0-9]+)(gbit|mbit|kbit|gbps|mbps|kbps|bit|bps)?$",
                 text.strip().lower())
    if not m:
        return None
    scale = {"gbit": 1e9 / 8, "mbit": 1e6 / 8, "kbit": 1e3 / 8, "bit": 1 / 8, "gbps": 1e9,
             "mbps": 1e6, "kbps": 1e3, "bps": 1, None: 1}[m.group(2)]
    v = float(m.group(1)) * scale
    return v if v > 0 else None


def params_count(text):
    """'25M' -> 25e6 (decimal, as --params means)."""
    m = re.match(r"^([0-9]+)([KMG]?)$", text)
    if not m:
        raise DataError("params '%s' is not a size like 25M" % text)
    return int(m.group(1)) * {"": 1, "K": 10**3, "M": 10**6, "G": 10**9}[m.group(2)]


def model_params(out, method, rate, mtu):
    """(alpha in s, B in bytes/s, a note): alpha is half the 4 KiB allreduce
    time on 2 peers (2(N-1) = 2 steps); B the link's payload rate: tbf counts
    headers too (TCP/IP's 52 bytes with timestamps and Ethernet's 14: 1448 of
    every 1514 bytes are payload at MTU 1500)."""
    note = ""
    alpha = None
    path = os.path.join(out, "runs", "alpha", "out.txt")
    try:
        for row in bench_rows(path):
            if row.get("bytes") == "4096" and row.get("time_us"):
                alpha = float("%.6f" % (float(row["time_us"]) / 1e6 / 2))
                break
    except (DataError, ValueError):
        pass
    if alpha is None:
        alpha = DEFAULT_ALPHA_S
        note = (" (could not measure the per-step latency, see %s; taking 100 us)"
                % os.path.dirname(path))
    r = rate_bytes_per_s(rate)
    if r is None:
        raise DataError("--rate '%s' is not a rate like 1gbit or 500mbit" % rate)
    bw = float("%.0f" % (r * (mtu - 52) / (mtu + 14) if method == "tc" else r))
    return alpha, bw, note


def mean_step_s(path):
    """The mean step time after the warm-up steps in rank 0's metrics, or None."""
    t0 = t1 = None
    cnt = 0
    for line, rec in read_jsonl(path):
        if rec.get("type") != "step":
            continue
        s = number_field(rec, "step", path, line)
        t = number_field(rec, "time", path, line)
        if s == WARMUP:
            t0 = t
        elif s > WARMUP:
            t1 = t
            cnt += 1
    if t0 is None or cnt == 0:
        return None
    return float("%.6f" % ((t1 - t0) / cnt))


def rows(out, alpha, bw, batch):
    """The table: one dict per plan row, with step_s, samples_per_s, speedup,
    ideal, model_speedup (None where unknown) and status. speedup = N x
    step(1) / step(N); the model's step(N) = step(1) + the alpha-beta time
    of an allreduce of the gradient (4 bytes a parameter, 2 with fp16/bf16)."""
    plan = read_csv(os.path.join(out, "plan.csv"))
    table, step1 = [], {}
    for line, p in plan.records("params", "compute_ms", "codec", "n", "status", "run"):
        n = whole(p["n"], plan.name, line, "n")
        whole(p["compute_ms"], plan.name, line, "compute_ms")  # sorted as a number below
        step = None
        try:
            step = mean_step_s(os.path.join(out, "runs", p["run"], "m.jsonl"))
        except DataError as e:
            p["why"] = str(e)
        status = p["status"]
        if status == "ok" and step is None:
            status = "no steps in the metrics"
        key = (p["params"], p["compute_ms"], p["codec"])
        if n == 1:
            step1[key] = step if status == "ok" else None
        row = dict(p, n=n, status=status, step_s=None, samples_per_s=None, speedup=None,
                   model_speedup=None)
        s1 = step1.get(key)
        if status == "ok" and s1:
            nbytes = params_count(p["params"]) * (4 if p["codec"] == "none" else 2)
            comm = alphabeta.predict(alpha * 1e6, 1e6 / bw, n, nbytes) / 1e6
            row.update(step_s=step, samples_per_s=n * batch / step, speedup=s1 / step * n,
                       model_speedup=n * s1 / (s1 + comm))
        table.append(row)
    return table


def csv_line(r, method, rate):
    def f(v, fmt):
        return "" if v is None else fmt % v

    return ",".join([method, rate, r["params"], r["compute_ms"], r["codec"], "%d" % r["n"],
                     f(r["step_s"], "%.4f"), f(r["samples_per_s"], "%.1f"), f(r["speedup"], "%.3f"),
                     "%d" % r["n"], f(r["model_speedup"], "%.3f"), r["status"]])


def saturation_points(table):
    """{(params, compute, codec): N}: the last N that still gained 5 % in
    samples/s over N-1 (1 when none did; '>max' when the last one did)."""
    sps, mx = {}, {}
    for r in table:
        if r["samples_per_s"] is None:
            continue
        key = (r["params"], r["compute_ms"], r["codec"])
        sps[key, r["n"]] = float("%.1f" % r["samples_per_s"])
        mx[key] = max(mx.get(key, 0), r["n"])
    out = {}
    for key, top in mx.items():
        sat = 1
        for n in range(2, top + 1):
            if (key, n) in sps and (key, n - 1) in sps and sps[key, n] >= GAIN * sps[key, n - 1]:
                sat = n
        out[key] = ">%d" % top if sat == top else "%d" % sat
    return out


def columns(lines):
    """CSV lines as a table with aligned columns, two spaces apart."""
    cells = [l.split(",") for l in lines]
    width = [max(len(c[i]) for c in cells if i < len(c)) for i in range(max(map(len, cells)))]
    return ["  ".join(c.ljust(width[i]) for i, c in enumerate(row)).rstrip() for row in cells]


def progress(out, method, rate, mtu, batch, what, elapsed):
    """One line for the driver: the model's parameters ('model') or the
    last run's figures ('last')."""
    alpha, bw, note = model_params(out, method, rate, mtu)
    if what == "model":
        return "alpha-beta model: a = %.1f us, B = %.1f MB/s%s" % (alpha * 1e6, bw / 1e6, note)
    table = rows(out, alpha, bw, batch)
    if not table:
        raise DataError("%s/plan.csv has no runs" % out)
    r = table[-1]

    def f(v, fmt):
        return "-" if v is None else fmt % v

    return "%s samples/s, speedup %s (model %s) [%s%s]" % (
        f(r["samples_per_s"], "%.1f"), f(r["speedup"], "%.3f"), f(r["model_speedup"], "%.3f"),
        r["status"], ", %s s" % elapsed if elapsed is not None else "")


def report(out, method, rate, mtu, batch, plots=True):
    """Writes saturation.csv, points.csv, summary.txt and the speedup PNGs;
    prints the summary. Returns 0, or 1 when a run failed or a plot could
    not be drawn."""
    alpha, bw, note = model_params(out, method, rate, mtu)
    table = rows(out, alpha, bw, batch)
    csv = ["method,rate,params,compute_ms,codec,n,step_s,samples_per_s,speedup,ideal,"
           "model_speedup,status"] + [csv_line(r, method, rate) for r in table]
    with open(os.path.join(out, "saturation.csv"), "w") as f:
        f.write("\n".join(csv) + "\n")
    sat = saturation_points(table)
    points = ["params,compute_ms,codec,saturation_n"] + [
        "%s,%s,%s,%s" % (k + (sat[k],)) for k in sorted(sat, key=lambda k: (k[0], int(k[1]), k[2]))]
    with open(os.path.join(out, "points.csv"), "w") as f:
        f.write("\n".join(points) + "\n")
    lines = ["# ring-exp saturation: %s caps at %s, a = %.6f s, B = %.0f B/s, batch %d per peer%s"
             % (method, rate, alpha, bw, batch, note),
             "# speedup = N x step(1) / step(N) (ideal N); model = the alpha-beta prediction"]
    lines += columns(csv)
    lines += ["", "# saturation point: beyond it, no added peer gains 5 % (>max: the last one "
              "still did)"] + columns(points)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    rc = 1 if any(r["status"] != "ok" for r in table) else 0
    for r in table:
        if "why" in r:
            print("ring-analyze: %s" % r["why"])
    if plots:
        pngs, failed = charts.draw_all(lambda: _plots(out, table, sat, method, rate))
        if pngs:
            print("plots: %s" % " ".join(pngs))
        rc = rc or failed
    print("files: %s" % ", ".join(os.path.join(out, f) for f in
                                  ("saturation.csv", "points.csv", "summary.txt")))
    return rc


def _plots(out, table, sat, method, rate):
    pngs = []
    max_n = max((r["n"] for r in table), default=1)
    for params in dict.fromkeys(r["params"] for r in table):
        for cms in dict.fromkeys(r["compute_ms"] for r in table if r["params"] == params):
            fig, ax = charts.figure()
            ax.plot([1, max_n], [1, max_n], linestyle="--", color="0.6", label="ideal (N)")
            mine = [r for r in table if r["params"] == params and r["compute_ms"] == cms]
            for i, codec in enumerate(dict.fromkeys(r["codec"] for r in mine)):
                color = "C%d" % i
                got = [r for r in mine if r["codec"] == codec and r["speedup"] is not None]
                ax.plot([r["n"] for r in got], [r["speedup"] for r in got], marker="o",
                        linewidth=2, color=color, label="measured %s" % codec)
                ax.plot([r["n"] for r in got], [r["model_speedup"] for r in got], linestyle=":",
                        linewidth=2, color=color, label="model %s" % codec)
                k = sat.get((params, cms, codec), "")
                at = [r["speedup"] for r in got if k.isdigit() and r["n"] == int(k)]
                if at:
                    ax.plot([int(k)], at, marker="o", markersize=16, fillstyle="none",
                            linestyle="none", color=color, label="saturation %s: N=%s" % (codec, k))
            ax.set_xlim(1, max_n)
            ax.set_xlabel("peers N")
            ax.set_ylabel("speedup over one peer (samples/s)")
            name = "speedup-%s-%sms.png" % (params, cms)
            charts.save(fig, os.path.join(out, name),
                        "params %s, compute %s ms/step, %s links (%s); o = saturation point"
                        % (params, cms, rate, method))
            pngs.append(name)
    return pngs
