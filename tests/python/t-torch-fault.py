"""ringd.torch when things go wrong, with N real peers started by ringtest
(RING_RANK/RING_WORLD_SIZE/RING_PEERS: ring-launch would stop the job when one
peer dies):

  kill     a peer SIGKILLs itself in the middle of a step (its allreduces
           started): the others raise ringd.PeerError naming it from step()
           within the timeout, and every later step raises it again
  buckets  one peer plans other fusion buckets (another bucket_bytes): the
           allreduces differ, and every peer raises ringd.MismatchError from
           step(), never a hang or a wrong average
  named    a DistributedOptimizer whose named_parameters miss some of the
           optimizer's parameters: ValueError naming how to fix it; before
           ringd.init(): NotInitializedError; broadcast_parameters of other
           shapes: the MismatchError names the tensor ("tensor id 0 is bias")
  pg       init_process_group("ringd") with no ring yet: the peers meet through
           the c10d store, DDP trains, the parameters agree
"""
import os
import signal
import time

import ringtest

ringtest.JOB_TIMEOUT = 90.0
TIMEOUT = 3.0
SLACK = 7.0


def model():
    import torch
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 32))


def train_step(opt, net, torch):
    opt.zero_grad()
    net(torch.randn(16, 32)).pow(2).mean().backward()
    opt.step()


def kill_checks(t, ringd, torch):
    net = model()
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.01),
                                           net.named_parameters(), bucket_bytes=16 << 10)
    train_step(opt, net, torch)
    t.ok(True, "kill: a step before the fault")
    victim = t.world - 1
    if t.rank == victim:
        opt.zero_grad()
        net(torch.randn(16, 32)).pow(2).mean().backward()  # its allreduces are started
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
    t0 = time.monotonic()
    err = None
    for _ in range(20):  # bounded: the first step or two raise
        try:
            train_step(opt, net, torch)
        except ringd.Error as e:
            err = e
            break
    took = time.monotonic() - t0
    t.ok(isinstance(err, ringd.PeerError), "kill: step() raises ringd.PeerError", repr(err))
    t.ok(err is not None and err.peer_rank == victim, "kill: it names rank %d" % victim,
         repr(err))
    t.ok(took < TIMEOUT + SLACK, "kill: within the timeout and some slack", "%.1f s" % took)
    t.raises(ringd.Error, lambda: train_step(opt, net, torch),
             "kill: a later step raises the sticky error")


def bucket_checks(t, ringd, torch):
    net = model()
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.01),
                                           net.named_parameters(),
                                           bucket_bytes=(4 << 10) if t.rank == 0 else (64 << 20))
    t0 = time.monotonic()
    t.raises(ringd.MismatchError, lambda: [train_step(opt, net, torch) for _ in range(3)],
             "buckets: other fusion buckets on one peer: MismatchError on every peer")
    t.ok(time.monotonic() - t0 < TIMEOUT + SLACK, "buckets: no hang")


def named_checks(t, ringd, torch):
    net = model()
    t.raises(ringd.NotInitializedError,
             lambda: ringd.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                                      net.named_parameters()),
             "named: before ringd.init(), NotInitializedError")
    ringd.init(timeout="%gs" % TIMEOUT)
    some = list(net.named_parameters())[:2]
    t.raises(ValueError,
             lambda: ringd.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                                      some),
             "named: named_parameters missing parameters: ValueError",
             lambda e: "named_parameters" in str(e))
    t.raises(ValueError,
             lambda: ringd.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                                      net.named_parameters(), staleness=-1),
             "named: staleness -1: ValueError")
    if t.world > 1:  # last: it breaks the ring
        m = torch.nn.Linear(4, 4 if t.rank == 0 else 5)
        err = None
        try:
            ringd.torch.broadcast_parameters(m.state_dict(), root_rank=0)
        except ringd.MismatchError as e:
            err = e
        # the root only sends, and may finish first; the others name the tensor
        t.ok(t.rank == 0 or (err is not None and "here tensor id 0 is bias" in str(err)),
             "named: broadcast_parameters of other shapes: MismatchError names the tensor",
             repr(err))


def pg_checks(t, ringd, torch):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(t.rank)  # DDP's constructor makes them equal
    dist.init_process_group("ringd", rank=t.rank, world_size=t.world)
    t.ok(ringd.is_initialized() and ringd.size() == t.world,
         "pg: init_process_group('ringd') brought the ring up through the c10d store")
    net = torch.nn.Linear(8, 4)
    ddp = DDP(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        g = torch.Generator().manual_seed(10 * step + t.rank)
        ddp(torch.randn(4, 8, generator=g)).sum().backward()
        opt.step()
    t.same("pg: parameters after 3 DDP steps",
           ringtest.digest(torch.cat([p.detach().reshape(-1) for p in net.parameters()])))
    dist.destroy_process_group()


def checks(t):
    try:
        import torch
    except ImportError as e:
        t.skip("ringd.torch faults", "no PyTorch: %s" % e)
        return
    torch.set_num_threads(1)
    import ringd
    import ringd.torch
    fault = os.environ["RINGTEST_FAULT"]
    if fault == "named":
        named_checks(t, ringd, torch)
        return
    if fault == "pg":
        pg_checks(t, ringd, torch)
        return
    ringd.init(timeout="%gs" % TIMEOUT, connect_timeout="30s")
    if fault == "kill":
        kill_checks(t, ringd, torch)
    else:
        bucket_checks(t, ringd, torch)


def job(n, fault, **env):
    return (n, dict({"RINGTEST_FAULT": fault}, **env))


def store_env(n):
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(ringtest.free_ports(1)[0])}


ringtest.main(checks, launcher="env", env=store_env,
              worlds=(job(3, "kill"), job(2, "kill"), job(3, "buckets"), job(2, "named"),
                      job(3, "pg")),
              killed=lambda n, env: {n - 1} if env["RINGTEST_FAULT"] == "kill" else set())
