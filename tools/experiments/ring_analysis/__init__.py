"""ring_analysis - reading, fitting, tables and plots for ringd's experiments.

The bash drivers (tools/experiments/ring-exp, tools/experiments/ring-exp-saturation, tools/experiments/ring-sweep)
run the experiments; everything that reads what the runs wrote and turns it
into CSV tables, summaries and PNG plots is here, behind one command,
tools/experiments/ring-analyze (`ring-analyze --help` is the manual).

  readers.py            CSV and JSON-lines input: one reader each, errors name
                        the file and line
  alphabeta.py          the alpha-beta model of the ring allreduce and its fit
  charts.py             matplotlib (Agg) helpers shared by the plots
  exp_report.py         ring-exp: sync vs stale
  repeats.py            medians and ranges over repeated runs (ring-exp --repeats)
  saturation_report.py  ring-exp saturation: throughput vs peers
  sweep_report.py       ring-sweep: busbw and time vs size, codec, N, rate
  cli.py                the command line and its manual
"""
