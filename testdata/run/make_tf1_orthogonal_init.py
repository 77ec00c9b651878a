"""Makes tf1_orthogonal_init.pbtxt and tf1_orthogonal_init.expected.json with TensorFlow (by hand, never by CI):

    CUDA_VISIBLE_DEVICES=-1 TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/run/make_tf1_orthogonal_init.py

The init graph of an orthogonal initializer (the Keras default for LSTM and GRU recurrent
kernels): a seeded RandomStandardNormal, its QR decomposition (Qr), the signs of R's diagonal
folded into Q — for a tall and, with a gain, a wide variable. The JSON holds the variables
TensorFlow's `init` wrote.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()
g = tf1.Graph()
with g.as_default():
    k = tf1.get_variable("k", shape=[6, 4], initializer=tf1.orthogonal_initializer(seed=3), use_resource=True)
    r = tf1.get_variable("r", shape=[3, 5], initializer=tf1.orthogonal_initializer(seed=4, gain=2.0),
                         use_resource=True)
    init = tf1.global_variables_initializer()
    with tf1.Session(graph=g) as s:
        s.run(init)
        out = {"k": s.run(k).ravel().tolist(), "r": s.run(r).ravel().tolist()}
    with open(os.path.join(HERE, "tf1_orthogonal_init.expected.json"), "w") as f:
        json.dump(out, f)
    tf.io.write_graph(g.as_graph_def(), HERE, "tf1_orthogonal_init.pbtxt")
    print(sorted({n.op for n in g.as_graph_def().node}))
