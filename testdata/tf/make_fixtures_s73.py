"""Writes session 73's TensorFlow fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_s73.py [--out DIR] [NAME...]

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


def s73_cond_branch_shapes():
    """`tf.cond(i < 0, lambda: tf.range(3), lambda: tf.range(5))` beside conds whose branches agree and a
    loop (sweep 72): the JIT selects between branches of one type only, so this `If` compiled nowhere and,
    admitted into the big cluster, sent all of it to the interpreter (a note; 0.55-0.67x the plain
    executor). The clusterer now proves the branches' result shapes differ ([3] and [5]) and keeps the
    node out: every cluster compiles."""
    rng = np.random.default_rng(731)
    v = tf.Variable(rng.standard_normal((4, 4)).astype(np.float32) * 0.5, name="v")

    @tf.function(input_signature=[spec([None, 4], tf.float32, "x"), spec([], tf.int32, "i")])
    def step(x, i):
        a = tf.cond(i < tf.shape(x)[0], lambda: tf.gather(x, i), lambda: -tf.ones([4]))
        c = tf.cond(i < 0, lambda: tf.range(3), lambda: tf.range(5))
        d = tf.cond(i > 2, lambda: tf.reduce_sum(x, 0) * 2.0, lambda: tf.reduce_max(x, 0))
        acc = tf.zeros([4])
        t = tf.constant(0)
        while t < tf.shape(x)[0]:
            acc += tf.tanh(tf.linalg.matvec(v, tf.gather(x, t)))
            t += 1
        v.assign(v * 0.9 + tf.reduce_mean(acc))
        return a, c * 2, d, acc

    cf = step.get_concrete_function()
    variables = captured_variables(cf, [v])
    check_captures("s73_cond_branch_shapes", cf, variables)
    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32), "i": np.int32(5)}
    write("s73_cond_branch_shapes", cf, variables, feeds, 2)


FIXTURES = [s73_cond_branch_shapes]


if __name__ == "__main__":
    run_main(FIXTURES)
