#!/usr/bin/env bash
# copy-sources.sh DEST - a clean copy of ringd's sources in DEST (made if
# missing): git's list of files where this is a clone, so nothing of a build
# tree comes along; else the tree less its build outputs. What the Python
# build (pip install DEST, tools/wheel/build-wheels.sh) compiles.
set -euo pipefail
[ $# = 1 ] || { echo "usage: $0 DEST" >&2; exit 2; }
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1"
if git -C "$top" rev-parse --is-inside-work-tree > /dev/null 2>&1 &&
    [ "$(git -C "$top" rev-parse --show-toplevel)" = "$top" ]; then
    (cd "$top" && git ls-files -z --cached --others --exclude-standard |
        tar --null -T - -cf -) | tar -C "$1" -xf -
else
    # a release tarball (make dist), or a tree without git
    (cd "$top" && tar --exclude=./build --exclude=./_build --exclude='*.egg-info' \
        --exclude=__pycache__ --exclude='*.o' --exclude='*.lo' --exclude=.libs -cf - .) |
        tar -C "$1" -xf -
fi
