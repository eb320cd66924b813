#!/usr/bin/env bash
# update-readme.sh BUILD_DIR - regenerate the README's settings reference
# from the config table (ring-bench --help of the build in BUILD_DIR).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bench=${1:?usage: $0 BUILD_DIR}/ring-bench
table=$("$bench" --help | sed -n '/^Ring options/,/^$/p' | sed '1d;$d')
awk -v table="$table" '
    /^<!-- config-table/ { print; print "```"; print table; print "```"; skip = 1; next }
    /^<!-- end config-table/ { skip = 0 }
    !skip { print }' "$top/README.md" > "$top/README.md.new"
mv "$top/README.md.new" "$top/README.md"
