"""ringd.torch with N real peers (N = 1..4) under ring-launch:

  optimizer  DistributedOptimizer, codec none: parameters bitwise identical on every
             peer, and equal (within float rounding) to one process training on the
             N x batch; fusion: one allreduce per bucket, fewer than the parameters;
             backward_passes_per_step=2; broadcast_parameters and
             broadcast_optimizer_state give every peer rank 0's state bit for bit
  fp16       Compression.fp16: the averaged gradient within the codec's bound
  stale      staleness=2 after 2 lockstep steps: identical parameters, and equal to a
             single-process simulation that applies step t-2's average at step t
  nonfinite  an inf in one peer's gradient: every peer skips that step, says so, and
             the parameters stay identical
  overlap    overlap_step=True (each bucket updated as its average lands): bitwise the
             parameters and Adam/momentum state of the whole-step update, two parameter
             groups; an inf in the last bucket only: the earlier buckets update, the
             rest is skipped on every peer alike
  hook       DDP over Gloo with ringd's communication hook against DDP's own Gloo
             allreduce: the same parameters within rounding
  pg         torch.distributed.init_process_group("ringd") under DDP: training as with
             Gloo; all_reduce of int64 and MIN (Gloo inside), broadcast, all_gather,
             barrier through ringd; all_gather_into_tensor and reduce_scatter_tensor
             (float on ringd, int64 and MAX through Gloo), all_to_all_single,
             all_gather_object, under each torch's names (_allgather_base and
             all_gather_single, ...) and coalesced
  none       parameters whose .grad is None (zero_grad(), set_to_none by default since
             torch 2.0; an unused head; a head rank 0 alone uses on even steps): lockstep,
             overlap_step and accumulation equal one process on the N x batch, staleness
             and fp16 run; the peers agree, the unused head keeps .grad None; the
             gradient hooks are torch 2.1's post-accumulate-grad ones where it has them
  object     broadcast_object: a state_dict's values bit for bit, not pickle; another
             object raises TypeError on every peer, or travels with allow_pickle=True
             on every peer; a peer without it refuses the pickle
  lifecycle  init_process_group("ringd") opens the ring through the store;
             destroy_process_group() closes it where torch calls shutdown() (2.x), then
             a second group works; torch 2.x's abort closes it without waiting
"""
import os
import warnings

import ringtest

STEPS = 6
BATCH = 8  # per peer


def data(step, n):
    """The global batch of a step: N x BATCH samples, the same on every peer."""
    import torch
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(n * BATCH, 20, generator=g), torch.randn(n * BATCH, 5, generator=g)


def make_model(seed=0):
    import torch
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                               torch.nn.Tanh(), torch.nn.Linear(64, 5))


def shard(x, rank):
    return x[rank * BATCH:(rank + 1) * BATCH]


def loss_of(model, x, y):
    import torch.nn.functional as F
    return F.mse_loss(model(x), y)


def max_rel_diff(a_params, b_params):
    worst = 0.0
    for a, b in zip(a_params, b_params):
        scale = max(b.abs().max().item(), 1e-6)
        worst = max(worst, (a - b).abs().max().item() / scale)
    return worst


def digest_params(model):
    import torch
    return ringtest.digest(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))


def check_optimizer(t, ringd, torch):
    n, r = t.world, t.rank
    model = make_model(seed=r)  # different on every peer: broadcast_parameters fixes it
    inner = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt = ringd.torch.DistributedOptimizer(inner, model.named_parameters(),
                                           compression=ringd.torch.Compression.none,
                                           bucket_bytes=8 << 10)
    ringd.torch.broadcast_parameters(model.state_dict(), root_rank=0)
    t.eq(digest_params(model), digest_params(make_model(seed=0)),
         "broadcast_parameters: every peer has rank 0's parameters bit for bit")
    nbuckets = len(opt._buckets)
    nparams = len(list(model.parameters()))
    ref = make_model(seed=0)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        x, y = data(step, n)
        opt.zero_grad()
        loss_of(model, shard(x, r), shard(y, r)).backward()
        opt.step()
        ref_opt.zero_grad()
        loss_of(ref, x, y).backward()  # the mean over N x BATCH: the average of the peers'
        ref_opt.step()
    t.same("optimizer: parameters after %d steps" % STEPS, digest_params(model))
    diff = max_rel_diff(list(model.parameters()), list(ref.parameters()))
    t.ok(diff < 1e-5, "optimizer: equal to one process on the %d x batch within float "
         "rounding" % n, "max relative difference %.3g" % diff)
    # the first step's buckets follow registration order, the later ones the order the
    # gradients came in (rebuilt after step 0, as DDP does)
    later = len(opt._buckets)
    t.ok(nbuckets < nparams and later < nparams and
         opt.allreduces == nbuckets + (STEPS - 1) * later,
         "fusion: %d parameters in %d then %d buckets, one allreduce per bucket and step"
         % (nparams, nbuckets, later), "allreduces %d, steps %d" % (opt.allreduces, STEPS))
    # the optimizer state (momentum buffers) from rank 0, bit for bit
    if r != 0:
        for state in opt.state.values():
            state["momentum_buffer"].add_(1.0)
    ringd.torch.broadcast_optimizer_state(opt, root_rank=0)
    t.same("broadcast_optimizer_state: momentum buffers",
           ringtest.digest(torch.cat([s["momentum_buffer"].reshape(-1)
                                      for s in opt.state.values()])))
    opt.finish()


