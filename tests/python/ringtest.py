"""ringtest - TAP for the ringd package's tests, run as N real peers on 127.0.0.1.

A test script defines its checks as a function of a Checker and hands it to main():

    import ringtest

    def checks(t):                     # runs in every peer
        import ringd
        ringd.init()
        t.ok(ringd.size() == t.world, "size")
        t.same("result", ringtest.digest(x))   # must be equal on every rank

    ringtest.main(checks, worlds=(1, 2, 3, 4))

Run without RINGTEST_WORKER, the script is the driver: for each world size N
it starts itself as N workers (under the build's ring-launch, or with
RING_RANK/RING_WORLD_SIZE/RING_PEERS of its own when launcher="env", which
fault tests need: ring-launch tears the job down when one peer dies), each
worker writing its results to a file, and prints one TAP line per check: ok
when every rank passed it. Every job has a hard time limit, so a hang is a
failed check, never a stuck suite. The plan comes last (the checks are only
known once they ran). Warnings are findings (watch_warnings): one issued from a
ringd module raises in the rank, and a job whose ranks printed any fails its
"no warning printed" line.
"""

import ctypes
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

JOB_TIMEOUT = float(os.environ.get("RINGTEST_JOB_TIMEOUT", "180"))


# ---- in a worker -----------------------------------------------------------------------------

class Checker:
    """What a worker's checks call. rank/world: this peer's place (from the launcher's
    variables, before ringd.init())."""

    def __init__(self, path, rank, world):
        self.rank = rank
        self.world = world
        self._f = open(path, "a", buffering=1)

    def _put(self, **rec):
        if self._f.closed:  # a warning at exit, after end()
            return
        self._f.write(json.dumps(rec) + "\n")
        self._f.flush()

    def ok(self, cond, name, diag=""):
        self._put(kind="ok", name=name, ok=bool(cond), diag="" if cond else str(diag))
        return bool(cond)

    def eq(self, got, want, name):
        return self.ok(got == want, name, "got %r, want %r" % (got, want))

    def raises(self, exc_type, fn, name, check=None):
        """fn() must raise exc_type (and check(e) must hold); returns the exception."""
        try:
            fn()
        except exc_type as e:
            if check is not None and not check(e):
                self.ok(False, name, "%s: %s (check failed)" % (type(e).__name__, e))
            else:
                self.ok(True, name)
            return e
        except Exception as e:  # noqa: BLE001 - any other exception is the failure
            self.ok(False, name, "raised %s: %s, not %s" % (type(e).__name__, e,
                                                          exc_type.__name__))
            return None
        self.ok(False, name, "raised nothing, not %s" % exc_type.__name__)
        return None

    def same(self, name, value):
        """value (JSON-able) must be the same on every rank."""
        self._put(kind="same", name=name, value=value)

    def skip(self, name, why):
        self._put(kind="skip", name=name, why=why)

    def diag(self, text):
        self._put(kind="diag", text=str(text))

    def end(self):
        self._put(kind="end")
        self._f.close()


def digest(x):
    """sha256 of a numpy array's or CPU torch tensor's bytes (any dtype, bfloat16 too)."""
    if hasattr(x, "data_ptr"):
        data = ctypes.string_at(x.data_ptr(), x.numel() * x.element_size())
    else:
        data = memoryview(x).tobytes()
    return hashlib.sha256(data).hexdigest()


# ringd's own warnings (all of them start so): advice to the user, never a defect of ringd's
RINGD_MESSAGE = r"ringd(\.torch)?: "


def watch_warnings(t):
    """A warning is a finding in the ranks (torch 2.x deprecations above all).
    A DeprecationWarning, FutureWarning or UserWarning issued from a ringd module (ringd
    calling an API that torch deprecated, or misusing one: torch attributes it to its caller)
    raises where it happens, so the check fails with its traceback; ringd's own warnings
    ("ringd: ...") stay warnings. Every warning printed (any module: a test's
    catch_warnings(record=True) does not print) is recorded, and the driver fails the job's
    "no warning printed" line with them."""
    import warnings
    for cat in (DeprecationWarning, PendingDeprecationWarning, FutureWarning, UserWarning):
        # module= is a regular expression here (python -W takes it literally)
        warnings.filterwarnings("error", category=cat, module=r"ringd(\.|$)")
    warnings.filterwarnings("default", message=RINGD_MESSAGE)
    shown = warnings.showwarning

    def record(message, category, filename, lineno, file=None, line=None):
        t._put(kind="warning", text="%s:%s: %s: %s" % (filename, lineno, category.__name__,
                                                      message))
        shown(message, category, filename, lineno, file, line)
    warnings.showwarning = record


