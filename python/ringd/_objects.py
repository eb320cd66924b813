"""Objects as bytes, for broadcast_object: a format of ringd's own, not pickle.

What a peer sends is decoded into values only: None, bool, int, float, complex, str,
bytes, and list, tuple, dict, OrderedDict, set, frozenset of them; torch tensors (dense,
loaded on the CPU), torch.dtype, torch.Size, torch.device; numpy arrays and scalars of
numeric dtypes. Nothing is imported or called by name, so bytes from a peer cannot run
code (pickle's and torch.load(weights_only=False)'s hazard). A tag byte per value,
lengths as little-endian uint64.
"""

import collections as _collections
import ctypes as _ctypes
import struct as _struct

from ._tensor import _np, _torch, _torch_dtype_name

OBJECT_MAGIC = b"RNGO\x01"
_MAX_DEPTH = 100
_U64 = _struct.Struct("<Q")
_SEQS = {list: b"l", tuple: b"t", set: b"S", frozenset: b"Z"}


def _put_bytes(out, data):
    out.append(_U64.pack(len(data)))
    out.append(bytes(data))


def _encode(x, out, path, depth):
    if depth > _MAX_DEPTH:
        raise TypeError("%s: nested deeper than %d" % (path, _MAX_DEPTH))
    torch = _torch()
    t = type(x)
    if x is None or x is True or x is False:
        out.append({None: b"N", True: b"T", False: b"F"}[x])
    elif t is int:
        out.append(b"i")
        _put_bytes(out, x.to_bytes((x.bit_length() + 8) // 8, "little", signed=True))
    elif t is float:
        out.append(b"f" + _struct.pack("<d", x))
    elif t is complex:
        out.append(b"c" + _struct.pack("<dd", x.real, x.imag))
    elif t is str:
        out.append(b"s")
        _put_bytes(out, x.encode("utf-8", "surrogatepass"))
    elif t in (bytes, bytearray):
        out.append(b"b")
        _put_bytes(out, x)
    elif t in _SEQS:
        out.append(_SEQS[t] + _U64.pack(len(x)))
        for i, v in enumerate(x):
            _encode(v, out, "%s[%d]" % (path, i), depth + 1)
    elif t in (dict, _collections.OrderedDict):
        out.append((b"d" if t is dict else b"o") + _U64.pack(len(x)))
        for k, v in x.items():
            _encode(k, out, "%s key %r" % (path, k), depth + 1)
            _encode(v, out, "%s[%r]" % (path, k), depth + 1)
    elif torch is not None and isinstance(x, torch.Tensor):
        _encode_tensor(torch, x, out, path)
    elif torch is not None and t is torch.dtype:
        out.append(b"D")
        _put_bytes(out, _torch_dtype_name(x).encode())
    elif torch is not None and t is torch.Size:
        out.append(b"z" + _U64.pack(len(x)) + b"".join(_U64.pack(d) for d in x))
    elif torch is not None and t is torch.device:
        out.append(b"v")
        _put_bytes(out, str(x).encode())
    elif _np is not None and isinstance(x, (_np.ndarray, _np.generic)) and \
            _np.asarray(x).dtype.kind in "biufc":
        a = _np.ascontiguousarray(x)
        out.append(b"A" if isinstance(x, _np.ndarray) else b"a")
        _put_bytes(out, a.dtype.str.encode())
        out.append(_U64.pack(a.ndim) + b"".join(_U64.pack(d) for d in a.shape))
        _put_bytes(out, a.tobytes())
    else:
        raise TypeError("%s is a %s.%s, which broadcast_object does not send: it sends "
                        "None, bool, int, float, complex, str, bytes, lists, tuples, dicts, "
                        "sets, tensors, torch.dtype/Size/device and numeric numpy arrays "
                        "(or pass allow_pickle=True on every peer, if they trust each other)"
                        % (path, t.__module__, t.__qualname__))


def _encode_tensor(torch, x, out, path):
    if x.layout != torch.strided or x.is_quantized:
        raise TypeError("%s is a %s tensor: broadcast_object sends dense tensors only"
                        % (path, "quantized" if x.is_quantized else x.layout))
    x = x.detach().to("cpu").resolve_conj().resolve_neg().contiguous()
    out.append(b"X")
    _put_bytes(out, _torch_dtype_name(x.dtype).encode())
    out.append(_U64.pack(x.dim()) + b"".join(_U64.pack(d) for d in x.shape))
    _put_bytes(out, _ctypes.string_at(x.data_ptr(), x.numel() * x.element_size()))


def encode_object(obj):
    """obj as bytes (TypeError naming the first value it cannot send)."""
    out = [OBJECT_MAGIC]
    _encode(obj, out, "the object", 0)
    return b"".join(out)


class _Reader:
    def __init__(self, data):
        self.data, self.pos = memoryview(data), 0

    def take(self, n):
        if n > len(self.data) - self.pos:
            raise ValueError("truncated at byte %d (%d more wanted)" % (self.pos, n))
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def u64(self):
        return _U64.unpack(self.take(8))[0]

    def count(self):
        n = self.u64()
        if n > len(self.data) - self.pos:  # every element takes a byte at least
            raise ValueError("a count of %d at byte %d, past the end" % (n, self.pos - 8))
        return n

    def blob(self):
        return self.take(self.count())

    def shape(self):
        ndim = self.u64()
        if ndim > 64:
            raise ValueError("%d dimensions" % ndim)
        return tuple(self.u64() for _ in range(ndim))


def _decode(r, depth):
    if depth > _MAX_DEPTH:
        raise ValueError("nested deeper than %d" % _MAX_DEPTH)
    tag = bytes(r.take(1))
    if tag in (b"N", b"T", b"F"):
        return {b"N": None, b"T": True, b"F": False}[tag]
    if tag == b"i":
        return int.from_bytes(r.blob(), "little", signed=True)
    if tag == b"f":
        return _struct.unpack("<d", r.take(8))[0]
    if tag == b"c":
        return complex(*_struct.unpack("<dd", r.take(16)))
    if tag == b"s":
        return bytes(r.blob()).decode("utf-8", "surrogatepass")
    if tag == b"b":
        return bytes(r.blob())
    if tag in (b"l", b"t", b"S", b"Z"):
        items = [_decode(r, depth + 1) for _ in range(r.count())]
        return {b"l": list, b"t": tuple, b"S": set, b"Z": frozenset}[tag](items)
    if tag in (b"d", b"o"):
        d = {} if tag == b"d" else _collections.OrderedDict()
        for _ in range(r.count()):
            k = _decode(r, depth + 1)
            d[k] = _decode(r, depth + 1)
        return d
    if tag in (b"X", b"D", b"z", b"v"):
        return _decode_torch(r, tag)
    if tag in (b"A", b"a"):
        if _np is None:
            raise ValueError("a numpy array, and no numpy here")
        dtype = _np.dtype(bytes(r.blob()).decode("ascii"))
        if dtype.kind not in "biufc":
            raise ValueError("numpy dtype %s" % dtype)
        shape = r.shape()
        a = _np.frombuffer(bytes(r.blob()), dtype=dtype).reshape(shape).copy()
        return a if tag == b"A" else a[()]
    raise ValueError("unknown tag %r at byte %d" % (tag, r.pos - 1))


def _torch_dtypes(torch):
    return {k: v for k, v in vars(torch).items() if isinstance(v, torch.dtype)}


def _decode_torch(r, tag):
    torch = _torch()
    if torch is None:
        raise ValueError("a torch value, and torch is not imported here")
    if tag == b"z":
        return torch.Size(r.shape())
    if tag == b"v":
        return torch.device(bytes(r.blob()).decode("ascii"))
    # looked up among torch's dtypes, not by getattr: torch's module __getattr__ imports
    # submodules on demand, and a peer's bytes must not choose what runs
    name = bytes(r.blob()).decode("ascii")
    dtype = _torch_dtypes(torch).get(name)
    if dtype is None:
        raise ValueError("%r is not a torch dtype" % name[:40])
    if tag == b"D":
        return dtype
    shape = r.shape()
    data = r.blob()
    want = torch.empty(0, dtype=dtype).element_size()
    for d in shape:
        want *= d
    if len(data) != want:  # checked before anything is allocated
        raise ValueError("a tensor of shape %s and %s with %d bytes" % (shape, dtype, len(data)))
    x = torch.empty(shape, dtype=dtype)
    if len(data):
        _ctypes.memmove(x.data_ptr(), bytes(data), len(data))
    return x


def decode_object(data):
    """The object encode_object gave (ValueError for bytes it did not make)."""
    if bytes(data[:len(OBJECT_MAGIC)]) != OBJECT_MAGIC:
        raise ValueError("not ringd's object format (magic %r)" % bytes(data[:5]))
    r = _Reader(data)
    r.take(len(OBJECT_MAGIC))
    try:
        obj = _decode(r, 0)
    except (TypeError, RuntimeError, OverflowError) as e:  # an unhashable key, a bad dtype
        raise ValueError("at byte %d: %s" % (r.pos, e)) from None
    if r.pos != len(r.data):
        raise ValueError("%d bytes after the object" % (len(r.data) - r.pos))
    return obj
