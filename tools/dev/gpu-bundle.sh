#!/usr/bin/env bash
# gpu-bundle.sh - pack a CUDA build's GPU checks to run on a machine that has a
# GPU but not the build's libraries (a GPU node without the packages, a
# container), as docs/testing.md ("On a GPU") describes.
#
#   tools/dev/gpu-bundle.sh [--with-data] [--wheel PYTHON] BUILD_DIR OUT_DIR
#
# OUT_DIR gets bin/ (the CUDA tests, t-cnn, t-shm, ringd, ring-launch,
# ring-bench), lib/ (libringd and every library they load outside glibc and
# the CUDA toolkit, large ones xz-compressed), data/ with --with-data (the
# Fashion-MNIST files, 30 MB) and run.sh. --wheel PYTHON adds wheels/ (a
# CUDA build of the ringd wheel for PYTHON's CPython, by build-wheels.sh;
# use the GPU host's version, e.g. a pyenv 3.12), the Python tests and
# examples it runs (src/) and gpu-python.sh, which run.sh calls: PyTorch
# with CUDA tensors, the speed bar and fmnist_cnn (tools/dev/gpu-python.sh
# says what). On the GPU machine:
#
#   OUT_DIR/run.sh [RESULTS_DIR]     (default /tmp/gpu-results)
#
# run.sh finds cuDNN and cuBLAS there (the toolkit's, or pip's nvidia-*
# packages), runs each test into RESULTS_DIR/NAME.tap, compute-sanitizer's
# memcheck and racecheck on t-cuda and t-cuda-device (its quick run) and
# memcheck on t-cuda-kernels where it is installed, and with data
# fmnist-cnn on the CPU and the GPU, ring-bench with device buffers (the
# codec's bar), and with wheels gpu-python.sh (GPU_PYTHON: the host's
# Python with torch, default python3); it ends with "N passed, N failed, N
# skipped" and exits 1 if a test failed. GPU_TESTS limits the tests run
# (names, e.g. "t-cuda") and skips the rest. Where Open MPI's mpicc is
# found, run.sh also runs issue 49's shared-memory comparison on the host's
# cores (compare/: compare-baselines.sh with NS="4 8": ringd's shm rows
# against Open MPI's vader and the memory limit; SHM_COMPARE=0 skips it).
set -euo pipefail
with_data=0 wheel_py=""
while [ $# -gt 0 ]; do
    case $1 in
    --with-data) with_data=1; shift ;;
    --wheel) [ $# -ge 2 ] || { echo "gpu-bundle: --wheel needs a Python" >&2; exit 2; }
        wheel_py=$2; shift 2 ;;
    *) break ;;
    esac
done
if [ $# -ne 2 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    [ $# -eq 1 ] && { [ "$1" = --help ] || [ "$1" = -h ]; } && exit 0
    exit 2
fi
b=$1 out=$2
top=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "gpu-bundle: $*" >&2; exit 1; }
grep -q '^#define RING_HAVE_CUDA 1' "$b/ring_build.h" 2>/dev/null ||
    die "$b is not a CUDA build (ring_build.h: RING_HAVE_CUDA is not 1); configure where nvcc is found"
for f in tests/ring/t-cuda tests/unit/t-cuda-kernels tests/ring/t-cuda-device tests/ring/t-cuda-staging tests/unit/t-cnn tests/ring/t-shm \
         .libs/ringd .libs/ring-bench \
         .libs/ring-launch .libs/libringd.so.0; do
    [ -e "$b/$f" ] || die "$b/$f is missing: run 'make' and 'make check TESTS=' in $b first"
done
if ldd "$b/tests/ring/t-cuda" | grep -q -E 'libasan|libubsan'; then
    die "$b is a sanitizer build (its programs need the compiler's runtime): bundle a plain build"
fi
mkdir -p "$out/bin" "$out/lib"
cp "$b/tests/ring/t-cuda" "$b/tests/unit/t-cuda-kernels" "$b/tests/ring/t-cuda-device" "$b/tests/ring/t-cuda-staging" "$b/tests/unit/t-cnn" \
   "$b/tests/ring/t-shm" "$b/.libs/ringd" "$b/.libs/ring-bench" "$b/.libs/ring-launch" "$out/bin/"
