"""Console entry points of a pip-installed ringd: `ring-launch`, `ringd` and
`ring-bench` run the programs built into the package (ringd/_bin), the same
C programs that `make install` puts in $(bindir). The process is replaced
(os.execv), so signals, exit codes and the terminal are the program's own.

A `make install` build has no ringd/_bin: its programs are on PATH already.
"""

import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin")


def program_path(name):
    """The path of the bundled program `name` (ringd, ring-launch, ring-bench)."""
    return os.path.join(_BIN, name)


def _exec(name):
    path = program_path(name)
    if not os.access(path, os.X_OK):
        sys.stderr.write(
            "%s: this ringd package has no %s program (%s is missing). It is built by "
            "`pip install` from ringd's sources or comes in ringd's wheels; a package "
            "installed by `make install` has its programs in $(bindir) instead.\n"
            % (name, name, path))
        return 127
    # argv[0] is the real path: ring-bench finds ring-sweep beside itself
    os.execv(path, [path] + sys.argv[1:])
    return 127  # not reached


def ring_launch():
    return _exec("ring-launch")


def ringd():
    return _exec("ringd")


def ring_bench():
    return _exec("ring-bench")
