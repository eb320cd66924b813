"""ringd.allreduce with N = 1..4 real peers under ring-launch: sum and avg on numpy
(float32, float16) and torch (float32, float16, bfloat16), exact and bitwise identical on
every peer, in place and with out=; async handles (more than MAX_REQUESTS outstanding,
waited in any order); the GIL released during a wait; and, in jobs with the fp16/bf16 wire
codec, results within tolerance while codec="exact" calls stay exact."""

import os
import threading
import time

import ringtest

COUNTS = (1, 3, 1000, 300001)  # fewer elements than peers, odd sizes, several chunks


def inputs(np, rank, count, seed):
    """Small integers: every sum and partial sum is exact in fp16, bf16 and fp32."""
    return ((np.arange(count, dtype=np.int64) * 7 + rank * 13 + seed) % 31 - 15).astype(
        np.float32)


def expected(np, world, count, seed, op):
    total = sum(inputs(np, r, count, seed) for r in range(world)).astype(np.float32)
    if op == "avg":
        total = total * np.float32(1.0 / world)  # how libringd averages: sum * (1/N) in fp32
    return total


def avg_is_exact(world, dtype_name):
    """fp32 averages exactly (sum, then * 1/N); fp16 and bf16 travel as themselves, each
    peer's input scaled by 1/N first, so partial sums round unless N is a power of two."""
    return dtype_name == "float32" or world & (world - 1) == 0


def avg_tolerance(np, world, dtype_name, want):
    eps = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[dtype_name]
    return world * eps * max(1.0, float(np.abs(np.asarray(want, np.float32)).max()))


def numpy_checks(t, ringd, np):
    world = ringd.size()
    for dtype in (np.float32, np.float16):
        dn = np.dtype(dtype).name
        for op in ("sum", "avg"):
            for count in COUNTS:
                seed = count + (1 if op == "avg" else 0)
                want = expected(np, world, count, seed, op).astype(dtype)
                x = inputs(np, t.rank, count, seed).astype(dtype)
                got = ringd.allreduce(x, op=op)
                label = "numpy %s %s of %d" % (dn, op, count)
                if op == "sum" or avg_is_exact(world, dn):
                    t.ok(got is x and np.array_equal(x, want), label + " in place: exact",
                         "first differences: %s" % _diff(np, x, want))
                else:
                    tol = avg_tolerance(np, world, dn, want)
                    err = float(np.abs(x.astype(np.float32) - want.astype(np.float32)).max())
                    t.ok(got is x and err <= tol, label + " in place: within %d ulp" % world,
                         "max error %g > %g" % (err, tol))
                t.same(label + " in place", ringtest.digest(x))
                src = inputs(np, t.rank, count, seed).astype(dtype)
                keep = src.copy()
                out = np.empty_like(src)
                got = ringd.allreduce(src, op=op, out=out)
                t.ok(got is out and np.array_equal(out, x) and np.array_equal(src, keep),
                     label + " with out=: the in-place result, input untouched",
                     _diff(np, out, x))
    # a 2-d array and a 0-d one keep their shapes
    m = np.full((3, 5), t.rank + 1, np.float32)
    ringd.allreduce(m)
    t.ok(m.shape == (3, 5) and (m == world * (world + 1) / 2).all(), "numpy 2-d array")
    s = np.array(2.0, np.float32)
    ringd.allreduce(s, op="avg")
    t.ok(s.shape == () and float(s) == 2.0, "numpy 0-d array")


def _diff(np, got, want):
    idx = np.nonzero(got != want)[0][:5]
    return ", ".join("[%d] %r != %r" % (i, got[i], want[i]) for i in idx)


