"""A peer lost under ringd.tensorflow and ringd.keras: a peer SIGKILLs itself between two
training steps; every other peer's next step raises, naming it, within the timeout, never
hangs:

  eager  DistributedGradientTape.gradient raises ringd.PeerError with peer_rank
  graph  the tf.function step raises tf.errors.OpError whose text names the peer, and
         ringd.tensorflow.ringd_error(e) is the ringd.PeerError (peer_rank)
  keras  model.fit with ringd.keras's callbacks raises the ringd.PeerError itself
"""
import os
import signal
import time

import ringtest

ringtest.JOB_TIMEOUT = 120.0
TIMEOUT = 3.0  # the ring's timeout setting in these jobs (seconds)
SLACK = 10.0   # what a loaded 2-core machine (3 TensorFlow processes) may add to it
VICTIM = 1


def die_or_time(t, step_fn, steps_before=2):
    """Run step_fn(s) for steps_before steps, then the victim dies and the others run one
    more; returns (the exception, seconds it took) on the others."""
    for s in range(steps_before):
        step_fn(s)
    if t.rank == VICTIM:
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
    t0 = time.monotonic()
    try:
        for s in range(steps_before, steps_before + 20):  # bounded: the first one raises
            step_fn(s)
    except Exception as e:  # noqa: BLE001 - what it is, is the check
        return e, time.monotonic() - t0
    return None, time.monotonic() - t0


def model_and_step(tf, rtf, graph):
    g = tf.random.Generator.from_seed(1)
    vs = [tf.Variable(g.normal([64, 256])), tf.Variable(g.normal([256, 10]))]

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.nn.relu(x @ vs[0]) @ vs[1])
        grads = rtf.DistributedGradientTape(tape).gradient(loss, vs)
        for v, gr in zip(vs, grads):
            v.assign_sub(1e-4 * gr)
    return tf.function(step) if graph else step


def checks(t):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    import ringd
    import ringd.tensorflow as rtf
    mode = os.environ["RINGTEST_MODE"]
    rtf.init(timeout="%gs" % TIMEOUT)
    x = tf.ones([8, 64])
    if mode in ("eager", "graph"):
        step = model_and_step(tf, rtf, mode == "graph")
        err, took = die_or_time(t, lambda s: step(x))
        if mode == "eager":
            t.ok(isinstance(err, ringd.PeerError), "eager: the others raise ringd.PeerError",
                 repr(err))
            found = err
        else:
            t.ok(isinstance(err, tf.errors.OpError) and "rank %d" % VICTIM in str(err),
                 "graph: the others raise tf.errors.OpError naming rank %d" % VICTIM,
                 repr(err)[:600])
            found = rtf.ringd_error(err) if err is not None else None
            t.ok(isinstance(found, ringd.PeerError),
                 "graph: ringd_error(e) gives the ringd.PeerError back", repr(found))
    else:
        import keras
        import ringd.keras as rk
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256),
                                  keras.layers.Dense(10)])
        model.compile(optimizer=rk.DistributedOptimizer(keras.optimizers.SGD(1e-3)),
                      loss="mse")
        xs = np.ones((4000, 64), np.float32)
        ys = np.zeros((4000, 10), np.float32)

        class Die(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch == 3 and t.rank == VICTIM:
                    os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.monotonic()
        err = None
        try:
            model.fit(xs, ys, batch_size=8, epochs=1, verbose=0,
                      callbacks=[rk.BroadcastGlobalVariablesCallback(0), Die()])
        except Exception as e:  # noqa: BLE001
            err = e
        took = time.monotonic() - t0
        t.ok(isinstance(err, ringd.PeerError), "keras: model.fit raises ringd.PeerError",
             repr(err)[:600])
        found = err
    t.ok(found is not None and getattr(found, "peer_rank", None) == VICTIM,
         "%s: the error names rank %d" % (mode, VICTIM), repr(found)[:600])
    t.ok(took < TIMEOUT + SLACK, "%s: within the timeout (%.0f s) and some slack" % (
        mode, TIMEOUT), "took %.1f s" % took)


def job(mode):
    return (3, {"RINGTEST_MODE": mode})


ringtest.main(checks, launcher="env", worlds=(job("eager"), job("graph"), job("keras")),
              killed=lambda n, env: {VICTIM})
