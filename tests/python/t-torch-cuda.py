"""CUDA tensors on a GPU host (1..0 # SKIP no CUDA device elsewhere, on torch 1.13 and 2.x):
2..4 peers sharing one GPU (ringd takes one GPU per process; several processes may share
it), started by ringtest with MASTER_ADDR/PORT of their own:

  tensors  ringd.allreduce of CUDA tensors, codec none: bit for bit the CPU path's sum,
           in place and into out=, float16 and bfloat16 too, async; the stream contract:
           a kernel on a side stream writes the input right before the call (behind a
           sleep kernel) and another reads the result right after, with no host sync;
           wait(blocking=True); the staged broadcast, allgather and reduce_scatter;
           out= on the CPU: ValueError; a tensor on a second GPU (when there is one):
           ringd.InvalidError naming both
  fp16     the same with RING_CODEC=fp16 (fp32 tensors encoded on the GPU): within
           docs/codec.md's bound |err| <= N(2^-11 + 2^-24) sum|x| + N max(2^-39 B, 2^-125)
           of the exact (float64) sum, and bitwise the same on every peer
  training DistributedOptimizer (staleness 0 and 1), ringd.torch.allreduce_hook over
           gloo, and DDP over init_process_group("ringd"), with a CUDA model: the
           parameters bitwise the same on every peer, and within float tolerance of one
           process training on the N peers' batches together; SSP with CUDA parameters
           (staged): every peer ends with the same parameters
  example  examples/pytorch/fmnist_cnn.py --device cuda under ring-launch -n 2 learns
           (test accuracy > 0.5; skipped without Fashion-MNIST)

RINGD_TEST_CUDA_ON_CPU=1 runs the same checks with "cpu" for the device (what does not
depend on CUDA streams), to check this script itself on a host without a GPU; it proves
nothing about CUDA.
"""
import os
import subprocess
import sys

import ringtest

ON_CPU = os.environ.get("RINGD_TEST_CUDA_ON_CPU") == "1"
TIMEOUT = 60


def device(torch):
    return torch.device("cpu") if ON_CPU else torch.device("cuda", 0)


def inputs(torch, rank, n=100003, dtype=None):
    """Rank's input: values of mixed size and sign, the same wherever it is computed."""
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(n, generator=g) * torch.exp(torch.randn(n, generator=g) * 2)
    return x if dtype is None else x.to(dtype)


def tensor_checks(t, ringd, torch):
    dev, n = device(torch), ringd.size()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = inputs(torch, t.rank, dtype=dtype)
        host = ringd.allreduce(x.clone())
        d = x.to(dev)
        got = ringd.allreduce(d)
        t.ok(got is d and torch.equal(d.cpu().view(torch.int16 if dtype != torch.float32
                                                   else torch.int32),
                                      host.view(torch.int16 if dtype != torch.float32
                                                else torch.int32)),
             "allreduce of a %s tensor on %s, codec none: bit for bit the CPU path's sum"
             % (dtype, dev.type))
        t.same("allreduce %s on the device" % dtype, ringtest.digest(d.cpu()))
    x = inputs(torch, t.rank).to(dev)
    out = torch.full_like(x, -1)
    h = ringd.allreduce_async(x, op="avg", out=out)
    r = h.wait()
    t.ok(r is out and torch.equal(x, inputs(torch, t.rank).to(dev)),
         "allreduce_async(op='avg', out=) on the device: the result in out, the input kept")
    t.same("avg into out", ringtest.digest(out.cpu()))
    if not ON_CPU:
        t.raises(ValueError, lambda: ringd.allreduce(x, out=torch.empty(x.shape)),
                 "a device tensor with a CPU out=: ValueError naming both",
                 lambda e: "cpu" in str(e) and "cuda:0" in str(e))
        t.raises(ValueError, lambda: ringd.allgather(x, out=torch.empty((n * x.shape[0],))),
                 "a device tensor with a CPU out= for allgather: ValueError")
        stream_checks(t, ringd, torch, dev, n)
        if torch.cuda.device_count() > 1:
            other = torch.ones(4, device="cuda:1")
            t.raises(ringd.InvalidError, lambda: ringd.allreduce(other),
                     "a tensor on cuda:1 after cuda:0: ringd.InvalidError naming both",
                     lambda e: "cuda:1" in str(e) and "cuda:0" in str(e))
        else:
            t.skip("a tensor on a second GPU", "one GPU on this host")
    # the other collectives, staged through host memory
    w = torch.arange(10, dtype=torch.float64, device=dev) * (t.rank + 1)
    ringd.broadcast(w, root=n - 1)
    t.ok(w.device == dev and torch.equal(w.cpu(), torch.arange(10, dtype=torch.float64) * n),
         "broadcast of a float64 device tensor from the last rank (staged)")
    g = ringd.allgather(torch.full((2, 3), t.rank, dtype=torch.int32, device=dev))
    t.ok(g.device == dev and torch.equal(g.cpu(), torch.arange(n, dtype=torch.int32)
                                         .repeat_interleave(2).view(-1, 1).expand(-1, 3)),
         "allgather of an int32 device tensor: a device tensor in rank order (staged)")
    rs = ringd.reduce_scatter(torch.ones(n * 4, device=dev) * (t.rank + 1))
    t.ok(rs.device == dev and torch.equal(rs.cpu(), torch.full((4,), n * (n + 1) / 2)),
         "reduce_scatter of a device tensor (staged)")


