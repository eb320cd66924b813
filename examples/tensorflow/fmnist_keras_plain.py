"""Fashion-MNIST, an MLP 784-256-128-10 trained with Keras 3's model.fit: one process.
fmnist_keras.py is the same script on a ring (docs/tensorflow.md shows the diff)."""
import argparse

import keras

from fmnist_data import load

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--epochs", type=int, default=15)
p.add_argument("--batch", type=int, default=64, help="samples per step (per peer)")
p.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate at the start "
               "(a cosine decay to 0 over the run)")
p.add_argument("--limit", type=int, default=None, help="use the first N training samples")
args = p.parse_args()

keras.utils.set_random_seed(0)
x, y = load("train", args.limit)
x_test, y_test = load("test")
model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(256, activation="relu"),
                          keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)])
steps = args.epochs * -(-len(x) // args.batch)  # the cosine schedule's length
optimizer = keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(args.lr, steps))
model.compile(optimizer=optimizer, metrics=["accuracy"],
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=args.batch, epochs=args.epochs, verbose=2)
loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
print("test accuracy %.2f %% (loss %.4f)" % (100 * accuracy, loss))
