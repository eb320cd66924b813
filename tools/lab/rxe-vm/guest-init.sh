#!/bin/busybox sh
# /init of the rxe-vm initramfs (runs as PID 1 inside the QEMU guest); built
# into the initramfs by tools/lab/rxe-vm/rxe-vm.sh (a change here rebuilds it).
# - loads the modules listed in /modules.order (virtio, 9p, ib_core, ib_uverbs, rdma_rxe, ...)
# - mounts the host's root file system read-only over virtio-9p at /host,
#   the per-run I/O directory at /host/run/rxe-vm and the --share dirs read-write
# - creates a dummy netdev with an IPv4 address and an rxe device on it
# - runs the command (chrooted into /host), streams stdout/stderr to two
#   virtio serial ports, writes its exit status to the I/O directory, powers off.
/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin /proc /sys /dev /host /tmp
/bin/busybox --install -s
export PATH=/sbin:/bin:/usr/sbin:/usr/bin

t() { read up _ </proc/uptime; echo "rxe-vm: [$up] $*"; }
die() { t "FATAL: $*"; echo "$*" > /host/run/rxe-vm/fatal 2>/dev/null; sync; poweroff -f; sleep 5; }

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
t "init started"

while read -r m args; do
    [ -n "$m" ] || continue
    insmod "/modules/$m" $args || t "insmod $m failed"
done </modules.order
t "modules loaded"

MSIZE=524288
mount -t 9p -o trans=virtio,version=9p2000.L,msize=$MSIZE,cache=loose,ro hostroot /host \
    || die "cannot mount host root over 9p"
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
mkdir -p /host/dev/pts /host/dev/shm 2>/dev/null
# devtmpfs has no /dev/fd (udev makes it on a normal system); bash's process
# substitution <(...) and /dev/stdin need it
ln -sf /proc/self/fd /host/dev/fd
ln -sf /proc/self/fd/0 /host/dev/stdin
ln -sf /proc/self/fd/1 /host/dev/stdout
ln -sf /proc/self/fd/2 /host/dev/stderr
mount -t devpts devpts /host/dev/pts
mount -t tmpfs tmpfs /host/dev/shm
mount -t tmpfs tmpfs /host/tmp
mount -t tmpfs tmpfs /host/run
mount -t tmpfs tmpfs /host/var/tmp 2>/dev/null
mkdir -p /host/run/rxe-vm
mount -t 9p -o trans=virtio,version=9p2000.L,msize=$MSIZE,cache=none rxeio /host/run/rxe-vm \
    || die "cannot mount I/O dir over 9p"
IO=/host/run/rxe-vm
. $IO/config.sh     # sets NSHARES, SHARE_0.., RXE_NDEV, RXE_NET, RXE_MTU; written by rxe-vm.sh
i=0
while [ "$i" -lt "$NSHARES" ]; do
    eval d=\$SHARE_$i
    mkdir -p "/host$d" 2>/dev/null
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=$MSIZE,cache=mmap "share$i" "/host$d" \
        || die "cannot mount share $d"
    i=$((i + 1))
done
t "shell ready (host root + shares mounted)"

# Network + rxe devices.  rxe (soft-RoCE) binds to an Ethernet netdev.
# RXE_NDEV=1: one dummy netdev; QPs on the same rxe device (same GID) are looped
#   back inside rdma_rxe.  Any number of processes can share rxe0.
# RXE_NDEV=N>1: N veth pairs on one bridge, one rxe device per veth (rxe0..),
#   IPs 10.77.0.1..N.  Policy routing sends traffic between these local IPs out
#   through the veth/bridge (instead of the lo shortcut, where rxe would drop it),
#   so rxe_i <-> rxe_j traffic is real RoCEv2 packets through the kernel stack.
# (one `ip -batch` and one `rdma -b` call: every exec of a host binary costs
#  ~0.2 s of library loading over 9p under TCG)
B=/host/run/rxe-vm-net; mkdir -p $B
RXE_DEVS="" RXE_IPS=""
echo "link set lo up" >$B/ip
: >$B/rdma
if [ "${RXE_NDEV:-1}" -le 1 ]; then
    cat >>$B/ip <<EOF
