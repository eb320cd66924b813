#!/usr/bin/env bash
# gpu-python.sh BUNDLE RESULTS - the PyTorch checks and bars of CUDA tensors
# (issue 45) on a GPU host without network, run by a bundle's run.sh
# (tools/dev/gpu-bundle.sh --wheel PYTHON packs what it needs: a CUDA build of the
# ringd wheel for the host's CPython, the Python tests and the examples).
#
# It makes a venv over the host's own Python and torch (GPU_PYTHON, default
# python3; --system-site-packages, so torch is the host's), installs the
# wheel offline, and runs, printing one line each:
#   - tests/python/t-torch-cuda.py (allreduce of CUDA tensors bit for bit,
#     the stream contract, fp16 within the codec's bound, DistributedOptimizer,
#     the DDP hook and init_process_group("ringd") with a CUDA model, SSP);
#   - the speed bar: examples/pytorch/synthetic_mlp.py (25.2M parameters),
#     4 processes on the GPU, DDP over Gloo with CUDA tensors, ringd fp32 and
#     ringd fp16, interleaved REPS rounds (default 2), the medians and the
#     ratios (bars: fp16 >= 1.5x, fp32 >= 1.2x);
#   - examples/pytorch/fmnist_cnn.py --device cuda on 4 processes with the
#     bundle's Fashion-MNIST (bar: >= 91 % test accuracy);
#   - compute-sanitizer memcheck and racecheck over 2 processes of
#     allreduces of CUDA tensors through ringd, fp16 on the GPU and one
#     staged (where compute-sanitizer is installed).
# The lines of RESULTS/python-summary.txt say passed/failed per check.
set -u
B=$1 R=$2
PY=${GPU_PYTHON:-python3}
REPS=${REPS:-2}
mkdir -p "$R"
sum=$R/python-summary.txt
: > "$sum"
say() { echo "$*" | tee -a "$sum"; }

if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
    say "python: skipped: $PY has no torch with a usable GPU (set GPU_PYTHON)"
    exit 0
fi
tag=$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
wheel=$(ls "$B"/wheels/ringd-*-"$tag"-*.whl 2> /dev/null | head -1)
if [ -z "$wheel" ]; then
    say "python: skipped: no ringd wheel for $tag in $B/wheels (gpu-bundle.sh --wheel PYTHON)"
    exit 0
fi
venv=$R/venv
rm -rf "$venv"
"$PY" -m venv --system-site-packages "$venv" &&
    "$venv/bin/pip" install -q --no-index --no-deps "$wheel" > "$R/pip.log" 2>&1 || {
    say "python: FAILED: could not install $wheel into a venv (see $R/pip.log)"
    exit 1
}
VPY=$venv/bin/python
export RING_LAUNCH=$venv/bin/ring-launch
say "python: $("$VPY" -c 'import torch, ringd; print("torch", torch.__version__, "CUDA", torch.version.cuda, "ringd", ringd.__version__, "on", torch.cuda.get_device_name(0))')"

# ---- the tests ------------------------------------------------------------------
start=$(date +%s)
RINGD_PY_PYTHON=$VPY RINGD_PY_PATH= RINGD_PY_SKIP= RINGD_PY_SAN= FMNIST=$B/data top_srcdir=$B/src \
    timeout 300 sh "$B/src/tests/python/run.sh" "$B/src/tests/python/t-torch-cuda.py" \
    > "$R/t-torch-cuda.tap" 2>&1
rc=$?
p=$(grep -E '^ok' "$R/t-torch-cuda.tap" | grep -v -c '# SKIP')
f=$(grep -c -E '^not ok' "$R/t-torch-cuda.tap")
s=$(grep -c -E '^ok .*# SKIP' "$R/t-torch-cuda.tap")
say "t-torch-cuda.py: $p passed, $f failed, $s skipped (exit $rc, $(($(date +%s) - start)) s)"
grep -E '^not ok' "$R/t-torch-cuda.tap" | head -5 | tee -a "$sum"

