"""DistributedGradientTape: tf.GradientTape whose gradient() returns the peers' average."""
import tensorflow as tf

from . import _ops


def allreduce_gradients(grads, compression=_ops.Compression.default, sparse_as_dense=False,
                        op=_ops.Average, bucket_bytes=_ops.BUCKET_BYTES):
    """A list of gradients (None, dense tensors, tf.IndexedSlices) averaged over the peers:
    the dense ones fused into buckets, in one op; IndexedSlices allgathered (or made dense
    with sparse_as_dense=True); None stays None (every peer must have the same Nones)."""
    grads = list(grads)
    out = list(grads)
    dense = []
    for i, g in enumerate(grads):
        if g is None:
            continue
        if isinstance(g, tf.IndexedSlices):
            if sparse_as_dense:
                dense.append(i)
                grads[i] = tf.convert_to_tensor(g)
            else:
                out[i] = _ops.allreduce(g, op=op)
            continue
        dense.append(i)
    # which gradients are None is part of what every peer must agree on
    where = "gradients of %d sources, None at %s" % (
        len(grads), [i for i, g in enumerate(grads) if g is None])
    reduced = _ops.grouped_allreduce([grads[i] for i in dense], op=op, compression=compression,
                                     bucket_bytes=bucket_bytes, name="ringd_gradients",
                                     agree_on=where)
    for i, r in zip(dense, reduced):
        out[i] = r
    return out


class DistributedGradientTape:
    """Wraps a tf.GradientTape (Horovod's shape): gradient() returns the gradients averaged
    over every peer, the dense ones fused into buckets of up to bucket_bytes (many small
    variables make a few large allreduces), in one op, eagerly or inside tf.function.

        with tf.GradientTape() as tape:
            loss = loss_fn(model(x), y)
        tape = ringd.tensorflow.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)

    compression: Compression.default (the ring's codec), none (exact), fp16 or bf16.
    sparse_as_dense: tf.IndexedSlices (embedding gradients) made dense and allreduced,
    instead of their values and indices allgathered. op: Average (default) or Sum."""

    def __init__(self, tape, compression=_ops.Compression.default, sparse_as_dense=False,
                 op=_ops.Average, bucket_bytes=_ops.BUCKET_BYTES):
        if isinstance(tape, DistributedGradientTape):
            tape = tape._tape
        if not isinstance(tape, tf.GradientTape):
            raise TypeError("ringd.tensorflow.DistributedGradientTape takes a tf.GradientTape, "
                            "not %s" % type(tape).__name__)
        _ops._op_name(op)
        _ops._wire(compression, tf.float32)  # a bad compression fails here, not mid-step
        self._tape = tape
        self._compression = compression
        self._sparse_as_dense = sparse_as_dense
        self._op = op
        self._bucket_bytes = bucket_bytes

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    def __getattr__(self, name):  # watch, stop_recording, reset, jacobian, ...
        return getattr(self._tape, name)

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        grads = self._tape.gradient(target, sources, output_gradients, unconnected_gradients)
        flat = tf.nest.flatten(grads, expand_composites=False)
        reduced = allreduce_gradients(flat, self._compression, self._sparse_as_dense,
                                      self._op, self._bucket_bytes)
        return tf.nest.pack_sequence_as(grads, reduced)