def printed_warnings(output):
    """The Python warnings in a process's output ("file:line: SomeWarning: message"): for
    the tests that run scripts themselves, where watch_warnings cannot look."""
    return [ln for ln in output.splitlines()
            if re.match(r"(\[\d+\] )?\S+:\d+: \w*Warning: ", ln)]


def _worker(checks):
    rank = int(os.environ.get("RING_RANK", os.environ.get("RANK", "0")))
    world = int(os.environ.get("RINGTEST_N", "1"))
    t = Checker(os.path.join(os.environ["RINGTEST_DIR"], "rank-%d.jsonl" % rank), rank, world)
    watch_warnings(t)
    try:
        checks(t)
    except BaseException:  # noqa: BLE001 - report it as a failed check, then fail the job
        t.ok(False, "no uncaught exception", traceback.format_exc())
        t._f.close()
        sys.exit(1)
    t.end()
    sys.exit(0)


# ---- the driver -----------------------------------------------------------------------------

class _Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def line(self, ok, name, diag="", directive=""):
        self.n += 1
        if not ok:
            self.failed += 1
        print("%s %d - %s%s" % ("ok" if ok else "not ok", self.n, name,
                                " # " + directive if directive else ""))
        if diag and not ok:
            for ln in str(diag).rstrip().splitlines()[-40:]:
                print("#   " + ln)
        sys.stdout.flush()