def check_accumulation(t, ringd, torch):
    """backward_passes_per_step=2: two half batches per step equal one whole batch."""
    n, r = t.world, t.rank
    model, ref = make_model(), make_model()
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                           model.named_parameters(), backward_passes_per_step=2,
                                           compression=ringd.torch.Compression.none)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for step in range(3):
        x, y = data(step, n)
        xs, ys = shard(x, r), shard(y, r)
        opt.zero_grad()
        for half in (slice(0, BATCH // 2), slice(BATCH // 2, BATCH)):
            (loss_of(model, xs[half], ys[half]) / 2).backward()
        opt.step()
        ref_opt.zero_grad()
        loss_of(ref, x, y).backward()
        ref_opt.step()
    diff = max_rel_diff(list(model.parameters()), list(ref.parameters()))
    t.ok(diff < 1e-5, "backward_passes_per_step=2: equal to one process on the whole batch",
         "max relative difference %.3g" % diff)
    t.ok(len(opt._buckets) == 1 and opt.allreduces == 3, "backward_passes_per_step=2: one allreduce "
         "per bucket and step, not per backward", "allreduces %d" % opt.allreduces)


def check_fp16(t, ringd, torch):
    n, r = t.world, t.rank
    model, ref = make_model(), make_model()
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                           model.named_parameters(),
                                           compression=ringd.torch.Compression.fp16)
    x, y = data(0, n)
    loss_of(model, shard(x, r), shard(y, r)).backward()
    opt.synchronize()
    loss_of(ref, x, y).backward()
    worst = 0.0
    for p, q in zip(model.parameters(), ref.parameters()):
        # fp16 with fp32 accumulation: each of the N partial sums rounds to 2^-11 of
        # the largest value of its chunk (the bound t-codec-ring uses)
        bound = (n + 1) * 2.0 ** -11 * q.grad.abs().max().item() + 1e-12
        worst = max(worst, (p.grad - q.grad).abs().max().item() / bound)
    t.ok(worst <= 1.0, "fp16: the averaged gradient within (N+1) 2^-11 max|g| of the exact "
         "one", "worst error / bound %.3g" % worst)
    t.ok(any(b.dtype == torch.float16 for b in opt._sets[0]),
         "fp16 on a codec-none ring: the buckets travel as float16")
    opt.step()  # after synchronize(): only the update
    opt.finish()


def check_stale(t, ringd, torch):
    n, r, S, K = t.world, t.rank, 2, 2
    model, ref = make_model(), make_model()
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05,
                                                           momentum=0.9),
                                           model.named_parameters(), staleness=S,
                                           warmup_steps=K,
                                           compression=ringd.torch.Compression.none,
                                           bucket_bytes=8 << 10)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    pending = {}  # the simulation: each step's global gradient, until it is applied
    steps = 8
    for step in range(steps):
        x, y = data(step, n)
        opt.zero_grad()
        loss_of(model, shard(x, r), shard(y, r)).backward()
        opt.step()
        ref_opt.zero_grad()
        loss_of(ref, x, y).backward()
        pending[step] = [p.grad.clone() for p in ref.parameters()]
        # lockstep for K steps; then step t applies t-S's; the S steps between apply nothing
        apply_id = step if step < K else step - S if step - S >= K else None
        if apply_id is not None:
            for p, g in zip(ref.parameters(), pending.pop(apply_id)):
                p.grad.copy_(g)
            ref_opt.step()
    t.same("staleness 2: parameters after %d steps" % steps, digest_params(model))
    diff = max_rel_diff(list(model.parameters()), list(ref.parameters()))
    t.ok(diff < 1e-5, "staleness 2: step t applies step t-2's average (the simulation's "
         "parameters within float rounding)", "max relative difference %.3g" % diff)
    opt.finish()


