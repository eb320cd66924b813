#!/usr/bin/env bash
# netns-lab.sh - N "hosts" on one machine: network namespaces on a private
# bridge, each with its own address and host name, for multi-host tests of
# ringd without a cluster. `netns-lab.sh --help` is the manual.
#
# The recipe (namespaces, veth pairs into a bridge that lives in its own hub
# namespace, RFC 2544 addresses, tbf on both ends of a link) was measured in
# the baseline bench's tbf_lab.sh; this script is the project's own copy.
set -euo pipefail

prog=${0##*/}
state_root=${NETNS_LAB_STATE_DIR:-/run/netns-lab}
max_hosts=253 # 198.18.X.1 .. 198.18.X.253
# every wait is bounded (seconds)
link_wait=5   # links up and bridge ports forwarding after `up`
kill_wait=3   # processes left in a lab: SIGTERM, then SIGKILL after this
child_wait=5  # `run` interrupted: COMMAND gets SIGTERM, then SIGKILL after this
lock_wait=10  # the state directory's lock (labs allocate subnets under it)

usage() {
    cat << EOF
NAME
    $prog - a lab of N hosts on one machine, made of network namespaces

SYNOPSIS
    $prog up N [--name LAB]
    $prog exec LAB I -- COMMAND [ARG...]
    $prog run N [--name LAB] -- COMMAND [ARG...]
    $prog cap LAB RATE|off
    $prog mtu LAB BYTES
    $prog down LAB
    $prog list
    $prog --help

DESCRIPTION
    Builds N hosts LAB-h0 .. LAB-h{N-1} that look like separate machines to
    the programs run in them: each is a network namespace with its own
    loopback, one interface eth0 with its own address, and its own host name.
    Every host's eth0 is one end of a veth pair whose other end (vethI) is a
    port of the bridge br0 in a hub namespace, LAB-hub:

        LAB-h0: eth0 198.18.X.1 ---+
        LAB-h1: eth0 198.18.X.2 ---+--- LAB-hub: br0 (veth0, veth1, ...)
        ...                        |
        LAB-h{N-1}: 198.18.X.N  ---+

    Nothing is attached to the root namespace and the hosts have no default
    route: no lab packet can leave the lab, and a host cannot reach the root
    namespace's addresses (127.0.0.1 in a host is the host's own loopback).
    198.18.0.0/15 is the range RFC 2544 sets aside for benchmarks. X is the
    lowest number 0..255 that no other lab on the machine uses, so labs can
    exist side by side; each lab is a separate network in any case.

COMMANDS
    up N [--name LAB]
        Builds a lab of N hosts (1..$max_hosts), waits (at most ${link_wait} s) until
        every link is up, and prints shell lines to pass to eval:
            export NETNS_LAB=LAB NETNS_LAB_N=N NETNS_LAB_HUB=LAB-hub
            export NETNS_LAB_HOSTS="LAB-h0 LAB-h1 ..."
            export NETNS_LAB_ADDRS="198.18.X.1 198.18.X.2 ..."
            export NETNS_LAB_SUBNET=198.18.X.0/24 NETNS_LAB_TOOL=$0
        (one variable per line). NETNS_LAB_HOSTS are the namespaces' names
        and the hosts' names. LAB is 1 to 24 letters, digits and '-',
        starting with a letter or digit; by default it is ringlab<pid>
        (unique among running labs). A LAB already in use is an error.
        If anything fails, whatever was made is removed again.

    exec LAB I -- COMMAND [ARG...]
        Runs COMMAND in host I (0..N-1): in the network namespace LAB-hI
        (through 'ip netns exec', which also shows the host's own /sys) and
        in the host's UTS namespace, whose host name is LAB-hI. The UTS
        namespace is made once by 'up', so every process of a host shares
        it, as on a real machine. The environment, the working directory
        and the standard streams pass to COMMAND unchanged, and COMMAND's
        exit status is exec's.

    run N [--name LAB] -- COMMAND [ARG...]
        'up', then COMMAND in the root namespace with the variables above
        in its environment (so COMMAND starts its processes in the hosts
        with "\$NETNS_LAB_TOOL exec \$NETNS_LAB I -- ..."), then 'down',
        always: when COMMAND succeeds, fails or is killed, and when run
        itself gets SIGINT, SIGTERM or SIGHUP (then COMMAND and the
        processes it started get SIGTERM, and SIGKILL after ${child_wait} s; a
        run that a script started with & ignores SIGINT, as every
        background command of a script does). Exits with COMMAND's status.
        Processes COMMAND left in the root namespace are COMMAND's
        business; those left in the lab are killed.

    cap LAB RATE|off
        Caps every link at RATE in both directions: a tbf qdisc on the
        host's eth0 (what the host sends) and on the hub's vethI (what it
        receives), so each host has a full-duplex NIC of RATE. RATE is an
        integer with a unit: bit, kbit, mbit, gbit or tbit (decimal, as in
        tc: 1gbit is 10^9 bit/s). The bucket holds 1 ms of traffic and at
        least 64 KiB (one GSO packet); the queue at most 10 ms. 'off'
        removes the caps. Replaces any earlier cap. On a 2-core machine the
        uncapped bridge carries 10-14 Gbit/s, so caps above ~5gbit are not
        what limits the links.

    mtu LAB BYTES
        Sets the MTU of every link (each host's eth0, the hub's vethI and
        br0) to BYTES (576..65535; 1500 after 'up'). With 9000-byte jumbo
        frames, as cluster networks use, TCP's headers take 0.7% of a capped
        link instead of 4.4% at 1500 bytes: iperf3 carries ~987 of a
        1 Gbit/s cap's 1000 Mbit/s here, against ~950.

    down LAB
        Removes everything the lab made: the processes still in its
        namespaces (SIGTERM, then SIGKILL after ${kill_wait} s), its namespaces
        (with them its links) and its state. Does nothing, successfully,
        when there is nothing left of LAB, so it can be repeated. Also
        cleans up after an 'up' or 'run' that was killed with SIGKILL.

    list
        Prints the labs of this machine, one a line: LAB, N, subnet, and
        "incomplete" when some of its namespaces are missing.

ENVIRONMENT
    NETNS_LAB_VERBOSE
        1: every command that changes the network (and every kill) is
        echoed to standard error with a "+ " prefix.
    NETNS_LAB_STATE_DIR
        Where labs keep their state (default /run/netns-lab). Every
        command of one lab must see the same value.

FILES
    /run/netns-lab/LAB/env     the export lines of LAB
    /run/netns-lab/LAB/hI.uts  host I's UTS namespace (a bind mount)
    /run/netns-lab/.lock       taken while a lab picks its name and subnet
    /run/netns/LAB-hI, /run/netns/LAB-hub   the namespaces (ip netns)

EXIT STATUS
    0    success
    1    failure (the message says which step and why)
    2    bad usage
    77   up, run: no lab can be made here (not root, no iproute2 or
         util-linux, network namespaces or bridges not permitted, as in
         many containers); one line on standard error says why. Test
         suites treat 77 as "skipped".
    exec: COMMAND's status; 125 when there is no such lab or host, 126 or
         127 when COMMAND cannot be run.
    run: COMMAND's status (128+n when it was killed by signal n); 128+n
         when run itself was stopped by signal n.

EXAMPLES
    Three hosts by hand:
        eval "\$($prog up 3)"
        $prog exec "\$NETNS_LAB" 1 -- hostname        # prints \$NETNS_LAB-h1
        $prog exec "\$NETNS_LAB" 0 -- iperf3 -c 198.18.X.2
        $prog down "\$NETNS_LAB"

    A ring of four ringd peers, torn down whatever happens:
        $prog run 4 -- sh -c 'for i in 0 1 2 3; do
            "\$NETNS_LAB_TOOL" exec "\$NETNS_LAB" \$i -- ringd ... & done; wait'

    One Gbit/s links:
        $prog cap "\$NETNS_LAB" 1gbit

NOTES
    Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2 (ip, tc) and
    util-linux (unshare, nsenter, flock). Host names resolve only through
    the hosts' addresses (NETNS_LAB_ADDRS): /etc/hosts is the machine's.
EOF
}

short_usage() {
    cat << EOF
usage: $prog up N [--name LAB]
       $prog exec LAB I -- COMMAND [ARG...]
       $prog run N [--name LAB] -- COMMAND [ARG...]
       $prog cap LAB RATE|off
       $prog mtu LAB BYTES
       $prog down LAB
       $prog list
       $prog --help     (the manual)
EOF
}

say() { echo "$prog: $*" >&2; }
die_usage() {
    say "$*"
    short_usage >&2
    exit 2
}
verbose() { [ "${NETNS_LAB_VERBOSE:-0}" = 1 ]; }
# echo_cmd COMMAND...: "+ COMMAND" on stderr when verbose, quoted for a shell
echo_cmd() {
    verbose || return 0
    local a line=+ q="'"
    for a; do
        if [[ $a =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
            line+=" $a"
        else
            line+=" '${a//$q/$q\\$q$q}'"
        fi
    done
    printf '%s\n' "$line" >&2
}

# step COMMAND...: runs COMMAND (echoed when verbose), its output hidden; on
# failure, step_err names the command and carries its error message
step_err=
step() {
    local err
    echo_cmd "$@"
    if err=$("$@" 2>&1 > /dev/null); then
        return 0
    fi
    err=${err//$'\n'/; }
    step_err="'$*' failed${err:+: $err}"
    return 1
}

valid_lab() { [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9-]{0,23}$ ]]; }
check_lab_arg() { valid_lab "$1" || die_usage "invalid lab name '$1' (1-24 letters, digits and '-', not starting with '-')"; }

# lab_namespaces LAB: the namespaces of LAB that exist, hosts by index, then the hub
lab_namespaces() {
    ip netns list 2> /dev/null | awk -v p="$1-" '
        index($1, p) == 1 { r = substr($1, length(p) + 1)
                            if (r ~ /^h[0-9]+$/) print substr(r, 2) + 0, $1
                            else if (r == "hub") hub = $1 }
        END { if (hub != "") print 1000000, hub }' | sort -n | awk '{ print $2 }'
}

# lab_var LAB NAME: a value from LAB's env file (empty when absent)
lab_var() {
    sed -n "s/^export $2=\"\\{0,1\\}\\([^\"]*\\)\"\\{0,1\\}\$/\\1/p" "$state_root/$1/env" 2> /dev/null || true
}

# lab_preflight: status 77 with one line when this machine cannot have a lab
lab_preflight() {
    local t
    for t in ip tc unshare nsenter flock; do
        if ! command -v "$t" > /dev/null; then
            say "cannot build a lab here: no '$t' command (install iproute2 and util-linux)"
            return 77
        fi
    done
    if [ "$EUID" -ne 0 ]; then
        say "cannot build a lab here: needs root (running as uid $EUID)"
        return 77
    fi
}

# --- up -------------------------------------------------------------------

lab= # the lab being built (set as soon as its name is reserved)
n=0
subnet=

# reserve NAME N: under the lock, claims LAB (NAME, or ringlab<pid>) and the
# lowest free subnet, and writes LAB's env file
reserve() {
    local want=$1 lock_fd cand k x used f
    mkdir -p "$state_root" 2> /dev/null || { step_err="cannot create $state_root"; return 1; }
    if ! exec {lock_fd}> "$state_root/.lock"; then
        step_err="cannot open $state_root/.lock"
        return 1
    fi
    if ! flock -w "$lock_wait" "$lock_fd"; then
        exec {lock_fd}>&-
        step_err="$state_root/.lock still taken after ${lock_wait} s"
        return 1
    fi
    cand=
    if [ -n "$want" ]; then
        if [ -e "$state_root/$want" ] || [ -n "$(lab_namespaces "$want")" ]; then
            exec {lock_fd}>&-
            step_err="lab '$want' exists already ('$prog down $want' removes it)"
            return 1
        fi
        cand=$want
    else
        for k in "" -1 -2 -3 -4 -5 -6 -7 -8 -9; do
            if [ ! -e "$state_root/ringlab$$$k" ] && [ -z "$(lab_namespaces "ringlab$$$k")" ]; then
                cand=ringlab$$$k
                break
            fi
        done
        [ -n "$cand" ] || { exec {lock_fd}>&-; step_err="no free lab name ringlab$$*"; return 1; }
    fi
    used=" "
    for f in "$state_root"/*/env; do
        [ -e "$f" ] || continue
        x=$(sed -n 's/^export NETNS_LAB_SUBNET=198\.18\.\([0-9]*\)\.0\/24$/\1/p' "$f")
        used+="$x "
    done
    subnet=
    for ((x = 0; x < 256; x++)); do
        if [[ $used != *" $x "* ]]; then
            subnet=$x
            break
        fi
    done
    if [ -z "$subnet" ]; then
        exec {lock_fd}>&-
        step_err="all 256 subnets 198.18.X.0/24 are taken by other labs"
        return 1
    fi
    lab=$cand # from here on, a teardown knows what to remove
    if ! mkdir "$state_root/$lab" || ! lab_exports > "$state_root/$lab/env"; then
        exec {lock_fd}>&-
        step_err="cannot write $state_root/$lab/env"
        return 1
    fi
    exec {lock_fd}>&-
}

lab_exports() {
    local i hosts="" addrs="" tool
    for ((i = 0; i < n; i++)); do
        hosts+="${hosts:+ }$lab-h$i"
        addrs+="${addrs:+ }198.18.$subnet.$((i + 1))"
    done
    tool=$(cd "$(dirname "$0")" && pwd)/${0##*/}
    printf 'export NETNS_LAB=%s\n' "$lab"
    printf 'export NETNS_LAB_N=%s\n' "$n"
    printf 'export NETNS_LAB_HUB=%s\n' "$lab-hub"
    printf 'export NETNS_LAB_HOSTS="%s"\n' "$hosts"
    printf 'export NETNS_LAB_ADDRS="%s"\n' "$addrs"
    printf 'export NETNS_LAB_SUBNET=198.18.%s.0/24\n' "$subnet"
    printf 'export NETNS_LAB_TOOL=%q\n' "$tool"
}

# build: the namespaces, links and host names of $lab. build_probe stays 1
# until the hub and host 0 are made: a failure before that means this machine
# cannot have labs at all (status 77), a later one is a real failure.
build_probe=1
build() {
    local hub="$lab-hub" dir="$state_root/$lab" i ns
    build_probe=1
    step ip netns add "$hub" || return 1
    step ip -n "$hub" link set lo up || return 1
    step ip -n "$hub" link add br0 type bridge || return 1
    step ip -n "$hub" link set br0 up || return 1
    for ((i = 0; i < n; i++)); do
        ns=$lab-h$i
        step ip netns add "$ns" || return 1
        # made in the hub with its peer moved straight into the host: no
        # interface of the lab ever appears in the root namespace
        step ip -n "$hub" link add "veth$i" type veth peer name eth0 netns "$ns" || return 1
        step ip -n "$hub" link set "veth$i" master br0 up || return 1
        step ip -n "$ns" link set lo up || return 1
        step ip -n "$ns" addr add "198.18.$subnet.$((i + 1))/24" dev eth0 || return 1
        step ip -n "$ns" link set eth0 up || return 1
        # the host's UTS namespace, kept by a bind mount on this file
        : > "$dir/h$i.uts" || { step_err="cannot create $dir/h$i.uts"; return 1; }
        # shellcheck disable=SC2016 # $1 is the inner shell's
        step unshare --uts="$dir/h$i.uts" -- sh -c \
            'hostname "$1" 2> /dev/null || printf "%s\n" "$1" > /proc/sys/kernel/hostname' sh "$ns" ||
            return 1
        if [ "$(nsenter --uts="$dir/h$i.uts" -- uname -n 2> /dev/null)" != "$ns" ]; then
            step_err="cannot set the host name of $ns in its UTS namespace"
            return 1
        fi
        build_probe=0
    done
    wait_links
}

# wait_links: until every host's eth0 is up and every bridge port forwards
wait_links() {
    local i pending t
    for ((t = 0; t <= link_wait * 10; t++)); do
        pending=
        for ((i = 0; i < n; i++)); do
            if ! ip -n "$lab-h$i" -o link show dev eth0 2> /dev/null | grep -q 'state UP' ||
                ! ip -n "$lab-hub" -d -o link show dev "veth$i" 2> /dev/null |
                grep -q 'bridge_slave state forwarding'; then
                pending=$i
                break
            fi
        done
        [ -z "$pending" ] && return 0
        sleep 0.1
    done
    step_err="the link of $lab-h$pending is not up after ${link_wait} s"
    return 1
}

# lab_up N NAME: reserve and build; on failure remove what was made, say why
# and return 77 (no lab possible here) or 1
lab_up() {
    local rc=1
    n=$1
    lab_preflight || return $?
    if ! reserve "$2"; then
        say "up: $step_err"
        return 1
    fi
    build && return 0
    [ "$build_probe" = 1 ] && rc=77
    do_down "$lab" || true
    if [ $rc = 77 ]; then
        say "cannot build a lab here: $step_err"
    else
        say "up: $step_err"
    fi
    lab=
    return $rc
}

# parse_up_args ARGS...: N and --name for up and run; sets up_n, up_name and
# up_rest (the words after --)
parse_up_args() {
    local cmd=$1
    shift
    up_n='' up_name='' up_rest=()
    while [ $# -gt 0 ]; do
        case $1 in
            --name) [ $# -ge 2 ] || die_usage "$cmd: --name needs a value"; up_name=$2; shift 2 ;;
            --name=*) up_name=${1#--name=}; shift ;;
            --) shift; up_rest=("$@"); up_has_cmd=1; return 0 ;;
            -*) die_usage "$cmd: unknown option '$1'" ;;
            *) [ -z "$up_n" ] || die_usage "$cmd: unexpected argument '$1'"; up_n=$1; shift ;;
        esac
    done
}

