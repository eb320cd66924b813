#!/usr/bin/env bash
# run.sh SECONDS SEED_DIR FUZZER... - run each libFuzzer harness for SECONDS
# on a scratch copy of its seed corpus (SEED_DIR/NAME, left untouched), one TAP
# line per harness with its executions; a crash, leak or sanitizer report is
# "not ok" with the reproducer's path. `make fuzz` calls it (FUZZ_SECONDS).
set -u
secs=${1:?seconds}
seeds=${2:?seed directory}
shift 2
work=$(mktemp -d "${TMPDIR:-/tmp}/ringd-fuzz.XXXXXX")
n=0
fail=0
echo "1..$#"
for f in "$@"; do
    n=$((n + 1))
    name=$(basename "$f")
    mkdir -p "$work/$name/corpus" "$work/$name/artifacts"
    [ -d "$seeds/$name" ] && cp -r "$seeds/$name/." "$work/$name/corpus/"
    if timeout $((secs + 60)) "$f" -max_total_time="$secs" -print_final_stats=1 \
        -artifact_prefix="$work/$name/artifacts/" -rss_limit_mb=2048 -timeout=10 \
        "$work/$name/corpus" > "$work/$name/log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$name/log" | tail -1)
        echo "ok $n - $name: ${runs:-?} executions in $secs s, no crash"
    else
        fail=$((fail + 1))
        echo "not ok $n - $name: a crash or a sanitizer report (reproducer in $work/$name/artifacts)"
        grep -E "ERROR|SUMMARY|runtime error" "$work/$name/log" | head -5 | sed 's/^/#   /'
    fi
done
[ "$fail" = 0 ] && rm -rf "$work"
[ "$fail" = 0 ]
