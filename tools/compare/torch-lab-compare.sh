#!/usr/bin/env bash
# torch-lab-compare.sh - PyTorch training on ringd against PyTorch DDP with
# the Gloo backend, one peer per "host" of a namespace lab (tools/lab/netns-lab.sh),
# on the same model, batch and bucket size, interleaved round by round.
set -u

usage() {
    cat << 'EOF'
Usage: tools/compare/torch-lab-compare.sh [--help] [BUILD_DIR]

Runs examples/pytorch/synthetic_mlp.py (a 25M-parameter MLP whose steps are
communication-bound; 6 hidden layers of 2048) with N peers, one per lab host, REPS rounds in a
rotating order of:
  ddp-gloo     torch.nn.parallel.DistributedDataParallel over Gloo
  ringd-fp32   ringd.torch.DistributedOptimizer, fp32 on the wire (--codec none)
  ringd-fp16   ringd.torch.DistributedOptimizer, fp16 on the wire (--codec fp16)
  ringd-fp16-s1  the same with staleness=1 (step t applies step t-1's average;
               only when SYSTEMS names it)
  ringd-fp16-ov  ringd-fp16 with overlap_step=True (each bucket's update as its
               average lands; only when SYSTEMS names it)
  psgd1, psgd4   DDP over the "ringd" backend with PyTorch's PowerSGD hook of rank
               1 or 4 (fp32 on the wire; only when SYSTEMS names them)
  gloo-psgd1, gloo-psgd4  the same over Gloo (only when SYSTEMS names them)
and prints each run's samples/s (all peers) and last loss, the medians and the
ratios ringd-fp16 / ddp-gloo and ringd-fp32 / ddp-gloo.

RATE caps every link both ways (tc tbf), e.g. RATE=1gbit; RATE=off leaves the
links uncapped (veth: memory speed). BUILD_DIR holds the build (its
python/ has the ringd package; default ./_build/dev, else .).
Environment: SYSTEMS ("ddp-gloo ringd-fp32 ringd-fp16"), N (4), RATE (1gbit), REPS (3), STEPS (10), LR (1e-4), BATCH (32), WIDTH
(2048), LAYERS (6 hidden layers of WIDTH; WIDTH=4096 LAYERS=2 is as many parameters, two
thirds in one layer), BUCKET_MB (25), THREADS (1 torch thread per peer), OUT
(/tmp/ringd-torch-lab), PYTHON (/usr/bin/python3).
Needs root and iproute2. The lab is always torn down.
EOF
}
[ "${1:-}" = --help ] || [ "${1:-}" = -h ] && { usage; exit 0; }
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
BUILD=${1:-}
[ -n "$BUILD" ] || { [ -d "$TOP/_build/dev/python/ringd" ] && BUILD=$TOP/_build/dev || BUILD=.; }
BUILD=$(cd "$BUILD" && pwd)
N=${N:-4}
RATE=${RATE:-1gbit}
REPS=${REPS:-3}
STEPS=${STEPS:-10}
LR=${LR:-1e-4}
BATCH=${BATCH:-32}
WIDTH=${WIDTH:-2048}
LAYERS=${LAYERS:-6}
BUCKET_MB=${BUCKET_MB:-25}
THREADS=${THREADS:-1}
OUT=${OUT:-/tmp/ringd-torch-lab}
PY=${PYTHON:-/usr/bin/python3}
L=$BUILD/ring-launch
LAB=$HERE/../lab/netns-lab.sh
SCRIPT=$TOP/examples/pytorch/synthetic_mlp.py
[ -d "$BUILD/python/ringd" ] && [ -x "$L" ] ||
    { echo "torch-lab-compare: no ringd package or ring-launch in $BUILD (build first)" >&2; exit 2; }
