"""Bounded-staleness (SSP) and asynchronous training of a PyTorch model through
libringd's SSP session (include/ringd/ssp.h): the same engine, rounds and
semantics as ``ringd --mode bounded|async``.

    ringd.init()
    ssp = ringd.torch.SSP(model, staleness=4, lr=0.05, momentum=0.9)
    for x, y in loader:
        with ssp.step():                 # waits for the bound, loads the parameters
            F.cross_entropy(model(x), y).backward()
        # on leaving: the gradient goes to the rounds; the model's view takes it at once
        if ssp.stopped:
            break
    ssp.finish()                         # every peer's steps applied: identical everywhere
    ssp.close()

What it does: the model's float32 parameters are made views of one flat
buffer, the session's parameter buffer, so ``wait`` writes the step's
parameters straight into the model; their ``.grad`` are views of a flat
gradient buffer that ``push`` hands over. The update (SGD with momentum and
weight decay, PyTorch's) is applied by the session on every peer to the
average of each round, so do not step a torch optimizer as well.

A ``.grad`` that is None at ``push`` (a parameter this step did not use, or
``zero_grad()``, which sets None by default since torch 2.0) contributes
zeros, as DDP's unused parameters do: every peer still pushes the whole
buffer, so the peers stay in step. A ``.grad`` that backward made anew (after
such a ``zero_grad()``) is copied into the buffer; ``wait`` makes every
``.grad`` the buffer's view again.

stop_at_steps=K: every peer stops once all peers' steps add up to K (a shared
budget: fast peers train on while a slow one is behind, as asynchronous SGD
does); the loop sees ``ssp.stopped``.

staleness=S: a peer starts step c only when every peer's steps below c-S
are in its parameters; 0 is lockstep (one allreduce per step, bit for bit),
None is async (no bound). fresh_wait: seconds a step may wait beyond the bound
for its peers' previous steps when they are about to land (None: auto, the
recent step time; 0: never; ringd --fresh-wait); such a wait ends once a
round says a peer it waits for is late, its step still computing after
fresh_late times its recent step time (default 1.25, a jittered step; 0: wait
out fresh_wait; ringd --fresh-late). round_gather: seconds from its
recent step time within which a peer's step counts as about to land, so a
round carrying some peers' steps waits once when all the others' are, and
in-phase steps travel in one allreduce (None: auto, a quarter of the step time; 0: never;
ringd --round-gather). warmup_steps=K runs the
first K steps in lockstep; in them a step still computing after warmup_late
times its recent step time (default 1.5; 0: wait, as lockstep does; ringd
--warmup-late) is left out of its round and its gradient dropped (in a bounded
session the round applies the mean of the others' steps), so a transient straggler does not
hold every peer. Rank 0's parameters are
broadcast to every peer before the session opens. While the session is open
its engine owns the communicator: other ringd collectives raise until close().

CUDA parameters (all on one device) are staged: the session's buffers stay in
(page-locked) host memory, the model's parameters and gradients are views of
flat buffers on its device, and each step copies the parameters to the device
after ``wait`` and the gradient to the host before ``push`` (one copy each way
per step; libringd's SSP session takes host memory only). ``snapshot()``
returns a host tensor.
"""
import contextlib

import torch

import ringd
from .. import _ringd, _runtime
from .._tensor import as_buffer


