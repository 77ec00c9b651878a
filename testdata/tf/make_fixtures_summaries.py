"""Writes the TF1 summary fixtures in testdata/tf/ (run by hand, never by CI).

How to run (from the repository root; see make_fixtures.py for the venv):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 /work/tfenv/bin/python testdata/tf/make_fixtures_summaries.py

A TF1 training graph as real projects write it: `tf.compat.v1.summary.scalar/histogram` and
`merge_all`, a `Saver` (SaveV2/RestoreV2, never run here), a global step and Adam. The merged
`Summary` is a binary string (a serialized protocol buffer, not UTF-8), so `expected_strings` holds
it as `data_b64` (standard base64, what `autoclust run --json` prints for such bytes) and the test
compares those bytes exactly. The summaries read only values that are exact in any
implementation (fed tensors, the variables' values before the update — the train op waits for the
summaries — integer counts and constants); the loss and the updated variables are compared to
TensorFlow's within the fixtures' tolerance as usual.

Fixture:

- tf1_summaries_saver_adam: x[16,8] -> relu(x w1 + b1) w2 -> squared error; AdamOptimizer with a
  global step; scalar summaries of a constant, of a vector of tags, of an int count; histograms of
  the fed inputs and of w1 (before the step); a text summary and a tensor summary
  (TensorSummaryV2); MergeSummary of all; a Saver and an init op in the
  graph, pruned away by the fetch.
"""

import base64
import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_harness import TfRunner, export, variables_of, write_fixture  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
v1 = tf.compat.v1


def string_entry(v):
    """A string fetch as autoclust's JSON gives it (docs/contract.md section 3): `data` as text, and
    `data_b64` (every element, exact) only when some element is not UTF-8."""
    v = np.asarray(v, dtype=object)
    items = [bytes(s) for s in v.ravel()]
    entry = {"shape": list(v.shape), "data": [s.decode("utf-8", "replace") for s in items]}
    try:
        for s in items:
            s.decode("utf-8")
    except UnicodeDecodeError:
        entry["data_b64"] = [base64.b64encode(s).decode() for s in items]
    return entry


def tf1_summaries_saver_adam():
    name = "tf1_summaries_saver_adam"
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [16, 8], name="x")
        y = v1.placeholder(tf.float32, [16, 1], name="y")
        with v1.variable_scope("net", use_resource=True):
            w1 = v1.get_variable("w1", [8, 4])
            b1 = v1.get_variable("b1", [4], initializer=v1.zeros_initializer())
            w2 = v1.get_variable("w2", [4, 1])
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        loss = tf.reduce_mean(tf.square(tf.matmul(h, w2) - y), name="loss")
        v1.summary.scalar("learning_rate", tf.constant(0.01))
        v1.summary.scalar("positives", tf.reduce_sum(tf.cast(y > 0, tf.int64)))
        tf.raw_ops.ScalarSummary(tags=tf.constant(["x/first", "x/last"]), values=tf.stack([x[0, 0], x[-1, -1]]),
                                 name="corners")
        v1.add_to_collection(v1.GraphKeys.SUMMARIES, g.get_tensor_by_name("corners:0"))
        v1.summary.histogram("inputs", x)
        v1.summary.histogram("w1", w1.read_value())
        v1.summary.histogram("labels_int", tf.cast(y * 4.0, tf.int32))
        v1.summary.text("notes", tf.constant(["hello", "w\u00f6rld"]))
        v1.summary.tensor_summary("corner_block", x[:2, :3])
        merged = v1.summary.merge_all()
        gs = v1.train.get_or_create_global_step()
        with tf.control_dependencies([merged]):
            v1.train.AdamOptimizer(0.01).minimize(loss, global_step=gs, name="train")
        v1.train.Saver()
        v1.global_variables_initializer()
    gd = export(g, OUT, name)
    ops = {n.op for n in gd.node}
    for op in ["ScalarSummary", "HistogramSummary", "TensorSummaryV2", "MergeSummary", "SaveV2", "RestoreV2"]:
        assert op in ops, f"{name}: expected a {op} node"
    rng = np.random.default_rng(7)
    feeds = {"x": rng.normal(size=(16, 8)).astype(np.float32),
             "y": rng.normal(size=(16, 1)).astype(np.float32)}
    variables = {"net/w1": rng.normal(scale=0.5, size=(8, 4)).astype(np.float32),
                 "net/b1": np.zeros(4, np.float32),
                 "net/w2": rng.normal(scale=0.5, size=(4, 1)).astype(np.float32),
                 "global_step": np.array(0, np.int64)}
    # Adam's slots start at zero, its beta powers at beta1 and beta2, as its initializers set them.
    for var, (dtype, node) in variables_of(gd).items():
        if var not in variables:
            shape = [d.size for d in node.attr["shape"].shape.dim]
            start = {"beta1_power": 0.9, "beta2_power": 0.999}.get(var, 0.0)
            variables[var] = np.full(shape, start, dtype.as_numpy_dtype)
    fetch, target = ["loss:0"], ["train"]
    runner = TfRunner(gd, variables, feeds, [merged.name], target)
    (summary,) = runner.run(1)
    runner.session.close()
    write_fixture(OUT, name, gd, variables, feeds, fetch, target, 1,
                  extra={"expected_strings": {merged.name: string_entry(summary)}})
    print(name, merged.name, len(summary), "bytes")


if __name__ == "__main__":
    tf1_summaries_saver_adam()
