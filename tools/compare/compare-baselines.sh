#!/usr/bin/env bash
# compare-baselines.sh - measure ringd side by side with what users would pick
# instead (Open MPI's TCP and shared-memory BTLs, Gloo ring) plus an iperf3 --bidir
# loopback ceiling,
# in ONE run, interleaved round by round so machine noise hits every system alike.
# Run `tools/compare/compare-baselines.sh --help` for usage and environment variables.
# All traffic is on 127.0.0.1; every step runs under `timeout`.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$HERE/baselines

usage() {
  cat << 'EOF'
Usage: tools/compare/compare-baselines.sh [--help] [--summary FILE.csv]

Builds the baseline benchmarks (tools/compare/baselines/mpi_allreduce.c, gloo_allreduce.cc),
then runs REPS rounds. Each round runs, once each and in a rotating order:
  iperf3 --bidir   loopback ceiling (127.0.0.1, one-off server under timeout)
  mpi-tcp   n=N    Open MPI MPI_Allreduce, TCP BTL on lo (btl self,tcp; pml ob1)
  mpi-vader n=N    Open MPI MPI_Allreduce, shared-memory BTL (btl self,vader; pml ob1)
  gloo-ring n=N    gloo::allreduce RING, TCP transport on 127.0.0.1, FileStore
  ringd     n=N    ring-launch -n N -- ring-bench ... --csv, RING_TRANSPORT=tcp (loopback)
  ringd-shm n=N    the same with RING_TRANSPORT=shm (shared memory)
  ringd-ring, ringd-shm-ring   the two above with RING_ALGO=ring (ringd's own
                   default, --algo auto, runs small allreduces by recursive doubling,
                   mid-size ones at N = 4, 8, ... by Rabenseifner's algorithm, and
                   over shm every fp32 one through the direct allreduce)
  mem-limit n=N    the memory-speed limit of an allreduce on this host
                   (tools/compare/baselines/mem_limit.c): N processes at once each
                   add their 1/N block of N inputs in one pass and copy the
                   MEM_MIB-byte result; limit = S / (reduce + copy), as busbw
for every N in NS. Before every run it waits (at most QUIET_WAIT s) for processes
outside this script's Unix session ("foreign CPU", i.e. other tenants) to fall
below 0.1 core, and it records the foreign CPU used during each run.
fp32 sum, busbw = algbw * 2(n-1)/n, GB/s = 1e9 B/s (nccl-tests conventions).

Outputs (OUT directory):
  compare-<ts>.csv   raw rows: round,system,n,bytes,time_us,busbw_GBps,foreign_cores
                     (iperf3 rows: system=iperf3-bidir, n=2, bytes=0,
                      time_us=test duration, busbw_GBps = sum of both directions, GB/s)
  compare-<ts>.log   console log;  compare-<ts>/  raw output of every run
  bin/               baseline binaries (rebuilt when the sources are newer)
Summary: per n and size, the median busbw of each system (lower middle for even
counts), ringd (tcp) / max(MPI TCP, Gloo), ringd-shm / MPI vader, the memory
limit beside the shm columns and ringd-shm / limit, the 4 KiB time
ratios per n (ringd/mpi-tcp, ringd-shm/mpi-vader, and --algo auto against ring)
and ringd n=2 256 MiB busbw / (iperf3 --bidir GB/s / 2).

Options:
  --summary FILE.csv   only print the summary of an existing CSV
  -h, --help           this text

Environment (defaults in brackets):
  OUT          output directory [/tmp/ringd-compare]
  RINGD_BUILD  directory holding ring-launch and ring-bench [.]; if either is
               missing the ringd rows are skipped (with a message)
  REPS         rounds [3]                     NS        rank counts ["2 4"]
  SIZES_MIN    smallest size [4K]             SIZES_MAX largest size [256M]
  SIZES_FACTOR size step [4]                  SIZES     explicit list, e.g. "4K 1M"
  QUICK=1      smoke test: sizes 4K 1M 16M 256M (within SIZES_MIN..SIZES_MAX),
               REPS=1, IPERF_SECS=2 (explicit REPS / IPERF_SECS still win)
  TARGET       seconds of timed calls per size, all systems (-t) [0.3]
  WARMUP       warm-up calls per size (ring-bench -w) [3]
  RINGD_ITERS  if set, also pass `-n RINGD_ITERS` to ring-bench
  RINGD_CHECK  1: pass -c to ring-bench (the baselines check once per size) [1]
  RINGD_BIND   ring-launch --bind-to for the ringd rows [core]: pinned as mpirun
               pins its ranks (one per core when they fit, none when they do not)
  RINGD_BENCH_ARGS  extra ring-bench flags (word-split)
  SYSTEMS      subset of "mpi-tcp mpi-vader gloo-ring ringd ringd-shm ringd-ring
               ringd-shm-ring mem-limit" [all eight]
  MEM_MIB      mem-limit's buffer, MiB [256]
  IPERF_SECS   iperf3 duration, 0 = skip iperf3 [5]   IPERF_PORT [5297]
  QUIET_WAIT   max seconds to wait for quiet before each run [3]
  RUN_TIMEOUT  timeout (s) for each benchmark invocation [300]
  BUILD_TIMEOUT timeout (s) for each compile [300]

Examples:
  RINGD_BUILD=build tools/compare/compare-baselines.sh                  # full: ~10+ min
  QUICK=1 SIZES_MAX=1M RINGD_BUILD=build tools/compare/compare-baselines.sh   # smoke, <1 min
The machine has 2 cores and n=4 oversubscribes them; compare ratios, not absolute GB/s,
and look at the foreign_cores column (runs with >= 0.1 are flagged as noisy).
EOF
}

