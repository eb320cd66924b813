#!/usr/bin/env bash
# update-readme.sh BUILD_DIR - regenerate docs/configuration.md's settings
# references from the option tables: the ring's (ring-bench --help) and the daemon's
# training options (ringd --help) of the build in BUILD_DIR.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: $0 BUILD_DIR}
ring=$("$build/ring-bench" --help | sed -n '/^Ring options/,/^$/p' | sed '1d;$d')
training=$("$build/ringd" --help | sed -n '/^Training options/,/^$/p' | sed '1d;$d')
awk -v ring="$ring" -v training="$training" '
    /^<!-- config-table/ { print; print "```"; print ring; print "```"; skip = 1; next }
    /^<!-- training-table/ { print; print "```"; print training; print "```"; skip = 1; next }
    /^<!-- end (config|training)-table/ { skip = 0 }
    !skip { print }' "$top/docs/configuration.md" > "$top/docs/configuration.md.new"
mv "$top/docs/configuration.md.new" "$top/docs/configuration.md"
