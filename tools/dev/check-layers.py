#!/usr/bin/env python3
"""check-layers.py BUILD_DIR [--strict] - facts about the source tree's layers.

Prints, for the C sources of libringd, the daemon, the tools and the Python
extension (python/ext_*.c, the objects of python/_ringd.la):
  circles     cycles between source files, from the built objects: file A
              depends on file B when A uses a global symbol B defines (nm).
              Every strongly connected group of more than one file is a circle.
              The objects are make's and libtool's under BUILD_DIR (one per
              source, the newest; a libtool object only in .libs/ counts too),
              tests/ and fuzz/ left out; a tree configured without Python has
              no python/ objects, and the rest is read as usual. The line
              "objects read:" says how many sources had objects, by folder.
  includes    include-rule violations: who may include whom, by folder
              (the table ALLOWED below, and docs/internals.md).
  owners      writes to a group of struct ring_comm (comm->fail.error = ...,
              comm->requests.head++) outside the files that own it (the table
              OWNERS below, and src/core/comm_int.h): assignments and
              increments of a communicator's group, not calls that fill one
              through a pointer.
  largest     the longest source files outside tests/ (the bar: 800 lines).
  duplicates  runs of 6 or more identical lines (blank lines and lone braces
              skipped) that appear in two places.

With --edges it also lists, inside each circle, every edge and the symbols
that make it (what to move to break the circle).
With --strict it exits 1 when there is a circle, an include violation or an
owner violation. With --self-test it plants an include that breaks a rule and a
write outside a group's owner in copies of sources (in memory), and exits 1
unless the checks find exactly those.
Only Python's standard library and binutils' nm are needed.
"""
import collections
import os
import re
import subprocess
import sys

# this file is TOP/tools/dev/check-layers.py
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE_DIRS = ["src", "transport", "kernels", "include", "tools", "python"]
EXTS = (".c", ".h", ".cu")
RUN = 6


def rel(path):
    return os.path.relpath(path, TOP)


def source_files():
    for d in SOURCE_DIRS:
        for root, _, files in os.walk(os.path.join(TOP, d)):
            for f in sorted(files):
                if f.endswith(EXTS):
                    yield os.path.join(root, f)


# ---- circles, from the objects ------------------------------------------------

def object_files(build):
    """(object path, source path) for the objects libtool and make built."""
    out = []
    by_name = collections.defaultdict(list)
    for src in source_files():
        if src.endswith(".c"):
            by_name[os.path.splitext(os.path.basename(src))[0]].append(src)
    for root, dirs, files in os.walk(build):
        dirs[:] = [d for d in dirs if d not in ("tests", "fuzz", "_inst")]
        parts = root.split(os.sep)
        if ".libs" in parts[:-1]:
            continue
        libs = parts[-1] == ".libs"
        for f in files:
            if not f.endswith(".o"):
                continue
            # libtool's PIC twin (dir/.libs/x.o beside dir/x.o): the same symbols, read
            # once; alone (a PIC-only build), it stands for its source
            if libs and os.path.exists(os.path.join(os.path.dirname(root), f)):
                continue
            stem = f[:-2]
            # libtool and per-target objects: libringd_la-comm.o, ring_bench-ring-bench.o,
            # the extension's python/_ringd_la-ext_comm.o
            cand = stem.split("-", 1)[1] if "-" in stem and stem.split("-", 1)[0].endswith(
                ("_la", "_bench", "_launch", "ringd", "_merge")) else stem
            srcs = by_name.get(cand) or by_name.get(stem)
            if not srcs:
                continue
            sub = os.path.relpath(os.path.dirname(root) if libs else root, build)
            # automake's subdir-objects puts an object in its source's folder:
            # an object with no source there is stale (a file that moved)
            pick = [s for s in srcs if rel(os.path.dirname(s)) == sub]
            if pick:
                out.append((os.path.join(root, f), pick[0]))
    # one object per source, the newest: an older one is from before a
    # change of target (libringd_la-x.o became libringd_internal_la-x.o)
    newest = {}
    for obj, src in out:
        if src not in newest or os.path.getmtime(obj) > os.path.getmtime(newest[src]):
            newest[src] = obj
    return [(obj, src) for src, obj in newest.items()]