# ---------------------------------------------------------------- summary
# summary CSV: per n and size, median busbw per system, ratios.
summary() {
  local csv=$1
  awk -F, '
    function lmed(k, col,   i, j, m, t, a) {    # lower median of column col for key k
      m = cnt[k]; if (!m) return ""
      for (i = 1; i <= m; i++) a[i] = (col == "t" ? tv[k, i] : bv[k, i])
      for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return a[int((m + 1) / 2)]
    }
    function hsz(b) {
      if (b >= 1073741824 && b % 1073741824 == 0) return (b / 1073741824) " GiB"
      if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) " MiB"
      if (b >= 1024 && b % 1024 == 0) return (b / 1024) " KiB"
      return b " B"
    }
    function cell(v) { return v == "" ? sprintf("%10s", "-") : sprintf("%10.3f", v) }
    NR == 1 || $1 !~ /^[0-9]+$/ { next }
    {
      sys = $2; n = $3 + 0; b = $4 + 0
      k = sys SUBSEP n SUBSEP b
      c = ++cnt[k]; tv[k, c] = $5 + 0; bv[k, c] = $6 + 0
      if (sys == "iperf3-bidir") next
      if (sys == "mem-limit") { limb[n] = b; next }
      nb = n SUBSEP b
      runs[nb]++; if ($7 + 0 >= 0.1) noisy[nb]++
      if (!(n in seen_n)) { seen_n[n] = 1; nlist[++nn] = n }
      if (!(nb in seen_b)) { seen_b[nb] = 1; bl[n, ++nbs[n]] = b }
    }
    END {
      if (!nn) { print "(no benchmark rows)"; exit }
      # sort rank counts and sizes
      for (i = 2; i <= nn; i++) { t = nlist[i]; for (j = i - 1; j >= 1 && nlist[j] > t; j--) nlist[j + 1] = nlist[j]; nlist[j + 1] = t }
      printf "median busbw, GB/s (1e9 B/s); tcp ratio = ringd (tcp) / max(mpi-tcp, gloo-ring); shm ratio = ringd-shm / mpi-vader;\nnoisy = runs with >= 0.1 foreign cores\n"
      for (x = 1; x <= nn; x++) {
        n = nlist[x]; m = nbs[n]
        for (i = 1; i <= m; i++) s[i] = bl[n, i]
        for (i = 2; i <= m; i++) { t = s[i]; for (j = i - 1; j >= 1 && s[j] > t; j--) s[j + 1] = s[j]; s[j + 1] = t }
        lim = lmed("mem-limit" SUBSEP n SUBSEP limb[n], "b")
        printf "\nn=%d%s\n%10s %10s %10s %10s %10s %10s %10s %10s %10s %10s %8s\n", n,
          lim != "" ? sprintf("  (memory limit: %.3f GB/s busbw, mem_limit with %d processes, %s buffers)", lim, n, hsz(limb[n])) : "",
          "bytes", "mpi-tcp", "gloo-ring", "ringd", "tcp ratio", "mpi-vader", "ringd-shm", "shm ratio", "mem limit", "shm/limit", "noisy"
        for (i = 1; i <= m; i++) {
          b = s[i]
          mp = lmed("mpi-tcp" SUBSEP n SUBSEP b, "b"); gl = lmed("gloo-ring" SUBSEP n SUBSEP b, "b")
          rd = lmed("ringd" SUBSEP n SUBSEP b, "b")
          mv = lmed("mpi-vader" SUBSEP n SUBSEP b, "b"); rs = lmed("ringd-shm" SUBSEP n SUBSEP b, "b")
          best = ""; if (mp != "") best = mp; if (gl != "" && (best == "" || gl > best)) best = gl
          r = (rd != "" && best != "" && best > 0) ? sprintf("%9.2fx", rd / best) : sprintf("%10s", "-")
          r2 = (rs != "" && mv != "" && mv > 0) ? sprintf("%9.2fx", rs / mv) : sprintf("%10s", "-")
          r3 = (rs != "" && lim != "" && lim > 0) ? sprintf("%10.2f", rs / lim) : sprintf("%10s", "-")
          printf "%10s %s %s %s %s %s %s %s %s %s %4d/%-3d\n", hsz(b), cell(mp), cell(gl), cell(rd), r, cell(mv), cell(rs), r2, cell(lim), r3, noisy[n SUBSEP b] + 0, runs[n SUBSEP b]
        }
      }
      printf "\n"
      for (x = 1; x <= nn; x++) {
        n = nlist[x]
        rt = lmed("ringd" SUBSEP n SUBSEP 4096, "t"); mt = lmed("mpi-tcp" SUBSEP n SUBSEP 4096, "t")
        if (rt != "" && mt != "" && mt > 0)
          printf "4 KiB n=%d time: ringd (tcp) %.1f us / mpi-tcp %.1f us = %.2f (lower is better for ringd)\n", n, rt, mt, rt / mt
        rt = lmed("ringd-shm" SUBSEP n SUBSEP 4096, "t"); mt = lmed("mpi-vader" SUBSEP n SUBSEP 4096, "t")
        if (rt != "" && mt != "" && mt > 0)
          printf "4 KiB n=%d time: ringd-shm %.1f us / mpi-vader %.1f us = %.2f (lower is better for ringd)\n", n, rt, mt, rt / mt
        split("ringd ringd-shm", algo_sys, " ")
        for (y = 1; y <= 2; y++) {
          rt = lmed(algo_sys[y] SUBSEP n SUBSEP 4096, "t"); mt = lmed(algo_sys[y] "-ring" SUBSEP n SUBSEP 4096, "t")
          if (rt != "" && mt != "" && mt > 0)
            printf "4 KiB n=%d time: %s --algo auto %.1f us / --algo ring %.1f us = %.2f\n", n, algo_sys[y], rt, mt, rt / mt
        }
      }
      ip = lmed("iperf3-bidir" SUBSEP 2 SUBSEP 0, "b"); rb = lmed("ringd" SUBSEP 2 SUBSEP 268435456, "b")
      if (ip != "") printf "iperf3 --bidir loopback: median %.3f GB/s (both directions summed, %d runs)\n", ip, cnt["iperf3-bidir" SUBSEP 2 SUBSEP 0]
      if (rb != "" && ip != "" && ip > 0)
        printf "ringd n=2 256 MiB busbw / (iperf3 bidir / 2): %.3f / %.3f = %.2f\n", rb, ip / 2, rb / (ip / 2)
      else
        printf "ringd n=2 256 MiB busbw / (iperf3 bidir / 2): n/a (%s)\n", rb == "" ? "no ringd n=2 256 MiB row" : "no iperf3 row"
    }' "$csv"
}

