"""Writes the CSV-pipeline and detection post-processing fixtures in testdata/tf/ (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 /work/tfenv/bin/python testdata/tf/make_fixtures_csv_detection.py

Fixtures:

- csv_serialize_sgd (TF1 graph): 8 fed CSV lines (quoted fields with delimiters and escaped quotes, empty
  and `NA` fields taking defaults, hex and exponent floats, `+`-signed and space-padded integers) ->
  `tf.io.decode_csv` with float32, int32, string, float64 and int64 columns, and again with
  `select_cols` and a `|` delimiter over the lines' last field; the string column hashed into an
  embedding table (`StringToHashBucketFast`); numeric features -> a linear model trained one SGD step;
  the weights round-tripped through `tf.io.serialize_tensor`/`parse_tensor` (the serialized bytes are a
  fetch, compared exactly); `tf.linalg.cross` of two 3-vector features; `tf.timestamp()` fetched only as
  "later than 2020".
- detection_combined_nms (TF2 function, inference): per-anchor features `[2, 24, 6]` -> a dense head
  (variables) giving box deltas and class logits for 3 classes -> anchor decoding -> sigmoid ->
  `tf.image.combined_non_max_suppression` twice: shared boxes (`q = 1`, clipped) and per-class boxes
  (`q = 3`, `pad_per_class`, unclipped); plus TF1's `NonMaxSuppressionV2` on the first image's best class.
"""

import base64
import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_harness import TfRunner, export, write_fixture  # noqa: E402
from make_fixtures_summaries import string_entry  # noqa: E402
from make_fixtures_tf2 import captured_variables, write  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
v1 = tf.compat.v1

LINES = [
    '1.5,3,"red, dark",2.25,10,k|a',
    '0x1.8p1, 7 ,"say ""hi""",-1e-3,+20,k|b',
    ',4,blue,NA,30,|a',
    '2.5e1,,green,0.5,,k|c',
    'NA,-2,"",1.25,40,k|b',
    '  -0.75 ,+9,red,3,50,"k|d"',
    '4,1,"multi\nline",-2.5,60,k|a',
    'inf,0,blue,1e300,70,k|c|extra',
]


def csv_serialize_sgd():
    name = "csv_serialize_sgd"
    rng = np.random.default_rng(11)
    g = tf.Graph()
    with g.as_default():
        records = v1.placeholder(tf.string, [8], name="records")
        defaults = [tf.constant([-1.0]), tf.constant([0], tf.int32), tf.constant(["none"]),
                    tf.constant([0.0], tf.float64), tf.constant([5], tf.int64), tf.constant([], tf.string)]
        x, n, color, d, big, tail = tf.io.decode_csv(records, defaults, na_value="NA", name="csv")
        # The last field split at "|", its first part skipped by select_cols (what follows the selected
        # part is never read).
        (tag,) = tf.io.decode_csv(tail, [tf.constant(["?"])], field_delim="|", select_cols=[1], name="csv_tag")
        x = tf.where(tf.math.is_finite(x), x, tf.zeros_like(x))
        feats = tf.stack([x, tf.cast(n, tf.float32), tf.cast(tf.clip_by_value(d, -10.0, 10.0), tf.float32),
                          tf.cast(big, tf.float32) / 10.0], axis=1, name="features")
        bucket = tf.strings.to_hash_bucket_fast(tf.strings.join([color, tag], separator="/"), 16, name="bucket")
        with v1.variable_scope("model", use_resource=True):
            w = v1.get_variable("w", [4, 1])
            emb = v1.get_variable("emb", [16, 1])
            b = v1.get_variable("b", [1], initializer=v1.zeros_initializer())
        logits = tf.matmul(feats, w) + tf.gather(emb, bucket) + b
        labels = tf.cast(tf.reshape(tf.equal(tf.math.floormod(n, 2), 1), [8, 1]), tf.float32)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits), name="loss")
        # The weights before the step, through their serialized bytes (the step waits for them).
        serialized = tf.io.serialize_tensor(w.read_value(), name="serialized_w")
        parsed = tf.io.parse_tensor(serialized, tf.float32, name="parsed_w")
        scores = tf.identity(tf.reduce_sum(tf.reshape(parsed, [4]) * feats, axis=1), name="scores")
        with tf.control_dependencies([serialized, scores]):
            v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        tf.linalg.cross(feats[:, :3], feats[:, 1:], name="cross")
        tf.greater(tf.timestamp(), 1.58e9, name="clock_is_sane")
        tf.identity(tag, name="tag")
        tf.identity(color, name="color")
    gd = export(g, OUT, name)
    ops = {n.op for n in gd.node}
    for op in ["DecodeCSV", "SerializeTensor", "ParseTensor", "Cross", "Timestamp"]:
        assert op in ops, f"{name}: expected a {op} node"
    variables = {"model/w": rng.normal(scale=0.3, size=(4, 1)).astype(np.float32),
                 "model/emb": rng.normal(scale=0.3, size=(16, 1)).astype(np.float32),
                 "model/b": np.zeros(1, np.float32)}
    fetch = ["loss:0", "features:0", "bucket:0", "scores:0", "cross:0", "clock_is_sane:0", "csv:1"]
    strings = ["serialized_w:0", "tag:0", "color:0"]
    feeds = {"records": np.array([s.encode() for s in LINES], dtype=object)}
    runner = TfRunner(gd, variables, feeds, strings, ["train"])
    string_values = runner.run(1)
    runner.session.close()
    manifest = write_fixture(OUT, name, gd, variables, {}, fetch, ["train"], 1, extra={
        "string_feeds": {"records": {"dtype": "string", "shape": [8],
                                     "data": [{"b64": base64.b64encode(s.encode()).decode()} for s in LINES]}},
        "expected_strings": {f: string_entry(v) for f, v in zip(strings, string_values)},
    }, tf_feeds=feeds)
    print(name, manifest["fetch"])


