"""ringd.tensorflow and ringd.keras with N real peers (TensorFlow from PyPI, in the venv
tests/scripts/python-tensorflow.test makes; TensorFlow is imported before ringd, as users
do):

  ops      allreduce (Average, Sum, bf16, fp16 compression), allgather with a first
           dimension that differs per rank, broadcast of int64 and bool, broadcast_variables:
           exact values, eagerly and inside tf.function
  tape     K steps of SGD on an MLP with DistributedGradientTape, each rank on its slice of
           a batch: the variables equal (to float tolerance, codec none) one process
           trained on the whole N x batch, bit-identical on every rank; the same step in a
           tf.function gives the same variables as eagerly; many small variables
           travel in one bucket; fp16 compression stays close and identical on every rank
  sparse   an embedding's tf.IndexedSlices gradient (allgathered) and sparse_as_dense
           both equal the dense average
  keras    model.fit with DistributedOptimizer, BroadcastGlobalVariablesCallback and
           MetricAverageCallback: every rank ends with the same weights, equal to one
           process fitting the whole batch; the logged loss is the peers' average; the
           warm-up callback reaches the learning rate it was given
  stale    DistributedOptimizer(staleness=1) in a custom loop, in tf.function and eagerly:
           the same weights on every rank, equal to one process applying step t-1's average
           at step t (nothing at step 0); and in model.fit (the same weights everywhere)
  misuse   int32 allreduce (TypeError), different variable lists on different ranks, and
           (jobs of their own) one dtype on rank 0 and another on the others, and a
           gradient on rank 0 that is None on the others
           (MismatchError on every rank, then again on the next call), XLA
           (NotImplementedError),
           a bad compression (ValueError)
"""
import os

import ringtest

ringtest.JOB_TIMEOUT = 300.0
STEPS, B, LR = 5, 6, 0.1


def mlp_vars(tf, seed=7, extra_small=0):
    """An MLP's variables (and extra_small tiny ones, to fill a bucket with many)."""
    g = tf.random.Generator.from_seed(seed)
    vs = [tf.Variable(g.normal([10, 16]) * 0.3), tf.Variable(tf.zeros([16])),
          tf.Variable(g.normal([16, 4]) * 0.3), tf.Variable(tf.zeros([4]))]
    vs += [tf.Variable(g.normal([3]) * 0.1) for _ in range(extra_small)]
    return vs


def loss_of(tf, vs, x, y):
    h = tf.nn.relu(x @ vs[0] + vs[1])
    logits = h @ vs[2] + vs[3]
    for v in vs[4:]:
        logits += tf.reduce_sum(v) * 0.01
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))


def data(tf, step, rank):
    seed = [step, rank]
    x = tf.random.stateless_normal([B, 10], seed)
    y = tf.random.stateless_uniform([B], seed, 0, 4, tf.int32)
    return x, y


def flat(np, vs):
    return np.concatenate([np.asarray(v.numpy(), np.float32).ravel() for v in vs])


