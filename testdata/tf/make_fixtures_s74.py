"""Writes session 74's TensorFlow fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_s74.py [--out DIR] [NAME...]

Exported like the other TF2 generators (`make_fixtures_tf2.write`: the concrete function's graph,
variables as captured resource placeholders, TensorFlow's outputs after each step). Cases: README.md.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_keras_sweep import check_captures  # noqa: E402
from make_fixtures_sweep4 import run_main  # noqa: E402
from make_fixtures_tf2 import captured_variables, write  # noqa: E402


def spec(shape, dt, name):
    return tf.TensorSpec(shape, dt, name=name)


def s74_half_accumulation():
    """Bias gradients of a mixed_bfloat16-style step (bfloat16 forward and backward, float32 variables
    and SGD): bfloat16 `BiasAddGrad`s of a 4-D (conv) and a 2-D (dense) activation, beside
    float16/bfloat16 `Cumsum`/`Cumprod` (sweep 73). TensorFlow's CPU kernels keep a bfloat16
    accumulator for `BiasAddGrad` (rows added in order, each partial sum rounded) and a half running
    value for the scans: autoclust summed in float32 and was 25-33% off TensorFlow's bias update
    (3,000 float16 ones cumsummed to 3000, not TensorFlow's 2048). Both modes now give TensorFlow's
    bits for these. (bfloat16 MatMul and Conv2DBackpropFilter still accumulate in float32: not here.)"""
    rng = np.random.default_rng(741)
    b = tf.Variable(rng.standard_normal((8,)).astype(np.float32), name="b")
    c = tf.Variable(rng.standard_normal((96,)).astype(np.float32), name="c")

    @tf.function(input_signature=[spec([16, 12, 12, 8], tf.float32, "x"), spec([3000], tf.float16, "ones")])
    def step(x, ones):
        with tf.GradientTape() as tape:
            xb = tf.cast(x * 3.0 + 0.5, tf.bfloat16)
            h = tf.nn.relu(tf.nn.bias_add(xb, tf.cast(b, tf.bfloat16)))
            d = tf.nn.bias_add(tf.reshape(h, [-1, 96]), tf.cast(c, tf.bfloat16))
            loss = tf.reduce_sum(tf.cast(d, tf.float32) ** 2)
        gb, gc = tape.gradient(loss, [b, c])
        b.assign_sub(0.0001 * gb)
        c.assign_sub(0.0001 * gc)
        direct = tf.raw_ops.BiasAddGrad(out_backprop=xb)
        s16 = tf.math.cumsum(ones)
        sbf = tf.math.cumsum(tf.cast(ones, tf.bfloat16), reverse=True)
        p16 = tf.math.cumprod(ones * tf.constant(1.01, tf.float16), exclusive=True)
        pbf = tf.math.cumprod(tf.cast(ones, tf.bfloat16) * tf.constant(1.01, tf.bfloat16))
        return loss, gb, gc, direct, s16, sbf, p16, pbf

    cf = step.get_concrete_function()
    variables = captured_variables(cf, [b, c])
    check_captures("s74_half_accumulation", cf, variables)
    feeds = {"x": rng.standard_normal((16, 12, 12, 8)).astype(np.float32), "ones": np.ones(3000, np.float16)}
    write("s74_half_accumulation", cf, variables, feeds, 2)


FIXTURES = [s74_half_accumulation]


if __name__ == "__main__":
    run_main(FIXTURES)
