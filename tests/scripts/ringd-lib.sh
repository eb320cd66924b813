# ringd-lib.sh - what every shell test shares: TAP output, bounded command
# runs, a private temporary directory, a clean RING_* environment, metrics
# helpers and finding a rank's process. Sourced, not run.
#
# The test sets PLAN (its number of checks) before sourcing, and NEEDS when
# it needs other programs than ringd and ring-launch (words among ringd,
# ring-launch, ring-bench, python3; empty: the test checks for itself), and
# RUN_TMPDIR when the commands it runs must keep their temporary files
# there. It gets D (ringd), L (ring-launch), B (ring-bench), T (a temporary
# directory removed at exit, with every background job killed), the plan
# line printed, every check skipped with the reason when a needed program is
# missing, and OPENBLAS_CORETYPE as ring-launch would set it (below).

D=${RINGD:-${top_builddir:-.}/ringd}
L=${RING_LAUNCH:-${top_builddir:-.}/ring-launch}
B=${RING_BENCH:-${top_builddir:-.}/ring-bench}
echo "1..$PLAN"
# skip_all WHY: every check of the plan skipped, and the test ends
skip_all() {
    local i
    for i in $(seq 1 "$PLAN"); do echo "ok $i # SKIP $1"; done
    exit 0
}
for need in ${NEEDS-ringd ring-launch}; do
    case $need in
    ringd) [ -x "$D" ] || skip_all "ringd not built ($D)" ;;
    ring-launch) [ -x "$L" ] || skip_all "ring-launch not built ($L)" ;;
    ring-bench) [ -x "$B" ] || skip_all "ring-bench not built ($B)" ;;
    python3) command -v python3 > /dev/null || skip_all "no python3" ;;
    *) skip_all "ringd-lib.sh: unknown NEEDS word '$need'" ;;
    esac
done
# the suite exports variables of its own; a user's RING_RANK must not leak in either
for v in $(compgen -e | grep '^RING_'); do
    unset "$v"
done
# ring-launch gives its ranks the BLAS kernels the CPU can run when OpenBLAS does
# not know it (OPENBLAS_CORETYPE, tools/launch/ring-launch.c); the same for ranks started
# by mpirun, srun or by hand, so that they compute the same bits (launchers.test
# compares their parameters) and ring-launch's output has no line about it
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x "$D" ]; then
    blas_advice=$("$D" --print-env 2>/dev/null |
        sed -n 's/^blas-kernels .*set OPENBLAS_CORETYPE=\([A-Za-z]*\).*/\1/p')
    [ -z "$blas_advice" ] || export OPENBLAS_CORETYPE=$blas_advice
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/ringd-test.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT

n=0
show() {
    sed 's/^/#   out: /' "$T/out" | tail -20
    sed 's/^/#   err: /' "$T/err" | tail -20
    echo "#   exit status: $rc"
}
# check DESCRIPTION COMMAND...: ok when the command succeeds
check() {
    local desc=$1
    shift
    n=$((n + 1))
    if "$@"; then
        echo "ok $n - $desc"
    else
        echo "not ok $n - $desc"
        failed=1
        show
    fi
}
skip_n() {
    local count=$1 why=$2
    for _ in $(seq 1 "$count"); do
        n=$((n + 1))
        echo "ok $n # SKIP $why"
    done
}
# run SECS ARGS...: output in $T/out and $T/err, status in $rc
run() {
    local secs=$1
    shift
    TMPDIR=${RUN_TMPDIR:-${TMPDIR:-/tmp}} timeout -k 5 "$secs" "$@" > "$T/out" 2> "$T/err" < /dev/null
    rc=$?
}
rc_is() { [ "$rc" -eq "$1" ]; }
# a usage or run-time error, not a timeout or a crash
failed_cleanly() { [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -lt 128 ]; }
err_has() { grep -qF -- "$1" "$T/err"; }
out_has() { grep -qF -- "$1" "$T/out"; }
# all 'CONDITION' ...: every condition (shell text) holds
all() { local c; for c in "$@"; do eval "$c" || return 1; done; }
# the parameter hash of a metrics file's final line
hash_of() { sed -n 's/.*"params_fnv1a64":"\([0-9a-f]*\)".*/\1/p' "$1" | tail -1; }
# same_hash PREFIX N: the final parameter hashes of PREFIX-0.jsonl .. PREFIX-(N-1).jsonl agree
same_hash() {
    local h0 r
    h0=$(hash_of "$1-0.jsonl")
    [ -n "$h0" ] || return 1
    for r in $(seq 1 $(($2 - 1))); do [ "$(hash_of "$1-$r.jsonl")" = "$h0" ] || return 1; done
}
# pid_of_rank TAG RANK: the ringd process of RANK started with RINGD_TEST_TAG=TAG
pid_of_rank() {
    local tag=$1 rank=$2 p
    for p in $(pgrep -x ringd; pgrep -x lt-ringd); do
        tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "RINGD_TEST_TAG=$tag" || continue
        tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "RING_RANK=$rank" && echo "$p"
    done
}
# wait_for_file FILE SECS: until FILE is non-empty (status 1 after SECS)
wait_for_file() {
    local i
    for i in $(seq 1 $(($2 * 10))); do [ -s "$1" ] && return 0; sleep 0.1; done
    return 1
}
