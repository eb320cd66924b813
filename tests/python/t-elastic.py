"""ringd.elastic and ringd.torch.elastic with real processes on 127.0.0.1:

  example  examples/pytorch/elastic_synthetic.py --spawn 4, one process
           SIGKILLed after its backward at step K (rank 2, then rank 0): the 3
           survivors shrink in place, renumbered 0..2 in ring order, and end with
           bit-identical parameters; a fresh 3-process run started from the state
           they resumed from (--save-resume, --resume) prints bitwise the same
           losses, rank for rank, from that step on, and ends with the same
           parameters
  stop     a peer SIGSTOPped mid-training (then SIGKILLed by a helper 10 s later):
           the survivors name it after the timeout (TimeoutError, or PeerError from a
           neighbour that timed out), shrink and finish with identical parameters
  stale    the same with DistributedOptimizer(staleness=1): the pipeline on the lost
           ring is dropped, the survivors refill it and agree
  raise    a ValueError inside train propagates from the decorator on every peer
           (not swallowed, no shrink), and the ring is still usable afterwards
  minsize  a peer lost below run(min_size=3): MinSizeError naming min_size, from the
           PeerError; max_resets=0: TooManyResetsError
  oldreq   the old ring's handles: an allreduce started and waited after the failure
           raises PeerError within the timeout, a request started on the failed ring
           raises at once, and after ringd.elastic.shrink() the old handle raises its
           error again, the old Comm is closed, parent_rank() and shrink_report say
           who was who, and the new ring sums exactly; shrinking a healthy ring is an
           InvalidError
  ddp      DDP over a Gloo group, and over the "ringd" backend, with
           ringd.torch.allreduce_hook under the decorator: a peer SIGKILLed, the
           survivors train on through the hook and agree (the torch group keeps its size)

Every loop is bounded in steps, every job in time.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import ringtest

ringtest.JOB_TIMEOUT = 90.0
TIMEOUT = 2.0
SLACK = 8.0

top = os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(top, "examples", "pytorch", "elastic_synthetic.py")


# ---- in the workers --------------------------------------------------------------------------

def small_model(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def batch(torch, step, rank, size):
    g = torch.Generator().manual_seed(1000 + step)
    x, y = torch.randn(12, 16, generator=g), torch.randn(12, 4, generator=g)
    per = 12 // size
    return x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]


def params_digest(torch, net):
    return ringtest.digest(torch.cat([p.detach().reshape(-1) for p in net.parameters()]))


def stop_me_later(kill_after):
    """SIGSTOP this process now (from a helper, as a hung peer) and SIGKILL it later."""
    pid = os.getpid()
    subprocess.Popen(["sh", "-c", "kill -STOP %d; sleep %g; kill -KILL %d" % (pid, kill_after,
                                                                               pid)],
                     start_new_session=True)
    time.sleep(60)


def train_checks(t, ringd, torch, fault):
    """A small model under @ringd.elastic.run with a DistributedOptimizer; the last rank
    is lost at step 3 (SIGKILL, or SIGSTOP for `stop`)."""
    net = small_model(torch)
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1,
                                                           momentum=0.9),
                                           net.named_parameters(),
                                           staleness=1 if fault == "stale" else 0)
    state = ringd.torch.elastic.TorchState(model=net, optimizer=opt, step=0)
    seen = []
    state.register_reset_callbacks([lambda size, rank: seen.append((size, rank))])
    victim = t.world - 1
    kw = {"min_size": 3, "max_resets": 3} if fault == "minsize" else \
        {"max_resets": 0} if fault == "maxresets" else {"min_size": 2}

    @ringd.elastic.run(**kw)
    def train(state):
        while state.step < 8:
            x, y = batch(torch, state.step, ringd.rank(), ringd.size())
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            if t.rank == victim and state.step == 3:
                if fault == "stop":
                    stop_me_later(10)
                os.kill(os.getpid(), signal.SIGKILL)
            opt.step()
            state.step += 1
            state.commit()

    t0 = time.monotonic()
    if fault == "minsize":
        e = t.raises(ringd.elastic.MinSizeError, lambda: train(state),
                     "minsize: 2 peers left under min_size=3: MinSizeError",
                     lambda e: "min_size=3" in str(e) and e.size == 2)
        t.ok(e is not None and isinstance(e.__cause__, ringd.PeerError) and
             e.__cause__.peer_rank == victim,
             "minsize: raised from the PeerError naming rank %d" % victim,
             repr(e and e.__cause__))
        t.ok(isinstance(e, ringd.Error), "minsize: a ringd.Error (one except catches all)")
        return
    if fault == "maxresets":
        t.raises(ringd.elastic.TooManyResetsError, lambda: train(state),
                 "maxresets: max_resets=0: TooManyResetsError on the first loss",
                 lambda e: "max_resets=0" in str(e))
        return
    train(state)
    took = time.monotonic() - t0
    t.eq(state.step, 8, "%s: the survivors trained to the end" % fault)
    t.eq((ringd.size(), state.resets), (t.world - 1, 1),
         "%s: one membership change, %d peers left" % (fault, t.world - 1))
    t.eq(seen, [(t.world - 1, t.rank)], "%s: the reset callback got (size, rank), renumbered "
         "in ring order" % fault)
    c = state.changes[0] if state.changes else None
    t.ok(c is not None and "shrunk from %d to %d" % (t.world, t.world - 1) in c.report and
         c.size == t.world - 1 and c.lost == (victim,),
         "%s: state.changes has the shrink's report, size and lost rank" % fault,
         repr(state.changes))
    # a stopped peer: its neighbour times out (TimeoutError), the others hear of it from
    # there (PeerError: "rank 2 timed out waiting for rank 3 (...)")
    lost_by = (ringd.TimeoutError, ringd.PeerError) if fault == "stop" else ringd.PeerError
    t.ok(c is not None and isinstance(c.error, lost_by) and c.error.peer_rank == victim,
         "%s: the change came from the error naming rank %d" % (fault, victim),
         repr(c and c.error))
    if fault == "stop":
        t.ok(c is not None and c.seconds < 2 * TIMEOUT + SLACK,
             "stop: the shrink took less than 2 x timeout + slack", repr(c))
    t.ok(took < 3 * TIMEOUT + SLACK + 10, "%s: bounded" % fault, "%.1f s" % took)
    t.same("%s: parameters of the survivors" % fault, params_digest(torch, net))
    opt.finish()


def raise_checks(t, ringd, torch):
    import numpy as np
    net = small_model(torch)
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                           net.named_parameters())
    state = ringd.torch.elastic.TorchState(model=net, optimizer=opt, step=0)
    calls = []

    @ringd.elastic.run
    def train(state):
        calls.append(state.step)
        for _ in range(5):
            x, y = batch(torch, state.step, ringd.rank(), ringd.size())
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
            state.step += 1
            state.commit()
            if state.step == 2:
                raise ValueError("user bug at step 2")

    t.raises(ValueError, lambda: train(state), "raise: a ValueError in train propagates",
             lambda e: "user bug" in str(e))
    t.eq((calls, state.resets, ringd.size()), ([0], 0, t.world),
         "raise: train ran once, no reset, the ring unchanged")
    t.raises(TypeError, lambda: train(object()), "raise: run() wants a State")
    x = np.full(7, t.rank + 1, np.float32)
    ringd.allreduce(x)
    t.ok(float(x[0]) == t.world * (t.world + 1) / 2, "raise: the ring still sums")
    t.raises(ringd.InvalidError, ringd.elastic.shrink,
             "raise: shrinking a ring that has not failed: InvalidError",
             lambda e: "not failed" in str(e))
    state2 = ringd.elastic.State(epoch=3, names=["a", "b"], blob=np.arange(3.0))
    state2.epoch, state2.extra = 5, 1
    state2.commit()
    state2.epoch = 9
    state2.restore()
    t.eq((state2.epoch, state2.extra), (5, 1), "raise: State saves and restores its values")
    if t.rank == 0:
        state2.epoch = 11
    state2.sync()
    t.eq(state2.epoch, 11, "raise: State.sync() gives every peer rank 0's values")


def oldreq_checks(t, ringd, torch):
    import numpy as np
    ringd.barrier()
    victim = t.world - 1
    if t.rank == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    x = np.ones(4096, np.float32)
    t0 = time.monotonic()
    h = ringd.allreduce_async(x)
    e = t.raises(ringd.PeerError, h.wait,
                 "oldreq: an allreduce started after the loss, waited: PeerError",
                 lambda e: e.peer_rank == victim)
    t.ok(time.monotonic() - t0 < TIMEOUT + SLACK, "oldreq: within the timeout",
         "%.1f s" % (time.monotonic() - t0))
    t.ok(ringd.elastic.is_lost_peer(e) is e, "oldreq: is_lost_peer names it")
    old = ringd._runtime._comm
    t.raises(ringd.Error, lambda: ringd.allreduce(np.ones(8, np.float32)),
             "oldreq: a new call on the failed ring raises at once")
    report = ringd.elastic.shrink()
    t.ok(old.closed, "oldreq: the old Comm is closed by shrink()")
    t.raises(ringd.PeerError, h.wait, "oldreq: the old handle raises its error again")
    t.raises(ringd.Error, lambda: old.allreduce_start(np.ones(8, np.float32)),
             "oldreq: the old Comm takes no new request")
    t.ok(("shrunk from %d to %d" % (t.world, t.world - 1)) in report, "oldreq: the report",
         report)
    t.eq((ringd.rank(), ringd.size()), (t.rank, t.world - 1),
         "oldreq: renumbered in ring order")
    t.eq([ringd.elastic.parent_rank(r) for r in range(ringd.size())],
         list(range(t.world - 1)), "oldreq: parent_rank says who was who")
    y = np.full(1000, t.rank + 1, np.float32)
    ringd.allreduce(y)
    t.ok(float(y[0]) == (t.world - 1) * t.world / 2 and len(set(y.tolist())) == 1,
         "oldreq: the new ring sums exactly", str(y[:3]))
    t.raises(ringd.InvalidError, ringd.elastic.shrink,
             "oldreq: shrinking the healthy new ring: InvalidError")
    t.eq(ringd.elastic.has_grow(), hasattr(ringd._ringd.Comm, "grow"),
         "oldreq: has_grow() follows the extension")


def ddp_checks(t, ringd, torch, backend):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    os.environ["MASTER_PORT"] = os.environ["RINGTEST_DDP_PORT"]
    dist.init_process_group(backend, rank=t.rank, world_size=t.world)
    net = small_model(torch)
    model = DDP(net)
    model.register_comm_hook(None, ringd.torch.allreduce_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    state = ringd.torch.elastic.TorchState(model=net, optimizer=opt, step=0)
    victim = t.world - 1

    @ringd.elastic.run(min_size=2)
    def train(state):
        while state.step < 6:
            x, y = batch(torch, state.step, ringd.rank(), ringd.size())
            opt.zero_grad()
            if t.rank == victim and state.step == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            state.step += 1
            state.commit()

    train(state)
    t.eq((state.step, ringd.size(), state.resets), (6, t.world - 1, 1),
         "%s: the survivors trained on through the hook" % backend)
    t.eq(dist.get_world_size(), t.world, "%s: (the torch group keeps its size)" % backend)
    t.same("%s: parameters of the survivors" % backend, params_digest(torch, net))


def checks(t):
    try:
        import torch
    except ImportError as e:
        t.skip("ringd.elastic", "no PyTorch: %s" % e)
        return
    torch.set_num_threads(1)
    import ringd
    import ringd.torch
    fault = os.environ["RINGTEST_FAULT"]
    ringd.init(timeout="%gs" % TIMEOUT, connect_timeout="30s")
    if fault == "raise":
        raise_checks(t, ringd, torch)
    elif fault == "oldreq":
        oldreq_checks(t, ringd, torch)
    elif fault.startswith("ddp-"):
        ddp_checks(t, ringd, torch, fault[4:])
    else:
        train_checks(t, ringd, torch, fault)
    if fault not in ("minsize", "maxresets"):
        ringd.shutdown()


# ---- the driver: the example ----------------------------------------------------------------

def run_example(args, timeout):
    python = os.environ.get("RINGD_TEST_PYTHON", sys.executable)
    try:
        p = subprocess.run([python, EXAMPLE] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout
        return "timeout", out or ""


STEP = re.compile(r"^p(\d+) rank (\d+)/(\d+) step (\d+) loss (\S+)$", re.M)
RESET = re.compile(r"^p(\d+) reset: now rank (\d+) of (\d+), resuming at step (\d+) \((.*); "
                   r"([\d.]+) s\)$", re.M)
FINAL = re.compile(r"^p(\d+) final: rank (\d+) of (\d+) after (\d+) change\(s\): params "
                   r"sha256 (\w+)", re.M)
JOINED = re.compile(r"^p(\d+) joined the running ring as rank (\d+) of (\d+)$", re.M)


def example_checks(tap, n, victim=-1, die_at=-1, join=0, join_at=0, steps=24):
    """elastic_synthetic.py --spawn n: the process of rank `victim` dies at step die_at,
    `join` more start once step join_at is printed. Every change must leave the members
    renumbered as promised, at the same commit, with bit-identical parameters at the end;
    and a fresh run of the last ring's size from the state rank 0 saved at the last change
    must print bitwise the same losses and end with the same parameters."""
    what = []
    if victim >= 0:
        what.append("rank %d killed at step %d" % (victim, die_at))
    if join:
        what.append("%d joining at step %d" % (join, join_at))
    tag = "example, %d processes (%s):" % (n, ", ".join(what))
    # every change, as (size, the old processes' new ranks in order)
    founders = [p for p in range(n) if p != victim]
    changes = []
    if victim >= 0:
        changes.append((n - 1, founders))
    if join:
        changes.append((len(founders) + join, founders))
    size = changes[-1][0]
    # with a joiner, a ring timeout of 10 s: right after its grow the joiner waits for the
    # members' state, and on a loaded 2-core host (make check -j2) a member answered after
    # more than 2 s, so the joiner was counted lost (a peer lost by SIGKILL is seen at once,
    # whatever the timeout)
    ring_timeout = 10.0 if join else TIMEOUT
    args = ["--spawn", str(n), "--steps", str(steps), "--timeout", "%gs" % ring_timeout,
            "--time-limit", "80"]
    if victim >= 0:
        args += ["--die-rank", str(victim), "--die-at", str(die_at)]
    if join:
        # a joiner starts python and torch first: the ring trains on until it is in
        args += ["--join", str(join), "--join-at-step", str(join_at), "--step-time", "0.02",
                 "--until-size", str(size)]
    with tempfile.TemporaryDirectory(prefix="ringd-elastic-") as tmp:
        resume = os.path.join(tmp, "resume.pt")
        t0 = time.monotonic()
        rc, out = run_example(args + ["--save-resume", resume], 100)
        print("# %s ran in %.1f s" % (tag, time.monotonic() - t0))
        tap.line(rc == 0, "%s every process exited 0 (the victim by SIGKILL)" % tag, out[-3000:])
        warned = ringtest.printed_warnings(out)
        tap.line(not warned, "%s no warning printed" % tag, "\n".join(warned))
        resets = {}
        for p, rank, sz, step, why, secs in RESET.findall(out):
            resets.setdefault(int(p), []).append((int(rank), int(sz), int(step), why,
                                                  float(secs)))
        joiners = {p: resets.pop(p) for p in list(resets) if p >= n}
        got = {p: [(r[1], r[0]) for r in resets.get(p, [])] for p in founders}
        want = {p: [(sz, order.index(p)) for sz, order in changes] for p in founders}
        tap.line(got == want, "%s every member went through the %d change(s), renumbered in "
                 "ring order (joiners last)" % (tag, len(changes)),
                 "got %r\nwant %r" % (got, want))
        kinds_ok = all(len(v) == len(changes) and
                       all(("shrunk from" in r[3] and "naming rank %d" % victim in r[3])
                           if k == 0 and victim >= 0 else "grew from" in r[3]
                           for k, r in enumerate(v)) for v in resets.values())
        tap.line(kinds_ok and len(resets) == len(founders),
                 "%s a shrink after the PeerError naming rank %s, then a grow" % (tag, victim)
                 if victim >= 0 and join else "%s each change is the one expected" % tag,
                 repr(resets))
        starts = [{v[k][2] for v in resets.values() if len(v) > k} for k in range(len(changes))]
        tap.line(all(len(st) == 1 for st in starts),
                 "%s after each change all resumed from the same commit" % tag, repr(starts))
        worst = max([r[4] for v in resets.values() for r in v] or [99])
        tap.line(worst < 1.5, "%s each change took under 1.5 s (worst %.3f s)" % (tag, worst))
        if join:
            joins = {int(p): (int(r), int(sz)) for p, r, sz in JOINED.findall(out)}
            tap.line(joins == {n + i: (len(founders) + i, size) for i in range(join)},
                     "%s the joiner joined as the last rank" % tag, repr(joins))
            tap.line(sorted(joiners) == [n + i for i in range(join)] and
                     all(len(v) == 1 and {v[0][2]} == starts[-1] for v in joiners.values()),
                     "%s its reset callback ran once, at the members' step" % tag,
                     "%r vs %r" % (joiners, starts[-1]))
        finals = {int(m[0]): (int(m[1]), int(m[2]), m[4]) for m in FINAL.findall(out)}
        members = founders + [n + i for i in range(join)]
        digests = {f[2] for f in finals.values()}
        tap.line(sorted(finals) == members and len(digests) == 1 and
                 all(f[1] == size for f in finals.values()),
                 "%s all %d members end with bit-identical parameters" % (tag, size),
                 repr(finals))
        start = min(starts[-1]) if starts and starts[-1] else 0
        after = {}
        for p, r, sz, step, loss in STEP.findall(out):
            if int(sz) == size and int(step) >= start:
                after[(int(r), int(step))] = loss
        end = max([k[1] for k in after] or [0]) + 1
        tap.line(len(after) == size * (end - start) and end >= steps,
                 "%s every step's loss from %d on is there" % (tag, start),
                 "%d lines for steps %d..%d" % (len(after), start, end - 1))
        if not os.path.exists(resume):
            tap.line(False, "%s rank 0 saved the state it resumed from" % tag)
            return
        rc2, out2 = run_example(["--spawn", str(size), "--steps", str(end), "--timeout",
                                 "%gs" % TIMEOUT, "--resume", resume, "--time-limit", "80"], 100)
        tap.line(rc2 == 0, "%s a fresh %d-process run from that state ran" % (tag, size),
                 out2[-3000:])
        fresh = {(int(r), int(step)): loss for p, r, sz, step, loss in STEP.findall(out2)}
        diff = [(k, after.get(k), fresh.get(k)) for k in sorted(set(after) | set(fresh))
                if after.get(k) != fresh.get(k)]
        tap.line(fresh and not diff,
                 "%s its losses are bitwise the members', rank for rank, steps %d..%d"
                 % (tag, start, end - 1), "differences (rank, step): %r" % diff[:10])
        fresh_digests = {m[4] for m in FINAL.findall(out2)}
        tap.line(fresh_digests == digests and len(digests) == 1,
                 "%s and its parameters end bitwise the members'" % tag,
                 "%r vs %r" % (fresh_digests, digests))


def main():
    if os.environ.get("RINGTEST_WORKER"):
        ringtest.main(checks)
        return
    try:
        import torch  # noqa: F401 - only whether it imports
    except ImportError as e:
        print("1..0 # SKIP no PyTorch (%s): apt-get install python3-torch" % e)
        return
    tap = ringtest._Tap()
    example_checks(tap, 4, victim=2, die_at=12)
    example_checks(tap, 4, victim=0, die_at=5)
    example_checks(tap, 3, join=1, join_at=5, steps=40)
    example_checks(tap, 4, victim=2, die_at=10, join=1, join_at=10, steps=40)
    # the worker jobs print their own TAP lines through ringtest's driver: run it in-process
    # with this tap, one job per fault
    faults = [(4, "stop"), (3, "stale"), (3, "raise"), (3, "minsize"), (3, "maxresets"),
              (3, "oldreq"), (3, "ddp-gloo"), (3, "ddp-ringd")]
    killed = {"stop", "stale", "minsize", "maxresets", "oldreq", "ddp-gloo", "ddp-ringd"}
    script = os.path.abspath(sys.argv[0])
    for n, fault in faults:
        tmp = tempfile.mkdtemp(prefix="ringtest-")
        try:
            tag = "N=%d %s:" % (n, fault)
            env = {"RINGTEST_FAULT": fault}
            if fault.startswith("ddp-"):
                env["RINGTEST_DDP_PORT"] = str(ringtest.free_ports(1)[0])
                env["MASTER_ADDR"] = "127.0.0.1"
            codes, output, secs = ringtest._run_job(script, n, tmp, "env", env, tag)
            print("# %s %d peer(s) ran in %.1f s" % (tag, n, secs))
            ringtest._merge(tap, tag, n, tmp, codes, output,
                            {n - 1} if fault in killed else set())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print("1..%d" % tap.n)
    sys.exit(0)


if __name__ == "__main__":
    main()