def nm_symbols(obj):
    defined, undefined = set(), set()
    res = subprocess.run(["nm", "-g", obj], capture_output=True, text=True, check=False)
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVWC":
            defined.add(parts[2])
    return defined, undefined


def sccs(graph):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def circles(build):
    objs = object_files(build)
    defs, uses = {}, {}
    for obj, src in objs:
        d, u = nm_symbols(obj)
        defs.setdefault(rel(src), set()).update(d)
        uses.setdefault(rel(src), set()).update(u)
    owner = {}
    for src, syms in defs.items():
        for s in syms:
            owner.setdefault(s, src)
    graph = {src: set() for src in defs}
    why = collections.defaultdict(set)
    for src, syms in uses.items():
        for s in syms:
            o = owner.get(s)
            if o is not None and o != src:
                graph[src].add(o)
                why[(src, o)].add(s)
    groups = [c for c in sccs(graph) if len(c) > 1]
    return defs, groups, graph, why


# ---- include rules -------------------------------------------------------------

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def resolve(inc, src, search):
    here = os.path.join(os.path.dirname(src), inc)
    if os.path.exists(here):
        return os.path.normpath(here)
    for d in search:
        p = os.path.join(TOP, d, inc)
        if os.path.exists(p):
            return os.path.normpath(p)
    return None  # autoconf's config.h, generated headers


# Who may include whom, by folder (docs/internals.md). The library's layers,
# bottom to top: src/base < transport, kernels < src/bootstrap < src/protocol
# (the wire format, the schedule, frame tags: pure, no communicator) < src/core
# (the engine) < src/algo (algorithms over sub-communicators, called by the
# engine through src/core/algo.h's table) and src/diag (autotuner, doctor).
# One file is the top of the library and may reach algo and diag: the
# communicator's life, src/comm_open.c (it installs the algorithms, runs the
# autotuner at open, frees the doctor at close). src/ssp is a client of the
# public API. The daemon, the tools and the Python extension see the public
# API and src/base only.
LIB = ["src/protocol/", "src/bootstrap/", "transport/", "kernels/", "src/base/"]
ALLOWED = [
    ("src/base/", ["src/base/"]),
    ("transport/", ["transport/", "src/base/"]),
    ("kernels/", ["kernels/", "src/base/"]),
    ("src/bootstrap/", ["src/bootstrap/", "transport/", "src/base/"]),
    ("src/protocol/", ["src/protocol/", "src/bootstrap/", "transport/", "src/base/"]),
    ("src/comm_open.c", ["src/diag/", "src/algo/", "src/core/"] + LIB),
    ("src/core/", ["src/core/"] + LIB),
    # an algorithm reaches the engine through algo.h alone
    ("src/algo/", ["src/algo/", "src/core/algo.h"] + LIB),
    ("src/diag/", ["src/diag/", "src/core/"] + LIB),
    # the survivors' agreement is protocol over the transport; shrink opens the new
    # ring through the public API and reads the old communicator (src/core)
    ("src/elastic/agree", ["src/elastic/"] + LIB),
    ("src/elastic/", ["src/elastic/", "src/core/"] + LIB),
    ("src/ssp/", ["src/ssp/", "src/base/"]),
    ("src/workloads/", ["src/workloads/", "src/base/"]),
    ("src/daemon/", ["src/daemon/", "src/workloads/", "src/base/"]),
    ("tools/bench/ring-kernel-bench.c", ["kernels/", "src/base/"]),  # it measures the kernels
    ("tools/", ["tools/", "src/base/"]),
    ("python/", ["python/"]),
]


def source_text(src, planted):
    """A source's text: planted[relative path] when the self-test planted one."""
    if planted and rel(src) in planted:
        return planted[rel(src)]
    return open(src, encoding="utf-8", errors="replace").read()