case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  --summary)
    [ -r "${2:-}" ] || { echo "usage: $0 --summary FILE.csv" >&2; exit 2; }
    summary "$2"; exit 0 ;;
  "") ;;
  *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
esac

# ---------------------------------------------------------------- configuration
to_bytes() { # 4K / 1M / 2G / 4096 -> bytes (binary suffixes)
  awk -v s="$1" 'BEGIN { v = s + 0; u = toupper(substr(s, length(s)));
    if (u == "K") v *= 1024; else if (u == "M") v *= 1048576; else if (u == "G") v *= 1073741824;
    if (v < 4 || s !~ /^[0-9]+[kKmMgG]?$/) exit 1; printf "%d\n", v }'
}
human() { # bytes -> shortest exact K/M/G spelling
  local b=$1
  if ((b % 1073741824 == 0)); then echo "$((b / 1073741824))G"
  elif ((b % 1048576 == 0)); then echo "$((b / 1048576))M"
  elif ((b % 1024 == 0)); then echo "$((b / 1024))K"
  else echo "$b"; fi
}

OUT=${OUT:-/tmp/ringd-compare}
BIN=$OUT/bin
RINGD_BUILD=${RINGD_BUILD:-.}
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  REPS=${REPS:-1}; IPERF_SECS=${IPERF_SECS:-2}
fi
REPS=${REPS:-3}
IPERF_SECS=${IPERF_SECS:-5}
IPERF_PORT=${IPERF_PORT:-5297}
NS=${NS:-2 4}
TARGET=${TARGET:-0.3}
WARMUP=${WARMUP:-3}
RINGD_CHECK=${RINGD_CHECK:-1}
RINGD_BIND=${RINGD_BIND:-core}
QUIET_WAIT=${QUIET_WAIT:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-300}
SYSTEMS=${SYSTEMS:-mpi-tcp mpi-vader gloo-ring ringd ringd-shm ringd-ring ringd-shm-ring mem-limit}
MEM_MIB=${MEM_MIB:-256}

