"""The process's communicator, its settings and the collectives' handles.

One communicator per process, opened by init() and closed by shutdown() (or
at interpreter exit). Requests run in the order they were started, so
handles are finished in that order too: waiting for one first finishes
every handle started before it (their results or errors are kept in them).
At most MAX_REQUESTS (16) requests may be outstanding: starting another
first finishes the oldest.

Threads: a lock guards the bookkeeping (never held during a wait). A thread
that waits claims the handles it finishes; another thread waiting for one of
those sleeps until it is done. Waits run with the GIL released; with
libringd's progress thread (ringd.init's default) other threads can start
collectives while one waits, without it their calls wait for the wait.
"""

import atexit
import collections
import threading
import warnings

from . import _errors, _ringd, _tensor

_lock = threading.RLock()
_cond = threading.Condition(_lock)  # a handle finished
_comm = None          # _ringd.Comm while initialized
_config = None        # the _ringd.Config it was opened with
_pending = collections.deque()  # Handles started and not claimed by a waiter, oldest first
_closed_once = False  # shutdown() was called: say so in NotInitializedError
_gpu = None           # the CUDA device index this ring's torch tensors are on, once seen

_OPS = {"sum": _ringd.SUM, "avg": _ringd.AVG, "average": _ringd.AVG, "mean": _ringd.AVG}


class Handle:
    """A started collective. wait() blocks until it finishes (GIL released; bounded by the
    timeout setting) and returns its result or raises its ringd.Error; done() tells without
    blocking whether it has finished (False while another thread is inside a call that
    holds the communicator).

    An allreduce of CUDA memory is ordered on the caller's CUDA stream: wait() returns once
    the ring is done and that stream waits (on the device) for the result, so work queued
    on it afterwards sees the result, without the host waiting for the GPU (NCCL's way).
    wait(blocking=True) also makes the host wait until the result is in the tensor."""

    __slots__ = ("_req", "_finish", "_result", "_error", "_done", "_claimed", "op", "_sync")

    def __init__(self, req, finish, op, sync=None):
        self._req = req        # _ringd.Request: holds the buffers until finished
        self._finish = finish  # () -> the result, once the request succeeded
        self._result = None
        self._error = None
        self._done = False
        self._claimed = False  # a thread is finishing it
        self.op = op
        self._sync = sync      # CUDA memory: what to synchronize on for a blocking wait

    def _complete(self, blocking=False):
        """Wait for the request and keep the outcome (by the thread that claimed it,
        without _lock)."""
        try:
            self._req.wait(blocking=blocking)
            if not self._req.device_pending:
                self._sync = None  # the host has waited for the device
            self._result = self._finish()
        except _errors.NonFiniteError as e:
            e.tensor = self._finish()
            self._error = e
        except _errors.Error as e:
            self._error = e
        finally:
            with _cond:
                self._req = None
                self._finish = None
                self._done = True
                _cond.notify_all()

    def wait(self, blocking=False):
        """The result (or the collective's ringd.Error). blocking: for CUDA memory, also
        wait on the host until the device has written the result (without it the result
        is ordered on the caller's stream only)."""
        if not self._done:
            _finish_through(self, blocking)
        if blocking and self._sync is not None and self._error is None:
            _tensor.synchronize(self._sync)  # finished on its stream earlier
            self._sync = None
        if self._error is not None:
            raise self._error
        return self._result

    def done(self):
        if self._done:
            return True
        req = self._req
        return req is None or req.test()

    def __repr__(self):
        state = "done" if self._done else "pending"
        return "<ringd.Handle %s %s>" % (self.op, state)


def _claim_oldest():
    """With _lock held: take the oldest pending handle for this thread to finish."""
    h = _pending.popleft()
    h._claimed = True
    return h


def _finish_through(handle, blocking=False):
    """Finish the pending handles, oldest first, up to and including handle; or sleep
    until the thread that claimed it has finished it."""
    batch = []
    with _cond:
        if handle._done:
            return
        if not handle._claimed:
            while _pending:
                batch.append(_claim_oldest())
                if batch[-1] is handle:
                    break
    for h in batch:
        h._complete(blocking)
    with _cond:
        while not handle._done:  # another thread's wait, bounded by the timeout setting
            _cond.wait(1.0)


def _not_initialized(what):
    why = ("ringd.shutdown() was called; call ringd.init() again first" if _closed_once
           else "call ringd.init() first")
    return _errors.NotInitializedError("ringd.%s: ringd is not initialized: %s" % (what, why))


def _require(what):
    if _comm is None:
        raise _not_initialized(what)
    return _comm


