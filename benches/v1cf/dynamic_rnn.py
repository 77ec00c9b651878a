"""A benchmark-size TF1 `dynamic_rnn` training step (control flow v1: frames, TensorArrayV3,
while-loop gradients with stacks), exported with its inputs, and TensorFlow's own steps/s on it
in a TF1 Session (with and without XLA auto-clustering). Run by hand, never by CI:

    TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python benches/v1cf/dynamic_rnn.py

writes benches/v1cf/out/dynamic_rnn.{pbtxt,json,vars.safetensors,feeds.safetensors,...} and prints
TensorFlow's figures; then time autoclust on the same files (BENCHMARKS.md gives the commands):

    autoclust bench benches/v1cf/out/dynamic_rnn.pbtxt --feeds benches/v1cf/out/dynamic_rnn.feeds.safetensors \\
        --vars benches/v1cf/out/dynamic_rnn.vars.safetensors --fetch loss:0 --target train --steps 200

The cell is the one of testdata/tf/make_fixtures_v1cf.py (BasicRNNCell: tanh([x, h]·W + b));
batch 32, 20 time steps, 16 inputs, 64 units, plain SGD.
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testdata", "tf"))
sys.path.insert(0, os.path.join(HERE, "..", "tf"))
from make_fixtures_v1cf import BasicRNNCell  # noqa: E402
from tf_baseline import session_config, steady_rate  # noqa: E402
from tf_harness import TfRunner, export, write_fixture  # noqa: E402

v1 = tf.compat.v1
BATCH, TIME, INPUTS, UNITS = 32, 20, 16, 64


def main():
    v1.disable_control_flow_v2()
    out = os.path.join(HERE, "out")
    os.makedirs(out, exist_ok=True)
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [BATCH, TIME, INPUTS], name="x")
        t = v1.placeholder(tf.float32, [BATCH, UNITS], name="t")
        with v1.variable_scope("rnn_model", use_resource=True):
            cell = BasicRNNCell(UNITS)
            outputs, _ = v1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        loss = tf.reduce_mean(tf.square(outputs[:, -1, :] - t))
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        tf.identity(loss, name="loss")
    gd = export(g, out, "dynamic_rnn")
    rng = np.random.default_rng(7)
    names = sorted(n.attr["shared_name"].s.decode() or n.name for n in gd.node if n.op == "VarHandleOp")
    shapes = {"kernel": (INPUTS + UNITS, UNITS), "bias": (UNITS,)}
    variables = {nm: (rng.standard_normal(shapes[nm.rsplit("/", 1)[-1]]) * 0.1).astype(np.float32) for nm in names}
    feeds = {"x": rng.standard_normal((BATCH, TIME, INPUTS)).astype(np.float32),
             "t": rng.standard_normal((BATCH, UNITS)).astype(np.float32)}
    write_fixture(out, "dynamic_rnn", gd, variables, feeds, ["loss:0"], [train.name], 2)
    for xla in (False, True):
        r = TfRunner(gd, variables, feeds, ["loss:0"], [train.name], config=session_config(xla))
        for _ in range(5):
            r.step()
        rates = sorted(steady_rate(r.step, 2.0) for _ in range(3))
        print("dynamic_rnn", "tf_xla" if xla else "tf", "%.1f steps/s (median of 3)" % rates[1])
        r.session.close()


if __name__ == "__main__":
    t0 = time.time()
    main()
    print("done in %.1f s" % (time.time() - t0))
