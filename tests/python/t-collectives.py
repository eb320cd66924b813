"""ringd's other collectives with N = 1..4 real peers under ring-launch: broadcast bit for
bit from every root (int64, float32 with -0.0, NaN payloads, infinities and subnormals,
bfloat16, bool, complex), allgather (numpy and torch, 0-d, in place, with per-rank sizes),
reduce_scatter, barrier (it waits for the last peer), their async forms interleaved, two
Python threads on one communicator, and NonFiniteError (every peer, the ring stays
usable)."""

import threading
import time

import ringtest


def root_floats(np, root):
    """float32 values whose bits must survive: -0.0, NaNs with payloads, inf, subnormals."""
    bits = [0x80000000, 0x7FC00001, 0xFFC12345, 0x7F800001, 0x7F800000, 0xFF800000,
            0x00000001, 0x807FFFFF, 0x3F800000 + root]
    return np.array(bits * 50, dtype=np.uint32).view(np.float32)


def broadcast_checks(t, ringd, np, torch):
    world = ringd.size()
    for root in range(world):
        want = root_floats(np, root)
        x = want.copy() if t.rank == root else np.full(want.shape, 7.0, np.float32)
        got = ringd.broadcast(x, root=root)
        t.ok(got is x and x.tobytes() == want.tobytes(),
             "broadcast float32 from root %d: bit for bit (-0.0, NaN payloads, inf, "
             "subnormals)" % root)
        ints = np.array([-2 ** 63, 2 ** 63 - 1, -1, 0, root] * 3, dtype=np.int64)
        y = ints.copy() if t.rank == root else np.zeros_like(ints)
        ringd.broadcast(y, root)
        t.ok(np.array_equal(y, ints), "broadcast int64 from root %d" % root)
    big = np.arange(1 << 20, dtype=np.float64) * (1 + t.rank)  # 8 MB: many chunks
    ringd.broadcast(big, root=world - 1)
    t.ok(np.array_equal(big, np.arange(1 << 20, dtype=np.float64) * world),
         "broadcast 8 MB of float64 from the last rank")
    t.same("broadcast 8 MB", ringtest.digest(big))
    flags = np.array([True, False, True], dtype=bool) if t.rank == 0 else np.zeros(3, bool)
    ringd.broadcast(flags)
    cplx = np.array([1 + 2j, -0.0 - 1j], np.complex64) if t.rank == 0 else \
        np.zeros(2, np.complex64)
    ringd.broadcast(cplx)
    t.ok(flags.tolist() == [True, False, True] and cplx.tobytes() ==
         np.array([1 + 2j, -0.0 - 1j], np.complex64).tobytes(), "broadcast bool and complex64")
    empty = np.zeros(0, np.float32)
    t.ok(ringd.broadcast(empty) is empty, "broadcast of nothing")
    if torch is not None:
        b = torch.tensor([-0.0, float("nan"), 1.5, -3.25], dtype=torch.bfloat16)
        z = b.clone() if t.rank == 0 else torch.zeros(4, dtype=torch.bfloat16)
        ringd.broadcast(z)
        t.ok(ringtest.digest(z) == ringtest.digest(b), "broadcast torch bfloat16 bit for bit")
        w = torch.arange(12, dtype=torch.int64).reshape(3, 4) * (t.rank + 1)
        ringd.broadcast(w, root=0)
        t.ok(torch.equal(w, torch.arange(12).reshape(3, 4)), "broadcast torch int64 2-d")
    hs = [ringd.broadcast_async(np.full(10, float(t.rank), np.float32), root=r)
          for r in range(world)]
    res = [h.wait() for h in hs]
    t.ok(all((x == r).all() for r, x in enumerate(res)),
         "broadcast_async from every root, outstanding together")


