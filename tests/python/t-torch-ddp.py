"""ringd under DDP and torch.distributed futures, with N real peers started by
ringtest (RING_RANK/RING_WORLD_SIZE/RING_PEERS and MASTER_ADDR/PORT of their
own: ring-launch would stop the job when one peer dies):

  ddp-kill   DDP over the "ringd" backend, one peer SIGKILLs itself: backward()
             raises ringd.PeerError naming it on every survivor within the
             timeout (it segfaulted in DDP's finalize_backward), and a later step
             raises it again (not DDP's internal assert)
  hook-kill  the same with DDP over gloo and ringd.torch.allreduce_hook (it was
             "Unable to cast ... to Tensor")
  ddp-stop,  a SIGSTOPped peer: the same within RING_TIMEOUT, which the backend
  hook-stop  keeps (it replaced it with torch's 30-minute default)
  nested     a then() callback that waits on another collective's future
             completes (it waited on itself), as Gloo's does
  powersgd   PyTorch's stock PowerSGD hook (ranks 1 and 4) over the "ringd"
             backend, several buckets, one peer's backward slower: ranks
             identical (the callbacks' allreduces in one order everywhere; they
             ran mid-backward, a MismatchError), the example CNN learns
  unused     DistributedOptimizer against DDP (find_unused_parameters=True, over
             gloo, with ringd.init() after init_process_group: one store) on a
             script with a head some steps use on some ranks, Adam with weight
             decay, zero_grad(set_to_none=True): the same parameters; and
             BatchNorm's buffers made rank 0's with broadcast_parameters
"""
import os
import signal
import subprocess
import sys
import time

import ringtest

