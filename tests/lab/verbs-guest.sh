#!/bin/bash
# tests/lab/verbs-guest.sh BUILDDIR SRCDIR - the verbs suite, run INSIDE the
# tools/lab/rxe-vm guest (tests/lab/verbs.test boots it with --ndev 4), printing TAP:
#   1. the guest's rxe devices are active
#   2. ib_write_bw rxe0 -> rxe1 (perftest, RC RDMA WRITE), 64 KiB and 16 MiB
#      messages, 3 s each: the better one is the reference bandwidth
#   3. tests/ring/t-verbs, its TAP lines renumbered into this one (with the job's
#      secret: same, another, none, and a stranger on a bootstrap port);
#      3b. tests/ring/t-auth-relay over verbs (a stranger relaying, rewriting and
#      reflecting the bootstrap's handshake), renumbered the same way
#   4. ring-bench over verbs, N=2 and N=4, codecs none, fp16, bf16, with -c:
#      exit 0 and #wrong 0 at every size, and the rxe packet counters grew
#   5. ring-bench N=2, 16 MiB, registered buffers (over verbs: sent without a
#      copy, as rank 0's transport counts), over verbs and over tcp:
#      both right; busbw of both and busbw_verbs / ib_write_bw as "# bar:" lines
#      (TCG numbers: for comparing runs of this suite, not hardware)
#   6. ring-bench N=2, 4 MiB, --rate-limit 50mbit over verbs: busbw at the cap
#   7. ring-bench --doctor over verbs, rank 2 rate-limited: its edge is named
#   8. --transport auto: peers on 127.0.0.1 run shm (no RDMA packets); peers
#      at two addresses run verbs, but being on one machine their connection
#      runs in shared memory (verbs over an shm bootstrap: no RDMA packets)
#   9. --transport auto, 2 "hosts" (--host-id) x 2 peers, hierarchical: local
#      rings over shm, cross rings over verbs, right sums, RDMA packets
#  10. the same 2 x 2 as one flat ring: within a host shared memory, across
#      hosts RDMA, in one ring
#  11. that ring with the job's secret, rank 1 SIGKILLed mid-run: its
#      neighbours in shared memory (rank 0) and over RDMA (rank 2) fail, naming
#      it, no hang
#  12. --transport verbs against auto (whose bootstrap offers shared memory):
#      both fail at start, the verbs peer naming the other's transport; again
#      with the job's secret (12b: the offer comes where a challenge was due)
# ring-launch gives every run a fresh secret, so steps 4-7 bootstrap their
# queue pairs after the challenge-response (transport/verbs_boot.c).
# Every step runs under `timeout`; the plan comes last. Exit status 0 when the
# TAP was printed (failures are "not ok" lines), 2 on bad usage.
# Env: T_VERBS_TRANSPORT (default verbs) runs the ring steps over another
# transport, to check this suite itself: the RDMA traffic checks must fail.
set -u

