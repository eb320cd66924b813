#!/usr/bin/env bash
# quickstart.sh - the README's two commands, for a fresh Debian 12 machine as root.
#
#   tools/quickstart.sh run    install what is missing, build, run the main job (4 peers
#                              training the Fashion-MNIST MLP, ending with a summary table)
#   tools/quickstart.sh test   install what is missing, build, run the whole test suite:
#                              gcc -Werror build + make check, the same suite under
#                              AddressSanitizer + UBSan, a clang -Werror build that is
#                              also the fuzzing build (tests/fuzz, FUZZ_SECONDS each), and
#                              make distcheck with CUDA and verbs off (a part of the suite;
#                              tools/dev/dist-complete.sh checks the tarball ships every
#                              tracked file); the verbs suite
#                              in a QEMU guest (tests/lab/verbs.test) runs in the gcc pass only
#
# Environment: JOBS (make -j, default: number of cores), BUILD_ROOT (default:
# ./_build), SKIP_APT=1 (do not call apt-get), SKIP_ASAN=1, SKIP_CLANG=1,
# SKIP_DISTCHECK=1 (parts of `test` to leave out when iterating locally), DISTCHECK_FULL=1
# (make distcheck runs the whole suite, not only the part named in distcheck_tests).
# Ends with one line: "N passed, N failed, N skipped" (TAP results of every suite run).
set -euo pipefail

mode=${1:-}
case "$mode" in
run | test) ;;
*)
    echo "usage: $0 run|test   (see the header of this script)" >&2
    exit 2
    ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=${JOBS:-$(nproc)}
build_root=${BUILD_ROOT:-$top/_build}

# Debian 12 packages, grouped by what needs them
packages=(
    # the toolchain, the libraries ringd uses and its dataset
    build-essential autoconf automake libtool pkg-config liblz4-dev zlib1g-dev libjansson-dev
    libibverbs-dev libopenblas-dev libssl-dev dataset-fashion-mnist clang libclang-rt-14-dev
    # what the tests call: ip, unshare, flock, pgrep (tools/lab/netns-lab.sh and others),
    # python3 and iperf3 for tests/lab/netns-lab.test (it skips its rate-cap check
    # without iperf3)
    iproute2 util-linux procps python3 iperf3
    # tests/scripts/man.test renders the man pages with man -l
    man-db
    # tests/lab/verbs.test: a QEMU guest with Soft-RoCE (see tools/lab/rxe-vm)
    qemu-system-x86 busybox-static cpio kmod xz-utils ibverbs-providers librdmacm1
    ibverbs-utils perftest rdmacm-utils
    # tests/lab/launchers.test: mpirun, and a private Slurm started by tools/lab/slurm-lab.sh
    openmpi-bin munge slurmctld slurmd slurm-client
    # the Python package and tests/python (for /usr/bin/python3); numpy and matplotlib
    # for tools/experiments/ring-analyze (the experiments' tables and plots: ring-exp.test,
    # saturation.test, sweep.test, analysis-*.test)
    python3-numpy python3-torch python3-dev python3-matplotlib
    # tests/scripts/pip-install.test and the torch 2.x matrix: venvs, and a clean copy by git
    python3-venv git
)

install_missing() {
    [ -n "${SKIP_APT:-}" ] && return 0
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "== installing: ${missing[*]}"
    if [ "$(id -u)" != 0 ]; then
        echo "quickstart: need root to apt-get install ${missing[*]} (or install them and set SKIP_APT=1)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
}

# configure_build DIR [configure args...]: a fresh out-of-tree build in DIR
configure_build() {
    local dir=$1
    shift
    rm -rf "$dir"
    mkdir -p "$dir"
    (cd "$dir" && "$top/configure" "$@" > configure.out 2>&1) || {
        cat "$dir/configure.out" >&2
        echo "quickstart: configure failed in $dir" >&2
        return 1
    }
    tail -n 14 "$dir/configure.out"
    make -C "$dir" -j"$jobs" > "$dir/make.out" 2>&1 || {
        tail -n 60 "$dir/make.out" >&2
        echo "quickstart: build failed in $dir" >&2
        return 1
    }
}

passed=0 failed=0 skipped=0
# run_suite NAME DIR [make args...]: make check, then add its TAP totals
run_suite() {
    local name=$1 dir=$2 rc=0
    shift 2
    echo "== $name: make check"
    make -C "$dir" -j"$jobs" check "$@" > "$dir/check.out" 2>&1 || rc=$?
    grep -E '^(PASS|FAIL|XFAIL|XPASS|SKIP|ERROR): ' "$dir/check.out" | grep -vE '^PASS: ' || true
    local log=$dir/test-suite.log
    if [ -f "$log" ]; then
        local p f s x e
        p=$(awk '/^# PASS:/ {print $3}' "$log")
        f=$(awk '/^# FAIL:/ {print $3}' "$log")
        s=$(awk '/^# SKIP:/ {print $3}' "$log")
        x=$(awk '/^# XPASS:/ {print $3}' "$log")
        e=$(awk '/^# ERROR:/ {print $3}' "$log")
        echo "   $name: ${p:-0} passed, $((${f:-0} + ${x:-0} + ${e:-0})) failed, ${s:-0} skipped"
        passed=$((passed + ${p:-0}))
        failed=$((failed + ${f:-0} + ${x:-0} + ${e:-0}))
        skipped=$((skipped + ${s:-0}))
    fi
    if [ "$rc" != 0 ]; then
        # (|| true: with pipefail, grep killed by head's early exit would end the script)
        [ -f "$log" ] && { grep -E -A15 '^(FAIL|ERROR)' "$log" | head -n 120 || true; }
        [ -f "$log" ] || tail -n 40 "$dir/check.out"
        failed=$((failed + 1))
        echo "   $name: make check failed (exit $rc)"
    fi
}

