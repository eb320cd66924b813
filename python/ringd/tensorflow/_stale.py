"""Stale averages (Pipe-SGD, ringd.torch's staleness=S) for TensorFlow: step t's gradients
start on the wire and the call returns the average of step t-S, which has had S steps to
travel. The first S calls have nothing to return yet (the pipeline fills): they say so
with a flag, and the caller (ringd.keras's optimizer) applies nothing then. Every peer
starts and finishes the same allreduces in the same order, so every peer gets the same
averages at the same steps and the variables stay bit-identical.

A pipeline lives on its owner (an optimizer, attribute _ringd_pipe), across the calls of a
traced step: its in-flight requests hold copies of the gradients (TensorFlow's buffers are only
valid during the call) that become the averages in place.
"""
import collections
import threading

import numpy as np
import tensorflow as tf

import ringd
from . import _bridge, _ops
from .._same import explain

_lock = threading.Lock()


class _Pipe:
    def __init__(self, staleness):
        self.staleness = staleness
        self.in_flight = collections.deque()  # per step: [(buffer, handle) per bucket]


def stale_allreduce(tensors, owner, staleness, op=_ops.Average,
                    compression=_ops.Compression.default, bucket_bytes=_ops.BUCKET_BYTES):
    """(the average of the group of tensors passed S calls ago, a bool tensor: True once
    there is one; while False the tensors returned are zeros). One op."""
    op = _ops._op_name(op)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    _bridge.check_not_xla("allreduce")
    buckets, ids = _ops.plan_group(tensors, compression, bucket_bytes, "stale %d" % staleness)
    codecs = [b["codec"] for b in buckets]

    def step(*arrays):
        with _lock:
            pipe = owner.__dict__.setdefault("_ringd_pipe", _Pipe(staleness))
        if pipe.staleness != staleness:
            raise ValueError("ringd.tensorflow: staleness changed from %d to %d for the same "
                             "optimizer" % (pipe.staleness, staleness))
        started = []
        try:
            for a, codec, tid in zip(arrays, codecs, ids):
                buf = np.array(a)  # a copy: the input is TensorFlow's only during this call
                started.append((buf, ringd.allreduce_async(_ops.as_ringd(buf), op=op,
                                                           codec=codec, tensor_id=tid)))
            pipe.in_flight.append(started)
            if len(pipe.in_flight) <= staleness:
                return (np.array(False),) + tuple(np.zeros_like(a) for a in arrays)
            oldest = pipe.in_flight.popleft()
            for _, h in oldest:
                h.wait()
        except ringd.MismatchError as e:
            raise explain(e, "allreduce", len(tensors)) from None
        return (np.array(True),) + tuple(buf for buf, _ in oldest)

    out = _bridge.run(step, _ops.pack(tensors, buckets),
                      [tf.bool] + [b["wire"] for b in buckets], "ringd_stale_allreduce")
    ready = out[0]
    ready.set_shape([])
    return _ops.unpack(out[1:], buckets, len(tensors)), ready
