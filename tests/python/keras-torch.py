"""ringd.keras on Keras 3's torch backend (KERAS_BACKEND=torch; torch 2.x and keras from
PyPI, in the venv tests/scripts/python-torch2.test keeps), with N real peers:

  fit    model.fit with DistributedOptimizer and BroadcastGlobalVariablesCallback, each
         rank on its slice of every batch: every rank ends with the same weights, equal
         (float tolerance, codec none) to one process fitting the whole N x batch
  avg    MetricAverageCallback: the logged loss is the same on every rank
"""
import os

import ringtest

os.environ["KERAS_BACKEND"] = "torch"
ringtest.JOB_TIMEOUT = 300.0
B = 6


def build(keras, seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((10,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(4)])


def checks(t):
    try:
        import keras
        import numpy as np
        import torch
    except ImportError as e:
        t.skip("ringd.keras on torch", "no keras or torch here: %s" % e)
        return
    torch.set_num_threads(1)
    import ringd.keras as rk
    rk.init(timeout="20s")
    t.eq(keras.backend.backend(), "torch", "the backend is torch")
    rng = np.random.default_rng(5)
    steps, n = 4, t.world
    x = rng.normal(size=(steps * n * B, 10)).astype(np.float32)
    y = rng.integers(0, 4, size=steps * n * B)
    rows = np.concatenate([np.arange(k * n * B + t.rank * B, k * n * B + (t.rank + 1) * B)
                           for k in range(steps)])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model = build(keras, 3 + t.rank)
    model.compile(optimizer=rk.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9)),
                  loss=loss)
    hist = model.fit(x[rows], y[rows], batch_size=B, epochs=2, shuffle=False, verbose=0,
                     callbacks=[rk.BroadcastGlobalVariablesCallback(0),
                                rk.MetricAverageCallback()])
    w = np.concatenate([np.ravel(v) for v in model.get_weights()])
    t.same("fit: the weights on every rank", ringtest.digest(w))
    t.same("avg: the logged losses", hist.history["loss"])
    ref = build(keras, 3)
    ref.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss=loss)
    ref.fit(x, y, batch_size=B * n, epochs=2, shuffle=False, verbose=0)
    err = float(np.max(np.abs(w - np.concatenate([np.ravel(v) for v in ref.get_weights()]))))
    t.ok(err < 2e-5, "fit: %d peers equal one process on the %d x batch" % (n, n),
         "max diff %g" % err)
    rk.shutdown()


ringtest.main(checks, worlds=(1, 2))
