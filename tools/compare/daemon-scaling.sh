#!/usr/bin/env bash
# daemon-scaling.sh - how ringd scales from 1 to 2 peers on this machine,
# and whether its communication time matches ring-bench's.
#
#   tools/compare/daemon-scaling.sh BUILD_DIR
#
# 1. fmnist-mlp, 1 peer vs 2 peers with the same per-peer batch: samples/s
#    and the share of step time spent communicating (from the metrics files).
# 2. synthetic with 25M parameters on 2 peers: the gradient allreduce's mean
#    time per step (metrics comm_s) next to ring-bench's time for the same
#    buffer (100 MB of fp32, codec fp16) and N, measured in the same run.
# Environment: STEPS (synthetic steps, default 20), REPS (interleaved rounds
# of the synthetic comparison, default 3), EPOCHS (mlp, default 2), CODEC
# (default fp16).
set -euo pipefail
b=${1:?usage: $0 BUILD_DIR}
steps=${STEPS:-20}
reps=${REPS:-3}
epochs=${EPOCHS:-2}
codec=${CODEC:-fp16}
w=$(mktemp -d "${TMPDIR:-/tmp}/scaling.XXXXXX")
trap 'rm -rf "$w"' EXIT

# mean of a metrics field over the step lines of files (skipping the first 2 steps)
field_mean() {
    local f=$1
    shift
    grep -h '"type":"step"' "$@" | awk -v f="\"$f\":" '
        { i = index($0, f); if (!i) next; v = substr($0, i + length(f)) + 0;
          split($0, a, "\"step\":"); if (a[2] + 0 <= 2) next; s += v; n++ }
        END { printf "%.6f", n ? s / n : 0 }'
}
summary_sps() { sed -n 's/.*samples\/s *\([0-9]*\).*/\1/p' "$1" | tail -1; }

echo "== fmnist-mlp, $epochs epochs, batch 64 per peer, codec $codec"
"$b/ringd" --workload fmnist-mlp --epochs "$epochs" --eval-every 0 --codec "$codec" \
    --metrics "$w/mlp1.jsonl" > "$w/mlp1.out"
"$b/ring-launch" -n 2 -- "$b/ringd" --workload fmnist-mlp --epochs "$epochs" --eval-every 0 \
    --codec "$codec" --metrics "$w/mlp2-{rank}.jsonl" > "$w/mlp2.out"
s1=$(summary_sps "$w/mlp1.out")
s2=$(summary_sps "$w/mlp2.out")
for n in 1 2; do
    files=("$w/mlp1.jsonl")
    [ $n = 2 ] && files=("$w"/mlp2-*.jsonl)
    c=$(field_mean compute_s "${files[@]}")
    a=$(field_mean wait_s "${files[@]}")
    m=$(field_mean comm_s "${files[@]}")
    awk -v n=$n -v c="$c" -v a="$a" -v m="$m" 'BEGIN {
        t = c + a + m; printf "  %d peer%s: step %.2f ms = compute %.2f + wait %.2f + gradient allreduce %.2f ms (communication %.0f%%, with wait %.0f%%)\n",
        n, (n > 1 ? "s" : " "), 1e3 * t, 1e3 * c, 1e3 * a, 1e3 * m, 100 * m / t, 100 * (m + a) / t }'
done
awk -v a="$s1" -v b="$s2" 'BEGIN { printf "  samples/s: 1 peer %d, 2 peers %d: speed-up %.2fx\n", a, b, b / a }'

echo "== synthetic, 25M parameters, $steps steps, 2 peers, codec $codec, $reps interleaved rounds"
# ringd's gradient allreduce is in place: so is ring-bench's here
for rep in $(seq 1 "$reps"); do
    "$b/ring-launch" -n 2 -- "$b/ringd" --workload synthetic --params 25M --max-steps "$steps" \
        --codec "$codec" --metrics "$w/syn$rep-{rank}.jsonl" > "$w/syn.out"
    c=$(field_mean compute_s "$w"/syn$rep-*.jsonl)
    a=$(field_mean wait_s "$w"/syn$rep-*.jsonl)
    m=$(field_mean comm_s "$w"/syn$rep-*.jsonl)
    "$b/ring-launch" -n 2 -- "$b/ring-bench" -b 100000000 -e 100000000 -n "$steps" -w 2 \
        --inplace --codec "$codec" > "$w/bench.out"
    bt=$(awk '/^\[0\] +[0-9]/ { print $5 / 1e6 }' "$w/bench.out" | tail -1)
    awk -v c="$c" -v a="$a" -v m="$m" -v bt="$bt" -v rep="$rep" 'BEGIN {
        t = c + a + m
        printf "  round %d: step %.1f ms = compute %.1f + wait %.1f + gradient allreduce %.1f ms (communication %.0f%%); ring-bench %.1f ms; ringd / ring-bench = %.2f\n",
            rep, 1e3 * t, 1e3 * c, 1e3 * a, 1e3 * m, 100 * m / t, 1e3 * bt, m / bt }'
done | tee "$w/rounds"
sed -n 's/.*= \([0-9.]*\)$/\1/p' "$w/rounds" | sort -n |
    awk '{ v[NR] = $1 } END { printf "  median ringd / ring-bench over %d rounds: %.2f\n", NR, v[int((NR + 1) / 2)] }'
