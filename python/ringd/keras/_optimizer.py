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
        if self._ringd_staleness:
            return self._stale_apply(list(grads), trainable_variables)
        grads = allreduce_gradients(list(grads), self._ringd_compression,
                                    self._ringd_sparse_as_dense, self._ringd_op)
        return super().apply(grads, trainable_variables)

    def _stale_apply(self, grads, trainable_variables):
        """Step t's gradients start on the wire; step t-S's average is applied (nothing in
        the first S steps, while the pipeline fills). A None gradient counts as zeros."""
        import tensorflow as tf
        from ringd.tensorflow import _stale
        variables = list(trainable_variables if trainable_variables is not None
                         else self._trainable_variables)
        if not self.built:  # outside the conditional below: it creates variables
            self.build(variables)
        dense = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                 for g, v in zip(grads, variables)]
        avg, ready = _stale.stale_allreduce(dense, self, self._ringd_staleness,
                                            self._ringd_op, self._ringd_compression)
        parent = super(_DistributedMixin, self).apply
        if tf.executing_eagerly():
            if bool(ready):
                parent(avg, variables)
            return None

        def update():
            parent(avg, variables)
            return tf.constant(True)
        tf.cond(ready, update, lambda: tf.constant(False))
        return None


def DistributedOptimizer(optimizer, compression=Compression.default, sparse_as_dense=False,
                         op="avg", staleness=0):
    """optimizer (a Keras 3 optimizer), made to apply the peers' average gradient: the same
    class and settings, with apply() averaging over the ring first. Give it to
    model.compile(); with BroadcastGlobalVariablesCallback(0) every peer starts alike.
    staleness=S (TensorFlow backend): step t applies step t-S's average while step t's
    travels (Pipe-SGD, as ringd.torch's); the first S steps apply nothing, and the
    optimizer's iterations (and a learning-rate schedule) count applied steps."""
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
    if not isinstance(staleness, int) or staleness < 0:
        raise ValueError("ringd.keras: staleness must be a whole number >= 0, not %r"
                         % (staleness,))
    if staleness and _backend() != "tensorflow":
        raise ringd.UnsupportedError(
            "ringd.keras: staleness on the %s backend: only the TensorFlow backend has it "
            "(with torch, ringd.torch.DistributedOptimizer(staleness=S))" % _backend())
    cls = type("Distributed" + type(optimizer).__name__, (_DistributedMixin, type(optimizer)),
               {})
    new = cls.from_config(optimizer.get_config())
    new._ringd_compression = compression
    new._ringd_sparse_as_dense = sparse_as_dense
    new._ringd_op = op
    new._ringd_staleness = staleness
    return new
