"""The "ringd" torch.distributed backend (a ProcessGroup written in Python,
as torch 1.13's pybind trampoline allows):

    import ringd.torch
    torch.distributed.init_process_group("ringd")   # env:// as for gloo

Float allreduce (sum, avg) and broadcast, allgather and barrier of any
dtype run on ringd, with its codec (RING_CODEC), transports, timeouts and
named-peer errors. What ringd does not do (integer allreduce, min/max/
product, reduce, gather, scatter, send/recv...) goes to a Gloo group over the
same store. The peers find each other through the c10d store: each publishes
"host:port" of a port it listens on, so no second rendezvous port is needed.

Work objects are kept until they complete (torch 1.13 hangs in wait() on a
Work the garbage collector took), and the ring is closed at exit after the
work in flight has finished.
"""
import atexit
import os
import socket
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions, AllreduceOptions, BroadcastOptions

import ringd
from . import _completer

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_live = set()          # Work objects not yet completed (see the module's doc)
_live_lock = threading.Lock()


class _RingdWork(dist._Work):
    def __init__(self, handles, result):
        super().__init__()
        self._handles = list(handles)
        self._result = result
        self._future = None
        with _live_lock:
            _live.add(self)

    def _forget(self):
        with _live_lock:
            _live.discard(self)

    def wait(self, timeout=None):
        try:
            for h in self._handles:
                h.wait()
        finally:
            self._forget()
        return True

    def is_completed(self):
        return all(h.done() for h in self._handles)

    def is_success(self):
        return self.is_completed()

    def result(self):
        return self._result

    def get_future(self):
        if self._future is None:
            def done():
                self._forget()
                return self._result
            self._future = _completer.future_of(self._handles, self._result, done)
        return self._future


def _reduce_op(opts):
    op = opts.reduceOp
    if op == dist.ReduceOp.SUM:
        return "sum"
    if hasattr(dist.ReduceOp, "AVG") and op == dist.ReduceOp.AVG:
        return "avg"
    return None


