#!/bin/sh
# run.sh SCRIPT: run one Python test of the ringd package (TAP on stdout) with
# the interpreter configure found, the build tree's package first on
# PYTHONPATH and no bytecode written. python/python.am passes:
#   RINGD_PY_PYTHON  the interpreter (configure's PYTHON)
#   RINGD_PY_PATH    $(abs_builddir)/python, which holds the importable ringd/
#   RINGD_PY_SKIP    why the package was not built ("" when it was)
#   RINGD_PY_SAN     the sanitizer flags of a --enable-sanitizers build ("" otherwise)
#   RINGD_PY_ASAN    the ASan runtime to preload in that build
# In a sanitizer build the extension and libringd are instrumented but the
# interpreter is not: the ASan runtime must be loaded first, so it is
# preloaded, and leak checking is off (CPython keeps its objects at exit by
# design; those are not ringd's leaks).
script=$1
name=$(basename "$script")
if [ -n "$RINGD_PY_SKIP" ]; then
    echo "1..0 # SKIP the Python package is not built: $RINGD_PY_SKIP"
    exit 0
fi
if [ -n "$RINGD_PY_SAN" ]; then
    if [ -z "$RINGD_PY_ASAN" ]; then
        echo "1..0 # SKIP sanitizer build, and no ASan runtime was found to preload into $RINGD_PY_PYTHON"
        exit 0
    fi
    # libstdc++ too, so that ASan finds the real __cxa_throw when it starts: torch's
    # threads throw C++ exceptions (Gloo at shutdown), and without it ASan aborts on a
    # CHECK in its interceptor (asan_interceptors.cpp:320) instead of throwing
    stdcxx=$(dirname "$RINGD_PY_ASAN")/libstdc++.so.6
    [ -f "$stdcxx" ] || stdcxx=$(ldconfig -p 2> /dev/null | sed -n 's/.*libstdc++\.so\.6 (libc6,x86-64) => //p' | head -1)
    LD_PRELOAD=$RINGD_PY_ASAN${stdcxx:+:$stdcxx}${LD_PRELOAD:+:$LD_PRELOAD}
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
    export LD_PRELOAD ASAN_OPTIONS
fi
PYTHONPATH=$RINGD_PY_PATH${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
RINGD_TEST_PYTHON=$RINGD_PY_PYTHON
export PYTHONPATH PYTHONDONTWRITEBYTECODE RINGD_TEST_PYTHON
# On a CPU this OpenBLAS does not know (an AVX-512 BF16 Xeon for Debian's 0.3.21), every
# process of a test gets the kernels ring-launch would give its ranks: the tests compare
# runs started with and without ring-launch bit for bit, and a process started by hand
# would warn (PerformanceWarning) and run other kernels. A value set by the caller stays.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    core=$("$RINGD_PY_PYTHON" -c 'import ringd; a = ringd._ringd.blas_advice(); print(a[0] if a else "")' 2> /dev/null)
    [ -n "$core" ] && OPENBLAS_CORETYPE=$core && export OPENBLAS_CORETYPE
fi
# a user's RING_* (or launcher) variables must not leak into the tests
for v in $(env | sed -n 's/^\(RING_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in RING_LAUNCH) ;; *) unset "$v" ;; esac
done
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE SLURM_PROCID SLURM_NTASKS \
    SLURM_STEP_NUM_TASKS RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT TF_CONFIG \
    JOB_COMPLETION_INDEX
exec "$RINGD_PY_PYTHON" "$script"
