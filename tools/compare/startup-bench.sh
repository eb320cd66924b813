#!/usr/bin/env bash
# startup-bench.sh - how long a job takes from launch to its first allreduce
# done (and exit), ringd's ways of meeting against Open MPI's mpirun, in one
# run, interleaved round by round so the machine's noise hits all alike.
set -u

usage() {
    cat << 'EOF'
Usage: tools/compare/startup-bench.sh [--help] [BUILD_DIR]

Times, N peers on this host (127.0.0.1 only), launch + start-up + one 4 KiB
allreduce + exit, wall clock:
  ringd-tcp-store   N ring-bench processes started by a shell loop, meeting
                    at a tcp store (RING_RENDEZVOUS=tcp://127.0.0.1:PORT)
  ringd-file-store  the same through a file store in a temporary directory
  ring-launch       ring-launch -n N -- ring-bench (a static peer list)
  mpirun            mpirun -np N of tools/compare/baselines/mpi_allreduce.c (built
                    with mpicc; TCP BTL on lo)
REPS rounds (default 7), each running every system once in a rotating order;
the first round is a warm-up and not counted. Prints mean and sd per system
and each one's ratio to mpirun.

BUILD_DIR holds ring-bench and ring-launch (default: ./build, else .).
Environment: N (default 4), REPS (7), OUT (default /tmp/ringd-startup).
Needs: openmpi-bin libopenmpi-dev (mpirun and mpicc); without them the
mpirun row is left out and said so.
EOF
}
[ "${1:-}" = --help ] || [ "${1:-}" = -h ] && { usage; exit 0; }
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-}
if [ -z "$BUILD" ]; then
    if [ -x ./build/ring-bench ]; then BUILD=./build; else BUILD=.; fi
fi
B=$BUILD/ring-bench
L=$BUILD/ring-launch
[ -x "$B" ] && [ -x "$L" ] || { echo "startup-bench: no ring-bench/ring-launch in $BUILD" >&2; exit 2; }
N=${N:-4}
REPS=${REPS:-7}
OUT=${OUT:-/tmp/ringd-startup}
mkdir -p "$OUT"
for v in $(compgen -e | grep '^RING_'); do unset "$v"; done

MPI=""
if command -v mpicc > /dev/null && command -v mpirun > /dev/null; then
    mpicc -O2 -o "$OUT/mpi_allreduce" "$HERE/baselines/mpi_allreduce.c" && MPI=$OUT/mpi_allreduce
fi
[ -n "$MPI" ] || echo "# mpirun or mpicc missing (apt-get install openmpi-bin libopenmpi-dev): no mpirun row"
MPI_FLAGS="--oversubscribe --allow-run-as-root --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
port=$((31000 + RANDOM % 5000))

# each runner returns 0 on success; its time is measured around it
run_tcp_store() {
    local r
    port=$((port + 1))
    for r in $(seq 0 $((N - 1))); do
        RING_RANK=$r RING_WORLD_SIZE=$N RING_RENDEZVOUS=tcp://127.0.0.1:$port \
            timeout 60 "$B" -b 4K -e 4K -n 1 -w 0 > /dev/null 2>> "$OUT/err" &
    done
    wait
}
run_file_store() {
    local r d
    d=$(mktemp -d "$OUT/fs.XXXXXX")
    for r in $(seq 0 $((N - 1))); do
        RING_RANK=$r RING_WORLD_SIZE=$N RING_RENDEZVOUS=file://$d \
            timeout 60 "$B" -b 4K -e 4K -n 1 -w 0 > /dev/null 2>> "$OUT/err" &
    done
    wait
    rm -rf "$d"
}
run_launch() { timeout 60 "$L" -n "$N" -- "$B" -b 4K -e 4K -n 1 -w 0 > /dev/null 2>> "$OUT/err"; }
# shellcheck disable=SC2086
run_mpirun() { timeout 60 mpirun $MPI_FLAGS -np "$N" "$MPI" -b 4K -e 4K -t 0.01 > /dev/null 2>> "$OUT/err"; }

systems="ringd-tcp-store ringd-file-store ring-launch"
[ -n "$MPI" ] && systems="$systems mpirun"
: > "$OUT/times.csv"
for round in $(seq 0 $((REPS - 1))); do
    set -- $systems
    # rotate the order each round
    for _ in $(seq 1 $((round % $#))); do set -- "$@" "$1"; shift; done
    for s in "$@"; do
        t0=$(now_ms)
        case $s in
        ringd-tcp-store) run_tcp_store ;;
        ringd-file-store) run_file_store ;;
        ring-launch) run_launch ;;
        mpirun) run_mpirun ;;
        esac
        t1=$(now_ms)
        [ "$round" -gt 0 ] && echo "$s,$((t1 - t0))" >> "$OUT/times.csv"
    done
done
echo "# launch + start-up + one 4 KiB allreduce + exit, N=$N, $((REPS - 1)) rounds (after 1 warm-up), ms"
awk -F, '{ n[$1]++; s[$1] += $2; q[$1] += $2 * $2 }
    END {
        base = ("mpirun" in n) ? s["mpirun"] / n["mpirun"] : 0
        printf "%-18s %9s %7s %s\n", "system", "mean", "sd", base ? "vs mpirun" : ""
        for (k in n) {
            m = s[k] / n[k]; v = q[k] / n[k] - m * m
            printf "%-18s %9.1f %7.1f %s\n", k, m, (v > 0 ? sqrt(v) : 0), (base ? sprintf("%.2fx", m / base) : "")
        }
    }' "$OUT/times.csv" | (read -r h; echo "$h"; sort)
[ -s "$OUT/err" ] && { echo "# errors (first lines of $OUT/err):"; head -5 "$OUT/err"; }
exit 0
