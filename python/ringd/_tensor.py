"""Tensors as the extension takes them, without copies.

numpy arrays (and other objects with the buffer protocol) go to the extension
as they are: it takes a buffer view, checks C-contiguity, writability and the
dtype, and holds the view until the request finishes. torch tensors go as a
descriptor (tensor, data_ptr, nbytes, itemsize, dtype name) made here after
checking device, layout and contiguity: t.numpy() fails for bfloat16, and
numpy 1.24's from_dlpack is read-only. The extension holds the tensor until
the request finishes. torch is never imported here: a torch tensor can only
exist once the program has imported torch itself.
"""

import sys

try:
    import numpy as _np
except ImportError:  # the package is built only for a Python with numpy, but be polite
    _np = None


def _torch():
    return sys.modules.get("torch")


def is_torch(x):
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def as_buffer(x, what):
    """x as the extension takes it; TypeError/ValueError naming `what` when it cannot be."""
    if not is_torch(x):
        return x
    torch = _torch()
    if x.device.type != "cpu":
        raise TypeError(
            "%s is on device '%s': ringd moves CPU tensors only (copy it with .cpu(), and "
            "back with .to(device))" % (what, x.device))
    if x.layout != torch.strided:
        raise TypeError("%s has layout %s: ringd moves dense (strided) tensors only"
                        % (what, x.layout))
    if not x.is_contiguous():
        raise ValueError("%s is not contiguous (a transposed or strided view?): pass "
                         "x.contiguous()" % what)
    if (hasattr(x, "is_conj") and x.is_conj()) or (hasattr(x, "is_neg") and x.is_neg()):
        raise ValueError("%s is a lazy conjugate or negative view: pass x.resolve_conj() / "
                         "x.resolve_neg()" % what)
    itemsize = x.element_size()
    return (x, x.data_ptr(), x.numel() * itemsize, itemsize, _torch_dtype_name(x.dtype))


def shape_of(x):
    if is_torch(x) or (_np is not None and isinstance(x, _np.ndarray)):
        return tuple(x.shape)
    return tuple(memoryview(x).shape)


def itemsize_of(x):
    if is_torch(x):
        return x.element_size()
    if _np is not None and isinstance(x, _np.ndarray):
        return x.itemsize
    return memoryview(x).itemsize


def empty(like, shape):
    """A new tensor of like's kind (torch, else numpy) and dtype, of shape."""
    if is_torch(like):
        return _torch().empty(shape, dtype=like.dtype)
    if _np is None:
        raise TypeError("ringd: numpy is needed for a result of this kind")
    if isinstance(like, _np.ndarray):
        return _np.empty(shape, dtype=like.dtype)
    view = memoryview(like)
    return _np.empty(shape, dtype=_np.dtype(view.format))


def row_count_and_bytes(x, what):
    """(rows, bytes per row) of x along its first dimension."""
    shape = shape_of(x)
    if not shape:
        raise ValueError("%s is a scalar (0-d): it needs a first dimension here" % what)
    rows = shape[0]
    row_bytes = itemsize_of(x)
    for d in shape[1:]:
        row_bytes *= d
    return rows, row_bytes
