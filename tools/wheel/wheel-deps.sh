#!/usr/bin/env bash
# wheel-deps.sh - the libraries of a manylinux_2_28 wheel of ringd, built from
# their sources with Zig's C compiler (zig cc -target x86_64-linux-gnu.2.28, which
# links against glibc 2.28's symbols whatever this machine's glibc is) into
# static, position-independent archives that the wheel's extension and programs
# link: lz4, zlib, jansson, OpenSSL's libcrypto and OpenBLAS (BLAS alone,
# single precision, DYNAMIC_ARCH). tools/wheel/build-wheels.sh --plat manylinux_2_28_x86_64
# runs it; docs/install.md says why.
#
#   tools/wheel/wheel-deps.sh [--prefix DIR] [-j N] [--check] [--print-prefix]
#
#   --prefix DIR    where they go (default: ~/.cache/ringd/wheel-deps-2.28):
#                   DIR/bin/{cc,ar,ranlib} (Zig, for this target), DIR/include,
#                   DIR/lib/*.a, DIR/src (the tarballs), DIR/.built (one stamp
#                   per library: its version, Zig's version and the recipe);
#                   also DIR/lib/libzig_cpu_model.a (tools/wheel/zig-cpu-model.c) and
#                   libibverbs-dev's headers in DIR/include/infiniband
#   -j N            compile N files at once (default: the number of CPUs)
#   --check         build nothing: exit 0 when every library is built and
#                   current, else 1, naming what is missing
#   --print-prefix  print DIR and exit
#
# A library is built again only when its stamp differs (a new version here, a
# new Zig); a cold cache takes about 6 minutes on 2 CPUs (OpenBLAS 4, OpenSSL 1.5).
# The sources are Debian's .orig tarballs (upstream releases; OpenBLAS without its
# bundled LAPACK), checked against the SHA-256 sums below. Zig keeps its own
# object cache (~250 MB) in ~/.cache/zig.
# Environment: RINGD_TOOLS_VENV (the venv that pip installs ziglang into; default
# ~/.cache/ringd/venv-wheel-tools), RINGD_ZIGLANG (the pip requirement, default
# ziglang==0.17.1), RINGD_DEPS_MIRROR (default https://deb.debian.org/debian),
# RINGD_DEPS_SOURCES (a directory holding the tarballs already: no download).
set -euo pipefail

usage() { sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() { echo "wheel-deps: $*" >&2; exit 1; }
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ringd
prefix=$cache/wheel-deps-2.28 jobs=$(nproc 2> /dev/null || echo 2) check=0
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    --check) check=1; shift ;;
    --print-prefix) echo "$prefix"; exit 0 ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done