def allgather_checks(t, ringd, np, torch):
    world = ringd.size()
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 100 * t.rank
    g = ringd.allgather(x)
    want = np.concatenate([np.arange(12, dtype=np.float32).reshape(3, 4) + 100 * r
                           for r in range(world)])
    t.ok(g.shape == (3 * world, 4) and np.array_equal(g, want),
         "allgather numpy (3, 4) -> (3N, 4) in rank order")
    s = ringd.allgather(np.array(t.rank * 1.5))
    t.ok(s.shape == (world,) and s.tolist() == [r * 1.5 for r in range(world)],
         "allgather of a 0-d array -> (N,)")
    out = np.zeros(world * 5, np.int32)
    mine = out[t.rank * 5:(t.rank + 1) * 5]
    mine[:] = t.rank
    ringd.allgather(mine, out=out)
    t.ok(out.tolist() == [r for r in range(world) for _ in range(5)],
         "allgather in place (the tensor is this rank's block of out)")
    sizes = [r + 1 for r in range(world)]
    v = np.full((sizes[t.rank], 2), t.rank, np.int16)
    gv = ringd.allgather(v, sizes=sizes)
    t.ok(gv.shape == (sum(sizes), 2) and gv[:, 0].tolist() ==
         [r for r in range(world) for _ in range(r + 1)], "allgather with per-rank sizes")
    if torch is not None:
        tt = torch.full((2, 3), t.rank, dtype=torch.bfloat16)
        tg = ringd.allgather(tt)
        t.ok(isinstance(tg, torch.Tensor) and tg.dtype == torch.bfloat16 and
             tuple(tg.shape) == (2 * world, 3) and
             tg[:, 0].tolist() == [float(r) for r in range(world) for _ in range(2)],
             "allgather torch bfloat16 -> a new torch tensor")
    h = ringd.allgather_async(np.array([t.rank], np.int64))
    t.ok(h.wait().tolist() == list(range(world)), "allgather_async")
    bad = sizes[:-1] + [99]  # wrong for the last rank only: the others start nothing
    if t.rank == world - 1:
        t.raises(ValueError, lambda: ringd.allgather(v, sizes=bad),
                 "allgather: sizes that do not fit this rank's tensor: ValueError",
                 lambda e: "sizes" in str(e))
    else:
        t.ok(True, "allgather: sizes that do not fit this rank's tensor: ValueError")


def reduce_scatter_checks(t, ringd, np, torch):
    world = ringd.size()
    k = 1001
    x = (np.arange(world * k) % 97 + t.rank).astype(np.float32)
    want_all = sum((np.arange(world * k) % 97 + r).astype(np.float32) for r in range(world))
    got = ringd.reduce_scatter(x)
    t.ok(got.shape == (k,) and np.array_equal(got, want_all[t.rank * k:(t.rank + 1) * k]),
         "reduce_scatter sum: this rank's block, exact")
    out = np.empty(k, np.float32)
    ringd.reduce_scatter(x, op="avg", out=out)
    want_avg = want_all * np.float32(1.0 / world)
    t.ok(np.array_equal(out, want_avg[t.rank * k:(t.rank + 1) * k]),
         "reduce_scatter avg into out=: exact")
    if torch is not None:
        # small integers: every partial sum is exact in bfloat16 (it travels as itself)
        small = [(np.arange(world * k) % 31 + r).astype(np.float32) for r in range(world)]
        tx = torch.from_numpy(small[t.rank]).to(torch.bfloat16)
        tg = ringd.reduce_scatter(tx, codec="exact")
        twant = torch.from_numpy(sum(small)[t.rank * k:(t.rank + 1) * k]).to(torch.bfloat16)
        t.ok(tg.dtype == torch.bfloat16 and torch.equal(tg, twant),
             "reduce_scatter torch bfloat16 (codec='exact')")
    if world > 1:
        t.raises(ValueError, lambda: ringd.reduce_scatter(np.ones(world * 3 + 1, np.float32)),
                 "reduce_scatter of a length that is not a multiple of N: ValueError")


def barrier_checks(t, ringd, np):
    world = ringd.size()
    ringd.barrier()
    t.ok(True, "barrier")
    if t.rank == 0:
        time.sleep(0.6)
    t0 = time.monotonic()
    ringd.barrier()
    waited = time.monotonic() - t0
    t.ok(t.rank == 0 or world == 1 or waited > 0.3,
         "barrier waits for the last peer (rank 0 came 0.6 s late)", "waited %.3f s" % waited)
    h = ringd.barrier_async()
    t.ok(h.wait() is None, "barrier_async")