if [ $# -lt 1 ] || [ ! -x "$1/ring-bench" ]; then
    echo "usage: $0 BUILDDIR [SRCDIR] (BUILDDIR holds ring-bench, ring-launch, tests/ring/t-verbs)" >&2
    exit 2
fi
B=$(cd "$1" && pwd)
TP=${T_VERBS_TRANSPORT:-verbs}
GID=${RXE_GID_INDEX:-1}
T=$(mktemp -d /tmp/verbs-guest.XXXXXX) || exit 2
trap 'rm -rf "$T"' EXIT
START=$SECONDS

n=0
ok() {   # ok STATUS DESCRIPTION: "ok" when STATUS is 0
    n=$((n + 1))
    if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
note() { echo "# $*"; }
elapsed() { echo $((SECONDS - START)); }
# tail of a log as TAP comments
show() { sed 's/^/#   /' "$1" | tail -n "${2:-15}"; }

note "verbs-guest: transport $TP, devices ${RXE_DEVS:-?} (${RXE_IPS:-?}), $(nproc) vCPUs, kernel $(uname -r)"

# ---- 1. devices ------------------------------------------------------------
set -- ${RXE_DEVS:-}
ndev=$#
nactive=$(timeout 30 ibv_devinfo 2>/dev/null | grep -c 'PORT_ACTIVE')
ok $((ndev >= 2 && nactive == ndev ? 0 : 1)) \
    "the guest has $ndev rxe devices, $nactive with an ACTIVE port (need >= 2, all active)"
DEV0=${1:-rxe0} DEV1=${2:-rxe1}
read -r IP0 IP1 _ <<<"${RXE_IPS:-10.77.0.1 10.77.0.2}"

# ---- 2. ib_write_bw reference ---------------------------------------------
# server on rxe1, client on rxe0 -> real RoCEv2 packets over the veth/bridge
# (perftest's MB/sec is 2^20 bytes/s; ring-bench's GB/s is 1e9: IBBW is in 1e6 B/s)
# wait_listen PORT PID: until the server listens (TCG: starting it can take seconds), <= 30 s
wait_listen() {
    local i
    for i in $(seq 300); do
        ss -ltn 2>/dev/null | grep -q ":$1 " && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
# the reference is the better of 64 KiB messages (perftest's default regime, usually the
# fastest under rxe) and 16 MiB ones (the ring's allreduce size)
IBBW=
IBALL=
for size in 65536 16777216; do
    timeout 90 ib_write_bw -d "$DEV1" -x "$GID" -s $size -D 3 -p 18515 >"$T/ibsrv" 2>&1 &
    spid=$!
    wait_listen 18515 $spid || note "the ib_write_bw server is not listening on port 18515 after 30 s"
    timeout 90 ib_write_bw -d "$DEV0" -x "$GID" -s $size -D 3 -p 18515 "$IP1" >"$T/ibcli" 2>&1
    crc=$?
    wait $spid
    src=$?
    # the result line: #bytes #iterations BW-peak BW-average MsgRate
    bw=$(awk -v s=$size '$1 == s && NF >= 5 {printf "%.1f", $4 * 1.048576}' "$T/ibcli" | tail -n 1)
    if [ $crc = 0 ] && [ $src = 0 ] && [ -n "$bw" ]; then
        IBALL="$IBALL $((size >> 10)) KiB: $bw MB/s;"
        if [ -z "$IBBW" ] || awk -v a="$bw" -v b="$IBBW" 'BEGIN { exit !(a > b) }'; then
            IBBW=$bw
            IBSIZE=$size
        fi
        continue
    fi
    note "ib_write_bw with $size-byte messages failed (client $crc, server $src):"
    show "$T/ibcli" 8
    show "$T/ibsrv" 4
done
if [ -n "$IBBW" ]; then
    ok 0 "ib_write_bw $DEV0 -> $DEV1, 3 s each:$IBALL best $IBBW MB/s"
    echo "# bar: ib_write_bw $DEV0 -> $DEV1, best of 64 KiB and 16 MiB messages ($((IBSIZE >> 10)) KiB): $IBBW MB/s"
else
    ok 1 "ib_write_bw $DEV0 -> $DEV1 (64 KiB and 16 MiB messages)"
fi
note "t+$(elapsed) s"

# ---- 3. t-verbs ------------------------------------------------------------
# renumbered into this plan; a skip here is a failure (the guest has devices)
tv_ran=0 tv_plan=-1 tv_skip= tv_bail=
while IFS= read -r line; do
    case "$line" in
    "ok "* | "not ok "*)
        tv_ran=$((tv_ran + 1))
        n=$((n + 1))
        if [[ $line =~ ^(not\ )?ok\ [0-9]+\ -\ (.*)$ ]]; then
            echo "${BASH_REMATCH[1]}ok $n - t-verbs: ${BASH_REMATCH[2]}"
        elif [[ $line =~ ^(not\ )?ok\ [0-9]+(.*)$ ]]; then
            echo "${BASH_REMATCH[1]}ok $n${BASH_REMATCH[2]}"   # "ok 5 # SKIP why"
        else
            echo "not ok $n - t-verbs printed a malformed line: $line"
        fi
        ;;
    "1..0 # SKIP"*) tv_skip=${line#1..0 # SKIP } ;;
    1..*) tv_plan=${line#1..} ;;
    "Bail out!"*) tv_bail=$line ;;
    *) echo "$line" ;;
    esac
