#!/usr/bin/env bash
# hier-compare.sh - the hierarchical allreduce against the flat ring on 2
# "hosts" x 2 peers of the namespace lab (tools/lab/netns-lab.sh), every host
# link capped at RATE, in interleaved rounds so that machine noise hits all
# alike.
#
#   tools/compare/hier-compare.sh BUILD_DIR
#
# Ranks 0 and 2 run in host 0, 1 and 3 in host 1, meeting at a tcp store on
# host 0; shm between the peers of a host, tcp across. Each round runs
# ring-bench (fp32, --codec none, one size) with --hierarchical on, off and
# auto, in a rotating order, and prints rank 0's time per call. Then the
# medians, and on / off: the flat ring moves 2(N-1)/N = 1.5 S through each
# host's link, the hierarchical one S, so 0.67x is the limit.
# Environment: REPS (rounds, default 3), BYTES (default 64M), RATE (tc rate
# of every link, default 1gbit), ITERS (timed calls per run, default 4),
# RUN_TIMEOUT (seconds per run, default 120). Needs root and iproute2; the
# lab is always torn down.
set -euo pipefail
b=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
reps=${REPS:-3}
bytes=${BYTES:-64M}
rate=${RATE:-1gbit}
iters=${ITERS:-4}
run_timeout=${RUN_TIMEOUT:-120}
lab=$(cd "$(dirname "$0")/../lab" && pwd)/netns-lab.sh
[ -x "$b/ring-bench" ] || { echo "hier-compare: no ring-bench in $b" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "hier-compare: needs root (the namespace lab)" >&2; exit 77; }
for v in $(compgen -e | grep '^RING_'); do unset "$v"; done

name=hc$$
w=$(mktemp -d "${TMPDIR:-/tmp}/hier-compare.XXXXXX")
"$lab" up 2 --name "$name" > "$w/lab.env"
trap '"$lab" down "$name" > /dev/null 2>&1; rm -rf "$w"' EXIT
eval "$(cat "$w/lab.env")"
"$lab" cap "$name" "$rate" > /dev/null
read -r a0 _ <<< "$NETNS_LAB_ADDRS"
port=29811

run4() { # --hierarchical MODE, round R: rank 0's microseconds per call
    local mode=$1 r us
    for r in 1 3 2 0; do
        ("$lab" exec "$name" $((r % 2)) -- env RING_RANK=$r RING_WORLD_SIZE=4 \
            RING_RENDEZVOUS="tcp://$a0:$port" RING_CONNECT_TIMEOUT=20 \
            timeout -k 5 "$run_timeout" "$b/ring-bench" -b "$bytes" -e "$bytes" -n "$iters" \
            -w 1 --csv --codec none --hierarchical "$mode" \
            > "$w/$mode-$r.out" 2> "$w/$mode-$r.err"; echo $? > "$w/$mode-$r.rc") &
    done
    wait
    port=$((port + 1))
    for r in 0 1 2 3; do
        if [ "$(cat "$w/$mode-$r.rc")" != 0 ]; then
            echo "round $2 $mode: rank $r failed:" >&2
            tail -3 "$w/$mode-$r.err" >&2
            exit 1
        fi
    done
    us=$(awk -F, 'NR > 1 && $1 ~ /^[0-9]+$/ { print $4 }' "$w/$mode-0.out")
    echo "round $2 --hierarchical $mode: $(awk -v u="$us" 'BEGIN { printf "%.1f", u / 1000 }') ms"
    echo "$us" >> "$w/$mode.us"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

echo "# 2 hosts x 2 peers, links capped at $rate, $bytes fp32 --codec none, $iters calls a run"
echo "# $(getconf _NPROCESSORS_ONLN) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$reps"); do
    case $((r % 3)) in
        1) order="on off auto" ;;
        2) order="off auto on" ;;
        *) order="auto on off" ;;
    esac
    for m in $order; do run4 "$m" "$r"; done
done
on=$(median < "$w/on.us")
off=$(median < "$w/off.us")
auto=$(median < "$w/auto.us")
awk -v a="$on" -v b="$off" -v c="$auto" 'BEGIN {
    printf "median ms per call: on %.1f, off %.1f, auto %.1f\n", a / 1000, b / 1000, c / 1000
    if (b > 0) printf "hierarchical / flat: %.2fx (auto / flat: %.2fx; the limit is 0.67x)\n", a / b, c / b }'