def op_checks(t, tf, np, rtf):
    r, n = t.rank, t.world
    x = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3) + r)
    want_avg = np.arange(6, dtype=np.float32).reshape(2, 3) + (n - 1) / 2.0
    t.ok(np.array_equal(rtf.allreduce(x).numpy(), want_avg), "ops: eager allreduce averages")

    @tf.function
    def graph(x):
        return (rtf.allreduce(x, op=rtf.Sum), rtf.allgather(tf.fill([r + 1, 2], float(r))),
                rtf.broadcast(tf.constant([r, -r], tf.int64), root_rank=n - 1),
                rtf.broadcast(tf.constant([r == 0, True]), root_rank=0))
    s, g, b64, bb = graph(x)
    t.ok(np.array_equal(s.numpy(), n * np.arange(6).reshape(2, 3) + n * (n - 1) / 2),
         "ops: allreduce Sum in a tf.function")
    want_g = np.concatenate([np.full([q + 1, 2], float(q), np.float32) for q in range(n)])
    t.ok(np.array_equal(g.numpy(), want_g), "ops: allgather of rank+1 rows each, in rank order",
         g.numpy())
    t.ok(list(b64.numpy()) == [n - 1, 1 - n] and list(bb.numpy()) == [True, True],
         "ops: broadcast of int64 and bool from the root", (b64.numpy(), bb.numpy()))
    bf = rtf.allreduce(tf.constant([1.5, 2.5], tf.bfloat16) * (r + 1))
    t.ok(bf.dtype == tf.bfloat16 and np.allclose(bf.numpy().astype(np.float32),
                                                 np.array([1.5, 2.5]) * (n + 1) / 2.0),
         "ops: bfloat16 allreduce", bf.numpy())
    h = rtf.allreduce(tf.constant([1 / 3.0, 1000.0 + r]), compression=rtf.Compression.fp16)
    t.ok(h.dtype == tf.float32 and abs(h.numpy()[0] - 1 / 3.0) < 1e-3,
         "ops: fp16 compression comes back float32, rounded to fp16", h.numpy())
    t.same("ops: the fp16 result", h.numpy().tolist())
    mixed = rtf.grouped_allreduce([tf.fill([3], float(r)), tf.fill([2], tf.cast(r, tf.float16)),
                                   tf.fill([5], tf.cast(r, tf.bfloat16))])
    t.ok([m.dtype for m in mixed] == [tf.float32, tf.float16, tf.bfloat16] and
         all(np.allclose(m.numpy().astype(np.float32), (n - 1) / 2.0) for m in mixed),
         "ops: a group of float32, float16 and bfloat16 tensors: each averaged, dtypes kept",
         [m.numpy() for m in mixed])
    vs = mlp_vars(tf, seed=100 + r)
    rtf.broadcast_variables(vs, root_rank=0)
    t.same("ops: broadcast_variables from rank 0", ringtest.digest(flat(np, vs)))
    t.ok(np.array_equal(flat(np, vs), flat(np, mlp_vars(tf, seed=100))),
         "ops: the variables are rank 0's")


def train(tf, rtf, vs, rank, world, graph, compression=None, sparse_as_dense=False):
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_of(tf, vs, x, y)
        tape = rtf.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(loss, vs)
        for v, g in zip(vs, grads):
            v.assign_sub(LR * g)
        return loss
    if graph:
        step = tf.function(step)
    for s in range(STEPS):
        step(*data(tf, s, rank))


def reference(tf, world, extra_small=0):
    """One process, no ringd: the whole N x B batch each step."""
    vs = mlp_vars(tf, extra_small=extra_small)
    for s in range(STEPS):
        parts = [data(tf, s, q) for q in range(world)]
        x = tf.concat([p[0] for p in parts], 0)
        y = tf.concat([p[1] for p in parts], 0)
        with tf.GradientTape() as tape:
            loss = loss_of(tf, vs, x, y)
        for v, g in zip(vs, tape.gradient(loss, vs)):
            v.assign_sub(LR * g)
    return vs


def tape_checks(t, tf, np, rtf, ringd):
    ref = flat(np, reference(tf, t.world, extra_small=30))
    got = {}
    for graph in (False, True):
        vs = mlp_vars(tf, extra_small=30)
        train(tf, rtf, vs, t.rank, t.world, graph)
        got[graph] = flat(np, vs)
        mode = "tf.function" if graph else "eager"
        t.same("tape %s: the variables after %d steps" % (mode, STEPS),
               ringtest.digest(got[graph]))
        err = float(np.max(np.abs(got[graph] - ref)))
        t.ok(err < 2e-5, "tape %s: equal to one process on the %d x batch (max diff < 2e-5)"
             % (mode, t.world), "max diff %g" % err)
    diff = float(np.max(np.abs(got[True] - got[False])))
    t.ok(diff < 1e-6, "tape: tf.function gives the same variables as eager (max diff %.1g)"
         % diff, "max diff %g" % diff)
    # 34 variables in one bucket: one allreduce a step (ring-level count from the stats)
    vs = mlp_vars(tf, extra_small=30)
    calls = []
    orig = ringd.allreduce_async

    def counting(*a, **k):
        calls.append(1)
        return orig(*a, **k)
    ringd.allreduce_async = counting
    try:
        train(tf, rtf, vs, t.rank, t.world, graph=True)
    finally:
        ringd.allreduce_async = orig
    t.eq(len(calls), STEPS, "tape: 34 variables travel as one allreduce per step")
    vs = mlp_vars(tf)
    train(tf, rtf, vs, t.rank, t.world, graph=True, compression=rtf.Compression.fp16)
    f16 = flat(np, vs)
    t.same("tape fp16: the variables", ringtest.digest(f16))
    ref4 = flat(np, reference(tf, t.world))
    t.ok(float(np.max(np.abs(f16 - ref4))) < 5e-3, "tape fp16: close to the exact run (5e-3)",
         float(np.max(np.abs(f16 - ref4))))


