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
import contextlib
import io
import re
import sys
import time
import warnings

import torch

import ringd
from .. import _objects
from ._buckets import BREAK_MIN_BYTES, InFlight, plan_buckets

# the tensor id of the allreduce of which parameters each peer used (the buckets' ids are
# their indexes)
USED_TENSOR_ID = 0xFFFF0001


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
                 bucket_bytes, staleness, warmup_steps, overlap_step, find_unused_parameters):
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
        self._find_unused = bool(find_unused_parameters)
        self._index = {p: i for i, p in enumerate(params)}
        self._compression = compression
        self._bucket_bytes = bucket_bytes
        self._in_flight = InFlight()
        # until the first backward shows the order gradients come in: the reverse of
        # registration (backward runs the model backwards)
        self._make_buckets(list(reversed(params)))
        self._arrival = []
        self._planned = False    # the bucket plan is final (rebuilt, or loaded)
        self._plan = None        # that plan (state_dict): None before the first step
        self._step_id = 0
        self._synced = False
        self._skip_sync = False
        # per set of buffers: which parameters some peer produced a gradient for
        self._used_sets = [None] * (self._staleness + 1)
        self.allreduces = 0      # allreduces started (tests: fusion)
        self.skipped_steps = 0   # updates skipped for a non-finite average
        self._reset_backward()
        self._hooks = []
        # a hook that runs once p.grad holds this backward's gradient: torch 2.1+ has one
        # on the tensor; before, it goes on the gradient accumulator (kept alive here)
        self._hook_api = "post_accumulate_grad" if hasattr(
            torch.Tensor, "register_post_accumulate_grad_hook") else "grad_accumulator"
        for p in params:
            if self._hook_api == "post_accumulate_grad":
                self._hooks.append(p.register_post_accumulate_grad_hook(self._make_hook(p)))
            else:
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
        # on the bucket's device: CUDA gradients are flattened, allreduced (device memory,
        # on the backward pass's stream) and unflattened on their GPU
        self._sets = [[torch.zeros(b.numel, dtype=self._modes[i][0], device=b.device)
                       for i, b in enumerate(self._buckets)]
                      for _ in range(self._staleness + 1)]
        # lockstep without a cast: once a step has put the average in .grad, .grad is a
        # view into its bucket, so the next backward accumulates there and the average
        # lands there, no copies (DDP's gradient_as_bucket_view); a .grad that is not
        # the view (set to None by zero_grad, replaced by the caller) is copied instead
        self._views = {}
        for b in self._buckets:
            if self._staleness == 0 and self._modes[b.index][0] == b.dtype:
                buf = self._sets[0][b.index]
                for p, off, n in b.params:
                    view = buf[off:off + n].view(p.shape)
                    if p.grad is not None and not p.grad.is_sparse:
                        view.copy_(p.grad)
                        p.grad = view
                    self._views[p] = view
        self._launched = {}  # bucket index -> [(p, its .grad, its version)] at the start
        self._launched_grads = {}

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
        self._apply_plan(plan_t.tolist())

    def _apply_plan(self, plan):
        """Buckets from a plan: [parameter index, 1 where a bucket must start] in the
        order gradients are expected (rank 0's, or a checkpoint's)."""
        try:
            order = [int(i) for i, _ in plan]
            breaks = {self._params[int(i)] for i, brk in plan if brk}
        except (TypeError, ValueError, IndexError):
            order = None
        if order is None or sorted(order) != list(range(len(self._params))):
            raise ValueError("ringd.torch: the bucket plan in this state (a checkpoint's?) "
                             "is not one of this optimizer's %d parameters: load the state "
                             "of the same model and parameter groups" % len(self._params))
        self._make_buckets([self._params[i] for i in order], breaks)
        self._plan = [[int(i), int(brk)] for i, brk in plan]
        self._planned = True

    # ---- backward: buckets fill and start ------------------------------------

    def _reset_backward(self):
        self._pending = [len(b.params) for b in self._buckets]
        self._passes_left = {}
        self._ready = set()
        self._touched = set()  # parameters backward produced a gradient for (any pass)
        self._after_backward = {}  # p -> (.grad, its version) when its hook last ran
        self._next = 0
        self._arrival = []     # (first step only) when each gradient came

    def _make_hook(self, p):
        def hook(*unused):
            self._grad_ready(p)
        return hook

    def _grad_ready(self, p):
        self._touched.add(p)
        # what backward left in .grad: a bucket that starts only in step() (it holds a
        # parameter no backward used) checks nothing changed it since
        if p.grad is not None:
            self._after_backward[p] = (p.grad, p.grad._version)
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
        except BaseException:
            # a peer failed (the start or a wait for room raised), or a gradient could
            # not go into its bucket: this backward is over, so that the next one raises
            # the same error again, not "produced again"
            self._reset_backward()
            raise

    def _launch_ready(self):
        # in index order only: every peer must start the same allreduces in the same order
        while self._next < len(self._buckets) and self._pending[self._next] == 0:
            self._launch(self._buckets[self._next])
            self._next += 1

    def _launch(self, b):
        buf = self._sets[self._step_id % (self._staleness + 1)][b.index]
        self._check_since_backward(b)
        for p, off, n in b.params:
            if p.grad is None:  # not used in this backward: it contributes zeros
                buf[off:off + n].zero_()
            elif p.grad.is_sparse:  # an embedding's: it travels dense (Horovod's sparse_as_dense)
                buf[off:off + n].copy_(p.grad.detach().to_dense().reshape(-1))
            elif not self._is_view(p):
                buf[off:off + n].copy_(p.grad.detach().reshape(-1))
        # what .grad was when its allreduce started: a change before step() is a mistake
        # (clipping without synchronize(): .grad may be the buffer on the wire)
        self._launched[b.index] = [(p, p.grad, None if p.grad is None else p.grad._version)
                                   for p, _, _ in b.params]
        self._in_flight.make_room()
        codec = self._modes[b.index][1]
        stream = torch.cuda.current_stream(buf.device) if buf.is_cuda else None
        self._in_flight.add(self._step_id, ringd.allreduce_async(buf, op=self._op, codec=codec,
                                                                 tensor_id=b.index), b.index,
                            stream)
        self.allreduces += 1

    def _finish_backward(self):
        """Start the buckets backward did not fill (unused parameters count as zeros), and
        the allreduce that tells which parameters some peer produced a gradient for."""
        for i in range(self._next, len(self._buckets)):
            self._pending[i] = 0
        self._launch_ready()
        used = torch.tensor([1.0 if p in self._touched else 0.0 for p in self._params])
        if self._find_unused:
            self._in_flight.make_room()
            self._in_flight.add(self._step_id, ringd.allreduce_async(
                used, op="sum", codec="exact", tensor_id=USED_TENSOR_ID), "used")
        else:
            used.fill_(1.0)  # every parameter counts as used somewhere (DDP's default)
        self._used_sets[self._slot()] = used

    def _slot(self, step_id=None):
        return (self._step_id if step_id is None else step_id) % (self._staleness + 1)

    # ---- step --------------------------------------------------------------

    def _apply(self, step_id):
        """Wait for step_id's averages and put them in .grad; False for a non-finite one."""
        finite = self._in_flight.wait_through(step_id)
        bufs = self._sets[self._slot(step_id)]
        used = self._used_sets[self._slot(step_id)].tolist()
        for b in self._buckets:
            self._apply_bucket(b, bufs[b.index], used, stale=step_id != self._step_id)
        return finite

    def _apply_bucket(self, b, buf, used, stale=False):
        """Put bucket b's average (in buf) in the .grad of its parameters some peer
        produced a gradient for (used: a flag per parameter; None: all); the others'
        .grad stay as they are (None stays None: DDP's find_unused_parameters). Applying
        an older step's average (stale), those are set to None: their .grad holds this
        step's local gradient, which is already on its way, and which the other peers do
        not have (with zero_grad()'s None it differs from peer to peer)."""
        for p, off, n in b.params:
            if used is not None and used[self._index[p]] == 0:
                if stale:
                    p.grad = None
                continue
            launched = self._launched_grads.get(p)
            avg = buf[off:off + n].view(p.shape)
            if launched is not None and launched.is_sparse:
                p.grad = avg.to(p.dtype).to_sparse(1)  # sparse in, sparse out (SparseAdam)
            elif self._is_view(p):
                continue  # the average is in .grad already
            elif p in self._views:
                p.grad = self._views[p]  # from now on backward accumulates in the bucket
            elif p.grad is None:
                p.grad = avg.to(p.dtype).clone()
            else:
                p.grad.copy_(avg)

    def _check_since_backward(self, b):
        """Raise when a .grad of bucket b changed after backward produced it (views of a
        bucket share one version counter: the last gradient's count holds for all)."""
        latest = {}
        for p, _, _ in b.params:
            grad, version = self._after_backward.get(p, (None, None))
            if grad is not None:
                key = id(grad._base) if grad._base is not None else id(grad)
                latest[key] = max(latest.get(key, version), version)
        for p, _, _ in b.params:
            grad, _ = self._after_backward.get(p, (None, None))
            if grad is None:
                continue
            key = id(grad._base) if grad._base is not None else id(grad)
            if p.grad is not grad or grad._version != latest[key]:
                self._changed_in_flight(p)

    def _changed_in_flight(self, p):
        self._launched.clear()
        raise ringd.InvalidError(
            "ringd.torch: the gradient of %s changed after backward produced it and its "
            "allreduce started (clip_grad_norm_ or another change between backward and "
            "step()), so it may differ between peers or be overwritten by the average: call "
            "optimizer.synchronize() first, change the averaged gradients, then step() (or, "
            "as in Horovod, step() inside `with optimizer.skip_synchronize():`)%s"
            % (self._names.get(p, "a parameter"),
               "; with staleness the gradient applied is an older step's average and cannot "
               "be changed" if self._staleness else ""))

    def _check_untouched(self):
        """Raise when a .grad changed between the start of its allreduce and now: it may
        be the very buffer on the wire (clip_grad_norm_ without synchronize()), and the
        peers would apply different averages, or the change would be lost."""
        for records in self._launched.values():
            for p, grad, version in records:
                if p.grad is grad and (grad is None or grad._version == version):
                    continue
                self._changed_in_flight(p)
        self._launched_grads = {p: grad for records in self._launched.values()
                                for p, grad, _ in records}
        self._launched.clear()

    def _step_overlapped(self):
        """Lockstep step() with overlap_step: each bucket's update as soon as its
        average lands. False when a bucket's average is not finite (its update and
        the later buckets' are skipped)."""
        bufs = self._sets[0]
        finite = True
        for b in self._buckets:
            used = None  # a bucket of parameters used here is used
            if any(p not in self._touched for p, _, _ in b.params):
                self._in_flight.wait_tag(self._step_id, "used")  # who used them elsewhere
                used = self._used_sets[0].tolist()
            if not self._in_flight.wait_tag(self._step_id, b.index):
                finite = False
                break
            self._apply_bucket(b, bufs[b.index], used)
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

    def _elastic_reset(self):
        """ringd.elastic: forget the allreduces on the old ring (they failed, or were
        finished) and the backward pass they belonged to; with staleness, start the
        warm-up again."""
        self._in_flight = InFlight()
        self._reset_backward()
        self._synced = False
        self._launched = {}
        self._used_sets = [None] * (self._staleness + 1)
        if self._staleness > 0:
            self._step_id = 0  # the pipeline refills: warm-up steps are lockstep

    def _elastic_align(self, plan):
        """ringd.elastic, after a sync: every peer holds rank 0's fusion-bucket plan; when
        rank 0 had none yet (it lost the ring before its first step ended) every peer drops
        its own and plans again after the next step, together."""
        if plan is None and (self._planned or self._step_id > 0):
            self._make_buckets(list(reversed(self._params)))
            self._plan = None
            self._planned = False
            self._step_id = 0
            self._reset_backward()

    def synchronize(self):
        """Wait for this step's averages and put them in .grad (lockstep only), e.g. to
        clip them; step() then only updates."""
        if self._stale_now():
            raise RuntimeError("ringd.torch: synchronize() is for lockstep steps; with "
                               "staleness the average applied is an older step's")
        if not self._synced:
            self._sync_finite = self._gather(self._step_id)
            self._synced = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Horovod's clipping recipe: synchronize(), clip, then step() inside this block.
        (step() after synchronize() only updates anyway; the block checks that
        synchronize() came first.)"""
        self._skip_sync = True
        try:
            yield
        finally:
            self._skip_sync = False

    def _stale_now(self):
        return self._staleness > 0 and self._step_id >= self._warmup

    def _gather(self, apply_id, overlapped=False):
        """Start what backward left, check no gradient changed in flight, wait and apply
        (apply_id None: nothing to apply). A failure ends this step's backward, so that
        the next one raises the ring's sticky error again, not "produced again"."""
        try:
            self._finish_backward()
            self._check_untouched()
            if overlapped:
                return self._step_overlapped()
            return None if apply_id is None else self._apply(apply_id)
        except BaseException:
            self._reset_backward()
            error = sys.exc_info()[1]
            if not isinstance(error, ringd.Error) or isinstance(error, ringd.InvalidError):
                try:  # this step's allreduces still run: let them end here
                    self.finish()
                except ringd.Error:
                    pass
            raise

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        updated = False
        if self._skip_sync and not self._synced:
            raise ringd.InvalidError(
                "ringd.torch: step() inside skip_synchronize() without synchronize() "
                "before it: the gradients are not averaged yet")
        if self._synced:
            finite, apply_id = self._sync_finite, self._step_id
        elif self._overlap_step and not self._stale_now():
            apply_id = self._step_id
            finite = self._gather(apply_id, overlapped=True)
            updated = True
        else:
            apply_id = self._step_id - self._staleness if self._stale_now() else self._step_id
            # the S steps after the warm-up apply nothing: that average was applied
            finite = self._gather(apply_id if apply_id >= min(self._warmup, self._step_id)
                                  else None)
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
        if self._step_id == 1 and not self._in_flight.steps() and not self._planned:
            self._rebuild_buckets()
        self._reset_backward()
        return loss

    def finish(self):
        """Wait for every allreduce still in flight (stale steps' included, not applied):
        call it before ringd.shutdown()."""
        for s in self._in_flight.steps():
            self._in_flight.wait_through(s)

    def zero_grad(self, set_to_none=None):
        """The wrapped optimizer's zero_grad, with its default (torch 2: set_to_none)."""
        if self._ready and not self._synced and self._next < len(self._buckets):
            warnings.warn("ringd.torch: zero_grad() with gradients not yet averaged: call "
                          "step() first", RuntimeWarning, stacklevel=2)
        if set_to_none is None:
            super(self.__class__, self).zero_grad()
        else:
            super(self.__class__, self).zero_grad(set_to_none=set_to_none)

    # ---- checkpoints --------------------------------------------------------

    def state_dict(self):
        """The wrapped optimizer's state, and the fusion buckets' plan: a run resumed from
        it sends the same allreduces as the uninterrupted run (bitwise the same result)."""
        state = super(self.__class__, self).state_dict()
        state["ringd"] = {"bucket_plan": self._plan}
        return state

    def load_state_dict(self, state_dict):
        extra = state_dict.get("ringd") if isinstance(state_dict, dict) else None
        if extra is not None:
            state_dict = {k: v for k, v in state_dict.items() if k != "ringd"}
        super(self.__class__, self).load_state_dict(state_dict)
        plan = extra.get("bucket_plan") if isinstance(extra, dict) else None
        if plan is not None:
            if self._in_flight.steps():
                raise ringd.InvalidError("ringd.torch: load_state_dict() with allreduces in "
                                         "flight: call finish() first")
            self._apply_plan(plan)

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
                         staleness=0, warmup_steps=None, overlap_step=False,
                         find_unused_parameters=True):
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
    find_unused_parameters: True (default): a parameter no peer produced a gradient for
        in a step keeps its .grad (None stays None, so Adam leaves it alone), one some
        peers produced is averaged with zeros for the others, as DDP does; it costs one
        small allreduce per step. False: every parameter counts as used.
    """
    if warmup_steps is None:
        warmup_steps = staleness
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, bucket_bytes, staleness, warmup_steps, overlap_step, find_unused_parameters)


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
    try:
        for i, (name, t) in enumerate(items):
            if not torch.is_tensor(t):
                raise TypeError("broadcast_parameters: %s is a %s, not a tensor"
                                % (name, type(t).__name__))
            if not t.is_contiguous():
                raise ValueError("broadcast_parameters: %s is not contiguous" % name)
            in_flight.make_room()
            in_flight.add(0, ringd.broadcast_async(t.detach(), root=root_rank, tensor_id=i))
        in_flight.wait_through(0)
    except ringd.MismatchError as e:
        # the peers' lists differ: name the tensor the id stands for here
        m = re.search(r"tensor id (\d+)", e.message)
        i = int(m.group(1)) if m else -1
        here = "here tensor id %d is %s" % (i, items[i][0]) if 0 <= i < len(items) else \
            "here %d tensors were given" % len(items)
        raise type(e)("%s (%s: pass the same state, in the same order, on every peer)"
                      % (e.message, here), getattr(e, "status", None)) from None


def broadcast_object(obj, root_rank=0, allow_pickle=False):
    """root_rank's obj on every peer (root_rank gets obj itself back).

    It travels in a format of ringd's own, not pickle, so the bytes a peer sends are
    only ever decoded into values: None, bool, int, float, complex, str, bytes, lists,
    tuples, dicts (OrderedDict too), sets, torch tensors (dense; they arrive on the CPU,
    as plain tensors), torch.dtype, torch.Size, torch.device and numeric numpy arrays and
    scalars; what state_dict()s hold. Anything else raises TypeError naming where it is,
    on every peer. allow_pickle=True (on every peer) sends such an object with torch.save
    and loads it with torch.load(weights_only=False): that runs whatever code the sender's
    bytes name, so only between peers that trust each other (the ring's --auth only
    proves they hold the secret). A peer without it refuses a pickle."""
    ringd_required("broadcast_object")
    me = ringd.rank() == root_rank
    header = torch.zeros(2, dtype=torch.int64)  # what follows (_OBJ_*), its length
    if me:
        try:
            payload, header[0] = _objects.encode_object(obj), _OBJ_RINGD
        except TypeError as e:
            if not allow_pickle:
                payload, header[0], error = str(e).encode(), _OBJ_REFUSED, e
            else:
                data = io.BytesIO()
                torch.save(obj, data)
                payload, header[0] = data.getvalue(), _OBJ_PICKLE
        header[1] = len(payload)
    ringd.broadcast(header, root=root_rank)
    kind, length = int(header[0]), int(header[1])
    if kind not in (_OBJ_RINGD, _OBJ_PICKLE, _OBJ_REFUSED) or length < 0:
        raise ringd.ProtocolError("broadcast_object: rank %d sent header (%d, %d), not one of "
                                  "broadcast_object's" % (root_rank, kind, length))
    buf = torch.frombuffer(bytearray(payload), dtype=torch.uint8) if me and length else \
        torch.empty(length, dtype=torch.uint8)
    if length:
        ringd.broadcast(buf, root=root_rank)
    if kind == _OBJ_REFUSED:
        if me:
            raise error
        raise TypeError("broadcast_object: rank %d's object cannot be sent: %s"
                        % (root_rank, bytes(buf.numpy()).decode(errors="replace")))
    if me:
        return obj
    data = bytes(buf.numpy())
    if kind == _OBJ_PICKLE:
        if not allow_pickle:
            raise ringd.InvalidError(
                "broadcast_object: rank %d sent a pickle (allow_pickle=True there), which "
                "this peer does not load: pass allow_pickle=True on every peer, or send "
                "plain values" % root_rank)
        return torch.load(io.BytesIO(data), weights_only=False)
    try:
        return _objects.decode_object(data)
    except ValueError as e:
        raise ringd.ProtocolError("broadcast_object: the %d bytes from rank %d are not an "
                                  "object ringd sent: %s" % (len(data), root_rank, e)) from None


# what follows broadcast_object's header: ringd's format, a pickle, root's refusal (a message)
_OBJ_RINGD, _OBJ_PICKLE, _OBJ_REFUSED = 1, 2, 3


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Give every peer root_rank's optimizer state (momentum buffers, step counts,
    learning rates)."""
    state = broadcast_object(optimizer.state_dict(), root_rank)
    if ringd.rank() != root_rank:
        optimizer.load_state_dict(state)