target=x86_64-linux-gnu.2.28
[ "$(uname -m)" = x86_64 ] || die "builds for x86-64 only, on x86-64 (OpenBLAS runs its probes); this is $(uname -m)"
recipe=1 # bump when a build below changes: every library is built again
mirror=${RINGD_DEPS_MIRROR:-https://deb.debian.org/debian}/pool/main
# name version tarball (in Debian's pool) sha256
SOURCES="
lz4 1.10.0 l/lz4/lz4_1.10.0.orig.tar.gz 537512904744b35e232912055ccf8ec66d768639ff3abe5788d90d792ec5f48b
zlib 1.3.1 z/zlib/zlib_1.3.dfsg+really1.3.1.orig.tar.gz 60dd315c07f616887caa029408308a018ace66e3d142726a97db164b3b8f69fb
jansson 2.14 j/jansson/jansson_2.14.orig.tar.gz c739578bf6b764aa0752db9a2fdadcfe921c78f1228c7ec0bb47fa804c55d17b
openssl 3.5.7 o/openssl/openssl_3.5.7.orig.tar.gz a8c0d28a529ca480f9f36cf5792e2cd21984552a3c8e4aa11a24aa31aeac98e8
openblas 0.3.29 o/openblas/openblas_0.3.29+ds.orig.tar.xz eb691e2cff83799400da22aa6ab93ebaa346ad317fea578b7ae119e226ce1b01
"
# OpenBLAS's kernel sets (and PRESCOTT, always): a CPU without its own set runs the
# nearest one below it (driver/others/dynamic.c), e.g. AMD's Bulldozer family SANDYBRIDGE's
OPENBLAS_CORES="NEHALEM SANDYBRIDGE HASWELL ZEN SKYLAKEX COOPERLAKE SAPPHIRERAPIDS"

# ---- Zig, from PyPI into the tools venv ----
tools=${RINGD_TOOLS_VENV:-$cache/venv-wheel-tools}
zigreq=${RINGD_ZIGLANG:-ziglang==0.17.1}
zig_dir() { "$tools/bin/python" -c 'import os, ziglang; print(os.path.dirname(ziglang.__file__))' 2> /dev/null; }
if ! zd=$(zig_dir) || [ ! -x "$zd/zig" ]; then
    [ $check = 1 ] && { echo "wheel-deps: no Zig in $tools (tools/wheel/wheel-deps.sh installs it)"; exit 1; }
    echo "== Zig's C compiler: pip install $zigreq into $tools"
    [ -x "$tools/bin/pip" ] || python3 -m venv "$tools" ||
        die "could not make the venv $tools (apt-get install python3-venv)"
    "$tools/bin/pip" install -q "$zigreq" ||
        die "pip could not install $zigreq into $tools: PyPI unreachable? pip download it where PyPI is" \
            "and pip install the file into $tools, or set RINGD_TOOLS_VENV to a venv that has it"
    zd=$(zig_dir) || die "ziglang is installed in $tools but does not import"
fi
zigver=$("$zd/zig" version) || die "$zd/zig does not run"

stamp_of() { echo "$1 $2 zig-$zigver $target recipe-$recipe"; }
if [ $check = 1 ]; then
    stale=""
    while read -r name version _; do
        [ -n "$name" ] || continue
        [ "$(cat "$prefix/.built/$name" 2> /dev/null)" = "$(stamp_of "$name" "$version")" ] ||
            stale="$stale $name-$version"
    done <<< "$SOURCES"
    [ -z "$stale" ] && { echo "wheel-deps: $prefix is current (Zig $zigver)"; exit 0; }
    echo "wheel-deps: not built in $prefix:$stale (tools/wheel/wheel-deps.sh builds them)"
    exit 1
fi

# ---- the compiler: one command each, as builds want CC, AR and RANLIB ----
mkdir -p "$prefix/bin" "$prefix/include" "$prefix/lib" "$prefix/src" "$prefix/.built"
prefix=$(cd "$prefix" && pwd)
cat > "$prefix/bin/cc" << EOF
#!/bin/sh
# zig cc for $target (tools/wheel/wheel-deps.sh wrote this). GCC spells CPUs with
# dashes (-march=skylake-avx512), Zig with underscores after -mcpu, where a
# dash would remove a feature: -march=NAME becomes -mcpu=NAME_WITH_UNDERSCORES.
for a in "\$@"; do
    shift
    case \$a in -march=*) a=-mcpu=\$(printf %s "\${a#-march=}" | tr - _) ;; esac
    set -- "\$@" "\$a"
done
exec "$zd/zig" cc -target $target "\$@"
EOF
printf '#!/bin/sh\nexec "%s/zig" ar "$@"\n' "$zd" > "$prefix/bin/ar"
printf '#!/bin/sh\nexec "%s/zig" ranlib "$@"\n' "$zd" > "$prefix/bin/ranlib"
chmod +x "$prefix/bin/cc" "$prefix/bin/ar" "$prefix/bin/ranlib"
CC=$prefix/bin/cc AR=$prefix/bin/ar RANLIB=$prefix/bin/ranlib
# -O2 always: with no -O, zig cc compiles in debug mode with UBSan traps
CFLAGS="-O2 -fPIC"
echo "== Zig $zigver for $target; libraries in $prefix"

# ---- fetching and building ----
fetch() { # fetch NAME FILE SHA256: the tarball's path in $prefix/src
    local file=$2 sum=$3 base dest
    base=$(basename "$file") dest=$prefix/src/$(basename "$file")
    if [ -n "${RINGD_DEPS_SOURCES:-}" ] && [ -f "$RINGD_DEPS_SOURCES/$base" ]; then
        cp "$RINGD_DEPS_SOURCES/$base" "$dest.part"
    elif [ ! -f "$dest" ]; then
        command -v curl > /dev/null || die "no curl to fetch $base: apt-get install curl, or put" \
            "the file in a directory named by RINGD_DEPS_SOURCES"
        echo "   fetching $mirror/$file" >&2
        curl -fsSL --retry 3 -o "$dest.part" "$mirror/$file" ||
            die "could not fetch $mirror/$file; fetch it where the network allows and" \
                "set RINGD_DEPS_SOURCES to its directory (or RINGD_DEPS_MIRROR to a Debian mirror)"
    else
        cp "$dest" "$dest.part"
    fi
    echo "$sum  $dest.part" | sha256sum -c --quiet - > /dev/null 2>&1 ||
        { rm -f "$dest.part"; die "$base does not match its SHA-256 ($sum): a corrupt or changed file"; }
    mv "$dest.part" "$dest"
    echo "$dest"
}

