"""The manual of ring-analyze (ring-analyze --help), one section a subcommand
(ring-analyze SUBCOMMAND --help prints that section and the environment)."""

import textwrap

HEAD = """\
NAME
    ring-analyze - tables, the alpha-beta fit and plots for ringd's experiments

SYNOPSIS
    ring-analyze fit [--where COLUMN=VALUE]... [--predictions] [--csv]
                     [--nonneg-alpha] [FILE]
    ring-analyze exp OUT --target ACC [--model TEXT] [--epochs E] [--seed S]
                     [--elapsed SECS] [--no-plots]
    ring-analyze exp-run RUNDIR --target ACC
    ring-analyze saturation OUT --rate RATE --method tc|ratelimit [--mtu BYTES]
                     [--batch B] [--no-plots] [--progress model|last [--elapsed SECS]]
    ring-analyze sweep OUT [--no-fit] [--no-plots] [--elapsed SECS] [--links TEXT]
    ring-analyze sweep-run RUNDIR
    ring-analyze --which-python
    ring-analyze [SUBCOMMAND] --help

DESCRIPTION
    The analysis half of ringd's experiments. The drivers tools/experiments/ring-exp,
    tools/experiments/ring-exp saturation and tools/experiments/ring-sweep run the rings (ringd,
    ring-bench, ring-launch, netns-lab.sh) and hand what the runs wrote to
    this program, which reads it (ringd's --metrics JSON lines, ring-bench's
    --csv output, the drivers' CSV tables), fits the alpha-beta model, and
    writes the tables, the summaries and the plots (PNG, matplotlib's Agg
    backend). Each driver also writes OUT/analyze.sh, the command that
    redraws its tables and plots from OUT.

    ring-analyze is a small bash script that picks the interpreter (see
    ENVIRONMENT) and runs the Python package next to it (tools/experiments/ring_analysis,
    installed under share/ringd): the Python standard library, numpy and
    matplotlib, nothing else.

INPUT
    CSV: a header line naming the columns, then one row a line; fields
    separated by commas, optionally double-quoted ("" is a quote); blanks
    around unquoted fields are dropped; empty lines and lines starting with
    '#' are skipped; CRLF is fine. A row with another field count than the
    header's is an error naming its line.
    JSON lines (ringd --metrics): one JSON object a line; "nan" and "inf"
    (how ringd prints a diverged loss) are read as numbers. A line that is
    not a JSON object, or a record without a number it needs, is an error
    naming the file and line; only the last line of a file, when no newline
    ends it (a peer stopped while writing), is left out instead.
"""

FIT = """\
ring-analyze fit [--where COLUMN=VALUE]... [--predictions] [--csv] [--nonneg-alpha] [FILE]
    Fits the alpha-beta model of the ring allreduce to measured times:

        t = 2(N-1) alpha + 2(N-1)/N S / B

    N peers, S buffer bytes, alpha the latency of one of the 2(N-1) ring
    steps, B the link bandwidth (each peer sends 2(N-1)/N S bytes). alpha
    and 1/B are found by linear least squares weighted by 1/t^2, so every
    point counts by its relative error. Prints alpha (us) and B (GB/s =
    1e9 B/s, and Gbit/s), each with its standard error, R^2 of the weighted
    fit and the largest prediction error in %.

    FILE (default: standard input; '-' too) is a CSV table naming at least
    the columns n, bytes and time_us (time per allreduce, us); other columns
    are ignored unless --where names them. ring-sweep's results.csv is one.
    B is in the bytes of the table: for a compressed codec that is the
    user's fp32 bytes, so fp16 shows about twice the link's bandwidth.

    -w, --where COLUMN=VALUE
        use only the rows whose COLUMN is VALUE (text, exactly); repeat to
        require several
    -p, --predictions
        also print, for every row used, the model's time and its error in %
        of the measured time
    --csv
        print CSV for scripts: the header
            kind,line,n,bytes,time_us,model_us,error_pct,points,alpha_us,
            alpha_se_us,bw_GBps,bw_se_GBps,bw_Gbps,bw_se_Gbps,r2,
            max_abs_error_pct,alpha_resolved
        (one line), then one row of kind 'fit' (the columns from points on),
        then with --predictions one row of kind 'point' per input row used
        (line to error_pct). alpha_resolved is 0 when alpha came out negative
        but its 95 % confidence interval holds 0: the latency term is too
        small for the data; also when --nonneg-alpha fixed it at 0.
    --nonneg-alpha
        when alpha comes out clearly negative, fix it at 0 and fit B alone
        instead of refusing: links capped by a token bucket (--rate-limit,
        tc tbf) let a peer that waited between ring steps send ahead of the
        rate, which looks like a negative latency

    The fit needs at least 3 distinct (n, bytes) points and two values of n
    (with one n, alpha cannot be told apart from a fixed cost per call). The
    95 % interval uses Student's t for points - 2 degrees of freedom.
    Exit status: 0 fitted; 1 the data cannot be fitted (too few points, one
    n, no row selected, B <= 0 or alpha clearly < 0: the data do not follow
    the model); 2 bad usage, an unreadable file or malformed CSV (the
    message names the line).
"""