def include_violations(planted=None):
    # the -I folders of Makefile.am's AM_CPPFLAGS, in its order
    search = ["include", "src", "src/base", "src/bootstrap", "src/protocol", "src/core",
              "src/algo", "src/ssp", "src/diag", "src/elastic", "transport", "kernels"]
    bad = []
    for src in source_files():
        r = rel(src)
        rule = next((allowed for prefix, allowed in ALLOWED if r.startswith(prefix)), None)
        if rule is None:
            continue
        text = source_text(src, planted)
        for inc in INCLUDE.findall(text):
            target = resolve(inc, src, search)
            if target is None:
                continue
            t = rel(target)
            if t.startswith("include/") or t.startswith(tuple(rule)):
                continue
            bad.append((r, t, "%s may include only %s and include/ringd/" % (
                os.path.dirname(r) + "/", ", ".join(rule))))
    return bad


# ---- who writes which group of struct ring_comm ----------------------------------

# The files that write each group (src/core/comm_int.h says the same); src/comm_open.c,
# which opens and frees the communicator, may write them all. A request slot's
# contents (requests.slots[i].x) are the request's, written by whoever runs it.
OWNERS = {
    "fail": ["src/core/fail.c"],
    "topo": ["src/core/rendezvous.c", "src/core/connect.c"],
    "rdzv": ["src/core/rendezvous.c", "src/core/rdzv_join.c"],
    "tune": ["src/diag/autotune.c"],
    "enc": ["src/core/codec_pipeline.c", "src/core/device_codec.c"],
    "auth": ["src/core/connect.c"],
    "coll": ["src/core/collectives.c", "src/core/coll_plan.c"],
    "requests": ["src/core/requests.c", "src/core/allreduce.c"],
    "algo": ["src/algo/"],
    "doctor": ["src/diag/doctor.c"],
    "notice": ["src/core/notice.c"],
    "elastic": ["src/elastic/shrink.c", "src/elastic/grow.c", "src/core/rdzv_join.c"],
}
OWNER_ALL = "src/comm_open.c"
# comm->GROUP.member... followed by an assignment or an increment, or ++/-- before it;
# the communicator is `comm`, `pc`, or a `->comm`/`.comm` member
_COMM = r"(?:\b(?:comm|pc)|(?:->|\.)comm)->"
_MEMBER = r"(%s)\.(\w+)(?:\[[^]\n]*\]|\.\w+|->\w+)*" % "|".join(OWNERS)
WRITE = re.compile(_COMM + _MEMBER + r"\s*(?:[-+*/|&^]?=(?!=)|\+\+|--)|(?:\+\+|--)\s*" +
                   _COMM + _MEMBER)


def owner_violations(planted=None):
    bad = []
    for src in source_files():
        r = rel(src)
        if not r.startswith("src/") or not r.endswith(".c") or r == OWNER_ALL:
            continue
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"),
                      source_text(src, planted), flags=re.S)
        for m in WRITE.finditer(text):
            group, member = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            if group == "requests" and member == "slots":
                continue
            if not r.startswith(tuple(OWNERS[group])):
                line = text.count("\n", 0, m.start()) + 1
                bad.append((r, line, group, ", ".join(OWNERS[group])))
    return bad


def self_test():
    """The checks find what is planted (so a clean run means something)."""
    planted = {
        "src/algo/rd_fit.c": source_text(os.path.join(TOP, "src/algo/rd_fit.c"), None)
        + '\n#include "frame_check.h"\n',
        "src/core/allreduce.c": source_text(os.path.join(TOP, "src/core/allreduce.c"), None)
        + "\nstatic void planted(ring_comm_t *comm) { comm->fail.error = RING_OK; }\n"
        + "static void planted2(ring_comm_t *comm) { ++comm->notice.early_valid; }\n",
    }
    inc = [b for b in include_violations(planted) if b[0] == "src/algo/rd_fit.c"]
    own = [b for b in owner_violations(planted) if b[0] == "src/core/allreduce.c"]
    clean = len(include_violations()) == 0 and len(owner_violations()) == 0
    good = (len(inc) == 1 and inc[0][1] == "src/core/frame_check.h" and
            sorted(b[2] for b in own) == ["fail", "notice"])
    print("self-test: %s (planted: an include of src/core/frame_check.h in src/algo/rd_fit.c, "
          "found %d; writes to comm->fail and comm->notice in src/core/allreduce.c, found %d; "
          "the tree without them: %s)" % ("ok" if good else "FAILED", len(inc), len(own),
                                          "clean" if clean else "not clean"))
    return 0 if good else 1


