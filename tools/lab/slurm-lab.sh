#!/usr/bin/env bash
# slurm-lab.sh - a throw-away single-node Slurm on localhost (munged + slurmctld
# + slurmd), for tests that need a real `srun -n N` (tests/lab/launchers.test).
#
#   eval "$(tools/lab/slurm-lab.sh start)"   # start; prints export SLURM_LAB_DIR=... SLURM_CONF=...
#   tools/lab/slurm-lab.sh run -- -n 4 CMD   # srun -n 4 CMD on that cluster, under timeout
#   srun -n 4 CMD                        # also fine while SLURM_CONF is exported
#   tools/lab/slurm-lab.sh status            # sinfo + squeue
#   tools/lab/slurm-lab.sh stop [DIR]        # stop what start started, by PID; remove the dir
#
# Needs root and the Debian 12 packages munge slurmctld slurmd slurm-client.
# Without them every subcommand prints one line saying what is missing and
# exits 77 (automake's "skip"), so a test can skip on it.
#
# Everything lives in one `mktemp -d /tmp/slurm-lab.XXXXXX` directory: config,
# munge key and socket, state, spool, logs, pid files. Nothing under /etc,
# /run or /var is read or written, the system's munged/slurmd (if any) are not
# touched, and the two ports (slurmctld, slurmd) are free ones in 10000-19999
# picked at start, clear of ringd's rendezvous ports (20000-31999). No
# systemd is needed: the daemons run in the foreground (-D), backgrounded
# here, PIDs from $!.
# run/status/stop find the lab through $SLURM_LAB_DIR (or stop's DIR); there
# is no global "current lab" file, so labs of concurrent test runs never mix.
#
# The node is declared with SLURM_LAB_CPUS (8) CPUs whatever the machine has
# (SlurmdParameters=config_overrides): `srun -n 4` then runs 4 tasks at once
# on a 2-core machine without --overcommit. Tasks see SLURM_STEP_NODELIST=lab0
# (the node name, which does not resolve; the node's address is 127.0.0.1).
#
# Every wait is bounded. A failed start prints the daemons' log tails, stops
# what it started and exits 1. stop: scancel, SIGTERM to each daemon's PID
# (checked to still be that program), SIGKILL after 10 s, then any process
# still holding a file in the lab dir (a slurmstepd left over) and its tasks,
# then rm -rf of the dir (only a dir that start created, marked inside), then
# up to 3 s for init to reap the daemons. Stopping a lab already gone is a
# no-op (exit 0).
#
# Environment:
#   SLURM_LAB_NODE           node name (default lab0)
#   SLURM_LAB_CPUS           CPUs declared for the node (default 8)
#   SLURM_LAB_START_TIMEOUT  seconds for the node to become idle (default 60)
#   SLURM_LAB_RUN_TIMEOUT    seconds before `run` kills srun (default 300)
#   SLURM_LAB_OWNER          a PID: when it is gone, a watchdog stops the lab
#                            (within ~1 s), in case the owner's EXIT trap never
#                            runs (SIGKILL). Default: none.
#   SLURM_LAB_DIR            the lab, for run/status/stop (start prints it)
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
umask 022

PROG=slurm-lab
MARK=.slurm-lab   # file inside a dir that start created
NODE=${SLURM_LAB_NODE:-lab0}
PART=lab
STOPPED=()

die() { echo "$PROG: $*" >&2; exit 1; }
log() { echo "$PROG: $*" >&2; }
skip() { echo "$PROG: $*" >&2; exit 77; }

# root and the four packages, else exit 77 with one line
need() {
    local missing=() p
    for p in munged slurmctld slurmd srun sinfo squeue scancel; do
        command -v "$p" > /dev/null || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        skip "${missing[*]} not found: apt-get install -y --no-install-recommends munge slurmctld slurmd slurm-client"
    fi
    [ "$(id -u)" = 0 ] || skip "needs root (slurmd runs the tasks as the submitting user)"
    # slurmd 22.05 initialises its cgroup plugin even with proctrack/linuxproc
    awk '$2 ~ "^/sys/fs/cgroup" { found = 1 } END { exit !found }' /proc/mounts ||
        skip "no cgroup filesystem under /sys/fs/cgroup (a bare chroot?): slurmd 22.05 cannot start without one"
}

lab_dir() {
    local d=${1:-${SLURM_LAB_DIR:-}}
    [ -n "$d" ] || die "no lab: SLURM_LAB_DIR is unset (eval the output of '$0 start')"
    [ -f "$d/$MARK" ] || die "$d is not a lab started by $0"
    echo "$d"
}