EXP = """\
ring-analyze exp OUT --target ACC [--model TEXT] [--epochs E] [--seed S] [--elapsed SECS]
                 [--no-plots]
    ring-exp's report. Reads OUT/plan.csv (run,mode,scenario,n,status and,
    optionally, repeat,seed: the runs tools/experiments/ring-exp made, mode as
    lockstep, async or bounded:S) and every run's OUT/RUN/m-RANK.jsonl and
    OUT/RUN/output.txt, and writes
        OUT/runs.csv        run, mode, staleness, scenario, n, wall_s,
                            samples_per_s, final_accuracy, time_to_target_s,
                            blocked_share, mean_tau, steps, status
        OUT/evals.csv       run, mode, scenario, time_s, step, accuracy, loss
        OUT/staleness.csv   run, tau, count
        OUT/summary.csv     per (mode, scenario) cell: repeats, ok,
                            reached_target and each figure's median, min
                            and max over the runs that succeeded
        OUT/summary.txt     the mode x scenario table (also printed)
        OUT/accuracy-SCENARIO.png, OUT/loss-SCENARIO.png, OUT/throughput.png,
        OUT/blocked.png, OUT/staleness-SCENARIO.png
    (tools/experiments/ring-exp --help says what each column and plot holds). Every bar
    of a bar chart is labelled with its value, so a bar of 0 (async never
    blocks) shows as 0; a cluster with no value at all is left out.
    When a cell has more than one run (ring-exp --repeats R), runs.csv and
    evals.csv get the columns repeat and seed, the summary is a table per
    figure giving MEDIAN [MIN..MAX] over the runs that succeeded (a run
    that never reached ACC counts as slower than any that did: the median
    is "never" when the middle run never did, and "(K/N)" says K of N
    reached it), the curves show each run thin and the median thick, and
    the bars are medians with error bars from min to max.
    --target ACC is the accuracy of "time to target"; --model, --epochs,
    --seed and --elapsed only go into the summary's first and last lines.
    A run whose metrics cannot be read is named, its figures are left
    empty, and the exit status is 1.

ring-analyze exp-run RUNDIR --target ACC
    One line of a run's figures, for ring-exp's progress line: final
    accuracy, time to ACC, samples/s, blocked share, mean staleness.
"""

