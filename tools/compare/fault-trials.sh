#!/usr/bin/env bash
# fault-trials.sh - the failure bar, measured: TRIALS runs of N ringd peers
# training on loopback (started directly, not by ring-launch, which would stop
# the others itself), one peer SIGKILLed or SIGSTOPped at a random moment.
# Every other peer must exit non-zero within the timeout plus 3 s, naming the
# lost rank. Prints a line per trial and the totals per signal.
set -u

usage() {
    cat << 'EOF'
Usage: tools/compare/fault-trials.sh [--help] [BUILD_DIR]

BUILD_DIR holds ringd (default ./_build/dev, else .).
Environment: N (4 peers), TRIALS (20 per signal), SIGNALS ("KILL STOP"),
TIMEOUT (5: RING_TIMEOUT in seconds), OUT (/tmp/ringd-fault-trials).
Needs the Fashion-MNIST files (apt-get install dataset-fashion-mnist).
EOF
}
[ "${1:-}" = --help ] || [ "${1:-}" = -h ] && { usage; exit 0; }
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-}
[ -n "$BUILD" ] || { [ -x "$TOP/_build/dev/ringd" ] && BUILD=$TOP/_build/dev || BUILD=.; }
D=$BUILD/ringd
[ -x "$D" ] || { echo "fault-trials: no ringd in $BUILD (build first)" >&2; exit 2; }
N=${N:-4}
TRIALS=${TRIALS:-20}
SIGNALS=${SIGNALS:-KILL STOP}
TIMEOUT=${TIMEOUT:-5}
OUT=${OUT:-/tmp/ringd-fault-trials}
mkdir -p "$OUT"
for v in $(compgen -e | grep '^RING_'); do unset "$v"; done

# trial SIG K: one run; prints "ok" or "FAIL why", and the slowest survivor's seconds
trial() {
    local sig=$1 k=$2 base peers victim r t0 deadline pids=() bad="" slowest=0
    base=$((30000 + RANDOM % 20000))
    peers=$(for r in $(seq 0 $((N - 1))); do printf '127.0.0.1:%d,' $((base + r)); done)
    peers=${peers%,}
    for r in $(seq 0 $((N - 1))); do
        RING_RANK=$r RING_WORLD_SIZE=$N RING_PEERS=$peers RING_TIMEOUT=${TIMEOUT}s \
            RING_CONNECT_TIMEOUT=20 RING_SECRET=fault-trials-secret-0123 \
            env ${TRIAL_ENV:-} "$D" --workload fmnist-mlp --hidden 64 --epochs 100 --progress off \
            > "$OUT/$k-$r.out" 2> "$OUT/$k-$r.err" &
        pids[r]=$!
    done
    sleep "1.$((RANDOM % 10))"
    victim=$((RANDOM % N))
    kill -"$sig" "${pids[victim]}"
    t0=$(date +%s.%N)
    deadline=$(echo "$t0 + $TIMEOUT + 3" | bc)
    for r in $(seq 0 $((N - 1))); do
        [ "$r" = "$victim" ] && continue
        while kill -0 "${pids[r]}" 2> /dev/null && [ "$(echo "$(date +%s.%N) < $deadline" | bc)" = 1 ]; do
            sleep 0.05
        done
        if kill -0 "${pids[r]}" 2> /dev/null; then
            bad+=" rank $r still running;"
            kill -KILL "${pids[r]}" 2> /dev/null
            continue
        fi
        wait "${pids[r]}"
        local rc=$? took
        took=$(echo "$(date +%s.%N) - $t0" | bc)
        [ "$(echo "$took > $slowest" | bc)" = 1 ] && slowest=$took
        [ "$rc" != 0 ] || bad+=" rank $r exited 0;"
        grep -q "rank $victim\b" "$OUT/$k-$r.err" || bad+=" rank $r did not name rank $victim;"
    done
    kill -KILL "${pids[victim]}" 2> /dev/null
    kill -CONT "${pids[victim]}" 2> /dev/null
    wait 2> /dev/null
    if [ -z "$bad" ]; then
        printf 'ok   SIG%s trial %d: rank %d lost, the others out in %.2f s\n' "$sig" "$k" "$victim" "$slowest"
    else
        printf 'FAIL SIG%s trial %d: rank %d lost:%s\n' "$sig" "$k" "$victim" "$bad"
    fi
}

for sig in $SIGNALS; do
    good=0
    for k in $(seq 1 "$TRIALS"); do
        line=$(trial "$sig" "$k" 2> /dev/null) # not the shell's "Killed" job notices
        echo "$line"
        case $line in ok*) good=$((good + 1)) ;; esac
    done
    echo "# SIG$sig: $good/$TRIALS trials: every other peer exited non-zero within ${TIMEOUT} s + 3 s naming the lost rank"
done
