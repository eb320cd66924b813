"""The command line of ring-analyze: parses the subcommand's options, runs
it, and turns every failure into one sentence and an exit status (see
manual.py). numpy and matplotlib are imported by the subcommands that need
them, so sweep-run (once per run of a sweep) starts fast."""

import argparse
import os
import sys

from . import manual
from .readers import DataError, NoRows

PROG = "ring-analyze"


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _parser():
    p = Parser(prog=PROG, add_help=False)
    sub = p.add_subparsers(dest="cmd")

    def cmd(name):
        c = sub.add_parser(name, add_help=False)
        c.add_argument("-h", "--help", action="store_true")
        return c

    c = cmd("fit")
    c.add_argument("-w", "--where", action="append", default=[])
    c.add_argument("-p", "--predictions", action="store_true")
    c.add_argument("--csv", action="store_true")
    c.add_argument("--nonneg-alpha", action="store_true")
    c.add_argument("file", nargs="?", default="-")
    c = cmd("exp")
    c.add_argument("out")
    c.add_argument("--target")
    c.add_argument("--model")
    c.add_argument("--epochs")
    c.add_argument("--seed")
    c.add_argument("--elapsed")
    c.add_argument("--no-plots", action="store_true")
    c = cmd("exp-run")
    c.add_argument("rundir")
    c.add_argument("--target")
    c = cmd("saturation")
    c.add_argument("out")
    c.add_argument("--rate")
    c.add_argument("--method", choices=("tc", "ratelimit"))
    c.add_argument("--mtu", type=int, default=1500)
    c.add_argument("--batch", type=int, default=64)
    c.add_argument("--no-plots", action="store_true")
    c.add_argument("--progress", choices=("model", "last"))
    c.add_argument("--elapsed")
    c = cmd("sweep")
    c.add_argument("out")
    c.add_argument("--no-fit", action="store_true")
    c.add_argument("--no-plots", action="store_true")
    c.add_argument("--elapsed")
    c.add_argument("--links")
    c = cmd("sweep-run")
    c.add_argument("rundir")
    return p


def _need(args, *names):
    for n in names:
        if getattr(args, n) is None:
            raise UsageError("%s needs --%s" % (args.cmd, n))


def _target(text):
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 < v <= 1:
        raise UsageError("--target: '%s' is not an accuracy in (0,1] (e.g. 0.85)" % text)
    return text


def _dir(path):
    if not os.path.isdir(path):
        raise UsageError("no directory %s" % path)
    return path


def cmd_fit(args):
    from . import alphabeta

    filters = []
    for w in args.where:
        col, eq, val = w.partition("=")
        if not eq or not col:
            raise UsageError("--where '%s': expected COLUMN=VALUE (e.g. codec=none)" % w)
        filters.append((col, val))
    if args.file == "-" and sys.stdin.isatty():
        raise UsageError("no input: give a CSV file, or pipe one in")
    name = "(standard input)" if args.file == "-" else args.file
    try:
        pts, rows = alphabeta.select_points_file(args.file, filters)
    except NoRows as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 1  # a valid table that selects nothing is a data problem, not bad usage
    except DataError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 2
    try:
        r = (alphabeta.fit_nonneg if args.nonneg_alpha else alphabeta.fit)(pts)
    except alphabeta.FitError as e:
        print("%s: %s: cannot fit: %s" % (PROG, name, e), file=sys.stderr)
        return 1
    if args.csv:
        sys.stdout.write(alphabeta.report_csv(pts, r, args.predictions))
    else:
        sys.stdout.write(alphabeta.report_text(pts, r, args.predictions, rows))
    return 0


def cmd_exp(args):
    from . import exp_report

    _need(args, "target")
    return exp_report.report(_dir(args.out), _target(args.target), args.model, args.epochs,
                             args.seed, args.elapsed, not args.no_plots)


def cmd_exp_run(args):
    from . import exp_report

    _need(args, "target")
    s = exp_report.run_stats(_dir(args.rundir))
    print(exp_report.progress_text(s, _target(args.target)))
    return 0


def cmd_saturation(args):
    from . import saturation_report as sat

    _need(args, "rate", "method")
    if sat.rate_bytes_per_s(args.rate) is None:
        raise UsageError("--rate '%s' is not a rate like 1gbit or 500mbit" % args.rate)
    if args.progress:
        print(sat.progress(_dir(args.out), args.method, args.rate, args.mtu, args.batch,
                           args.progress, args.elapsed))
        return 0
    return sat.report(_dir(args.out), args.method, args.rate, args.mtu, args.batch,
                      not args.no_plots)


def cmd_sweep(args):
    from . import sweep_report

    return sweep_report.report(_dir(args.out), not args.no_fit, not args.no_plots, args.elapsed,
                               args.links)


def cmd_sweep_run(args):
    from .readers import bench_rows

    try:
        got = bench_rows(os.path.join(args.rundir, "rank0.out"))
    except DataError:
        return 1
    if not got:
        return 1
    r = got[0]
    vals = [r.get(k, "") for k in ("bytes", "time_us", "algbw_GBps", "busbw_GBps", "wrong")]
    print(" ".join(v or "-" for v in vals))
    try:
        print("busbw %.4f GB/s, %.2f ms" % (float(vals[3]), float(vals[1]) / 1000))
    except ValueError:
        print("busbw %s GB/s, %s us" % (vals[3], vals[1]))
    return 0


COMMANDS = {"fit": cmd_fit, "exp": cmd_exp, "exp-run": cmd_exp_run, "saturation": cmd_saturation,
            "sweep": cmd_sweep, "sweep-run": cmd_sweep_run}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(manual.text())
        return 0
    if not argv:
        print("%s: which subcommand? (fit, exp, exp-run, saturation, sweep, sweep-run)\n"
              "Try '%s --help'." % (PROG, PROG), file=sys.stderr)
        return 2
    try:
        args = _parser().parse_args(argv)
        if args.help:
            sys.stdout.write(manual.text(args.cmd))
            return 0
        return COMMANDS[args.cmd](args)
    except UsageError as e:
        sub = " %s" % argv[0] if argv[0] in COMMANDS else ""
        print("%s: %s\nTry '%s%s --help'." % (PROG, e, PROG, sub), file=sys.stderr)
        return 2
    except DataError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 2
    except ImportError as e:
        print("%s: %s cannot import %s: install python3-numpy python3-matplotlib (Debian), or set "
              "RING_PYTHON to a Python 3 that has them" % (PROG, sys.executable, e.name),
              file=sys.stderr)
        return 3
    except OSError as e:
        print("%s: %s%s" % (PROG, e.strerror or e, ": %s" % e.filename if e.filename else ""),
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
