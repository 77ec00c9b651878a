"""Makes tf1_feature_columns{,_wide}.pbtxt and their .expected.json with TensorFlow (by hand,
never by CI):

    CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python testdata/run/make_tf1_feature_columns.py

A TensorFlow 1 estimator-style training step built with tf.compat.v1.feature_column, as such
programs run it (`init` and `init_all_tables` once, then `train`):
- an embedding column (mean) over a vocabulary list with an out-of-vocabulary bucket;
- a two-valued tag column whose missing values ("") leave a row empty (SparseFillEmptyRows
  fills it), embedded with the sqrtn combiner and also as an indicator column;
- an indicator column and a sum-combined embedding column over a hash bucket;
- numeric and bucketized columns;
- input_layer, a two-layer MLP and Adagrad (sparse updates of the embedding tables).
Its sparse ops are SparseToDense, SparseFillEmptyRows, SparseReshape, SparseSegmentMean/
SqrtN/Sum and their gradients.

The `_wide` graph is a wide-and-deep step: linear_model over a vocabulary column, a hash
bucket, an identity column weighted by a float feature, a crossed column (SparseCross, hashed)
and a bucketized column, plus embeddings of the cross and the weighted column and an indicator
of the identity column, a sigmoid cross-entropy loss and FTRL.

Each JSON holds TensorFlow's `y` and `loss` for the feeds below, and every variable after one
`train` step.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()


def save(g, name, y, loss, train, feed):
    init = g.get_operation_by_name("init")
    tinit = g.get_operation_by_name("init_all_tables")
    with tf1.Session(graph=g) as s:
        s.run([init, tinit])
        out = {"y": s.run(y, feed).ravel().tolist(), "loss": float(s.run(loss, feed))}
        s.run(train, feed)
        out["variables"] = {v.op.name: s.run(v).ravel().tolist() for v in tf1.global_variables()}
    with open(os.path.join(HERE, name + ".expected.json"), "w") as f:
        json.dump(out, f, indent=1)
    tf.io.write_graph(g.as_graph_def(), HERE, name + ".pbtxt")
    print(name, out["y"], out["loss"], sorted(out["variables"]))


def deep():
    g = tf1.Graph()
    with g.as_default():
        tf1.set_random_seed(3)
        feats = {
            "color": tf1.placeholder(tf.string, [None, 1], name="color"),
            "tags": tf1.placeholder(tf.string, [None, 2], name="tags"),
            "age": tf1.placeholder(tf.float32, [None, 1], name="age"),
            "city": tf1.placeholder(tf.string, [None, 1], name="city"),
        }
        label = tf1.placeholder(tf.float32, [None, 1], name="label")
        fc = tf1.feature_column
        color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"], num_oov_buckets=1)
        tags = fc.categorical_column_with_vocabulary_list("tags", ["a", "b", "c", "d"])
        city = fc.categorical_column_with_hash_bucket("city", 7)
        age = fc.numeric_column("age")
        cols = [
            fc.embedding_column(color, 3),
            fc.embedding_column(tags, 2, combiner="sqrtn"),
            fc.indicator_column(tags),
            fc.indicator_column(city),
            fc.embedding_column(city, 2, combiner="sum"),
            age,
            fc.bucketized_column(age, [18.0, 30.0, 50.0]),
        ]
        net = fc.input_layer(feats, cols)
        w1 = tf1.get_variable("w1", [net.shape[1], 4], use_resource=True)
        b1 = tf1.get_variable("b1", [4], initializer=tf1.zeros_initializer(), use_resource=True)
        w2 = tf1.get_variable("w2", [4, 1], use_resource=True)
        h = tf.nn.relu(tf.matmul(net, w1) + b1)
        y = tf.identity(tf.matmul(h, w2), name="y")
        loss = tf.identity(tf1.losses.mean_squared_error(label, y), name="loss")
        train = tf1.train.AdagradOptimizer(0.1).minimize(loss, name="train")
        tf1.global_variables_initializer()
        tf1.tables_initializer()
        feed = {
            feats["color"]: np.array([[b"red"], [b"pink"], [b"blue"]]),
            feats["tags"]: np.array([[b"a", b"c"], [b"", b""], [b"d", b"zz"]]),
            feats["age"]: np.array([[20.0], [45.0], [70.0]], np.float32),
            feats["city"]: np.array([[b"paris"], [b"rome"], [b"oslo"]]),
            label: np.array([[1.0], [0.0], [2.0]], np.float32),
        }
        save(g, "tf1_feature_columns", y, loss, train, feed)


def wide():
    g = tf1.Graph()
    with g.as_default():
        tf1.set_random_seed(5)
        feats = {
            "color": tf1.placeholder(tf.string, [None, 1], name="color"),
            "city": tf1.placeholder(tf.string, [None, 1], name="city"),
            "uid": tf1.placeholder(tf.int64, [None, 1], name="uid"),
            "w": tf1.placeholder(tf.float32, [None, 1], name="w"),
            "age": tf1.placeholder(tf.float32, [None, 1], name="age"),
        }
        label = tf1.placeholder(tf.float32, [None, 1], name="label")
        fc = tf1.feature_column
        color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"], num_oov_buckets=1)
        city = fc.categorical_column_with_hash_bucket("city", 7)
        uid = fc.categorical_column_with_identity("uid", 10, default_value=0)
        wuid = fc.weighted_categorical_column(uid, "w")
        cross = fc.crossed_column([color, "city"], 11)
        age = fc.bucketized_column(fc.numeric_column("age"), [18.0, 30.0, 50.0])
        lin = fc.linear_model(feats, [color, city, wuid, cross, age])
        deep = fc.input_layer(feats, [fc.embedding_column(cross, 2), fc.embedding_column(wuid, 3), fc.indicator_column(uid)])
        wd = tf1.get_variable("wd", [deep.shape[1], 1], use_resource=True)
        y = tf.identity(lin + tf.matmul(deep, wd), name="y")
        loss = tf.identity(tf1.losses.sigmoid_cross_entropy(label, y), name="loss")
        train = tf1.train.FtrlOptimizer(0.1).minimize(loss, name="train")
        tf1.global_variables_initializer()
        tf1.tables_initializer()
        feed = {
            feats["color"]: np.array([[b"red"], [b"pink"], [b"blue"]]),
            feats["city"]: np.array([[b"paris"], [b"rome"], [b"oslo"]]),
            feats["uid"]: np.array([[3], [12], [7]]),
            feats["w"]: np.array([[0.5], [2.0], [1.0]], np.float32),
            feats["age"]: np.array([[20.0], [45.0], [70.0]], np.float32),
            label: np.array([[1.0], [0.0], [1.0]], np.float32),
        }
        save(g, "tf1_feature_columns_wide", y, loss, train, feed)


deep()
wide()
