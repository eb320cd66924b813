"""The "ringd" torch.distributed backend (a ProcessGroup written in Python,
as torch 1.13's pybind trampoline allows):

    import ringd.torch
    torch.distributed.init_process_group("ringd")   # env:// as for gloo

Float allreduce (sum, avg) and broadcast, allgather and barrier of any
dtype run on ringd, for CPU and CUDA tensors (a CUDA allreduce on the device,
ordered on the caller's current stream; the other CUDA collectives staged
through host memory; one GPU per process; docs/pytorch.md, "CUDA tensors"), with its codec (RING_CODEC), transports, timeouts and
named-peer errors. What ringd does not do (integer allreduce, min/max/
product, reduce, gather, scatter, send/recv...) goes to a Gloo group over the
same store. The peers find each other through the c10d store: each publishes
"host:port" of a port it listens on, so no second rendezvous port is needed.

Work objects are kept until they complete (torch 1.13 hangs in wait() on a
Work the garbage collector took), and the ring is closed at exit after the
work in flight has finished.

torch calls a backend's methods by names that changed between versions; each
is here under both (see docs/pytorch.md, "torch versions"):
all_gather_into_tensor calls _allgather_base (1.13) or all_gather_single
(2.x, also all_gather_object's), reduce_scatter_tensor _reduce_scatter_base or
reduce_scatter_single, all_to_all_single alltoall_base or all_to_all_single;
destroy_process_group() calls shutdown() from torch 2.x on (1.13 only drops the
group: the ring then closes at exit, or is reused by the next group).
"""
import atexit
import inspect
import os
import socket
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (AllgatherOptions, AllreduceOptions, BroadcastOptions,
                                        GatherOptions, ReduceScatterOptions)

import ringd
from . import _completer
from .. import _runtime

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _ours(tensors):
    """Tensors ringd moves: all on the CPU, or all on one CUDA device."""
    devices = {t.device for t in tensors}
    return len(devices) <= 1 and all(d.type in ("cpu", "cuda") for d in devices)
_live = set()          # Work objects not yet completed (see the module's doc)
_live_lock = threading.Lock()


class _RingdWork(dist.Work):
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


_pg_inits = 0  # rings this process opened for a process group (a store prefix each)


