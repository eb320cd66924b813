"""DistributedOptimizer in Horovod's shape, and the broadcasts that start
every peer from the same state.

Port a training script with:

    ringd.init()
    optimizer = ringd.torch.DistributedOptimizer(optimizer, model.named_parameters())
    ringd.torch.broadcast_parameters(model.state_dict(), root_rank=0)
    ringd.torch.broadcast_optimizer_state(optimizer, root_rank=0)

How it works: a hook on each parameter's gradient accumulator marks the
parameter ready when backward has produced its gradient. When every
parameter of a fusion bucket is ready, the bucket's gradients are copied
into its flat buffer and its allreduce starts (ringd's progress thread moves
it while backward goes on); buckets start strictly in index order, so every
peer issues the same allreduces in the same order. step() starts what is
left, waits, copies the averages back into .grad and runs the wrapped
optimizer.

Staleness S (Pipe-SGD, BytePS's staleness): after `warmup_steps` lockstep
steps, step t applies the average of step t-S while step t's allreduces are
still in flight, on S+1 sets of buffers. Every peer applies the same
averages in the same order, so parameters stay bitwise identical; the S
steps after the warm-up apply nothing (the pipeline fills).

A non-finite average (some peer's gradient held inf/NaN) skips that step's
update on every peer, as AMP's GradScaler does, and says so.

overlap_step=True (lockstep, opt-in): step() updates each bucket's
parameters as soon as its average lands, while later buckets are still on
the wire, so only the last bucket's update is not hidden behind
communication (DDP's overlapped optimizer). A non-finite average then skips
the update of its bucket and every later one; the earlier buckets' are done.
It is the same result as a whole step for optimizers whose update of a
parameter reads only that parameter's state (SGD, Adam, AdamW, RMSprop...),
not for ones that look at every gradient at once (LBFGS, or clipping
between backward and step: call synchronize() first, which turns it off for
that step).
"""
import time
import warnings

import torch

import ringd
from ._buckets import BREAK_MIN_BYTES, InFlight, plan_buckets


class Compression:
    """What the gradients travel as.

    default: the communicator's codec (ringd.init(codec=...), RING_CODEC);
    none:    fp32 whatever the codec (an exact call);
    fp16, bf16: that codec; when the communicator's codec is another one, the
             bucket itself is fp16/bf16 (Horovod's compression: the average
             comes back rounded to it)."""
    default = None
    none = "none"
    fp16 = "fp16"
    bf16 = "bf16"


_HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _call_mode(compression, dtype):
    """(bucket dtype, codec argument) for a compression choice."""
    if compression is None:
        return dtype, None
    if compression == Compression.none:
        return dtype, "exact"
    if compression not in _HALF:
        raise ValueError("compression must be ringd.torch.Compression.default, none, fp16 or "
                         "bf16, not %r" % (compression,))
    if ringd.config().get("codec") == compression or dtype != torch.float32:
        return dtype, None
    return _HALF[compression], None


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 bucket_bytes, staleness, warmup_steps, overlap_step):
        super(self.__class__, self).__init__(params)
        ringd_required("DistributedOptimizer")
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be >= 1, not %r"
                             % (backward_passes_per_step,))
        if staleness < 0 or warmup_steps < 0:
            raise ValueError("staleness and warmup_steps must be >= 0")
        if op not in ("avg", "sum"):
            raise ValueError("op must be 'avg' or 'sum', not %r" % (op,))
        self._names = _parameter_names(self.param_groups, named_parameters)
        params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        self._params = params
        self._op = op
        self._passes = backward_passes_per_step
        self._staleness = staleness
        self._warmup = warmup_steps
        self._overlap_step = bool(overlap_step)
        self._compression = compression
        self._bucket_bytes = bucket_bytes
        self._in_flight = InFlight()
        # until the first backward shows the order gradients come in: the reverse of
        # registration (backward runs the model backwards)
        self._make_buckets(list(reversed(params)))
        self._arrival = []
        self._step_id = 0
        self._synced = False
        self.allreduces = 0      # allreduces started (tests: fusion)
        self.skipped_steps = 0   # updates skipped for a non-finite average
        self._reset_backward()
        self._hooks = []
        for p in params:
            # the gradient accumulator's hook runs once p.grad holds this backward's gradient
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._make_hook(p))
            self._hooks.append(acc)

    # ---- buckets ----------------------------------------------------------------

    def _make_buckets(self, order, breaks=()):
        self._buckets = plan_buckets(order, self._bucket_bytes, breaks, BREAK_MIN_BYTES)
        self._bucket_of = {p: b for b in self._buckets for p, _, _ in b.params}
        self._modes = [_call_mode(self._compression, b.dtype) for b in self._buckets]
        # overlap_step: each bucket's parameters, group by group, in the groups' order
        self._bucket_groups = [[[p for p in g["params"] if self._bucket_of.get(p) is b]
                                for g in self.param_groups] for b in self._buckets]
        # one set of flat buffers per step in flight
        self._sets = [[torch.zeros(b.numel, dtype=self._modes[i][0])
                       for i, b in enumerate(self._buckets)]
                      for _ in range(self._staleness + 1)]
        # lockstep without a cast: .grad is a view into its bucket, so backward
        # accumulates there and the average lands there, no copies (DDP's
        # gradient_as_bucket_view); a .grad replaced by the caller is copied instead
        self._views = {}
        for b in self._buckets:
            if self._staleness == 0 and self._modes[b.index][0] == b.dtype:
                buf = self._sets[0][b.index]
                for p, off, n in b.params:
                    view = buf[off:off + n].view(p.shape)
                    if p.grad is not None:
                        view.copy_(p.grad)
                    p.grad = view
                    self._views[p] = view

    def _rebuild_buckets(self):
        """After the first step, as DDP does: buckets in the order gradients came, so
        the first bucket fills (and starts) early in backward; and a bucket also ends
        where backward computed for a while (over a tenth of its span) before the next
        gradient came, so it does not wait for that layer. Rank 0's plan, so that every
        peer has the same buckets."""
        index = {p: i for i, p in enumerate(self._params)}
        arrived = {p for p, _ in self._arrival}
        times = [t for _, t in self._arrival]
        span = times[-1] - times[0] if times else 0.0
        plan = []  # parameter index, and 1 where a bucket must start
        for k, (p, t) in enumerate(self._arrival):
            plan.append((index[p], int(k > 0 and t - times[k - 1] > 0.1 * span)))
        plan += [(index[p], 0) for p in reversed(self._params) if p not in arrived]
        plan_t = torch.tensor(plan, dtype=torch.int64).reshape(-1, 2)
        ringd.broadcast(plan_t, root=0)
        new = [self._params[i] for i in plan_t[:, 0].tolist()]
        breaks = {self._params[i] for i, brk in plan_t.tolist() if brk}
        self._make_buckets(new, breaks)

    # ---- backward: buckets fill and start ------------------------------------

    def _reset_backward(self):
        self._pending = [len(b.params) for b in self._buckets]
        self._passes_left = {}
        self._ready = set()
        self._next = 0

    def _make_hook(self, p):
        def hook(*unused):
            self._grad_ready(p)
        return hook

    def _grad_ready(self, p):
        left = self._passes_left.get(p, self._passes)
        if left > 1:
            self._passes_left[p] = left - 1
            return
        if p in self._ready:
            raise RuntimeError(
                "ringd.torch: the gradient of %s was produced again before step(): call "
                "step() after every %d backward pass(es), or pass backward_passes_per_step"
                % (self._names.get(p, "a parameter"), self._passes))
        self._ready.add(p)
        if self._step_id == 0:
            self._arrival.append((p, time.monotonic()))
        b = self._bucket_of[p]
        self._pending[b.index] -= 1
        try:
            self._launch_ready()
        except ringd.Error:
            # a peer failed (the start or a wait for room raised): this backward is
            # over, so that the next one raises the communicator's sticky error too,
            # not "produced again"
            self._reset_backward()
            raise

    def _launch_ready(self):
        # in index order only: every peer must start the same allreduces in the same order
        while self._next < len(self._buckets) and self._pending[self._next] == 0:
            self._launch(self._buckets[self._next])
            self._next += 1

    def _launch(self, b):
        buf = self._sets[self._step_id % (self._staleness + 1)][b.index]
        for p, off, n in b.params:
            if p.grad is None:  # not used in this backward: it contributes zeros
                buf[off:off + n].zero_()
            elif not self._is_view(p):
                buf[off:off + n].copy_(p.grad.detach().reshape(-1))
        self._in_flight.make_room()
        codec = self._modes[b.index][1]
        self._in_flight.add(self._step_id, ringd.allreduce_async(buf, op=self._op, codec=codec,
                                                                 tensor_id=b.index), b.index)
        self.allreduces += 1

    def _finish_backward(self):
        """Start the buckets backward did not fill (unused parameters count as zeros)."""
        for i in range(self._next, len(self._buckets)):
            self._pending[i] = 0
        self._launch_ready()

    # ---- step --------------------------------------------------------------

    def _apply(self, step_id):
        """Wait for step_id's averages and put them in .grad; False for a non-finite one."""
        finite = self._in_flight.wait_through(step_id)
        bufs = self._sets[step_id % (self._staleness + 1)]
        for b in self._buckets:
            self._apply_bucket(b, bufs[b.index])
        return finite

    def _apply_bucket(self, b, buf):
        """Put bucket b's average (in buf) in its parameters' .grad."""
        for p, off, n in b.params:
            if self._is_view(p):
                continue  # the average is in .grad already
            if p in self._views:
                p.grad = self._views[p]  # the caller replaced .grad: point it back
                continue
            avg = buf[off:off + n].view(p.shape)
            if p.grad is None:
                p.grad = avg.to(p.dtype).clone()
            else:
                p.grad.copy_(avg)

    def _step_overlapped(self):
        """Lockstep step() with overlap_step: each bucket's update as soon as its
        average lands. False when a bucket's average is not finite (its update and
        the later buckets' are skipped)."""
        bufs = self._sets[0]
        finite = True
        for b in self._buckets:
            if not self._in_flight.wait_tag(self._step_id, b.index):
                finite = False
                break
            self._apply_bucket(b, bufs[b.index])
            self._update_only(self._bucket_groups[b.index])
        self._in_flight.wait_through(self._step_id)
        return finite

    def _update_only(self, group_params):
        """The wrapped optimizer's step() over some parameters of each group."""
        saved = [g["params"] for g in self.param_groups]
        try:
            for g, params in zip(self.param_groups, group_params):
                g["params"] = params
            super(self.__class__, self).step()
        finally:
            for g, params in zip(self.param_groups, saved):
                g["params"] = params

    def _is_view(self, p):
        view = self._views.get(p)
        return view is not None and p.grad is not None and p.grad.data_ptr() == view.data_ptr()

    def synchronize(self):
        """Wait for this step's averages and put them in .grad (lockstep only), e.g. to
        clip them; step() then only updates."""
        if self._stale_now():
            raise RuntimeError("ringd.torch: synchronize() is for lockstep steps; with "
                               "staleness the average applied is an older step's")
        self._finish_backward()
        self._sync_finite = self._apply(self._step_id)
        self._synced = True

    def _stale_now(self):
        return self._staleness > 0 and self._step_id >= self._warmup

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        updated = False
        if self._synced:
            finite, apply_id = self._sync_finite, self._step_id
        elif self._overlap_step and not self._stale_now():
            apply_id = self._step_id
            try:
                self._finish_backward()
                finite = self._step_overlapped()
            except ringd.Error:
                self._reset_backward()
                raise
            updated = True
        else:
            apply_id = self._step_id - self._staleness if self._stale_now() else self._step_id
            try:
                self._finish_backward()
                # the S steps after the warm-up apply nothing: that average was applied
                finite = self._apply(apply_id) if apply_id >= min(self._warmup, self._step_id) \
                    else None
            except ringd.Error:
                # the ring failed (sticky): the next backward and step raise it again,
                # not a complaint about this step's gradients
                self._reset_backward()
                raise
        if finite and not updated:
            super(self.__class__, self).step()
        elif finite is not None and not finite:
            self.skipped_steps += 1
            warnings.warn("ringd.torch: step %d %s on every peer: the average gradient "
                          "is not finite (some peer's gradient held inf or NaN), as AMP's "
                          "GradScaler skips it" % (apply_id, "partly skipped (the buckets from "
                          "the first non-finite one on)" if updated else "skipped"),
                          RuntimeWarning, stacklevel=2)
        self._synced = False
        self._step_id += 1
        if self._step_id == 1 and not self._in_flight.steps():
            self._rebuild_buckets()
        self._reset_backward()
        return loss

    def finish(self):
        """Wait for every allreduce still in flight (stale steps' included, not applied):
        call it before ringd.shutdown()."""
        for s in self._in_flight.steps():
            self._in_flight.wait_through(s)

    def zero_grad(self, set_to_none=False):
        if self._ready and not self._synced and self._next < len(self._buckets):
            warnings.warn("ringd.torch: zero_grad() with gradients not yet averaged: call "
                          "step() first", RuntimeWarning, stacklevel=2)
        super(self.__class__, self).zero_grad(set_to_none=set_to_none)


