"""Tensors as the extension takes them, without copies.

numpy arrays (and other objects with the buffer protocol) go to the extension
as they are: it takes a buffer view, checks C-contiguity, writability and the
dtype, and holds the view until the request finishes. torch tensors go as a
descriptor (tensor, data_ptr, nbytes, itemsize, dtype name) made here after
checking device, layout and contiguity: t.numpy() fails for bfloat16, and
numpy 1.24's from_dlpack is read-only. The extension holds the tensor until
the request finishes. torch is never imported here: a torch tensor can only
exist once the program has imported torch itself.

CUDA memory (see docs/pytorch.md, "CUDA tensors"): a CUDA torch tensor, or an
object with __cuda_array_interface__ (CuPy, Numba; v2/v3), goes to the
extension as the same descriptor, with the CUDA stream its producer's work is
queued on: torch's current stream of the tensor's device, or the interface's
"stream" (1 and 2 are CUDA's own legacy and per-thread default handles; none
given: the legacy default, 0). Only allreduce takes device memory in
libringd; the other collectives stage torch tensors through host memory
(ringd/_runtime.py).
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
    """x as the extension takes it; TypeError/ValueError naming `what` when it cannot be.
    Host memory only: CUDA memory goes through as_device_buffer."""
    refuse_cai(x, what)
    if not is_torch(x):
        return x
    if x.device.type != "cpu":
        raise TypeError(
            "%s is on device '%s': ringd moves CPU tensors only here (allreduce takes CUDA "
            "tensors; copy it with .cpu(), and back with .to(device))" % (what, x.device))
    _check_dense(x, what)
    return _torch_descriptor(x)


def _check_dense(x, what):
    """A torch tensor ringd can take as flat memory: strided, contiguous, not a lazy view."""
    torch = _torch()
    if x.layout != torch.strided:
        raise TypeError("%s has layout %s: ringd moves dense (strided) tensors only"
                        % (what, x.layout))
    if not x.is_contiguous():
        raise ValueError("%s is not contiguous (a transposed or strided view?): pass "
                         "x.contiguous()" % what)
    if (hasattr(x, "is_conj") and x.is_conj()) or (hasattr(x, "is_neg") and x.is_neg()):
        raise ValueError("%s is a lazy conjugate or negative view: pass x.resolve_conj() / "
                         "x.resolve_neg()" % what)


def _torch_descriptor(x):
    itemsize = x.element_size()
    return (x, x.data_ptr(), x.numel() * itemsize, itemsize, _torch_dtype_name(x.dtype))


# ---- CUDA memory ----------------------------------------------------------------------------

_CAI_TYPES = {"f4": ("float32", 4), "f2": ("float16", 2)}
_DLPACK_CUDA = 2  # DLDeviceType kDLCUDA


def has_cai(x):
    """x is CUDA memory by __cuda_array_interface__ (not a torch tensor: torch's class has
    the property, which raises for CPU tensors)."""
    return not is_torch(x) and not isinstance(x, type) and \
        hasattr(x, "__cuda_array_interface__")


def refuse_cai(x, what):
    """TypeError for CUDA memory that is not a torch tensor, where only host memory goes."""
    if has_cai(x):
        raise TypeError("%s: %s is CUDA memory (__cuda_array_interface__): only allreduce "
                        "takes it; the other collectives take CUDA memory as torch tensors "
                        "(staged through host memory) or host memory (numpy)"
                        % (what, type(x).__name__))


def is_torch_cuda(x):
    return is_torch(x) and x.device.type == "cuda"


def _dlpack_cuda(x):
    """x, an object exporting DLPack on a CUDA device (JAX...), as a torch tensor (no
    copy); None when it is not one."""
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None or is_torch(x) or has_cai(x):
        return None
    try:
        kind = int(dev()[0])
    except Exception:  # noqa: BLE001 - not a DLPack exporter after all
        return None
    if kind != _DLPACK_CUDA:
        return None
    torch = _torch()
    if torch is None:
        raise TypeError("%s exports CUDA memory through DLPack only: import torch (ringd takes "
                        "it as a torch tensor), or pass an object with "
                        "__cuda_array_interface__" % type(x).__name__)
    return torch.utils.dlpack.from_dlpack(x)


def is_device(x):
    """True for memory ringd reaches as CUDA device memory."""
    return is_torch_cuda(x) or has_cai(x) or \
        (hasattr(x, "__dlpack_device__") and _dlpack_cuda(x) is not None)


def where(x):
    """'cpu', 'cuda:N' (torch) or 'cuda' (a __cuda_array_interface__: which GPU is not
    said) for messages and the same-device check."""
    if is_torch(x):
        return str(x.device) if x.device.type != "cuda" else "cuda:%d" % _index(x)
    if has_cai(x):
        return "cuda"
    return "cpu"


def _index(x):
    i = x.device.index
    return _torch().cuda.current_device() if i is None else i


def _cai_descriptor(x, what, writable):
    try:
        cai = x.__cuda_array_interface__
        shape = tuple(int(d) for d in cai["shape"])
        typestr = cai["typestr"]
        ptr, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise TypeError("%s: %s's __cuda_array_interface__ lacks shape, typestr or data "
                        "(%s)" % (what, type(x).__name__, e)) from None
    version = cai.get("version", 0)
    if cai.get("mask") is not None:
        raise ValueError("%s: a masked __cuda_array_interface__: pass the data alone" % what)
    if not isinstance(typestr, str) or len(typestr) < 3 or typestr[0] not in "<|=" or \
            typestr[1:] not in _CAI_TYPES:
        raise TypeError("%s: %s has typestr %r: ringd reduces float32 ('<f4') and float16 "
                        "('<f2') CUDA memory (bfloat16 as a torch tensor)"
                        % (what, type(x).__name__, typestr))
    dtype, itemsize = _CAI_TYPES[typestr[1:]]
    n = 1
    for d in shape:
        n *= d
    strides = cai.get("strides")
    if strides is not None and n > 0:
        want = itemsize
        for d, st in zip(reversed(shape), reversed(tuple(strides))):
            if d != 1 and int(st) != want:
                raise ValueError("%s is not C-contiguous (strides %r for shape %r): pass a "
                                 "contiguous copy (cupy.ascontiguousarray(x))"
                                 % (what, tuple(strides), shape))
            want *= d
    if writable and readonly:
        raise ValueError("%s is read-only (its __cuda_array_interface__ says so): the result "
                         "is written into it; give the result a place with out=" % what)
    if n > 0 and not ptr:
        raise ValueError("%s: a __cuda_array_interface__ with a null data pointer" % what)
    stream = cai.get("stream") if version >= 3 else None
    if stream is not None:
        if isinstance(stream, bool) or not isinstance(stream, int):
            raise TypeError("%s: __cuda_array_interface__['stream'] is %r, not an int"
                            % (what, stream))
        if stream == 0:
            raise ValueError("%s: __cuda_array_interface__['stream'] is 0, which the interface "
                             "(v3) forbids as ambiguous: 1 is the legacy default stream, 2 "
                             "the per-thread default" % what)
    # 1 and 2 are cudaStreamLegacy and cudaStreamPerThread themselves; none given: nothing
    # to wait for, the legacy default (NULL) then
    return (x, int(ptr or 0), n * itemsize, itemsize, dtype), (stream or 0)


def as_device_buffer(x, what, writable=True):
    """(descriptor, stream) of CUDA memory for the extension's allreduce: a CUDA torch
    tensor (checked as as_buffer checks a CPU one; the stream is torch's current stream of
    its device) or an object with __cuda_array_interface__. TypeError/ValueError naming
    `what`."""
    if not is_torch(x) and not has_cai(x):
        t = _dlpack_cuda(x)
        if t is not None:
            x = t
    if not is_torch(x):
        return _cai_descriptor(x, what, writable)
    torch = _torch()
    _check_dense(x, what)
    return _torch_descriptor(x), int(torch.cuda.current_stream(x.device).cuda_stream)


def synchronize(x):
    """Block the host until the device has run what was queued for x (wait(blocking=True)
    on a result already ordered on its stream)."""
    if is_torch(x):
        _torch().cuda.synchronize(x.device)
        return
    for name in ("cupy", "numba"):
        mod = sys.modules.get(name)
        if mod is None:
            continue
        if name == "cupy":
            mod.cuda.runtime.deviceSynchronize()
        else:
            mod.cuda.synchronize()
        return
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()
        return
    raise RuntimeError("ringd: cannot make the host wait for this device result without torch, "
                       "CuPy or Numba: call Handle.wait(blocking=True) before any later handle "
                       "is waited for, or synchronize the stream yourself")


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