def take_ring(what):
    """ringd.elastic: the process's communicator, with the handles started on it finished
    first (a failed ring's fail at once, and keep their error in the handle)."""
    with _cond:
        comm = _require(what)
        batch = list(_pending)
        for h in batch:
            h._claimed = True
        _pending.clear()
    for h in batch:
        h._complete()
    return comm


def replace_comm(old, new):
    """ringd.elastic: new is the process's communicator from here on (every call looks it up
    when it runs: the torch objects follow); old is closed."""
    global _comm
    with _cond:
        _comm = new
    old.close()


def _start(what, start, finish, sync=None):
    """Start a request (start() -> _ringd.Request) and return its Handle; with
    MAX_REQUESTS outstanding, finish the oldest first."""
    while True:
        oldest = None
        with _cond:
            comm = _require(what)
            if comm.live < _ringd.MAX_REQUESTS:
                try:
                    h = Handle(start(), finish, what, sync)
                    _pending.append(h)
                    return h
                except _errors.Error as e:
                    # libringd frees slots in start order: a later handle finished first
                    if e.status != "RING_ERR_NO_RESOURCE" or comm.live == 0:
                        raise
            if _pending:
                oldest = _claim_oldest()
            else:  # every outstanding one is being finished by another thread
                _cond.wait(1.0)
        if oldest is not None:
            oldest._complete()


# ---- settings, init, shutdown -------------------------------------------------------------

def _value_text(value):
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _load_config(overrides):
    cfg = _ringd.Config()
    cfg.load_env()
    # a thread inside libringd advances started requests while Python computes; a libringd
    # without the setting (older) simply has none
    try:
        if cfg.source("progress-thread") == "default":
            cfg.set("progress-thread", "on", "default")
    except _errors.Error:
        pass
    for key, value in overrides.items():
        name = key.replace("_", "-")
        try:
            cfg.set(name, _value_text(value))
        except _errors.ConfigError as e:
            raise _errors.ConfigError("ringd.init(%s=%r): %s" % (key, value, e.message),
                                      e.status, setting=name) from None
    # no launcher and no ring given: a ring of one, as the ringd program does
    if cfg.get("world-size") == "0" and cfg.get("rank") == "-1" and not cfg.get("peers"):
        cfg.set("world-size", "1", "default")
        cfg.set("rank", "0", "default")
        cfg.set("peers", "127.0.0.1:0", "default")
    cfg.validate()
    return cfg


# callables cfg -> None, or settings (peers...) that replace the launcher's rendezvous:
# ringd.torch adds one that meets through torch.distributed's store when it is up
_rendezvous_finders = []


def init(**overrides):
    """Join the ring, as the ringd program would: settings from RING_* variables and the
    launcher's (Open MPI, Slurm, torchrun, TF_CONFIG, a rendezvous), then the keyword
    overrides (codec="fp16", timeout="30s", world_size=2, ...; underscores are dashes).
    Blocks until the ring is connected (bounded by connect-timeout). A bad setting raises
    ringd.ConfigError naming it. Calling it again while initialized does nothing (and
    raises if given overrides). Defaults are libringd's (codec none: fp32 on the wire,
    exact; the ringd program's default is fp16), plus progress-thread on."""
    global _comm, _config
    with _lock:
        if _comm is not None:
            if overrides:
                raise _errors.ConfigError(
                    "ringd.init: already initialized (rank %d of %d); call ringd.shutdown() "
                    "before initializing with other settings" % (_comm.rank, _comm.size))
            return
        cfg = _load_config(overrides)
        for find in _rendezvous_finders:
            found = find(cfg)
            if found:
                cfg = _load_config(dict(overrides, **found))
                break
        _comm = _ringd.Comm(cfg)
        _config = cfg
        _set_gpu(None)
        local = cfg.launch["local_rank"]
        if local == 0 or (local < 0 and _comm.rank == 0):
            _warn_blas()


def _warn_blas():
    """ring-launch sets OPENBLAS_CORETYPE for its ranks; under torchrun, srun or mpirun
    nobody does, and an OpenBLAS older than the CPU runs generic kernels (torch's matrix
    products 4-5x slower). Said once per host (local rank 0), as a PerformanceWarning."""
    advice = _ringd.blas_advice()
    if advice is not None:
        warnings.warn("ringd: " + advice[1], _errors.PerformanceWarning, stacklevel=3)


def _detach():
    """Takes the ring out of use: (its communicator, the handles of the collectives
    started on it), or None when not initialized."""
    global _comm, _closed_once
    with _cond:
        if _comm is None:
            return None
        batch = list(_pending)
        for h in batch:
            h._claimed = True
        _pending.clear()
        comm, _comm = _comm, None  # no new collective from here on
        _closed_once = True
    return comm, batch


