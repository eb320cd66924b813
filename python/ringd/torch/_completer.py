"""Turns ringd handles into torch.futures.Future objects.

One waiter thread waits for the handles in the order they started (ringd
finishes requests in that order; its waits release the GIL). It never runs
a callback: it hands each outcome to a runner thread, which completes the
future and so runs the callbacks attached with then().

A callback may start a collective and wait for its future (PyTorch's
PowerSGD hook does): a runner that waited on its own queue would wait on
itself. So the futures of collectives started inside a callback run by
runner d are completed by runner d+1, and so on. Each runner completes its
futures one at a time, in the order they started, so every peer runs the
callbacks, and starts the collectives they start, in the same order. The
callbacks of collectives a backward pass started (DDP's buckets) run once
the pass has started all of its own, at its end: run during the pass, they
would start theirs between the pass's at points that depend on timing.

A failed collective completes its future with an error torch's C++ side
sees as one (torch 1.13's set_exception stores the exception as the value,
which DDP then reads as a tensor: a crash), and the first ringd.Error is
kept. Inside a backward pass that started collectives (DDP's reducer, a
comm hook) the failure must reach the user as the ringd.Error itself, with
its peer_rank, and DDP must still finish its backward (else its next step
trips an internal assert): there a failed collective completes its future
with its unreduced buffer, and a final callback of the backward, which runs
after DDP's, raises the error (raise_failure_at_end_of_backward).

CUDA tensors: the future is torch's CUDA-aware one (Future(devices=[d])), and
its value is set with the stream the collective was started on as the current
stream, after the handles were waited for on it (ringd orders an allreduce's
result on that stream): torch records an event there, and whoever waits on
the future (wait(), value(), then()'s callbacks, DDP) has its own current
stream wait for that event, so the tensors are ready in stream order without
the host waiting for the GPU. A failed one gets set_exception.
"""
import queue
import threading
import time
import warnings

import torch

import ringd
from .. import _runtime

MAX_DEPTH = 8  # callbacks that start collectives, nested this deep

_lock = threading.Condition()
_waiting = queue.Queue()   # items whose handles are not yet waited for
_waiter = None
_runners = []              # _Runner per depth
_outstanding = 0           # items not yet completed
_failure = None            # (the first ringd.Error a collective raised, its communicator)
_local = threading.local()  # .depth: the runner depth of this thread (0: not a runner)


class _Failed:
    """The value a failed collective completes its first future with."""

    def __init__(self, error):
        self.error = error


def _unwrap(fut):
    value = fut.value()
    if isinstance(value, _Failed):
        raise value.error
    return value


class _Runner:
    def __init__(self, depth):
        self.depth = depth
        self.queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="ringd-callbacks-%d" % depth,
                                       daemon=True)
        self.thread.start()

    def _run(self):
        global _outstanding
        _local.depth = self.depth + 1
        while True:
            item = self.queue.get()
            if item is None:
                return
            source, value, held, stream = item
            if held:
                _hold_while_collecting()
            try:
                if stream is None:
                    source.set_result(value)  # runs then()'s callbacks here
                elif isinstance(value, _Failed):
                    source.set_exception(value.error)
                else:
                    with torch.cuda.stream(stream):  # the event is recorded on it
                        source.set_result(value)
            except BaseException:  # noqa: B902 - a callback's error is its future's
                pass
            with _lock:
                _outstanding -= 1
                _lock.notify_all()


def _keep_failure(error):
    """Keep the ring's first error, with the communicator it broke (a ring opened later by
    ringd.init() starts clean)."""
    global _failure
    with _lock:
        if _failure is None or _failure[1] is not _runtime._comm:
            _failure = (error, _runtime._comm)


def _outcome(handles, value, on_done, soft):
    """Wait for handles; the value to complete the future with (soft: even on failure,
    which is then only kept, for the backward pass to raise)."""
    try:
        nonfinite = False
        for h in handles:
            try:
                h.wait()
            except ringd.NonFiniteError:
                nonfinite = True  # every peer has the same inf/NaN: pass it on
        if nonfinite:
            warnings.warn("ringd: a gradient average is not finite (some peer's gradient "
                          "held inf or NaN); AMP's GradScaler skips such a step",
                          RuntimeWarning)
        return on_done() if on_done is not None else value
    except BaseException as e:  # noqa: B902 - handed to whoever waits on the future
        if isinstance(e, ringd.Error):
            _keep_failure(e)
            if soft:
                return _value_anyway(value, on_done)
        return _Failed(e)


def _value_anyway(value, on_done):
    """A failed collective's value for a soft future (DDP reads it as a tensor: never None)."""
    try:
        return on_done() if on_done is not None else value
    except BaseException:  # noqa: B902 - the failure is kept; any tensor will do
        return value


