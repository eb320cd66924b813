"""Faults, with N real peers started by ringtest itself (RING_RANK/RING_WORLD_SIZE/RING_PEERS:
ring-launch would tear the job down when one peer dies):

  kill      a peer SIGKILLs itself in the middle of an allreduce; every other peer raises
            ringd.PeerError naming its rank within the timeout, later calls raise the same
            sticky error, and the interpreter exits cleanly
  stop      a peer SIGSTOPs itself (a hang); the others raise a ringd.Error naming it
            within the timeout (a helper SIGKILLs the stopped one later)
  shape     one peer allreduces another length: MismatchError on every peer
  dtype     one peer allreduces float16 where the others use float32: MismatchError
  collective one peer broadcasts where the others allgather: MismatchError (the root of
            the broadcast may finish first, and raises at its next call)
  barrier   one peer enters a barrier where the other allreduces: MismatchError naming
            it "barrier #0" (it said "allgather ... tensor id 4294967295")
"""

import os
import signal
import subprocess
import time

import ringtest

# a hang is a failed check after this long, not a stuck suite (these jobs take seconds)
ringtest.JOB_TIMEOUT = 60.0
TIMEOUT = 3.0  # the ring's timeout setting in these jobs (seconds)
SLACK = 7.0    # what a loaded 2-core machine may add to it


def victim_of(n):
    return {2: 1, 3: 1, 4: 0}[n]


def dead_peer_checks(t, ringd, np, fault):
    victim = int(os.environ["RINGTEST_VICTIM"])
    a = np.ones(1000, np.float32)
    ringd.allreduce(a)
    t.ok((a == t.world).all(), "an allreduce before the fault")
    big = np.ones(4 << 20, np.float32)  # 16 MB: the fault lands mid-transfer
    if t.rank == victim:
        if fault == "stop":  # someone has to end the stopped process
            subprocess.Popen(["sh", "-c", "sleep %d; kill -9 %d" % (TIMEOUT + SLACK,
                                                                   os.getpid())])
        ringd.allreduce_async(big)
        os.kill(os.getpid(), signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
        time.sleep(60)  # (SIGSTOP: never reached before the SIGKILL)
        return
    t0 = time.monotonic()
    err = None
    for _ in range(50):  # bounded: the error comes in the first few
        try:
            ringd.allreduce(big)
        except ringd.Error as e:
            err = e
            break
    took = time.monotonic() - t0
    want = ringd.PeerError if fault == "kill" else (ringd.PeerError, ringd.TimeoutError)
    t.ok(isinstance(err, want), "%s: the others raise %s" % (
        fault, "PeerError" if fault == "kill" else "PeerError or TimeoutError"), repr(err))
    t.ok(err is not None and err.peer_rank == victim,
         "%s: the error names rank %d" % (fault, victim),
         "%r: peer_rank %r" % (err, getattr(err, "peer_rank", None)))
    t.ok(err is not None and err.address is not None and err.phase is not None,
         "%s: the error has the peer's address and the phase" % fault, repr(err))
    t.ok(took < TIMEOUT + SLACK, "%s: within the timeout (%.0f s) and some slack" % (
        fault, TIMEOUT), "took %.1f s" % took)
    again = t.raises(ringd.Error, lambda: ringd.allreduce(a),
                     "%s: a later allreduce raises the sticky error" % fault,
                     lambda e: type(e) is type(err) and e.message == err.message)
    t.raises(ringd.Error, lambda: ringd.broadcast(a),
             "%s: so does a later broadcast" % fault,
             lambda e: type(e) is type(err) and e.message == err.message)
    h = None
    try:
        h = ringd.allgather_async(a)
    except ringd.Error as e:
        t.ok(type(e) is type(err), "%s: an async start raises it too" % fault)
    else:
        t.raises(ringd.Error, h.wait, "%s: an async start raises it too" % fault)
    del again
    t0 = time.monotonic()
    ringd.shutdown()
    t.ok(time.monotonic() - t0 < 10, "%s: shutdown after the failure returns" % fault)


def mismatch_checks(t, ringd, np, fault):
    if fault == "shape":
        x = np.ones(100 + (t.rank == t.world - 1), np.float32)
        call = lambda: ringd.allreduce(x)  # noqa: E731
    elif fault == "dtype":
        x = np.ones(64, np.float16 if t.rank == 0 else np.float32)
        call = lambda: ringd.allreduce(x)  # noqa: E731
    elif fault == "barrier":
        x = np.ones(3, np.float32)
        call = ringd.barrier if t.rank == 0 else (lambda: ringd.allreduce(x))
    else:
        x = np.ones(16, np.int32)
        call = (lambda: ringd.broadcast(x)) if t.rank == 0 else (lambda: ringd.allgather(x))
    t0 = time.monotonic()
    if fault == "collective":
        # the root of a broadcast only sends: it may finish before its neighbour finds the
        # mismatch, and hears of it at its next call
        def call(first=call):
            first()
            ringd.barrier()
    e = t.raises(ringd.MismatchError, call, "%s mismatch: MismatchError on every peer%s" % (
        fault, " (the root at its next call at the latest)" if fault == "collective" else ""))
    t.ok(time.monotonic() - t0 < TIMEOUT + SLACK, "%s mismatch: no hang" % fault)
    t.ok(e is not None and e.status == "RING_ERR_MISMATCH" and e.peer_rank is not None,
         "%s mismatch: the error names a peer" % fault, repr(e))
    if fault == "barrier":
        t.ok(e is not None and "barrier #0" in e.message and "4294967295" not in e.message,
             "barrier mismatch: the error names the barrier", repr(e))
    t.raises(ringd.MismatchError, lambda: ringd.allreduce(np.ones(4, np.float32)),
             "%s mismatch: later calls raise it again" % fault,
             lambda e2: e is not None and e2.message == e.message)
    ringd.shutdown()


def checks(t):
    import numpy as np
    import ringd

    fault = os.environ["RINGTEST_FAULT"]
    ringd.init(timeout="%gs" % TIMEOUT, connect_timeout="30s")
    if fault in ("kill", "stop"):
        dead_peer_checks(t, ringd, np, fault)
    else:
        mismatch_checks(t, ringd, np, fault)


def job(n, fault):
    return (n, {"RINGTEST_FAULT": fault, "RINGTEST_VICTIM": str(victim_of(n))})


ringtest.main(checks, launcher="env",
              worlds=(job(2, "kill"), job(3, "kill"), job(4, "kill"), job(3, "stop"),
                      (3, dict(job(3, "stop")[1], RING_PROGRESS_THREAD="off")),
                      job(3, "shape"), job(2, "dtype"), job(2, "collective"),
                      job(2, "barrier")),
              killed=lambda n, env: ({int(env["RINGTEST_VICTIM"])}
                                     if env["RINGTEST_FAULT"] in ("kill", "stop") else set()))
