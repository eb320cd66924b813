"""Fashion-MNIST from Debian's IDX files (dataset-fashion-mnist), with numpy:
no torchvision, no downloads."""
import gzip
import os

import numpy as np
import torch

DATA = os.environ.get("FMNIST", "/usr/share/datasets/fashion-mnist")


def _idx(name, magic, header):
    path = os.path.join(DATA, name)
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise SystemExit("cannot read %s (%s): apt-get install dataset-fashion-mnist, or set "
                         "FMNIST to the folder of the IDX files" % (path, e.strerror or e))
    if len(raw) < header or int.from_bytes(raw[:4], "big") != magic:
        raise SystemExit("%s is not an IDX file with magic %#x" % (path, magic))
    return np.frombuffer(raw, np.uint8, offset=header)


def load(split, limit=None):
    """(images as a float32 N x 1 x 28 x 28 tensor, normalised; labels as int64)."""
    prefix = "train" if split == "train" else "t10k"
    x = _idx(prefix + "-images-idx3-ubyte.gz", 2051, 16).reshape(-1, 1, 28, 28)
    y = _idx(prefix + "-labels-idx1-ubyte.gz", 2049, 8).astype(np.int64)
    if limit:
        x, y = x[:limit], y[:limit]
    x = (x.astype(np.float32) / 255.0 - 0.2860) / 0.3530  # the training set's mean and std
    return torch.from_numpy(x), torch.from_numpy(y)


def device(name):
    """The torch.device for --device cpu|cuda: under ringd (ringd.init() called first),
    cuda is this peer's GPU of its host, cuda:(local rank mod the GPUs there): ringd
    takes one GPU per process. A clear exit when CUDA is asked for and not there."""
    if name == "cpu":
        return torch.device("cpu")
    if name != "cuda":
        raise SystemExit("--device %s: expected cpu or cuda" % name)
    if not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False (no GPU, no "
                         "driver, or a CPU-only torch build %s): use --device cpu"
                         % torch.__version__)
    import sys
    ringd = sys.modules.get("ringd")
    local = ringd.local_rank() if ringd is not None and ringd.is_initialized() else 0
    index = max(local, 0) % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)