def detection_combined_nms():
    rng = np.random.default_rng(12)
    anchors_np = np.stack(np.meshgrid(np.linspace(0.1, 0.9, 4), np.linspace(0.1, 0.9, 6), indexing="ij"), -1)
    anchors_np = anchors_np.reshape(24, 2).astype(np.float32)
    inits = {"w": (rng.standard_normal((6, 4 + 3)) * 0.5).astype(np.float32),
             "b": np.array([0, 0, 0, 0, -0.5, 0.2, 0.0], np.float32),
             "wc": (rng.standard_normal((6, 3 * 4)) * 0.3).astype(np.float32)}
    v = {k: tf.Variable(val, name=k) for k, val in inits.items()}

    @tf.function(input_signature=[tf.TensorSpec([2, 24, 6], tf.float32, name="features")])
    def detect(features):
        head = tf.einsum("bnf,fk->bnk", features, v["w"]) + v["b"]
        deltas, logits = head[..., :4], head[..., 4:]
        anchors = tf.constant(anchors_np)
        center = anchors[None] + 0.1 * deltas[..., :2]
        size = 0.2 * tf.exp(0.5 * tf.tanh(deltas[..., 2:]))
        boxes = tf.concat([center - size / 2, center + size / 2], -1)
        scores = tf.sigmoid(logits)
        shared = tf.image.combined_non_max_suppression(boxes[:, :, None, :], scores, 5, 8, iou_threshold=0.4,
                                                       score_threshold=0.3)
        per_class_deltas = tf.reshape(tf.einsum("bnf,fk->bnk", features, v["wc"]), [2, 24, 3, 4])
        per_class = boxes[:, :, None, :] + 0.05 * per_class_deltas
        padded = tf.image.combined_non_max_suppression(per_class, scores, 2, 10, iou_threshold=0.5,
                                                       score_threshold=0.2, pad_per_class=True,
                                                       clip_boxes=False)
        best = tf.reduce_max(scores[0], axis=1)
        v2 = tf.raw_ops.NonMaxSuppressionV2(boxes=boxes[0], scores=best, max_output_size=6,
                                            iou_threshold=tf.constant(0.3))
        return list(shared) + list(padded) + [v2]

    feeds = {"features": rng.standard_normal((2, 24, 6)).astype(np.float32)}
    cf = detect.get_concrete_function()
    write("detection_combined_nms", cf, captured_variables(cf, list(v.values())), feeds, 1)


if __name__ == "__main__":
    csv_serialize_sgd()
    detection_combined_nms()