SATURATION = """\
ring-analyze saturation OUT --rate RATE --method tc|ratelimit [--mtu BYTES] [--batch B]
                        [--no-plots] [--progress model|last [--elapsed SECS]]
    ring-exp saturation's report. Reads OUT/plan.csv (params,compute_ms,
    codec,n,status,run), every run's OUT/runs/RUN/m.jsonl (rank 0's
    metrics: the mean step time after 2 warm-up steps) and
    OUT/runs/alpha/out.txt (a 4 KiB ring-bench on 2 peers: alpha is half its
    time), and writes OUT/saturation.csv, OUT/points.csv, OUT/summary.txt
    and OUT/speedup-PARAMS-CMSms.png (tools/experiments/ring-exp saturation --help says
    what they hold). The model's step time is one peer's measured step plus
    the alpha-beta time of an allreduce of the gradient (4 bytes a
    parameter; 2 for fp16 and bf16), with B the link's payload rate: RATE
    (tc units: 1gbit, 500mbit, 100mbps, bytes/s), times (MTU-52)/(MTU+14)
    for --method tc (TCP/IP and Ethernet headers; --mtu, default 1500).
    --batch B (default 64) is the samples per step and peer.
    --progress model prints the model's parameters; --progress last the last
    plan row's figures (with --elapsed SECS, the run's time); both write
    nothing.
"""

SWEEP = """\
ring-analyze sweep OUT [--no-fit] [--no-plots] [--elapsed SECS] [--links TEXT]
    ring-sweep's report. Reads OUT/results.csv (rate,method,codec,n,bytes,
    time_us,algbw_GBps,busbw_GBps,wrong,status,run), fits the alpha-beta
    model per (rate, codec) to the rows with status ok and wrong 0 (as fit
    does, with --nonneg-alpha on ratelimit links), and writes
    OUT/fits.csv, OUT/predictions.csv, OUT/fit-RATE-CODEC.txt (the fit's
    report with predictions, or why there is none), OUT/summary.txt (also
    printed) and the PNGs busbw-RATE-nN.png and time-vs-n-RATE-CODEC.png
    (tools/experiments/ring-sweep --help says what they hold). A plot's title gives
    alpha only where the fit resolved it ("alpha not resolved", "alpha
    fixed at 0" otherwise). --no-fit leaves the fits out; --elapsed and
    --links (how links were capped) go into the summary's first lines.

ring-analyze sweep-run RUNDIR
    ring-bench's result in RUNDIR/rank0.out (its --csv output), for
    ring-sweep's progress: a line 'BYTES TIME_US ALGBW_GBPS BUSBW_GBPS WRONG'
    and a line 'busbw X GB/s, Y ms'. Exit status 1, and no output, when the
    file holds no result row.
"""

TAIL = """\
ENVIRONMENT
    RING_PYTHON
        the Python 3 to run (a path or a command); tried first.
    RING_PYTHON_FALLBACK
        the interpreters tried after RING_PYTHON and the one configure found
        (written into an installed ring-analyze), in order; default
        "/usr/bin/python3 python3" (Debian's own first: a python3 of pyenv or
        a venv earlier on PATH usually lacks Debian's python3-numpy).
    The first that has numpy and matplotlib runs; --which-python prints it.
    When none has them, ring-analyze names each one it tried and why it was
    passed over, says "install python3-numpy python3-matplotlib", and exits 3.

EXIT STATUS
    0    done
    1    the data cannot be fitted (fit), a run's data could not be read or
         a run failed (exp, saturation), a plot could not be drawn
    2    bad usage, or an input that cannot be read (the message names it)
    3    no Python 3 with numpy and matplotlib

EXAMPLES
    ring-analyze fit --where codec=none --where rate=1gbit --predictions results.csv
    ring-analyze sweep ring-sweep-out --no-plots
    sh ring-exp-out/analyze.sh
"""

SECTIONS = {"fit": FIT, "exp": EXP, "exp-run": EXP, "saturation": SATURATION,
            "sweep": SWEEP, "sweep-run": SWEEP}


def text(sub=None):
    if sub in SECTIONS:
        return "ring-analyze %s - see 'ring-analyze --help' for all subcommands\n\n%s\n%s" % (
            sub, SECTIONS[sub], TAIL)
    subs = "\n".join(textwrap.indent(s, "    ") for s in (FIT, EXP, SATURATION, SWEEP))
    return "%s\nSUBCOMMANDS\n%s\n%s" % (HEAD, subs, TAIL)
