"""Makes tf1_pool_hash.pbtxt and tf1_pool_hash.expected.json with TensorFlow (by hand, never by CI):

    CUDA_VISIBLE_DEVICES=-1 TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/run/make_tf1_pool_hash.py

A TensorFlow 1 step with ops of older and less common models: reflection padding before a VALID
convolution (MirrorPad, and MirrorPadGrad in the gradient), `tf.nn.max_pool_with_argmax` (and
MaxPoolGradWithArgmax in the gradient), the kernel updated by the raw AMSGrad op
(ResourceApplyAdamWithAmsgrad, its three slots as variables), a running per-cell maximum kept
by ResourceScatterNdMax; on the side, unique rows and columns (UniqueV2, UniqueWithCountsV2)
and the keyed and V1 string hash buckets (StringToHashBucketStrong, StringToHashBucket). The
JSON holds TensorFlow's fetches for the feeds below and the variables after one `train` step.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()
g = tf1.Graph()
with g.as_default():
    x = tf1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
    init_k = np.linspace(-0.5, 0.5, 3 * 3 * 3 * 4, dtype=np.float32).reshape(3, 3, 3, 4)
    k = tf1.get_variable("k", initializer=tf.constant(init_k), use_resource=True)
    slots = [tf1.get_variable(n, initializer=tf.constant(np.full(init_k.shape, v, np.float32)), use_resource=True)
             for n, v in (("k_m", 0.0), ("k_v", 0.0), ("k_vhat", 0.001))]
    best = tf1.get_variable("best", initializer=tf.zeros([2, 3, 3, 4]), use_resource=True)
    h = tf.nn.conv2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT"), k, 1, "VALID")
    pooled, arg = tf.nn.max_pool_with_argmax(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    tf.identity(pooled, name="pooled")
    tf.identity(arg, name="arg")
    loss = tf.identity(tf.reduce_sum(tf.square(pooled - 0.25)), name="loss")
    (gk,) = tf.gradients(loss, [k])
    step = tf.raw_ops.ResourceApplyAdamWithAmsgrad(
        var=k.handle, m=slots[0].handle, v=slots[1].handle, vhat=slots[2].handle,
        beta1_power=tf.constant(0.9), beta2_power=tf.constant(0.999), lr=tf.constant(0.01),
        beta1=tf.constant(0.9), beta2=tf.constant(0.999), epsilon=tf.constant(1e-7), grad=gk)
    cells = tf.constant([[0, 0, 0, 0], [0, 1, 1, 2], [1, 2, 2, 3], [0, 0, 0, 0]])
    upd = tf.gather_nd(pooled, cells)
    keep = tf.raw_ops.ResourceScatterNdMax(ref=best.handle, indices=cells, updates=upd)
    tf.group(step, keep, name="train")
    ids = tf1.placeholder(tf.int32, [4, 3], name="ids")
    rows = tf.raw_ops.UniqueV2(x=ids, axis=tf.constant([0], tf.int64))
    tf.identity(rows.y, name="rows")
    tf.identity(rows.idx, name="rows_idx")
    cols = tf.raw_ops.UniqueWithCountsV2(x=ids, axis=tf.constant([-1], tf.int64), out_idx=tf.int64)
    tf.identity(cols.y, name="cols")
    tf.identity(cols.count, name="cols_count")
    words = tf1.placeholder(tf.string, [5], name="words")
    tf.identity(tf.raw_ops.StringToHashBucketStrong(input=words, num_buckets=1000, key=[7, 9]), name="strong")
    tf.identity(tf.raw_ops.StringToHashBucket(string_tensor=words, num_buckets=97), name="v1_hash")
    init = tf1.global_variables_initializer()
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((2, 6, 6, 3)).astype(np.float32)
    iv = np.array([[1, 0, 1], [2, 0, 2], [1, 0, 1], [3, 3, 3]], np.int32)
    wv = ["", "cat", "a much longer sentence", "cat", "dog"]
    feed = {x: xv, ids: iv, words: wv}
    with tf1.Session(graph=g) as s:
        s.run(init)
        names = ["loss", "pooled", "arg", "rows", "rows_idx", "cols", "cols_count", "strong", "v1_hash"]
        vals = s.run([n + ":0" for n in names], feed)
        out = {n: np.asarray(v).ravel().tolist() for n, v in zip(names, vals)}
        s.run("train", feed)
        for var in [k, *slots, best]:
            out[var.op.name] = s.run(var).ravel().tolist()
    out["feeds"] = {"x": xv.tolist(), "ids": iv.tolist(), "words": wv}
    with open(os.path.join(HERE, "tf1_pool_hash.expected.json"), "w") as f:
        json.dump(out, f)
    tf.io.write_graph(g.as_graph_def(), HERE, "tf1_pool_hash.pbtxt")
    print({k: v for k, v in out.items() if k not in ("feeds", "k", "k_m", "k_v", "k_vhat", "best", "pooled", "arg")})
