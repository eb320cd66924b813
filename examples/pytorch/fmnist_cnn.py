"""Fashion-MNIST CNN on ringd: fmnist_cnn_plain.py with ringd's lines added
(see docs/pytorch.md). Every peer trains on its share
of each epoch; the batch is per peer.

    ring-launch -n 4 -- /usr/bin/python3 fmnist_cnn.py --epochs 15
    mpirun -np 4 /usr/bin/python3 fmnist_cnn.py      srun -n 4 /usr/bin/python3 fmnist_cnn.py
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import fmnist_data
import ringd.torch


class Net(nn.Module):
    def __init__(self, c1=32, c2=64, hidden=1024):
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 5, padding=2)
        self.conv2 = nn.Conv2d(c1, c2, 5, padding=2)
        self.fc1 = nn.Linear(c2 * 7 * 7, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def evaluate(net, x, y):
    with torch.no_grad():
        right = sum((net(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
                    for i in range(0, len(x), 1000))
    return right / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.03)
    ap.add_argument("--limit", type=int, default=0, help="use the first N training images")
    ap.add_argument("--width", default="32,64,1024", help="conv1,conv2,dense widths")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where to train")
    args = ap.parse_args()
    torch.manual_seed(0)
    ringd.init()
    x, y = fmnist_data.load("train", args.limit)
    xt, yt = fmnist_data.load("test")
    dev = fmnist_data.device(args.device)
    x, y, xt, yt = x.to(dev), y.to(dev), xt.to(dev), yt.to(dev)
    net = Net(*[int(w) for w in args.width.split(",")]).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    opt = ringd.torch.DistributedOptimizer(opt, net.named_parameters())
    ringd.torch.broadcast_parameters(net.state_dict(), root_rank=0)
    for epoch in range(args.epochs):
        t0 = time.time()
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
        perm = perm[ringd.rank()::ringd.size()]
        for i in range(0, len(perm) - args.batch + 1, args.batch):
            idx = perm[i:i + args.batch]
            opt.zero_grad()
            loss = F.cross_entropy(net(x[idx]), y[idx])
            loss.backward()
            opt.step()
        if ringd.rank() == 0:
            print("epoch %d: loss %.4f, test accuracy %.4f, %.1f s"
                  % (epoch + 1, loss.item(), evaluate(net, xt, yt), time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