def sparse_checks(t, tf, np, rtf):
    emb = tf.Variable(tf.reshape(tf.range(40, dtype=tf.float32), [10, 4]) / 40.0)

    def grad_for(rank):
        ids = tf.constant([rank % 10, (rank * 3 + 1) % 10, 7])
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(emb, ids) ** 2)
        return tape, loss
    def dense_grad(q):
        tape, loss = grad_for(q)
        return tf.convert_to_tensor(tape.gradient(loss, emb))
    dense_ref = sum(dense_grad(q) for q in range(t.world)) / t.world
    for as_dense in (False, True):
        tape, loss = grad_for(t.rank)
        g = rtf.DistributedGradientTape(tape, sparse_as_dense=as_dense).gradient(loss, emb)
        kind = "sparse_as_dense" if as_dense else "IndexedSlices allgathered"
        t.ok(isinstance(g, tf.IndexedSlices) != as_dense, "sparse: %s keeps its kind" % kind,
             type(g).__name__)
        err = float(np.max(np.abs(tf.convert_to_tensor(g).numpy() - dense_ref.numpy())))
        t.ok(err < 1e-6, "sparse: %s equals the dense average" % kind, err)


def keras_model(keras, seed=3):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((10,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(4)])


def keras_data(np, world):
    """Samples laid out so that rank r's k-th batch of B is rows [k N B + r B, ...) of the
    whole set: together the N ranks' batches are the one process's batch of N x B."""
    rng = np.random.default_rng(5)
    steps = 4
    x = rng.normal(size=(steps * world * B, 10)).astype(np.float32)
    y = rng.integers(0, 4, size=steps * world * B)
    return x, y, steps


