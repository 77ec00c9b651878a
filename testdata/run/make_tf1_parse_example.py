"""Makes tf1_parse_example.pbtxt and tf1_parse_example.expected.json with TensorFlow (by hand, never by CI):

    CUDA_VISIBLE_DEVICES=-1 TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/run/make_tf1_parse_example.py

The input end of an Estimator-style serving graph: a batch of serialized `tf.train.Example`
protos (a Const, as a serving signature's placeholder would carry them) parsed by
`tf.io.parse_example` (ParseExampleV2) with every kind of feature — fixed-length with and
without a default, a FixedLenSequenceFeature padded to the longest example, VarLenFeatures of
int64 and string (sparse), RaggedFeatures — and one example parsed alone by
`tf.io.parse_single_example` (ParseExampleV2 on a scalar) and by the raw ParseSingleExample
and the v1 ParseExample ops; then a small wide model on the parsed features. Float lists are
written packed and unpacked, int64 lists both ways too, so the proto reader sees both
encodings. The JSON holds TensorFlow's value of every fetch.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()


def example(**features):
    f = {}
    for k, v in features.items():
        if isinstance(v, bytes) or (isinstance(v, list) and v and isinstance(v[0], bytes)):
            f[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=v if isinstance(v, list) else [v]))
        elif isinstance(v, list) and v and isinstance(v[0], float):
            f[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
        elif isinstance(v, list):
            f[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
        else:
            raise ValueError(k)
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def unpacked(serialized):
    """The same Example with its repeated float and int64 fields written one tag per value
    (proto2 style), which TensorFlow's parser accepts too."""
    ex = tf.train.Example.FromString(serialized)
    out = bytearray()

    def varint(n):
        b = bytearray()
        n &= (1 << 64) - 1
        while True:
            x = n & 0x7F
            n >>= 7
            if n:
                b.append(x | 0x80)
            else:
                b.append(x)
                return bytes(b)

    def ld(tag, payload):
        return varint(tag << 3 | 2) + varint(len(payload)) + payload

    entries = b""
    for key in sorted(ex.features.feature):
        feat = ex.features.feature[key]
        kind = feat.WhichOneof("kind")
        if kind == "float_list":
            body = b"".join(varint(1 << 3 | 5) + np.float32(v).tobytes() for v in feat.float_list.value)
            fb = ld(2, body)
        elif kind == "int64_list":
            body = b"".join(varint(1 << 3 | 0) + varint(int(v)) for v in feat.int64_list.value)
            fb = ld(3, body)
        else:
            fb = feat.SerializeToString()
        entries += ld(1, ld(1, key.encode()) + ld(2, fb))
    out = ld(1, entries)
    assert tf.train.Example.FromString(bytes(out)) == ex
    return bytes(out)


batch = [
    example(age=[31], score=[0.5, 1.5, -2.0], tags=[b"red", b"blue"], ids=[4, 9, 2], seq=[1.0, 2.0, 3.0, 4.0],
            rag=[7, 8, 9], words=[b"hello", b"world"]),
    unpacked(example(score=[3.0, 0.25, 1.0], tags=[b"green"], ids=[-1], seq=[5.0, 6.0], rag=[], words=[b"x"])),
    example(age=[-4], score=[-1.0, -1.0, 8.0], ids=[1000000000000], rag=[1], tags=[b""]),
]