# Environment for Slurm commands against lab $1: this lab's config, and none of
# a surrounding job's SLURM_* (inside a real allocation srun would otherwise try
# to add a step to that job, on our controller).
slurm_env() {
    local v
    for v in $(compgen -e | grep '^SLURM_' || true); do
        case $v in SLURM_LAB_*) ;; *) unset "$v" ;; esac
    done
    export SLURM_CONF="$1/slurm.conf"
}

# is TCP port $1 unused (any state, v4 or v6)? read from /proc, no ss needed
port_free() {
    local hex
    hex=$(printf ':%04X ' "$1")
    ! cat /proc/net/tcp /proc/net/tcp6 2> /dev/null | awk '{ print $2 " " }' | grep -qF "$hex"
}
# Two consecutive free ports in 10000-19999: below ringd's rendezvous stores
# (20000-31999, from the job id) and Linux's ephemeral ports (32768-).
pick_ports() {
    local p
    for _ in $(seq 1 100); do
        p=$((10000 + RANDOM % 9999))
        if port_free "$p" && port_free "$((p + 1))"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# pid_is PID EXE: PID is alive, not a zombie, and runs EXE (not a reused PID)
pid_is() {
    local pid=$1 exe=$2 st
    case $pid in '' | *[!0-9]*) return 1 ;; esac
    [ -d "/proc/$pid" ] || return 1
    st=$(awk '/^State:/ { print $2 }' "/proc/$pid/status" 2> /dev/null) || return 1
    [ "$st" != Z ] || return 1
    [ "$(readlink -f "/proc/$pid/exe" 2> /dev/null)" = "$(readlink -f "$exe")" ]
}

# stop_pid NAME PIDFILE EXE: SIGTERM, wait up to 10 s, then SIGKILL (and wait 5 s)
stop_pid() {
    local name=$1 pf=$2 exe=$3 pid
    [ -r "$pf" ] || return 0
    pid=$(cat "$pf")
    if pid_is "$pid" "$exe"; then
        kill -TERM "$pid" 2> /dev/null || true
        for _ in $(seq 1 100); do
            pid_is "$pid" "$exe" || break
            sleep 0.1
        done
        if pid_is "$pid" "$exe"; then
            log "$name (pid $pid) still running 10 s after SIGTERM: SIGKILL"
            kill -KILL "$pid" 2> /dev/null || true
            for _ in $(seq 1 50); do
                pid_is "$pid" "$exe" || break
                sleep 0.1
            done
            pid_is "$pid" "$exe" && log "$name (pid $pid) survived SIGKILL"
        fi
    fi
    rm -f "$pf"
    STOPPED+=("$pid")
}
# is PID $1 a zombie (dead, not yet reaped by init)?
zombie() { [ "$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2> /dev/null)" = Z ]; }

# alive PID: a child this script just started is still there (not a zombie).
# Not pid_is: right after `cmd &` the child may still be the forked shell that
# has not exec'd the daemon yet, and pid_is would call that "gone".
alive() { [ -d "/proc/$1" ] && ! zombie "$1"; }

