#!/usr/bin/env bash
# elastic-bar.sh - issue 47's bar for ringd --elastic, measured: fmnist-mlp on 4 peers
# on this host with --elastic 2:4, RUNS runs each with one peer SIGKILLed at a random
# step (a random rank), against an uninterrupted run and against ring-launch
# --max-restarts 1 resuming from a checkpoint with the same peer killed at the same
# step; then STOP_RUNS runs with one peer SIGSTOPped. Prints a line per run, a table
# and a one-line verdict per bar:
#   accuracy   every elastic run's final test accuracy within 0.5 points of the
#              uninterrupted run's
#   SIGKILL    the survivors' lost time (from the kill to their next completed step,
#              the slowest survivor) <= 1 s
#   SIGSTOP    the same <= --timeout + 1 s
#   wall time  like for like: ring-launch --elastic 2:4 --max-restarts 1 (the survivors
#              go on, a replacement joins them: back to 4 peers) below ring-launch
#              --max-restarts 1 (every rank restarted from the checkpoint: 4 peers), the
#              same command but for --elastic, the same rank SIGKILLed at the same step
# and beside it (no bar) the elastic run without a replacement (3 peers to the end)
# against the same restart: at --batch-size 64 per peer, 3 peers make a third more
# allreduces per sample than 4, which can cost more than the restart loses
# The elastic runs signalled from outside start their peers directly (ring-launch stops
# every rank when one dies), at a file rendezvous; every process runs under `timeout`.
set -u

usage() {
    cat << 'EOF'
Usage: tools/experiments/elastic-bar.sh [OPTIONS]

  --runs N         SIGKILL runs (default 10), each against a ring-launch restart
  --stop-runs N    SIGSTOP runs (default: --runs)
  --epochs E       epochs of fmnist-mlp per run (default 5)
  --timeout S      the ring's --timeout in seconds (default 3)
  --build DIR      where ringd and ring-launch are (default ./_build/dev, else .)
  --out DIR        work directory, kept (default /tmp/ringd-elastic-bar)
  --seed N         the random kill schedule (default: from the clock)
  --extra 'ARGS'   more ringd options for every run (default '--eval-every 0')
  -h, --help       this text

The restart baseline checkpoints every epoch (ringd's default) and kills the same rank
at the same step with RING_FAULT=sigkill-at-step (ringd SIGKILLs itself there); the
elastic runs are killed from outside once the victim's metrics reach that step. Lost
time: the membership record's unix_time (the next completed step, every survivor's
metrics) minus the moment of the signal. Needs the Fashion-MNIST files
(apt-get install dataset-fashion-mnist). Exit status 0 when every bar is met, 1 if not.
EOF
}

TOP=$(cd "$(dirname "$0")/../.." && pwd)
RUNS=10 STOP_RUNS="" EPOCHS=5 TIMEOUT=3 BUILD="" OUT=/tmp/ringd-elastic-bar SEED="" EXTRA="--eval-every 0"
while [ $# -gt 0 ]; do
    case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --stop-runs) STOP_RUNS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --extra) EXTRA=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "elastic-bar: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
STOP_RUNS=${STOP_RUNS:-$RUNS}
for v in RUNS STOP_RUNS EPOCHS TIMEOUT; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "elastic-bar: --${v,,} takes a whole number" >&2; exit 2; }
done
[ -n "$BUILD" ] || { [ -x "$TOP/_build/dev/ringd" ] && BUILD=$TOP/_build/dev || BUILD=.; }
D=$BUILD/ringd
L=$BUILD/ring-launch
[ -x "$D" ] && [ -x "$L" ] || { echo "elastic-bar: no ringd and ring-launch in $BUILD (build first, or --build)" >&2; exit 2; }
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
    { echo "elastic-bar: no Fashion-MNIST (apt-get install dataset-fashion-mnist)" >&2; exit 2; }
for v in $(compgen -e | grep '^RING_'); do unset "$v"; done
RANDOM=${SEED:-$(date +%s)}
N=4
# the environment ring-launch gives each rank (BLAS threads: CPUs / ranks; the OpenBLAS
# kernels where this OpenBLAS does not know the CPU), for the peers started by hand too:
# without it they run oversubscribed or on generic kernels against a launcher that is not
CPUS=$(nproc) # before OMP_NUM_THREADS is set: nproc reads it
for v in OMP_NUM_THREADS OPENBLAS_NUM_THREADS OPENBLAS_CORETYPE; do
    val=$("$L" -n "$N" -- sh -c "[ \"\$RING_RANK\" != 0 ] || printenv $v" 2> /dev/null |
        sed -n 's/^\[0\] //p' | head -1)
    [ -n "$val" ] && export "$v=$val"