def torch_checks(t, ringd, np, torch):
    world = ringd.size()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        dn = str(dtype).replace("torch.", "")
        for op in ("sum", "avg"):
            for count in COUNTS:
                seed = count + 3 + (1 if op == "avg" else 0)
                want = torch.from_numpy(expected(np, world, count, seed, op)).to(dtype)
                x = torch.from_numpy(inputs(np, t.rank, count, seed)).to(dtype)
                label = "torch %s %s of %d" % (dn, op, count)
                got = ringd.allreduce(x, op=op)
                if op == "sum" or avg_is_exact(world, dn):
                    bad = (x != want).nonzero()[:5].flatten().tolist()
                    t.ok(got is x and torch.equal(x, want), label + " in place: exact",
                         "differs at %s: %s vs %s" % (bad, x[bad].tolist(),
                                                     want[bad].tolist()))
                else:
                    tol = avg_tolerance(np, world, dn, want.float().numpy())
                    err = float((x.float() - want.float()).abs().max())
                    t.ok(got is x and err <= tol, label + " in place: within %d ulp" % world,
                         "max error %g > %g" % (err, tol))
                t.same(label + " in place", ringtest.digest(x))
                src = torch.from_numpy(inputs(np, t.rank, count, seed)).to(dtype)
                keep = src.clone()
                out = torch.empty_like(src)
                got = ringd.allreduce(src, op=op, out=out)
                t.ok(got is out and torch.equal(out, x) and torch.equal(src, keep),
                     label + " with out=: the in-place result, input untouched")
    g = torch.full((4, 6), float(t.rank), requires_grad=True)
    ringd.allreduce(g.data)
    t.ok(g.grad is None and (g.data == world * (world - 1) / 2).all(),
         "torch: a parameter's .data in place")


def async_checks(t, ringd, np):
    world = ringd.size()
    k = 3 * ringd.MAX_REQUESTS + 2
    xs = [np.full(100 + i, t.rank + i, np.float32) for i in range(k)]
    hs = [ringd.allreduce_async(x) for x in xs]
    t.ok(len(hs) == k, "%d allreduce_async started (more than MAX_REQUESTS=%d outstanding)"
         % (k, ringd.MAX_REQUESTS))
    results = [h.wait() for h in reversed(hs)][::-1]
    want = [world * i + world * (world - 1) / 2 for i in range(k)]
    t.ok(all(r is x for r, x in zip(results, xs))
         and all((x == w).all() for x, w in zip(xs, want)),
         "every handle's result, waited newest first", [float(x[0]) for x in xs[:5]])
    t.ok(all(h.done() for h in hs), "every handle done() after its wait")
    t.ok(all(h.wait() is x for h, x in zip(hs, xs)), "wait() again returns the same tensor")
    # a blocking call while handles are pending finishes them first (requests run in order)
    a = np.ones(10, np.float32)
    b = np.ones(10, np.float32)
    ha = ringd.allreduce_async(a)
    ringd.allreduce(b)
    t.ok(ha.done() and (a == world).all() and (b == world).all(),
         "a blocking allreduce after an async one: both done")
    # done() turns true without wait() (bounded poll)
    c = np.ones(1000, np.float32)
    hc = ringd.allreduce_async(c)
    deadline = time.monotonic() + 30
    while not hc.done() and time.monotonic() < deadline:
        time.sleep(0.001)
    t.ok(hc.done() and hc.wait() is c and (c == world).all(),
         "done() polls a request to completion")


def gil_checks(t, ringd, np):
    """A wait runs with the GIL released: another Python thread keeps running."""
    if ringd.size() == 1:
        return  # a ring of one has nothing to wait for
    big = np.ones(8 << 20, np.float32)  # 32 MB: a wait of a good fraction of a second
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    th = threading.Thread(target=spin)
    h = ringd.allreduce_async(big)
    th.start()
    time.sleep(0)  # let the thread start
    before = count[0]
    t0 = time.monotonic()
    h.wait()
    waited = time.monotonic() - t0
    during = count[0] - before
    stop.set()
    th.join()
    t.ok(during > 1000 or waited < 0.02, "another thread runs during a wait",
         "%d loops in %.3f s" % (during, waited))
    t.ok((big == ringd.size()).all(), "the 32 MB allreduce is right")


