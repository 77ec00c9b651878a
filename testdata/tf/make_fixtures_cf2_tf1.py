"""Writes the TensorFlow-made fixtures of TF1 graphs built with control flow v2 (what
`tf.compat.v1` code gets by default in TensorFlow 2: functional `If`/`While`) (run by hand,
never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/tf/make_fixtures_cf2_tf1.py

`tf.compat.v1.layers` needs the `tf-keras` package (`pip install tf-keras==2.21.*`).

- cf2_tf1_dropout_cond: `tf.compat.v1.layers.dropout(training=PlaceholderWithDefault(True),
  seed=5)` (a v2 cond whose branch draws `RandomUniform`), a squared loss and
  GradientDescentOptimizer on a resource variable. The v2 cond returns its intermediates wrapped
  as Optionals for its gradient, and `tf.gradients` gives the gradient cond `ZerosLike` of
  each (sweep 69b: that `ZerosLike` of a variant failed in both modes). 2 steps.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.compat.v1.layers
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_harness import export, write_fixture  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
v1 = tf.compat.v1
raw = tf.raw_ops


def cf2_tf1_dropout_cond():
    g = tf.Graph()
    with g.as_default():
        v1.set_random_seed(7)
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        training = v1.placeholder_with_default(True, [], name="is_training")
        w = v1.get_variable("w", [3, 5], initializer=v1.random_normal_initializer(seed=1), use_resource=True)
        h = v1.layers.dropout(tf.matmul(x, w), 0.5, training=training, seed=5)
        loss = tf.reduce_sum(tf.square(h), name="loss")
        v1.train.GradientDescentOptimizer(0.01).minimize(loss, name="train")
        init = v1.global_variables_initializer()
    gd = export(g, OUT, "cf2_tf1_dropout_cond")
    ops = {n.op for n in gd.node}
    assert ops & {"If", "StatelessIf"} and "ZerosLike" in ops, sorted(ops)
    with v1.Session(graph=g) as s:
        s.run(init)
        variables = {"w": s.run(w)}
    feeds = {"x": np.random.default_rng(69).standard_normal((4, 3)).astype(np.float32)}
    write_fixture(OUT, "cf2_tf1_dropout_cond", gd, variables, feeds, ["loss:0"], ["train"], 2)


if __name__ == "__main__":
    cf2_tf1_dropout_cond()