def keras_checks(t, tf, np, rk, ringd):
    import keras
    x, y, steps = keras_data(np, t.world)
    rows = np.concatenate([np.arange(k * t.world * B + t.rank * B, k * t.world * B +
                                     (t.rank + 1) * B) for k in range(steps)])
    model = keras_model(keras, seed=3 + t.rank)  # different starts: the callback aligns them
    model.compile(optimizer=rk.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(x[rows], y[rows], batch_size=B, epochs=2, shuffle=False, verbose=0,
                     callbacks=[rk.BroadcastGlobalVariablesCallback(0),
                                rk.MetricAverageCallback()])
    w = np.concatenate([np.ravel(v) for v in model.get_weights()])
    t.same("keras: the weights after fit", ringtest.digest(w))
    t.same("keras: the logged losses (averaged over the peers)", hist.history["loss"])
    ref = keras_model(keras, seed=3)
    ref.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rhist = ref.fit(x, y, batch_size=B * t.world, epochs=2, shuffle=False, verbose=0)
    rw = np.concatenate([np.ravel(v) for v in ref.get_weights()])
    err = float(np.max(np.abs(w - rw)))
    t.ok(err < 2e-5, "keras: fit on %d peers equals one process on the %d x batch" % (
        t.world, t.world), "max diff %g" % err)
    t.ok(t.world == 1 or abs(hist.history["loss"][-1] - rhist.history["loss"][-1]) < 0.05,
         "keras: the averaged loss is near the one process's", (hist.history["loss"],
                                                                 rhist.history["loss"]))
    m = keras_model(keras)
    m.compile(optimizer=rk.DistributedOptimizer(keras.optimizers.SGD(0.2)), loss=keras.losses
              .SparseCategoricalCrossentropy(from_logits=True))
    m.fit(x[rows], y[rows], batch_size=B, epochs=2, verbose=0,
          callbacks=[rk.BroadcastGlobalVariablesCallback(0),
                     rk.LearningRateWarmupCallback(0.2, warmup_epochs=1)])
    lr = float(keras.ops.convert_to_numpy(m.optimizer.learning_rate))
    # a model compiled for XLA (Keras's default on a GPU): the callback turns it off, says
    # so, and fit trains through ringd
    import warnings
    xm = keras_model(keras)
    xm.compile(optimizer=rk.DistributedOptimizer(keras.optimizers.SGD(0.1)), jit_compile=True,
               loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        xh = xm.fit(x[rows], y[rows], batch_size=B, epochs=1, verbose=0,
                    callbacks=[rk.BroadcastGlobalVariablesCallback(0)])
    t.ok(xm.jit_compile is False and len(xh.history["loss"]) == 1 and
         any("jit_compile turned off" in str(w.message) for w in said),
         "keras: a model compiled with jit_compile=True trains without XLA, and is told",
         (xm.jit_compile, [str(w.message) for w in said]))
    t.same("keras: the XLA model's weights after fit", ringtest.digest(
        np.concatenate([np.ravel(v) for v in xm.get_weights()])))
    t.ok(abs(lr - 0.2) < 1e-7, "keras: the warm-up ends at the learning rate given", lr)


def stale_checks(t, tf, np, rk, S=1):
    """DistributedOptimizer(staleness=S) in a custom loop: step t applies the average of
    step t-S (nothing in the first S steps), the same on every rank, and equal to one
    process doing exactly that with every rank's batch."""
    import keras
    loss_obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def grads_of(model, x, y):
        with tf.GradientTape() as tape:
            loss = loss_obj(y, model(x))
        return tape.gradient(loss, model.trainable_variables)
    got = {}
    for graph in (True, False):
        model = keras_model(keras, seed=3)
        opt = rk.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9), staleness=S)

        def step(x, y):
            opt.apply(grads_of(model, x, y), model.trainable_variables)
        if graph:
            step = tf.function(step)
        for s in range(STEPS):
            step(*data(tf, s, t.rank))
        got[graph] = np.concatenate([np.ravel(v) for v in model.get_weights()])
        mode = "tf.function" if graph else "eager"
        t.same("stale %s: the weights after %d steps with staleness %d" % (mode, STEPS, S),
               ringtest.digest(got[graph]))
        t.eq(int(opt.iterations.numpy()), STEPS - S,
             "stale %s: %d updates applied in %d steps (the first %d fill the pipeline)"
             % (mode, STEPS - S, STEPS, S))
    x, y, steps = keras_data(np, t.world)
    model = keras_model(keras, seed=3)
    model.compile(optimizer=rk.DistributedOptimizer(keras.optimizers.Adam(1e-3), staleness=S),
                  loss=loss_obj)
    model.fit(x[t.rank::t.world], y[t.rank::t.world], batch_size=B, epochs=2, shuffle=False,
              verbose=0, callbacks=[rk.BroadcastGlobalVariablesCallback(0)])
    t.same("stale fit: the weights after model.fit with staleness %d" % S, ringtest.digest(
        np.concatenate([np.ravel(v) for v in model.get_weights()])))
    t.eq(int(model.optimizer.iterations.numpy()), 2 * steps - S,
         "stale fit: %d updates in %d steps" % (2 * steps - S, 2 * steps))
    ref = keras_model(keras, seed=3)
    ref_opt = keras.optimizers.SGD(0.1, momentum=0.9)
    queue = []
    for s in range(STEPS):
        per_rank = [grads_of(ref, *data(tf, s, q)) for q in range(t.world)]
        queue.append([sum(gs) / t.world for gs in zip(*per_rank)])
        if len(queue) > S:
            ref_opt.apply(queue.pop(0), ref.trainable_variables)
    rw = np.concatenate([np.ravel(v) for v in ref.get_weights()])
    for graph in (True, False):
        err = float(np.max(np.abs(got[graph] - rw)))
        t.ok(err < 2e-5, "stale %s: equal to one process applying step t-%d's average of "
             "the %d ranks' gradients at step t" % ("tf.function" if graph else "eager", S,
                                                     t.world), "max diff %g" % err)


