"""CUDA memory's plumbing without a GPU: objects with __cuda_array_interface__ (CuPy's and
Numba's way; v2 and v3) whose data pointer is host memory (a numpy array's), so that
libringd, seeing host memory, really runs the allreduce and the stream argument travels
the whole way (Python, the extension, ring_allreduce_start_stream and
ring_request_wait_stream) with N = 1..3 real peers. Also the argument checks made before
anything is queued: strides that are not C-contiguous, an unsupported typestr, a read-only
input, stream 0, out= in other memory than the tensor, and such objects passed to the
collectives that take CUDA memory only as torch tensors. torch is not needed. What needs a
real GPU is in t-torch-cuda.py."""

import ringtest


class FakeCuda:
    """A __cuda_array_interface__ over a numpy array (host memory: see the module's doc)."""

    def __init__(self, a, stream=None, version=3, strides=None, typestr=None, readonly=False,
                 mask=None):
        self.a = a
        cai = {"shape": tuple(a.shape), "typestr": typestr or a.dtype.str,
               "data": (a.ctypes.data, readonly), "version": version, "strides": strides}
        if stream is not None:
            cai["stream"] = stream
        if mask is not None:
            cai["mask"] = mask
        self.__cuda_array_interface__ = cai


def reduce_checks(t, ringd, np):
    n = ringd.size()
    tri = n * (n + 1) / 2
    base = np.arange(1000, dtype=np.float32)
    for stream, label in ((None, "no stream (v3)"), (1, "stream 1 (legacy default)"),
                          (2, "stream 2 (per-thread default)"),
                          (0x7F00DEAD000, "an arbitrary stream handle")):
        a = base * (t.rank + 1)
        f = FakeCuda(a, stream=stream)
        h = ringd.allreduce_async(f)
        want_stream = 0 if stream is None else stream
        t.eq(h._req.stream, want_stream,
             "allreduce_async of a CAI object, %s: the request carries stream %d"
             % (label, want_stream))
        got = h.wait()
        t.ok(got is f and np.array_equal(a, base * tri),
             "allreduce of a CAI object (host memory), %s: the sum over %d peers, in place"
             % (label, n), "got %r" % a[:4])
    a = base * (t.rank + 1)
    r = ringd.allreduce(FakeCuda(a, version=2), op="avg")
    t.ok(np.allclose(a, base * tri / n, rtol=1e-6), "a v2 interface (no stream key): avg")
    a = base * (t.rank + 1)
    out = np.full_like(a, -1)
    fo = FakeCuda(out, stream=1)
    r = ringd.allreduce(FakeCuda(a, stream=1, readonly=True), out=fo)
    t.ok(r is fo and np.array_equal(out, base * tri) and np.array_equal(a, base * (t.rank + 1)),
         "allreduce of a read-only CAI input into a CAI out=: the sum in out, the input kept")
    h16 = np.arange(64, dtype=np.float16) * (t.rank + 1)
    ringd.allreduce(FakeCuda(h16, stream=2, strides=(2,)), codec="exact")
    t.ok(np.array_equal(h16, np.arange(64, dtype=np.float16) * tri),
         "float16 ('<f2') CAI object with explicit C strides: the sum")
    e = np.zeros((0,), np.float32)
    t.ok(ringd.allreduce(FakeCuda(e)) is not None, "an empty CAI object")
    # blocking: the host waits for the device too (ring_request_wait)
    a = base * (t.rank + 1)
    h = ringd.allreduce_async(FakeCuda(a, stream=1))
    h.wait(blocking=True)
    t.ok(np.array_equal(a, base * tri), "Handle.wait(blocking=True) of a pending CAI allreduce")
    # several in flight, waited for newest first (the older ones finish on their streams)
    arrays = [base * (t.rank + 1) + i for i in range(5)]
    handles = [ringd.allreduce_async(FakeCuda(x, stream=2), tensor_id=i)
               for i, x in enumerate(arrays)]
    handles[-1].wait()
    for h in handles:
        h.wait()
    t.ok(all(np.array_equal(x, base * tri + i * n) for i, x in enumerate(arrays)),
         "5 CAI allreduces in flight, the last waited for first: every sum right")
    t.same("CAI sums", ringtest.digest(arrays[0]))