def ringd_required(what):
    if not ringd.is_initialized():
        raise ringd.NotInitializedError("%s: call ringd.init() first" % what)


def _parameter_names(param_groups, named_parameters):
    all_params = [p for g in param_groups for p in g["params"]]
    if named_parameters is None:
        return {p: "parameter %d" % i for i, p in enumerate(all_params)}
    named = list(named_parameters)
    if any(not isinstance(x, tuple) or len(x) != 2 for x in named):
        raise ValueError("named_parameters must be (name, parameter) pairs, as "
                         "model.named_parameters() gives")
    names = {}
    for name, p in named:
        if p in names:
            raise ValueError("parameter %s appears twice in named_parameters (also as %s)"
                             % (name, names[p]))
        names[p] = name
    missing = [i for i, p in enumerate(all_params) if p not in names]
    if missing:
        raise ValueError("%d of the optimizer's parameters are not in named_parameters (the "
                         "first is parameter %d of its groups): pass model.named_parameters() "
                         "of the model the optimizer trains" % (len(missing), missing[0]))
    return names


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.default,
                         backward_passes_per_step=1, op="avg", bucket_bytes=25 << 20,
                         staleness=0, warmup_steps=None, overlap_step=False):
    """Wrap a torch.optim optimizer so that step() applies the average of every
    peer's gradients (see the module's doc). The result is an instance of the
    optimizer's own class (LR schedulers accept it), with its param_groups.

    compression: Compression.default (the communicator's codec), none, fp16, bf16.
    backward_passes_per_step: backward passes accumulated locally per step.
    op: "avg" (default) or "sum".
    bucket_bytes: the fusion threshold (default 25 MiB, as DDP's bucket_cap_mb).
    staleness: S >= 0; step t applies step t-S's average (0: lockstep).
    warmup_steps: lockstep steps before staleness starts (default: S).
    overlap_step: update each bucket's parameters as soon as its average lands
        (lockstep steps; see the module's doc for what it assumes of the optimizer).
    """
    if warmup_steps is None:
        warmup_steps = staleness
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, bucket_bytes, staleness, warmup_steps, overlap_step)