ringtest.JOB_TIMEOUT = 120.0
TIMEOUT = 3.0
SLACK = 7.0
VICTIM = 1
EXAMPLES = os.path.join(os.environ.get("top_srcdir", os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", "..")), "examples", "pytorch")


def mlp(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))


def fault_checks(t, ringd, torch, fault):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    backend, how = fault.split("-")
    if backend == "ddp":
        dist.init_process_group("ringd", rank=t.rank, world_size=t.world)
        t.eq(ringd.config()["timeout"], "%gs" % TIMEOUT,
             "%s: the backend keeps RING_TIMEOUT (not torch's 30-minute default)" % fault)
    else:
        dist.init_process_group("gloo", rank=t.rank, world_size=t.world)
        ringd.init()
    net = mlp(torch)
    ddp = DDP(net)
    if backend == "hook":
        ddp.register_comm_hook(None, ringd.torch.allreduce_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        ddp(torch.randn(16, 32)).pow(2).mean().backward()
        opt.step()

    for _ in range(3):
        step()
    t.ok(True, "%s: steps before the fault" % fault)
    if t.rank == VICTIM:
        # its step 3 is done when it has received all it needs; what it still sends to its
        # neighbour may be queued: killed at once it failed the others' step 3 (CI, under
        # load), not the step after the fault this checks
        time.sleep(1.0)
        if how == "stop":  # stopped for good: a watchdog kills it once the others are done
            subprocess.Popen(["sh", "-c", "sleep %d; kill -9 %d" % (TIMEOUT + SLACK + 5,
                                                                    os.getpid())])
            os.kill(os.getpid(), signal.SIGSTOP)
        else:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
    t0 = time.monotonic()
    err = None
    for _ in range(20):  # bounded: the first step raises
        try:
            step()
        except Exception as e:  # noqa: BLE001 - which one is the check
            err = e
            break
    took = time.monotonic() - t0
    t.ok(isinstance(err, ringd.Error), "%s: backward raises a ringd.Error" % fault, repr(err))
    t.ok(getattr(err, "peer_rank", None) == VICTIM, "%s: it names rank %d" % (fault, VICTIM),
         repr(err))
    t.ok(took < TIMEOUT + SLACK, "%s: within the timeout and some slack" % fault,
         "%.1f s" % took)
    t.raises(ringd.Error, step, "%s: a later step raises the ring's error again" % fault,
             lambda e: e.peer_rank == VICTIM)


def nested_checks(t, ringd, torch):
    import torch.distributed as dist
    dist.init_process_group("ringd", rank=t.rank, world_size=t.world)
    fut = dist.all_reduce(torch.ones(4), async_op=True).get_future().then(
        lambda f: dist.all_reduce(f.value()[0] * 10, async_op=True).get_future().wait()[0])
    got = fut.wait()
    t.ok(got.tolist() == [10.0 * t.world * t.world] * 4,
         "nested: a callback waiting on another collective's future completes", got)
    # two levels deep, twice (a chain at a time: a then() attached to a future already
    # complete runs at once in the caller's thread, on any backend, so two chains in
    # flight start their inner collectives in an order that depends on timing)
    got, n = [], t.world
    for k in range(2):
        first = dist.all_reduce(torch.full((3,), float(k + 1)), async_op=True).get_future()

        def inner(f):
            return dist.all_reduce(f.value()[0] + 1, async_op=True).get_future().then(
                lambda g: dist.all_reduce(g.value()[0] * 2, async_op=True).get_future().wait()[0]
            ).wait()
        got.append(first.then(inner).wait()[0].item())
    want = [2 * n * (n * (k + 1) + 1) * n for k in range(2)]
    t.ok(got == want, "nested: callbacks nested two levels deep", "got %s, want %s" % (got, want))
    dist.destroy_process_group()


def powersgd_checks(t, ringd, torch):
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    from torch.nn.parallel import DistributedDataParallel as DDP
    sys.path.insert(0, EXAMPLES)
    try:
        import fmnist_data
        import fmnist_cnn_plain
        x, y = fmnist_data.load("train", 2048)
    except Exception as e:  # noqa: BLE001 - no dataset here: say so
        t.skip("powersgd", "no Fashion-MNIST (apt-get install dataset-fashion-mnist): %s" % e)
        return
    dist.init_process_group("ringd", rank=t.rank, world_size=t.world)
    for rank_k in (1, 4):
        torch.manual_seed(0)
        net = fmnist_cnn_plain.Net(16, 32, 256)
        # two buckets (DDP's first holds 1 MiB: the dense layers), and rank 0's backward
        # pauses after the first has started: its callbacks (which start PowerSGD's own
        # allreduces) must still start them after the second bucket, as on the other peer
        ddp = DDP(net)
        slow = [False]
        if t.rank == 0:
            def pause_in_backward(module, inputs, out):
                out.register_hook(lambda grad: time.sleep(0.3) if slow[0] else None)
            net.conv2.register_forward_hook(pause_in_backward)
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=rank_k,
                                       start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)
        opt = torch.optim.SGD(net.parameters(), lr=0.02, momentum=0.9)
        losses = []
        for step in range(60):
            slow[0] = 3 <= step < 6
            lo = (step * 32 * t.world + 32 * t.rank) % (len(x) - 32)
            opt.zero_grad()
            loss = F.cross_entropy(ddp(x[lo:lo + 32]), y[lo:lo + 32])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
        t.diag("powersgd rank %d: mean loss of the first 10 steps %.3f, of the last 10 %.3f"
               % (rank_k, first, last))
        t.ok(last < 0.75 * first, "powersgd rank %d: the example CNN learns" % rank_k,
             "first %.3f, last %.3f" % (first, last))
        t.same("powersgd rank %d: parameters after 60 steps" % rank_k,
               ringtest.digest(torch.cat([p.detach().reshape(-1) for p in net.parameters()])))
    dist.destroy_process_group()


class _TwoHeads:
    """A trunk, a head every step uses and one only some steps use on some ranks."""

    def __init__(self, torch):
        torch.manual_seed(0)
        self.trunk = torch.nn.Linear(8, 16)
        self.main = torch.nn.Linear(16, 1)
        self.aux = torch.nn.Linear(16, 1)
        self.model = torch.nn.ModuleDict({"trunk": self.trunk, "main": self.main,
                                          "aux": self.aux})

    def loss(self, torch, step, rank):
        g = torch.Generator().manual_seed(100 * step + rank)
        h = torch.relu(self.trunk(torch.randn(8, 8, generator=g)))
        loss = self.main(h).pow(2).mean()
        # steps 0-3 no rank uses aux; then rank 0 alone on odd steps; every rank on 8+
        if (step >= 4 and step % 2 == 1 and rank == 0) or step >= 8:
            loss = loss + self.aux(h).pow(2).mean()
        return loss

    def params(self, torch):
        return torch.cat([p.detach().reshape(-1) for p in self.model.parameters()])


def unused_checks(t, ringd, torch):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo", rank=t.rank, world_size=t.world)
    ringd.init()  # after init_process_group: meets through its store, not on MASTER_PORT
    t.ok(ringd.size() == t.world, "unused: ringd.init() after init_process_group('gloo')")

    def adam(model):
        decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
        rest = [p for n, p in model.named_parameters() if not n.endswith("weight")]
        return torch.optim.Adam([{"params": decay, "weight_decay": 0.1},
                                 {"params": rest, "weight_decay": 0.0}], lr=0.05)

    ref = _TwoHeads(torch)
    ddp = DDP(ref.model, find_unused_parameters=True)
    ref_opt = adam(ref.model)
    ours = _TwoHeads(torch)
    opt = ringd.torch.DistributedOptimizer(adam(ours.model), ours.model.named_parameters(),
                                           compression=ringd.torch.Compression.none)
    aux0 = ours.aux.weight.detach().clone()
    for step in range(12):
        ref_opt.zero_grad(set_to_none=True)
        # DDP's forward must see the aux head in the graph only when it is used
        ref.model.forward = lambda s=step: ref.loss(torch, s, t.rank)
        ddp().backward()
        ref_opt.step()
        opt.zero_grad(set_to_none=True)
        ours.loss(torch, step, t.rank).backward()
        opt.step()
        if step == 3:
            t.ok(torch.equal(ours.aux.weight, aux0) and ours.aux.weight.grad is None,
                 "unused: a head no peer used is not updated (its .grad stays None)")
    diff = (ours.params(torch) - ref.params(torch)).abs().max().item()
    t.diag("unused: max |DistributedOptimizer - DDP| = %.3g" % diff)
    t.ok(diff <= 1e-6, "unused: the same parameters as DDP with find_unused_parameters",
         "max |diff| = %.3g" % diff)
    t.same("unused: parameters", ringtest.digest(ours.params(torch)))
    opt.finish()
    # sparse embedding gradients (set_to_none: they used to fail, then say "produced
    # again"): they travel dense, come back sparse, and train as dense ones do
    weights = []
    for sparse in (True, False):
        torch.manual_seed(0)
        emb, lin = torch.nn.Embedding(10, 4, sparse=sparse), torch.nn.Linear(4, 1)
        both = torch.nn.ModuleDict({"emb": emb, "lin": lin})
        eopt = ringd.torch.DistributedOptimizer(torch.optim.SGD(both.parameters(), lr=0.1),
                                                both.named_parameters())
        for step in range(3):
            eopt.zero_grad(set_to_none=True)
            lin(emb(torch.tensor([t.rank, 5, step]))).sum().backward()
            eopt.step()
        t.ok(emb.weight.grad.is_sparse == sparse, "unused: sparse=%s gradient comes back %s"
             % (sparse, "sparse" if sparse else "dense"))
        weights.append(emb.weight.detach().clone())
    t.ok(torch.allclose(weights[0], weights[1], atol=1e-6),
         "unused: a sparse embedding trains as a dense one",
         (weights[0] - weights[1]).abs().max())
    # docs/pytorch.md's recipe for BatchNorm's per-rank running statistics
    bn = torch.nn.BatchNorm1d(4)
    bn(torch.randn(8, 4) + t.rank)
    ringd.torch.broadcast_parameters(dict(bn.named_buffers()), root_rank=0)
    t.same("unused: BatchNorm buffers after broadcast_parameters(named_buffers())",
           [ringtest.digest(b) for b in bn.buffers()])


def checks(t):
    try:
        import torch
        import torch.distributed  # noqa: F401
    except ImportError as e:
        t.skip("ringd under DDP", "no PyTorch with torch.distributed: %s" % e)
        return
    torch.set_num_threads(1)
    import ringd
    import ringd.torch
    what = os.environ["RINGTEST_WHAT"]
    if what == "nested":
        nested_checks(t, ringd, torch)
    elif what == "powersgd":
        powersgd_checks(t, ringd, torch)
    elif what == "unused":
        unused_checks(t, ringd, torch)
    else:
        fault_checks(t, ringd, torch, what)


def job(n, what):
    env = {"RINGTEST_WHAT": what}
    if what == "powersgd":
        # torch 2.x's PowerSGD hook calls torch.cuda.synchronize() with the CPU tensors'
        # device wherever CUDA is available, and raises (torch's, seen with 2.11)
        env["CUDA_VISIBLE_DEVICES"] = ""
    return (n, env)


def job_env(n):
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(ringtest.free_ports(1)[0]),
            "RING_TIMEOUT": "%gs" % TIMEOUT, "RING_CONNECT_TIMEOUT": "60s"}


ringtest.main(checks, launcher="env", env=job_env,
              worlds=(job(3, "ddp-kill"), job(3, "hook-kill"), job(3, "ddp-stop"),
                      job(2, "hook-stop"), job(2, "nested"), job(3, "nested"),
                      job(2, "powersgd"), job(2, "unused"), job(3, "unused")),
              killed=lambda n, env: {VICTIM} if "-" in env["RINGTEST_WHAT"] else set())