def mixed_checks(t, ringd, np):
    world = ringd.size()
    a = np.full(50000, 1.0, np.float32)
    b = np.full(7, float(t.rank), np.float32)
    c = np.array([t.rank], np.int32)
    hs = [ringd.allreduce_async(a), ringd.broadcast_async(b, root=world - 1),
          ringd.allgather_async(c), ringd.barrier_async(),
          ringd.reduce_scatter_async(np.ones(world * 4, np.float32))]
    r = [h.wait() for h in reversed(hs)][::-1]
    t.ok((r[0] == world).all() and (r[1] == world - 1).all() and
         r[2].tolist() == list(range(world)) and r[3] is None and (r[4] == world).all(),
         "allreduce, broadcast, allgather, barrier and reduce_scatter outstanding together")


def thread_checks(t, ringd, np):
    """Two Python threads on one communicator, in an order every peer shares."""
    world = ringd.size()
    big = np.ones(4 << 20, np.float32)
    small = np.full(3, 2.0, np.float32)
    ha = ringd.allreduce_async(big)
    errors = []
    results = {}

    def waiter(name, h):
        try:
            results[name] = h.wait()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    th = [threading.Thread(target=waiter, args=("a%d" % i, ha)) for i in range(2)]
    for x in th:
        x.start()
    hb = ringd.allreduce_async(small)  # started while another thread waits
    got_b = hb.wait()
    for x in th:
        x.join(120)
    t.ok(not errors and not any(x.is_alive() for x in th) and results.get("a0") is big and
         results.get("a1") is big and (big == world).all() and (got_b == 2 * world).all(),
         "two threads wait for one handle while a third starts and waits for another",
         "errors %s, alive %s" % (errors, [x.is_alive() for x in th]))


def nonfinite_checks(t, ringd, np):
    world = ringd.size()
    x = np.ones(1000, np.float32)
    if t.rank == world - 1:
        x[17] = np.inf
    e = t.raises(ringd.NonFiniteError, lambda: ringd.allreduce(x),
                 "an inf on one peer: NonFiniteError on every peer")
    t.ok(e is not None and e.tensor is x and e.status == "RING_ERR_NONFINITE",
         "NonFiniteError carries the (non-finite) result tensor and its status")
    y = np.ones(10, np.float32)
    ringd.allreduce(y)
    t.ok((y == world).all(), "the ring stays usable after NonFiniteError")
    # fp16 buffers too, N=1 included (a ring of one returned inf with OK for them)
    for bad in (np.inf, np.nan):
        h = np.ones(1000, np.float16)
        if t.rank == world - 1:
            h[999] = bad
        t.raises(ringd.NonFiniteError, lambda: ringd.allreduce(h),
                 "an fp16 %s on one peer: NonFiniteError on every peer" % bad)
    try:
        import torch
    except ImportError:
        t.skip("a bf16 inf on one peer", "no PyTorch for a bfloat16 tensor")
        return
    b = torch.ones(1000, dtype=torch.bfloat16)
    if t.rank == world - 1:
        b[3] = float("inf")
    t.raises(ringd.NonFiniteError, lambda: ringd.allreduce(b),
             "a bf16 inf on one peer: NonFiniteError on every peer")
    if world > 1:
        o = torch.full((1000,), 2e38, dtype=torch.bfloat16)
        t.raises(ringd.NonFiniteError, lambda: ringd.allreduce(o),
                 "bf16 buffers whose sum overflows: NonFiniteError on every peer (was inf, OK)")


def checks(t):
    import numpy as np
    import ringd
    try:
        import torch
    except ImportError:
        torch = None

    ringd.init(timeout="60s")
    broadcast_checks(t, ringd, np, torch)
    allgather_checks(t, ringd, np, torch)
    reduce_scatter_checks(t, ringd, np, torch)
    barrier_checks(t, ringd, np)
    mixed_checks(t, ringd, np)
    thread_checks(t, ringd, np)
    nonfinite_checks(t, ringd, np)
    if torch is None:
        t.skip("torch collectives", "torch is not installed for this Python")
    ringd.shutdown()


ringtest.main(checks, worlds=(1, 2, 3, 4, (3, {"RING_PROGRESS_THREAD": "off"})))