def broadcast_parameters(params, root_rank=0):
    """Overwrite params (a state_dict, named_parameters() or a list of tensors) with
    root_rank's values, bit for bit."""
    ringd_required("broadcast_parameters")
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = [x if isinstance(x, tuple) else ("tensor %d" % i, x)
                 for i, x in enumerate(params)]
    in_flight = InFlight()
    for i, (name, t) in enumerate(items):
        if not torch.is_tensor(t):
            raise TypeError("broadcast_parameters: %s is a %s, not a tensor"
                            % (name, type(t).__name__))
        if not t.is_contiguous():
            raise ValueError("broadcast_parameters: %s is not contiguous" % name)
        in_flight.make_room()
        in_flight.add(0, ringd.broadcast_async(t.detach(), root=root_rank, tensor_id=i))
    in_flight.wait_through(0)


def broadcast_object(obj, root_rank=0):
    """root_rank's obj (anything torch.save takes) on every peer."""
    import io
    ringd_required("broadcast_object")
    if ringd.rank() == root_rank:
        data = io.BytesIO()
        torch.save(obj, data)
        payload = torch.frombuffer(bytearray(data.getvalue()), dtype=torch.uint8)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    ringd.broadcast(length, root=root_rank)
    if ringd.rank() != root_rank:
        payload = torch.empty(int(length[0]), dtype=torch.uint8)
    ringd.broadcast(payload, root=root_rank)
    if ringd.rank() == root_rank:
        return obj
    return torch.load(io.BytesIO(payload.numpy().tobytes()))


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Give every peer root_rank's optimizer state (momentum buffers, step counts,
    learning rates)."""
    state = broadcast_object(optimizer.state_dict(), root_rank)
    if ringd.rank() != root_rank:
        optimizer.load_state_dict(state)
