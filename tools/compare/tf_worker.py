#!/usr/bin/env python3
"""tf_worker.py - one worker of tools/compare/tf-compare.sh: a Keras 3 model trained by a
tf.function custom loop on the cluster TF_CONFIG describes, its gradients averaged either
by TensorFlow's MultiWorkerMirroredStrategy (collective ops over gRPC, the strategy's
custom-loop recipe) or by ringd (ringd.tensorflow.DistributedGradientTape), with the same
model, per-worker batch, data shards and optimizer (Adam); prints one JSON line (rank 0):
samples/s over the timed steps (all workers) and the last loss. (A custom loop, not
model.fit: Keras 3.15's fit under a multi-worker MultiWorkerMirroredStrategy fails before
the first step, reducing a PerReplica batch in _maybe_symbolic_build.)

  --system mwms         tf.distribute.MultiWorkerMirroredStrategy (RING collectives)
  --system ringd-fp32   ringd.tensorflow.DistributedGradientTape, fp32 on the wire
  --system ringd-fp16   the same, fp16 on the wire (codec fp16)
  --model mlp           Fashion-MNIST's MLP 784-256-128-10 (235,146 parameters) on the
                        real data (Debian's dataset-fashion-mnist)
  --model wide          784-W-W-W-10 with W = --width (2048: 10.0M parameters; 3584: 28.5M),
                        comm-bound, on random data of Fashion-MNIST's shape
"""
import argparse
import json
import os
import sys
import time

p = argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--system", choices=["mwms", "ringd-fp32", "ringd-fp16"], required=True)
p.add_argument("--model", choices=["mlp", "wide"], default="mlp")
p.add_argument("--width", type=int, default=3584)
p.add_argument("--batch", type=int, default=64, help="samples per step per worker")
p.add_argument("--warmup", type=int, default=20, help="steps before the clock starts")
p.add_argument("--steps", type=int, default=200, help="timed steps")
args = p.parse_args()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

cfg = json.loads(os.environ["TF_CONFIG"])
size = len(cfg["cluster"]["worker"])
rank = int(cfg["task"]["index"])
total = args.warmup + args.steps
gbatch = args.batch * size


def build():
    keras.utils.set_random_seed(0)
    hidden = [256, 128] if args.model == "mlp" else [args.width] * 3
    layers = [keras.Input((784,))] + [keras.layers.Dense(h, activation="relu") for h in hidden]
    return keras.Sequential(layers + [keras.layers.Dense(10)])


def data():
    if args.model == "mlp":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "examples", "tensorflow"))
        from fmnist_data import load
        return load("train")
    rng = np.random.default_rng(0)
    return (rng.normal(size=(8192, 784)).astype(np.float32),
            rng.integers(0, 10, size=8192).astype(np.int64))


loss_obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
x, y = data()
if args.system == "mwms":
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING))
    with strategy.scope():
        model = build()
        opt = keras.optimizers.Adam(1e-3)
        opt.build(model.trainable_variables)

    def dataset_fn(ctx):  # each worker its share, as the strategy's tutorial does
        return tf.data.Dataset.from_tensor_slices((x, y)).shard(
            ctx.num_input_pipelines, ctx.input_pipeline_id).repeat().batch(
            args.batch, drop_remainder=True)
    it = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tf.function
    def train_step(it):
        def step_fn(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(loss_obj(yb, model(xb, training=True)),
                                                  global_batch_size=gbatch)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))  # all-reduces them
            return loss
        return strategy.reduce("SUM", strategy.run(step_fn, args=next(it)), axis=None)
    step = lambda: train_step(it)  # noqa: E731
else:
    import ringd.tensorflow as rtf
    rtf.init(codec="fp16" if args.system == "ringd-fp16" else "none")
    model = build()
    opt = keras.optimizers.Adam(1e-3)
    opt.build(model.trainable_variables)
    rtf.broadcast_variables(model.variables, root_rank=0)
    it = iter(tf.data.Dataset.from_tensor_slices((x, y)).shard(size, rank).repeat()
              .batch(args.batch, drop_remainder=True))

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(loss_obj(yb, model(xb, training=True)))
        tape = rtf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    step = lambda: train_step(*next(it))  # noqa: E731

for _ in range(args.warmup):
    step()
t0 = time.perf_counter()
for _ in range(args.steps):
    loss = step()
loss = float(loss)  # the last step is done
secs = time.perf_counter() - t0
params = int(sum(np.prod(w.shape) for w in model.get_weights()))
if rank == 0:
    print(json.dumps({"system": args.system, "model": args.model, "params": params,
                      "workers": size, "global_batch": gbatch, "steps": args.steps,
                      "seconds": round(secs, 3),
                      "samples_per_s": round(gbatch * args.steps / secs, 1), "loss": loss}),
          flush=True)