"$PY" -c 'import torch' 2> /dev/null || { echo "torch-lab-compare: $PY has no torch (apt-get install python3-torch)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "torch-lab-compare: needs root (the namespace lab)" >&2; exit 77; }
mkdir -p "$OUT"
for v in $(compgen -e | grep '^RING_'); do unset "$v"; done

name=tl$$
"$LAB" up "$N" --name "$name" > "$OUT/lab.env" || exit $?
trap '"$LAB" down "$name" > /dev/null 2>&1' EXIT
eval "$(cat "$OUT/lab.env")"
if [ "$RATE" != off ]; then
    "$LAB" cap "$name" "$RATE" > /dev/null || { echo "torch-lab-compare: cannot cap the links" >&2; exit 1; }
fi
read -r -a addrs <<< "$NETNS_LAB_ADDRS"
port=$((33000 + RANDOM % 4000))

# run SYSTEM: one training run under ring-launch, every peer in its host (the first
# that fails stops the others); prints rank 0's samples/s and last loss
run() {
    local sys=$1 env_r backend
    port=$((port + N + 1))
    case $sys in
    ddp-gloo | gloo-psgd*) env_r="RANK={rank} WORLD_SIZE=$N MASTER_ADDR=${addrs[0]} MASTER_PORT=$port GLOO_SOCKET_IFNAME=eth0" ;;
    psgd*) env_r="RING_CONNECT_TIMEOUT=60 RING_CODEC=none MASTER_ADDR=${addrs[0]} MASTER_PORT=$port GLOO_SOCKET_IFNAME=eth0" ;;
    *) env_r="RING_CONNECT_TIMEOUT=60" ;; # ring-launch gives RING_RANK and RING_PEERS
    esac
    case $sys in
    psgd*) backend="ddp-ringd --powersgd ${sys#psgd}" ;;
    gloo-psgd*) backend="ddp-gloo --powersgd ${sys#gloo-psgd}" ;;
    *) backend=${sys%%-fp*} ;;
    esac
    timeout 660 "$L" -n "$N" --timeout 600 --hosts "$(echo "${addrs[*]}" | tr ' ' ,)" \
        --base-port $((port + 1)) --exec-prefix "$LAB exec $name {node} -- env $env_r \
            PYTHONPATH=$BUILD/python OMP_NUM_THREADS=$THREADS" \
        -- "$PY" "$SCRIPT" --backend $backend --lr "$LR" --codec "$(case $sys in *fp16*) echo fp16 ;; *) echo none ;; esac)" \
            --staleness "$(case $sys in *-s1) echo 1 ;; *) echo 0 ;; esac)" \
            $(case $sys in *-ov) echo --overlap-step ;; esac) \
            --steps "$STEPS" --batch "$BATCH" --width "$WIDTH" --layers "$LAYERS" --bucket-mb "$BUCKET_MB" \
            --threads "$THREADS" > "$OUT/$sys.out" 2>&1
    sed -n 's/^\[0\] .* \([0-9.]*\) samples\/s.*last loss \([0-9.]*\).*/\1,\2/p' "$OUT/$sys.out" | tail -1
}

echo "# N=$N hosts, links ${RATE} both ways, synthetic MLP $LAYERS hidden layers of $WIDTH, batch $BATCH per peer, $STEPS steps, lr $LR, buckets ${BUCKET_MB} MiB, $REPS rounds, $(getconf _NPROCESSORS_ONLN) cores"
echo "round,system,samples_per_s,last_loss" | tee "$OUT/runs.csv"
systems=${SYSTEMS:-ddp-gloo ringd-fp32 ringd-fp16}
for round in $(seq 1 "$REPS"); do
    set -- $systems
    for _ in $(seq 1 $(((round - 1) % $#))); do set -- "$@" "$1"; shift; done
    for s in "$@"; do
        res=$(run "$s")
        echo "$round,$s,${res:-nan,nan}" | tee -a "$OUT/runs.csv"
    done
done
awk -F, 'NR > 1 && $3 != "nan" { k = $2; n[k]++; v[k, n[k]] = $3; loss[k] += $4 }
    function med(k,   i, j, t, w) {
        for (i = 1; i <= n[k]; i++) w[i] = v[k, i]
        for (i = 1; i <= n[k]; i++) for (j = i + 1; j <= n[k]; j++) if (w[j] < w[i]) { t = w[i]; w[i] = w[j]; w[j] = t }
        return n[k] % 2 ? w[(n[k] + 1) / 2] : (w[n[k] / 2] + w[n[k] / 2 + 1]) / 2 }
    END {
        printf "# medians (samples/s, all peers), and the mean last loss\n"
        for (k in n) { m[k] = med(k); printf "%-13s %10.1f  %.5f\n", k, m[k], loss[k] / n[k] }
        if (("ringd-fp16" in n) && ("ddp-gloo" in n)) printf "ringd-fp16 / ddp-gloo: %.2f\n", m["ringd-fp16"] / m["ddp-gloo"]
        if (("ringd-fp32" in n) && ("ddp-gloo" in n)) printf "ringd-fp32 / ddp-gloo: %.2f\n", m["ringd-fp32"] / m["ddp-gloo"]
        if (("ringd-fp16-s1" in n) && ("ddp-gloo" in n)) printf "ringd-fp16-s1 / ddp-gloo: %.2f\n", m["ringd-fp16-s1"] / m["ddp-gloo"]
        if (("ringd-fp16-ov" in n) && ("ddp-gloo" in n)) printf "ringd-fp16-ov / ddp-gloo: %.2f\n", m["ringd-fp16-ov"] / m["ddp-gloo"]
    }' "$OUT/runs.csv"