# ---- sizes and duplicates --------------------------------------------------------

def largest(n=5):
    sizes = []
    for src in source_files():
        with open(src, encoding="utf-8", errors="replace") as f:
            sizes.append((sum(1 for _ in f), rel(src)))
    return sorted(sizes, reverse=True)[:n]


def duplicate_runs():
    """Runs of RUN+ identical meaningful lines found in two places (merged)."""
    lines = {}
    where = collections.defaultdict(list)
    for src in source_files():
        if not src.endswith((".c", ".cu")):
            continue
        keep = []
        for no, line in enumerate(open(src, encoding="utf-8", errors="replace"), 1):
            s = " ".join(line.split())
            if s in ("", "{", "}", "};", "*/", "/*", "*") or s.startswith("#include"):
                continue
            keep.append((no, s))
        lines[rel(src)] = keep
        for i in range(len(keep) - RUN + 1):
            where[tuple(s for _, s in keep[i:i + RUN])].append((rel(src), i))
    seen = set()
    runs = []
    for key, places in where.items():
        if len(places) < 2:
            continue
        # one report per maximal run: skip windows whose predecessor also repeats
        for f, i in places:
            if (f, i) in seen:
                continue
            prev = tuple(s for _, s in lines[f][i - 1:i - 1 + RUN]) if i > 0 else None
            if prev is not None and len(where.get(prev, ())) >= 2:
                continue
            j = i
            while j + RUN < len(lines[f]) and len(
                    where.get(tuple(s for _, s in lines[f][j + 1:j + 1 + RUN]), ())) >= 2:
                j += 1
            for k in range(i, j + 1):
                seen.add((f, k))
            runs.append((f, lines[f][i][0], lines[f][j + RUN - 1][0]))
    return sorted(runs)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) >= 2 else 2
    if sys.argv[1] == "--self-test":
        return self_test()
    build = sys.argv[1]
    strict = "--strict" in sys.argv[2:]
    files, groups, graph, why = circles(build)
    print("circles: %d (between %d source files with objects in %s)" % (
        len(groups), len(files), build))
    for g in groups:
        print("  circle: " + " <-> ".join(g))
        if "--edges" in sys.argv[2:]:
            for a in g:
                for b in sorted(graph[a] & set(g)):
                    print("    %s -> %s: %s" % (a, b, " ".join(sorted(why[(a, b)]))))
    folders = collections.Counter(os.path.dirname(f) for f in files)
    print("objects read: " + (", ".join("%s %d" % (d, n) for d, n in sorted(folders.items()))
                              or "none"))
    bad = include_violations()
    print("include-rule violations: %d" % len(bad))
    for src, t, why in bad:
        print("  %s includes %s: %s" % (src, t, why))
    owned = owner_violations()
    print("owner violations: %d" % len(owned))
    for src, line, group, owners in owned:
        print("  %s:%d writes comm->%s, which only %s (and %s) may write" % (
            src, line, group, owners, OWNER_ALL))
    big = largest()
    print("largest files: " + ", ".join("%s %d" % (f, n) for n, f in big))
    runs = duplicate_runs()
    print("runs of >= %d duplicated lines: %d" % (RUN, len(runs)))
    for f, a, b in runs:
        print("  %s:%d-%d" % (f, a, b))
    if strict and (groups or bad or owned):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
