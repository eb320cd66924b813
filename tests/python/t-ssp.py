"""ringd.torch.SSP, libringd's SSP session from PyTorch, with N real peers:

  sync     staleness 0 is synchronous SGD: after K steps every peer's model
           equals (bitwise) a single-process model trained with torch.optim.SGD
           (momentum, weight decay) on the average of the peers' gradients -
           checked to 1e-5, and the peers agree bit for bit
  bounded  S = 2 with a slow rank: no step more than 2 ahead, the fast ranks
           ran ahead, the final models agree; stats count every step
  async    staleness None: nothing blocks, the models agree after finish()
  fresh    fresh_wait long enough: no step of S = 4 is stale beside a slower rank
           (each waits for its peers' previous steps), and stats count the wait; a
           rank's 1 s stall is not waited for once a round says its step is late
           (fresh_late, stats fresh_cut)
  gather   steps of ranks in phase landing 3 ms apart travel in one round (round_gather,
           stats gather_rounds); round_gather=0 sends them in more rounds
  late     in the lockstep warm-up, the last rank's 1 s step (against 10 ms) is
           dropped (warmup_late, stats late_steps): rank 0 is not held for it, every
           other step is applied, the models agree; warmup_late=0 waits for it
  stop     request_stop on rank 1 (0 alone): every peer's loop ends (ssp.stopped), the
           models agree
  budget   stop_at_steps (a shared budget) with a slow rank 0: every peer stops once
           their steps add up to it; delay_compensation and round_idle are taken
  owned    while a session is open, other collectives raise InvalidError; after
           close() they work again
  unused   zero_grad() in the loop (None by default since torch 2.0; set_to_none=True
           asked for on 1.13), inside the step or before it, a head no peer uses and one
           rank 0 alone uses on even steps: a None .grad counts as zeros, staleness 0 is
           still torch.optim.SGD on the average, the peers agree, .grad is the buffer's
           view again after each step
  misuse   float64 parameters, bad settings: typed errors that say what to do
"""
import inspect
import time

import ringtest

ringtest.JOB_TIMEOUT = 120.0