def stream_checks(t, ringd, torch, dev, n):
    """The stream contract: the call reads after the work queued on the current stream,
    the result is there for the work queued after it, without the host waiting."""
    side = torch.cuda.Stream(dev)
    want = torch.full((1 << 20,), n * (n + 1) / 2.0)
    with torch.cuda.stream(side):
        x = torch.zeros(1 << 20, device=dev)
        torch.cuda._sleep(200_000_000)   # ~0.1 s of GPU time before the write
        x.fill_(t.rank + 1.0)            # queued: not yet run when allreduce is called
        ringd.allreduce(x)
        y = x * 2                        # queued right after, no host sync
    side.synchronize()
    t.ok(torch.equal(x.cpu(), want) and torch.equal(y.cpu(), want * 2),
         "a side stream: the write queued behind a sleep is what is reduced, and the "
         "kernel queued right after reads the sum (stream order, no host sync)")
    with torch.cuda.stream(side):
        x = torch.zeros(1 << 20, device=dev)
        torch.cuda._sleep(200_000_000)
        x.fill_(t.rank + 1.0)
        h = ringd.allreduce_async(x)
        h.wait(blocking=True)
    t.ok(torch.equal(x.cpu(), want), "wait(blocking=True): the sum is there on the host")
    xs = [torch.full((1000,), float(t.rank + i), device=dev) for i in range(6)]
    hs = [ringd.allreduce_async(v, tensor_id=i) for i, v in enumerate(xs)]
    hs[-1].wait()
    hs[0].wait(blocking=True)  # already finished on its stream by the wait above
    torch.cuda.synchronize()
    t.ok(all(torch.equal(v.cpu(), torch.full((1000,), float(n * (n - 1) / 2 + n * i)))
             for i, v in enumerate(xs)), "6 device allreduces in flight, waited out of order")


def fp16_checks(t, ringd, torch):
    dev, n = device(torch), ringd.size()
    xs = [inputs(torch, r).double() for r in range(n)]
    exact = sum(xs)
    abs_sum = sum(x.abs() for x in xs)
    bound_b = sum(x.abs().max() for x in xs)  # >= every chunk's B
    bound = n * (2.0 ** -11 + 2.0 ** -24) * abs_sum + n * max(2.0 ** -39 * float(bound_b),
                                                              2.0 ** -125)
    d = inputs(torch, t.rank).to(dev)
    ringd.allreduce(d)
    err = (d.cpu().double() - exact).abs()
    worst = float((err / bound).max())
    t.ok(worst <= 1.0, "fp16 codec, fp32 tensors on %s: every element within docs/codec.md's "
         "bound (worst at %.3g of it)" % (dev.type, worst), "worst %.3g" % worst)
    t.same("fp16 result on the device", ringtest.digest(d.cpu()))
    e = inputs(torch, t.rank).to(dev)
    ringd.allreduce(e, codec="exact")
    t.ok(float((e.cpu().double() - exact).abs().max()) <= 1e-3 * float(abs_sum.max()),
         "codec='exact' per call under RING_CODEC=fp16: fp32 on the wire")