def _wait_loop():
    while True:
        handles, source, value, on_done, depth, soft, stream = _waiting.get()
        if stream is None:
            result = _outcome(handles, value, on_done, soft)
        else:
            with torch.cuda.stream(stream):  # on_done's copies too, in the caller's order
                result = _outcome(handles, value, on_done, soft)
        # started by a backward pass (soft): its callbacks wait for the pass's end
        _runner(depth).queue.put((source, result, soft and depth == 0, stream))


def _runner(depth):
    with _lock:
        while len(_runners) <= depth:
            _runners.append(_Runner(len(_runners)))
        return _runners[depth]


def cuda_device(value):
    """The CUDA device of the first CUDA tensor in value (a tensor, or a list or tuple of
    them, nested), or None."""
    if isinstance(value, torch.Tensor):
        return value.device if value.device.type == "cuda" else None
    if isinstance(value, (list, tuple)):
        for v in value:
            d = cuda_device(v)
            if d is not None:
                return d
    return None


def _source_for(value):
    """(the future to complete, the stream to complete it on: None for CPU values)."""
    dev = cuda_device(value)
    if dev is None:
        return torch.futures.Future(), None
    return torch.futures.Future(devices=[dev]), torch.cuda.current_stream(dev)


def future_of(handles, value, on_done=None):
    """A Future that completes with `value` (or on_done()'s result) once every handle is
    done, or with the error one of them raised (see the module's doc for backward)."""
    global _waiter, _outstanding
    depth = getattr(_local, "depth", 0)
    if depth >= MAX_DEPTH:
        raise RuntimeError("ringd.torch: future callbacks nest collectives more than %d deep"
                           % MAX_DEPTH)
    with _lock:
        if _waiter is None or not _waiter.is_alive():
            _waiter = threading.Thread(target=_wait_loop, name="ringd-futures", daemon=True)
            _waiter.start()
        _outstanding += 1
        soft = bool(_collecting)
    source, stream = _source_for(value)
    fut = source.then(_unwrap)
    _waiting.put((list(handles), source, value, on_done, depth, soft, stream))
    return fut


def start_or_fail(start):
    """start() -> handles; when it raises the ring's error inside a backward pass that
    collects failures, no handles: the failure is kept, and the future of nothing gets its
    value at once (the backward raises the failure at its end). Elsewhere it is raised."""
    try:
        return start()
    except ringd.Error as e:
        if not _collecting:
            raise
        _keep_failure(e)
        return []


def settle(timeout):
    """Wait (at most timeout seconds) until every future handed out is completed."""
    deadline = time.monotonic() + timeout
    with _lock:
        while _outstanding > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _lock.wait(min(left, 0.5))
    return True


_collecting = set()  # threads in a backward pass whose end raises a failure
_released = set()    # of those, the ones whose callbacks were let go before the end


def raise_failure_at_end_of_backward():
    """Called while backward starts a collective: make this backward pass raise the ring's
    failure, if one happens, once it and DDP's own end of backward have run (see the
    module's doc). Outside a backward pass: nothing."""
    me = threading.get_ident()
    if me in _collecting or getattr(_local, "depth", 0):
        return
    try:
        torch.autograd.Variable._execution_engine.queue_callback(lambda: _settle_backward(me))
    except RuntimeError:
        return  # not inside a backward pass
    with _lock:
        _collecting.add(me)


def _hold_while_collecting():
    """Hold the callbacks of a collective a backward pass started until the pass ends (its
    first final callback): a callback may start collectives (PowerSGD's), and run during
    backward it would start them between the pass's own at a point that depends on
    timing, so peers would start them in different orders. At the end of the pass they
    run in the order the pass started its collectives, on every peer. A future waited for
    inside the pass itself (not DDP's way) is released after the ring's timeout."""
    deadline = time.monotonic() + _settle_timeout()
    with _lock:
        while _collecting - _released and time.monotonic() < deadline:
            _lock.wait(0.5)
        if _collecting - _released:
            _released.update(_collecting)  # once per pass, not once per callback
            warnings.warn("ringd.torch: a future of a collective started in backward was "
                          "waited for inside the same backward pass; its callbacks now run "
                          "before the pass ends, and collectives they start may be ordered "
                          "differently on other peers", RuntimeWarning)


def _settle_backward(thread):
    # queued at the first collective of the pass, so before DDP's end of backward (queued
    # when its last bucket starts): wait for every future, then raise after DDP's
    with _lock:
        _collecting.discard(thread)
        _released.discard(thread)
        _lock.notify_all()  # the held callbacks run now
    settle(_settle_timeout())
    torch.autograd.Variable._execution_engine.queue_callback(_raise_failure)


def _raise_failure():
    if _failure is not None and _failure[1] is _runtime._comm:
        raise _failure[0]


def _settle_timeout():
    """Every collective ends within the ring's timeout; twice that and some slack."""
    try:
        text = str(ringd.config().get("timeout", "60s"))
        scale = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
        for unit in ("ms", "s", "m", "h"):
            if text.endswith(unit):
                return 2 * float(text[:-len(unit)]) * scale[unit] + 10
        return 2 * float(text) + 10
    except (ValueError, ringd.Error):
        return 130.0