# PIDs of processes with a file open in dir $1 (a slurmstepd left over logs to
# log/ and listens in spool/) and all their descendants (its tasks), except
# this script and its ancestors
holders() {
    local d=$1 skip=" " a=${BASHPID:-$$}
    while [ -n "$a" ] && [ "$a" != 0 ]; do
        skip="$skip$a "
        a=$(awk '/^PPid:/ { print $2 }' "/proc/$a/status" 2> /dev/null)
    done
    {
        echo "roots $(find /proc/[0-9]*/fd -maxdepth 1 -lname "$d/*" 2> /dev/null | cut -d/ -f3 | sort -u | tr '\n' ' ')"
        ps -e -o pid= -o ppid=
    } | awk -v skip="$skip" '
        $1 == "roots" { for (i = 2; i <= NF; i++) mark[$i] = 1; next }
        { parent[$1] = $2 }
        END {
            do {    # mark the descendants of marked processes
                more = 0
                for (p in parent) if (!(p in mark) && (parent[p] in mark)) { mark[p] = 1; more = 1 }
            } while (more)
            for (p in mark) if (index(skip, " " p " ") == 0 && (p in parent)) print p
        }'
}

cmd_stop() {
    local d=${1:-${SLURM_LAB_DIR:-}}
    # stopping twice is fine (the watchdog may have been first)
    if [ -n "$d" ] && [ ! -e "$d" ]; then
        log "$d is gone already: nothing to stop"
        return 0
    fi
    d=$(lab_dir "$d")
    (
        slurm_env "$d"
        # cancel what still runs, so slurmd can end its slurmstepds; bounded
        if [ -r "$d/run/slurmctld.lab.pid" ] && pid_is "$(cat "$d/run/slurmctld.lab.pid")" "$(command -v slurmctld)"; then
            timeout 10 scancel --partition="$PART" 2> /dev/null || true
            for _ in $(seq 1 50); do
                [ -z "$(timeout 5 squeue -h 2> /dev/null)" ] && break
                sleep 0.2
            done
        fi
    )
    stop_pid watchdog "$d/run/watchdog.lab.pid" "$(readlink -f /proc/$$/exe)"
    stop_pid slurmd "$d/run/slurmd.lab.pid" "$(command -v slurmd)"
    stop_pid slurmctld "$d/run/slurmctld.lab.pid" "$(command -v slurmctld)"
    stop_pid munged "$d/run/munged.lab.pid" "$(command -v munged)"
    # anything else still in the dir: a slurmstepd or a task whose daemon died
    local pids
    mapfile -t pids < <(holders "$d")
    if [ ${#pids[@]} -gt 0 ]; then
        log "left over in $d: pids ${pids[*]}: SIGTERM, then SIGKILL after 5 s"
        kill -TERM "${pids[@]}" 2> /dev/null || true
        local end=$((SECONDS + 5))
        while [ "$SECONDS" -le "$end" ] && [ -n "$(holders "$d")" ]; do sleep 0.1; done
        mapfile -t pids < <(holders "$d")
        if [ ${#pids[@]} -gt 0 ]; then kill -KILL "${pids[@]}" 2> /dev/null || true; fi
    fi
    rm -rf "$d"
    # the daemons were reparented to init; give it up to 3 s to reap them, so
    # that `pgrep slurm` right after stop shows nothing
    local end=$((SECONDS + 3)) p
    for p in "${STOPPED[@]}"; do
        while zombie "$p" && [ "$SECONDS" -le "$end" ]; do sleep 0.1; done
    done
    log "stopped, removed $d"
}

# the watchdog: stops the lab when PID $1 is gone. setsid, so a kill of the
# owner's process group does not take it along; no open stdio, so the caller's
# $(...) does not wait for it.
start_watchdog() {
    local d=$1 owner=$2
    case $owner in '' | *[!0-9]*) die "SLURM_LAB_OWNER='$owner' is not a PID" ;; esac
    [ -d "/proc/$owner" ] || die "SLURM_LAB_OWNER=$owner: no such process"
    # shellcheck disable=SC2016 # the script expands its own arguments
    setsid bash -c '
        d=$1 owner=$2 self=$3
        echo $$ > "$d/run/watchdog.lab.pid"
        while [ -d "/proc/$owner" ] && [ -f "$d/.slurm-lab" ]; do sleep 1; done
        if [ -f "$d/.slurm-lab" ]; then
            rm -f "$d/run/watchdog.lab.pid"
            echo "slurm-lab: owner $owner is gone; stopping $d" >> "$d/log/watchdog.log"
            SLURM_LAB_DIR=$d exec bash "$self" stop
        fi' watchdog "$d" "$owner" "$(readlink -f "$0")" < /dev/null > /dev/null 2>&1 &
    for _ in $(seq 1 50); do
        [ -s "$d/run/watchdog.lab.pid" ] && return 0
        sleep 0.1
    done
    die "the watchdog did not start"
}

fail_start() { # fail_start DIR MESSAGE: log tails, stop, exit 1
    local d=$1
    log "$2; log tails:"
    tail -n 20 "$d"/log/* >&2 2> /dev/null || true
    cmd_stop "$d" || true
    exit 1
}

cmd_start() {
    need
    case $NODE in
    [a-zA-Z]*) ;;
    *) die "SLURM_LAB_NODE='$NODE': a node name starts with a letter" ;;
    esac
    case $NODE in *[!a-zA-Z0-9_-]*) die "SLURM_LAB_NODE='$NODE': letters, digits, '-' and '_' only" ;; esac
    local cpus=${SLURM_LAB_CPUS:-8}
    case $cpus in '' | *[!0-9]* | 0) die "SLURM_LAB_CPUS='$cpus' is not a positive number" ;; esac

    local t0 d ctl_port
    t0=$(date +%s%N)
    d=$(mktemp -d /tmp/slurm-lab.XXXXXX) || die "mktemp failed"
    : > "$d/$MARK"
    mkdir -p "$d"/{state,spool,log,run}
    # munged wants o+x on every directory above its socket
    chmod 711 "$d"
    chmod 700 "$d"/{state,spool,log}
    ctl_port=$(pick_ports) || fail_start "$d" "no two free consecutive ports in 10000-19999"
    # job ids start at a random number, not 1 in every lab: ringd derives its
    # rendezvous port from the job id, and two labs at once should not collide
    local first_job=$((RANDOM * 30 + 1))

    # a private munge key and socket; munged in the foreground, logging to log/
    dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 status=none
    chmod 600 "$d/munge.key"
    munged --force --foreground --socket="$d/run/munge.sock" --key-file="$d/munge.key" \
        --pid-file="$d/run/munged.pid" --log-file="$d/log/munged.log" \
        --seed-file="$d/run/munged.seed" < /dev/null > "$d/log/munged.out" 2>&1 &
    echo $! > "$d/run/munged.lab.pid"
    for _ in $(seq 1 100); do
        [ -S "$d/run/munge.sock" ] && break
        alive "$(cat "$d/run/munged.lab.pid")" || break
        sleep 0.1
    done
    [ -S "$d/run/munge.sock" ] || fail_start "$d" "munged did not come up within 10 s"

    cat > "$d/slurm.conf" << EOF
# generated by slurm-lab.sh (tools/lab/slurm-lab.sh of ringd)
ClusterName=slurmlab
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$((ctl_port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/run/munge.sock
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MaxJobCount=10000
FirstJobId=$first_job
InactiveLimit=0
KillWait=5
MinJobAge=30
SlurmctldTimeout=30
SlurmdTimeout=30
PlugStackConfig=$d/plugstack.conf
NodeName=$NODE NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1024 State=UNKNOWN
PartitionName=$PART Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    # empty, so nothing is read from /etc/slurm (cgroup.conf is looked up next to slurm.conf)
    : > "$d/cgroup.conf"
    : > "$d/plugstack.conf"

    [ -n "${SLURM_LAB_OWNER:-}" ] && start_watchdog "$d" "$SLURM_LAB_OWNER"

    (
        slurm_env "$d"
        slurmctld -D -c -i -f "$SLURM_CONF" < /dev/null > "$d/log/slurmctld.out" 2>&1 &
        echo $! > "$d/run/slurmctld.lab.pid"
        slurmd -D -N "$NODE" -f "$SLURM_CONF" < /dev/null > "$d/log/slurmd.out" 2>&1 &
        echo $! > "$d/run/slurmd.lab.pid"
    )

    local deadline state=""
    deadline=$(($(date +%s) + ${SLURM_LAB_START_TIMEOUT:-60}))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        state=$(
            slurm_env "$d"
            timeout 5 sinfo -h -n "$NODE" -o %T 2> /dev/null || true
        )
        [ "$state" = idle ] && break # not idle* (not responding) or idle~ (powered down)
        alive "$(cat "$d/run/slurmctld.lab.pid")" || break
        alive "$(cat "$d/run/slurmd.lab.pid")" || break
        sleep 0.2
    done
    [ "$state" = idle ] || fail_start "$d" "node $NODE is not idle (state '$state')"
    local ms=$((($(date +%s%N) - t0) / 1000000))
    log "up in $((ms / 1000)).$(printf %03d $((ms % 1000))) s: node $NODE idle with $cpus CPUs, $d"
    echo "export SLURM_LAB_DIR=$d"
    echo "export SLURM_CONF=$d/slurm.conf"
}

cmd_run() {
    need
    local d
    d=$(lab_dir)
    [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || die "usage: $0 run -- SRUN-ARGS... CMD..."
    slurm_env "$d"
    exec timeout -k 10 "${SLURM_LAB_RUN_TIMEOUT:-300}" srun "$@"
}

cmd_status() {
    need
    local d
    d=$(lab_dir)
    slurm_env "$d"
    timeout 10 sinfo
    timeout 10 squeue
}

case ${1:-} in
start) cmd_start ;;
run)
    shift
    cmd_run "$@"
    ;;
status) cmd_status ;;
stop)
    need
    cmd_stop "${2:-}"
    ;;
*)
    echo "usage: $0 start | run -- SRUN-ARGS... CMD... | status | stop [DIR]" >&2
    exit 2
    ;;
esac