done
STEPS=$((EPOCHS * (60000 / N / 64)))      # batch 64, 4 peers: 234 steps per epoch
LIMIT=$((60 + 8 * EPOCHS + 4 * TIMEOUT)) # seconds a run may take
# shellcheck disable=SC2206
XARGS=($EXTRA)
COMMON=(--workload fmnist-mlp --epochs "$EPOCHS" --timeout "$TIMEOUT" --progress off "${XARGS[@]}")
rm -rf "$OUT"
mkdir -p "$OUT"

now() { date +%s.%N; }
acc_of() { sed -n 's/.*test accuracy  *\([0-9.]*\) %.*/\1/p' "$1" | tail -1; }
hash_of() { sed -n 's/.*"params_fnv1a64":"\([0-9a-f]*\)".*/\1/p' "$1" | tail -1; }
steps_in() { local c; c=$(grep -c '"type":"step"' "$1" 2> /dev/null); echo "${c:-0}"; }

# by_hand TAG SIG VICTIM AT [ELASTIC]: N peers started directly; SIG (KILL, STOP or none)
# to VICTIM's ringd once its metrics hold AT steps. Sets WALL, T_SIG (the signal's unix
# time), OK (every survivor exited 0 with the same parameters: 1), FIRST (the lowest
# survivor), and LOST (the slowest survivor's membership unix_time - T_SIG).
by_hand() {
    local tag=$1 sig=$2 victim=$3 at=$4 dir=$OUT/$1 r t0 p pids=() bad=0 h0="" h done_max=0 u
    shift 4
    mkdir -p "$dir/rdzv"
    t0=$(now)
    for r in $(seq 0 $((N - 1))); do
        RING_RANK=$r RING_WORLD_SIZE=$N timeout -k 5 "$LIMIT" "$D" "${COMMON[@]}" "$@" \
            --rendezvous "file://$dir/rdzv" --metrics "$dir/m-{rank}.jsonl" \
            > "$dir/out-$r" 2> "$dir/err-$r" < /dev/null &
        pids[$r]=$!
    done
    T_SIG=""
    if [ "$sig" != none ]; then
        for _ in $(seq 1 $((LIMIT * 20))); do
            [ "$(steps_in "$dir/m-$victim.jsonl")" -ge "$at" ] && break
            kill -0 "${pids[$victim]}" 2> /dev/null || break
            sleep 0.05
        done
        p=$(pgrep -P "${pids[$victim]}" | head -1)
        T_SIG=$(now)
        [ -n "$p" ] && kill -"$sig" "$p"
        disown "${pids[$victim]}" 2> /dev/null # no "Killed" line from the shell
    fi
    FIRST="" WHY=""
    for r in $(seq 0 $((N - 1))); do
        [ "$sig" != none ] && [ "$r" = "$victim" ] && continue
        if ! wait "${pids[$r]}" 2> /dev/null; then
            bad=1
            WHY=${WHY:-$(grep -m1 'error:' "$dir/err-$r")}
            continue
        fi
        # the summary is the last rank 0's (rank 0 at start, or the next)
        [ -z "$FIRST" ] && grep -q '== ringd summary' "$dir/out-$r" && FIRST=$r
        h=$(hash_of "$dir/m-$r.jsonl")
        [ -n "$h0" ] || h0=$h
        [ -n "$h" ] && [ "$h" = "$h0" ] || bad=1
    done
    FIRST=${FIRST:-0}
    WALL=$(echo "$(now) $t0" | awk '{ printf "%.1f", $1 - $2 }')
    if [ "$sig" != none ]; then
        p=$(pgrep -P "${pids[$victim]}" | head -1)
        [ -n "$p" ] && kill -KILL "$p" 2> /dev/null
    fi
    wait 2> /dev/null
    OK=$((1 - bad))
    LOST=""
    if [ -n "$T_SIG" ]; then
        u=$(cat "$dir"/m-*.jsonl | sed -n 's/.*"type":"membership".*"unix_time":\([0-9.]*\),.*/\1/p' |
            sort -g | tail -1)
        [ -n "$u" ] && LOST=$(echo "$u $T_SIG" | awk '{ printf "%.3f", $1 - $2 }')
    fi
}