def codec_checks(t, ringd, np, codec):
    world = ringd.size()
    t.eq(ringd.config()["codec"], codec, "the codec setting came from RING_CODEC")
    rng = np.random.default_rng(1234)
    data = rng.standard_normal((world, 200000)).astype(np.float32)
    exact = data.astype(np.float64).sum(axis=0)
    x = data[t.rank].copy()
    ringd.allreduce(x)
    err = float(np.abs(x - exact).max())
    scale = float(np.abs(exact).max())
    tol = (2e-3 if codec == "fp16" else 1.6e-2) * world * scale
    t.ok(err <= tol, "codec %s: sum within tolerance" % codec,
         "max error %g, tolerance %g" % (err, tol))
    t.same("codec %s sum" % codec, ringtest.digest(x))
    exact32 = sum(data[r] for r in range(world)).astype(np.float32)
    t.ok(world == 1 or not np.array_equal(x, exact32),
         "codec %s: the wire codec took effect (not the exact fp32 sum)" % codec)
    y = inputs(np, t.rank, 5001, 7)
    ringd.allreduce(y, codec="exact")
    t.ok(np.array_equal(y, expected(np, world, 5001, 7, "sum")),
         "codec %s: codec='exact' calls stay exact" % codec)
    z = data[t.rank].copy()
    ringd.allreduce(z, codec="exact")
    t.same("codec %s, codec='exact': bitwise identical" % codec, ringtest.digest(z))
    if codec == "fp16":
        fp16_range_checks(t, ringd, np, world)
    if codec == "bf16" and world > 1:
        # bf16 has fp32's range; a sum beyond it was inf with status OK on every rank
        big = np.full(1000, 2e38, np.float32)
        t.raises(ringd.NonFiniteError, lambda: ringd.allreduce(big),
                 "codec bf16: a sum that overflows reports NONFINITE on every peer")


def fp16_range_checks(t, ringd, np, world):
    """What --fp16-scaling promises (README, docs/codec.md): sums within about 4.8e-35..8.3e34
    keep fp16 precision (the scale is clamped to 2^-100..2^100); a larger finite sum reports
    NONFINITE. Below 4.8e-35, where the clamp leaves steps of 2^-124: tests/ring/t-codec-range.c."""
    for big in (1e34, 1e-30):
        x = np.full(1000, big / world, np.float32)
        ringd.allreduce(x)
        t.ok(np.allclose(x, big, rtol=2.0 ** -10 * world), "codec fp16: a sum of %g keeps fp16 "
             "precision" % big, "got %r" % x[:3])
    x = np.full(1000, 1e35 / world, np.float32)
    t.raises(ringd.NonFiniteError, lambda: ringd.allreduce(x),
             "codec fp16: a finite sum of 1e35, beyond the scale's 2^100, reports NONFINITE")


def checks(t):
    import numpy as np
    import ringd
    try:
        import torch
    except ImportError:
        torch = None

    ringd.init()
    t.eq((ringd.rank(), ringd.size()), (t.rank, t.world), "rank and size from ring-launch")
    t.eq(ringd.local_rank(), t.rank, "local_rank from ring-launch (one host)")
    codec = os.environ.get("RING_CODEC")
    if codec:
        codec_checks(t, ringd, np, codec)
        return
    numpy_checks(t, ringd, np)
    if torch is None:
        t.skip("torch allreduce", "torch is not installed for this Python")
    else:
        torch_checks(t, ringd, np, torch)
    async_checks(t, ringd, np)
    gil_checks(t, ringd, np)
    ringd.shutdown()
    t.ok(not ringd.is_initialized(), "shutdown")


ringtest.main(checks, worlds=(1, 2, 3, 4, (3, {"RING_CODEC": "fp16"}),
                              (2, {"RING_CODEC": "bf16"})))