g = tf1.Graph()
with g.as_default():
    serialized = tf.constant(batch, name="serialized")
    spec = {
        "age": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
        "score": tf.io.FixedLenFeature([3], tf.float32),
        "tags": tf.io.VarLenFeature(tf.string),
        "ids": tf.io.VarLenFeature(tf.int64),
        "seq": tf.io.FixedLenSequenceFeature([2], tf.float32, allow_missing=True, default_value=-9.0),
        "rag": tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int32),
        "words": tf.io.RaggedFeature(tf.string),
        "missing": tf.io.FixedLenFeature([2], tf.string, default_value=["a", "b"]),
    }
    p = tf.io.parse_example(serialized, spec)
    for k in ["age", "score", "seq", "missing"]:
        tf.identity(p[k], name=k)
    for k in ["tags", "ids"]:
        tf.identity(p[k].indices, name=k + "_indices")
        tf.identity(p[k].values, name=k + "_values")
        tf.identity(p[k].dense_shape, name=k + "_shape")
    for k in ["rag", "words"]:
        tf.identity(p[k].values, name=k + "_values")
        tf.identity(p[k].row_splits, name=k + "_splits")
    # One example alone: parse_single_example (ParseExampleV2 on a scalar), the raw
    # ParseSingleExample, and the v1 ParseExample.
    one = tf.io.parse_single_example(serialized[0], {k: spec[k] for k in ["age", "score", "tags", "seq"]})
    tf.identity(one["age"], name="one_age")
    tf.identity(one["seq"], name="one_seq")
    tf.identity(one["tags"].indices, name="one_tags_indices")
    tf.identity(one["tags"].values, name="one_tags_values")
    tf.identity(one["tags"].dense_shape, name="one_tags_shape")
    raw = tf.raw_ops.ParseSingleExample(
        serialized=serialized[1], dense_defaults=[tf.constant(7, tf.int64), tf.zeros([3])], num_sparse=1,
        sparse_keys=["ids"], dense_keys=["age", "score"], sparse_types=[tf.int64], dense_shapes=[[], [3]])
    tf.identity(raw.sparse_indices[0], name="raw_ids_indices")
    tf.identity(raw.sparse_values[0], name="raw_ids_values")
    tf.identity(raw.sparse_shapes[0], name="raw_ids_shape")
    tf.identity(raw.dense_values[0], name="raw_age")
    tf.identity(raw.dense_values[1], name="raw_score")
    v1 = tf.raw_ops.ParseExample(
        serialized=serialized, names=tf.constant([], tf.string), sparse_keys=[tf.constant("tags")],
        dense_keys=[tf.constant("score")], dense_defaults=[tf.zeros([3])], sparse_types=[tf.string],
        dense_shapes=[[3]])
    tf.identity(v1.sparse_indices[0], name="v1_tags_indices")
    tf.identity(v1.sparse_values[0], name="v1_tags_values")
    tf.identity(v1.dense_values[0], name="v1_score")
    # A wide model on the parsed features: hashed tags and ids through embeddings.
    table = tf.constant(np.linspace(-1, 1, 16 * 4, dtype=np.float32).reshape(16, 4))
    tag_ids = tf.sparse.SparseTensor(p["tags"].indices, tf.strings.to_hash_bucket_fast(p["tags"].values, 16),
                                     p["tags"].dense_shape)
    ids = tf.sparse.SparseTensor(p["ids"].indices, tf.math.floormod(p["ids"].values, 16), p["ids"].dense_shape)
    emb = tf.nn.embedding_lookup_sparse(table, tag_ids, None, combiner="mean") \
        + tf.nn.embedding_lookup_sparse(table, ids, None, combiner="sum")
    dense = tf.concat([p["score"], tf.cast(p["age"][:, None], tf.float32), tf.reduce_sum(p["seq"], [1])], 1)
    logits = tf.reduce_sum(emb, 1) + tf.reduce_sum(dense * tf.constant([0.1, 0.2, 0.3, 0.01, 0.5, -0.5]), 1)
    tf.identity(logits, name="logits")
    names = ["age", "score", "seq", "missing", "tags_indices", "tags_values", "tags_shape", "ids_indices",
             "ids_values", "ids_shape", "rag_values", "rag_splits", "words_values", "words_splits", "one_age",
             "one_seq", "one_tags_indices", "one_tags_values", "one_tags_shape", "raw_ids_indices",
             "raw_ids_values", "raw_ids_shape", "raw_age", "raw_score", "v1_tags_indices", "v1_tags_values",
             "v1_score", "logits"]
    with tf1.Session(graph=g) as s:
        vals = s.run([n + ":0" for n in names])
    out = {}
    for n, v in zip(names, vals):
        v = np.asarray(v)
        data = [x.decode() for x in v.ravel()] if v.dtype == object else v.ravel().tolist()
        out[n] = {"dtype": str(tf.as_dtype(v.dtype).name) if v.dtype != object else "string",
                  "shape": list(v.shape), "data": data}
    with open(os.path.join(HERE, "tf1_parse_example.expected.json"), "w") as f:
        json.dump(out, f, indent=0)
    tf.io.write_graph(g.as_graph_def(), HERE, "tf1_parse_example.pbtxt")
    ops = sorted({n.op for n in g.as_graph_def().node})
    print(ops)
    for n in names:
        print(n, out[n]["shape"], out[n]["data"][:12])
