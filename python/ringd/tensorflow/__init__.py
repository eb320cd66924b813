"""ringd.tensorflow - TensorFlow on ringd (Horovod's TensorFlow API, docs/tensorflow.md).

    import tensorflow as tf, ringd.tensorflow as rtf
    rtf.init()                                    # the launcher's variables, as ringd.init
    ...
    with tf.GradientTape() as tape:
        loss = loss_fn(model(x, training=True), y)
    tape = rtf.DistributedGradientTape(tape)      # gradient(): the peers' average
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    rtf.broadcast_variables(model.variables, root_rank=0)   # once, after the first step

Eagerly and inside tf.function (not XLA). The collectives: allreduce (Average or Sum,
tf.IndexedSlices allgathered), allgather, broadcast, broadcast_variables. Keras 3:
ringd.keras. A failed collective raises the ringd.Error eagerly; inside a tf.function
TensorFlow raises tf.errors.UnknownError with its text, and ringd_error(e) gives the
ringd.Error (its peer_rank) back.
"""
try:
    import tensorflow as _tf  # noqa: F401
except ImportError as _e:  # pragma: no cover - depends on the machine
    raise ImportError(
        "ringd.tensorflow needs TensorFlow (pip install tensorflow-cpu, in the venv ringd "
        "is installed in; docs/tensorflow.md): %s" % _e) from None

from ringd import (init, is_initialized, local_rank, local_size, rank, shutdown,  # noqa: F401
                   size)
from ._bridge import ringd_error
from ._ops import (Average, Compression, Sum, allgather, allreduce, broadcast,
                   broadcast_variables, grouped_allreduce)
from ._tape import DistributedGradientTape, allreduce_gradients

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
           "Average", "Sum", "Compression", "allreduce", "grouped_allreduce", "allgather",
           "broadcast", "broadcast_variables", "DistributedGradientTape",
           "allreduce_gradients", "ringd_error"]