def shutdown():
    """Finish the started collectives (their errors stay in their handles), leave the ring
    and free it. Does nothing when not initialized. Runs at interpreter exit too."""
    taken = _detach()
    if taken is None:
        return
    comm, batch = taken
    for h in batch:
        h._complete()
    comm.close()  # after the other threads' waits have returned


atexit.register(shutdown)


def _abort():
    """shutdown() without finishing the started collectives first: closing the communicator
    cancels them, and their handles then raise (torch's ProcessGroup.abort()). A wait
    another thread is in still returns first (within the timeout)."""
    taken = _detach()
    if taken is None:
        return
    comm, batch = taken
    comm.close()
    for h in batch:
        h._complete()


def is_initialized():
    return _comm is not None


def rank():
    return _require("rank").rank


def size():
    return _require("size").size


def local_rank():
    """This peer's rank among those on its host, from the launcher (RING_LOCAL_RANK,
    OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK...); 0 in a ring of one; -1 when
    the launcher does not say."""
    comm = _require("local_rank")
    lr = _config.launch["local_rank"]
    if lr >= 0:
        return lr
    return 0 if comm.size == 1 else -1


def local_size():
    """The number of peers on this host from the launcher; 1 in a ring of one; 0 when the
    launcher does not say."""
    comm = _require("local_size")
    ls = _config.launch["local_size"]
    if ls > 0:
        return ls
    return 1 if comm.size == 1 else 0


def config(sources=False):
    """The effective settings: {name: value as text}, or {name: (value, source)} with
    sources=True (source: default, environment, launcher, api)."""
    with _lock:
        _require("config")
        names = _ringd.setting_names()
        if sources:
            return {n: (_config.get(n), _config.source(n)) for n in names}
        return {n: _config.get(n) for n in names}


def launcher():
    """What the launcher's variables said (ringd/launch.h's ring_launch_t, as a dict)."""
    with _lock:
        _require("launcher")
        return dict(_config.launch)


def stats():
    """What this peer has sent since init (ring_comm_get_stats), as a dict."""
    with _lock:
        return _require("stats").stats()


# ---- collectives ---------------------------------------------------------------------------

def _op_code(op, what):
    try:
        return _OPS[op]
    except (KeyError, TypeError):
        raise ValueError("ringd.%s: op=%r: expected 'sum' or 'avg'" % (what, op)) from None


def _exact(codec, what):
    if codec is None:
        return False
    if codec == "exact":
        return True
    raise ValueError("ringd.%s: codec=%r: per call it is None (the codec setting) or 'exact' "
                     "(the tensor's own dtype on the wire); the wire codec itself is a setting: "
                     "ringd.init(codec='fp16')" % (what, codec))


def _set_gpu(index):
    global _gpu
    _gpu = index


def _check_same_place(tensor, out, what):
    """out= must be where tensor is (before anything is queued)."""
    a, b = _tensor.where(tensor), _tensor.where(out)
    if a == b or (a.startswith("cuda") and b.startswith("cuda") and "cuda" in (a, b)):
        return
    raise ValueError("ringd.%s: the tensor is on %s, out= on %s: they must be on the same "
                     "device (allocate out like the tensor: torch.empty_like(tensor))"
                     % (what, a, b))


def _check_gpu(tensor, what):
    """One GPU per process: libringd's communicator takes device memory of the first GPU it
    is given only. Said here, naming both, for torch tensors (whose device is known)."""
    if not _tensor.is_torch(tensor):
        return None
    index = _tensor._index(tensor)
    if _gpu is not None and index != _gpu:
        raise _errors.InvalidError(
            "ringd.%s: the tensor is on cuda:%d, but this process's ring already moves CUDA "
            "tensors of cuda:%d: ringd takes one GPU per process (call "
            "torch.cuda.set_device(local_rank) before building the model, and keep its "
            "tensors there; or copy this one with .to('cuda:%d'))"
            % (what, index, _gpu, _gpu), "RING_ERR_INVALID")
    return index


