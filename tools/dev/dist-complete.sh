#!/usr/bin/env bash
# dist-complete.sh TARBALL - check that a release tarball ships every file git tracks.
#
# make distcheck only finds a missing file when a build step or a test it runs needs
# it; this finds every one (a script, a seed corpus, a doc), whatever tests run.
# Files that are not meant to ship are listed below (NOT_SHIPPED), each with why.
# Exit: 0 complete, 1 files missing (listed, with the fix), 2 usage, 77 not a git
# checkout (nothing to compare with: skipped, said so).
set -euo pipefail

# tracked but not for a release: git's own configuration
NOT_SHIPPED='^\.gitignore$'

[ $# -eq 1 ] && [ -f "$1" ] || {
    echo "usage: $0 TARBALL   (e.g. _build/dist/ringd-0.1.0.tar.gz)" >&2
    exit 2
}
tarball=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$(dirname "$0")/../.."
if ! git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    echo "dist-complete: SKIP: $(pwd) is not a git checkout, no list of tracked files to compare"
    exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the tarball's members without their top folder (ringd-X.Y.Z/), files only
tar -tzf "$tarball" | sed -n 's|^[^/]*/||; /[^/]$/p' | LC_ALL=C sort -u > "$work/shipped"
git ls-files | grep -Ev "$NOT_SHIPPED" | LC_ALL=C sort -u > "$work/tracked"
LC_ALL=C comm -23 "$work/tracked" "$work/shipped" > "$work/missing"
if [ -s "$work/missing" ]; then
    echo "dist-complete: $(wc -l < "$work/missing") tracked file(s) missing from $(basename "$tarball"):"
    sed 's/^/   /' "$work/missing"
    echo "   fix: add each to EXTRA_DIST (or a _SOURCES/dist_ list) in Makefile.am or its fragment"
    exit 1
fi
echo "dist-complete: $(basename "$tarball") ships all $(wc -l < "$work/tracked") tracked files"