def check_nonfinite(t, ringd, torch):
    n, r = t.world, t.rank
    model = make_model()
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                           model.named_parameters(),
                                           compression=ringd.torch.Compression.none)
    caught = []
    for step in range(3):
        x, y = data(step, n)
        opt.zero_grad()
        loss = loss_of(model, shard(x, r), shard(y, r))
        if step == 1 and r == n - 1:
            loss = loss * float("inf")
        loss.backward()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            opt.step()
            caught += [str(m.message) for m in w]
        if step == 1:
            t.same("nonfinite: parameters after the skipped step", digest_params(model))
    t.eq(opt.skipped_steps, 1, "nonfinite: one step skipped on every peer")
    t.ok(any("skipped on every peer" in m for m in caught), "nonfinite: it says so",
         repr(caught))
    t.ok(all(torch.isfinite(p).all() for p in model.parameters()),
         "nonfinite: the parameters stay finite")
    t.same("nonfinite: parameters at the end", digest_params(model))
    opt.finish()


def check_overlap_step(t, ringd, torch):
    n, r = t.world, t.rank
    for name, make_opt in (
            ("SGD momentum", lambda g: torch.optim.SGD(g, lr=0.05, momentum=0.9)),
            ("Adam", lambda g: torch.optim.Adam(g, lr=0.01))):
        runs = []
        for overlap in (False, True):
            model = make_model()
            groups = [{"params": list(model[0].parameters()) + list(model[2].parameters())},
                      {"params": list(model[4].parameters()), "lr": 0.02}]
            opt = ringd.torch.DistributedOptimizer(make_opt(groups), model.named_parameters(),
                                                   compression=ringd.torch.Compression.none,
                                                   bucket_bytes=8 << 10, overlap_step=overlap)
            for step in range(4):
                x, y = data(step, n)
                opt.zero_grad()
                loss_of(model, shard(x, r), shard(y, r)).backward()
                opt.step()
            # in parameter order: overlap_step creates the states bucket by bucket
            state = torch.cat([v.reshape(-1).float() for p in model.parameters()
                               for _, v in sorted(opt.state[p].items()) if torch.is_tensor(v)])
            runs.append((digest_params(model), ringtest.digest(state), len(opt._buckets)))
            opt.finish()
        t.ok(runs[0][:2] == runs[1][:2] and runs[1][2] > 1,
             "overlap: %s, overlap_step=True over %d buckets: bitwise the whole step's "
             "parameters and state" % (name, runs[1][2]), repr(runs))
        t.same("overlap: %s parameters" % name, runs[1][0])
    # a non-finite average in the last bucket only (the first layer's gradients come last)
    model = make_model()
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                           model.named_parameters(), bucket_bytes=8 << 10,
                                           compression=ringd.torch.Compression.none,
                                           overlap_step=True)
    poison = [False]
    model[0].weight.register_hook(lambda g: g * float("inf") if poison[0] else g)
    caught, moved = [], None
    for step in range(3):
        x, y = data(step, n)
        opt.zero_grad()
        before = [p.detach().clone() for p in model.parameters()]
        poison[0] = step == 2 and r == n - 1
        loss_of(model, shard(x, r), shard(y, r)).backward()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            opt.step()
            caught += [str(m.message) for m in w]
        if step == 2:
            moved = [not torch.equal(a, b) for a, b in zip(before, model.parameters())]
    t.ok(opt.skipped_steps == 1 and moved[0] is False and moved[1] is False and
         moved[-1] is True, "overlap: an inf in the first layer's bucket skips that bucket; "
         "the last layer (an earlier bucket) is updated", "moved %r, skipped %d"
         % (moved, opt.skipped_steps))
    t.ok(any("partly skipped" in m for m in caught), "overlap: it says so", repr(caught))
    t.same("overlap: parameters after a partly skipped step", digest_params(model))
    opt.finish()