def make_model(torch, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def batch(torch, rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)


def loss_of(torch, net, x, y):
    return torch.nn.functional.cross_entropy(net(x), y)


def flat(torch, net):
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def sync_checks(t, ringd, torch):
    steps, lr, mom, wd = 6, 0.1, 0.9, 0.01
    net = make_model(torch)
    ssp = ringd.torch.SSP(net, staleness=0, lr=lr, momentum=mom, weight_decay=wd)
    taus = []
    for s in range(steps):
        with ssp.step() as info:
            taus.append(info["tau"])
            x, y = batch(torch, t.rank, s)
            loss_of(torch, net, x, y).backward()
    ssp.finish()
    ssp.close()
    t.ok(taus == [0] * steps, "sync: staleness 0 never ran ahead", taus)
    t.same("sync: the models after %d steps" % steps, ringtest.digest(flat(torch, net)))
    # the reference: one process, every peer's gradient averaged, torch.optim.SGD
    ref = make_model(torch)
    opt = torch.optim.SGD(ref.parameters(), lr=lr, momentum=mom, weight_decay=wd)
    for s in range(steps):
        grads = []
        for r in range(t.world):
            ref.zero_grad()
            x, y = batch(torch, r, s)
            loss_of(torch, ref, x, y).backward()
            grads.append([p.grad.clone() for p in ref.parameters()])
        for i, p in enumerate(ref.parameters()):
            p.grad = sum(g[i] for g in grads) / t.world
        opt.step()
    diff = (flat(torch, net) - flat(torch, ref)).abs().max().item()
    t.ok(diff < 1e-5, "sync: staleness 0 is synchronous SGD (torch.optim.SGD on the average)",
         "max difference %g" % diff)


def bounded_checks(t, ringd, torch):
    net = make_model(torch)
    ssp = ringd.torch.SSP(net, staleness=2, lr=0.05)
    maxtau = 0
    for s, info in enumerate(ssp.steps(30)):
        maxtau = max(maxtau, info["tau"])
        if t.rank == t.world - 1:
            time.sleep(0.02)  # the straggler
        x, y = batch(torch, t.rank, s)
        loss_of(torch, net, x, y).backward()
    ssp.finish()
    st = ssp.stats()
    ssp.close()
    t.ok(maxtau <= 2, "bounded: no step more than S=2 ahead of the slowest", maxtau)
    if t.world > 1:  # every rank reports the check; rank 0 is the one it is about
        t.ok(t.rank != 0 or (maxtau >= 1 and st["blocked_s"] > 0),
             "bounded: rank 0 ran ahead and was blocked", st)
    t.eq(st["contributions"], 30 * t.world, "bounded: the rounds applied every peer's 30 steps")
    t.same("bounded: the final models", ringtest.digest(flat(torch, net)))


def async_checks(t, ringd, torch):
    net = make_model(torch)
    ssp = ringd.torch.SSP(net, staleness=None, lr=0.05)
    for s, info in enumerate(ssp.steps(20)):
        if t.rank == 0:
            time.sleep(0.01)
        x, y = batch(torch, t.rank, s)
        loss_of(torch, net, x, y).backward()
    ssp.finish()
    st = ssp.stats()
    ssp.close()
    t.ok(st["blocked_s"] == 0, "async: no step blocked", st["blocked_s"])
    t.same("async: the final models", ringtest.digest(flat(torch, net)))


def fresh_checks(t, ringd, torch):
    net = make_model(torch)
    # fresh_late=0: a loaded host may stretch the last rank's 15 ms past 1.25 step times
    ssp = ringd.torch.SSP(net, staleness=4, lr=0.05, fresh_wait=30.0, fresh_late=0)
    maxtau = 0
    for s, info in enumerate(ssp.steps(15)):
        maxtau = max(maxtau, info["tau"])
        time.sleep(0.015 if t.rank == t.world - 1 else 0.005)  # the last rank is slower
        x, y = batch(torch, t.rank, s)
        loss_of(torch, net, x, y).backward()
    ssp.finish()
    st = ssp.stats()
    ssp.close()
    t.ok(maxtau == 0, "fresh: fresh_wait=30 with a slower rank: no step stale", maxtau)
    if t.world > 1:
        t.ok(t.rank != 0 or st["fresh_s"] > 0, "fresh: rank 0 waited for fresh parameters", st)
    t.eq(st["contributions"], 15 * t.world, "fresh: the rounds applied every peer's 15 steps")
    t.same("fresh: the final models", ringtest.digest(flat(torch, net)))


def fresh_late_checks(t, ringd, torch):
    net = make_model(torch)
    ssp = ringd.torch.SSP(net, staleness=4, lr=0.05, fresh_wait=0.3)
    longest = 0.0
    for s, info in enumerate(ssp.steps(12)):
        longest = max(longest, info["fresh_s"])
        stall = t.rank == t.world - 1 and s == 5
        time.sleep(1.0 if stall else 0.005)
        x, y = batch(torch, t.rank, s)
        loss_of(torch, net, x, y).backward()
    ssp.finish()
    st = ssp.stats()
    ssp.close()
    if t.world > 1:
        # waited out, the stall would hold one step the whole 0.3 s
        t.ok(t.rank != 0 or (longest < 0.2 and st["fresh_cut"] >= 1),
             "fresh late: the last rank's 1 s stall was not waited out (fresh_wait 0.3 s)",
             (longest, st))
    t.eq(st["contributions"], 12 * t.world, "fresh late: the rounds applied every step")
    t.same("fresh late: the final models", ringtest.digest(flat(torch, net)))


def gather_checks(t, ringd, torch, gather):
    what = "gather (round_gather=%s)" % gather
    net = make_model(torch)
    ssp = ringd.torch.SSP(net, staleness=4, lr=0.05, round_gather=gather)
    for s, info in enumerate(ssp.steps(20)):
        time.sleep(0.030 + 0.003 * t.rank)  # in phase, landing 3 ms apart
        x, y = batch(torch, t.rank, s)
        loss_of(torch, net, x, y).backward()
    ssp.finish()
    st = ssp.stats()
    ssp.close()
    per_round = st["contributions"] / max(1, st["rounds_applied"])
    if gather is None and t.world > 1:
        t.ok(per_round >= 0.8 * t.world and st["gather_rounds"] > 0,
             what + ": about one step of every rank a round", (per_round, st["gather_rounds"]))
    else:
        t.ok(st["gather_rounds"] == 0, what + ": no round waited for a step",
             (per_round, st["gather_rounds"]))
    t.eq(st["contributions"], 20 * t.world, what + ": the rounds applied every step once")
    t.same(what + ": the final models", ringtest.digest(flat(torch, net)))


def late_checks(t, ringd, torch, late):
    what = "late (warmup_late=%g)" % late
    net = make_model(torch)
    ssp = ringd.torch.SSP(net, staleness=4, lr=0.05, warmup_steps=1000, warmup_late=late)
    t0 = time.monotonic()
    blocked = 0.0
    for s, info in enumerate(ssp.steps(12)):
        blocked += info["blocked_s"]
        time.sleep(1.0 if s == 4 and t.rank == t.world - 1 else 0.01)
        x, y = batch(torch, t.rank, s)
        loss_of(torch, net, x, y).backward()
    ssp.finish()
    st = ssp.stats()
    ssp.close()
    dropped = torch.tensor([float(st["late_steps"])])
    ringd.allreduce(dropped, op="sum")
    dropped = int(dropped.item())
    if late > 0 and t.world == 1:
        t.eq(dropped, 0, what + ": alone in the ring, no step is dropped (none waits for it)")
    elif late > 0:
        t.ok(t.rank != t.world - 1 or st["late_steps"] >= 1,
             what + ": the last rank's 1 s step was dropped", st["late_steps"])
        t.ok(t.rank != 0 or blocked < 0.6, what + ": rank 0 was not held for it", blocked)
    else:
        t.eq(dropped, 0, what + ": no step dropped")
        if t.world > 1:
            t.ok(t.rank != 0 or blocked >= 0.8, what + ": rank 0 waited for it", blocked)
    t.eq(st["contributions"] + dropped, 12 * t.world,
         what + ": the rounds applied every step that was not dropped")
    t.same(what + ": the final models", ringtest.digest(flat(torch, net)))
    t.ok(time.monotonic() - t0 < 30, what + ": done in time")


def stop_checks(t, ringd, torch):
    net = make_model(torch)
    ssp = ringd.torch.SSP(net, staleness=2, lr=0.05)
    done, stopper = 0, min(1, t.world - 1)
    for _ in range(2000):  # bounded: the stop ends it long before
        with ssp.step() as info:
            if info is None:
                break
            x, y = batch(torch, t.rank, done)
            loss_of(torch, net, x, y).backward()
        done += 1
        if t.rank == stopper and done == 5:
            ssp.request_stop()
        time.sleep(0.002)
    ssp.finish()
    ssp.close()
    t.ok(ssp.stopped and done < 2000, "stop: request_stop on rank %d ended every loop" % stopper, done)
    t.same("stop: the final models", ringtest.digest(flat(torch, net)))


def budget_checks(t, ringd, torch):
    net = make_model(torch)
    budget = 20 * t.world
    ssp = ringd.torch.SSP(net, staleness=None, lr=0.05, stop_at_steps=budget,
                          delay_compensation=0.5, round_idle=0.001)
    done = 0
    for info in ssp.steps(1000):  # bounded: the budget ends it
        time.sleep(0.02 if t.rank == 0 else 0.004)  # rank 0 is slow: the others do more
        x, y = batch(torch, t.rank, done)
        loss_of(torch, net, x, y).backward()
        done += 1
    ssp.finish()
    st = ssp.stats()
    ssp.close()
    # the stop travels in the next round: steps pushed meanwhile count too
    t.ok(ssp.stopped and budget <= st["total_clock"] < 2 * budget,
         "budget: stop_at_steps=%d stopped every peer once their steps added up" % budget,
         (done, st["total_clock"]))
    t.same("budget: every peer stopped at the same total", st["total_clock"])
    if t.world > 1:  # every rank reports it; the slow rank 0 is the one it is about
        t.ok(t.rank != 0 or done < budget / t.world, "budget: the slow rank 0 did fewer than "
             "its share of the steps, the fast ones the rest", done)
    t.same("budget: the final models", ringtest.digest(flat(torch, net)))


def owned_checks(t, ringd, torch):
    net = make_model(torch)
    ssp = ringd.torch.SSP(net, staleness=1, lr=0.05)
    x = torch.ones(4)
    t.raises(ringd.InvalidError, lambda: ringd.allreduce(x),
             "owned: an allreduce while the session is open raises InvalidError",
             lambda e: "SSP session" in str(e))
    ssp.finish()
    ssp.close()
    ringd.allreduce(x, op="sum")
    t.eq(x.tolist(), [float(t.world)] * 4, "owned: after close() the communicator is ringd's")
    t.raises(ringd.InvalidError, lambda: ssp.wait(), "owned: a closed session raises")


def misuse_checks(t, ringd, torch):
    t.raises(ringd.InvalidError, lambda: ringd.torch.SSP(make_model(torch).double()),
             "misuse: float64 parameters: InvalidError naming float32",
             lambda e: "float32" in str(e))
    t.raises(ringd.InvalidError, lambda: ringd.torch.SSP(make_model(torch), warmup_late=0.5),
             "misuse: warmup_late 0.5 (would drop steps of the usual length): InvalidError",
             lambda e: "warmup_late 0.5" in str(e))
    t.raises(ringd.InvalidError, lambda: ringd.torch.SSP(make_model(torch),
                                                         round_gather=float("nan")),
             "misuse: round_gather NaN: InvalidError naming the round gather",
             lambda e: "round gather" in str(e))
    t.raises(ringd.InvalidError, lambda: ringd.torch.SSP(make_model(torch), fresh_late=0.5),
             "misuse: fresh_late 0.5 (every step would be late): InvalidError naming it",
             lambda e: "fresh_late 0.5" in str(e))


def unused_checks(t, ringd, torch):
    steps, lr, mom, wd = 6, 0.1, 0.9, 0.01
    default = inspect.signature(torch.optim.Optimizer.zero_grad).parameters["set_to_none"]
    kw = {} if default.default is True else {"set_to_none": True}

    class Heads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(2)
            self.body, self.head = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)
            self.aux, self.dead = torch.nn.Linear(32, 4), torch.nn.Linear(32, 4)

        def loss(self, rank, step):
            x, y = batch(torch, rank, step)
            h = torch.relu(self.body(x))
            out = self.head(h) + (self.aux(h) if rank == 0 and step % 2 == 0 else 0)
            return torch.nn.functional.cross_entropy(out, y)

    net = Heads()
    ssp = ringd.torch.SSP(net, staleness=0, lr=lr, momentum=mom, weight_decay=wd)
    views = True
    for s in range(steps):
        if s % 2:
            net.zero_grad(**kw)  # before the step: wait() makes .grad the views again
        with ssp.step():
            if s % 2 == 0:
                net.zero_grad(**kw)  # inside: backward makes new .grad, push copies them
            net.loss(t.rank, s).backward()
        views = views and all(p.grad is not None and p.grad.data_ptr() == v.data_ptr()
                              for p, v in zip(net.parameters(), ssp._grad_views))
    ssp.finish()
    ssp.close()
    t.ok(views, "unused: after each step every .grad is the session's buffer again")
    t.same("unused: the models after %d steps" % steps, ringtest.digest(flat(torch, net)))
    ref = Heads()
    opt = torch.optim.SGD(ref.parameters(), lr=lr, momentum=mom, weight_decay=wd)
    for s in range(steps):
        total = [torch.zeros_like(p) for p in ref.parameters()]
        for r in range(t.world):
            ref.zero_grad(set_to_none=True)
            ref.loss(r, s).backward()
            for g, p in zip(total, ref.parameters()):
                if p.grad is not None:  # None: zeros, as the session counts it
                    g += p.grad
        for g, p in zip(total, ref.parameters()):
            p.grad = g / t.world
        opt.step()
    diff = (flat(torch, net) - flat(torch, ref)).abs().max().item()
    t.ok(diff < 1e-5, "unused: zero_grad(%s) and unused heads: still torch.optim.SGD on the "
         "average, None counted as zeros" % ", ".join("%s=%s" % x for x in kw.items()),
         "max difference %g" % diff)


def checks(t):
    try:
        import torch
    except ImportError as e:
        t.skip("ringd.torch.SSP", "no PyTorch: %s" % e)
        return
    torch.set_num_threads(1)
    import ringd
    import ringd.torch
    ringd.init(timeout="10s")
    sync_checks(t, ringd, torch)
    bounded_checks(t, ringd, torch)
    async_checks(t, ringd, torch)
    fresh_checks(t, ringd, torch)
    fresh_late_checks(t, ringd, torch)
    gather_checks(t, ringd, torch, None)
    gather_checks(t, ringd, torch, 0)
    late_checks(t, ringd, torch, 1.5)
    late_checks(t, ringd, torch, 0)
    stop_checks(t, ringd, torch)
    budget_checks(t, ringd, torch)
    owned_checks(t, ringd, torch)
    unused_checks(t, ringd, torch)
    misuse_checks(t, ringd, torch)
    ringd.shutdown()


ringtest.main(checks, worlds=(1, 3))