class ProcessGroupRingd(dist.ProcessGroup):
    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._comm = None  # the ring, when this group opened it
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
            # a prefix per group made: after destroy_process_group() the next group may
            # meet at the same store under the same name, and must not read the old ports
            global _pg_inits
            _pg_inits += 1
            peers = peers_through_store(store, rank, size, "ringd/%d" % _pg_inits)
            ringd.init(rank=rank, world_size=size, peers=peers, **settings)
            self._comm = _runtime._comm  # this group opened the ring: shutdown() closes it
        self.ringd_calls = 0

    # -- what runs on ringd --------------------------------------------------

    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else AllreduceOptions()
        op = _reduce_op(opts)
        if op is None or not _ours(tensors) or any(t.dtype not in _FLOATS or
                                                   not t.is_contiguous() for t in tensors):
            return self._gloo.allreduce(tensors, opts)
        self.ringd_calls += 1
        _completer.raise_failure_at_end_of_backward()
        return _RingdWork(_completer.start_or_fail(
            lambda: [ringd.allreduce_async(t, op=op) for t in tensors]), tensors)

    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else BroadcastOptions()
        if not _ours(tensors) or any(not t.is_contiguous() for t in tensors):
            return self._gloo.broadcast(tensors, opts)
        self.ringd_calls += 1
        return _RingdWork([ringd.broadcast_async(t, root=opts.rootRank) for t in tensors],
                          tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        opts = opts if opts is not None else AllgatherOptions()
        if len(input_tensors) != 1 or len(output_tensors) != 1 or \
                not _ours(list(input_tensors) + list(output_tensors[0])):
            return self._gloo.allgather(output_tensors, input_tensors, opts)
        inp, outs = input_tensors[0], output_tensors[0]
        if len(outs) != self._size or any(o.numel() != inp.numel() or o.dtype != inp.dtype
                                          for o in outs):
            raise ValueError("allgather: expected %d output tensors shaped like the input"
                             % self._size)
        self.ringd_calls += 1
        flat = torch.empty((self._size,) + tuple(inp.shape), dtype=inp.dtype, device=inp.device)
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

    def all_gather_single(self, output, input, opts=None):
        """all_gather_into_tensor: every rank's input, in rank order, into one output
        (N x the input's elements, any shape). CPU tensors of any dtype on ringd."""
        opts = opts if opts is not None else AllgatherOptions()
        if output.numel() != input.numel() * self._size or output.dtype != input.dtype:
            raise ValueError("all_gather_into_tensor: the output must hold %d x the input's "
                             "%d elements, of its dtype (got %d of %s, input %s)"
                             % (self._size, input.numel(), output.numel(), output.dtype,
                                input.dtype))
        if not output.is_contiguous():
            raise ValueError("all_gather_into_tensor: the output must be contiguous")
        if not _ours([output, input]):
            # elsewhere Gloo's list allgather into views of the output (1.13's Gloo has no
            # single-tensor allgather)
            return self._gloo.allgather([list(output.view(self._size, -1).unbind(0))],
                                        [input.reshape(-1)], opts)
        self.ringd_calls += 1
        if input.numel() == 0:
            return _RingdWork([], [output])
        return _RingdWork([ringd.allgather_async(input.contiguous().reshape(-1),
                                                 out=output.view(-1))], [output])

    _allgather_base = all_gather_single  # torch 1.13's name, still in 2.x

    def reduce_scatter_single(self, output, input, opts=None):
        """reduce_scatter_tensor: block `rank` (output's elements) of the reduction of
        input (N x output's elements). Float CPU sum/avg on ringd, with its codec."""
        opts = opts if opts is not None else ReduceScatterOptions()
        if input.numel() != output.numel() * self._size or output.dtype != input.dtype:
            raise ValueError("reduce_scatter_tensor: the input must hold %d x the output's "
                             "%d elements, of its dtype (got %d of %s, output %s)"
                             % (self._size, output.numel(), input.numel(), input.dtype,
                                output.dtype))
        if not output.is_contiguous():
            raise ValueError("reduce_scatter_tensor: the output must be contiguous")
        op = _reduce_op(opts)
        if op is None or output.dtype not in _FLOATS or not _ours([output, input]):
            return self._reduce_scatter_through_gloo(output, input, opts)
        self.ringd_calls += 1
        _completer.raise_failure_at_end_of_backward()
        if output.numel() == 0:
            return _RingdWork([], [output])
        return _RingdWork(_completer.start_or_fail(lambda: [ringd.reduce_scatter_async(
            input.contiguous().reshape(-1), op=op, out=output.view(-1))]), [output])

    _reduce_scatter_base = reduce_scatter_single  # torch 1.13's name, still in 2.x

    def _reduce_scatter_through_gloo(self, output, input, opts):
        """What ringd does not reduce (integers, MIN/MAX/PRODUCT, CUDA): Gloo's allreduce of
        a copy, this rank's block kept. The same code on every torch (1.13's Gloo has no
        reduce-scatter); it moves twice the data a reduce-scatter would."""
        whole = input.detach().clone().reshape(-1)
        ar = AllreduceOptions()
        ar.reduceOp = opts.reduceOp
        work = self._gloo.allreduce([whole], ar)
        n = output.numel()

        def keep():
            output.copy_(whole[self._rank * n:(self._rank + 1) * n].view_as(output))
        return _AfterWork(work, keep, [output])

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        """torch 2.x's _coalescing_manager: one all_gather_single per pair, one Work."""
        return _AllWork([self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs)],
                        outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced  # torch 2.0-2.x's name

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        return _AllWork([self.reduce_scatter_single(o, i, opts)
                         for o, i in zip(outputs, inputs)], outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def gather_single(self, output, input, opts=None):
        """torch 2.x's gather_into_tensor (its Gloo has no single-tensor gather): Gloo's
        list gather into views of the output on the root."""
        opts = opts if opts is not None else GatherOptions()
        outs = [list(output.view(self._size, -1).unbind(0))] if opts.rootRank == self._rank \
            else []
        return self._gloo.gather(outs, [input.reshape(-1)], opts)

    gather_into_tensor = gather_single

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=None):
        """torch 2.x's name of alltoall_base (Gloo's, with 1.13's argument order)."""
        if opts is None:
            return self._gloo.alltoall_base(output, input, output_split_sizes,
                                            input_split_sizes)
        return self._gloo.alltoall_base(output, input, output_split_sizes, input_split_sizes,
                                        opts)

    # -- the end (destroy_process_group() in torch 2.x) ---------------------------

    def shutdown(self):
        """Wait for this process's Work in flight, close the inner Gloo group (torch 2.x)
        and, when this group opened the ring, ringd's (a ring opened by ringd.init()
        before the group stays open for the caller)."""
        _drain()
        close = getattr(self._gloo, "shutdown", None)
        if close is not None:
            close()
        if self._comm is not None and self._comm is _runtime._comm:
            ringd.shutdown()
        self._comm = None

    def abort(self):
        """As shutdown(), without waiting: the collectives in flight are cancelled (fail
        with ringd.CanceledError) and the ring is closed if this group opened it."""
        close = getattr(self._gloo, "abort", None)
        if close is not None:
            close()
        if self._comm is not None and self._comm is _runtime._comm:
            _runtime._abort()
        self._comm = None

    def getBackendName(self):
        return "ringd"

    def size(self):
        return self._size

    def rank(self):
        return self._rank


def _to_gloo(name):
    def call(self, *args):
        return getattr(self._gloo, name)(*args)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = "Gloo's %s (ringd does not do it)." % name
    return call


# what goes to Gloo as it is (torch itself allows monitored_barrier on Gloo groups only)
for _name in ("reduce", "gather", "scatter", "reduce_scatter", "alltoall", "alltoall_base",
              "send", "recv", "recv_anysource", "allgather_coalesced", "allreduce_coalesced",
              "monitored_barrier"):
    setattr(ProcessGroupRingd, _name, _to_gloo(_name))


class _AfterWork(dist.Work):
    """Another Work, then a step of ours (a copy) before it counts as done."""

    def __init__(self, work, after, result):
        super().__init__()
        self._work, self._after, self._result = work, after, result
        self._done = False
        with _live_lock:
            _live.add(self)

    def _finish(self):
        if not self._done:
            self._after()
            self._done = True
        with _live_lock:
            _live.discard(self)

    def wait(self, timeout=None):
        self._work.wait()
        self._finish()
        return True

    def is_completed(self):
        return self._done or self._work.is_completed()

    def is_success(self):
        return self.is_completed()

    def result(self):
        return self._result

    def get_future(self):
        def done(fut):
            fut.wait()
            self._finish()
            return self._result
        return self._work.get_future().then(done)


class _AllWork(_AfterWork):
    """Several Works as one (a coalesced call)."""

    def __init__(self, works, result):
        super().__init__(None, lambda: None, result)
        self._works = works

    def wait(self, timeout=None):
        for w in self._works:
            w.wait()
        self._finish()
        return True

    def is_completed(self):
        return all(w.is_completed() for w in self._works)

    def get_future(self):
        futs = [w.get_future() for w in self._works]

        def done(fut):
            for f in fut.wait():
                f.wait()
            self._finish()
            return self._result
        return torch.futures.collect_all(futs).then(done)


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
        # torch 2.1+ asks which devices a backend serves, and warns when not told; ringd
        # serves both (CUDA: see the module's doc); 1.13 has no such argument (it sends
        # every device's tensors to the backend)
        kw = {}
        if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
            kw["devices"] = ["cpu", "cuda"]
        dist.Backend.register_backend("ringd", _create, **kw)
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