def _ephemeral_low():
    """The kernel's first ephemeral port (outgoing connections take theirs above it)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n):
    """n TCP ports free on 127.0.0.1 right now, below the kernel's ephemeral range:
    a port chosen there (bind to port 0) can be taken as the source port of any
    process's outgoing connection before the peer that is to listen on it starts
    (a test opening 200 connections meanwhile did, once)."""
    hi = min(_ephemeral_low(), 32768) - 1
    rnd = random.Random(os.getpid() ^ int(time.time() * 1e6))
    socks, ports = [], []
    for _ in range(200 * n):
        if len(ports) == n:
            break
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", rnd.randint(10000, hi)))
        except OSError:
            s.close()
            continue
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    if len(ports) < n:
        raise RuntimeError("no %d free ports on 127.0.0.1 in 10000..%d" % (n, hi))
    return ports


def _read_results(path):
    recs = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
    return recs


def _run_job(script, n, tmp, launcher, env_extra, tag):
    """Start n workers; returns (exit status per rank or of the launcher, output, seconds)."""
    env = dict(os.environ)
    env.update({"RINGTEST_WORKER": "1", "RINGTEST_N": str(n), "RINGTEST_DIR": tmp})
    env.update(env_extra)
    python = os.environ.get("RINGD_TEST_PYTHON", sys.executable)
    out_path = os.path.join(tmp, "output")
    t0 = time.monotonic()
    with open(out_path, "w") as out:
        if launcher == "ring-launch":
            rl = os.environ.get("RING_LAUNCH", "ring-launch")
            cmd = [rl, "-n", str(n), "--timeout", str(int(JOB_TIMEOUT)), "--", python, script]
            procs = [subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)]
        else:
            ports = free_ports(n)
            peers = ",".join("127.0.0.1:%d" % p for p in ports)
            procs = []
            for r in range(n):
                e = dict(env, RING_RANK=str(r), RING_WORLD_SIZE=str(n), RING_PEERS=peers,
                         RING_LOCAL_RANK=str(r))
                procs.append(subprocess.Popen([python, script], env=e, stdout=out,
                                              stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL,
                                              start_new_session=True))
        deadline = t0 + JOB_TIMEOUT + 15
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append("timeout")
        for p in procs:  # whatever is left (a hang), with its children
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
    with open(out_path) as f:
        output = f.read()
    return codes, output, time.monotonic() - t0


def _merge(tap, tag, n, tmp, codes, output, killed):
    alive = [r for r in range(n) if r not in killed]
    per_rank = {r: _read_results(os.path.join(tmp, "rank-%d.jsonl" % r)) for r in alive}
    order, seen = [], set()
    for r in alive:
        for rec in per_rank[r]:
            key = (rec["kind"], rec.get("name"))
            if rec["kind"] in ("ok", "same", "skip") and key not in seen:
                seen.add(key)
                order.append(key)
    for r in alive:
        for rec in per_rank[r]:
            if rec["kind"] == "diag":
                print("# [%s rank %d] %s" % (tag, r, rec["text"]))
    for kind, name in order:
        recs = {r: next((x for x in per_rank[r] if x["kind"] == kind and x.get("name") == name),
                        None) for r in alive}
        missing = [r for r in alive if recs[r] is None]
        label = "%s %s" % (tag, name)
        if kind == "skip":
            why = next(x["why"] for x in recs.values() if x is not None)
            tap.line(True, label, directive="SKIP " + why)
        elif missing:
            # what the ranks that did report said (a traceback, for one that failed early)
            said = "\n".join("rank %d: %s" % (r, rec.get("diag", ""))
                             for r, rec in recs.items() if rec is not None and not rec.get("ok", True))
            tap.line(False, label, "rank(s) %s did not report it (stopped early?)\n%s\n%s"
                     % (missing, said, output[-3000:]))
        elif kind == "ok":
            bad = [r for r in alive if not recs[r]["ok"]]
            tap.line(not bad, label, "\n".join("rank %d: %s" % (r, recs[r]["diag"])
                                               for r in bad))
        else:
            values = {r: recs[r]["value"] for r in alive}
            same = len({json.dumps(v, sort_keys=True) for v in values.values()}) == 1
            tap.line(same, label + ": the same on every rank",
                     "\n".join("rank %d: %r" % (r, v) for r, v in values.items()))
    printed = ["rank %d: %s" % (r, x["text"]) for r in alive for x in per_rank[r]
               if x["kind"] == "warning"]
    tap.line(not printed, "%s no warning printed" % tag, "\n".join(printed))
    ended = [r for r in alive if any(x["kind"] == "end" for x in per_rank[r])]
    if killed:  # launcher="env": one status per rank
        status_ok = all((codes[r] == -signal.SIGKILL) if r in killed else codes[r] == 0
                        for r in range(n))
    else:
        status_ok = all(c == 0 for c in codes)
    what = "every rank ran its checks to the end and exited 0"
    if killed:
        what = "the other ranks ran their checks to the end and exited 0 (rank(s) %s killed)" \
            % sorted(killed)
    tap.line(status_ok and len(ended) == len(alive), "%s %s" % (tag, what),
             "exit status %s; finished: ranks %s\n%s" % (codes, ended, output[-4000:]))


def main(checks, worlds=(1, 2, 3, 4), launcher="ring-launch", env=None, killed=None):
    """Run checks as workers (RINGTEST_WORKER set) or drive them for each world: N, or
    (N, {variable: value}) to run a job with more environment (its TAP lines say so).
    env(n) -> extra environment for every job; killed(n, job_env) -> the ranks expected to
    die by SIGKILL (launcher="env" only)."""
    if os.environ.get("RINGTEST_WORKER"):
        _worker(checks)
        return
    script = os.path.abspath(sys.argv[0])
    tap = _Tap()
    for w in worlds:
        # a world is N, or (N, {environment}) for a job with settings of its own
        n, job_env = (w, {}) if isinstance(w, int) else w
        tmp = tempfile.mkdtemp(prefix="ringtest-")
        try:
            tag = "N=%d%s:" % (n, "".join(" %s=%s" % kv for kv in sorted(job_env.items())))
            extra = dict(env(n) if env else {}, **job_env)
            dead = set(killed(n, job_env)) if killed else set()
            codes, output, secs = _run_job(script, n, tmp, launcher, extra, tag)
            print("# %s %d peer(s) ran in %.1f s" % (tag, n, secs))
            _merge(tap, tag, n, tmp, codes, output, dead)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print("1..%d" % tap.n)
    sys.exit(0)