def argument_checks(t, ringd, np):
    a = np.ones(8, np.float32)
    t.raises(ValueError, lambda: ringd.allreduce(FakeCuda(np.ones(16, np.float32)[::2],
                                                          strides=(8,))),
             "a CAI object with strides (8,) for float32: ValueError naming contiguity",
             lambda e: "contiguous" in str(e))
    t.raises(ValueError, lambda: ringd.allreduce(FakeCuda(np.ones((4, 4), np.float32),
                                                          strides=(4, 16))),
             "a transposed 2-d CAI object: ValueError", lambda e: "contiguous" in str(e))
    t.raises(TypeError, lambda: ringd.allreduce(FakeCuda(np.ones(8, np.int32))),
             "a CAI object of '<i4': TypeError naming the typestr", lambda e: "<i4" in str(e))
    t.raises(TypeError, lambda: ringd.allreduce(FakeCuda(a, typestr=">f4")),
             "a big-endian CAI typestr: TypeError")
    t.raises(TypeError, lambda: ringd.allreduce(FakeCuda(np.ones(8, np.float64))),
             "a CAI object of '<f8': TypeError")
    t.raises(ValueError, lambda: ringd.allreduce(FakeCuda(a, readonly=True)),
             "a read-only CAI object in place: ValueError", lambda e: "read-only" in str(e))
    t.raises(ValueError, lambda: ringd.allreduce(FakeCuda(a, stream=0)),
             "CAI stream 0 (forbidden by v3): ValueError", lambda e: "0" in str(e))
    t.raises(TypeError, lambda: ringd.allreduce(FakeCuda(a, stream="s")),
             "CAI stream not an int: TypeError")
    t.raises(ValueError, lambda: ringd.allreduce(FakeCuda(a, mask=object())),
             "a masked CAI object: ValueError")

    class Broken:
        __cuda_array_interface__ = {"shape": (4,)}
    t.raises(TypeError, lambda: ringd.allreduce(Broken()),
             "a CAI without typestr/data: TypeError")
    t.raises(ValueError, lambda: ringd.allreduce(FakeCuda(a), out=np.zeros(8, np.float32)),
             "a CAI tensor with a numpy out=: ValueError naming both places",
             lambda e: "cuda" in str(e) and "cpu" in str(e))
    t.raises(ValueError, lambda: ringd.allreduce(a, out=FakeCuda(np.zeros(8, np.float32))),
             "a numpy tensor with a CAI out=: ValueError naming both places",
             lambda e: "cuda" in str(e) and "cpu" in str(e))
    t.raises(ValueError, lambda: ringd.allreduce(FakeCuda(a), out=FakeCuda(np.zeros(4,
                                                                                 np.float32))),
             "a CAI out= of another size: ValueError")
    t.raises(TypeError, lambda: ringd.allreduce(FakeCuda(a), out=FakeCuda(np.zeros(8,
                                                                                np.float16))),
             "a CAI out= of another dtype: TypeError")
    for name, call in (("broadcast", lambda f: ringd.broadcast(f)),
                       ("broadcast_async", lambda f: ringd.broadcast_async(f)),
                       ("allgather", lambda f: ringd.allgather(f, out=np.zeros(
                           8 * ringd.size(), np.float32))),
                       ("reduce_scatter", lambda f: ringd.reduce_scatter(FakeCuda(np.zeros(
                           2 * ringd.size(), np.float32))))):
        t.raises(TypeError, lambda: call(FakeCuda(a)),
                 "%s of a CAI object: TypeError (only allreduce takes it without torch)" % name,
                 lambda e: "only allreduce" in str(e))
    comm = ringd._runtime._comm
    t.raises(TypeError, lambda: comm.allreduce_start(a, None, 0, False, 0, "stream"),
             "_ringd: a stream that is not an int: TypeError")
    t.raises(ValueError, lambda: comm.allreduce_start(a, None, 0, False, 0, -1),
             "_ringd: a negative stream: ValueError")
    t.eq(comm.live, 0, "no request left live by the refused calls")


def torch_checks(t, ringd, np, torch):
    x = torch.ones(8)
    t.raises(ValueError, lambda: ringd.allreduce(x, out=FakeCuda(np.zeros(8, np.float32))),
             "torch: a CPU tensor with a CAI out=: ValueError", lambda e: "cpu" in str(e))
    t.raises(TypeError, lambda: ringd.broadcast(torch.empty(4, device="meta")),
             "torch: broadcast of a meta tensor: TypeError")
    if not torch.cuda.is_available():
        t.skip("torch CUDA tensors", "no CUDA device (t-torch-cuda.py runs them on a GPU host)")


def checks(t):
    import numpy as np
    import ringd
    try:
        import torch
    except ImportError:
        torch = None
    ringd.init(timeout="60s")
    reduce_checks(t, ringd, np)
    argument_checks(t, ringd, np)
    # the ring is fine after the refused calls
    a = np.ones(4, np.float32)
    ringd.allreduce(FakeCuda(a))
    t.ok(np.array_equal(a, np.full(4, ringd.size(), np.float32)),
         "an allreduce after the refused calls")
    if torch is None:
        t.skip("torch checks", "torch is not installed for this Python")
    else:
        torch_checks(t, ringd, np, torch)
    ringd.shutdown()


ringtest.main(checks, worlds=(1, 2, 3))
