"""Fashion-MNIST from Debian's IDX files (dataset-fashion-mnist) as numpy arrays: no
tensorflow_datasets, no downloads."""
import gzip
import os

import numpy as np

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
    """(images as float32 N x 784, normalised; labels as int64)."""
    prefix = "train" if split == "train" else "t10k"
    x = _idx(prefix + "-images-idx3-ubyte.gz", 2051, 16).reshape(-1, 784)
    y = _idx(prefix + "-labels-idx1-ubyte.gz", 2049, 8).astype(np.int64)
    if limit:
        x, y = x[:limit], y[:limit]
    return (x.astype(np.float32) / 255.0 - 0.2860) / 0.3530, y
