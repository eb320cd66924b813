#!/usr/bin/env bash
# daemon-transports.sh - the training daemon on N peers of this host over each
# transport: samples/s of ringd (fmnist-mlp by default) with RING_TRANSPORT=tcp
# and =shm, in interleaved rounds so that machine noise hits both alike.
#
#   tools/compare/daemon-transports.sh BUILD_DIR
#
# Prints one line per run and each round's ratio shm / tcp (its two runs are
# back to back), then per transport the median samples/s, the ratio of the
# medians, and the median and range of the rounds' ratios. Every run is under
# `timeout`.
# Environment: N (peers, default 4), REPS (rounds, default 3), EPOCHS (default
# 1), WORKLOAD (default fmnist-mlp), CODEC (default: ringd's), ALGO (--algo,
# default auto), RUN_TIMEOUT (seconds per run, default 600), DEVICE_MS (ringd's
# --device-ms: each step lasts at least this long, as on an accelerator, so the
# cores are not all the trainers'; default 0, CPU-bound).
set -euo pipefail
b=${1:?usage: $0 BUILD_DIR}
n=${N:-4}
reps=${REPS:-3}
epochs=${EPOCHS:-1}
workload=${WORKLOAD:-fmnist-mlp}
algo=${ALGO:-auto}
run_timeout=${RUN_TIMEOUT:-600}
device_ms=${DEVICE_MS:-0}
codec_args=()
[ -n "${CODEC:-}" ] && codec_args=(--codec "$CODEC")
w=$(mktemp -d "${TMPDIR:-/tmp}/transports.XXXXXX")
trap 'rm -rf "$w"' EXIT
declare -A last # this round's samples/s per transport

summary_sps() { sed -n 's/.*samples\/s *\([0-9.]*\).*/\1/p' "$1" | tail -1; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

echo "# $workload, $n peers on this host, $epochs epoch(s), --device-ms $device_ms, --algo $algo ${CODEC:+--codec $CODEC}"
echo "# $(getconf _NPROCESSORS_ONLN) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$reps"); do
    # alternate which transport goes first
    if [ $((r % 2)) = 1 ]; then order="tcp shm"; else order="shm tcp"; fi
    for t in $order; do
        out="$w/$t-$r.out"
        if ! RING_TRANSPORT=$t RING_ALGO=$algo timeout -k 5 "$run_timeout" \
            "$b/ring-launch" -n "$n" -- "$b/ringd" --workload "$workload" --epochs "$epochs" \
            --eval-every 0 --device-ms "$device_ms" "${codec_args[@]}" > "$out" 2>&1; then
            echo "round $r $t: failed (see below)" >&2
            tail -5 "$out" >&2
            exit 1
        fi
        sps=$(summary_sps "$out")
        echo "round $r $t: ${sps:-?} samples/s"
        echo "${sps:-0}" >> "$w/$t.sps"
        last[$t]=${sps:-0}
    done
    # the round's own ratio: its two runs are back to back, so a machine whose
    # speed drifts between rounds moves both alike
    awk -v a="${last[shm]}" -v b="${last[tcp]}" 'BEGIN { if (b > 0) printf "%.4f\n", a / b }' >> "$w/ratio"
    echo "round $r shm / tcp: $(tail -n 1 "$w/ratio")"
done
tcp=$(median < "$w/tcp.sps")
shm=$(median < "$w/shm.sps")
echo "median samples/s: tcp $tcp, shm $shm"
awk -v a="$shm" -v b="$tcp" 'BEGIN { if (b > 0) printf "shm / tcp: %.2fx (of the medians)\n", a / b }'
echo "shm / tcp: $(median < "$w/ratio" | awk '{ printf "%.2f", $1 }')x (median of the rounds' ratios; range $(sort -g "$w/ratio" | sed -n '1p;$p' | awk '{ printf "%s%.2f", (NR > 1 ? ".." : ""), $1 }'))"
