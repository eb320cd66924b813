"""Elastic training with ringd.torch: a peer dies, the others shrink the ring and
train on from the last commit, without restarting anyone (docs/elastic.md).

A small MLP learns a fixed random teacher from synthetic data. Every step
draws one global batch of --global-batch rows from a generator seeded by the
step number, and rank r of N trains on rows [r*B/N, (r+1)*B/N): the global
batch and its order do not depend on N, only how it is split. So after a
peer is lost, the survivors (renumbered 0..N-2 in ring order) train on
exactly the shards a fresh run of N-1 processes would, and with the same
model, optimizer state and ring of N-1 their losses and parameters are
bitwise those of that run (tests/python/t-elastic.py checks it). Gradients
are averaged (op avg) over a global batch of fixed size, so the learning
rate needs no rescaling when N changes; the reset callback re-shards.

    # 4 processes on 127.0.0.1; the process of rank 2 SIGKILLs itself at step 15
    /usr/bin/python3 elastic_synthetic.py --spawn 4 --die-rank 2 --die-at 15

    # and a replacement started then, which joins at the next commit (back to 4)
    /usr/bin/python3 elastic_synthetic.py --spawn 4 --die-rank 2 --die-at 15 \
        --join 1 --join-at-step 15 --steps 300 --step-time 0.02

    # or under a launcher that lets the survivors run on (RING_RANK, RING_PEERS...)
    python3 elastic_synthetic.py --die-rank 2 --die-at 15

--spawn N starts N copies of this script as the ranks of one ring, on free
ports of 127.0.0.1 (ring-launch stops a whole job when one rank dies; its
elastic mode is issue 47's item 4); --join K starts K more when the ranks
print step --join-at-step, and they join (with --join or --store the ranks
meet at a tcp rendezvous store with RING_ELASTIC=on, which is what lets a
peer join; the store lives in the process of rank 0). Every process prints,
per step, its local loss ("p2 rank 1/3 step 16 loss 0.4521..."), the lines
of the reset after a change, and at the end its parameters' sha256 and their
sum.
--save-resume FILE: after a membership change, rank 0 saves the state the
survivors resumed from (model, optimizer, step); --resume FILE starts from
such a file (the fresh run of N-1 processes to compare with).
"""
import argparse
import hashlib
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import ringd
import ringd.torch

IN, HIDDEN, OUT = 32, 64, 8


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                         nn.Linear(HIDDEN, OUT))


def global_batch(step, rows, seed):
    """The step's whole batch: the same on every peer, whatever the ring's size."""
    g = torch.Generator().manual_seed(seed * 1000003 + step)
    teacher = torch.Generator().manual_seed(seed + 7)
    w = torch.randn(IN, OUT, generator=teacher)
    x = torch.randn(rows, IN, generator=g)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(rows, OUT, generator=g)
    return x, y


def say(text):
    """One line in one write: the ranks share a terminal (or a pipe)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def digest(model):
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest(), float(flat.double().sum())


def train_main(args):
    torch.set_num_threads(1)
    ringd.init(timeout=args.timeout)
    # the process's rank when it started (the launcher's): its name in the output
    me = int(os.environ.get("RING_RANK", ringd.rank()))
    if ringd.elastic.joined():
        say("p%d joined the running ring as rank %d of %d" % (me, ringd.rank(), ringd.size()))
    net = make_model()
    opt = ringd.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=args.lr,
                                                           momentum=0.9),
                                           net.named_parameters())
    step0 = 0
    if args.resume:
        saved = torch.load(args.resume)
        net.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        step0 = saved["step"]
    # a joiner's values are replaced by rank 0's when train() starts (run()'s sync)
    state = ringd.torch.elastic.TorchState(model=net, optimizer=opt, step=step0, end=args.steps)
    shard = {"rank": ringd.rank(), "size": ringd.size()}

    def reshard(size, rank):
        """After every membership change: this peer's slice of the global batch."""
        if args.global_batch % size:
            raise SystemExit("--global-batch %d is not a multiple of the ring's size %d"
                             % (args.global_batch, size))
        shard.update(rank=rank, size=size)
        if args.until_size and size >= args.until_size:  # the same on every peer
            state.end = max(state.end, state.step + 10)
        c = state.changes[-1]
        why = "" if c.error is None else "; %s naming rank %s" % (type(c.error).__name__,
                                                                  c.error.peer_rank)
        say("p%d reset: now rank %d of %d, resuming at step %d (%s%s; %.3f s)"
            % (me, rank, size, state.step, c.report, why, c.seconds))
        if args.save_resume and rank == 0:
            torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(),
                        "step": state.step}, args.save_resume)

    state.register_reset_callbacks([reshard])

    def more():  # the same answer on every peer: the synced state and the ring's size
        return state.step < state.end or (ringd.size() < args.until_size and
                                           state.step < 50 * args.steps)

    @ringd.elastic.run(min_size=args.min_size, max_resets=args.max_resets)
    def train(state):
        while more():
            x, y = global_batch(state.step, args.global_batch, args.seed)
            per = args.global_batch // shard["size"]
            lo = shard["rank"] * per
            opt.zero_grad()
            loss = F.mse_loss(net(x[lo:lo + per]), y[lo:lo + per])
            loss.backward()  # the gradient's allreduce starts here
            if me == args.die_rank and state.step == args.die_at:
                say("p%d dies at step %d (SIGKILL)" % (me, state.step))
                os.kill(os.getpid(), signal.SIGKILL)
            opt.step()
            say("p%d rank %d/%d step %d loss %r" % (me, shard["rank"], shard["size"],
                                                   state.step, loss.item()))
            if args.step_time:
                time.sleep(args.step_time)  # a longer step's compute, for joiners to come
            state.step += 1
            state.commit()  # where a failure rolls back to, and where joiners come in

    if args.global_batch % ringd.size():
        raise SystemExit("--global-batch %d must be a multiple of the ring's size %d"
                         % (args.global_batch, ringd.size()))
    train(state)
    opt.finish()
    sha, total = digest(net)
    say("p%d final: rank %d of %d after %d change(s): params sha256 %s sum %.17g"
        % (me, ringd.rank(), ringd.size(), state.resets, sha, total))
    ringd.shutdown()