def _local_address():
    """The address the peers reach this host at: the interface that routes to
    MASTER_ADDR (RING_BIND overrides it)."""
    if os.environ.get("RING_BIND"):
        return os.environ["RING_BIND"]
    master = os.environ.get("MASTER_ADDR", "127.0.0.1")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((master, 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def _free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def peers_through_store(store, rank, size, prefix="ringd"):
    """Every rank's "host:port" for ringd, exchanged through a c10d store (each rank
    publishes a port free on the address its peers reach it at)."""
    host = _local_address()
    store.set("%s/peer/%d" % (prefix, rank), "%s:%d" % (host, _free_port(host)))
    return ",".join(store.get("%s/peer/%d" % (prefix, r)).decode() for r in range(size))


_store_inits = 0  # ringd.init() calls that met through torch's store (a key prefix each)


def _rendezvous_through_default_group(cfg):
    """ringd.init()'s rendezvous when torch.distributed is up and nothing set ringd's
    own: the default group's store, so that ringd does not serve a second store on
    MASTER_PORT, where rank 0's c10d store already listens (init_process_group("gloo")
    then ringd.init() under mpirun or srun)."""
    global _store_inits
    if not (dist.is_available() and dist.is_initialized()):
        return None
    if cfg.source("peers") != "default" or cfg.source("rendezvous") not in ("default",
                                                                             "launcher"):
        return None
    _store_inits += 1
    rank, size = dist.get_rank(), dist.get_world_size()
    store = dist.distributed_c10d._get_default_store()
    return {"rank": rank, "world_size": size,
            "peers": peers_through_store(store, rank, size, "ringd-init/%d" % _store_inits)}


class ProcessGroupRingd(dist.ProcessGroup):
    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("ringd-gloo/", store), rank, size,
                                           timeout)
        if ringd.is_initialized():
            if ringd.rank() != rank or ringd.size() != size:
                raise ringd.ConfigError(
                    "the ringd ring is already up as rank %d of %d, but torch.distributed "
                    "asks for rank %d of %d" % (ringd.rank(), ringd.size(), rank, size))
        else:
            settings = {}
            # torch's default timeout (30 min) is not the user's choice: ringd's applies
            # (RING_TIMEOUT, or its default); a timeout= given to init_process_group wins
            if timeout != dist.default_pg_timeout:
                settings["timeout"] = "%gs" % timeout.total_seconds()
            ringd.init(rank=rank, world_size=size, peers=peers_through_store(store, rank, size),
                       **settings)
        self.ringd_calls = 0

    # -- what runs on ringd --------------------------------------------------

    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else AllreduceOptions()
        op = _reduce_op(opts)
        if op is None or any(t.dtype not in _FLOATS or t.device.type != "cpu" for t in tensors):
            return self._gloo.allreduce(tensors, opts)
        self.ringd_calls += 1
        _completer.raise_failure_at_end_of_backward()
        return _RingdWork(_completer.start_or_fail(
            lambda: [ringd.allreduce_async(t, op=op) for t in tensors]), tensors)

    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else BroadcastOptions()
        if any(t.device.type != "cpu" or not t.is_contiguous() for t in tensors):
            return self._gloo.broadcast(tensors, opts)
        self.ringd_calls += 1
        return _RingdWork([ringd.broadcast_async(t, root=opts.rootRank) for t in tensors],
                          tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        opts = opts if opts is not None else AllgatherOptions()
        if len(input_tensors) != 1 or any(t.device.type != "cpu" for t in input_tensors):
            return self._gloo.allgather(output_tensors, input_tensors, opts)
        inp, outs = input_tensors[0], output_tensors[0]
        if len(outs) != self._size or any(o.numel() != inp.numel() or o.dtype != inp.dtype
                                          for o in outs):
            raise ValueError("allgather: expected %d output tensors shaped like the input"
                             % self._size)
        self.ringd_calls += 1
        flat = torch.empty((self._size,) + tuple(inp.shape), dtype=inp.dtype)
        handle = ringd.allgather_async(inp.contiguous(), out=flat)

        def scatter_out():
            for o, part in zip(outs, flat):
                o.copy_(part)
            return output_tensors
        return _GatherWork([handle], output_tensors, scatter_out)

    def barrier(self, opts=None):
        del opts  # BarrierOptions' device ids mean nothing to ringd
        self.ringd_calls += 1
        return _RingdWork([ringd.barrier_async()], [])

    # -- what goes to Gloo -----------------------------------------------------

    def reduce(self, *args):
        return self._gloo.reduce(*args)

    def gather(self, *args):
        return self._gloo.gather(*args)

    def scatter(self, *args):
        return self._gloo.scatter(*args)

    def reduce_scatter(self, *args):
        return self._gloo.reduce_scatter(*args)

    def alltoall(self, *args):
        return self._gloo.alltoall(*args)

    def alltoall_base(self, *args):
        return self._gloo.alltoall_base(*args)

    def send(self, *args):
        return self._gloo.send(*args)

    def recv(self, *args):
        return self._gloo.recv(*args)

    def recv_anysource(self, *args):
        return self._gloo.recv_anysource(*args)

    def allgather_coalesced(self, *args):
        return self._gloo.allgather_coalesced(*args)

    def allreduce_coalesced(self, *args):
        return self._gloo.allreduce_coalesced(*args)

    def _allgather_base(self, *args):
        return self._gloo._allgather_base(*args)

    def _reduce_scatter_base(self, *args):
        return self._gloo._reduce_scatter_base(*args)

    def monitored_barrier(self, *args):
        return self._gloo.monitored_barrier(*args)

    def getBackendName(self):
        return "ringd"

    def size(self):
        return self._size

    def rank(self):
        return self._rank


class _GatherWork(_RingdWork):
    """An allgather's Work: the flat result is copied into the output list when done."""

    def __init__(self, handles, result, scatter_out):
        super().__init__(handles, result)
        self._scatter_out = scatter_out
        self._copied = False

    def wait(self, timeout=None):
        super().wait(timeout)
        if not self._copied:
            self._scatter_out()
            self._copied = True
        return True

    def get_future(self):
        if self._future is None:
            def done():
                self._forget()
                if not self._copied:
                    self._scatter_out()
                    self._copied = True
                return self._result
            self._future = _completer.future_of(self._handles, self._result, done)
        return self._future


def _create(store, rank, size, timeout):
    return ProcessGroupRingd(store, rank, size, timeout)


_registered = False


def register_backend():
    """Make "ringd" a torch.distributed backend (done when ringd.torch is imported)."""
    global _registered
    if not _registered and not hasattr(dist.Backend, "RINGD"):
        try:  # torch >= 2.1 asks which devices a backend serves (CUDA tensors: Gloo's)
            dist.Backend.register_backend("ringd", _create, devices=["cpu", "cuda"])
        except TypeError:
            dist.Backend.register_backend("ringd", _create)
    _registered = True


@atexit.register
def _drain():
    # Work still referenced at exit: let it finish before ringd shuts down
    with _live_lock:
        live = list(_live)
    for w in live:
        try:
            w.wait()
        except ringd.Error:
            pass
