#!/usr/bin/env bash
# tf-compare.sh - TensorFlow training on ringd against TensorFlow's own
# MultiWorkerMirroredStrategy: the same workers, started the same way (each with its
# TF_CONFIG), the same model, per-worker batch, data shards and optimizer
# (tools/compare/tf_worker.py), interleaved round by round.
set -u

usage() {
    cat << 'EOF'
Usage: tools/compare/tf-compare.sh [--help] [BUILD_DIR]

Runs tools/compare/tf_worker.py on N workers, REPS rounds in a rotating order of:
  mwms         tf.distribute.MultiWorkerMirroredStrategy (RING collectives over gRPC)
  ringd-fp32   ringd.tensorflow.DistributedGradientTape, fp32 on the wire
  ringd-fp16   the same, fp16 on the wire
and prints each run's samples/s (all workers), the medians and the ratios
ringd-fp32 / mwms and ringd-fp16 / mwms.

On loopback by default (every worker on 127.0.0.1). RATE=1gbit (or any tc rate) puts
each worker on its own host of a namespace lab (tools/lab/netns-lab.sh; needs root),
every link capped both ways.

Environment: MODEL (mlp: Fashion-MNIST's 784-256-128-10; wide: 784-W-W-W-10),
WIDTH (3584: 28.5M parameters), N (4), BATCH (64 per worker), STEPS (200 timed),
WARMUP (20), REPS (3), RATE (unset: loopback), OUT (/tmp/ringd-tf-compare),
PYTHON (a Python with tensorflow: default the venv python-tensorflow.test keeps,
~/.cache/ringd/venv-tf-2.21.0-py3.11/bin/python). BUILD_DIR holds the build whose
python/ has the ringd package (default ./_build/dev, else .).
EOF
}
[ "${1:-}" = --help ] || [ "${1:-}" = -h ] && { usage; exit 0; }
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
BUILD=${1:-}
[ -n "$BUILD" ] || { [ -d "$TOP/_build/dev/python/ringd" ] && BUILD=$TOP/_build/dev || BUILD=.; }
BUILD=$(cd "$BUILD" && pwd)
MODEL=${MODEL:-mlp}
WIDTH=${WIDTH:-3584}
N=${N:-4}
BATCH=${BATCH:-64}
STEPS=${STEPS:-200}
WARMUP=${WARMUP:-20}
REPS=${REPS:-3}
RATE=${RATE:-}
OUT=${OUT:-/tmp/ringd-tf-compare}
PY=${PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/ringd/venv-tf-2.21.0-py3.11/bin/python}
LAB=$HERE/../lab/netns-lab.sh
[ -d "$BUILD/python/ringd" ] || { echo "tf-compare: no ringd package in $BUILD/python (build first)" >&2; exit 2; }
"$PY" -c 'import tensorflow' 2> /dev/null ||
    { echo "tf-compare: $PY has no TensorFlow (make check's python-tensorflow.test makes that venv; or PYTHON=)" >&2; exit 2; }
mkdir -p "$OUT"
for v in $(compgen -e | grep '^RING_'); do unset "$v"; done
unset TF_CONFIG

addrs=()
if [ -n "$RATE" ]; then
    [ "$(id -u)" = 0 ] || { echo "tf-compare: RATE needs root (the namespace lab)" >&2; exit 77; }
    name=tf$$
    "$LAB" up "$N" --name "$name" > "$OUT/lab.env" || exit $?
    trap '"$LAB" down "$name" > /dev/null 2>&1' EXIT
    eval "$(cat "$OUT/lab.env")"
    "$LAB" cap "$name" "$RATE" > /dev/null || { echo "tf-compare: cannot cap the links" >&2; exit 1; }
    read -r -a addrs <<< "$NETNS_LAB_ADDRS"
else
    for i in $(seq 0 $((N - 1))); do addrs[i]=127.0.0.1; done
fi
port=$((34000 + RANDOM % 4000))

# run SYSTEM: N workers, each with its TF_CONFIG (in its lab host with RATE); prints
# rank 0's samples/s
run() {
    local sys=$1 i cluster pids=() rc=0
    port=$((port + N + 1))
    cluster=$(for i in $(seq 0 $((N - 1))); do printf '"%s:%d",' "${addrs[i]}" $((port + i)); done)
    cluster="{\"worker\": [${cluster%,}]}"
    for i in $(seq 0 $((N - 1))); do
        local cfg="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": $i}}"
        local cmd=(env TF_CONFIG="$cfg" PYTHONPATH="$BUILD/python" TF_CPP_MIN_LOG_LEVEL=2
            RING_CONNECT_TIMEOUT=120 OMP_NUM_THREADS=1 timeout 600 "$PY" "$HERE/tf_worker.py"
            --system "$sys" --model "$MODEL" --width "$WIDTH" --batch "$BATCH"
            --steps "$STEPS" --warmup "$WARMUP")
        if [ -n "$RATE" ]; then
            "$LAB" exec "$name" "$i" -- "${cmd[@]}" > "$OUT/$sys.$i.out" 2>&1 < /dev/null &
        else
            "${cmd[@]}" > "$OUT/$sys.$i.out" 2>&1 < /dev/null &
        fi
        pids[i]=$!
    done
    for i in $(seq 0 $((N - 1))); do wait "${pids[i]}" || rc=1; done
    [ $rc = 0 ] || { echo "tf-compare: a worker of $sys failed (see $OUT/$sys.*.out)" >&2; return; }
    sed -n 's/.*"samples_per_s": \([0-9.]*\).*/\1/p' "$OUT/$sys.0.out" | tail -1
}

echo "# N=$N workers, $([ -n "$RATE" ] && echo "lab links $RATE both ways" || echo loopback), model $MODEL$([ "$MODEL" = wide ] && echo " (width $WIDTH)"), batch $BATCH per worker, $STEPS steps after $WARMUP, $REPS rounds, $(getconf _NPROCESSORS_ONLN) cores, $("$PY" -c 'import tensorflow as tf; print("TensorFlow", tf.__version__)' 2> /dev/null)"
echo "round,system,samples_per_s" | tee "$OUT/runs.csv"
systems="mwms ringd-fp32 ringd-fp16"
for round in $(seq 1 "$REPS"); do
    set -- $systems
    for _ in $(seq 1 $(((round - 1) % $#))); do set -- "$@" "$1"; shift; done
    for s in "$@"; do
        res=$(run "$s")
        echo "$round,$s,${res:-nan}" | tee -a "$OUT/runs.csv"
    done
done
awk -F, 'NR > 1 && $3 != "nan" { k = $2; n[k]++; v[k, n[k]] = $3 }
    function med(k,   i, j, t, w) {
        for (i = 1; i <= n[k]; i++) w[i] = v[k, i]
        for (i = 1; i <= n[k]; i++) for (j = i + 1; j <= n[k]; j++) if (w[j] < w[i]) { t = w[i]; w[i] = w[j]; w[j] = t }
        return n[k] % 2 ? w[(n[k] + 1) / 2] : (w[n[k] / 2] + w[n[k] / 2 + 1]) / 2 }
    END {
        printf "# medians (samples/s, all workers)\n"
        for (k in n) { m[k] = med(k); printf "%-11s %10.1f\n", k, m[k] }
        if (("ringd-fp32" in n) && ("mwms" in n)) printf "ringd-fp32 / mwms: %.2f\n", m["ringd-fp32"] / m["mwms"]
        if (("ringd-fp16" in n) && ("mwms" in n)) printf "ringd-fp16 / mwms: %.2f\n", m["ringd-fp16"] / m["mwms"]
    }' "$OUT/runs.csv"