cp -L "$b/.libs/libringd.so.0" "$out/lib/"
# what they load, but glibc's and the compiler's runtime (every system has them,
# and an older copy would shadow the newer one cuDNN may need) and the CUDA
# toolkit's (the GPU machine has those, matched to its driver)
skip_re='/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so'
skip_re="$skip_re|/libcud|/libcublas|/libnv"
for f in "$out"/bin/* "$out/lib/libringd.so.0"; do
    LD_LIBRARY_PATH="$out/lib" ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | grep -v -E "$skip_re" | grep -v "^$out/" | while read -r lib; do
    name=$(basename "$lib")
    cp -L "$lib" "$out/lib/$name"
    if [ "$(stat -c %s "$out/lib/$name")" -gt 2000000 ]; then xz -f -T2 "$out/lib/$name"; fi
done
if [ "$with_data" = 1 ]; then
    mkdir -p "$out/data"
    cp /usr/share/datasets/fashion-mnist/*.gz "$out/data/" ||
        die "no Fashion-MNIST in /usr/share/datasets/fashion-mnist (apt-get install dataset-fashion-mnist)"
fi
if [ -n "$wheel_py" ]; then
    mkdir -p "$out/wheels" "$out/src/tests/python" "$out/src/examples/pytorch"
    echo "gpu-bundle: a CUDA wheel for $wheel_py (tools/wheel/build-wheels.sh, a minute or two)"
    RINGD_WITH_CUDA=${RINGD_WITH_CUDA:-1} "$top/tools/wheel/build-wheels.sh" -o "$out/wheels" "$wheel_py" |
        sed 's/^/   /' || die "could not build a CUDA wheel for $wheel_py"
    cp "$top"/tests/python/{run.sh,ringtest.py,param_digest.py,t-torch-cuda.py} "$out/src/tests/python/"
    cp "$top"/examples/pytorch/*.py "$out/src/examples/pytorch/"
    cp "$top/tools/dev/gpu-python.sh" "$out/"
fi
mkdir -p "$out/compare/baselines"
cp "$top/tools/compare/compare-baselines.sh" "$out/compare/"
cp "$top"/tools/compare/baselines/{mpi_allreduce.c,gloo_allreduce.cc,mem_limit.c} "$out/compare/baselines/"
cat > "$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# run.sh - the GPU checks of a ringd CUDA build (made by tools/dev/gpu-bundle.sh)
set -u
B=$(cd "$(dirname "$0")" && pwd)
R=${1:-/tmp/gpu-results}
mkdir -p "$R"
for f in "$B"/lib/*.xz; do [ -e "$f" ] && xz -d -f "$f"; done
gpu_libs=$(find /usr/local /opt /usr/lib /usr/lib64 -xdev \( -name 'libcudnn.so.*' -o \
    -name 'libcublas.so.*' \) 2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd: -)
export LD_LIBRARY_PATH="$B/lib${gpu_libs:+:$gpu_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "# $(uname -n): $(getconf _NPROCESSORS_ONLN) cpus; GPUs: $(nvidia-smi -L 2>/dev/null | wc -l)"
echo "# LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
missing=$(for x in "$B"/bin/*; do ldd "$x" | grep 'not found'; done | sort -u)
[ -n "$missing" ] && echo "# not found (the programs that need them will fail): $missing"
pass=0 fail=0 skips=0
for t in ${GPU_TESTS:-t-cuda t-cuda-kernels t-cuda-device t-cuda-staging t-cnn t-shm}; do
    timeout 300 "$B/bin/$t" > "$R/$t.tap" 2>&1
    rc=$?
    p=$(grep -E '^ok' "$R/$t.tap" | grep -v -c '# SKIP')
    s=$(grep -c -E '^ok .*# SKIP' "$R/$t.tap")
    f=$(grep -c -E '^not ok' "$R/$t.tap")
    [ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
    echo "$t: $p passed, $f failed, $s skipped (exit $rc)"
    grep -E '^not ok' "$R/$t.tap" | head -5
    pass=$((pass + p)) fail=$((fail + f)) skips=$((skips + s))
done
if command -v compute-sanitizer > /dev/null && [ -z "${GPU_TESTS:-}" ]; then
    # every launch is slow under the sanitizers: t-cuda-device's quick run (one ring, small sizes)
    for run in "memcheck t-cuda" "racecheck t-cuda" "memcheck t-cuda-kernels" \
               "memcheck t-cuda-device" "racecheck t-cuda-device"; do
        set -- $run
        T_CUDA_DEVICE_QUICK=1 timeout 150 compute-sanitizer --tool "$1" --target-processes all \
            "$B/bin/$2" > "$R/$2-$1.log" 2>&1
        echo "compute-sanitizer $1 $2: exit $?, $(grep 'ERROR SUMMARY' "$R/$2-$1.log" | sort -u | paste -sd' ' -)"
    done
fi
if [ -z "${GPU_TESTS:-}" ]; then
    # issue 45's bar: the codec pays on the GPU. n=4 on one GPU, 64 MiB of device
    # buffers, every link capped at 1 gbit: fp16 encoded on the GPU vs fp32 (checked)
    cuda_rt=$(find /usr/local /opt /usr/lib /usr/lib64 / -maxdepth 8 -xdev -name 'libcudart.so*' \
        2>/dev/null | head -1)
    [ -n "$cuda_rt" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$cuda_rt")"
    for codec in fp16 none; do
        timeout 300 "$B/bin/ring-launch" -n 4 -- "$B/bin/ring-bench" --device cuda -b 64M -e 64M \
            -n 3 -w 1 -c --rate-limit 1gbit --codec "$codec" > "$R/bench-device-$codec.txt" 2>&1
        echo "ring-bench --device cuda n=4 64M 1gbit codec $codec: exit $?; $(grep -E '^ +[0-9]' \
            "$R/bench-device-$codec.txt" | awk '{print "algbw " $5 " GB/s, busbw " $6 ", wrong " $7}')"
    done
    a16=$(grep -E '^ +[0-9]' "$R/bench-device-fp16.txt" | awk '{print $5}')
    a32=$(grep -E '^ +[0-9]' "$R/bench-device-none.txt" | awk '{print $5}')
    [ -n "$a16" ] && [ -n "$a32" ] &&
        echo "device fp16 / fp32 algbw: $(awk -v a="$a16" -v b="$a32" 'BEGIN { printf "%.2f", a / b }') (bar: >= 1.9)"
fi
if [ -d "$B/data" ] && [ -z "${GPU_TESTS:-}" ]; then
    for d in cpu cuda; do
        echo "ringd fmnist-cnn --device $d, 1 peer, 400 steps:"
        RING_DATA_DIR="$B/data" timeout 300 "$B/bin/ringd" --workload fmnist-cnn --device "$d" \
            --max-steps 400 --eval-every 0 --progress off 2>&1 | grep -E 'accuracy|samples/s|error'
    done
fi
if [ "${SHM_COMPARE:-1}" = 1 ] && [ -z "${GPU_TESTS:-}" ] && command -v mpicc > /dev/null; then
    # issue 49: shm at n=4 and 8 against Open MPI vader and the memory limit, on this
    # host's cores (its summary ends the log; the CSV and raw runs stay in $R/compare)
    echo "shared-memory comparison (compare-baselines.sh NS=\"4 8\", a few minutes):"
    OUT="$R/compare" RINGD_BUILD="$B/bin" NS="4 8" REPS=3 IPERF_SECS=0 \
        SYSTEMS="mpi-vader ringd-shm ringd-shm-ring mem-limit" \
        timeout 900 "$B/compare/compare-baselines.sh" > "$R/compare.log" 2>&1
    echo "compare-baselines: exit $?"
    sed -n '/==== summary/,$p' "$R/compare.log"
fi
if [ -d "$B/wheels" ] && [ -z "${GPU_TESTS:-}" ]; then
    "$B/gpu-python.sh" "$B" "$R" || fail=$((fail + 1))
    line=$(grep '^t-torch-cuda.py:' "$R/python-summary.txt" 2> /dev/null)
    if [ -n "$line" ]; then
        set -- $(echo "$line" | sed 's/[^0-9 ]//g')
        pass=$((pass + $1)) fail=$((fail + $2)) skips=$((skips + $3))
    fi
fi
echo "$pass passed, $fail failed, $skips skipped"
[ "$fail" = 0 ]
EOF
chmod +x "$out/run.sh"
echo "gpu-bundle: $out ($(du -sh "$out" | cut -f1)); on the GPU machine: $out/run.sh [RESULTS_DIR]"