def check_hook(t, ringd, torch, dist):
    n, r = t.world, t.rank
    from torch.nn.parallel import DistributedDataParallel as DDP
    a, b = make_model(), make_model()
    ddp_a = DDP(a, bucket_cap_mb=0.01)
    ddp_b = DDP(b, bucket_cap_mb=0.01)
    state = ringd.torch.HookState(codec="exact")
    ddp_a.register_comm_hook(state, ringd.torch.allreduce_hook)
    opt_a = torch.optim.SGD(a.parameters(), lr=0.05)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.05)
    for step in range(4):
        x, y = data(step, n)
        for ddp, opt in ((ddp_a, opt_a), (ddp_b, opt_b)):
            opt.zero_grad()
            loss_of(ddp, shard(x, r), shard(y, r)).backward()
            opt.step()
    diff = max_rel_diff(list(a.parameters()), list(b.parameters()))
    t.ok(diff < 1e-5, "hook: DDP with ringd's hook = DDP's Gloo allreduce within rounding",
         "max relative difference %.3g" % diff)
    t.ok(state.allreduces >= 4, "hook: every step's buckets went through ringd (%d calls)"
         % state.allreduces)
    t.same("hook: parameters", digest_params(a))


def check_process_group(t, ringd, torch, dist):
    n, r = t.world, t.rank
    from torch.nn.parallel import DistributedDataParallel as DDP
    pg = dist.new_group(backend="ringd")
    t.eq(type(pg).__name__, "ProcessGroupRingd", "pg: new_group(backend='ringd') is ringd's")
    model, ref = make_model(seed=r), make_model(seed=0)
    ddp = DDP(model, process_group=pg)  # its constructor broadcasts rank 0's parameters
    t.eq(digest_params(model), digest_params(ref), "pg: DDP's constructor broadcast rank 0's "
         "parameters through ringd")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for step in range(4):
        x, y = data(step, n)
        opt.zero_grad()
        loss_of(ddp, shard(x, r), shard(y, r)).backward()
        opt.step()
        ref_opt.zero_grad()
        loss_of(ref, x, y).backward()
        ref_opt.step()
    diff = max_rel_diff(list(model.parameters()), list(ref.parameters()))
    t.ok(diff < 1e-5, "pg: DDP on the ringd backend = one process on the N x batch",
         "max relative difference %.3g" % diff)
    t.same("pg: parameters", digest_params(model))
    calls = pg.ringd_calls
    i = torch.tensor([r + 1], dtype=torch.int64)
    dist.all_reduce(i, group=pg)
    t.eq(int(i), n * (n + 1) // 2, "pg: int64 all_reduce (through Gloo)")
    m = torch.tensor([float(r)])
    dist.all_reduce(m, op=dist.ReduceOp.MIN, group=pg)
    t.eq(float(m), 0.0, "pg: MIN all_reduce (through Gloo)")
    v = torch.tensor([-0.0, float("nan"), 1.5]) if r == 0 else torch.zeros(3)
    dist.broadcast(v, src=0, group=pg)
    t.same("pg: broadcast bit for bit", ringtest.digest(v))
    t.ok(str(v[0].item()) == "-0.0", "pg: broadcast keeps -0.0", repr(v))
    outs = [torch.zeros(2, dtype=torch.int32) for _ in range(n)]
    dist.all_gather(outs, torch.tensor([r, 10 * r], dtype=torch.int32), group=pg)
    t.eq([o.tolist() for o in outs], [[k, 10 * k] for k in range(n)], "pg: all_gather")
    dist.barrier(group=pg)
    t.ok(pg.ringd_calls >= calls + 3, "pg: broadcast, all_gather and barrier ran on ringd",
         "%d calls" % (pg.ringd_calls - calls))
    check_single_tensor(t, ringd, torch, dist, pg)


def check_single_tensor(t, ringd, torch, dist, pg):
    """The single-tensor collectives, through torch's functions and under both names."""
    n, r = t.world, t.rank
    from torch._C._distributed_c10d import AllgatherOptions, GatherOptions, ReduceScatterOptions
    want = [float(10 * k + j) for k in range(n) for j in range(3)]
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        calls = pg.ringd_calls
        out = torch.zeros(n, 3, dtype=dtype)
        dist.all_gather_into_tensor(out, torch.arange(3, dtype=dtype) + 10 * r, group=pg)
        t.ok(out.reshape(-1).tolist() == want and pg.ringd_calls == calls + 1,
             "pg: all_gather_into_tensor of %s on ringd" % dtype, out)
    outs = [torch.zeros(3 * n) for _ in range(2)]
    pg._allgather_base(outs[0], torch.arange(3.0) + 10 * r).wait()  # torch 1.13's name
    pg.all_gather_single(outs[1], torch.arange(3.0) + 10 * r, AllgatherOptions()).wait()
    t.ok(outs[0].tolist() == want and outs[1].tolist() == want,
         "pg: _allgather_base and all_gather_single (1.13's and 2.x's names)", outs)
    inp = torch.arange(2.0 * n) + r  # rank k's block: elements 2k, 2k + 1
    block = [sum(2 * r + j + q for q in range(n)) for j in range(2)]
    for op, name, ring in ((dist.ReduceOp.SUM, "SUM", True), (dist.ReduceOp.MAX, "MAX", False)):
        calls = pg.ringd_calls
        out = torch.zeros(2)
        dist.reduce_scatter_tensor(out, inp, op=op, group=pg)
        expect = block if name == "SUM" else [2 * r + j + n - 1.0 for j in range(2)]
        t.ok(out.tolist() == expect and (pg.ringd_calls > calls) == ring,
             "pg: reduce_scatter_tensor %s (%s)" % (name, "ringd" if ring else "Gloo"),
             "%s, want %s" % (out.tolist(), expect))
    out = torch.zeros(2, dtype=torch.int64)
    pg._reduce_scatter_base(out, inp.long(), ReduceScatterOptions()).wait()  # 1.13's name
    t.eq(out.tolist(), block, "pg: _reduce_scatter_base of int64 (Gloo)")
    outs = [torch.zeros(2) for _ in range(2)]
    pg.reduce_scatter_single_coalesced(outs, [inp, 2 * inp], ReduceScatterOptions()).wait()
    both = [torch.zeros(3 * n) for _ in range(2)]
    fut = pg.all_gather_single_coalesced(both, [torch.arange(3.0) + 10 * r] * 2,
                                         AllgatherOptions()).get_future()
    fut.wait()
    t.ok(outs[0].tolist() == block and outs[1].tolist() == [2 * b for b in block] and
         all(b.tolist() == want for b in both),
         "pg: the coalesced forms (torch 2.x's _coalescing_manager), a future for one", both)
    gopts = GatherOptions()
    gopts.rootRank = n - 1
    out = torch.zeros(n, 2) if r == n - 1 else torch.zeros(0)
    pg.gather_single(out, torch.tensor([r, 10.0 * r]), gopts).wait()  # 2.x: gather_into_tensor
    t.ok(r != n - 1 or out.reshape(-1).tolist() == [v for k in range(n) for v in (k, 10.0 * k)],
         "pg: gather_single into rank %d (Gloo's gather)" % (n - 1), out)
    a2a = torch.zeros(n)
    dist.all_to_all_single(a2a, torch.arange(float(n)) + 10 * r, group=pg)
    t.eq(a2a.tolist(), [10.0 * k + r for k in range(n)], "pg: all_to_all_single (Gloo)")
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": r}, group=pg)
    t.eq(objs, [{"rank": k} for k in range(n)], "pg: all_gather_object")


def check_none_grads(t, ringd, torch):
    """Parameters whose .grad is None: set so by zero_grad() (torch 2's default, asked
    for explicitly on 1.13), never used (dead), used by rank 0 alone on even steps (aux)."""
    import inspect
    n, r = t.world, t.rank
    default = inspect.signature(torch.optim.Optimizer.zero_grad).parameters["set_to_none"]
    zero_grad_kw = {} if default.default is True else {"set_to_none": True}
    t.diag("none: zero_grad(%s)" % ", ".join("%s=%s" % kv for kv in zero_grad_kw.items()))

    class Heads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(5)
            self.body, self.head = torch.nn.Linear(20, 16), torch.nn.Linear(16, 5)
            self.aux, self.dead = torch.nn.Linear(16, 5), torch.nn.Linear(16, 5)

        def loss(self, x, y, aux):
            h = torch.tanh(self.body(x))
            out = self.head(h) + (self.aux(h) if aux else 0)
            return torch.nn.functional.mse_loss(out, y)

    api = "post_accumulate_grad" if hasattr(torch.Tensor, "register_post_accumulate_grad_hook") \
        else "grad_accumulator"
    for name, kw, exact in (("lockstep", {}, True), ("overlap_step", {"overlap_step": True}, True),
                            ("accumulate 2", {"backward_passes_per_step": 2}, True),
                            ("staleness 1", {"staleness": 1}, False),
                            ("fp16", {"compression": ringd.torch.Compression.fp16}, False)):
        model, ref = Heads(), Heads()
        dead0 = model.dead.weight.detach().clone()
        kw.setdefault("compression", ringd.torch.Compression.none)
        opt = ringd.torch.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
            model.named_parameters(), bucket_bytes=1 << 10, **kw)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
        passes = kw.get("backward_passes_per_step", 1)
        for step in range(STEPS):
            opt.zero_grad(**zero_grad_kw)
            ref_opt.zero_grad(set_to_none=True)
            for k in range(passes):
                x, y = data(10 * step + k, n)
                model.loss(shard(x, r), shard(y, r), r == 0 and step % 2 == 0).backward()
                # the average over the peers: rank 0's aux term counts 1/N
                ref_loss = sum(ref.loss(shard(x, q), shard(y, q), q == 0 and step % 2 == 0)
                               for q in range(n)) / n
                ref_loss.backward()
            opt.step()
            ref_opt.step()
        opt.finish()
        t.same("none: %s: parameters" % name, digest_params(model))
        t.ok(model.dead.weight.grad is None and torch.equal(model.dead.weight, dead0),
             "none: %s: a head no peer uses keeps .grad None and its values" % name)
        if exact:
            diff = max_rel_diff(list(model.parameters()), list(ref.parameters()))
            t.ok(diff < 1e-5, "none: %s: equal to one process on the N x batch" % name,
                 "max relative difference %.3g" % diff)
        t.eq(opt._hook_api, api, "none: %s: gradient hooks through %s" % (name, api))


