#!/usr/bin/env bash
# lab-compare.sh - ringd's ring against Gloo's on capped links between
# "hosts" (network namespaces of tools/lab/netns-lab.sh), in one run,
# interleaved round by round.
set -u

usage() {
    cat << 'EOF'
Usage: tools/compare/lab-compare.sh [--help] [BUILD_DIR]

Builds an N-host namespace lab (tools/lab/netns-lab.sh), caps every link at RATE
in both directions (tc tbf), and runs, REPS rounds, each in a rotating order:
  gloo        Gloo's ring allreduce (tools/compare/baselines/gloo_allreduce.cc, Debian
              libgloo-dev), FileStore rendezvous, fp32
  ringd-fp32  ring-bench, fp32 on the wire (--codec none)
  ringd-fp16  ring-bench, fp16 on the wire (--codec fp16)
  iperf3      one TCP stream host 0 -> host 1 for 3 s: what the capped link
              carries as TCP payload (the ceiling: headers take ~4.4% of a
              tbf rate with 1500-byte frames, ~0.7% with MTU=9000 jumbo
              frames; iperf3 installed or skipped)
one rank per host, on one buffer size. Prints each run's algbw and busbw
(GB/s = 1e9 B/s; iperf3's goodput in both columns), then the medians and the
ratios the bandwidth issue asks for: ringd-fp32 busbw / gloo busbw,
ringd-fp32 busbw / the nominal cap and / iperf3's goodput, and ringd-fp16
algbw / ringd-fp32 algbw.

BUILD_DIR holds ring-bench (default: ./build, else .).
Environment: N (4), RATE (1gbit), BYTES (64M), REPS (3), MTU (1500; 9000 for
jumbo frames, as cluster networks use), OUT (/tmp/ringd-lab-compare).
Needs root, iproute2, g++ and libgloo-dev. The lab is always torn down.
EOF
}
[ "${1:-}" = --help ] || [ "${1:-}" = -h ] && { usage; exit 0; }
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-}
[ -n "$BUILD" ] || { [ -x ./build/ring-bench ] && BUILD=./build || BUILD=.; }
BUILD=$(cd "$BUILD" && pwd)
B=$BUILD/ring-bench
L=$BUILD/ring-launch
N=${N:-4}
RATE=${RATE:-1gbit}
BYTES=${BYTES:-64M}
REPS=${REPS:-3}
MTU=${MTU:-1500}
OUT=${OUT:-/tmp/ringd-lab-compare}
LAB=$HERE/../lab/netns-lab.sh
[ -x "$B" ] && [ -x "$L" ] || { echo "lab-compare: no ring-bench or ring-launch in $BUILD" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "lab-compare: needs root (the namespace lab)" >&2; exit 77; }
mkdir -p "$OUT"
for v in $(compgen -e | grep '^RING_'); do unset "$v"; done

GLOO=$OUT/gloo_allreduce
if [ ! -x "$GLOO" ] || [ "$HERE/baselines/gloo_allreduce.cc" -nt "$GLOO" ]; then
    g++ -O3 -std=c++17 -o "$GLOO" "$HERE/baselines/gloo_allreduce.cc" -lgloo -lpthread ||
        { echo "lab-compare: cannot build the Gloo baseline (apt-get install libgloo-dev g++)" >&2; exit 2; }
fi

name=cmp$$
"$LAB" up "$N" --name "$name" > "$OUT/lab.env" || exit $?
trap '"$LAB" down "$name" > /dev/null 2>&1' EXIT
eval "$(cat "$OUT/lab.env")"
"$LAB" cap "$name" "$RATE" > /dev/null || { echo "lab-compare: cannot cap the links" >&2; exit 1; }
[ "$MTU" = 1500 ] || "$LAB" mtu "$name" "$MTU" > /dev/null ||
    { echo "lab-compare: cannot set the links' MTU to $MTU" >&2; exit 1; }
read -r -a addrs <<< "$NETNS_LAB_ADDRS"
# the cap in GB/s (tc units: kbit/mbit/gbit are bits/s)
cap_gbs=$(echo "$RATE" | awk '{ v = $0 + 0; u = $0; sub(/^[0-9.]+/, "", u)
    m = (u == "gbit") ? 1e9 : (u == "mbit") ? 1e6 : (u == "kbit") ? 1e3 : 8
    printf "%.6f", v * m / 8 / 1e9 }')
port=$((32000 + RANDOM % 4000))