die() { echo "error: $*" >&2; exit 2; }
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "REPS must be a positive integer"
[[ $IPERF_SECS =~ ^[0-9]+$ ]] || die "IPERF_SECS must be an integer"
[[ $NS =~ ^[0-9\ ]+$ ]] || die "NS must be a list of integers"
[[ $MEM_MIB =~ ^[1-9][0-9]*$ ]] || die "MEM_MIB must be a positive integer"
for s in $SYSTEMS; do
  case $s in mpi-tcp | mpi-vader | gloo-ring | ringd | ringd-shm | ringd-ring | ringd-shm-ring | mem-limit) ;; *) die "unknown system '$s' in SYSTEMS" ;; esac
done

SMIN=$(to_bytes "${SIZES_MIN:-4K}") || die "bad SIZES_MIN"
SMAX=$(to_bytes "${SIZES_MAX:-256M}") || die "bad SIZES_MAX"
SFAC=${SIZES_FACTOR:-4}
if ! [[ $SFAC =~ ^[0-9]+$ ]] || ((SFAC < 2)); then die "SIZES_FACTOR must be an integer >= 2"; fi
size_list=()
if [ -n "${SIZES:-}" ]; then
  for s in $SIZES; do size_list+=("$(to_bytes "$s")") || die "bad size '$s' in SIZES"; done
elif [ "$QUICK" = 1 ]; then
  for s in 4096 1048576 16777216 268435456; do
    ((s >= SMIN && s <= SMAX)) && size_list+=("$s")
  done
else
  for ((s = SMIN; s <= SMAX; s *= SFAC)); do size_list+=("$s"); done