def check_broadcast_object(t, ringd, torch):
    import argparse
    import collections
    import numpy as np
    r = t.rank
    half = torch.tensor([-0.0, float("nan")], dtype=torch.bfloat16)
    sent = {"model": collections.OrderedDict(w=torch.arange(6.0).reshape(2, 3) * (r + 1), b=half),
            "step": 2 ** 70 + r, "lr": 0.1 * (r + 1), "betas": (0.9, 0.999), "name": "r%d" % r,
            "flags": {True, None}, "raw": b"\x00\xff", "dtype": torch.float16,
            "size": torch.Size([2, 3]), "z": 1 + 2j, "np": np.arange(3, dtype=np.int16) + r,
            "npf": np.float64(0.5), "empty": torch.zeros(0, 4), "scalar": torch.tensor(r)}
    got = ringd.torch.broadcast_object(sent if r == 0 else {"other": r}, root_rank=0)
    ok = (type(got["model"]) is collections.OrderedDict and got["step"] == 2 ** 70 and
          got["lr"] == 0.1 and got["betas"] == (0.9, 0.999) and got["flags"] == {True, None} and
          got["raw"] == b"\x00\xff" and got["dtype"] is torch.float16 and
          got["size"] == torch.Size([2, 3]) and got["z"] == 1 + 2j and
          got["np"].tolist() == [0, 1, 2] and got["np"].dtype == np.int16 and
          got["npf"] == 0.5 and got["empty"].shape == (0, 4) and int(got["scalar"]) == 0)
    t.ok(ok, "object: rank 0's values arrive, of their types", repr(got)[:800])
    t.same("object: the tensors bit for bit", [ringtest.digest(got["model"][k].contiguous())
                                               for k in ("w", "b")])
    ns = argparse.Namespace(lr=0.1)
    t.raises(TypeError, lambda: ringd.torch.broadcast_object(ns, root_rank=0),
             "object: an argparse.Namespace: TypeError on every peer, naming the type",
             lambda e: "Namespace" in str(e) and (r == 0 or "rank 0" in str(e)))
    got = ringd.torch.broadcast_object(ns if r == 0 else None, root_rank=0, allow_pickle=True)
    t.ok(isinstance(got, argparse.Namespace) and got.lr == 0.1,
         "object: allow_pickle=True on every peer: it travels", repr(got))
    if t.world > 1:
        def refuse():
            return ringd.torch.broadcast_object(ns if r == 0 else None, root_rank=0,
                                                allow_pickle=(r == 0))
        if r == 0:
            t.ok(refuse() is ns, "object: a pickle to peers without allow_pickle: the root "
                 "returns", "")
        else:
            t.raises(ringd.InvalidError, refuse, "object: a pickle to peers without "
                     "allow_pickle: the root returns", lambda e: "allow_pickle" in str(e))


