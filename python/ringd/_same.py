"""Every peer must pass the same tensors to a grouped collective (the same shapes and
dtypes, in the same order). libringd compares each call's tensor id with the peers'
(RING_ERR_MISMATCH when they differ), so a fused call's id is a hash of what it carries:
tensors that differ only in shape, with the same total size, are caught as well, on every
call, at no cost, and every peer raises (no silent mix, no hang)."""
import hashlib

import ringd

# libringd's own ids and ringd.torch's live at 0xFFFF0000 and above
_ID_SPACE = 0xFFF00000


def tensor_id(items, index=0):
    """The tensor id of part `index` of a grouped call carrying items ((shape, dtype),
    or any text the peers must agree on)."""
    text = ";".join("%s:%s" % item for item in items) + "#%d" % index
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") % _ID_SPACE


def explain(err, what, count):
    """The MismatchError of a grouped call whose peers passed different tensors."""
    return ringd.MismatchError(
        "ringd: %s of %d tensors: the peers passed different tensors (their number, shapes, "
        "dtypes or order differ; libringd: %s). Every peer must build the same model and "
        "compute gradients of the same variables in the same order (TensorFlow, a variable "
        "without a gradient on some peers: tape.gradient(..., "
        "unconnected_gradients=tf.UnconnectedGradients.ZERO))" % (what, count, err.message))