# restart TAG VICTIM AT: ring-launch -n N --max-restarts 1, VICTIM SIGKILLs itself after
# step AT (RING_FAULT), every rank restarts from the newest checkpoint. Sets WALL, RACC, ROK.
restart() {
    local tag=$1 victim=$2 at=$3 dir=$OUT/$1 t0
    mkdir -p "$dir"
    t0=$(now)
    # the fault on the first start of each rank only: a restart from scratch (killed before
    # the first checkpoint) must not be killed again
    timeout -k 5 $((2 * LIMIT)) "$L" -n "$N" --max-restarts 1 -- \
        sh -c 'mkdir "$0/fault-$RING_RANK" 2> /dev/null && export RING_FAULT="$1"; shift; exec "$@"' \
        "$dir" "sigkill-at-step:$at:$victim" "$D" "${COMMON[@]}" \
        --checkpoint-dir "$dir/ckpt" > "$dir/out" 2> "$dir/err" < /dev/null
    ROK=$?
    WALL=$(echo "$(now) $t0" | awk '{ printf "%.1f", $1 - $2 }')
    RACC=$(acc_of "$dir/out")
    grep -q 'restarting all' "$dir/err" || ROK=99
}

# replace TAG VICTIM AT: ring-launch -n N --elastic 2:N --max-restarts 1, VICTIM SIGKILLs
# itself after step AT (RING_FAULT, its first start only), the others go on, and a
# replacement joins them at a step boundary. Sets WALL, PACC, POK.
replace() {
    local tag=$1 victim=$2 at=$3 dir=$OUT/$1 t0
    mkdir -p "$dir"
    t0=$(now)
    timeout -k 5 $((2 * LIMIT)) "$L" -n "$N" --elastic "2:$N" --max-restarts 1 -- \
        sh -c 'mkdir "$0/fault-$RING_RANK" 2> /dev/null && export RING_FAULT="$1"; shift; exec "$@"' \
        "$dir" "sigkill-at-step:$at:$victim" "$D" "${COMMON[@]}" > "$dir/out" 2> "$dir/err" < /dev/null
    POK=$?
    WALL=$(echo "$(now) $t0" | awk '{ printf "%.1f", $1 - $2 }')
    PACC=$(acc_of "$dir/out")
    grep -q '1 joined (3 -> 4 peers)' "$dir/out" || POK=98
}

echo "# elastic-bar: fmnist-mlp, $N peers on $(hostname), $EPOCHS epochs ($STEPS steps), --timeout $TIMEOUT, $RUNS SIGKILL + $STOP_RUNS SIGSTOP runs; $CPUS CPUs; seed ${SEED:-clock}"
echo "# work files in $OUT"
by_hand ref none 0 0
REF_ACC=$(acc_of "$OUT/ref/out-0")
REF_WALL=$WALL
[ "$OK" = 1 ] && [ -n "$REF_ACC" ] || { echo "elastic-bar: the uninterrupted run failed (see $OUT/ref)" >&2; exit 1; }
echo "# uninterrupted: test accuracy $REF_ACC %, wall $REF_WALL s"
printf '%-6s %-6s %5s %5s | %8s %7s %7s %6s | %8s %7s %7s | %8s %7s %7s\n' run signal rank \
    step "acc %" "d pts" "lost s" "wall" "restart" "acc %" "wall" "replace" "acc %" "wall"
