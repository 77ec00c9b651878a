"""Makes tf1_linalg_special.pbtxt and tf1_linalg_special.expected.json with TensorFlow (by hand, never by CI):

    CUDA_VISIBLE_DEVICES=-1 TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/run/make_tf1_linalg_special.py

A TensorFlow 1 training step over the ops of tf.linalg, tf.math's special functions and the
element-moving ops older models use:
- a Gaussian-process marginal likelihood: K = X·Xᵀ + noise·I, Cholesky, a triangular solve, the
  log-determinant from the factor's diagonal and from slogdet, and tf.linalg.solve/inv/det on
  the side; its gradient runs TensorFlow's Cholesky, slogdet and inverse gradients;
- lgamma and erfinv terms in the loss (their gradients are digamma and exp), digamma, ndtri and
  the inverse hyperbolic functions on the side;
- a depth_to_space/space_to_depth round trip around a convolution, reverse_sequence over a
  padded batch, a cumulative logsumexp and a euclidean norm (all in the gradient too),
  dynamic_partition (its gradient is DynamicStitch);
- seeded tf.random.categorical and stateless_categorical (Multinomial, StatelessMultinomial);
- searchsorted, unravel_index, setdiff1d, linspace, tensor_diag/diag_part, reverse (V1),
  InplaceUpdate (on a copy: TensorFlow updates its input buffer in place) and Empty as side fetches.
The JSON holds TensorFlow's fetches for the feeds below and the variables after one `train` step.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()
raw = tf.raw_ops
g = tf1.Graph()
with g.as_default():
    tf1.set_random_seed(7)
    x = tf1.placeholder(tf.float32, [6, 3], name="x")
    y = tf1.placeholder(tf.float32, [6, 1], name="y")
    img = tf1.placeholder(tf.float32, [2, 4, 4, 4], name="img")
    seq = tf1.placeholder(tf.float32, [3, 5, 2], name="seq")
    lens = tf1.placeholder(tf.int64, [3], name="lens")
    part = tf1.placeholder(tf.int32, [6], name="part")
    w = tf1.get_variable("w", initializer=tf.constant([[0.8, -0.3, 0.5]], tf.float32), use_resource=True)
    log_noise = tf1.get_variable("log_noise", initializer=tf.constant(-0.5), use_resource=True)
    k = tf1.get_variable("k", initializer=tf.constant(np.linspace(-0.4, 0.4, 3 * 3 * 1 * 4, dtype=np.float32).reshape(3, 3, 1, 4)), use_resource=True)
    v = tf1.get_variable("v", initializer=tf.constant(np.linspace(0.5, 1.5, 10, dtype=np.float32).reshape(5, 2)), use_resource=True)

    xs = x * w
    kern = tf.matmul(xs, xs, transpose_b=True) + tf.exp(log_noise) * tf.eye(6)
    chol = tf.linalg.cholesky(kern)
    alpha = tf.linalg.triangular_solve(chol, y, lower=True)
    logdet = 2.0 * tf.reduce_sum(tf.math.log(tf.linalg.diag_part(chol)))
    sign, logdet2 = tf.linalg.slogdet(kern)
    nll = 0.5 * tf.reduce_sum(tf.square(alpha)) + 0.5 * logdet + 0.1 * logdet2
    inv_term = tf.reduce_sum(tf.linalg.inv(kern)) * 0.01
    special = tf.reduce_sum(tf.math.lgamma(tf.nn.softplus(w) + 0.5)) + tf.reduce_sum(tf.math.erfinv(tf.tanh(w) * 0.9))
    s2d = tf.nn.space_to_depth(img, 2)               # [2, 2, 2, 16]
    d2s = tf.nn.depth_to_space(s2d * 1.5, 2)         # [2, 4, 4, 4]
    conv = tf.nn.conv2d(d2s[..., :1], k, 1, "SAME")  # [2, 4, 4, 4]
    back = tf.nn.space_to_depth(tf.nn.relu(conv), 2)
    img_term = tf.reduce_mean(back * back)
    rs = tf.reverse_sequence(seq * v, lens, seq_axis=1, batch_axis=0)
    clse = tf.math.cumulative_logsumexp(rs, axis=1)
    seq_term = tf.reduce_mean(clse) + 0.1 * tf.reduce_sum(tf.math.reduce_euclidean_norm(rs, axis=[1]))
    parts = tf.dynamic_partition(tf.reshape(xs, [6, 3]), part, 3)
    part_term = tf.reduce_sum(parts[0]) - 2.0 * tf.reduce_sum(parts[2] * parts[2])
    loss = tf.identity(nll + inv_term + special + img_term + seq_term + part_term, name="loss")
    train = tf1.train.GradientDescentOptimizer(0.05).minimize(loss, name="train")

    tf.identity(sign, name="out_sign")
    tf.identity(tf.linalg.det(kern[:3, :3]), name="out_det")
    tf.identity(tf.linalg.solve(kern, y), name="out_solve")
    tf.identity(tf.math.digamma(tf.abs(x) + 0.25), name="out_digamma")
    tf.identity(tf.math.ndtri(tf.sigmoid(x)), name="out_ndtri")
    tf.identity(tf.math.asinh(x) + tf.math.atanh(tf.tanh(x) * 0.5) + tf.math.acosh(tf.abs(x) + 1.0), name="out_hyper")
    tf.identity(tf.searchsorted(tf.sort(x, axis=1), x[:, :2]), name="out_searchsorted")
    tf.identity(tf.searchsorted(tf.sort(x, axis=1), x[:, :2], side="right"), name="out_searchsorted_right")
    tf.identity(tf.unravel_index(tf.constant([1, 5, 4, 11]), tf.constant([3, 4])), name="out_unravel")
    d, di = tf1.setdiff1d(tf.constant([1, 2, 3, 4, 5, 6, 2]), part)
    tf.identity(d, name="out_setdiff")
    tf.identity(di, name="out_setdiff_idx")
    tf.identity(raw.LinSpace(start=log_noise, stop=1.0, num=5), name="out_linspace")
    tf.identity(tf.linalg.tensor_diag_part(tf.linalg.tensor_diag(w)), name="out_diag_roundtrip")
    tf.identity(raw.Reverse(tensor=x, dims=[True, False]), name="out_reverse_v1")
    tf.identity(raw.InplaceUpdate(x=x * 1.0, i=[4, 0], v=tf.ones([2, 3])), name="out_inplace")
    tf.identity(raw.Empty(shape=[2, 2], dtype=tf.float32, init=True), name="out_empty")
    tf.identity(parts[1], name="out_part1")
    logits = tf.concat([tf.transpose(xs), [[-np.inf] * 6]], axis=0)   # [4, 6]: class 3 is never drawn
    tf.identity(tf.random.categorical(tf.transpose(logits), 5, seed=3), name="out_categorical")
    tf.identity(tf.random.stateless_categorical(tf.transpose(logits), 4, seed=[5, 6]), name="out_stateless_categorical")
    init = tf1.global_variables_initializer()

    rng = np.random.default_rng(11)
    feed_vals = {
        "x": rng.standard_normal((6, 3)).astype(np.float32),
        "y": rng.standard_normal((6, 1)).astype(np.float32),
        "img": rng.standard_normal((2, 4, 4, 4)).astype(np.float32),
        "seq": rng.standard_normal((3, 5, 2)).astype(np.float32),
        "lens": np.array([2, 5, 0], np.int64),
        "part": np.array([1, 0, 2, 1, 0, 2], np.int32),
    }
    feed = {g.get_tensor_by_name(n + ":0"): v for n, v in feed_vals.items()}
    fetches = ["loss"] + ["out_" + n for n in ["sign", "det", "solve", "digamma", "ndtri", "hyper", "searchsorted", "searchsorted_right",
               "unravel", "setdiff", "setdiff_idx", "linspace", "diag_roundtrip", "reverse_v1", "inplace", "empty", "part1", "categorical", "stateless_categorical"]]
    with tf1.Session(graph=g) as s:
        s.run(init)
        vals = s.run([n + ":0" for n in fetches], feed)
        out = {n: np.asarray(v).ravel().tolist() for n, v in zip(fetches, vals)}
        s.run(train, feed)
        for name, var in [("w", w), ("log_noise", log_noise), ("k", k), ("v", v)]:
            out[name] = np.asarray(s.run(var)).ravel().tolist()
    out["feeds"] = {n: v.tolist() for n, v in feed_vals.items()}
    with open(os.path.join(HERE, "tf1_linalg_special.expected.json"), "w") as f:
        json.dump(out, f)
    tf.io.write_graph(g.as_graph_def(), HERE, "tf1_linalg_special.pbtxt")
    print({k: v for k, v in out.items() if k not in ("feeds", "k", "v")})
