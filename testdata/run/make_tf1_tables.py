"""Makes tf1_tables.pbtxt and tf1_tables.expected.json with TensorFlow (by hand, never by CI):

    CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python testdata/run/make_tf1_tables.py

A TensorFlow 1 training step whose variables need `init` (global_variables_initializer) and
whose two StaticHashTables need `init_all_tables` (tables_initializer) before the first step,
as a TF1 program runs them: a string table feeding an embedding lookup, an int64 -> float
table, a matmul and one SGD step. The JSON holds TensorFlow's `y` for the feeds below and the
variables after one `train` step.
"""
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"]="3"
import json
import numpy as np, tensorflow as tf
HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()
g = tf1.Graph()
with g.as_default():
    color = tf1.placeholder(tf.string, [None], name="color")
    size = tf1.placeholder(tf.int64, [None], name="size")
    x = tf1.placeholder(tf.float32, [None, 2], name="x")
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(["red","green","blue"], [0,1,2], tf.string, tf.int64), default_value=-1)
    ids = table.lookup(color)
    itab = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(tf.constant([1,5,9],tf.int64), tf.constant([0.5,1.5,2.5]), ), default_value=0.0)
    sz = itab.lookup(size)
    emb = tf1.get_variable("emb", [4, 2], initializer=tf1.constant_initializer(np.arange(8).reshape(4,2)/10), use_resource=True)
    e = tf.nn.embedding_lookup(emb, tf.maximum(ids, 0) )
    w = tf1.get_variable("w", [2, 1], initializer=tf1.constant_initializer([[0.3],[-0.2]]), use_resource=True)
    y = tf.matmul(e + x, w) + tf.expand_dims(sz, 1)
    y = tf.identity(y, name="y")
    loss = tf.reduce_mean(tf.square(y), name="loss")
    train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
    init = tf1.global_variables_initializer()
    tinit = tf1.tables_initializer()
    assert (init.name, tinit.name) == ("init", "init_all_tables")
    with tf1.Session(graph=g) as sess:
        sess.run([init, tinit])
        feed = {color: np.array([b"red", b"blue", b"pink"]), size: np.array([5, 9, 2]), x: np.array([[1,2],[3,4],[5,6]], np.float32)}
        yv = sess.run(y, feed)
        expected = {"y": yv.ravel().tolist()}
        sess.run(train, feed)
        expected["w"] = sess.run(w).ravel().tolist()
        expected["emb"] = sess.run(emb).ravel().tolist()
    tf.io.write_graph(g.as_graph_def(), HERE, "tf1_tables.pbtxt")
    with open(os.path.join(HERE, "tf1_tables.expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
