"""DistributedOptimizer: a Keras 3 optimizer that averages the gradients over the peers
before it applies them (Horovod's shape), on the TensorFlow or the torch backend."""
import keras

import ringd
from .._same import explain, tensor_id


class Compression:
    """What the gradients travel as: default (the ring's codec), none (exact), fp16,
    bf16 (as ringd.tensorflow.Compression)."""
    default = None
    none = "none"
    fp16 = "fp16"
    bf16 = "bf16"


def _backend():
    return keras.backend.backend()


def allreduce_gradients(grads, compression=Compression.default, sparse_as_dense=False,
                        op="avg"):
    """The gradients (a list, None allowed) averaged over the peers, on this backend."""
    backend = _backend()
    if backend == "tensorflow":
        from ringd.tensorflow import _tape
        return _tape.allreduce_gradients(grads, compression, sparse_as_dense, op)
    if backend == "torch":
        return _torch_allreduce(grads, compression, op)
    raise ringd.UnsupportedError(
        "ringd.keras: the %s backend is not supported: use KERAS_BACKEND=tensorflow or "
        "torch" % backend)


def _torch_allreduce(grads, compression, op):
    """Keras's torch backend runs eagerly: the gradients are torch tensors, flattened into
    one buffer per dtype and allreduced by ringd (CPU or CUDA)."""
    import torch
    from ringd.torch.optimizer import _call_mode
    out = list(grads)
    groups = {}
    for i, g in enumerate(grads):
        if g is not None:
            groups.setdefault((g.dtype, g.device), []).append(i)
    items = [(tuple(g.shape) if g is not None else None, str(getattr(g, "dtype", None)))
             for g in grads]
    handles = []
    for k, ((dtype, _), idx) in enumerate(groups.items()):
        wire, codec = _call_mode(compression, dtype)
        flat = torch.cat([grads[i].detach().reshape(-1).to(wire) for i in idx])
        handles.append((idx, flat, ringd.allreduce_async(flat, op=op, codec=codec,
                                                         tensor_id=tensor_id(items, k))))
    try:
        for _, _, h in handles:
            h.wait()
    except ringd.MismatchError as e:
        raise explain(e, "allreduce", len(grads)) from None
    for idx, flat, _ in handles:
        at = 0
        for i in idx:
            n = grads[i].numel()
            out[i] = flat[at:at + n].view(grads[i].shape).to(grads[i].dtype)
            at += n
    return out


class _DistributedMixin:
    """apply() averages the gradients first; everything else is the wrapped class's."""

    def apply(self, grads, trainable_variables=None):
        grads = allreduce_gradients(list(grads), self._ringd_compression,
                                    self._ringd_sparse_as_dense, self._ringd_op)
        return super().apply(grads, trainable_variables)


def DistributedOptimizer(optimizer, compression=Compression.default, sparse_as_dense=False,
                         op="avg"):
    """optimizer (a Keras 3 optimizer), made to apply the peers' average gradient: the same
    class and settings, with apply() averaging over the ring first. Give it to
    model.compile(); with BroadcastGlobalVariablesCallback(0) every peer starts alike."""
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError("ringd.keras.DistributedOptimizer takes a Keras 3 optimizer "
                        "(keras.optimizers.Adam(...), ...), not %s" % type(optimizer).__name__)
    if isinstance(optimizer, _DistributedMixin):
        return optimizer
    if compression not in (None, "none", "fp16", "bf16"):
        raise ValueError("ringd.keras: compression must be Compression.default, none, fp16 "
                         "or bf16, not %r" % (compression,))
    if op not in ("avg", "sum"):
        raise ValueError("ringd.keras: op must be 'avg' or 'sum', not %r" % (op,))
    cls = type("Distributed" + type(optimizer).__name__, (_DistributedMixin, type(optimizer)),
               {})
    new = cls.from_config(optimizer.get_config())
    new._ringd_compression = compression
    new._ringd_sparse_as_dense = sparse_as_dense
    new._ringd_op = op
    return new