done < <(cd "$B" && T_VERBS_TRANSPORT=$TP timeout -k 5 300 ./tests/ring/t-verbs 2>"$T/tverbs.err"; echo "t-verbs-exit $?" >"$T/tverbs.rc")
tv_rc=$(sed -n 's/^t-verbs-exit //p' "$T/tverbs.rc" 2>/dev/null)
if [ -n "$tv_skip" ]; then
    ok 1 "t-verbs ran (it skipped: $tv_skip)"
elif [ -n "$tv_bail" ]; then
    ok 1 "t-verbs: $tv_bail"
else
    ok $((tv_rc == 0 && tv_plan == tv_ran && tv_ran > 0 ? 0 : 1)) \
        "t-verbs ran all $tv_plan planned tests and exited 0 (ran $tv_ran, exit ${tv_rc:-?}$([ "${tv_rc:-}" = 124 ] && echo ': timed out after 300 s'))"
fi
if [ "${tv_rc:-1}" != 0 ]; then
    note "t-verbs stderr (tail):"
    show "$T/tverbs.err" 20
fi
note "t+$(elapsed) s"

# ---- 3b. t-auth-relay over verbs ---------------------------------------------
# a stranger on an absent rank's port relays, rewrites and reflects the verbs
# bootstrap's handshake (tests/ring/t-auth-relay.c), renumbered into this plan
if [ -x "$B/tests/ring/t-auth-relay" ]; then
    ar_ran=0 ar_plan=-1
    while IFS= read -r line; do
        if [[ $line =~ ^(not\ )?ok\ [0-9]+\ -\ (.*)$ ]]; then
            ar_ran=$((ar_ran + 1))
            n=$((n + 1))
            echo "${BASH_REMATCH[1]}ok $n - t-auth-relay: ${BASH_REMATCH[2]}"
        elif [[ $line =~ ^1\.\.([0-9]+) ]]; then
            ar_plan=${BASH_REMATCH[1]}
        elif [[ $line =~ ^# ]]; then
            echo "$line"
        fi
    done < <(cd "$B" && T_AUTH_RELAY_TRANSPORT=$TP timeout -k 5 200 ./tests/ring/t-auth-relay \
                 2>"$T/relay.err"; echo "t-auth-relay-exit $?" >"$T/relay.rc")
    ar_rc=$(sed -n 's/^t-auth-relay-exit //p' "$T/relay.rc" 2>/dev/null)
    ok $((ar_rc == 0 && ar_plan == ar_ran && ar_ran > 0 ? 0 : 1)) \
        "t-auth-relay over $TP ran all $ar_plan planned tests and exited 0 (ran $ar_ran, exit ${ar_rc:-?})"
    [ "${ar_rc:-1}" != 0 ] && show "$T/relay.err" 20
fi
note "t+$(elapsed) s"

# ---- 4. ring-bench -c over verbs ---------------------------------------------
# bench N CODEC OUT ARGS...: ring-launch + ring-bench --csv; status in $brc
bench() {
    local np=$1 codec=$2 out=$3 tp=$4
    shift 4
    (cd "$B" && timeout -k 5 120 ./ring-launch -n "$np" --timeout 110 -- \
        ./ring-bench --transport "$tp" --codec "$codec" --csv -c "$@") >"$out" 2>"$out.err"
    brc=$?
}
# csv_rows FILE: rank 0's CSV rows (without the header)
csv_rows() { sed -n 's/^\[0\] \([0-9][0-9]*,.*\)$/\1/p' "$1"; }
# packets sent by all rxe devices so far (rxe's hw counter): what ran over RDMA
pkts() { cat /sys/class/infiniband/*/ports/*/hw_counters/sent_pkts 2>/dev/null | awk '{s += $1} END {print s + 0}'; }

for np in 2 4; do
    for codec in none fp16 bf16; do
        t0=$SECONDS
        p0=$(pkts)
        bench $np $codec "$T/b" "$TP" -b 4K -e 1M -f 16 -n 2 -w 1
        sent=$(($(pkts) - p0))
        rows=$(csv_rows "$T/b" | wc -l)
        bad=$(csv_rows "$T/b" | awk -F, '$7 != 0' | wc -l)
        # at least 3 calls of 1 MiB, each rank sending >= 1 MiB of it (fp16: half): >= 256 packets
        ok $((brc == 0 && rows == 3 && bad == 0 && sent >= 256 ? 0 : 1)) \
            "ring-bench $TP N=$np codec $codec -c, 4K..1M: exit $brc, $rows sizes, $bad with #wrong != 0, $sent RDMA packets (need >= 256) ($((SECONDS - t0)) s)"
        if [ $brc != 0 ] || [ "$rows" != 3 ] || [ "$bad" != 0 ]; then
            show "$T/b" 8
            show "$T/b.err" 8
        fi
    done
done
note "t+$(elapsed) s"

# ---- 5. 16 MiB: verbs vs tcp, and the bar --------------------------------------
declare -A BUSBW
for tp in "$TP" tcp; do
    t0=$SECONDS
    p0=$(pkts)
    # --register: the buffers are registered (ring_comm_register), so verbs sends them
    # without a bounce copy, as an application that cares about bandwidth would
    bench 2 none "$T/big" "$tp" -b 16M -e 16M -n 4 -w 1 --register --log-level debug
    sent=$(($(pkts) - p0))
    if [ "$tp" = verbs ]; then
        # rank 0's verbs transport counts, at close, what left without a copy
        read -r direct bounced <<<"$(sed -n 's/^\[0\].*verbs: sent \([0-9]*\) bytes straight from registered memory, \([0-9]*\) through.*/\1 \2/p' "$T/big.err" | tail -n 1)"
        ok $((${direct:-0} >= 5 * 16777216 && ${bounced:-1} < 1048576 ? 0 : 1)) \
            "ring-bench --register over verbs: rank 0 sent ${direct:-?} bytes straight from the registered buffers (need >= 5 x 16 MiB: warm-up and timed calls) and ${bounced:-?} through the bounce slots (need < 1 MiB)"
    fi
    row=$(csv_rows "$T/big" | head -n 1)
    wrong=$(printf '%s\n' "$row" | awk -F, 'NF >= 7 {print $7}')
    # busbw in GB/s (1e9 B/s) -> MB/s (1e6 B/s), as perftest prints
    BUSBW[$tp]=$(printf '%s\n' "$row" | awk -F, 'NF >= 7 {printf "%.1f", $6 * 1000}')
    # verbs: 4 timed calls (+ warm-up, check), each rank sending 16 MiB = 4096+ packets per call; tcp: none
    if [ "$tp" = tcp ]; then want="no RDMA packets"; good=$((sent == 0)); else want=">= 32768 RDMA packets"; good=$((sent >= 32768)); fi
    ok $((brc == 0 && ${#row} > 0 && ${wrong:-1} == 0 && good ? 0 : 1)) \
        "ring-bench $tp N=2 16 MiB -c: exit $brc, #wrong ${wrong:-?}, busbw ${BUSBW[$tp]:-?} MB/s, $sent RDMA packets ($want) ($((SECONDS - t0)) s)"
    [ $brc = 0 ] || { show "$T/big" 8; show "$T/big.err" 8; }
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# ---- 6. --rate-limit over verbs ------------------------------------------------
# 50mbit = 6.25 MB/s per connection: N=2 sends 4 MiB each way per call, so busbw
# (N=2: bytes / time) is the cap when the limit holds; a limit that posts
# writes regardless would run at the guest's RDMA speed (tens of MB/s and up)
t0=$SECONDS
p0=$(pkts)
bench 2 none "$T/rl" "$TP" -b 4M -e 4M -n 3 -w 1 --rate-limit 50mbit
sent=$(($(pkts) - p0))
row=$(csv_rows "$T/rl" | head -n 1)
wrong=$(printf '%s\n' "$row" | awk -F, 'NF >= 7 {print $7}')
RLBW=$(printf '%s\n' "$row" | awk -F, 'NF >= 7 {printf "%.2f", $6 * 1000}')
within=$(awk -v x="${RLBW:-0}" 'BEGIN { print (x >= 0.5 * 6.25 && x <= 1.1 * 6.25) ? 0 : 1 }')
ok $((brc == 0 && ${wrong:-1} == 0 && within == 0 && sent >= 4096 ? 0 : 1)) \
    "ring-bench $TP N=2 4 MiB --rate-limit 50mbit: exit $brc, #wrong ${wrong:-?}, busbw ${RLBW:-?} MB/s (need 3.1-6.9: the cap is 6.25), $sent RDMA packets (need >= 4096) ($((SECONDS - t0)) s)"
[ $brc = 0 ] || { show "$T/rl" 8; show "$T/rl.err" 8; }
# ---- 7. the ring doctor over verbs names a slowed edge --------------------------
# every rank capped (40mbit = 5 MB/s, well below the guest's RDMA speed) and
# rank 2 at 8mbit: only the edge rank 2 -> rank 3 may be flagged
t0=$SECONDS
(cd "$B" && timeout -k 5 120 ./ring-launch -n 4 --timeout 110 -- bash -c \
    'if [ "$RING_RANK" = 2 ]; then export RING_RATE_LIMIT=8mbit; else export RING_RATE_LIMIT=40mbit; fi; exec "$@"' \
    doctor ./ring-bench --transport "$TP" --doctor --doctor-bytes 256K) >"$T/doc" 2>"$T/doc.err"
drc=$?
nslow=$(grep -c '^\[0\] slow edge:' "$T/doc")
ok $((drc == 3 && nslow == 1 ? 0 : 1)) \
    "ring-bench --doctor over $TP, 4 peers, rank 2 at 8mbit: exit $drc (need 3), $nslow slow edge(s) named (need 1) ($((SECONDS - t0)) s)"
ok $(grep -q '^\[0\] slow edge: rank 2 (.*) -> rank 3 (' "$T/doc" && grep -q "over $TP" "$T/doc"; echo $?) \
    "... the slow edge is rank 2 -> rank 3, measured over $TP"
[ $drc = 3 ] && [ "$nslow" = 1 ] || { show "$T/doc" 12; show "$T/doc.err" 8; }
note "doctor over $TP, MB/s of edges 0..3: $(sed -n 's/^\[0\] *\([0-9]\) *rank .*) *\([0-9.]*\) .*/\2/p' "$T/doc" | tr '\n' ' ')"

# ---- 8. auto: shm within one host, verbs across addresses --------------------
# ring-launch's peer list is 127.0.0.1, so every peer is on this host: auto runs
# shm (as NCCL and Open MPI do) and nothing goes through rxe
t0=$SECONDS
p0=$(pkts)
bench 2 none "$T/auto" auto -b 1M -e 1M -n 3 -w 1 --log-level info
sent=$(($(pkts) - p0))
row=$(csv_rows "$T/auto" | head -n 1)
wrong=$(printf '%s\n' "$row" | awk -F, 'NF >= 7 {print $7}')
grep -q '^\[0\].*transport auto: shm .*every peer is on this host' "$T/auto.err"
said=$?
ok $((brc == 0 && ${#row} > 0 && ${wrong:-1} == 0 && said == 0 && sent < 64 ? 0 : 1)) \
    "ring-bench --transport auto N=2 1 MiB, peers on 127.0.0.1: exit $brc, #wrong ${wrong:-?}, rank 0 says auto chose shm ($([ $said = 0 ] && echo yes || echo no)), $sent RDMA packets (need < 64) ($((SECONDS - t0)) s)"
[ $brc = 0 ] && [ $said = 0 ] || { show "$T/auto" 6; show "$T/auto.err" 10; }

# kill_when_up ERR PID SECS: SIGKILL PID SECS seconds after its log ERR says the ring is
# connected, and write the time of the kill to ERR.killed (a kill timed from the launch
# can land in a slow guest's bootstrap instead of the allreduces); gives up when PID is
# gone, and kills it anyway at 90 s if it never connects, so nothing waits unbounded
kill_when_up() {
    local err=$1 pid=$2 after=$3 i
    for ((i = 0; i < 900; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        grep -q 'ring connected' "$err" 2>/dev/null && break
        sleep 0.1
    done
    sleep "$after"
    kill -KILL "$pid" 2>/dev/null && date +%s >"$err.killed"
}

# ranks OUT N ARGS...: N ring-bench processes, rank r with the extra environment
# RANK_ENV[r] (VAR=value ...) and, where RANK_KILL[r] is set, SIGKILLed after that
# many seconds (else a 120 s guard), or where RANK_KILL_UP[r] is, that many seconds
# after it connected (kill_when_up; needs --log-level info); rank 0's output in OUT (as
# csv_rows reads it), rank r's in OUT.r, its log in OUT.r.err, every rank's log in
# OUT.err, its exit status in RANK_RC[r] and the first non-zero one in $brc
ranks() {
    local out=$1 nr=$2 pids=() watchers=() guard r rc
    shift 2
    rm -f "$out".*.killed
    for ((r = 0; r < nr; r++)); do
        # the guard: timeout, unless kill_when_up kills the rank (it is the guard then)
        guard=()
        # shellcheck disable=SC2206 # -s KILL is two words
        [ -n "${RANK_KILL_UP[$r]:-}" ] ||
            guard=(timeout -k 5 ${RANK_KILL[$r]:+-s KILL} "${RANK_KILL[$r]:-120}")
        # exec: $! is the guard, or ring-bench itself for kill_when_up to kill
        # shellcheck disable=SC2086 # RANK_ENV[r] is a list of assignments
        (cd "$B" && exec env RING_RANK=$r RING_WORLD_SIZE=$nr ${RANK_ENV[$r]:-} "${guard[@]}" \
            ./ring-bench --timeout 60s --connect-timeout 60s "$@") >"$out.$r" 2>"$out.$r.err" &
        pids+=($!)
        if [ -n "${RANK_KILL_UP[$r]:-}" ]; then
            kill_when_up "$out.$r.err" $! "${RANK_KILL_UP[$r]}" &
            watchers+=($!)
        fi
    done
    brc=0
    RANK_RC=()
    for r in "${!pids[@]}"; do
        wait "${pids[$r]}"
        rc=$?
        RANK_RC[r]=$rc
        [ $brc = 0 ] && brc=$rc
    done
    [ ${#watchers[@]} = 0 ] || wait "${watchers[@]}"
    for ((r = 0; r < nr; r++)); do cat "$out.$r.err"; done >"$out.err"
    sed 's/^/[0] /' "$out.0" >"$out"
    RANK_ENV=() RANK_KILL=() RANK_KILL_UP=()
}
RANK_ENV=() RANK_KILL=() RANK_KILL_UP=()

# by_hand OUT PEERS ARGS...: one ring-bench per entry of the peer list (RING_PEERS,
# each listening on its entry), as ranks() says
by_hand() {
    local out=$1 peers=$2 nr r
    shift 2
    nr=$(awk -F, '{print NF}' <<<"$peers")
    for ((r = 0; r < nr; r++)); do RANK_ENV[r]="RING_PEERS=$peers ${RANK_ENV[$r]:-}"; done
    ranks "$out" "$nr" "$@"
}

t0=$SECONDS
p0=$(pkts)
by_hand "$T/auto2" "$IP0:29811,$IP1:29812" --transport auto --codec none --csv -c \
    -b 1M -e 1M -n 3 -w 1 --log-level info
sent=$(($(pkts) - p0))
row=$(csv_rows "$T/auto2" | head -n 1)
wrong=$(printf '%s\n' "$row" | awk -F, 'NF >= 7 {print $7}')
# ranks_saying FILE PATTERN: how many ranks logged PATTERN (each communicator logs it:
# the ring's, and the pairs' of recursive doubling)
ranks_saying() { grep "$2" "$1" | grep -o '^ringd\[rank [0-9]*\]' | sort -u | wc -l; }
nshm=$(ranks_saying "$T/auto2.err" 'verbs: [1-9][0-9]* connection(s) to peers on this host ran in shared memory')
ok $((brc == 0 && ${#row} > 0 && ${wrong:-1} == 0 && nshm == 2 && sent < 64 ? 0 : 1)) \
    "ring-bench --transport auto N=2 1 MiB, peers at $IP0 and $IP1 of one machine: exit $brc, #wrong ${wrong:-?}, $nshm of 2 ranks say verbs ran their connections in shared memory, $sent RDMA packets (need < 64) ($((SECONDS - t0)) s)"
[ $brc = 0 ] && [ "$nshm" = 2 ] || { show "$T/auto2" 6; show "$T/auto2.err" 10; }

# hosts4 OUT PORT ARGS...: ring-bench --transport auto on 4 peers meeting at a tcp
# store on 127.0.0.1:PORT, ranks 0,1 declaring host h0 and ranks 2,3 host h1
# (--host-id, as NCCL_HOSTID: one machine stands in for two hosts, and shm keeps
# within a declared host), as ranks() says
hosts4() {
    local out=$1 port=$2 r
    shift 2
    for r in 0 1 2 3; do
        RANK_ENV[r]="RING_HOST_ID=h$((r / 2)) RING_RENDEZVOUS=tcp://127.0.0.1:$port ${RANK_ENV[$r]:-}"
    done
    ranks "$out" 4 --transport auto --codec none --csv -c "$@"
}

# ---- 9. auto with 2 "hosts" x 2 peers: hierarchical, the local rings in shared memory
# and the cross rings over verbs
t0=$SECONDS
p0=$(pkts)
hosts4 "$T/mix" 29831 --hierarchical on -b 4M -e 4M -n 2 -w 1 --log-level info
sent=$(($(pkts) - p0))
row=$(csv_rows "$T/mix" | head -n 1)
wrong=$(printf '%s\n' "$row" | awk -F, 'NF >= 7 {print $7}')
nmix=$(ranks_saying "$T/mix.err" 'hierarchical allreduce: 2 hosts x 2 peers (local ring over shm, cross ring over verbs)')
ok $((brc == 0 && ${#row} > 0 && ${wrong:-1} == 0 && nmix == 4 && sent >= 1024 ? 0 : 1)) \
    "ring-bench --transport auto --hierarchical on, 2 host ids x 2 peers, 4 MiB -c: exit $brc, #wrong ${wrong:-?}, $nmix of 4 ranks run the local ring over shm and the cross ring over verbs, $sent RDMA packets (need >= 1024) ($((SECONDS - t0)) s)"
[ $brc = 0 ] && [ "$nmix" = 4 ] || { show "$T/mix" 6; show "$T/mix.err" 12; }

# ---- 10. the same as one flat ring: ring order by host (0 -> 1 -> 2 -> 3), so each
# rank has one neighbour on its host (shared memory) and one on the other (RDMA)
t0=$SECONDS
p0=$(pkts)
hosts4 "$T/flat" 29841 --hierarchical off -b 4M -e 4M -n 2 -w 1 --log-level info
sent=$(($(pkts) - p0))
row=$(csv_rows "$T/flat" | head -n 1)
wrong=$(printf '%s\n' "$row" | awk -F, 'NF >= 7 {print $7}')
nshm=$(ranks_saying "$T/flat.err" 'verbs: [1-9][0-9]* connection(s) to peers on this host ran in shared memory')
nauto=$(ranks_saying "$T/flat.err" 'transport auto: verbs (RDMA to other hosts, shared memory with peers on this host)')
ok $((brc == 0 && ${#row} > 0 && ${wrong:-1} == 0 && nshm == 4 && nauto == 4 && sent >= 1024 ? 0 : 1)) \
    "ring-bench --transport auto, flat ring over 2 host ids x 2 peers, 4 MiB -c: exit $brc, #wrong ${wrong:-?}, $nauto of 4 ranks chose verbs with shared memory on the host, $nshm of 4 ran a connection in shared memory, $sent RDMA packets (need >= 1024) ($((SECONDS - t0)) s)"
[ $brc = 0 ] && [ "$nshm" = 4 ] || { show "$T/flat" 6; show "$T/flat.err" 12; }

# ---- 11. that ring with a secret (the guard runs over the shm bootstrap), rank 1
# killed after 6 s of allreduces (timed from its connected ring: a slow guest's bootstrap
# with a secret can take longer than that): rank 0 (its neighbour in shared memory) and
# rank 2 (over RDMA) must fail within the timeout, naming rank 1
t0=$SECONDS
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/secret"
RANK_KILL=(60 '' 60 60) RANK_KILL_UP=('' 6)
for r in 0 1 2 3; do RANK_ENV[r]="RING_SECRET_FILE=$T/secret"; done
hosts4 "$T/kill" 29851 --hierarchical off -b 1M -e 1M -n 100000 -w 1 --timeout 5s \
    --log-level info
took=$((SECONDS - t0))
after=-1
[ -f "$T/kill.1.err.killed" ] && after=$(($(date +%s) - $(cat "$T/kill.1.err.killed")))
named0=$(grep -c '^ring-bench: rank 0: .*rank 1 (' "$T/kill.err")
named2=$(grep -c '^ring-bench: rank 2: .*rank 1 (' "$T/kill.err")
# the warning of a listener without one (--log-level info also shows start-up retries
# whose reasons ask whether a peer runs without a secret)
nosecret=$(grep -c 'listening on .* without a secret' "$T/kill.err")
ok $((brc != 0 && after >= 0 && after < 30 && named0 > 0 && named2 > 0 && nosecret == 0 ? 0 : 1)) \
    "flat ring of shm and RDMA links with a secret, rank 1 SIGKILLed 6 s after its ring connected: the others stopped $after s after the kill (need < 30; -1: it was never killed), $took s in all, rank 0 names rank 1 ($named0 lines), rank 2 names it ($named2 lines), $nosecret warnings of no secret"
[ $after -ge 0 ] && [ $after -lt 30 ] && [ "$named0" -gt 0 ] && [ "$named2" -gt 0 ] &&
    [ "$nosecret" = 0 ] || show "$T/kill.err" 12

# ---- 12. one peer --transport verbs, the other auto: refused, named, no hang;
# 12b. the same with the job's secret: the offer arrives where the verbs peer's
# guard waits for a challenge, and is still named (not "authentication failed" alone)
# verbs_vs_auto OUT PORT0 PORT1 LABEL [VAR=value ...] (the extra settings go to both)
verbs_vs_auto() {
    local out=$1 p0=$2 p1=$3 label=$4 named took rc0 rc1
    shift 4
    t0=$SECONDS
    RANK_ENV=("RING_TRANSPORT=verbs $*" "RING_TRANSPORT=auto $*") RANK_KILL=(60 60)
    by_hand "$out" "$IP0:$p0,$IP1:$p1" --timeout 10s --connect-timeout 10s -b 4K -e 4K -n 1
    took=$((SECONDS - t0))
    rc0=${RANK_RC[0]} rc1=${RANK_RC[1]}
    named=$(grep -c 'offers shared memory first (--transport shm, or auto' "$out.0.err")
    ok $((rc0 != 0 && rc0 != 137 && rc1 != 0 && rc1 != 137 && named > 0 && took < 40 ? 0 : 1)) \
        "${label}rank 0 --transport verbs, rank 1 auto: exits $rc0 and $rc1 in $took s (need non-zero, < 40 s), rank 0 names the other's transport ($named lines)"
    [ "$named" -gt 0 ] || { show "$out.0.err" 6; show "$out.1.err" 6; }
}
verbs_vs_auto "$T/mixtp" 29861 29862 ""
verbs_vs_auto "$T/mixsec" 29871 29872 "with a secret, " "RING_SECRET_FILE=$T/secret"

echo "# bar: ring-bench N=2 16 MiB busbw: $TP ${BUSBW[$TP]:-n/a} MB/s, tcp ${BUSBW[tcp]:-n/a} MB/s ($TP/tcp $(ratio "${BUSBW[$TP]:-0}" "${BUSBW[tcp]:-0}"))"
echo "# bar: busbw_$TP / ib_write_bw = ${BUSBW[$TP]:-n/a} / ${IBBW:-n/a} MB/s = $(ratio "${BUSBW[$TP]:-0}" "${IBBW:-0}")"

note "verbs-guest: $n tests in $(elapsed) s"
echo "1..$n"
exit 0
