"""A probe, not a fixture yet (by hand, never by CI): a TensorFlow 1 estimator-style step built
with tf.compat.v1.feature_column — an embedding column over a vocabulary list with an
out-of-vocabulary bucket, an indicator column over a hash bucket, numeric and bucketized
columns, input_layer, a two-layer MLP and Adagrad. It writes /tmp/fc/g.pbtxt and
/tmp/fc/expected.json (TensorFlow's `y` and the loss after one `train` step).

    mkdir -p /tmp/fc && CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python testdata/run/probe_feature_columns.py
    autoclust run /tmp/fc/g.pbtxt --init init,init_all_tables --fetch y \
      --feed 'color=[["red"],["pink"],["blue"]]' --feed 'age=[[20],[45],[70]]' \
      --feed 'city=[["paris"],["rome"],["oslo"]]' --feed 'label=[[1],[0],[2]]'

As of session 33 both modes fail with "no kernel for op 'SparseToDense'": the feature columns'
sparse ops (SparseToDense, SparseFillEmptyRows, SparseReshape, SparseSegmentMean and its
gradient) have no registry entry and no kernel. Once they run, make this a fixture.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"]="3"
import numpy as np, tensorflow as tf
tf1 = tf.compat.v1
tf1.disable_eager_execution()
g = tf1.Graph()
with g.as_default():
    tf1.set_random_seed(3)
    feats = {
        "color": tf1.placeholder(tf.string, [None, 1], name="color"),
        "age": tf1.placeholder(tf.float32, [None, 1], name="age"),
        "city": tf1.placeholder(tf.string, [None, 1], name="city"),
    }
    label = tf1.placeholder(tf.float32, [None, 1], name="label")
    fc = tf1.feature_column
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"], num_oov_buckets=1)
    city = fc.categorical_column_with_hash_bucket("city", 7)
    cols = [fc.embedding_column(color, 3), fc.indicator_column(city), fc.numeric_column("age"),
            fc.bucketized_column(fc.numeric_column("age"), [18., 30., 50.])]
    net = fc.input_layer(feats, cols)
    w1 = tf1.get_variable("w1", [net.shape[1], 4], use_resource=True); b1 = tf1.get_variable("b1", [4], initializer=tf1.zeros_initializer(), use_resource=True)
    w2 = tf1.get_variable("w2", [4, 1], use_resource=True)
    h = tf.nn.relu(tf.matmul(net, w1) + b1)
    y = tf.identity(tf.matmul(h, w2), name="y")
    loss = tf.identity(tf1.losses.mean_squared_error(label, y), name="loss")
    train = tf1.train.AdagradOptimizer(0.1).minimize(loss, name="train")
    init = tf1.global_variables_initializer(); tinit = tf1.tables_initializer()
    print(init.name, tinit.name)
    feed = {feats["color"]: np.array([[b"red"], [b"pink"], [b"blue"]]), feats["age"]: np.array([[20.], [45.], [70.]], np.float32),
            feats["city"]: np.array([[b"paris"], [b"rome"], [b"oslo"]]), label: np.array([[1.], [0.], [2.]], np.float32)}
    with tf1.Session(graph=g) as s:
        s.run([init, tinit])
        vars0 = {v.op.name: s.run(v).tolist() for v in tf1.global_variables()}
        out = {"y": s.run(y, feed).ravel().tolist()}
        s.run(train, feed)
        out["loss_after"] = s.run(loss, feed).tolist()
    json.dump(out, open("/tmp/fc/expected.json", "w"))
    tf.io.write_graph(g.as_graph_def(), "/tmp/fc", "g.pbtxt")
    print(out)
