"""Sync vs stale training of a PyTorch model through libringd's SSP session
(ringd.torch.SSP): Fashion-MNIST, the MLP of ringd's fmnist-mlp workload
(784-256-128-10), lockstep (S = 0), bounded (S >= 1) or async, with an
emulated accelerator and stragglers as ``ringd --device-ms/--jitter`` has them.

    ring-launch -n 4 -- /usr/bin/python3 fmnist_ssp.py --mode bounded --staleness 4 \\
        --device-ms 20 --jitter 0.1:5

Each step computes the real gradient, then sleeps until --device-ms have
passed since it began, as a host waits on a GPU (--jitter P:F makes a step
F times longer with probability P, deterministic from the seed, the step and
the rank; --straggler R:F makes rank R F times slower on every step). Rank 0
takes a snapshot of the master parameters every --eval-every steps (a copy,
off the critical path) and evaluates them all after training, so the time
to 85 % test accuracy is that of parameters that existed then. Rank 0 prints
a summary and, with --json FILE, writes it as JSON.
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import ringd
import ringd.torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fmnist_data  # noqa: E402


def mlp():
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                          nn.ReLU(), nn.Linear(128, 10))
    # initialised as ringd's fmnist-mlp (dense_init_he: normal weights of std sqrt(2 / fan_in),
    # zero biases), not torch's default (uniform, about 2.4x smaller), so that both runs train
    # the same model from the same kind of start
    for layer in model:
        if isinstance(layer, nn.Linear):
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)
    return model


def factor_spec(text, what):
    try:
        a, b = text.split(":")
        return float(a), float(b)
    except ValueError:
        raise SystemExit("%s %r: expected A:B, e.g. 0.1:5" % (what, text))


def step_factor(args, rank, step):
    f = 1.0
    if args.straggler and int(args.straggler[0]) == rank:
        f *= args.straggler[1]
    if args.jitter:
        rnd = random.Random((args.seed * 1000003 + step) * 1009 + rank)
        if rnd.random() < args.jitter[0]:
            f *= args.jitter[1]
    return f


def evaluate(model, x, y):
    with torch.no_grad():
        out = model(x)
        return (out.argmax(1) == y).float().mean().item(), F.cross_entropy(out, y).item()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["lockstep", "bounded", "async"], default="bounded")
    p.add_argument("--staleness", type=int, default=4, help="bounded: S (default 4)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: epochs)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--warmup-steps", type=int, default=-1,
                   help="bounded/async: lockstep for the first K steps (default: half an "
                        "epoch, as ringd's --warmup-steps auto)")
    p.add_argument("--warmup-late", type=float, default=1.5,
                   help="bounded/async: in the warm-up, a step still computing after this "
                        "many times its recent step time is dropped and its round goes on "
                        "(default 1.5, as ringd's --warmup-late; 0: wait, as lockstep does)")
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="cosine")
    p.add_argument("--update", choices=["sum", "mean", "steps"], default=None,
                   help="the rule for rounds holding more than one step per peer (default: "
                        "the library's)")
    p.add_argument("--no-momentum-compensation", dest="momentum_compensation",
                   action="store_false", help="(on by default, as in ringd)")
    p.add_argument("--fresh-wait", type=float, default=None,
                   help="bounded/async: seconds a step may wait for its peers' previous steps "
                        "when they are about to land (default: auto; 0: never)")
    p.add_argument("--fresh-late", type=float, default=1.25,
                   help="bounded/async: a fresh wait ends once a peer it waits for is this many "
                        "step times into its step (default 1.25; 0: wait it out)")
    p.add_argument("--round-gather", type=float, default=None,
                   help="bounded/async: seconds from its step time within which a peer's step "
                        "is waited for by a round carrying the others' (default: auto; 0: never)")
    p.add_argument("--device-ms", type=float, default=20.0,
                   help="emulated accelerator step time (0: CPU-bound)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="where the model trains (cuda: the session is staged through host "
                        "memory; one GPU per peer, by local rank)")
    p.add_argument("--jitter", type=lambda t: factor_spec(t, "--jitter"), default=None,
                   metavar="P:F")
    p.add_argument("--straggler", type=lambda t: factor_spec(t, "--straggler"), default=None,
                   metavar="RANK:F")
    p.add_argument("--eval-every", type=int, default=25, help="rank 0 snapshots every N steps")
    p.add_argument("--train-limit", type=int, default=0, help="use the first N training images")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", default=None, help="rank 0 writes its summary here")
    args = p.parse_args()

    torch.set_num_threads(1)
    # the session's engine thread drives its own rounds: a progress thread on top (ringd.init's
    # default, for DistributedOptimizer's overlap) only hands each allreduce to another thread
    # (lockstep 300 steps, 4 peers on 2 cores: 7.33-7.35 s without it, 7.44-7.55 s with it)
    ringd.init(progress_thread="off")
    rank, world = ringd.rank(), ringd.size()
    torch.manual_seed(args.seed)
    x, y = fmnist_data.load("train", args.train_limit or None)
    xt, yt = fmnist_data.load("test")
    dev = fmnist_data.device(args.device)
    x, y, xt, yt = x.to(dev), y.to(dev), xt.to(dev), yt.to(dev)
    mine = torch.arange(rank, x.shape[0], world)
    steps_per_epoch = mine.numel() // args.batch_size
    total = args.epochs * steps_per_epoch
    if args.max_steps:
        total = min(total, args.max_steps)
    model = mlp().to(dev)
    staleness = {"lockstep": 0, "bounded": args.staleness, "async": None}[args.mode]
    extra = {"update": args.update} if args.update else {}
    warmup = args.warmup_steps if args.warmup_steps >= 0 else steps_per_epoch // 2
    # a shared budget (ringd's --budget shared): the run ends when all peers' steps add up
    # to total x world, so fast peers train on while a slow one is behind
    ssp = ringd.torch.SSP(model, staleness=staleness, lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay, total_steps=total, warmup_steps=warmup,
                          stop_at_steps=total * world,
                          lr_schedule=args.lr_schedule,
                          momentum_compensation=args.momentum_compensation,
                          fresh_wait=args.fresh_wait, warmup_late=args.warmup_late,
                          round_gather=args.round_gather, fresh_late=args.fresh_late, **extra)
    snaps = []
    t0 = time.monotonic()
    step = 0
    gen = torch.Generator()
    while step < 10 * total:  # the session stops every peer at the shared budget
        epoch = step // steps_per_epoch
        if step % steps_per_epoch == 0:
            gen.manual_seed(args.seed * 7919 + epoch)
            order = mine[torch.randperm(mine.numel(), generator=gen)]
        at = (step % steps_per_epoch) * args.batch_size
        idx = order[at:at + args.batch_size]
        with ssp.step() as info:
            if info is None:
                break  # the peers stopped
            t1 = time.monotonic()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            if args.device_ms > 0:
                left = t1 + args.device_ms / 1e3 * step_factor(args, rank, step) - time.monotonic()
                if left > 0:
                    time.sleep(left)
            elif args.jitter or args.straggler:
                spent = time.monotonic() - t1
                time.sleep(spent * (step_factor(args, rank, step) - 1))
        step += 1
        if rank == 0 and step % args.eval_every == 0:
            snaps.append((step, time.monotonic() - t0, ssp.snapshot()))
    if rank == 0 and (not snaps or snaps[-1][0] != step):
        snaps.append((step, time.monotonic() - t0, ssp.snapshot()))
    wall_train = time.monotonic() - t0
    stats = ssp.stats()
    ssp.finish()
    wall = time.monotonic() - t0
    final_acc, final_loss = evaluate(model, xt, yt)
    ssp.close()
    samples = torch.tensor([float(step * args.batch_size)])
    ringd.allreduce(samples, op="sum")
    if rank == 0:
        probe = mlp().to(dev)
        t85 = None
        curve = []
        for s, t, flat in snaps:
            ssp.load_flat(probe, flat)
            acc, _ = evaluate(probe, xt, yt)
            curve.append((s, round(t, 3), round(acc, 4)))
            if t85 is None and acc >= 0.85:
                t85 = t
        steps_all = sum(stats["tau_hist"]) or 1
        summary = {
            "mode": args.mode, "staleness": staleness, "world": world,
            "device_ms": args.device_ms, "jitter": args.jitter, "straggler": args.straggler,
            "seed": args.seed, "steps": step, "wall_s": round(wall, 3),
            "train_s": round(wall_train, 3), "samples_per_s": round(samples.item() / wall, 1),
            "final_acc": round(final_acc, 4), "final_loss": round(final_loss, 4),
            "time_to_85": None if t85 is None else round(t85, 3),
            "rounds": stats["rounds"], "rounds_applied": stats["rounds_applied"],
            "tau_hist": [round(100.0 * n / steps_all, 1) for n in stats["tau_hist"]],
            "blocked_s": round(stats["blocked_s"], 3), "fresh_s": round(stats["fresh_s"], 3),
            "late_steps": stats["late_steps"],
            "gather_rounds": stats["gather_rounds"],
            "fresh_cut": stats["fresh_cut"],
            "curve": curve,
        }
        print("fmnist_ssp %s S=%s n=%d: %d steps in %.2f s, %.0f samples/s, test accuracy "
              "%.2f%%, 85%% at %s, blocked %.2f s, %d rounds" % (
                  args.mode, "-" if staleness is None else staleness, world, step, wall,
                  summary["samples_per_s"], 100 * final_acc,
                  "never" if t85 is None else "%.2f s" % t85, stats["blocked_s"],
                  stats["rounds"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f)
    ringd.shutdown()
    return 0 if math.isfinite(final_loss) else 1


if __name__ == "__main__":
    sys.exit(main())
