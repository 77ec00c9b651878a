"""Writes the raw-bytes record fixtures in testdata/tf/ (run by hand, never by CI).

How to run (from the repository root; see make_fixtures.py for the venv):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 /work/tfenv/bin/python testdata/tf/make_fixtures_records.py

Serialized `tf.train.Example`s are binary strings, not UTF-8: the manifest's `string_feeds` give
them as TensorFlow Serving's `{"b64": "..."}` elements (standard base64), which `autoclust run
--feed` reads (docs/contract.md section 3).

Fixture:

- records_decode_raw_sgd: a batch of 6 serialized Examples, each with a 4x4 uint8 "image" and a
  little-endian float32[3] "extra" stored as bytes features, a big-endian int32 "id" and a
  variable-length "tag" (1-5 bytes); ParseExample -> DecodeRaw (uint8; float32; int32 with
  little_endian=False) and DecodePaddedRaw (int16, fixed_length 4) -> a linear model on the decoded
  pixels and extras, trained one SGD step.
"""

import base64
import os
import struct
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_harness import export, write_fixture  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
v1 = tf.compat.v1


def records_decode_raw_sgd():
    name = "records_decode_raw_sgd"
    rng = np.random.default_rng(3)
    examples = []
    for i in range(6):
        img = rng.integers(0, 256, size=(4, 4), dtype=np.uint8)
        extra = rng.normal(size=3).astype("<f4")
        feats = {
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[img.tobytes()])),
            "extra": tf.train.Feature(bytes_list=tf.train.BytesList(value=[extra.tobytes()])),
            "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[struct.pack(">i", 1000 * i - 2500)])),
            "tag": tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes(range(7, 7 + 1 + i % 5))])),
            "label": tf.train.Feature(float_list=tf.train.FloatList(value=[float(i % 2)])),
        }
        examples.append(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    g = tf.Graph()
    with g.as_default():
        serialized = v1.placeholder(tf.string, [6], name="serialized")
        spec = {k: tf.io.FixedLenFeature([], tf.string) for k in ["image", "extra", "id", "tag"]}
        spec["label"] = tf.io.FixedLenFeature([1], tf.float32)
        f = tf.io.parse_example(serialized, spec)
        pixels = tf.reshape(tf.cast(tf.io.decode_raw(f["image"], tf.uint8), tf.float32) / 255.0, [6, 16],
                            name="pixels")
        extra = tf.io.decode_raw(f["extra"], tf.float32, name="extra")
        ids = tf.io.decode_raw(f["id"], tf.int32, little_endian=False, name="ids")
        tags = tf.io.decode_raw(f["tag"], tf.int16, fixed_length=4, name="tags")
        with v1.variable_scope("model", use_resource=True):
            w = v1.get_variable("w", [19, 1])
            b = v1.get_variable("b", [1], initializer=v1.zeros_initializer())
        x = tf.concat([pixels, extra], axis=1)
        logits = tf.matmul(x, w) + b
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=f["label"], logits=logits),
                              name="loss")
        v1.train.GradientDescentOptimizer(0.5).minimize(loss, name="train")
        tf.identity(tf.cast(ids, tf.float32) + tf.reduce_sum(tf.cast(tags, tf.float32), axis=1, keepdims=True),
                    name="id_plus_tags")
    gd = export(g, OUT, name)
    ops = {n.op for n in gd.node}
    for op in ["ParseExampleV2", "DecodeRaw", "DecodePaddedRaw"]:
        assert op in ops, f"{name}: expected a {op} node"
    variables = {"model/w": rng.normal(scale=0.3, size=(19, 1)).astype(np.float32), "model/b": np.zeros(1, np.float32)}
    fetch = ["loss:0", "pixels:0", "extra:0", "ids:0", "tags:0", "id_plus_tags:0"]
    # TfRunner feeds by placeholder name; strings go in as numpy object arrays of bytes.
    feeds = {"serialized": np.array(examples, dtype=object)}
    manifest = write_fixture(OUT, name, gd, variables, {}, fetch, ["train"], 1, extra={
        "string_feeds": {"serialized": {"dtype": "string", "shape": [6],
                                        "data": [{"b64": base64.b64encode(e).decode()} for e in examples]}},
    }, tf_feeds=feeds)
    print(name, manifest["fetch"])


if __name__ == "__main__":
    records_decode_raw_sgd()