check_up_args() {
    local cmd=$1
    [ -n "$up_n" ] || die_usage "$cmd: missing N (the number of hosts)"
    if ! [[ $up_n =~ ^[0-9]{1,4}$ ]] || ((10#$up_n < 1 || 10#$up_n > max_hosts)); then
        die_usage "$cmd: invalid N '$up_n' (1..$max_hosts)"
    fi
    up_n=$((10#$up_n))
    [ -z "$up_name" ] || check_lab_arg "$up_name"
}

cmd_up() {
    up_has_cmd=0
    parse_up_args up "$@"
    [ "$up_has_cmd" = 0 ] || die_usage "up: unexpected '--' (run takes a command, up does not)"
    check_up_args up
    local rc=0
    lab_up "$up_n" "$up_name" || rc=$?
    [ $rc = 0 ] || exit $rc
    cat "$state_root/$lab/env"
}

# --- down -----------------------------------------------------------------

# lab_pids NS...: the processes in these namespaces, but this one
lab_pids() {
    local ns
    for ns; do ip netns pids "$ns" 2> /dev/null || true; done | grep -vx "$$" || true
}

# stop_processes LAB NS...: SIGTERM to every process in the namespaces,
# SIGKILL to those left after kill_wait seconds
stop_processes() {
    local lab=$1 pids t
    shift
    pids=$(lab_pids "$@")
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086 # one pid a word
    {
        echo_cmd kill -TERM $pids
        kill -TERM $pids 2> /dev/null || true
        kill -CONT $pids 2> /dev/null || true # a stopped process must see its SIGTERM
    }
    for ((t = 0; t < kill_wait * 10; t++)); do
        sleep 0.1
        pids=$(lab_pids "$@")
        [ -n "$pids" ] || return 0
    done
    # shellcheck disable=SC2086
    {
        echo_cmd kill -KILL $pids
        kill -KILL $pids 2> /dev/null || true
    }
    for ((t = 0; t < 20; t++)); do
        sleep 0.1
        pids=$(lab_pids "$@")
        [ -n "$pids" ] || return 0
    done
    say "down $lab: processes ${pids//$'\n'/ } survive SIGKILL; their namespaces outlive the lab"
}

# do_down LAB: removes what is left of LAB; status 1 only when something stays
do_down() {
    local lab=$1 dir="$state_root/$1" nss ns f rc=0
    nss=$(lab_namespaces "$lab")
    if [ -z "$nss" ] && [ ! -e "$dir" ]; then
        return 0
    fi
    if [ "$EUID" -ne 0 ]; then
        say "down $lab: needs root"
        return 1
    fi
    # shellcheck disable=SC2086 # names are [A-Za-z0-9-]
    stop_processes "$lab" $nss
    for ns in $nss; do # hosts first: each takes its link (and the hub's end) along
        if ! step ip netns del "$ns" && [ -e "/run/netns/$ns" ]; then
            say "down $lab: $step_err"
            rc=1
        fi
    done
    if [ -d "$dir" ]; then
        for f in "$dir"/*.uts; do
            [ -e "$f" ] || continue
            if mountpoint -q "$f" 2> /dev/null; then
                step umount "$f" || step umount -l "$f" || true
            fi
            rm -f "$f" 2> /dev/null || { say "down $lab: cannot remove $f"; rc=1; }
        done
        rm -f "$dir/env"
        rmdir "$dir" 2> /dev/null || { say "down $lab: cannot remove $dir"; rc=1; }
    fi
    return $rc
}

cmd_down() {
    [ $# -eq 1 ] || die_usage "down: needs exactly one LAB"
    check_lab_arg "$1"
    do_down "$1"
}

# --- exec -----------------------------------------------------------------

cmd_exec() {
    [ $# -ge 2 ] || die_usage "exec: needs LAB and I"
    local lab=$1 i=$2 ns uts
    check_lab_arg "$lab"
    [[ $i =~ ^[0-9]{1,4}$ ]] || die_usage "exec: invalid host index '$i'"
    i=$((10#$i))
    shift 2
    [ "${1:-}" = -- ] || die_usage "exec: missing '--' before COMMAND"
    shift
    [ $# -ge 1 ] || die_usage "exec: missing COMMAND after '--'"
    ns=$lab-h$i
    uts=$state_root/$lab/h$i.uts
    if [ ! -e "/run/netns/$ns" ] || [ ! -e "$uts" ]; then
        say "exec: lab '$lab' has no host $i (no namespace $ns or no $uts)"
        exit 125
    fi
    # COMMAND gets the environment this script was started with, read back
    # from /proc: what bash passes on has its own SHLVL and _.
    local env=()
    mapfile -d '' env < /proc/$$/environ
    exec env -i -- "${env[@]}" ip netns exec "$ns" nsenter --uts="$uts" -- "$@"
}

# --- run ------------------------------------------------------------------

run_child=

# descendants PID: the process tree under PID (needs pgrep; else nothing)
descendants() {
    local c
    command -v pgrep > /dev/null || return 0
    for c in $(pgrep -P "$1" 2> /dev/null); do
        echo "$c"
        descendants "$c"
    done
}

alive() { # PID: running (not a zombie)
    local s
    s=$(cat "/proc/$1/stat" 2> /dev/null) || return 1
    s=${s##*) }
    [ "${s%% *}" != Z ]
}

run_signal() { # NUMBER: run was told to stop
    trap '' INT TERM HUP
    local tree t
    if [ -n "$run_child" ]; then
        tree="$run_child $(descendants "$run_child")"
        # shellcheck disable=SC2086
        kill -TERM $tree 2> /dev/null || true
        for ((t = 0; t < child_wait * 10; t++)); do
            alive "$run_child" || break
            sleep 0.1
        done
        # shellcheck disable=SC2086
        if alive "$run_child"; then kill -KILL $tree 2> /dev/null || true; fi
        { wait "$run_child"; } 2> /dev/null || true # (bash's "Killed" notice)
    fi
    exit $((128 + $1))
}

run_exit() {
    local rc=$?
    trap '' INT TERM HUP
    trap - EXIT
    if [ -n "$lab" ]; then
        do_down "$lab" || { say "run: the lab $lab was not removed completely"; [ $rc != 0 ] || rc=1; }
    fi
    exit $rc
}

cmd_run() {
    up_has_cmd=0
    parse_up_args run "$@"
    [ "$up_has_cmd" = 1 ] || die_usage "run: missing '--' before COMMAND"
    [ ${#up_rest[@]} -ge 1 ] || die_usage "run: missing COMMAND after '--'"
    check_up_args run
    trap run_exit EXIT
    trap 'run_signal 2' INT
    trap 'run_signal 15' TERM
    trap 'run_signal 1' HUP
    local rc=0 line
    lab_up "$up_n" "$up_name" || exit $?
    while IFS= read -r line; do
        eval "$line"
    done < "$state_root/$lab/env"
    # in the background so that a signal to run is handled at once; with
    # SIGINT and SIGQUIT as they were and the standard input kept (bash
    # gives background jobs /dev/null and ignores both)
    (
        trap - INT QUIT
        exec "${up_rest[@]}"
    ) <&0 &
    run_child=$!
    wait "$run_child" || rc=$?
    run_child=
    exit $rc
}

# --- cap ------------------------------------------------------------------

# The link caps. A later issue extends them (per-host rates, delay, loss):
# this is the one place that shapes the lab's links, host eth0 egress being
# what a host sends and hub vethI egress what it receives.
cmd_cap() {
    [ $# -eq 2 ] || die_usage "cap: needs LAB and RATE (or off)"
    local lab=$1 rate=${2,,} n i num mult=0 burst=0 rc=0
    check_lab_arg "$lab"
    if [ "$rate" != off ]; then
        if ! [[ $rate =~ ^([0-9]{1,6})(bit|kbit|mbit|gbit|tbit)$ ]] || ((10#${BASH_REMATCH[1]} < 1)); then
            die_usage "cap: invalid RATE '$2' (an integer and bit, kbit, mbit, gbit or tbit; or off)"
        fi
        num=$((10#${BASH_REMATCH[1]}))
        case ${BASH_REMATCH[2]} in
            bit) mult=1 ;; kbit) mult=1000 ;; mbit) mult=1000000 ;;
            gbit) mult=1000000000 ;; tbit) mult=1000000000000 ;;
        esac
        # 1 ms of traffic, at least one 64 KiB GSO packet (a packet larger
        # than the bucket would never leave)
        burst=$((num * mult / 8 / 1000))
        ((burst >= 65536)) || burst=65536
    fi
    n=$(lab_var "$lab" NETNS_LAB_N)
    [ -n "$n" ] || { say "cap: no lab '$lab'"; return 1; }
    [ "$EUID" -eq 0 ] || { say "cap: needs root"; return 1; }
    for ((i = 0; i < n; i++)); do
        if [ "$rate" = off ]; then
            # deleting the default qdisc fails: that is "no cap" already
            step tc -n "$lab-h$i" qdisc del dev eth0 root || true
            step tc -n "$lab-hub" qdisc del dev "veth$i" root || true
        elif ! step tc -n "$lab-h$i" qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 10ms ||
            ! step tc -n "$lab-hub" qdisc replace dev "veth$i" root tbf rate "$rate" burst "$burst" latency 10ms; then
            say "cap: $step_err"
            rc=1
        fi
    done
    return $rc
}

# --- mtu ------------------------------------------------------------------

cmd_mtu() {
    [ $# -eq 2 ] || die_usage "mtu: needs LAB and BYTES"
    local lab=$1 mtu=$2 n i rc=0
    check_lab_arg "$lab"
    if ! [[ $mtu =~ ^[0-9]{3,5}$ ]] || ((10#$mtu < 576 || 10#$mtu > 65535)); then
        die_usage "mtu: invalid BYTES '$2' (576..65535)"
    fi
    mtu=$((10#$mtu))
    n=$(lab_var "$lab" NETNS_LAB_N)
    [ -n "$n" ] || { say "mtu: no lab '$lab'"; return 1; }
    [ "$EUID" -eq 0 ] || { say "mtu: needs root"; return 1; }
    # the bridge's ports first: a bridge takes no MTU above its ports'
    for ((i = 0; i < n; i++)); do
        if ! step ip -n "$lab-h$i" link set eth0 mtu "$mtu" ||
            ! step ip -n "$lab-hub" link set "veth$i" mtu "$mtu"; then
            say "mtu: $step_err"
            rc=1
        fi
    done
    step ip -n "$lab-hub" link set br0 mtu "$mtu" || { say "mtu: $step_err"; rc=1; }
    return $rc
}

# --- list -----------------------------------------------------------------

cmd_list() {
    [ $# -eq 0 ] || die_usage "list: takes no arguments"
    local d name n have i state
    for d in "$state_root"/*/; do
        [ -e "$d/env" ] || continue
        name=${d%/}
        name=${name##*/}
        n=$(lab_var "$name" NETNS_LAB_N)
        have=$(lab_namespaces "$name" | wc -l)
        state=
        [ "$have" -eq $((n + 1)) ] || state=" incomplete"
        echo "$name $n $(lab_var "$name" NETNS_LAB_SUBNET)$state"
    done
}

# --- main -----------------------------------------------------------------

[ $# -ge 1 ] || die_usage "missing command"
cmd=$1
shift
case $cmd in
    up) cmd_up "$@" ;;
    exec) cmd_exec "$@" ;;
    run) cmd_run "$@" ;;
    cap) cmd_cap "$@" ;;
    mtu) cmd_mtu "$@" ;;
    down) cmd_down "$@" ;;
    list) cmd_list "$@" ;;
    -h | --help | help) usage ;;
    *) die_usage "unknown command '$cmd'" ;;
esac