def misuse_checks(t, tf, np, rtf, ringd):
    t.raises(TypeError, lambda: rtf.allreduce(tf.constant([1, 2])),
             "misuse: an int32 allreduce is a TypeError naming the dtypes ringd reduces",
             lambda e: "float32" in str(e) and "int32" in str(e))
    t.raises(ValueError, lambda: rtf.DistributedGradientTape(tf.GradientTape(),
                                                              compression="zip"),
             "misuse: a bad compression is a ValueError")
    @tf.function(jit_compile=True)
    def xla(x):
        return rtf.allreduce(x)
    t.raises(NotImplementedError, lambda: xla(tf.ones([2])),
             "misuse: inside XLA (jit_compile=True): NotImplementedError saying to compile "
             "without it", lambda e: "jit_compile=False" in str(e))
    # last: a mismatch fails the ring for good (libringd's errors are sticky)
    vs = mlp_vars(tf)
    if t.world > 1 and os.environ.get("RINGTEST_MISMATCH") == "dtype":
        dtype = tf.float32 if t.rank == 0 else tf.float16
        t.raises(ringd.MismatchError, lambda: rtf.grouped_allreduce([tf.ones([4], dtype)]),
                 "misuse: the same tensor as float32 on rank 0 and float16 on the others: "
                 "MismatchError on every rank", lambda e: "different tensors" in str(e))
    elif t.world > 1 and os.environ.get("RINGTEST_MISMATCH") == "none":
        with tf.GradientTape() as tape:  # the other ranks leave all but the first unused
            loss = loss_of(tf, vs, *data(tf, 0, t.rank)) if t.rank == 0 else \
                tf.reduce_sum(vs[0])
        t.raises(ringd.MismatchError,
                 lambda: rtf.DistributedGradientTape(tape).gradient(loss, vs),
                 "misuse: a variable with a gradient on rank 0 and None on the others: "
                 "MismatchError on every rank", lambda e: "different tensors" in str(e))
    elif t.world > 1:
        mine = vs if t.rank == 0 else vs[:2]
        with tf.GradientTape() as tape:
            loss = loss_of(tf, vs, *data(tf, 0, t.rank))
        err = t.raises(ringd.MismatchError,
                       lambda: rtf.DistributedGradientTape(tape).gradient(loss, mine),
                       "misuse: different variable lists on different ranks: MismatchError "
                       "on every rank", lambda e: "different tensors" in str(e))
        t.raises(ringd.MismatchError, lambda: rtf.allreduce(tf.ones([3])),
                 "misuse: a later collective raises it again (the ring is failed)",
                 lambda e: err is not None and "collective arguments differ" in str(e))


def checks(t):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if os.environ.get("RINGTEST_MISMATCH"):  # a job for the one misuse that ends the ring
        import numpy as np
        import tensorflow as tf
        import ringd
        import ringd.tensorflow as rtf
        rtf.init(timeout="20s")
        misuse_checks(t, tf, np, rtf, ringd)
        rtf.shutdown()
        return
    try:
        import numpy as np
        import tensorflow as tf
    except ImportError as e:
        t.skip("ringd.tensorflow", "no TensorFlow in %s: %s" % (os.sys.executable, e))
        return
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    import ringd
    import ringd.tensorflow as rtf
    import ringd.keras as rk
    rtf.init(timeout="20s")
    op_checks(t, tf, np, rtf)
    tape_checks(t, tf, np, rtf, ringd)
    sparse_checks(t, tf, np, rtf)
    keras_checks(t, tf, np, rk, ringd)
    stale_checks(t, tf, np, rk)
    misuse_checks(t, tf, np, rtf, ringd)
    rtf.shutdown()


ringtest.main(checks, worlds=(1, 2, 3, (2, {"RINGTEST_MISMATCH": "dtype"}),
                              (2, {"RINGTEST_MISMATCH": "none"})))