acc_ok=0 kill_ok=0 stop_ok=0 wall_ok=0 three_ok=0 runs_ok=0 total_e=0 total_r=0 total_p=0 p_ok=0
for i in $(seq 1 "$RUNS"); do
    victim=$((RANDOM % N))
    at=$((STEPS / 20 + RANDOM % (STEPS * 9 / 10)))
    by_hand "kill-$i" KILL "$victim" "$at" --elastic 2:$N
    eok=$OK elost=${LOST:-none} ewall=$WALL ewhy=$WHY
    eacc=$(acc_of "$OUT/kill-$i/out-$FIRST")
    replace "replace-$i" "$victim" "$at"
    pwall=$WALL
    restart "restart-$i" "$victim" "$at"
    d=$(awk -v a="${eacc:-0}" -v b="$REF_ACC" 'BEGIN { printf "%+.2f", a - b }')
    printf '%-6s %-6s %5s %5s | %8s %7s %7s %6s | %8s %7s %7s | %8s %7s %7s\n' "$i" KILL \
        "$victim" "$at" "${eacc:-none}" "$d" "$elost" "$ewall" \
        "$([ "$ROK" = 0 ] && echo ok || echo "rc $ROK")" "${RACC:-none}" "$WALL" \
        "$([ "$POK" = 0 ] && echo ok || echo "rc $POK")" "${PACC:-none}" "$pwall"
    [ "$POK" = 0 ] && p_ok=$((p_ok + 1))
    awk -v e="$pwall" -v r="$WALL" -v ok="$ROK" -v pok="$POK" \
        'BEGIN { exit !(ok == 0 && pok == 0 && e < r) }' && wall_ok=$((wall_ok + 1))
    total_p=$(awk -v a="$total_p" -v b="$pwall" 'BEGIN { print a + b }')
    [ "$eok" = 1 ] && runs_ok=$((runs_ok + 1))
    [ "$eok" = 1 ] || echo "#   run $i: ${ewhy:-parameters differ between survivors}"
    awk -v d="$d" -v a="${eacc:-}" 'BEGIN { exit !(a != "" && d <= 0.5 && d >= -0.5) }' && acc_ok=$((acc_ok + 1))
    awk -v l="$elost" 'BEGIN { exit !(l != "none" && l <= 1.0) }' && kill_ok=$((kill_ok + 1))
    awk -v e="$ewall" -v r="$WALL" -v ok="$ROK" 'BEGIN { exit !(ok == 0 && e < r) }' && three_ok=$((three_ok + 1))
    total_e=$(awk -v a="$total_e" -v b="$ewall" 'BEGIN { print a + b }')
    total_r=$(awk -v a="$total_r" -v b="$WALL" 'BEGIN { print a + b }')
done
for i in $(seq 1 "$STOP_RUNS"); do
    victim=$((RANDOM % N))
    at=$((STEPS / 20 + RANDOM % (STEPS * 9 / 10)))
    by_hand "stop-$i" STOP "$victim" "$at" --elastic 2:$N
    eacc=$(acc_of "$OUT/stop-$i/out-$FIRST")
    d=$(awk -v a="${eacc:-0}" -v b="$REF_ACC" 'BEGIN { printf "%+.2f", a - b }')
    printf '%-6s %-6s %5s %5s | %8s %7s %7s %6s |\n' "$i" STOP "$victim" "$at" "${eacc:-none}" \
        "$d" "${LOST:-none}" "$WALL"
    [ "$OK" = 1 ] && runs_ok=$((runs_ok + 1))
    [ "$OK" = 1 ] || echo "#   run $i: ${WHY:-parameters differ between survivors}"
    awk -v d="$d" -v a="${eacc:-}" 'BEGIN { exit !(a != "" && d <= 0.5 && d >= -0.5) }' && acc_ok=$((acc_ok + 1))
    awk -v l="${LOST:-none}" -v t="$TIMEOUT" 'BEGIN { exit !(l != "none" && l <= t + 1.0) }' &&
        stop_ok=$((stop_ok + 1))
done
all=$((RUNS + STOP_RUNS))
verdict() { [ "$1" = "$2" ] && echo met || echo "NOT met"; }
echo
echo "runs:      $runs_ok/$all elastic runs ended with every survivor at exit 0 and identical parameters: $(verdict $runs_ok $all)"
echo "accuracy:  $acc_ok/$all within 0.5 points of the uninterrupted run's $REF_ACC %: $(verdict $acc_ok $all)"
echo "SIGKILL:   $kill_ok/$RUNS lost at most 1 s from the kill to the survivors' next step: $(verdict $kill_ok "$RUNS")"
echo "SIGSTOP:   $stop_ok/$STOP_RUNS lost at most --timeout + 1 = $((TIMEOUT + 1)) s: $(verdict $stop_ok "$STOP_RUNS")"
echo "replace:   ring-launch --elastic 2:$N --max-restarts 1: $p_ok/$RUNS back to $N peers (a replacement joined) and exit 0"
echo "wall time: $wall_ok/$RUNS ring-launch --elastic 2:$N --max-restarts 1 runs took less than ring-launch --max-restarts 1 (total $total_p s against $total_r s; uninterrupted $REF_WALL s): $(verdict $wall_ok "$RUNS")"
echo "3 peers:   $three_ok/$RUNS elastic runs without a replacement took less than the restart (total $total_e s; no bar)"
[ "$runs_ok" = "$all" ] && [ "$acc_ok" = "$all" ] && [ "$kill_ok" = "$RUNS" ] &&
    [ "$stop_ok" = "$STOP_RUNS" ] && [ "$wall_ok" = "$RUNS" ]