step() { # step LOG WHAT COMMAND...: runs it niced, its output in LOG; on failure the log's tail
    local log=$1 what=$2
    shift 2
    echo "   $what"
    if ! nice -n 10 "$@" < /dev/null >> "$log" 2>&1; then
        tail -n 30 "$log" | sed 's/^/   | /' >&2
        die "$what failed (the full log: $log); the build directory is kept beside it"
    fi
}

build_lz4() {
    step "$log" "make liblz4.a" make -C lib -j"$jobs" liblz4.a CC="$CC" AR="$AR" CFLAGS="$CFLAGS"
    cp lib/liblz4.a "$prefix/lib/" && cp lib/lz4.h lib/lz4hc.h lib/lz4frame.h "$prefix/include/"
}
build_zlib() {
    step "$log" "configure --static" env CC="$CC" AR="$AR" RANLIB="$RANLIB" CFLAGS="$CFLAGS" \
        ./configure --static --prefix="$prefix"
    step "$log" "make libz.a" make -j"$jobs" libz.a
    step "$log" "make install" make install
}
build_jansson() {
    # the tarball is jansson's git tag: configure is made here (Debian does the same)
    command -v autoreconf > /dev/null && command -v libtoolize > /dev/null ||
        die "jansson's sources need autoreconf and libtoolize: apt-get install autoconf automake libtool"
    step "$log" "autoreconf -fi" autoreconf -fi
    step "$log" "configure --disable-shared" ./configure --prefix="$prefix" --disable-shared \
        --enable-static --with-pic CC="$CC" AR="$AR" RANLIB="$RANLIB" CFLAGS="$CFLAGS"
    step "$log" "make" make -j"$jobs"
    step "$log" "make install" make install
}
build_openssl() {
    # libcrypto alone is linked (SHA-256, HMAC, HKDF, X25519, AES-GCM, RAND); libssl is
    # built because install_dev wants it. No modules, engines or legacy provider
    # (nothing dlopen'ed at run time), no programs, tests or documentation.
    step "$log" "Configure linux-x86_64 no-shared" ./Configure linux-x86_64 no-shared no-module \
        no-legacy no-engine no-apps no-tests no-docs no-ui-console no-comp no-quic no-dtls no-ssl3 \
        no-srp no-ts no-cmp no-cms no-idea no-mdc2 no-rc5 no-camellia no-seed no-sm2 no-sm3 no-sm4 \
        no-aria no-whirlpool --prefix="$prefix" --libdir=lib --openssldir=/etc/ssl \
        CC="$CC" AR="$AR" RANLIB="$RANLIB" CFLAGS="$CFLAGS"
    step "$log" "make build_libs (the longest step but one)" make -j"$jobs" build_libs
    step "$log" "make install_dev" make install_dev
}
build_openblas() {
    # BLAS only (ringd calls cblas_sgemm, openblas_set_num_threads and
    # openblas_get_corename): no Fortran, LAPACK or LAPACKE; single precision;
    # pthreads; DYNAMIC_ARCH picks the CPU's kernels at run time (OPENBLAS_CORETYPE
    # chooses, as ring-launch does)
    local args=(CC="$CC" HOSTCC="$CC" AR="$AR" RANLIB="$RANLIB" TARGET=PRESCOTT DYNAMIC_ARCH=1
        DYNAMIC_LIST="$OPENBLAS_CORES" BUILD_SINGLE=1 NO_EXPRECISION=1 NOFORTRAN=1 NO_LAPACK=1
        NO_LAPACKE=1 NO_SHARED=1 USE_OPENMP=0 USE_THREAD=1 NUM_THREADS=128 COMMON_OPT=-O2)
    step "$log" "make libs: $(echo PRESCOTT $OPENBLAS_CORES | wc -w) kernel sets (the longest step)" \
        make -j"$jobs" "${args[@]}" libs
    step "$log" "make install" make "${args[@]}" PREFIX="$prefix" install
}

