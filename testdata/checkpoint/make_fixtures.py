"""Makes the multi-shard checkpoints of testdata/checkpoint/ with TensorFlow (run by hand, never by CI).

    TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/checkpoint/make_fixtures.py

A tf.Module with w = arange(64) as [8, 8] float32, b = linspace(-1, 1, 40) float32 and n = 7 int64,
written by tf.train.Checkpoint with TensorFlow's MaxShardSizePolicy:
  sharded/ck   max_shard_size 256 bytes: two data shards, every tensor whole in one of them;
  sliced/ck    max_shard_size 260 bytes: `b` is split into slices across shards (a partitioned
               tensor: an entry listing its slices, each slice an entry under its slice key),
               which autoclust puts back together.
vars.graph reads the three variables by their checkpoint keys.
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


if __name__ == "__main__":
    write("sharded", 256)
    write("sliced", 260)