fi
((${#size_list[@]})) || die "no sizes selected (SIZES_MIN=$SMIN SIZES_MAX=$SMAX)"
mapfile -t size_list < <(printf '%s\n' "${size_list[@]}" | sort -n -u)

# Split the size list into geometric segments "min max factor" (each benchmark
# sweeps -b min -e max -f factor), e.g. 4K 1M 16M 256M -> "4K 1M 256" "16M 256M 16".
segments=()
i=0
while ((i < ${#size_list[@]})); do
  b=${size_list[i]}; f=4; j=$i
  if ((i + 1 < ${#size_list[@]})) && ((size_list[i + 1] % b == 0)); then
    f=$((size_list[i + 1] / b)); j=$((i + 1))
    while ((j + 1 < ${#size_list[@]})) && ((size_list[j + 1] == size_list[j] * f)); do j=$((j + 1)); done
  fi
  segments+=("$(human "$b") $(human "${size_list[j]}") $f")
  i=$((j + 1))
done

# ---------------------------------------------------------------- output, cleanup
mkdir -p "$BIN" || die "cannot create $BIN"
TS=$(date +%Y%m%d-%H%M%S)
CSV=$OUT/compare-$TS.csv
RAW=$OUT/compare-$TS
LOG=$OUT/compare-$TS.log
mkdir -p "$RAW"
echo "round,system,n,bytes,time_us,busbw_GBps,foreign_cores" > "$CSV"
exec > >(tee "$LOG") 2>&1
exec 3>&1 # console, for messages from traps (which may run inside a redirected function)
T0=$(date +%s)

# Every long-running child is started in the background and its PID recorded, so
# an interrupt kills exactly what this script started (timeout forwards the signal
# to its command; timeout itself runs in its own process group).
CHILDREN=()
forget() { # PID: drop it from CHILDREN (exact match)
  local c keep=()
  for c in "${CHILDREN[@]}"; do [ "$c" = "$1" ] || keep+=("$c"); done
  CHILDREN=("${keep[@]}")
}
STORE=""
cleanup() {
  local p
  for p in "${CHILDREN[@]}"; do kill -TERM "$p" 2> /dev/null; done
  [ -n "$STORE" ] && rm -rf "$STORE"
}
trap 'cleanup; echo "interrupted; partial results in $CSV" >&3; exit 130' INT TERM
trap cleanup EXIT
# bounded SECONDS CMD...: run CMD under timeout (KILL 5 s after TERM), wait for it
bounded() {
  local secs=$1 p rc; shift
  timeout -k 5 "$secs" "$@" &
  p=$!; CHILDREN+=("$p")
  wait "$p"; rc=$?
  forget "$p"
  return "$rc"
}

# ---------------------------------------------------------------- noise accounting
# (same approach as /work/shared/bench/run_baselines.sh, shorter sampling)
# foreign CPU = utime+stime+cutime+cstime of processes outside this script's Unix
# process session (SID); kernel threads (SID 0) excluded.
MYSID=$(ps -o sid= -p $$ | tr -d ' ')
HZ_TCK=$(getconf CLK_TCK)
foreign_ticks() {
  cat /proc/[0-9]*/stat 2> /dev/null | awk -v me="$MYSID" '{
    s = $0; sub(/^.*\) /, "", s); split(s, f, " ");
    if (f[4] != me && f[4] != 0) t += f[12] + f[13] + f[14] + f[15] } END { print t + 0 }'
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
foreign_cores() { # TICKS0 MS0 -> average foreign cores since then
  local dt=$(($(now_ms) - $2))
  awk -v a="$1" -v b="$(foreign_ticks)" -v hz="$HZ_TCK" -v ms="$dt" \
    'BEGIN { v = (b - a) / hz / (ms > 0 ? ms / 1000 : 1); printf "%.2f", v < 0 ? 0 : v }'
}
# wait (at most $1 s) until other sessions used < 0.1 core over the last 0.5 s
wait_quiet() {
  local deadline=$(($(date +%s) + $1)) t0 m0 c
  while :; do
    t0=$(foreign_ticks); m0=$(now_ms); sleep 0.5
    c=$(foreign_cores "$t0" "$m0")
    awk -v c="$c" 'BEGIN { exit !(c < 0.1) }' && return 0
    [ "$(date +%s)" -ge "$deadline" ] && return 1
  done
}

echo "# compare-baselines $(date -u '+%Y-%m-%d %H:%M:%S UTC')  host: $(getconf _NPROCESSORS_ONLN) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# sizes: $(for s in "${size_list[@]}"; do printf '%s ' "$(human "$s")"; done)(segments: $(printf '[%s] ' "${segments[@]}"))"
echo "# NS='$NS' REPS=$REPS TARGET=${TARGET}s WARMUP=$WARMUP IPERF_SECS=$IPERF_SECS QUIET_WAIT=${QUIET_WAIT}s SYSTEMS='$SYSTEMS'"
echo "# csv: $CSV   raw outputs: $RAW/"

# ---------------------------------------------------------------- build
build() { # name source compiler-and-flags...  (skips if the binary is newer than the source)
  local name=$1 src=$2; shift 2
  if [ -x "$BIN/$name" ] && [ "$BIN/$name" -nt "$src" ]; then
    echo "build: $name up to date"; return 0
  fi
  echo "build: $*"
  bounded "$BUILD_TIMEOUT" "$@" && return 0
  echo "build of $name FAILED"; rm -f "$BIN/$name"; return 1
}
have=()
for s in $SYSTEMS; do
  case $s in
    mpi-tcp | mpi-vader)
      if command -v mpirun > /dev/null &&
        build mpi_allreduce "$SRC/mpi_allreduce.c" mpicc -O2 -Wall -o "$BIN/mpi_allreduce" "$SRC/mpi_allreduce.c"; then
        have+=("$s")
      else echo "SKIP $s: Open MPI (openmpi-bin libopenmpi-dev) missing or build failed"; fi ;;
    mem-limit)
      if build mem_limit "$SRC/mem_limit.c" cc -O3 -march=native -Wall -o "$BIN/mem_limit" "$SRC/mem_limit.c"; then
        have+=(mem-limit)
      else echo "SKIP mem-limit: build failed"; fi ;;
    gloo-ring)
      if build gloo_allreduce "$SRC/gloo_allreduce.cc" \
        g++ -O3 -std=c++17 -Wall -o "$BIN/gloo_allreduce" "$SRC/gloo_allreduce.cc" -lgloo -lpthread; then
        have+=(gloo-ring)
      else echo "SKIP gloo-ring: build failed (libgloo-dev missing?)"; fi ;;
    ringd | ringd-shm | ringd-ring | ringd-shm-ring)
      rdir=$(cd "$RINGD_BUILD" 2> /dev/null && pwd) || rdir=$RINGD_BUILD
      RL=$rdir/ring-launch RB=$rdir/ring-bench
      if [ -x "$RL" ] && [ -x "$RB" ]; then
        have+=("$s"); echo "$s: $RL, $RB"
      else
        echo "SKIP $s: $RINGD_BUILD/ring-launch or $RINGD_BUILD/ring-bench not found or not executable (set RINGD_BUILD)"
      fi ;;
  esac
done
if [ "$IPERF_SECS" -gt 0 ] && ! command -v iperf3 > /dev/null; then
  echo "SKIP iperf3: not installed"; IPERF_SECS=0
fi
((${#have[@]})) || { echo "nothing to measure"; exit 1; }

# ---------------------------------------------------------------- runners
# Each runner writes the run's raw output to $2 and prints "bytes time_us busbw check" rows.
MPI_TCP=(--oversubscribe --allow-run-as-root --mca pml ob1 --mca btl "self,tcp"
  --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
MPI_VADER=(--oversubscribe --allow-run-as-root --mca pml ob1 --mca btl "self,vader"
  --mca oob_tcp_if_include lo)

# mpi_allreduce / gloo_allreduce rows: "bytes count iters time_us algbw busbw check"
parse_baseline() { awk '$1 ~ /^[0-9]+$/ && NF >= 7 { print $1, $4, $6, $7 }' "$1"; }

run_mpi() { # n rawfile tcp|vader
  local n=$1 raw=$2 seg lo hi fac rc=0 opts=("${MPI_TCP[@]}")
  [ "$3" = vader ] && opts=("${MPI_VADER[@]}")
  for seg in "${segments[@]}"; do
    read -r lo hi fac <<< "$seg"
    echo "+ mpirun ${opts[*]} -n $n mpi_allreduce -b $lo -e $hi -f $fac -t $TARGET" >> "$raw"
    bounded "$RUN_TIMEOUT" mpirun "${opts[@]}" -n "$n" "$BIN/mpi_allreduce" \
      -l compare -b "$lo" -e "$hi" -f "$fac" -t "$TARGET" < /dev/null >> "$raw" 2>&1 || rc=$?
  done
  parse_baseline "$raw"
  return "$rc"
}

# inlined /work/shared/bench/gloo_run.sh: N ranks on 127.0.0.1, fresh FileStore
gloo_launch() { # n args...
  local n=$1 r p rc=0 pids=(); shift
  STORE=$(mktemp -d /tmp/gloo_store.XXXXXX) || return 1
  for ((r = 0; r < n; r++)); do
    RANK=$r SIZE=$n GLOO_STORE=$STORE GLOO_HOST=127.0.0.1 \
      timeout -k 5 "$RUN_TIMEOUT" "$BIN/gloo_allreduce" "$@" < /dev/null &
    pids+=($!); CHILDREN+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" || rc=$?
    forget "$p"
  done
  rm -rf "$STORE"; STORE=""
  return "$rc"
}
run_gloo() { # n rawfile
  local n=$1 raw=$2 seg lo hi fac rc=0
  for seg in "${segments[@]}"; do
    read -r lo hi fac <<< "$seg"
    echo "+ gloo_run $n gloo_allreduce -b $lo -e $hi -f $fac -t $TARGET" >> "$raw"
    gloo_launch "$n" -l compare -b "$lo" -e "$hi" -f "$fac" -t "$TARGET" >> "$raw" 2>&1 || rc=$?
  done
  parse_baseline "$raw"
  return "$rc"
}

run_ringd() { # n rawfile transport algo
  local n=$1 raw=$2 tp=$3 algo=$4 seg lo hi fac rc=0 extra=()
  [ "$RINGD_CHECK" = 1 ] && extra+=(-c)
  [ -n "${RINGD_ITERS:-}" ] && extra+=(-n "$RINGD_ITERS")
  # shellcheck disable=SC2206  # intentional word splitting of user-supplied flags
  [ -n "${RINGD_BENCH_ARGS:-}" ] && extra+=($RINGD_BENCH_ARGS)
  for seg in "${segments[@]}"; do
    read -r lo hi fac <<< "$seg"
    echo "+ RING_TRANSPORT=$tp RING_ALGO=$algo ring-launch --no-prefix --bind-to $RINGD_BIND -n $n -- ring-bench -b $lo -e $hi -f $fac -w $WARMUP -t $TARGET --csv ${extra[*]}" >> "$raw"
    RING_TRANSPORT=$tp RING_ALGO=$algo bounded "$RUN_TIMEOUT" "$RL" --no-prefix --bind-to "$RINGD_BIND" -n "$n" -- "$RB" -b "$lo" -e "$hi" -f "$fac" \
      -w "$WARMUP" -t "$TARGET" --csv "${extra[@]}" < /dev/null >> "$raw" 2>&1 || rc=$?
  done
  # CSV with a header naming the columns; tolerate a "[0] " prefix, CRs and extra columns
  awk -F, '{ sub(/\r$/, ""); sub(/^\[[0-9]+\] */, "") }
    /^bytes,/ { for (i = 1; i <= NF; i++) col[$i] = i; next }
    ("bytes" in col) && $1 ~ /^[0-9]+$/ && ("time_us" in col) && ("busbw_GBps" in col) {
      w = ("wrong" in col) ? $(col["wrong"]) : 0
      print $1, $(col["time_us"]), $(col["busbw_GBps"]), (w + 0 == 0 ? "ok" : "FAIL") }' "$raw"
  return "$rc"
}

run_mem_limit() { # n rawfile ; prints "bytes time_us busbw ok"
  bounded "$RUN_TIMEOUT" "$BIN/mem_limit" "$1" "$MEM_MIB" 5 < /dev/null > "$2" 2>&1
  awk '/^mem-limit / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    printf "%d %.1f %s ok\n", v["bytes"], (v["reduce_s"] + v["copy_s"]) * 1e6, v["busbw"] }' "$2"
}

run_iperf() { # rawfile ; prints GB/s of --bidir (both directions summed, receiver side)
  local raw=$1 srv
  timeout -k 5 $((IPERF_SECS + 20)) iperf3 -s -1 -B 127.0.0.1 -p "$IPERF_PORT" > /dev/null 2>&1 < /dev/null &
  srv=$!; CHILDREN+=("$srv")
  sleep 0.5
  bounded $((IPERF_SECS + 15)) iperf3 -c 127.0.0.1 -B 127.0.0.1 -p "$IPERF_PORT" -t "$IPERF_SECS" \
    --bidir -f g < /dev/null > "$raw" 2>&1
  wait "$srv" 2> /dev/null || kill "$srv" 2> /dev/null
  forget "$srv"
  awk '/\]\[(TX|RX)-C\].*receiver/ { for (i = 2; i <= NF; i++) if ($i == "Gbits/sec") { s += $(i - 1); k++ } }
    END { if (k == 2) printf "%.3f\n", s / 8 }' "$raw"
}

# ---------------------------------------------------------------- one measured run
# measure ROUND SYSTEM N : quiet wait, run, record rows with the run's foreign CPU
measure() {
  local r=$1 sys=$2 n=$3 raw rows q=yes ft fm fc rc t1 nrows nbad
  raw=$RAW/r$r-$sys-n$n.txt
  rows=$RAW/r$r-$sys-n$n.rows
  wait_quiet "$QUIET_WAIT" || q=no
  ft=$(foreign_ticks); fm=$(now_ms); t1=$fm
  # runners run in this shell (not in $(...)) so an interrupt can kill their children
  case $sys in
    mpi-tcp) run_mpi "$n" "$raw" tcp > "$rows"; rc=$? ;;
    mpi-vader) run_mpi "$n" "$raw" vader > "$rows"; rc=$? ;;
    gloo-ring) run_gloo "$n" "$raw" > "$rows"; rc=$? ;;
    ringd) run_ringd "$n" "$raw" tcp auto > "$rows"; rc=$? ;;
    ringd-shm) run_ringd "$n" "$raw" shm auto > "$rows"; rc=$? ;;
    ringd-ring) run_ringd "$n" "$raw" tcp ring > "$rows"; rc=$? ;;
    ringd-shm-ring) run_ringd "$n" "$raw" shm ring > "$rows"; rc=$? ;;
    mem-limit) run_mem_limit "$n" "$raw" > "$rows"; rc=$? ;;
    iperf3-bidir)
      run_iperf "$raw" > "$rows"; rc=$?
      awk -v us=$((IPERF_SECS * 1000000)) 'NF { print 0, us, $1, "ok" }' "$rows" > "$rows.tmp" &&
        mv "$rows.tmp" "$rows" ;;
  esac
  fc=$(foreign_cores "$ft" "$fm")
  nrows=$(awk 'END { print NR }' "$rows")
  nbad=$(awk '$4 != "ok"' "$rows" | wc -l)
  awk -v r="$r" -v s="$sys" -v n="$n" -v fc="$fc" \
    '{ printf "%s,%s,%s,%s,%s,%s,%s\n", r, s, n, $1, $2, $3, fc }' "$rows" >> "$CSV"
  printf '[round %d/%d t+%3ds] %-12s n=%d  %5.1f s  foreign %s cores%s  rows %d%s%s\n' \
    "$r" "$REPS" $(($(date +%s) - T0)) "$sys" "$n" "$(awk -v a="$t1" -v b="$(now_ms)" 'BEGIN { print (b - a) / 1000 }')" \
    "$fc" "$([ "$q" = no ] && echo ' (not quiet before)')" "$nrows" \
    "$([ "$nbad" -gt 0 ] && echo "  CHECK FAILED in $nbad rows")" \
    "$([ "$rc" -ne 0 ] && echo "  exit $rc (see $raw)")"
  if [ "$sys" = iperf3-bidir ]; then
    awk '{ printf "      --bidir sum %.3f GB/s\n", $3 }' "$rows"
  else
    awk '{ printf "      %12d B  %12.1f us  busbw %8.3f GB/s  %s\n", $1, $2, $3, $4 }' "$rows"
  fi
  return 0
}

# ---------------------------------------------------------------- rounds
read -r -a ns_arr <<< "$NS"
k=${#have[@]}
for ((r = 1; r <= REPS; r++)); do
  # rotate the system order each round; alternate the order of n; iperf first/last
  order=()
  for ((i = 0; i < k; i++)); do order+=("${have[(i + r - 1) % k]}"); done
  nord=("${ns_arr[@]}")
  ((r % 2 == 0)) && mapfile -t nord < <(printf '%s\n' "${ns_arr[@]}" | tac)
  jobs=()
  ((IPERF_SECS > 0 && r % 2 == 1)) && jobs+=("iperf3-bidir 2")
  for n in "${nord[@]}"; do
    for s in "${order[@]}"; do jobs+=("$s $n"); done
  done
  ((IPERF_SECS > 0 && r % 2 == 0)) && jobs+=("iperf3-bidir 2")
  for jb in "${jobs[@]}"; do
    read -r s n <<< "$jb"
    measure "$r" "$s" "$n"
  done
done

echo
echo "==================== summary ($(($(date +%s) - T0)) s; csv: $CSV)"
summary "$CSV"