def _allreduce_device(tensor, opc, exact, out, tensor_id):
    """allreduce_async of CUDA memory: started on the caller's stream (ringd/_tensor.py)."""
    if out is not None and out is not tensor:
        _check_same_place(tensor, out, "allreduce")
    if _tensor.is_torch(tensor) or not _tensor.has_cai(tensor):
        t = tensor if _tensor.is_torch(tensor) else _tensor._dlpack_cuda(tensor)
        index = _check_gpu(t, "allreduce")
    else:
        t, index = tensor, None
    send, stream = _tensor.as_device_buffer(t, "allreduce: tensor",
                                            writable=out is None or out is tensor)
    if out is None or out is tensor:
        result, recv = tensor, None
    else:
        result = out
        recv, _ = _tensor.as_device_buffer(out, "allreduce: out")
    h = _start("allreduce",
               lambda: _comm.allreduce_start(send, recv, opc, exact, tensor_id, stream),
               lambda: result, t if _tensor.is_torch(t) else result)
    if index is not None and _gpu is None:
        _set_gpu(index)
    return h


def allreduce_async(tensor, op="sum", codec=None, out=None, tensor_id=0):
    """Start an allreduce of tensor (float32, float16 or bfloat16; numpy, torch on the CPU
    or a CUDA device, or CUDA memory with __cuda_array_interface__), in place, or into out.
    The Handle's wait() returns the result tensor; for CUDA memory it is then ordered on
    the caller's CUDA stream (Handle.wait)."""
    opc = _op_code(op, "allreduce")
    exact = _exact(codec, "allreduce")
    if _tensor.is_device(tensor) or (out is not None and _tensor.is_device(out)):
        return _allreduce_device(tensor, opc, exact, out, tensor_id)
    send = _tensor.as_buffer(tensor, "allreduce: tensor")
    if out is None or out is tensor:
        result, recv = tensor, None
    else:
        result, recv = out, _tensor.as_buffer(out, "allreduce: out")
    return _start("allreduce",
                  lambda: _comm.allreduce_start(send, recv, opc, exact, tensor_id),
                  lambda: result)


def allreduce(tensor, op="sum", codec=None, out=None, tensor_id=0):
    """Allreduce tensor over every peer (sum or avg), in place or into out; returns the
    result. Bitwise identical on every peer. CUDA memory: the result is ordered on the
    caller's stream when this returns (Handle.wait)."""
    return allreduce_async(tensor, op, codec, out, tensor_id).wait()


def broadcast_async(tensor, root=0, tensor_id=0):
    """Start a broadcast of root's tensor into every peer's tensor (in place; any dtype,
    moved as bytes). The Handle's wait() returns the tensor. A CUDA torch tensor is staged
    through a host copy (made on its current stream; the result copied back on it)."""
    if _tensor.is_torch_cuda(tensor):
        _check_gpu(tensor, "broadcast")
        stage = _Staged(tensor)
        buf = _tensor.as_buffer(stage.host, "broadcast: tensor")
        return _start("broadcast", lambda: _comm.broadcast_start(buf, int(root), tensor_id),
                      lambda: stage.back(stage.host, tensor))
    buf = _tensor.as_buffer(tensor, "broadcast: tensor")
    return _start("broadcast",
                  lambda: _comm.broadcast_start(buf, int(root), tensor_id),
                  lambda: tensor)


def broadcast(tensor, root=0, tensor_id=0):
    """Every peer's tensor becomes root's, bit for bit; returns tensor."""
    return broadcast_async(tensor, root, tensor_id).wait()


class _Staged:
    """A CUDA torch tensor's collective through host memory: a copy to the host, made on
    the tensor's current stream (the copy waits for the work queued there), and the
    result's copy back made on that same stream whichever thread finishes the handle."""

    def __init__(self, tensor):
        torch = _tensor._torch()
        self.device = tensor.device
        self.stream = torch.cuda.current_stream(tensor.device)
        self.host = tensor.detach().to("cpu") if tensor.numel() else \
            torch.empty(tensor.shape, dtype=tensor.dtype)

    def back(self, host, dest):
        """host's values into dest (a CUDA tensor), or a new tensor on the device when dest
        is None; returns it."""
        torch = _tensor._torch()
        with torch.cuda.stream(self.stream):
            if dest is None:
                return host.to(self.device)
            dest.copy_(host)
            return dest


def _staged_out(tensor, out, what):
    if out is not None:
        _check_same_place(tensor, out, what)
        if not out.is_contiguous():
            raise ValueError("ringd.%s: out is not contiguous: pass a contiguous tensor" % what)