link add rxenet0 type dummy
link set rxenet0 mtu $RXE_MTU
addr add $RXE_NET.1/24 dev rxenet0
link set rxenet0 up
EOF
    echo "link add rxe0 type rxe netdev rxenet0" >>$B/rdma
    RXE_DEVS=rxe0 RXE_IPS=$RXE_NET.1
else
    for k in all default; do
        sysctl -qw net.ipv4.conf.$k.rp_filter=0 net.ipv4.conf.$k.accept_local=1 \
            net.ipv4.conf.$k.arp_ignore=1 net.ipv4.conf.$k.arp_announce=2
    done
    echo "link add rxebr type bridge" >>$B/ip
    echo "link set rxebr mtu $RXE_MTU" >>$B/ip
    echo "link set rxebr up" >>$B/ip
    i=0
    while [ $i -lt "$RXE_NDEV" ]; do
        a=$RXE_NET.$((i + 1))
        cat >>$B/ip <<EOF
link add rxenet$i mtu $RXE_MTU type veth peer name rxeport$i mtu $RXE_MTU
link set rxeport$i master rxebr
link set rxeport$i up
addr add $a/24 dev rxenet$i
link set rxenet$i up
rule add pref 5 from $a to $a lookup local
rule add pref $((100 + i)) from $a iif lo lookup $((100 + i))
route add $RXE_NET.0/24 dev rxenet$i src $a table $((100 + i))
EOF
        echo "link add rxe$i type rxe netdev rxenet$i" >>$B/rdma
        RXE_DEVS="$RXE_DEVS${RXE_DEVS:+ }rxe$i" RXE_IPS="$RXE_IPS${RXE_IPS:+ }$a"
        i=$((i + 1))
    done
    echo "rule add pref 1000 lookup local" >>$B/ip
    echo "rule del pref 0 lookup local" >>$B/ip
fi
chroot /host /usr/sbin/ip -batch /run/rxe-vm-net/ip || die "ip -batch failed: $(cat $B/ip)"
i=0
while [ $i -lt "${RXE_NDEV:-1}" ] && [ "${RXE_NDEV:-1}" -gt 1 ]; do
    sysctl -qw net.ipv4.conf.rxenet$i.rp_filter=0 net.ipv4.conf.rxenet$i.accept_local=1
    i=$((i + 1))
done
chroot /host /usr/bin/rdma -b /run/rxe-vm-net/rdma || die "rdma link add failed"
RXE_DEV=rxe0 RXE_NETDEV=rxenet0 RXE_IP=$RXE_NET.1
for d in $RXE_DEVS; do
    n=0
    until grep -q ffff "/sys/class/infiniband/$d/ports/1/gids/1" 2>/dev/null; do
        n=$((n + 1)); [ $n -gt 100 ] && die "rxe GID (IPv4) for $d did not appear"
        sleep 0.1
    done
done
t "rxe ready: $RXE_DEVS on $RXE_IPS"

# find the virtio serial ports by name
OUT=/dev/null; ERR=/dev/null
for p in /sys/class/virtio-ports/*; do
    case "$(cat $p/name 2>/dev/null)" in
        rxevm.out) OUT=/dev/${p##*/} ;;
        rxevm.err) ERR=/dev/${p##*/} ;;
    esac
done
# the chroot sees /dev via devtmpfs, same node names
t "running command"
chroot /host /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp/home TERM=dumb LANG=C.UTF-8 TMPDIR=/tmp \
    RXE_VM=1 RXE_DEV="$RXE_DEV" RXE_NETDEV="$RXE_NETDEV" RXE_IP="$RXE_IP" RXE_GID_INDEX=1 \
    RXE_DEVS="$RXE_DEVS" RXE_IPS="$RXE_IPS" \
    /bin/bash /run/rxe-vm/cmd.sh >"/host$OUT" 2>"/host$ERR" </dev/null
rc=$?
echo "$rc" > $IO/rc
t "command exited with status $rc"
sync
poweroff -f
sleep 10