# ---- the speed bar: synthetic MLP, 4 processes on one GPU, interleaved -------------
mlp() { # NAME ARGS...: one run's samples/s (all peers), or "failed"
    local name=$1
    shift
    timeout 120 "$RING_LAUNCH" -n 4 -- "$VPY" "$B/src/examples/pytorch/synthetic_mlp.py" \
        --device cuda --steps 20 "$@" > "$R/mlp-$name-$rep.txt" 2>&1 &&
        sed -n 's/.*: \([0-9.]*\) samples\/s.*/\1/p' "$R/mlp-$name-$rep.txt" | head -1 || echo failed
}
declare -A runs
for rep in $(seq 1 "$REPS"); do
    runs[ddp]+="$(mlp ddp --backend ddp-gloo) "
    runs[fp32]+="$(mlp fp32 --backend ringd --codec none) "
    runs[fp16]+="$(mlp fp16 --backend ringd --codec fp16) "
done
median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "none"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
m_ddp=$(echo "${runs[ddp]}" | median) m32=$(echo "${runs[fp32]}" | median) m16=$(echo "${runs[fp16]}" | median)
say "synthetic_mlp, 4 processes on one GPU, samples/s per round: ddp-gloo ${runs[ddp]}| ringd fp32 ${runs[fp32]}| ringd fp16 ${runs[fp16]}"
if [ "$m_ddp" != none ] && [ "$m32" != none ] && [ "$m16" != none ]; then
    say "synthetic_mlp medians: ddp-gloo $m_ddp, ringd fp32 $m32 ($(awk -v a="$m32" -v b="$m_ddp" \
        'BEGIN { printf "%.2f", a / b }')x, bar 1.2), ringd fp16 $m16 ($(awk -v a="$m16" -v b="$m_ddp" \
        'BEGIN { printf "%.2f", a / b }')x, bar 1.5)"
else
    say "synthetic_mlp: FAILED: a system gave no figure (see $R/mlp-*.txt)"
fi

# ---- fmnist_cnn on 4 processes --------------------------------------------------------
if [ -d "$B/data" ]; then
    FMNIST=$B/data timeout 300 "$RING_LAUNCH" -n 4 -- "$VPY" "$B/src/examples/pytorch/fmnist_cnn.py" \
        --device cuda > "$R/fmnist-cnn.txt" 2>&1
    rc=$?
    acc=$(sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p' "$R/fmnist-cnn.txt" | tail -1)
    say "fmnist_cnn.py --device cuda, 4 processes, its default 15 epochs: exit $rc, test accuracy ${acc:-none} (bar 0.91)"
else
    say "fmnist_cnn.py: skipped: the bundle has no data (gpu-bundle.sh --with-data)"
fi

# ---- compute-sanitizer over ringd's device path from torch ------------------------------
if command -v compute-sanitizer > /dev/null; then
    cat > "$R/cs-check.py" << 'EOF'
import torch, ringd
ringd.init(codec="fp16")  # 2 peers: fp16 encoded, reduced and decoded on the GPU
x = torch.randn(1 << 20, device="cuda")
for _ in range(3):
    ringd.allreduce(x)
ringd.allreduce(x, codec="exact").sum().item()  # exact: fp32 on the wire, staged
ringd.shutdown()
print("ok")
EOF
    for tool in memcheck racecheck; do
        timeout 150 compute-sanitizer --tool "$tool" --target-processes all "$RING_LAUNCH" -n 2 -- \
            "$VPY" "$R/cs-check.py" > "$R/python-$tool.log" 2>&1
        say "compute-sanitizer $tool, ringd.allreduce of CUDA tensors: $(grep 'ERROR SUMMARY' \
            "$R/python-$tool.log" | sort -u | paste -sd' ' -)"
    done
fi
grep -q -E 'FAILED|[1-9][0-9]* failed' "$sum" && exit 1
exit 0