run_gloo() {
    local store r
    store=$(mktemp -d "$OUT/gloo-store.XXXXXX")
    for r in $(seq 0 $((N - 1))); do
        "$LAB" exec "$name" "$r" -- env RANK=$r SIZE=$N GLOO_STORE="$store" GLOO_HOST="${addrs[$r]}" \
            timeout 120 "$GLOO" -b "$BYTES" -e "$BYTES" -t 2 -w 1 > "$OUT/gloo-$r.out" 2>&1 &
    done
    wait
    rm -rf "$store"
    # bytes count iters time_us algbw busbw ok: GB/s from the time (0.1 us), since the
    # program rounds its GB/s columns to 3 digits (0.4% at 0.12 GB/s)
    awk -v n="$N" '$1 ~ /^[0-9]+$/ && $4 > 0 { a = $1 / $4 / 1e3
        printf "%.4f,%.4f\n", a, a * 2 * (n - 1) / n }' "$OUT/gloo-0.out" | tail -1
}
# ringd's peers through ring-launch, each in its host's namespace: the first that
# fails stops the others (--timeout bounds the whole run)
run_ringd() {
    local codec=$1
    port=$((port + N))
    RING_CODEC=$codec RING_CONNECT_TIMEOUT=30 timeout 150 "$L" -n "$N" --no-prefix \
        --hosts "$(echo "${addrs[*]}" | tr ' ' ,)" --base-port "$port" --timeout 120 \
        --exec-prefix "$LAB exec $name {node} --" \
        -- "$B" -b "$BYTES" -e "$BYTES" -n 3 -w 1 -c --csv > "$OUT/ringd-0.out" 2>&1
    # bytes,count,dtype,time_us,algbw,busbw,wrong (rank 0 alone prints rows)
    awk -F, 'NR > 1 && $1 ~ /^[0-9]+$/ { print $5 "," $6 (($7 != 0) ? ",WRONG" : "") }' \
        "$OUT/ringd-0.out" | tail -1
}

run_iperf() {
    command -v iperf3 > /dev/null || return 0
    "$LAB" exec "$name" 1 -- timeout 20 iperf3 -s -1 -B "${addrs[1]}" -p 5201 > /dev/null 2>&1 &
    sleep 0.5
    "$LAB" exec "$name" 0 -- timeout 20 iperf3 -c "${addrs[1]}" -p 5201 -t 3 -J > "$OUT/iperf.json" 2> /dev/null
    wait
    python3 -c 'import json,sys; g = json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e9; print("%.4f,%.4f" % (g, g))' "$OUT/iperf.json" 2> /dev/null
}

echo "# N=$N hosts, links capped at $RATE ($cap_gbs GB/s) both ways, MTU $MTU, $BYTES fp32, $REPS rounds"
echo "round,system,algbw_GBps,busbw_GBps" | tee "$OUT/runs.csv"
systems="gloo ringd-fp32 ringd-fp16 iperf3"
for round in $(seq 1 "$REPS"); do
    set -- $systems
    for _ in $(seq 1 $(((round - 1) % $#))); do set -- "$@" "$1"; shift; done
    for s in "$@"; do
        case $s in
        gloo) res=$(run_gloo) ;;
        ringd-fp32) res=$(run_ringd none) ;;
        ringd-fp16) res=$(run_ringd fp16) ;;
        iperf3) res=$(run_iperf) ;;
        esac
        [ -n "$res" ] || res="nan,nan"
        echo "$round,$s,$res" | tee -a "$OUT/runs.csv"
    done
done
awk -F, -v cap="$cap_gbs" 'NR > 1 && $3 != "nan" {
        k = $2; n[k]++; a[k, n[k]] = $3; b[k, n[k]] = $4 }
    function med(arr, k, cnt,   i, j, t, v) {
        for (i = 1; i <= cnt; i++) v[i] = arr[k, i]
        for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        return cnt % 2 ? v[(cnt + 1) / 2] : (v[cnt / 2] + v[cnt / 2 + 1]) / 2 }
    END {
        printf "# medians: system algbw busbw (GB/s)\n"
        for (k in n) { ma[k] = med(a, k, n[k]); mb[k] = med(b, k, n[k]); printf "%-11s %8.4f %8.4f\n", k, ma[k], mb[k] }
        if (("ringd-fp32" in n) && ("gloo" in n)) printf "ringd-fp32 busbw / gloo busbw:        %.3f\n", mb["ringd-fp32"] / mb["gloo"]
        if ("ringd-fp32" in n) printf "ringd-fp32 busbw / nominal cap:       %.3f\n", mb["ringd-fp32"] / cap
        if (("ringd-fp32" in n) && ("iperf3" in n)) printf "ringd-fp32 busbw / iperf3 goodput:    %.3f\n", mb["ringd-fp32"] / mb["iperf3"]
        if (("gloo" in n) && ("iperf3" in n)) printf "gloo busbw / iperf3 goodput:          %.3f\n", mb["gloo"] / mb["iperf3"]
        if (("ringd-fp16" in n) && ("ringd-fp32" in n)) printf "ringd-fp16 algbw / ringd-fp32 algbw:  %.3f\n", ma["ringd-fp16"] / ma["ringd-fp32"]
    }' "$OUT/runs.csv"
