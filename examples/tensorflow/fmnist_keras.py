"""Fashion-MNIST, an MLP 784-256-128-10 trained with Keras 3's model.fit: on a ring of
peers (ring-launch -n 4 -- python fmnist_keras.py; mpirun; srun; TF_CONFIG), each on its
share of the data, gradients averaged over the ring in fp16. fmnist_keras_plain.py is the
same script on one process (docs/tensorflow.md shows the diff)."""
import argparse

import keras
import ringd.keras as rk

from fmnist_data import load

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--epochs", type=int, default=15)
p.add_argument("--batch", type=int, default=64, help="samples per step (per peer)")
p.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate at the start "
               "(a cosine decay to 0 over the run)")
p.add_argument("--limit", type=int, default=None, help="use the first N training samples")
args = p.parse_args()

rk.init(codec="fp16")
keras.utils.set_random_seed(0)
x, y = load("train", args.limit)
x, y = x[rk.rank()::rk.size()], y[rk.rank()::rk.size()]
x_test, y_test = load("test")
model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(256, activation="relu"),
                          keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)])
steps = args.epochs * -(-len(x) // args.batch)  # the cosine schedule's length
optimizer = rk.DistributedOptimizer(keras.optimizers.Adam(
    keras.optimizers.schedules.CosineDecay(args.lr, steps)))
model.compile(optimizer=optimizer, metrics=["accuracy"],
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=args.batch, epochs=args.epochs, verbose=2 if rk.rank() == 0 else 0,
          callbacks=[rk.BroadcastGlobalVariablesCallback(0), rk.MetricAverageCallback()])
loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
print("test accuracy %.2f %% (loss %.4f)" % (100 * accuracy, loss))
