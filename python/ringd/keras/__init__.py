"""ringd.keras - Keras 3 on ringd: model.fit on N peers with a few changed lines
(examples/tensorflow/fmnist_keras.py: 7).

    import ringd.keras as rk
    rk.init()
    model.compile(optimizer=rk.DistributedOptimizer(keras.optimizers.Adam(1e-3)), ...)
    model.fit(x, y, callbacks=[rk.BroadcastGlobalVariablesCallback(0),
                               rk.MetricAverageCallback()], ...)

Keras 3 on its TensorFlow backend (the gradients go through ringd.tensorflow, eagerly or
in the compiled train step; XLA is turned off for ringd's models) and on its torch
backend (through ringd's allreduce of torch tensors). docs/tensorflow.md.
"""
try:
    import keras as _keras
except ImportError as _e:  # pragma: no cover - depends on the machine
    raise ImportError("ringd.keras needs Keras 3 (pip install keras, or tensorflow-cpu "
                      "which brings it): %s" % _e) from None
if int(_keras.__version__.split(".")[0]) < 3:  # pragma: no cover
    raise ImportError("ringd.keras needs Keras 3; this is Keras %s (pip install -U keras)"
                      % _keras.__version__)

from ringd import (init, is_initialized, local_rank, local_size, rank, shutdown,  # noqa: F401
                   size)
from ._optimizer import Compression, DistributedOptimizer, allreduce_gradients
from ._callbacks import (BroadcastGlobalVariablesCallback, LearningRateWarmupCallback,
                         MetricAverageCallback, broadcast_variables)

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
           "Compression", "DistributedOptimizer", "allreduce_gradients",
           "BroadcastGlobalVariablesCallback", "MetricAverageCallback",
           "LearningRateWarmupCallback", "broadcast_variables"]
