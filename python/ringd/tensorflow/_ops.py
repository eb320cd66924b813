"""Collectives on tf.Tensors: allreduce (grouped into fusion buckets), allgather,
broadcast and broadcast_variables, eagerly and inside tf.function (_bridge.run)."""
import numpy as np
import tensorflow as tf

import ringd
from . import _bridge
from .._same import explain, tensor_id

Average = "avg"
Sum = "sum"

# one allreduce carries up to this many bytes (Horovod's fusion threshold is 128 MiB;
# smaller buckets let the first ones travel while the last are still being packed)
BUCKET_BYTES = 64 << 20

_REDUCIBLE = (tf.float32, tf.float16, tf.bfloat16)


class Compression:
    """What the gradients travel as (as ringd.torch.Compression).

    default: the communicator's codec (ringd.init(codec=...), RING_CODEC);
    none:    the tensor's own dtype on the wire, whatever the codec (exact);
    fp16, bf16: when the communicator's codec is another one, the tensor is cast to
             fp16/bf16 before and back after (Horovod's compression: the average comes
             back rounded to it); with that codec, the codec does it."""
    default = None
    none = "none"
    fp16 = "fp16"
    bf16 = "bf16"


_HALF = {"fp16": tf.float16, "bf16": tf.bfloat16}


def _op_name(op):
    if op in (Average, "average", "mean"):
        return Average
    if op == Sum:
        return Sum
    raise ValueError("ringd.tensorflow: op must be ringd.tensorflow.Average or Sum, not %r"
                     % (op,))


def _wire(compression, dtype):
    """(the dtype the tensor travels as, the per-call codec argument)."""
    if compression is None:
        return dtype, None
    if compression == Compression.none:
        return dtype, "exact"
    if compression not in _HALF:
        raise ValueError("ringd.tensorflow: compression must be Compression.default, none, "
                         "fp16 or bf16, not %r" % (compression,))
    if ringd.config().get("codec") == compression or dtype != tf.float32:
        return dtype, None
    return _HALF[compression], None


def as_ringd(a):
    """A numpy array as ringd's extension takes it: bfloat16 (ml_dtypes, which the
    buffer protocol does not describe) as a descriptor naming the dtype."""
    if a.dtype.name == "bfloat16":
        return (a, a.ctypes.data, a.nbytes, 2, "bfloat16")
    return a


def _check_reducible(dtype, what):
    if dtype not in _REDUCIBLE:
        raise TypeError(
            "ringd.tensorflow: %s is %s: ringd reduces float32, float16 and bfloat16 (cast "
            "it, e.g. tf.cast(x, tf.float32); broadcast and allgather move any dtype)"
            % (what, dtype.name))


class _Slot:
    __slots__ = ("index", "offset", "numel", "shape", "dtype")


def _plan(tensors, compression, bucket_bytes):
    """Buckets of tensors of one wire dtype and codec, each up to bucket_bytes."""
    buckets, current = [], {}
    for i, t in enumerate(tensors):
        _check_reducible(t.dtype, "tensor %d of %d (shape %s)" % (i, len(tensors), t.shape))
        wire, codec = _wire(compression, t.dtype)
        numel = int(np.prod(t.shape)) if t.shape.is_fully_defined() else None
        if numel is None:
            raise ValueError("ringd.tensorflow: tensor %d has an unknown shape %s: fusion "
                             "needs static shapes (allreduce it alone)" % (i, t.shape))
        key = (wire, codec)
        b = current.get(key)
        size = numel * wire.size
        if b is None or (b["numel"] > 0 and b["numel"] * wire.size + size > bucket_bytes):
            b = {"wire": wire, "codec": codec, "slots": [], "numel": 0}
            buckets.append(b)
            current[key] = b
        s = _Slot()
        s.index, s.offset, s.numel, s.shape, s.dtype = i, b["numel"], numel, t.shape, t.dtype
        b["slots"].append(s)
        b["numel"] += numel
    return buckets


def grouped_allreduce(tensors, op=Average, compression=Compression.default,
                      bucket_bytes=BUCKET_BYTES, name="ringd_allreduce", agree_on=""):
    """Allreduce a list of dense tensors as a few fused allreduces (one op); returns the
    list of results, same shapes and dtypes. agree_on: more the peers must agree on
    (checked with the tensors' shapes and dtypes)."""
    op = _op_name(op)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    _bridge.check_not_xla("allreduce")
    buckets, ids = plan_group(tensors, compression, bucket_bytes, agree_on)
    flats = pack(tensors, buckets)
    codecs = [b["codec"] for b in buckets]

    def reduce_all(*arrays):
        outs, handles = [], []
        try:
            for a, codec, tid in zip(arrays, codecs, ids):
                out = np.empty_like(a)
                outs.append(out)
                handles.append(ringd.allreduce_async(as_ringd(a), op=op, codec=codec,
                                                     out=as_ringd(out), tensor_id=tid))
            for h in handles:
                h.wait()
        except ringd.MismatchError as e:
            raise explain(e, "allreduce", len(tensors)) from None
        return tuple(outs)

    reduced = _bridge.run(reduce_all, flats, [b["wire"] for b in buckets], name)
    return unpack(reduced, buckets, len(tensors))