def _gather_shape(comm, tensor, sizes):
    world = comm.size
    shape = _tensor.shape_of(tensor)
    if sizes is None:
        if not shape:
            return (world,), None
        return (world * shape[0],) + shape[1:], None
    sizes = [int(s) for s in sizes]
    if len(sizes) != world:
        raise ValueError("ringd.allgather: sizes has %d entries for a ring of %d: one first-"
                         "dimension length per rank" % (len(sizes), world))
    rows, row_bytes = _tensor.row_count_and_bytes(tensor, "allgather: tensor (with sizes=)")
    me = comm.rank
    if rows != sizes[me]:
        raise ValueError("ringd.allgather: sizes[%d] (this rank) is %d, the tensor has %d rows"
                         % (me, sizes[me], rows))
    return (sum(sizes),) + shape[1:], [s * row_bytes for s in sizes]


def allgather_async(tensor, sizes=None, out=None, tensor_id=0):
    """Start an allgather: the peers' tensors, concatenated in rank order along the first
    dimension (a 0-d tensor gives shape (size,)). sizes: each rank's first-dimension length
    when they differ (allgatherv). The Handle's wait() returns the new tensor (or out)."""
    comm = _require("allgather")
    _tensor.refuse_cai(tensor, "allgather: tensor")
    _tensor.refuse_cai(out, "allgather: out")
    shape, counts = _gather_shape(comm, tensor, sizes)
    if _tensor.is_torch_cuda(tensor) or (out is not None and _tensor.is_torch_cuda(out)):
        _staged_out(tensor, out, "allgather")
        _check_gpu(tensor, "allgather")
        stage = _Staged(tensor)
        host_out = _tensor.empty(stage.host, shape)
        send = _tensor.as_buffer(stage.host, "allgather: tensor")
        recv = _tensor.as_buffer(host_out, "allgather: out")
        return _start("allgather", lambda: _comm.allgather_start(send, recv, counts, tensor_id),
                      lambda: stage.back(host_out, out))
    if out is None:
        out = _tensor.empty(tensor, shape)
    send = _tensor.as_buffer(tensor, "allgather: tensor")
    recv = _tensor.as_buffer(out, "allgather: out")
    result = out
    return _start("allgather", lambda: _comm.allgather_start(send, recv, counts, tensor_id),
                  lambda: result)


def allgather(tensor, sizes=None, out=None, tensor_id=0):
    """Every peer's tensor, concatenated in rank order along the first dimension."""
    return allgather_async(tensor, sizes, out, tensor_id).wait()


def reduce_scatter_async(tensor, op="sum", codec=None, out=None, tensor_id=0):
    """Start a reduce-scatter: tensor's first dimension is size * n; this rank gets block
    `rank` (n rows) of the sum (or avg) over the peers. The Handle's wait() returns it."""
    opc = _op_code(op, "reduce_scatter")
    exact = _exact(codec, "reduce_scatter")
    comm = _require("reduce_scatter")
    _tensor.refuse_cai(tensor, "reduce_scatter: tensor")
    _tensor.refuse_cai(out, "reduce_scatter: out")
    shape = _tensor.shape_of(tensor)
    if not shape or shape[0] % comm.size != 0:
        raise ValueError("ringd.reduce_scatter: the tensor's shape %r: its first dimension "
                         "must be a multiple of the world size (%d)" % (shape, comm.size))
    if _tensor.is_torch_cuda(tensor) or (out is not None and _tensor.is_torch_cuda(out)):
        _staged_out(tensor, out, "reduce_scatter")
        _check_gpu(tensor, "reduce_scatter")
        stage = _Staged(tensor)
        host_out = _tensor.empty(stage.host, (shape[0] // comm.size,) + tuple(shape[1:]))
        send = _tensor.as_buffer(stage.host, "reduce_scatter: tensor")
        recv = _tensor.as_buffer(host_out, "reduce_scatter: out")
        return _start("reduce_scatter",
                      lambda: _comm.reduce_scatter_start(send, recv, opc, exact, tensor_id),
                      lambda: stage.back(host_out, out))
    if out is None:
        out = _tensor.empty(tensor, (shape[0] // comm.size,) + tuple(shape[1:]))
    send = _tensor.as_buffer(tensor, "reduce_scatter: tensor")
    recv = _tensor.as_buffer(out, "reduce_scatter: out")
    result = out
    return _start("reduce_scatter",
                  lambda: _comm.reduce_scatter_start(send, recv, opc, exact, tensor_id),
                  lambda: result)


def reduce_scatter(tensor, op="sum", codec=None, out=None, tensor_id=0):
    """This rank's block of the reduction of tensor over the peers."""
    return reduce_scatter_async(tensor, op, codec, out, tensor_id).wait()


def barrier_async():
    """Start a barrier; the Handle's wait() returns None once every peer has entered it."""
    return _start("barrier", lambda: _comm.barrier_start(), lambda: None)


def barrier():
    """Return once every peer has called barrier()."""
    barrier_async().wait()