def free_ports(n):
    """n ports free on 127.0.0.1 now, below the kernel's ephemeral range."""
    ports, rnd = [], random.Random(os.getpid() ^ time.time_ns())
    while len(ports) < n:
        p = rnd.randint(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
        if p not in ports:
            ports.append(p)
    return ports


STEP_LINE = re.compile(r" step (\d+) loss ")


def spawn(args, argv):
    """Run this script as args.spawn ranks on 127.0.0.1 (and args.join more once a step
    >= args.join_at_step is printed); 0 when every process exited 0 but the one
    --die-rank killed. Their output is passed on line by line."""
    n, k = args.spawn, args.join
    child_argv, skip = [], False
    for a in argv:  # this command line without --spawn
        if skip:
            skip = False
        elif a == "--spawn":
            skip = True
        elif not a.startswith("--spawn="):
            child_argv.append(a)
    if k or args.store:
        # a rendezvous store (rank 0 serves it) and the elastic setting: peers can join
        base = {"RING_RENDEZVOUS": "tcp://127.0.0.1:%d" % free_ports(1)[0],
                "RING_ELASTIC": "on", "RING_JOB_ID": "elastic-synthetic-%d" % os.getpid()}
    else:
        base = {"RING_PEERS": ",".join("127.0.0.1:%d" % p for p in free_ports(n))}
    procs, lock = [], threading.Lock()

    def start(rank, world):
        env = dict(os.environ, RING_RANK=str(rank), RING_WORLD_SIZE=str(world),
                   RING_LOCAL_RANK=str(rank), RING_LOCAL_SIZE=str(world), **base)
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + child_argv, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=relay, args=(p,), daemon=True).start()
        with lock:
            procs.append(p)

    joined = threading.Event()

    def relay(p):
        for line in p.stdout:
            say(line.rstrip("\n"))
            m = STEP_LINE.search(line)
            if k and m and int(m.group(1)) >= args.join_at_step and not joined.is_set():
                joined.set()
                for i in range(k):  # a joiner's rank and size only need to be valid
                    start(n + i, n + k)

    for r in range(n):
        start(r, n)
    deadline = time.monotonic() + args.time_limit
    codes, i = [], 0
    while True:
        with lock:
            if i == len(procs):
                break
            p = procs[i]
        try:
            codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append("timeout")
        i += 1
    with lock:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    time.sleep(0.2)  # the relays' last lines
    want = [-signal.SIGKILL if r == args.die_rank and 0 <= args.die_at < args.steps else 0
            for r in range(len(codes))]
    say("spawn: exit status per process %s (expected %s)" % (codes, want))
    return 0 if codes == want and (not k or joined.is_set()) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--global-batch", type=int, default=60,
                    help="rows per step over all peers; a multiple of every size the ring "
                         "takes (60: 1 to 6)")
    ap.add_argument("--lr", type=float, default=0.05, help="SGD's (momentum 0.9)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--die-rank", type=int, default=-1,
                    help="the process of this (first) rank SIGKILLs itself at --die-at")
    ap.add_argument("--die-at", type=int, default=-1,
                    help="the step at which, after its backward, it dies")
    ap.add_argument("--min-size", type=int, default=2, help="stop below this many peers")
    ap.add_argument("--max-resets", type=int, default=3, help="membership changes allowed")
    ap.add_argument("--timeout", default="3s", help="ringd's timeout (a stopped peer)")
    ap.add_argument("--save-resume", metavar="FILE",
                    help="after a change, rank 0 saves the state resumed from")
    ap.add_argument("--resume", metavar="FILE", help="start from a --save-resume file")
    ap.add_argument("--step-time", type=float, default=0.0,
                    help="seconds of sleep per step (a longer step: time for joiners)")
    ap.add_argument("--spawn", type=int, default=0, metavar="N",
                    help="start N ranks on 127.0.0.1 (each runs this script)")
    ap.add_argument("--join", type=int, default=0, metavar="K",
                    help="--spawn: start K more once a step >= --join-at-step is printed; "
                         "they join the running ring at the next commit")
    ap.add_argument("--join-at-step", type=int, default=0)
    ap.add_argument("--until-size", type=int, default=0, metavar="N",
                    help="after --steps, train on (at most 50 x --steps) until the ring has "
                         "N peers, then 10 steps more: for joiners that start late")
    ap.add_argument("--store", action="store_true",
                    help="--spawn: meet at a rendezvous store with the elastic setting (the "
                         "default with --join) instead of a list of peers")
    ap.add_argument("--time-limit", type=float, default=120.0,
                    help="--spawn: kill what still runs after this many seconds")
    args = ap.parse_args()
    if args.spawn:
        sys.exit(spawn(args, sys.argv[1:]))
    train_main(args)


if __name__ == "__main__":
    main()
