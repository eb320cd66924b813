"""A synthetic, communication-bound MLP for benchmarks: ringd against PyTorch
DDP with the Gloo backend, on the same model, batch and bucket size.

The model is --layers (default 6) dense layers of --width (default 2048)
units between 1024 inputs and 1024 outputs: 25.2M parameters (100 MB of fp32
gradients a step) for a few ms of compute on a small batch, so the allreduce
dominates. --width 4096 --layers 2 has as many parameters, two thirds of them
in one layer whose gradient appears only at the end of backward (less to
overlap).

    ring-launch -n 4 -- /usr/bin/python3 synthetic_mlp.py --backend ringd --codec fp16
    ring-launch -n 4 -- /usr/bin/python3 synthetic_mlp.py --backend ddp-gloo

Backends: ringd (ringd.torch.DistributedOptimizer), ddp-gloo (DDP over
torch.distributed's Gloo), ddp-ringd-hook (DDP over Gloo with ringd's
communication hook), ddp-ringd (DDP over the "ringd" torch.distributed
backend). --powersgd R: DDP (ddp-gloo or ddp-ringd) with PyTorch's PowerSGD hook
of rank R instead (from the fourth step, with error feedback and warm start).
Rank 0 prints one line: samples/s of all peers, steps, seconds, last loss.
Rank and world size come from the launcher (RING_*, Open MPI, Slurm, torchrun
variables); DDP's store is MASTER_ADDR:MASTER_PORT (default 127.0.0.1:29511).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import ringd.torch


def launcher_rank():
    for r, w in (("RING_RANK", "RING_WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                 ("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if r in os.environ and w in os.environ:
            return int(os.environ[r]), int(os.environ[w])
    return 0, 1


def pick_device(name):
    """cpu, or cuda: this peer's GPU of its host (the launcher's local rank modulo the GPUs
    there; ringd takes one GPU per process); a clear exit without CUDA."""
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False (no GPU, no "
                         "driver, or a CPU-only torch %s): use --device cpu" % torch.__version__)
    local = 0
    for v in ("RING_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"):
        if os.environ.get(v, "").isdigit():
            local = int(os.environ[v])
            break
    torch.cuda.set_device(local % torch.cuda.device_count())
    return torch.device("cuda", local % torch.cuda.device_count())


def model(width, layers):
    dims = [1024] + [width] * layers + [1024]
    mods = []
    for a, b in zip(dims[:-1], dims[1:]):
        mods += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*mods[:-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="ringd",
                    choices=["ringd", "ddp-gloo", "ddp-ringd-hook", "ddp-ringd"])
    ap.add_argument("--codec", default="fp16", choices=["none", "fp16", "bf16"],
                    help="what ringd's gradients travel as (default fp16)")
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=6, help="hidden layers of --width")
    ap.add_argument("--batch", type=int, default=32, help="per peer")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (after 3 untimed)")
    ap.add_argument("--bucket-mb", type=float, default=25, help="fusion bucket, MiB (DDP's 25)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per peer")
    ap.add_argument("--lr", type=float, default=1e-4, help="SGD's (momentum 0.9)")
    ap.add_argument("--staleness", type=int, default=0,
                    help="ringd: apply step t-S's average at step t (default 0: lockstep)")
    ap.add_argument("--overlap-step", action="store_true",
                    help="ringd: update each bucket's parameters as its average lands")
    ap.add_argument("--powersgd", type=int, default=0, metavar="R",
                    help="ddp-gloo, ddp-ringd: PyTorch's PowerSGD hook of rank R (0: off)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="where the model trains (cuda: one GPU per peer, by local rank)")
    args = ap.parse_args()
    dev = pick_device(args.device)
    torch.set_num_threads(args.threads)
    rank, world = launcher_rank()
    torch.manual_seed(0)
    net = model(args.width, args.layers).to(dev)
    nparams = sum(p.numel() for p in net.parameters())
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    if args.backend == "ringd":
        ringd.init(codec=args.codec)
        opt = ringd.torch.DistributedOptimizer(opt, net.named_parameters(),
                                               bucket_bytes=int(args.bucket_mb * 2**20),
                                               staleness=args.staleness,
                                               overlap_step=args.overlap_step)
        ringd.torch.broadcast_parameters(net.state_dict(), root_rank=0)
        step_model = net
    else:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        if args.backend == "ddp-ringd":
            os.environ.setdefault("RING_CODEC", args.codec)
        dist.init_process_group("ringd" if args.backend == "ddp-ringd" else "gloo",
                                rank=rank, world_size=world)
        step_model = nn.parallel.DistributedDataParallel(
            net, bucket_cap_mb=args.bucket_mb,
            device_ids=[dev.index] if dev.type == "cuda" else None)
        if args.backend == "ddp-ringd-hook":
            ringd.init(codec=args.codec)
            step_model.register_comm_hook(None, ringd.torch.allreduce_hook)
        elif args.powersgd:
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
            state = psgd.PowerSGDState(process_group=None, start_powerSGD_iter=3,
                                       matrix_approximation_rank=args.powersgd)
            step_model.register_comm_hook(state, psgd.powerSGD_hook)
    x = torch.randn(args.batch, 1024).to(dev)
    y = torch.randn(args.batch, 1024).to(dev)

    def now():  # CUDA: the GPU's work so far counts where it was queued
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        return time.time()
    t0 = 0.0
    parts = [0.0, 0.0, 0.0]  # forward, backward, step: where a step's time goes
    for step in range(args.steps + 3):
        if step == 3:
            t0 = now()
            parts = [0.0, 0.0, 0.0]
        ta = now()
        opt.zero_grad()
        loss = F.mse_loss(step_model(x), y)
        tb = now()
        loss.backward()
        tc = now()
        opt.step()
        for i, d in enumerate((tb - ta, tc - tb, now() - tc)):
            parts[i] += d
    elapsed = now() - t0
    if rank == 0:
        print("%s%s%s%s codec %s: %d peers, %.1fM parameters, batch %d: %.1f samples/s (all "
              "peers), %.1f ms/step over %d steps, last loss %.5f"
              % (args.backend, " powersgd %d" % args.powersgd if args.powersgd else "",
                 " staleness %d" % args.staleness if args.staleness else "",
                 " overlap-step" if args.overlap_step else "",
                 args.codec if "ringd" in args.backend else "none", world, nparams / 1e6,
                 args.batch, args.batch * world * args.steps / elapsed,
                 elapsed / args.steps * 1e3, args.steps, loss.item()), flush=True)
        print("  per step: forward %.1f ms, backward %.1f ms, step %.1f ms" %
              tuple(1e3 * v / args.steps for v in parts), flush=True)
    if args.backend == "ringd":
        opt.finish()
    if dist.is_initialized():
        dist.destroy_process_group()
    ringd.shutdown()


if __name__ == "__main__":
    main()