def check_lifecycle(t, ringd, torch, dist):
    """The "ringd" group as the default one, destroyed, made again, aborted."""
    import inspect
    n = t.world
    # torch 2.x's destroy_process_group() calls the group's shutdown(), 1.13's does not
    calls_shutdown = ".shutdown()" in inspect.getsource(dist.destroy_process_group)
    ports = os.environ["T_PORTS"].split(",")
    dist.init_process_group("ringd", init_method="tcp://127.0.0.1:%s" % ports[0],
                            rank=t.rank, world_size=n)
    t.ok(ringd.is_initialized() and ringd.size() == n,
         "lifecycle: init_process_group('ringd') opened the ring through the store")
    x = torch.ones(3)
    dist.all_reduce(x)
    t.eq(x.tolist(), [float(n)] * 3, "lifecycle: all_reduce")
    dist.destroy_process_group()
    t.eq(ringd.is_initialized(), not calls_shutdown,
         "lifecycle: destroy_process_group() %s" % ("closed the ring (shutdown())" if
                                                   calls_shutdown else "keeps the ring (1.13 "
                                                   "calls no shutdown; the next group reuses it)"))
    # (1.13: a group closes the ring it opened only, so close it here for the next group to
    # open its own, which abort() below then closes)
    ringd.shutdown()
    dist.init_process_group("ringd", init_method="tcp://127.0.0.1:%s" % ports[1],
                            rank=t.rank, world_size=n)
    x = torch.ones(3) * (t.rank + 1)
    dist.all_reduce(x)
    t.eq(x.tolist(), [n * (n + 1) / 2.0] * 3, "lifecycle: a second group after destroy works")
    abort = getattr(dist.distributed_c10d, "_abort_process_group", None)
    if abort is not None:  # torch 2.x
        abort()
    else:  # 1.13 has no such function: the group's own abort(), then destroy
        dist.group.WORLD.abort()
        dist.destroy_process_group()
    t.ok(not ringd.is_initialized() and not dist.is_initialized(),
         "lifecycle: %s closes the ring" % ("_abort_process_group()" if abort else "abort()"))
    ringd.shutdown()


