"""Makes the multi-shard checkpoints of testdata/checkpoint/ with TensorFlow (run by hand, never by CI).

    TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/checkpoint/make_fixtures.py

A tf.Module with w = arange(64) as [8, 8] float32, b = linspace(-1, 1, 40) float32 and n = 7 int64,
written by tf.train.Checkpoint with TensorFlow's MaxShardSizePolicy:
  sharded/ck   max_shard_size 256 bytes: two data shards, every tensor whole in one of them;
  sliced/ck    max_shard_size 260 bytes: `b` is split into slices across shards (a partitioned
               tensor: an entry listing its slices, each slice an entry under its slice key),
               which autoclust puts back together.
vars.graph reads the three variables by their checkpoint keys.
partitioned.pb + partitioned/init: a TF1 graph (tf.compat.v1) whose variables `emb` [10, 4] and
`dense/w` [4, 1] are partitioned (fixed_size_partitioner: `emb/part_0..2`, `dense/w/part_0..1`), and
the tf.compat.v1.train.Saver checkpoint of their initial values, which holds each variable whole
(as slices of it); partitioned.expected.npz holds TensorFlow's `loss` (fetched with the 3rd Adagrad
step) and `pred`, and partitioned.feeds.npz the batch.
v1_save.ckpt: the V1 checkpoint file `tf.raw_ops.Save` writes for a [2, 2] float32, a [3] int64,
a [2] float16 and a [2] string tensor (read by passes/graphdef/src/tensor_slices.rs's tests).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))


class M(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(np.arange(64, dtype=np.float32).reshape(8, 8), name="w")
        self.b = tf.Variable(np.linspace(-1, 1, 40).astype(np.float32), name="b")
        self.n = tf.Variable(np.int64(7), name="n")


def write(sub, max_shard_size):
    d = os.path.join(HERE, sub)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=max_shard_size)
    opts = tf.train.CheckpointOptions(experimental_sharding_callback=policy)
    tf.train.Checkpoint(M()).write(os.path.join(d, "ck"), options=opts)
    print(sub, sorted(os.listdir(d)))


def partitioned():
    v1 = tf.compat.v1
    rng = np.random.default_rng(41)
    g = tf.Graph()
    with g.as_default():
        ids = v1.placeholder(tf.int64, [None, 3], name="ids")
        y = v1.placeholder(tf.float32, [None, 1], name="y")
        emb = v1.get_variable("emb", [10, 4], partitioner=v1.fixed_size_partitioner(3),
                              initializer=v1.random_normal_initializer(seed=3))
        e = tf.reduce_mean(v1.nn.embedding_lookup(emb, ids, partition_strategy="div"), axis=1)
        w = v1.get_variable("dense/w", [4, 1], partitioner=v1.fixed_size_partitioner(2),
                            initializer=v1.random_normal_initializer(seed=4))
        pred = tf.identity(tf.matmul(e, tf.convert_to_tensor(w)), name="pred")
        loss = tf.identity(tf.reduce_mean(tf.square(pred - y)), name="loss")
        train = v1.train.AdagradOptimizer(0.3).minimize(loss, name="train")
        saver = v1.train.Saver(v1.global_variables())
        init = v1.global_variables_initializer()
    tf.io.write_graph(g.as_graph_def(), HERE, "partitioned.pb", as_text=False)
    feeds = {"ids": rng.integers(0, 10, (5, 3)).astype(np.int64), "y": rng.standard_normal((5, 1)).astype(np.float32)}
    with v1.Session(graph=g) as sess:
        sess.run(init)
        saver.save(sess, os.path.join(HERE, "partitioned", "init"), write_meta_graph=False)
        fd = {ids: feeds["ids"], y: feeds["y"]}
        for _ in range(3):
            out = sess.run({"loss": loss, "pred": pred, "train": train}, fd)
    os.remove(os.path.join(HERE, "partitioned", "checkpoint"))
    np.savez(os.path.join(HERE, "partitioned.feeds.npz"), **feeds)
    np.savez(os.path.join(HERE, "partitioned.expected.npz"), loss=out["loss"], pred=out["pred"])


def v1_save():
    tf.raw_ops.Save(
        filename=os.path.join(HERE, "v1_save.ckpt"),
        tensor_names=["a", "b/c", "h", "s"],
        data=[
            tf.constant([[1.5, 2.0], [3.0, 4.0]]),
            tf.constant([7, 8, 9], tf.int64),
            tf.constant([1.0, -2.0], tf.float16),
            tf.constant(["x", "yz"]),
        ],
    )


if __name__ == "__main__":
    v1_save()
    write("sharded", 256)
    write("sliced", 260)
    partitioned()