class SSP:
    """A bounded-staleness session over a model's parameters (see the module)."""

    def __init__(self, model, staleness=4, lr=0.01, momentum=0.9, weight_decay=0.0,
                 warmup_steps=0, total_steps=0, lr_schedule="constant", update="sum",
                 momentum_compensation=True, stale_lr_scale=False, staleness_scale=False,
                 delay_compensation=0.0, round_idle=None, stop_at_steps=0, timeout=600.0,
                 broadcast=True, fresh_wait=None, warmup_late=1.5, round_gather=None,
                 fresh_late=1.25):
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ringd.InvalidError("ringd.torch.SSP: the model has no trainable parameters")
        dev = params[0].device
        for p in params:
            if p.dtype != torch.float32 or p.device != dev or dev.type not in ("cpu", "cuda"):
                raise ringd.InvalidError(
                    "ringd.torch.SSP: every parameter must be a float32 tensor, all on the CPU "
                    "or all on one CUDA device (found %s on %s, the first on %s): the session "
                    "trains one flat float32 buffer" % (p.dtype, p.device, dev))
        comm = _runtime._require("torch.SSP")
        total = sum(p.numel() for p in params)
        # the session's buffers (host memory); on CUDA the model's are flat buffers on its
        # device, copied to and from these at each step (see the module's doc)
        self._device = dev if dev.type == "cuda" else None
        pin = self._device is not None
        self._flat = torch.empty(total, dtype=torch.float32, pin_memory=pin)
        self._grad = torch.zeros(total, dtype=torch.float32, pin_memory=pin)
        self._pflat = self._flat if not pin else torch.empty(total, dtype=torch.float32,
                                                             device=dev)
        self._pgrad = self._grad if not pin else torch.zeros(total, dtype=torch.float32,
                                                             device=dev)
        self._params = params
        self._grad_views = []
        off = 0
        with torch.no_grad():
            for p in params:
                n = p.numel()
                self._pflat[off:off + n].copy_(p.reshape(-1))
                p.data = self._pflat[off:off + n].view_as(p)
                self._grad_views.append(self._pgrad[off:off + n].view_as(p))
                p.grad = self._grad_views[-1]
                off += n
            self._to_host(self._flat, self._pflat)
        if broadcast:
            ringd.broadcast(self._flat, root=0)  # every peer starts from rank 0's weights
            self._to_device(self._pflat, self._flat)
        self.timeout = float(timeout)
        self.last = None        # what wait said about the current step (a dict)
        self.stopped = False    # the peers agreed to stop (or request_stop was called)
        self._open_step = False
        self._session = _ringd.SSP(
            comm, as_buffer(self._flat, "ringd.torch.SSP: parameters"),
            staleness=-1 if staleness is None else int(staleness), lr=float(lr),
            momentum=float(momentum), weight_decay=float(weight_decay),
            warmup_steps=int(warmup_steps), total_steps=int(total_steps),
            lr_schedule=lr_schedule, update=update,
            momentum_compensation=bool(momentum_compensation),
            stale_lr_scale=bool(stale_lr_scale), staleness_scale=bool(staleness_scale),
            delay_compensation=float(delay_compensation),
            round_idle=-1.0 if round_idle is None else float(round_idle),
            stop_at_steps=int(stop_at_steps),
            fresh_wait=-1.0 if fresh_wait is None else float(fresh_wait),
            warmup_late=float(warmup_late),
            round_gather=-1.0 if round_gather is None else float(round_gather),
            fresh_late=float(fresh_late))

    def _to_host(self, host, dev):
        if self._device is not None:
            host.copy_(dev)  # waits for the device: the session reads it next

    def _to_device(self, dev, host):
        if self._device is not None:
            with torch.no_grad():
                dev.copy_(host)  # before the session writes host again (its next wait)

    def _check_views(self):
        # p.data = ... or an optimizer's param replacement would detach a parameter
        for p in self._params[:1] + self._params[-1:]:
            if p.data_ptr() < self._pflat.data_ptr() or \
               p.data_ptr() >= self._pflat.data_ptr() + self._pflat.numel() * 4:
                raise ringd.InvalidError(
                    "ringd.torch.SSP: a parameter no longer lives in the session's buffer "
                    "(was p.data replaced?): make the session after such changes")

    def wait(self):
        """Block until the next step may start; the model then holds its parameters.
        Returns False when the peers agreed to stop (then call finish())."""
        try:
            self.last = self._session.wait(self.timeout)
        except ringd.CanceledError:
            self.stopped = True
            return False
        self._to_device(self._pflat, self._flat)
        self._pgrad.zero_()
        self._attach_grads()
        self._open_step = True
        return True

    def _attach_grads(self):
        """Every .grad the flat gradient buffer's view again (zero_grad() set it to None)."""
        for p, view in zip(self._params, self._grad_views):
            if p.grad is None or p.grad.data_ptr() != view.data_ptr():
                p.grad = view

    def push(self):
        """Hand over the gradient in the parameters' .grad: the flat gradient buffer, where
        a .grad backward made anew is copied and one that is None counts as zeros (see the
        module's doc)."""
        self._check_views()
        with torch.no_grad():
            for p, view in zip(self._params, self._grad_views):
                grad = p.grad
                if grad is None:
                    view.zero_()  # not used in this step
                elif grad.data_ptr() != view.data_ptr():
                    view.copy_(grad.to_dense() if grad.is_sparse else grad)
            self._to_host(self._grad, self._pgrad)
        self._session.push(as_buffer(self._grad, "ringd.torch.SSP: gradient"))
        self._attach_grads()
        self._open_step = False

    @contextlib.contextmanager
    def step(self):
        """``with ssp.step(): loss.backward()`` - waits on entry, pushes on a clean exit.
        When the peers have stopped, the body still runs once more but nothing is
        pushed, and ``ssp.stopped`` is True: break out of the loop."""
        ready = self.wait()
        yield self.last if ready else None
        if ready:
            self.push()

    def steps(self, limit=None):
        """Iterate over steps: ``for info in ssp.steps(n): ...backward()``; ends when the
        peers stop, or after limit steps."""
        done = 0
        while limit is None or done < limit:
            if not self.wait():
                return
            yield self.last
            self.push()
            done += 1

    def request_stop(self):
        """Ask every peer to stop after its current step."""
        self._session.request_stop()

    def finish(self, timeout=None):
        """Serve rounds until every peer is done; the model then holds the final
        parameters, bitwise the same on every peer."""
        t = self.timeout if timeout is None else float(timeout)
        self._session.finish(t)
        self._to_device(self._pflat, self._flat)
        self._open_step = False

    def snapshot(self):
        """A copy of the master parameters as of the last applied round (a flat tensor),
        e.g. to evaluate off the critical path (a host tensor, CUDA parameters too)."""
        out = torch.empty_like(self._flat)
        self._session.read(as_buffer(out, "ringd.torch.SSP.snapshot"))
        return out

    def load_flat(self, model, flat):
        """Copy a flat snapshot into another model of the same architecture."""
        off = 0
        with torch.no_grad():
            for p in (q for q in model.parameters() if q.requires_grad):
                n = p.numel()
                p.copy_(flat[off:off + n].view_as(p))
                off += n

    def stats(self):
        return self._session.stats()

    @property
    def closed(self):
        return self._session.closed

    def close(self):
        """Free the session; the communicator is ringd's again."""
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