def plan_group(tensors, compression, bucket_bytes, agree_on=""):
    """(the buckets of a group of dense tensors, the tensor id of each bucket's allreduce:
    a hash of every tensor's shape and dtype, which libringd compares across the peers)."""
    buckets = _plan(tensors, compression, bucket_bytes)
    items = [(tuple(t.shape), t.dtype.name) for t in tensors] + [("codec", str(compression)),
                                                                   ("more", agree_on)]
    return buckets, [tensor_id(items, k) for k in range(len(buckets))]


def pack(tensors, buckets):
    """One flat tensor of the wire dtype per bucket."""
    flats = []
    for b in buckets:
        parts = [tf.reshape(tf.cast(tensors[s.index], b["wire"]), [-1]) for s in b["slots"]]
        flats.append(parts[0] if len(parts) == 1 else tf.concat(parts, 0))
    return flats


def unpack(flats, buckets, count):
    """The tensors back from their buckets' flat results, in their shapes and dtypes."""
    results = [None] * count
    for b, flat in zip(buckets, flats):
        flat.set_shape([b["numel"]])
        for s in b["slots"]:
            piece = flat if len(b["slots"]) == 1 else flat[s.offset:s.offset + s.numel]
            results[s.index] = tf.cast(tf.reshape(piece, s.shape), s.dtype)
    return results


def allreduce(tensor, op=Average, compression=Compression.default, name=None):
    """The allreduce (average by default, or Sum) of tensor over every peer; a new tensor
    of the same shape and dtype, bitwise identical on every peer. tf.IndexedSlices are
    allgathered (values and indices), as Horovod does."""
    if isinstance(tensor, tf.IndexedSlices):
        return _allreduce_sparse(tensor, _op_name(op))
    return grouped_allreduce([tensor], op, compression, name=name or "ringd_allreduce")[0]


def _allreduce_sparse(slices, op):
    values = allgather(slices.values)
    indices = allgather(slices.indices)
    if op == Average:
        values = values / tf.cast(ringd.size(), values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def allgather(tensor, name=None):
    """Every peer's tensor, concatenated in rank order along the first dimension (which
    may differ between peers; the others must match). Any dtype."""
    tensor = tf.convert_to_tensor(tensor)
    _bridge.check_not_xla("allgather")
    if tensor.shape.rank == 0:
        raise ValueError("ringd.tensorflow.allgather: a scalar has no first dimension to "
                         "concatenate along (reshape it to [1])")
    rest = tuple(tensor.shape[1:])

    def gather(a):
        rows = ringd.allgather(np.array([a.shape[0]], np.int64))
        tail = np.array(a.shape[1:], np.int64)
        tails = ringd.allgather(np.concatenate([[len(tail)], tail]).astype(np.int64))
        if any((tails.reshape(ringd.size(), -1) != tails[:len(tail) + 1]).ravel()):
            raise ringd.MismatchError(
                "ringd.tensorflow.allgather: the peers' tensors differ beyond the first "
                "dimension (this rank's shape is %s)" % (a.shape,))
        a = np.ascontiguousarray(a)
        if a.dtype.name == "bfloat16":
            out = ringd.allgather(a.view(np.uint16), sizes=list(rows)).view(a.dtype)
        else:
            out = ringd.allgather(a, sizes=list(rows))
        return (out,)

    out = _bridge.run(gather, [tensor], [tensor.dtype], name or "ringd_allgather")[0]
    out.set_shape((None,) + rest)
    return out


def broadcast(tensor, root_rank=0, name=None):
    """root_rank's tensor on every peer, bit for bit (any dtype); a new tensor."""
    return broadcast_group([tensor], root_rank, name or "ringd_broadcast")[0]


def broadcast_group(tensors, root_rank=0, name="ringd_broadcast"):
    """root_rank's tensors on every peer, packed into one broadcast of bytes."""
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    if not 0 <= root_rank < ringd.size():
        raise ValueError("ringd.tensorflow: root_rank %d is not a rank of this ring of %d "
                         "peers" % (root_rank, ringd.size()))
    _bridge.check_not_xla("broadcast")
    for i, t in enumerate(tensors):
        if not t.shape.is_fully_defined():
            raise ValueError("ringd.tensorflow: broadcast of tensor %d: unknown shape %s"
                             % (i, t.shape))
    tid = tensor_id([(tuple(t.shape), t.dtype.name) for t in tensors])

    def send(*arrays):
        packed = np.concatenate([np.array(a, order="C").reshape(-1).view(np.uint8)
                                 for a in arrays])
        try:
            ringd.broadcast(packed, root=root_rank, tensor_id=tid)
        except ringd.MismatchError as e:
            raise explain(e, "broadcast", len(arrays)) from None
        outs, at = [], 0
        for a in arrays:
            outs.append(packed[at:at + a.nbytes].view(a.dtype).reshape(a.shape).copy())
            at += a.nbytes
        return tuple(outs)

    outs = _bridge.run(send, tensors, [t.dtype for t in tensors], name)
    for o, t in zip(outs, tensors):
        o.set_shape(t.shape)
    return outs


def broadcast_variables(variables, root_rank=0):
    """Every peer's variables become root_rank's (one packed broadcast). Eagerly it
    assigns them; in a graph it returns the op that does."""
    variables = list(variables)
    values = broadcast_group([tf.convert_to_tensor(v) for v in variables], root_rank,
                             "ringd_broadcast_variables")
    assigns = [v.assign(x) for v, x in zip(variables, values)]
    if tf.executing_eagerly():
        return None
    return tf.group(*assigns)