install_missing
echo "== bootstrap"
./autogen.sh > /dev/null 2>&1 || ./autogen.sh

if [ "$mode" = run ]; then
    configure_build "$build_root/release"
    b=$build_root/release
    echo "== main job: 4 peers on loopback train the Fashion-MNIST MLP (ring-launch -n 4 -- ringd)"
    "$b/ring-launch" -n 4 --timeout 1800 -- "$b/ringd" --workload fmnist-mlp --epochs 15
    exit $?
fi

status=0
configure_build "$build_root/gcc" --enable-werror || status=1
[ $status = 0 ] && run_suite "gcc -Werror" "$build_root/gcc"
# tests/lab/verbs.test boots a QEMU guest (a few minutes under TCG), and the pip tests build
# ringd in venvs: once, in the gcc pass
export RING_SKIP_VM=1 RING_SKIP_PIP=1

if [ -z "${SKIP_ASAN:-}" ]; then
    if configure_build "$build_root/asan" --enable-sanitizers --enable-werror; then
        # sanitizer runs are slower: no spinning, and leak checks on exit
        run_suite "ASan+UBSan" "$build_root/asan" \
            TESTS_ENVIRONMENT="ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    else
        failed=$((failed + 1))
    fi
fi

if [ -z "${SKIP_CLANG:-}" ]; then
    # the clang build is also the fuzzing build: ASan+UBSan+libFuzzer, each harness of
    # tests/fuzz run FUZZ_SECONDS (default 15) on a copy of its seed corpus
    echo "== clang -Werror build, and the fuzzers"
    if configure_build "$build_root/clang" CC=clang --enable-werror --enable-fuzz; then
        fuzz_out=$build_root/clang/fuzz.out
        make -C "$build_root/clang" fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-15}" > "$fuzz_out" 2>&1 || true
        grep -E '^(ok|not ok|#)' "$fuzz_out" | sed 's/^/   /'
        fp=$(grep -c '^ok ' "$fuzz_out" || true)
        ff=$(grep -c '^not ok ' "$fuzz_out" || true)
        [ "$fp" -gt 0 ] || ff=$((ff + 1)) # no harness ran: that is a failure too
        passed=$((passed + fp))
        failed=$((failed + ff))
    else
        failed=$((failed + 1))
    fi
fi

# The tarball's own check: it must build, build every test program, and run the tests
# below from a read-only source tree (VPATH). The whole suite already ran twice above:
# here the unit tests and those that read the build's and the docs' files, under a
# minute instead of eight (DISTCHECK_FULL=1: all of them). What a partial run could
# miss, a file the tarball lacks, is checked against git's list of tracked files.
distcheck_tests() {
    awk -F'\t' '!/^#/ && $2 == "unit" { print $1 }' tests/test-list.tsv
    echo tests/scripts/cli.test tests/scripts/man.test tests/scripts/readme.test \
        tests/scripts/exports.test tests/scripts/layers.test tests/scripts/am-reader.test \
        tests/scripts/test-list.test tests/python/t-unit.py tests/python/t-allreduce.py \
        tests/ring/t-allreduce tests/ring/t-shm
}

if [ -z "${SKIP_DISTCHECK:-}" ]; then
    d=$build_root/dist
    subset=()
    if [ -n "${DISTCHECK_FULL:-}" ]; then
        echo "== make distcheck (CUDA and verbs off; every test)"
    else
        echo "== make distcheck (CUDA and verbs off; unit tests and the build's own checks)"
        subset=(TESTS="$(distcheck_tests | tr '\n' ' ')")
    fi
    configure_build "$d" || failed=$((failed + 1))
    if make -C "$d" -j"$jobs" distcheck "${subset[@]}" > "$d/distcheck.out" 2>&1; then
        grep -A2 'archives ready' "$d/distcheck.out"
        rc=0
        tools/dev/dist-complete.sh "$d"/ringd-*.tar.gz | sed 's/^/   /' || rc=$?
        case $rc in
        0) passed=$((passed + 1)) ;;
        77) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)) ;;
        esac
    else
        tail -n 60 "$d/distcheck.out"
        echo "   make distcheck failed"
        failed=$((failed + 1))
    fi
fi

[ $status = 0 ] || failed=$((failed + 1))
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