class Net(object):
    @staticmethod
    def make(torch, seed=0):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.Tanh(),
                                   torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                   torch.nn.Linear(64, 5))


def batches(torch, rank, steps, batch=8):
    g = torch.Generator().manual_seed(77 + rank)
    return [(torch.randn(batch, 20, generator=g), torch.randint(0, 5, (batch,), generator=g))
            for _ in range(steps)]


def reference(torch, n, steps, lr, dev):
    """One process training on the N peers' batches together (the mean of their losses)."""
    net = Net.make(torch).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    per = [batches(torch, r, steps) for r in range(n)]
    for s in range(steps):
        opt.zero_grad()
        x = torch.cat([per[r][s][0] for r in range(n)]).to(dev)
        y = torch.cat([per[r][s][1] for r in range(n)]).to(dev)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return [p.detach().cpu() for p in net.parameters()]


def close_to(a, b, tol=2e-5):
    return all(float((x - y).abs().max()) <= tol * (1 + float(y.abs().max()))
               for x, y in zip(a, b))


def train(torch, model, opt, rank, steps, dev):
    for x, y in batches(torch, rank, steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev)).backward()
        opt.step()


def optimizer_checks(t, ringd, torch):
    import ringd.torch
    dev, n, steps, lr = device(torch), ringd.size(), 6, 0.05
    ref = reference(torch, n, steps, lr, dev)
    for staleness in (0, 1):
        net = Net.make(torch).to(dev)
        opt = ringd.torch.DistributedOptimizer(
            torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9), net.named_parameters(),
            staleness=staleness)
        train(torch, net, opt, t.rank, steps, dev)
        opt.finish()
        params = [p.detach().cpu() for p in net.parameters()]
        t.same("DistributedOptimizer staleness=%d on %s: parameters" % (staleness, dev.type),
               [ringtest.digest(p) for p in params])
        t.ok(all(p.device == dev for p in net.parameters()),
             "DistributedOptimizer staleness=%d: the parameters stay on %s" % (staleness, dev))
        if staleness == 0:
            t.ok(close_to(params, ref), "DistributedOptimizer on %s: within float tolerance "
                 "of one process with the %d peers' batches" % (dev.type, n))
    net = Net.make(torch).to(dev)
    ssp = ringd.torch.SSP(net, staleness=1, lr=lr, momentum=0.9)
    for x, y in batches(torch, t.rank, steps):
        with ssp.step():
            torch.nn.functional.cross_entropy(net(x.to(dev)), y.to(dev)).backward()
        if ssp.stopped:
            break
    ssp.finish()
    ssp.close()
    t.ok(all(p.device == dev for p in net.parameters()),
         "SSP with %s parameters (staged): they stay there" % dev.type)
    t.same("SSP staleness=1 on %s: parameters after finish()" % dev.type,
           [ringtest.digest(p.detach().cpu()) for p in net.parameters()])


def ddp_checks(t, ringd, torch, backend):
    """DDP over gloo with ringd's comm hook, or over the "ringd" backend (which takes the
    ring ringd.init() opened)."""
    import torch.distributed as dist
    import ringd.torch
    dev, n, steps, lr = device(torch), ringd.size(), 6, 0.05
    ref = reference(torch, n, steps, lr, dev)
    dist.init_process_group(backend, rank=t.rank, world_size=n)
    net = Net.make(torch).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(
        net, device_ids=[dev.index] if dev.type == "cuda" else None)
    if backend == "gloo":
        ddp.register_comm_hook(None, ringd.torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=0.9)
    train(torch, ddp, opt, t.rank, steps, dev)
    params = [p.detach().cpu() for p in net.parameters()]
    what = "allreduce_hook over gloo" if backend == "gloo" else 'init_process_group("ringd")'
    t.same("DDP with %s on %s: parameters" % (what, dev.type),
           [ringtest.digest(p) for p in params])
    t.ok(close_to(params, ref), "DDP with %s on %s: within float tolerance of one process "
         "with the %d peers' batches" % (what, dev.type, n))
    if backend == "ringd":
        c = torch.arange(6, dtype=torch.float32, device=dev) * (t.rank + 1)
        dist.all_reduce(c)
        b = torch.full((3,), float(t.rank), device=dev)
        dist.broadcast(b, src=0)
        outs = [torch.empty(2, device=dev) for _ in range(n)]
        dist.all_gather(outs, torch.full((2,), float(t.rank), device=dev))
        t.ok(torch.equal(c.cpu(), torch.arange(6.0) * n * (n + 1) / 2) and
             torch.equal(b.cpu(), torch.zeros(3)) and
             all(torch.equal(o.cpu(), torch.full((2,), float(r))) for r, o in enumerate(outs)),
             'the "ringd" backend: all_reduce, broadcast, all_gather of %s tensors' % dev.type)
        fut = dist.all_reduce(torch.ones(4, device=dev), async_op=True).get_future()
        t.ok(torch.equal(fut.wait()[0].cpu(), torch.full((4,), float(n))),
             'the "ringd" backend: the future of a %s all_reduce' % dev.type)
        t.ok(dist.get_backend() == "ringd", "the default group is ringd's")
    dist.destroy_process_group()


