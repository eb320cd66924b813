"""How a TensorFlow program reaches libringd: one tf.numpy_function per collective.

Eagerly the function runs at once (tf.numpy_function calls it directly); inside a
tf.function it is a stateful op, so TensorFlow keeps the collectives in program order
(every peer must start them in the same order) and never prunes or reorders them. The
function gets host numpy arrays (a CPU tensor's memory, or a copy of a device tensor's)
and returns new ones; libringd writes the result straight into them.

Why this and not a custom op compiled against TensorFlow's headers (Horovod's way) or
DLPack: docs/tensorflow.md, "How it works", with the measurements.

Errors: a ringd.Error raised eagerly reaches the caller as itself. Inside a
tf.function, TensorFlow turns any Python exception into tf.errors.UnknownError; the
message keeps the ringd error's text (the lost peer's rank and address), and
ringd_error(e) gives the ringd.Error back, typed, with its peer_rank.
"""
import itertools
import re
import threading

import numpy as np
import tensorflow as tf

import ringd

# ringd.Errors raised inside a graph, by serial number (the number is in the message)
_raised = {}
_raised_lock = threading.Lock()
_serial = itertools.count(1)
_KEEP = 64
_TAG = re.compile(r"\[ringd error #(\d+)\]")


class _Tagged(Exception):
    """What leaves a graph: the ringd.Error's type and text, and its serial number."""


def _stash(err):
    with _raised_lock:
        n = next(_serial)
        _raised[n] = err
        for old in [k for k in _raised if k <= n - _KEEP]:
            del _raised[old]
    return n


def ringd_error(exc):
    """The ringd.Error behind an exception from TensorFlow (tf.errors.OpError raised by a
    tf.function or model.fit whose ringd collective failed), or exc itself when it is one;
    None when exc did not come from ringd."""
    if isinstance(exc, ringd.Error):
        return exc
    m = _TAG.search(str(getattr(exc, "message", None) or exc))
    if m is None:
        return None
    with _raised_lock:
        return _raised.get(int(m.group(1)))


def run(fn, inputs, touts, name):
    """fn(*numpy arrays) -> tuple of numpy arrays, as a TensorFlow op with outputs of
    dtypes touts. Eagerly a ringd.Error propagates as itself; in a graph it leaves tagged
    (ringd_error finds it)."""
    if tf.executing_eagerly():
        out = fn(*[t.numpy() for t in inputs])
        return [tf.convert_to_tensor(o) for o in out]

    def graph_fn(*arrays):
        try:
            return fn(*arrays)
        except ringd.Error as e:
            n = _stash(e)
            raise _Tagged("%s: %s [ringd error #%d]" % (type(e).__name__, e, n)) from None

    return tf.numpy_function(graph_fn, list(inputs), list(touts), stateful=True, name=name)


def check_not_xla(what):
    """Refuse to be traced into an XLA cluster: XLA cannot call back into Python, and its
    own error would not say what to do."""
    try:
        from tensorflow.python.ops import control_flow_util
        graph = tf.compat.v1.get_default_graph()
        in_xla = control_flow_util.GraphOrParentsInXlaContext(graph)
    except (ImportError, AttributeError):  # an internal module that moved: cannot tell
        return
    if in_xla:
        # NotImplementedError: autograph re-raises it as it is (its own types only; a
        # ringd.UnsupportedError would reach the caller as a StagingError)
        raise NotImplementedError(
            "ringd.tensorflow: %s inside a tf.function(jit_compile=True) (XLA): XLA cannot "
            "call ringd's collectives; compile without XLA (Keras: model.compile(..., "
            "jit_compile=False); ringd.keras's callbacks turn it off)" % what)


def as_numpy_dtype(dtype):
    return np.dtype(tf.as_dtype(dtype).as_numpy_dtype)
