#!/bin/bash
# tools/lab/rxe-vm/rxe-vm.sh [options] [--share DIR]... -- COMMAND [ARG]...
#
# ringd's verbs tests need an RDMA device; this host's kernel has none (no
# CONFIG_INFINIBAND). So this boots Debian's own kernel (which ships rdma_rxe)
# in QEMU, creates Soft-RoCE devices (rxe0..) inside the guest, runs COMMAND
# there and exits with its status.  The guest sees the host's whole root file
# system read-only (virtio-9p) and runs COMMAND chrooted into it, so host
# binaries/libraries (rdma-core, perftest, ringd's build tree) run unchanged.
# Each --share DIR is mounted read-write at the same path (needed for
# anything under /tmp, which is a fresh tmpfs in the guest).  COMMAND's
# stdout/stderr are streamed to this script's stdout/stderr.
# Adapted from the team's measured recipe (rdma-lab); tests/lab/verbs.test uses it.
#
# Options:
#   --share DIR      share DIR read-write at the same path (repeatable; a DIR
#                    inside another shared DIR is covered by it)
#   --ndev N         number of rxe devices (default 1: rxe0 on a dummy netdev;
#                    N>1: rxe0..rxeN-1 on veth pairs joined by a bridge, so
#                    rxe_i <-> rxe_j traffic is real RoCEv2 packets)
#   --mtu BYTES      netdev MTU (default 9000 -> RoCE active_mtu 4096; 1500 -> 1024)
#   --timeout SEC    kill the VM after SEC seconds (default 600, exit 124)
#   --mem MB         guest memory (default 2048)
#   --smp N          guest vCPUs (default: nproc of the host)
#   --kvm | --tcg    accelerator (default tcg; KVM on our CI hosts is PVM and
#                    cannot boot a stock kernel)
#   --verbose        copy the guest console (kernel + init log) to stderr
#   --build          (re)build the cached kernel+initramfs and exit
#   --prepare        build the cache only if missing or stale, check that QEMU
#                    and the host tools are there, exit 0 (ready) or 3 (with
#                    the reason on stderr); boots nothing
# Environment:
#   RXE_VM_CACHE     cache dir for kernel/initramfs (default /tmp/rxe-vm-cache)
#   RXE_VM_KPKG      kernel package (default: what linux-image-amd64 depends on,
#                    falling back to linux-image-6.1.0-56-amd64)
#   RXE_VM_TIMING=1  print boot milestones and wall time to stderr
#   RXE_VM_BOOT_TIMEOUT / RXE_VM_BOOT_TRIES  boot watchdog (default 90 s, 3 tries)
#   RXE_VM_QEMU_ARGS extra QEMU arguments
# Inside the guest COMMAND runs as root, chrooted into the host's / (read-only;
# /tmp, /run, /var/tmp, /dev/shm are guest tmpfs), cwd = the caller's cwd if
# visible there, and gets: RXE_VM=1 RXE_DEV=rxe0 RXE_IP=10.77.0.1
#   RXE_NETDEV=rxenet0 RXE_GID_INDEX=1 RXE_DEVS="rxe0 rxe1.." RXE_IPS="10.77.0.1 .."
#   HOME=/tmp/home.  Exit status: COMMAND's; 124 timeout; 125 VM/setup failure;
#   3 when the VM cannot be prepared here (no QEMU, no kernel package, ...).
# Timing (2-core host, TCG): the first run downloads the kernel package and
# builds the cache (~10 s); a boot to COMMAND takes 5-10 s.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RXE_VM_CACHE:-/tmp/rxe-vm-cache}
TIMEOUT=600
MEM=2048
SMP=$(nproc)
ACCEL=${RXE_VM_ACCEL:-tcg}
VERBOSE=0
BUILD_ONLY=0
PREPARE_ONLY=0
BOOT_TIMEOUT=${RXE_VM_BOOT_TIMEOUT:-90}
BOOT_TRIES=${RXE_VM_BOOT_TRIES:-3}
SHARES=()
NDEV=${RXE_VM_NDEV:-1}
MTU=${RXE_VM_MTU:-9000}

usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --share) [ $# -ge 2 ] || usage
                 d=$(realpath -e "$2") || { echo "rxe-vm: --share $2: no such directory" >&2; exit 2; }
                 SHARES+=("$d"); shift 2 ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --mem) MEM=$2; shift 2 ;;
        --smp) SMP=$2; shift 2 ;;
        --ndev) NDEV=$2; shift 2 ;;
        --mtu) MTU=$2; shift 2 ;;
        --kvm) ACCEL=kvm; shift ;;
        --tcg) ACCEL=tcg; shift ;;
        --verbose) VERBOSE=1; shift ;;
        --build) BUILD_ONLY=1; shift ;;
        --prepare) PREPARE_ONLY=1; shift ;;
        --) shift; break ;;
        -h|--help) usage ;;
        *) echo "rxe-vm: unknown option $1" >&2; usage ;;
    esac
done
[ $# -gt 0 ] || [ $BUILD_ONLY = 1 ] || [ $PREPARE_ONLY = 1 ] || usage
# KVM here is PVM and hangs a stock kernel: don't retry that 3 times
[ "$ACCEL" = kvm ] && BOOT_TRIES=${RXE_VM_BOOT_TRIES:-1}

log() { echo "rxe-vm: $*" >&2; }

# a share inside another one (a build dir in the source tree) is already
# visible through it: drop it and duplicates, so each path is mounted once
if [ ${#SHARES[@]} -gt 1 ]; then
    kept=()
    for d in "${SHARES[@]}"; do
        covered=0
        for o in "${SHARES[@]}"; do
            [ "$o" != "$d" ] && case "$d/" in "$o"/*) covered=1 ;; esac
        done
        for o in "${kept[@]}"; do [ "$o" = "$d" ] && covered=1; done
        [ $covered = 1 ] || kept+=("$d")
    done
    SHARES=("${kept[@]}")
fi

# ---------------------------------------------------------------- build (cached)
MODS_WANTED="virtio_pci 9pnet_virtio 9p virtio_console dummy veth bridge crc32_generic rdma_rxe rdma_ucm"

resolve_kpkg() {
    if [ -n "${RXE_VM_KPKG:-}" ]; then echo "$RXE_VM_KPKG"; return; fi
    local p
    p=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    echo "${p:-linux-image-6.1.0-56-amd64}"
}

extract_vmlinux() {   # like linux/scripts/extract-vmlinux, for xz/zstd/gzip kernels
    local img=$1 out=$2 magic cmd off
    for magic in $'\xfd7zXZ:xz -dc' $'\x28\xb5\x2f\xfd:zstd -qdc' $'\x1f\x8b\x08:gzip -dc'; do
        cmd=${magic#*:}; magic=${magic%%:*}
        for off in $(LC_ALL=C grep -abo "$magic" "$img" 2>/dev/null | cut -d: -f1 | head -5); do
            tail -c +$((off + 1)) "$img" | $cmd >"$out" 2>/dev/null
            [ "$(head -c 4 "$out" 2>/dev/null | od -An -tx1 | tr -d ' ')" = 7f454c46 ] && return 0
        done
    done
    rm -f "$out"; return 1
}

build() {
    local kpkg=$1 dir=$2 tmp kver m f
    log "building guest kernel+initramfs for $kpkg in $dir"
    for c in apt-get dpkg-deb depmod modprobe cpio gzip busybox; do
        command -v $c >/dev/null || { log "missing $c (apt-get install kmod cpio busybox-static)"; exit 3; }
    done
    tmp=$(mktemp -d "$CACHE/build.XXXXXX")
    chmod 755 "$tmp"   # apt's _apt user must be able to write the download there
    (cd "$tmp" && apt-get download "$kpkg" >"$tmp/apt.log" 2>&1) ||
        { log "apt-get download $kpkg failed (no apt lists or no mirror?):"; tail -n 5 "$tmp/apt.log" >&2; exit 3; }
    dpkg-deb -x "$tmp"/"$kpkg"_*.deb "$tmp/pkg"
    kver=$(ls "$tmp/pkg/lib/modules")
    depmod -b "$tmp/pkg" "$kver"
    mkdir -p "$tmp/root/modules"
    : > "$tmp/root/modules.order"
    for m in $MODS_WANTED; do
        modprobe -d "$tmp/pkg" -S "$kver" --show-depends "$m" | while read -r kw f args; do
            [ "$kw" = insmod ] || continue
            local base; base=$(basename "$f"); base=${base%.xz}; base=${base%.zst}; base=${base%.gz}
            grep -q "^$base\( \|\$\)" "$tmp/root/modules.order" && continue
            case "$f" in
                *.xz) xz -dc "$f" >"$tmp/root/modules/$base" ;;
                *.zst) zstd -qdc "$f" >"$tmp/root/modules/$base" ;;
                *.gz) gzip -dc "$f" >"$tmp/root/modules/$base" ;;
                *) cp "$f" "$tmp/root/modules/$base" ;;
            esac
            echo "$base $args" >>"$tmp/root/modules.order"
        done
    done
    mkdir -p "$tmp/root/bin"
    cp "$(command -v busybox)" "$tmp/root/bin/busybox"
    cp "$HERE/guest-init.sh" "$tmp/root/init"
    chmod 755 "$tmp/root/init" "$tmp/root/bin/busybox"
    (cd "$tmp/root" && find . | cpio -o -H newc --quiet | gzip -1) >"$tmp/initramfs.gz"
    mkdir -p "$dir"
    rm -f "$dir/vmlinux" "$dir/vmlinuz"
    cp "$tmp/pkg/boot/vmlinuz-$kver" "$dir/vmlinuz"
    # TCG is slow at decompressing the kernel (~3 s): if the kernel supports PVH
    # entry, extract the ELF vmlinux and let QEMU boot it directly.
    if grep -q '^CONFIG_PVH=y' "$tmp/pkg/boot/config-$kver"; then
        extract_vmlinux "$dir/vmlinuz" "$tmp/vmlinux" && mv "$tmp/vmlinux" "$dir/vmlinux"
    fi
    mv "$tmp/initramfs.gz" "$dir/initramfs.gz"
    cp "$HERE/guest-init.sh" "$dir/guest-init.sh.stamp"
    echo "$kver" >"$dir/kver"
    cp "$tmp/root/modules.order" "$dir/modules.order"
    rm -rf "$tmp"
    log "built $kver; modules: $(cut -d' ' -f1 "$dir/modules.order" | tr '\n' ' ')"
}

# host tools the run needs (checked before any download)
if [ $BUILD_ONLY = 0 ]; then
    command -v qemu-system-x86_64 >/dev/null || { log "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"; exit 3; }
    [ -e /usr/bin/rdma ] || { log "no /usr/bin/rdma on the host (apt-get install iproute2)"; exit 3; }
    [ -e /etc/libibverbs.d/rxe.driver ] ||
        { log "no rxe provider for libibverbs on the host (apt-get install ibverbs-providers)"; exit 3; }
fi

# The cache dir is ours (not the rdma-lab one: their guest-init.sh differs, and
# the stamp would make the two rebuild each other's cache in turn).  A lock
# keeps concurrent runs (make -j, two build trees) from building it twice.
KPKG=$(resolve_kpkg)
KDIR=$CACHE/$KPKG.ringd
stale() {
    [ ! -f "$KDIR/initramfs.gz" ] || [ ! -f "$KDIR/vmlinuz" ] ||
        ! cmp -s "$HERE/guest-init.sh" "$KDIR/guest-init.sh.stamp"
}
if [ $BUILD_ONLY = 1 ] || stale; then
    mkdir -p "$CACHE" || { log "cannot create $CACHE"; exit 3; }
    exec 9>"$CACHE/.lock"
    flock -w 300 9 || { log "another rxe-vm build holds $CACHE/.lock for 300 s"; exit 3; }
    if [ $BUILD_ONLY = 1 ] || stale; then
        set +e
        (set -e; build "$KPKG" "$KDIR")
        brc=$?
        set -e
        rm -rf "$CACHE"/build.* 2>/dev/null || true   # a failed build's leftovers (we hold the lock)
        [ $brc = 0 ] || { log "cannot build the guest kernel cache in $KDIR (status $brc)"; exit 3; }
    fi
    exec 9>&-
fi
[ $BUILD_ONLY = 1 ] && exit 0
[ $PREPARE_ONLY = 1 ] && { log "ready: $(cat "$KDIR/kver" 2>/dev/null) in $KDIR"; exit 0; }

# ---------------------------------------------------------------- run
KERNEL=$KDIR/vmlinuz
[ -f "$KDIR/vmlinux" ] && [ -z "${RXE_VM_NO_PVH:-}" ] && KERNEL=$KDIR/vmlinux

IO=$(mktemp -d /tmp/rxe-vm.XXXXXX)
QPID= COUT= CERR= TPID=
cleanup() {
    local rc=$? p
    for p in $QPID $COUT $CERR $TPID; do kill "$p" 2>/dev/null || true; done
    rm -rf "$IO"
    return $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

{
    echo "NSHARES=${#SHARES[@]}"
    for i in "${!SHARES[@]}"; do printf 'SHARE_%d=%q\n' "$i" "${SHARES[$i]}"; done
    echo "RXE_NDEV=$NDEV RXE_NET=10.77.0 RXE_MTU=$MTU"
} >"$IO/config.sh"
{
    echo 'mkdir -p "$HOME"; ulimit -l unlimited 2>/dev/null'
    printf 'cd -- %q 2>/dev/null || { echo "rxe-vm: cwd %q is not visible in the guest (use --share), running in /" >&2; cd /; }\n' "$PWD" "$PWD"
    printf 'exec'; printf ' %q' "$@"; echo
} >"$IO/cmd.sh"

ACCEL_ARGS=(-accel tcg,thread=multi -cpu max)
[ "$ACCEL" = kvm ] && ACCEL_ARGS=(-enable-kvm -cpu host)

FS_ARGS=(
    -fsdev local,id=fsroot,path=/,security_model=none,readonly=on,multidevs=remap
    -device virtio-9p-pci,fsdev=fsroot,mount_tag=hostroot
    -fsdev local,id=fsio,path="$IO",security_model=none
    -device virtio-9p-pci,fsdev=fsio,mount_tag=rxeio
)
for i in "${!SHARES[@]}"; do
    FS_ARGS+=(-fsdev "local,id=fs$i,path=${SHARES[$i]//,/,,},security_model=none,multidevs=remap"
              -device "virtio-9p-pci,fsdev=fs$i,mount_tag=share$i")
done

KQUIET="quiet loglevel=3"
[ $VERBOSE = 1 ] && KQUIET=

# One boot attempt.  Sets QRC (qemu/timeout exit status) and BOOTED (1 once the
# guest printed "running command", i.e. COMMAND was started).
boot_once() {
    local n=$1 out=$IO/out.$1 err=$IO/err.$1 con=$IO/console.$1.log start now
    mkfifo "$out" "$err"
    : >"$con"
    # readers first: QEMU's open() of a FIFO blocks until a reader exists
    cat "$out" &
    COUT=$!
    cat "$err" >&2 &
    CERR=$!
    TPID=
    if [ $VERBOSE = 1 ]; then tail -n +1 -f "$con" >&2 & TPID=$!; fi
    timeout -k 5 "$TIMEOUT" qemu-system-x86_64 \
        -nodefaults -no-user-config -nographic -no-reboot \
        "${ACCEL_ARGS[@]}" -smp "$SMP" -m "$MEM" \
        -kernel "$KERNEL" -initrd "$KDIR/initramfs.gz" \
        -append "console=ttyS0 $KQUIET panic=-1 rdinit=/init ${RXE_VM_APPEND:-}" \
        -chardev file,id=con,path="$con" -serial chardev:con \
        -device virtio-serial-pci \
        -chardev file,id=cout,path="$out" -device virtserialport,chardev=cout,name=rxevm.out \
        -chardev file,id=cerr,path="$err" -device virtserialport,chardev=cerr,name=rxevm.err \
        "${FS_ARGS[@]}" \
        -nic none ${RXE_VM_QEMU_ARGS:-} \
        </dev/null &
    QPID=$!
    BOOTED=0
    start=$SECONDS
    # boot watchdog: a (rare) stuck boot is killed and retried, COMMAND never ran
    local seen="" m
    while kill -0 "$QPID" 2>/dev/null; do
        if [ -n "${RXE_VM_TIMING:-}" ]; then   # host-side milestones (0.1 s resolution)
            for m in SeaBIOS "Linux version" "init started" "shell ready" "rxe ready"; do
                case "$seen" in *"|$m|"*) continue ;; esac
                if grep -q "$m" "$con"; then
                    seen="$seen|$m|"
                    log "t+$(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN{printf "%.1f", a-b}')s: $m"
                fi
            done
        fi
        if grep -q '^rxe-vm: \[[0-9.]*\] running command' "$con"; then BOOTED=1; break; fi
        if [ $((SECONDS - start)) -ge "$BOOT_TIMEOUT" ]; then
            log "attempt $n: guest did not reach COMMAND within $BOOT_TIMEOUT s, killing it"
            kill "$QPID" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
    set +e
    wait "$QPID"; QRC=$?
    set -e
    QPID=
    # the readers see EOF when QEMU closes the FIFOs; bound the wait anyway
    for _ in $(seq 50); do kill -0 "$COUT" 2>/dev/null || kill -0 "$CERR" 2>/dev/null || break; sleep 0.1; done
    kill "$COUT" "$CERR" 2>/dev/null || true
    wait "$COUT" "$CERR" 2>/dev/null || true
    COUT= CERR=
    if [ -n "$TPID" ]; then sleep 0.2; kill "$TPID" 2>/dev/null || true; wait "$TPID" 2>/dev/null || true; TPID=; fi
    grep -q '^rxe-vm: \[[0-9.]*\] running command' "$con" && BOOTED=1
    cp "$con" "$IO/console.log"
}

T0=$(date +%s.%N)
for attempt in $(seq 1 "$BOOT_TRIES"); do
    boot_once "$attempt"
    [ $BOOTED = 1 ] && break
    # deterministic setup failure (guest printed FATAL): no retry
    [ -f "$IO/fatal" ] || grep -q '^rxe-vm: \[[0-9.]*\] FATAL' "$IO/console.log" && break
done
T1=$(date +%s.%N)

if [ -n "${RXE_VM_TIMING:-}" ]; then
    grep '^rxe-vm: \[' "$IO/console.log" >&2 || true
    log "wall time $(awk -v a="$T1" -v b="$T0" 'BEGIN{printf "%.1f", a-b}') s (qemu exit $QRC)"
fi
if [ -f "$IO/rc" ]; then
    exit "$(cat "$IO/rc")"
fi
[ -f "$IO/fatal" ] && log "guest setup failed: $(cat "$IO/fatal")"
if [ $QRC = 124 ] || [ $QRC = 137 ]; then log "timeout after $TIMEOUT s"; fi
log "no exit status from the guest (qemu exit $QRC); console log tail:"
tail -n 40 "$IO/console.log" >&2
exit $(( QRC == 124 || QRC == 137 ? 124 : 125 ))