def example_checks(t):
    """fmnist_cnn.py --device cuda under ring-launch -n 2 (from a job of one)."""
    data = os.environ.get("FMNIST", "/usr/share/datasets/fashion-mnist")
    if not os.path.exists(os.path.join(data, "train-images-idx3-ubyte.gz")):
        t.skip("fmnist_cnn.py --device cuda", "no Fashion-MNIST: apt-get install "
               "dataset-fashion-mnist")
        return
    top = os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), "..", ".."))
    launch = os.environ.get("RING_LAUNCH", "ring-launch")
    python = os.environ.get("RINGD_TEST_PYTHON", sys.executable)
    kind = "cpu" if ON_CPU else "cuda"
    cmd = [launch, "-n", "2", "--timeout", "500", "--", python,
           os.path.join(top, "examples", "pytorch", "fmnist_cnn.py"), "--epochs", "1",
           "--limit", "6000", "--width", "8,16,64", "--device", kind]
    # this job's own ring variables must not reach ring-launch's ranks
    env = {k: v for k, v in os.environ.items()
           if k == "RING_LAUNCH" or not (k.startswith("RING") or k.startswith("MASTER_"))}
    env["OMP_NUM_THREADS"] = "1"
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=560,
                           env=env)
        out, rc = p.stdout.decode(errors="replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace"), "timeout"
    acc = [float(line.rsplit("test accuracy", 1)[1].split(",")[0])
           for line in out.splitlines() if "test accuracy" in line]
    t.ok(rc == 0 and acc and acc[-1] > 0.5,
         "fmnist_cnn.py --device %s under ring-launch -n 2: test accuracy > 0.5" % kind,
         "exit %s, accuracy %s; %s" % (rc, acc, "\n".join(out.splitlines()[-15:])))


def checks(t):
    import torch
    torch.set_num_threads(1)
    what = os.environ["RINGTEST_WHAT"]
    if what == "example":
        example_checks(t)
        return
    import ringd
    ringd.init(timeout="%ds" % TIMEOUT)
    if what == "tensors":
        tensor_checks(t, ringd, torch)
    elif what == "fp16":
        fp16_checks(t, ringd, torch)
    elif what == "optimizer":
        optimizer_checks(t, ringd, torch)
    else:
        ddp_checks(t, ringd, torch, what)
    ringd.shutdown()


def job_env(n):
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(ringtest.free_ports(1)[0]),
            "RING_TIMEOUT": "%ds" % TIMEOUT, "RING_CONNECT_TIMEOUT": "60s"}


if not os.environ.get("RINGTEST_WORKER"):
    try:
        import torch
    except ImportError as e:
        print("1..0 # SKIP torch is not installed for this Python (%s)" % e)
        sys.exit(0)
    if not ON_CPU and not torch.cuda.is_available():
        print("1..0 # SKIP no CUDA device (torch %s: torch.cuda.is_available() is False)"
              % torch.__version__)
        sys.exit(0)
ringtest.main(checks, launcher="env", env=job_env,
              worlds=[(n, {"RINGTEST_WHAT": "tensors"}) for n in (2, 3, 4)] +
                     [(n, {"RINGTEST_WHAT": "fp16", "RING_CODEC": "fp16"}) for n in (2, 4)] +
                     [(n, {"RINGTEST_WHAT": w}) for w in ("optimizer", "gloo", "ringd")
                      for n in (2, 3)] +
                     [(1, {"RINGTEST_WHAT": "example"})])
