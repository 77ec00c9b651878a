"""Makes tf1_ragged.pbtxt and tf1_ragged.expected.json with TensorFlow (by hand, never by CI):

    CUDA_VISIBLE_DEVICES=-1 TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/run/make_tf1_ragged.py

Ragged tensors as input pipelines build them: `tf.ragged.range` (RaggedRange) of fed per-row
lengths, `tf.gather` of a ragged batch (RaggedGather) by 1-D and 2-D indices, a ragged rank 2
tensor gathered, and the gathered rows made dense (RaggedTensorToTensor) and summed. The JSON
holds TensorFlow's value of every fetch.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()
g = tf1.Graph()
with g.as_default():
    lengths = tf1.placeholder(tf.int64, [4], name="lengths")
    ids = tf1.placeholder(tf.int32, [5], name="ids")
    r = tf.ragged.range(lengths)
    tf.identity(r.values, name="range_values")
    tf.identity(r.row_splits, name="range_splits")
    fr = tf.ragged.range(tf.constant(0.5), tf.constant([2.0, 3.0]), tf.constant(0.4), row_splits_dtype=tf.int32)
    tf.identity(fr.values, name="float_range_values")
    tf.identity(fr.row_splits, name="float_range_splits")
    rt = tf.RaggedTensor.from_row_lengths(tf.range(tf.reduce_sum(lengths)) * 10, lengths)
    gathered = tf.gather(rt, ids)
    tf.identity(gathered.values, name="gather_values")
    tf.identity(gathered.row_splits, name="gather_splits")
    tf.identity(gathered.to_tensor(default_value=-1), name="gather_dense")
    g2 = tf.gather(rt, tf.reshape(ids[:4], [2, 2]))
    tf.identity(g2.values.row_splits, name="gather2d_inner_splits")
    tf.identity(g2.flat_values, name="gather2d_values")
    nested = tf.RaggedTensor.from_nested_row_lengths(tf.range(12, dtype=tf.float32), [[2, 0, 1, 3], [2, 1, 3, 1, 2, 3]])
    gn = tf.gather(nested, [3, 0, 2])
    tf.identity(gn.row_splits, name="nested_outer_splits")
    tf.identity(gn.values.row_splits, name="nested_inner_splits")
    tf.identity(gn.flat_values, name="nested_values")
    tf.identity(tf.reduce_sum(gathered.to_tensor(), axis=1), name="row_sums")
    names = ["range_values", "range_splits", "float_range_values", "float_range_splits", "gather_values",
             "gather_splits", "gather_dense", "gather2d_inner_splits", "gather2d_values", "nested_outer_splits",
             "nested_inner_splits", "nested_values", "row_sums"]
    feeds = {"lengths": [3, 0, 2, 4], "ids": [3, 3, 0, 1, 2]}
    with tf1.Session(graph=g) as s:
        vals = s.run([n + ":0" for n in names], {lengths: feeds["lengths"], ids: feeds["ids"]})
    out = {}
    for n, v in zip(names, vals):
        v = np.asarray(v)
        out[n] = {"dtype": str(tf.as_dtype(v.dtype).name), "shape": list(v.shape), "data": v.ravel().tolist()}
    out["feeds"] = feeds
    with open(os.path.join(HERE, "tf1_ragged.expected.json"), "w") as f:
        json.dump(out, f, indent=0)
    tf.io.write_graph(g.as_graph_def(), HERE, "tf1_ragged.pbtxt")
    print(sorted({n.op for n in g.as_graph_def().node}))
    for n in names:
        print(n, out[n]["shape"], out[n]["data"][:12])