start_all=$(date +%s)
while read -r name version file sum; do
    [ -n "$name" ] || continue
    want=$(stamp_of "$name" "$version")
    if [ "$(cat "$prefix/.built/$name" 2> /dev/null)" = "$want" ]; then
        echo "== $name $version: built already"
        continue
    fi
    start=$(date +%s)
    echo "== $name $version"
    tarball=$(fetch "$name" "$file" "$sum")
    work=$prefix/build/$name log=$prefix/build/$name.log
    rm -rf "$work" "$log" "$prefix/.built/$name"
    mkdir -p "$work"
    tar -C "$work" --strip-components=1 -xf "$tarball" || die "could not unpack $tarball"
    (cd "$work" && "build_$name")
    echo "$want" > "$prefix/.built/$name"
    rm -rf "$work"
    echo "   $name $version: $(($(date +%s) - start)) s"
done <<< "$SOURCES"

# __builtin_cpu_supports() for zig cc (tools/wheel/zig-cpu-model.c says why), checked
# feature by feature against this machine's gcc, whose libgcc fills them right
echo "== libzig_cpu_model.a (__builtin_cpu_supports for zig cc)"
mkdir -p "$prefix/build/cpu"
"$CC" $CFLAGS -Wall -c "$(dirname "$0")/zig-cpu-model.c" -o "$prefix/build/cpu/cpu-model.o" &&
    rm -f "$prefix/lib/libzig_cpu_model.a" &&
    "$AR" rcs "$prefix/lib/libzig_cpu_model.a" "$prefix/build/cpu/cpu-model.o" ||
    die "could not compile tools/wheel/zig-cpu-model.c with $CC"
features="cmov mmx popcnt sse sse2 sse3 ssse3 sse4.1 sse4.2 avx avx2 sse4a fma4 xop fma avx512f bmi
    bmi2 aes pclmul avx512vl avx512bw avx512dq avx512cd avx512vbmi avx512ifma avx512vpopcntdq
    avx512vbmi2 gfni vpclmulqdq avx512vnni avx512bitalg avx512bf16 avx512vp2intersect"
{
    echo '#include <stdio.h>'
    echo 'int main(void) {'
    for f in $features; do echo "printf(\"$f=%d\\n\", __builtin_cpu_supports(\"$f\") != 0);"; done
    echo 'return 0; }'
} > "$prefix/build/cpu/features.c"
if ! command -v gcc > /dev/null; then
    echo "   no gcc here to compare __builtin_cpu_supports with: not checked"
elif ! gcc -o "$prefix/build/cpu/gcc" "$prefix/build/cpu/features.c" 2> /dev/null; then
    echo "   this gcc does not know every feature tested: not checked"
else
    "$CC" -O2 -o "$prefix/build/cpu/zig" "$prefix/build/cpu/features.c" \
        "$prefix/lib/libzig_cpu_model.a" 2> /dev/null ||
        die "could not link a test of libzig_cpu_model.a with $CC"
    "$prefix/build/cpu/gcc" > "$prefix/build/cpu/gcc.txt"
    "$prefix/build/cpu/zig" > "$prefix/build/cpu/zig.txt"
    diff "$prefix/build/cpu/gcc.txt" "$prefix/build/cpu/zig.txt" > /dev/null ||
        die "__builtin_cpu_supports differs between gcc and zig cc with tools/wheel/zig-cpu-model.c" \
            "($(diff "$prefix/build/cpu/gcc.txt" "$prefix/build/cpu/zig.txt" | grep '^>' | tr '\n' ' '));" \
            "fix its bits for this Zig's clang"
    echo "   $(grep -c =1 "$prefix/build/cpu/zig.txt") CPU features found, as gcc finds them:" \
        "$(grep =1 "$prefix/build/cpu/zig.txt" | sed 's/=1//' | grep -E 'avx|f16c|fma' | tr '\n' ' ')"
fi

# libibverbs' headers: the verbs transport is compiled against them and opens
# libibverbs.so.1 at run time; the library itself is never linked. This host's
# rdma-core headers (libibverbs-dev) serve: the ABI they declare is stable.
if [ -f /usr/include/infiniband/verbs.h ]; then
    mkdir -p "$prefix/include/infiniband"
    cp /usr/include/infiniband/*.h "$prefix/include/infiniband/"
else
    rm -rf "$prefix/include/infiniband"
    echo "== no <infiniband/verbs.h> here: the wheels leave the verbs transport out" \
        "(apt-get install libibverbs-dev, then run this again)"
fi
rm -rf "$prefix/build"
echo "== done in $(($(date +%s) - start_all)) s: $prefix"
