"""Fashion-MNIST CNN on one process, with what real training scripts have:
BatchNorm and dropout, an auxiliary head on some steps, AdamW with weight
decay on the weights only, a cosine learning rate stepped per optimizer
step, gradient clipping, gradient accumulation and checkpoints to resume
from. fmnist_resume.py is this script on ringd (see docs/pytorch.md).

    python3 fmnist_resume_plain.py --steps 2000 --ckpt ckpt.pt
    python3 fmnist_resume_plain.py --steps 2000 --ckpt ckpt.pt --resume ckpt.pt

Each optimizer step takes the next --accum x --batch images of the epoch's
shuffled order (seeded by the epoch) as --accum micro-batches; micro-batch j
of step s draws its dropout masks from seed s x accum + j. So the run is
deterministic, a run resumed from a checkpoint ends bit for bit where the
uninterrupted one does, and N peers with --accum A compute the micro-batches
of this script with --accum A x N.
"""
import argparse
import hashlib
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import fmnist_data


class Net(nn.Module):
    """Two conv-BatchNorm-ReLU-pool blocks, dropout, two dense layers; and an
    auxiliary classifier on the first block's features, trained on some steps."""

    def __init__(self, c1=8, c2=16, hidden=64, dropout=0.25):
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c2)
        self.drop = nn.Dropout(dropout)
        self.fc1 = nn.Linear(c2 * 7 * 7, hidden)
        self.fc2 = nn.Linear(hidden, 10)
        self.aux = nn.Linear(c1, 10)

    def forward(self, x, with_aux=False):
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        aux = self.aux(h.mean((2, 3))) if with_aux else None
        h = F.max_pool2d(F.relu(self.bn2(self.conv2(h))), 2)
        h = self.drop(F.relu(self.fc1(self.drop(h.flatten(1)))))
        return self.fc2(h), aux


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        right = sum((model(x[i:i + 1000])[0].argmax(1) == y[i:i + 1000]).sum().item()
                    for i in range(0, len(x), 1000))
    model.train()
    return right / len(x)


def save(path, model, opt, sched, step):
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "step": step}, path + ".tmp")
    os.replace(path + ".tmp", path)  # a job killed while saving keeps the last checkpoint


def summary(model, step, loss):
    """The parameters' digest (sha256 of their bytes, in order), and the parameters."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()
    return {"step": step, "loss": loss, "numel": flat.numel(),
            "sha256": hashlib.sha256(flat.numpy().tobytes()).hexdigest(),
            "params": flat.tolist() if flat.numel() <= 200000 else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3000, help="optimizer steps in all")
    ap.add_argument("--batch", type=int, default=32, help="images per micro-batch")
    ap.add_argument("--accum", type=int, default=2, help="micro-batches per optimizer step")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--clip", type=float, default=1.0, help="the largest gradient norm")
    ap.add_argument("--aux-every", type=int, default=3, help="the auxiliary head's steps")
    ap.add_argument("--aux-weight", type=float, default=0.3)
    ap.add_argument("--limit", type=int, default=0, help="use the first N training images")
    ap.add_argument("--width", default="8,16,64", help="conv1,conv2,dense widths")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where to train")
    ap.add_argument("--ckpt", default="fmnist_resume.pt", help="the checkpoint file")
    ap.add_argument("--ckpt-every", type=int, default=500)
    ap.add_argument("--stop-after", type=int, default=0, help="checkpoint and exit after N steps")
    ap.add_argument("--resume", metavar="PATH", help="continue from this checkpoint")
    ap.add_argument("--out", metavar="FILE.json", help="write the parameters' digest here")
    ap.add_argument("--log-every", type=int, default=500)
    args = ap.parse_args()
    torch.manual_seed(0)
    x, y = fmnist_data.load("train", args.limit)
    xt, yt = fmnist_data.load("test", 2000)
    dev = fmnist_data.device(args.device)
    x, y, xt, yt = x.to(dev), y.to(dev), xt.to(dev), yt.to(dev)
    model = Net(*[int(w) for w in args.width.split(",")]).to(dev)
    decay = [p for p in model.parameters() if p.ndim > 1]  # not on biases and BatchNorm
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)
    start = 0
    if args.resume:
        ck = torch.load(args.resume, map_location=dev)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        start = ck["step"]
    total = args.accum  # micro-batches per optimizer step
    mine = range(total)  # computed here
    per_epoch = len(x) // (total * args.batch)
    order_epoch, step_loss, t0 = -1, float("nan"), time.time()
    for step in range(start, args.steps):
        epoch, k = divmod(step, per_epoch)
        if epoch != order_epoch:
            order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
            order_epoch = epoch
        batch = order[k * total * args.batch:(k + 1) * total * args.batch]
        with_aux = step % args.aux_every == 0
        step_loss = 0.0
        for j in mine:
            idx = batch[j * args.batch:(j + 1) * args.batch]
            torch.manual_seed(step * total + j)  # this micro-batch's dropout masks
            out, aux = model(x[idx], with_aux)
            loss = F.cross_entropy(out, y[idx])
            if with_aux:
                loss = loss + args.aux_weight * F.cross_entropy(aux, y[idx])
            loss = loss / args.accum
            loss.backward()
            step_loss += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        done = step + 1
        if done % args.ckpt_every == 0 or done == args.stop_after:
            save(args.ckpt, model, opt, sched, done)
        if done == args.stop_after:
            return  # as if the job were killed here
        if done % args.log_every == 0 or done == args.steps:
            print("step %d: loss %.4f, lr %.2e, test accuracy %.4f, %.1f s"
                  % (done, step_loss, sched.get_last_lr()[0], evaluate(model, xt, yt),
                     time.time() - t0), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary(model, args.steps, step_loss), f)


if __name__ == "__main__":
    main()
