"""Fashion-MNIST, the MLP 784-256-128-10, with a custom training loop (tf.function,
tf.GradientTape), the way TensorFlow's distributed tutorials train: each worker of a
cluster described by TF_CONFIG takes its share of the data, and the workers average their
gradients over a ring instead of sending them to parameter servers.

    # worker i of 4 (TF_CONFIG as TensorFlow's MultiWorkerMirroredStrategy reads it):
    TF_CONFIG='{"cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2222", ...]},
                "task": {"type": "worker", "index": i}}' python fmnist_tape.py
    # or: ring-launch -n 4 -- python fmnist_tape.py; mpirun -n 4 python fmnist_tape.py
"""
import argparse
import time

import numpy as np
import tensorflow as tf
import ringd.tensorflow as rtf

from fmnist_data import load

p = argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--epochs", type=int, default=15)
p.add_argument("--batch", type=int, default=64, help="samples per step (per worker)")
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--limit", type=int, default=None, help="use the first N training samples")
p.add_argument("--compression", choices=["none", "fp16", "bf16"], default="fp16")
p.add_argument("--eager", action="store_true", help="run the step eagerly (no tf.function)")
args = p.parse_args()

rtf.init()  # TF_CONFIG, ring-launch's RING_*, Open MPI's or Slurm's variables
rank, size = rtf.rank(), rtf.size()
tf.random.set_seed(0)
x, y = load("train", args.limit)
x_test, y_test = load("test")
x, y = x[rank::size], y[rank::size]  # this worker's share
data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=rank) \
    .batch(args.batch, drop_remainder=True)

init = tf.keras.initializers.GlorotUniform(seed=0)
sizes = [784, 256, 128, 10]
weights = [tf.Variable(init([a, b])) for a, b in zip(sizes, sizes[1:])]
biases = [tf.Variable(tf.zeros([b])) for b in sizes[1:]]
variables = weights + biases
optimizer = tf.keras.optimizers.Adam(args.lr)


def logits_of(xb):
    h = xb
    for i, (w, b) in enumerate(zip(weights, biases)):
        h = h @ w + b
        if i < len(weights) - 1:
            h = tf.nn.relu(h)
    return h


def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(yb, logits_of(xb)))
    tape = rtf.DistributedGradientTape(tape, compression=args.compression)
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(grads, variables))
    return loss


if not args.eager:
    train_step = tf.function(train_step)

start, steps = time.time(), 0
for epoch in range(args.epochs):
    losses = []
    for xb, yb in data:
        losses.append(float(train_step(xb, yb)))
        if steps == 0:  # every worker starts from rank 0's variables and optimizer state
            rtf.broadcast_variables(variables + list(optimizer.variables), root_rank=0)
        steps += 1
    mean = rtf.allreduce(tf.constant(np.mean(losses), tf.float32)).numpy()
    if rank == 0:
        print("epoch %d: loss %.4f (average over %d workers), %.1f s" % (
            epoch + 1, mean, size, time.time() - start), flush=True)
accuracy = np.mean(np.argmax(logits_of(x_test).numpy(), 1) == y_test)
if rank == 0:
    print("test accuracy %.2f %%, %d steps of %d x %d samples in %.1f s" % (
        100 * accuracy, steps, size, args.batch, time.time() - start))
