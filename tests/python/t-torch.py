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
             barrier through ringd
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
    dist.init_process_group("gloo", rank=t.rank, world_size=t.world)
    check_hook(t, ringd, torch, dist)
    check_process_group(t, ringd, torch, dist)
    dist.destroy_process_group()
    ringd.shutdown()


def job_env(n):
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(ringtest.free_ports(1)[0])}


if __name__ == "__main__":
    ringtest.main(checks, worlds=(1, 2, 3, 4), env=job_env)