def check_algorithms(t, ringd):
    """Over tcp at N = 4, the checks above went through the small and mid-size
    algorithms (recursive doubling up to --rd-max-bytes, set to 8K in that world,
    Rabenseifner's above: the model's 23 KB buckets), so their parameters and
    gradients prove them too."""
    if os.environ.get("RING_TRANSPORT") != "tcp" or t.world != 4:
        return
    s = ringd.stats()
    t.ok(s["rd_allreduces"] > 0 and s["rh_allreduces"] > 0,
         "algorithms: recursive doubling and Rabenseifner's ran these checks' allreduces",
         repr({k: s[k] for k in ("allreduces", "rd_allreduces", "rh_allreduces")}))


def checks(t):
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        t.skip("ringd.torch", "no PyTorch: %s" % e)
        return
    torch.set_num_threads(1)
    import ringd
    import ringd.torch
    ringd.init()
    check_optimizer(t, ringd, torch)
    check_accumulation(t, ringd, torch)
    check_fp16(t, ringd, torch)
    check_stale(t, ringd, torch)
    check_nonfinite(t, ringd, torch)
    check_overlap_step(t, ringd, torch)
    check_none_grads(t, ringd, torch)
    check_broadcast_object(t, ringd, torch)
    dist.init_process_group("gloo", rank=t.rank, world_size=t.world)
    check_hook(t, ringd, torch, dist)
    check_process_group(t, ringd, torch, dist)
    check_algorithms(t, ringd)
    dist.destroy_process_group()
    ringd.shutdown()
    check_lifecycle(t, ringd, torch, dist)


def job_env(n):
    ports = [str(p) for p in ringtest.free_ports(3)]
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": ports[0], "T_PORTS": ",".join(ports[1:])}


if __name__ == "__main__":
    # over tcp at N = 4: recursive doubling and Rabenseifner's under the same checks
    ringtest.main(checks, env=job_env,
                  worlds=(1, 2, 3, 4, (4, {"RING_TRANSPORT": "tcp", "RING_RD_MAX_BYTES": "8K"})))
