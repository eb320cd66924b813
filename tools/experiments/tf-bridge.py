#!/usr/bin/env python3
"""tf-bridge.py - how TensorFlow should reach ringd, measured on one model: the training
step of the Fashion-MNIST MLP 784-256-128-10 (batch 64 per peer, 235,146 parameters)
timed with each way of calling ringd's allreduce from TensorFlow, on the same peers:

  none            no allreduce at all: the step's own cost (what any bridge adds to)
  numpy_function  tf.numpy_function inside tf.function (ringd.tensorflow's way): host
                  numpy views of the tensors, one Python call per step
  py_function     tf.py_function inside tf.function: EagerTensors in and out
  eager-numpy     the step run eagerly, the gradient's .numpy() (zero copy on the CPU)
                  allreduced and wrapped back; what DLPack would give, without graph mode
  custom-op       a TensorFlow custom op calling libringd's ring_allreduce directly on
                  the same ring (tf_op/ringd_allreduce_op.cc, compiled here with g++
                  against the installed TensorFlow's headers: Horovod's way; skipped when
                  it does not build)
  raw             ringd.allreduce of the same bytes from numpy, no TensorFlow: the
                  collective itself

Run it on the peers: ring-launch -n 4 -- python tf-bridge.py [--steps N]. Rank 0 prints
the median step time of each way and its overhead over none + raw.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

import ringd
import ringd.tensorflow as rtf
from ringd.tensorflow import _ops

p = argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--steps", type=int, default=200, help="timed steps per way (default 200)")
p.add_argument("--batch", type=int, default=64)
p.add_argument("--build", default=None, help="the build tree whose .libs has libringd, for "
               "the custom op (default: the one the ringd package is in)")
args = p.parse_args()

rtf.init()
rank = rtf.rank()
init = tf.keras.initializers.GlorotUniform(seed=0)
sizes = [784, 256, 128, 10]
variables = [tf.Variable(init([a, b])) for a, b in zip(sizes, sizes[1:])] + \
    [tf.Variable(tf.zeros([b])) for b in sizes[1:]]
count = sum(int(np.prod(v.shape)) for v in variables)
x = tf.random.stateless_normal([args.batch, 784], [rank, 0])
y = tf.random.stateless_uniform([args.batch], [rank, 1], 0, 10, tf.int32)


def grads_of():
    with tf.GradientTape() as tape:
        h = x
        for i in range(3):
            h = h @ variables[i] + variables[3 + i]
            if i < 2:
                h = tf.nn.relu(h)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, h))
    return tape.gradient(loss, variables)


def flat(gs):
    return tf.concat([tf.reshape(g, [-1]) for g in gs], 0)


def reduce_np(a):
    out = np.empty_like(a)
    ringd.allreduce(a, op="avg", out=out)
    return out


def apply(gs, f):
    at = 0
    for v, g in zip(variables, gs):
        n = int(np.prod(v.shape))
        v.assign_sub(1e-3 * tf.reshape(f[at:at + n], v.shape))
        at += n


@tf.function
def step_none():
    gs = grads_of()
    apply(gs, flat(gs))


@tf.function
def step_numpy_function():
    gs = grads_of()
    f = tf.numpy_function(reduce_np, [flat(gs)], tf.float32, stateful=True)
    apply(gs, f)


@tf.function
def step_ringd():  # ringd.tensorflow itself: the tape's fused path
    gs = _ops.grouped_allreduce(grads_of())
    for v, g in zip(variables, gs):
        v.assign_sub(1e-3 * g)


@tf.function
def step_py_function():
    gs = grads_of()
    f = tf.py_function(lambda t: tf.convert_to_tensor(reduce_np(t.numpy())), [flat(gs)],
                       tf.float32)
    apply(gs, f)


def step_eager_numpy():
    gs = grads_of()
    f = tf.convert_to_tensor(reduce_np(flat(gs).numpy()))
    apply(gs, f)


def load_custom_op():
    """The prototype op, compiled against this TensorFlow; (op module, None) or (None, why)."""
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(os.path.dirname(here))
    build = args.build or os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(ringd.__file__))))
    out = os.path.join(tempfile.mkdtemp(prefix="ringd-tf-op."), "ringd_allreduce_op.so")
    cmd = (["g++", "-O2", "-shared", "-fPIC", "-w",
            os.path.join(here, "tf_op", "ringd_allreduce_op.cc"), "-o", out] +
           tf.sysconfig.get_compile_flags() + ["-I" + os.path.join(top, "include"),
                                               "-L" + os.path.join(build, ".libs"), "-lringd",
                                               "-Wl,-rpath," + os.path.join(build, ".libs")] +
           tf.sysconfig.get_link_flags())
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if r.returncode != 0:
        return None, r.stdout[-300:]
    return tf.load_op_library(out), None


op, why = load_custom_op()
ringd.barrier()
if op is not None:
    address = ringd._runtime._comm._address()

    @tf.function
    def step_custom_op():
        gs = grads_of()
        apply(gs, op.ringd_allreduce_proto(flat(gs), comm=address))
elif rank == 0:
    print("# custom op not built: %s" % why, file=sys.stderr)

buf = np.ones(count, np.float32)


def step_raw():
    reduce_np(buf)


ways = [("none", step_none), ("numpy_function", step_numpy_function),
        ("ringd.tensorflow", step_ringd), ("py_function", step_py_function),
        ("eager-numpy", step_eager_numpy), ("raw", step_raw)] + \
    ([("custom-op", step_custom_op)] if op is not None else [])
times = {}
for name, fn in ways:
    for _ in range(10):  # warm-up (tracing)
        fn()
    ringd.barrier()
    t = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    times[name] = float(np.median(t)) * 1e3
if rank == 0:
    base = times["none"] + times["raw"]
    print("# tf-bridge: %d peers, TensorFlow %s, %d parameters (%.2f MB fp32), batch %d, "
          "median of %d steps" % (rtf.size(), tf.__version__, count, count * 4 / 1e6,
                                  args.batch, args.steps))
    print("%-18s %10s %22s" % ("way", "ms/step", "over none + raw (ms)"))
    for name, _ in ways:
        over = times[name] - base if name not in ("none", "raw") else float("nan")
        print("%-18s %10.3f %22s" % (name, times[name],
                                      "" if over != over else "%+.3f" % over))
rtf.shutdown()
