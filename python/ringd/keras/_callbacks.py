"""Keras 3 callbacks for a ring (Horovod's): start every peer from root's variables,
average the metrics each peer logs, warm the learning rate up."""
import warnings

import keras
import numpy as np

import ringd
from .._same import explain, tensor_id


def broadcast_variables(variables, root_rank=0):
    """Every peer's Keras variables become root_rank's (one packed broadcast of their bytes;
    any backend, eagerly)."""
    variables = list(variables)
    if not 0 <= root_rank < ringd.size():
        raise ValueError("ringd.keras: root_rank %d is not a rank of this ring of %d peers"
                         % (root_rank, ringd.size()))
    arrays = [np.array(keras.ops.convert_to_numpy(v), order="C") for v in variables]
    if not arrays:
        return
    packed = np.concatenate([a.reshape(-1).view(np.uint8) for a in arrays])
    try:
        ringd.broadcast(packed, root=root_rank,
                        tensor_id=tensor_id([(a.shape, a.dtype.name) for a in arrays]))
    except ringd.MismatchError as e:
        raise explain(e, "broadcast_variables", len(arrays)) from None
    at = 0
    for v, a in zip(variables, arrays):
        v.assign(packed[at:at + a.nbytes].view(a.dtype).reshape(a.shape))
        at += a.nbytes


def _no_xla(model):
    """XLA cannot call ringd's collectives: a model compiled for it (jit_compile, Keras's
    default on a GPU with the TensorFlow backend) trains without it, and says so once."""
    if keras.backend.backend() == "tensorflow" and getattr(model, "jit_compile", False):
        warnings.warn("ringd.keras: jit_compile turned off for this model (XLA cannot call "
                      "ringd's collectives); compile with jit_compile=False to not see this",
                      stacklevel=3)
        model.jit_compile = False
        model.train_function = None


def _raise_ringd_errors(model):
    """model.fit's compiled step raises tf.errors.UnknownError for a failed ringd collective
    (TensorFlow wraps exceptions raised inside a graph): make it raise the ringd.Error
    (PeerError naming the lost peer, ...) instead, as it does eagerly."""
    fn = getattr(model, "train_function", None)
    if keras.backend.backend() != "tensorflow" or fn is None or getattr(fn, "_ringd", False):
        return
    from ringd.tensorflow import ringd_error

    def train_function(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - re-raised as it is unless it is ringd's
            err = ringd_error(e)
            if err is None or err is e:
                raise
            raise err from e
    train_function._ringd = True
    model.train_function = train_function


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """At the start of training, every peer's model weights and optimizer state become
    root_rank's, so the peers start alike (and a model restored on root alone is shared).
    It also turns XLA off for the model (XLA cannot call ringd) and makes fit() raise a
    failed collective's ringd.Error (a lost peer: PeerError with its peer_rank)."""

    def __init__(self, root_rank=0):
        super().__init__()
        self.root_rank = root_rank
        self.done = False

    def set_model(self, model):
        super().set_model(model)
        _no_xla(model)

    def on_train_begin(self, logs=None):
        _raise_ringd_errors(self.model)
        if self.done:
            return
        opt = self.model.optimizer
        if opt is not None and not opt.built:
            opt.build(self.model.trainable_variables)
        variables = list(self.model.weights) + (list(opt.variables) if opt is not None else [])
        broadcast_variables(variables, self.root_rank)
        self.done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """At the end of each epoch, the logged metrics (loss, accuracy, val_...) become the
    average over the peers, before the callbacks after it (progress bar, History,
    checkpoints) see them."""

    def on_epoch_end(self, epoch, logs=None):
        if not logs or ringd.size() == 1:
            return
        keys = sorted(k for k, v in logs.items() if np.ndim(v) == 0)
        values = np.array([float(logs[k]) for k in keys], np.float32)
        try:
            ringd.allreduce(values, op="avg", tensor_id=tensor_id([(k, "metric") for k in keys]))
        except ringd.MismatchError as e:
            raise ringd.MismatchError("ringd.keras.MetricAverageCallback: the peers logged "
                                      "different metrics (this rank: %s): %s" % (keys, e)) \
                from None
        for k, v in zip(keys, values):
            logs[k] = float(v)


class LearningRateWarmupCallback(keras.callbacks.Callback):
    """The learning rate grows from initial_lr / size to initial_lr over warmup_epochs
    (Goyal et al.; Horovod's callback): a large global batch starts gently.
    steps_per_epoch: batches per epoch (default: what fit() says)."""

    def __init__(self, initial_lr, warmup_epochs=5, steps_per_epoch=None, verbose=0):
        super().__init__()
        if warmup_epochs <= 0:
            raise ValueError("ringd.keras: warmup_epochs must be > 0, not %r" % (warmup_epochs,))
        self.initial_lr = float(initial_lr)
        self.warmup_epochs = warmup_epochs
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.epoch >= self.warmup_epochs:
            return
        steps = self.steps_per_epoch or (self.params or {}).get("steps")
        if not steps:
            raise ValueError("ringd.keras.LearningRateWarmupCallback: give steps_per_epoch "
                             "(fit() did not say how many batches an epoch has)")
        progress = (self.epoch + batch / float(steps)) / self.warmup_epochs
        size = ringd.size()
        lr = self.initial_lr / size * (1 + progress * (size - 1))
        self.model.optimizer.learning_rate = lr

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.warmup_epochs - 1:
            self.model.optimizer.learning_rate = self.initial_lr
            if self.verbose and ringd.rank() == 0:
                print("\nEpoch %d: ringd warm-up done, learning rate %g"
                      % (epoch + 1, self.initial_lr))
