"""Writes the fifth sweep of TensorFlow graphs (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_sweep5.py [--out DIR] [NAME...]

Kinds of TF2 programs the earlier sweeps do not export, through make_fixtures_tf2.write: graph-network
message passing (unsorted segment max/mean/sqrt-n and their gradients), word2vec with a sampled softmax (a
seeded candidate sampler), a nuclear-norm regularized matrix completion (SVD and its gradient), a ridge
layer solved in closed form (lstsq), spline smoothing by a tridiagonal solve, an orthogonal layer
parametrized by the matrix exponential of a skew-symmetric matrix, and anti-aliased/bicubic resizes.
Cases: README.md.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_sweep4 import f32, fn_fixture, i32, i64, run_main, spec, start  # noqa: E402,F401


# 1 ------------------------------------------------------------------------------------------------
def sweep5_gnn_segment_messages_adam():
    """Graph-network message passing over an edge list: gather source features, messages by a Dense,
    aggregation by unsorted_segment_max, _mean and _sqrt_n over destinations (some nodes receive none),
    segment_sum over sorted graph ids for a readout; Adam. Gradients: UnsortedSegmentMax's (Equal/Select
    against the gathered maxima), UnsortedSegmentSum."""
    keras, L, rng = start(501)
    w_msg = tf.Variable((0.4 * rng.standard_normal((4, 5))).astype(np.float32), name="w_msg")
    w_out = tf.Variable((0.4 * rng.standard_normal((15, 1))).astype(np.float32), name="w_out")
    params = [w_msg, w_out]
    opt = keras.optimizers.Adam(0.01)
    opt.build(params)

    @tf.function(input_signature=[spec([None, 4], f32, "nodes"), spec([None], i32, "src"), spec([None], i32, "dst"),
                                  spec([None], i32, "graph_ids"), spec([None], f32, "targets")])
    def train(h, src, dst, gid, y):
        n = tf.shape(h)[0]
        with tf.GradientTape() as tape:
            msg = tf.nn.relu(tf.matmul(tf.gather(h, src), w_msg))
            agg_max = tf.math.unsorted_segment_max(msg, dst, n)
            agg_max = tf.where(agg_max < -1e30, tf.zeros_like(agg_max), agg_max)
            agg_mean = tf.math.unsorted_segment_mean(msg, dst, n)
            agg_sqrt = tf.math.unsorted_segment_sqrt_n(msg, dst, n)
            z = tf.concat([agg_max, agg_mean, agg_sqrt], -1)
            pooled = tf.math.segment_sum(z, gid)
            pred = tf.squeeze(tf.matmul(pooled, w_out), -1)
            loss = tf.reduce_mean(tf.square(pred - y))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        return loss, pred, tf.math.unsorted_segment_min(msg, dst, n), tf.math.unsorted_segment_prod(msg + 1.0, dst, n)

    feeds = {"nodes": rng.standard_normal((7, 4)).astype(np.float32),
             "src": np.array([0, 1, 2, 2, 3, 4, 5, 6, 6, 1], np.int32),
             "dst": np.array([1, 2, 0, 3, 3, 5, 4, 5, 4, 0], np.int32),
             "graph_ids": np.array([0, 0, 0, 0, 1, 1, 1], np.int32), "targets": np.array([1.0, -0.5], np.float32)}
    fn_fixture("sweep5_gnn_segment_messages_adam", train, params + opt.variables, feeds, 2)


# 2 ------------------------------------------------------------------------------------------------
def sweep5_word2vec_sampled_softmax_sgd():
    """Skip-gram with a sampled softmax: tf.nn.sampled_softmax_loss draws negatives with a seeded
    LogUniformCandidateSampler (a stateful op: its draws depend on the step), removes accidental hits
    (ComputeAccidentalHits), and trains the input and output embeddings sparsely; SGD."""
    keras, L, rng = start(502)
    emb = tf.Variable((0.1 * rng.standard_normal((30, 8))).astype(np.float32), name="emb")
    out_w = tf.Variable((0.1 * rng.standard_normal((30, 8))).astype(np.float32), name="out_w")
    out_b = tf.Variable(np.zeros(30, np.float32), name="out_b")
    params = [emb, out_w, out_b]
    opt = keras.optimizers.SGD(0.5)
    opt.build(params)

    @tf.function(input_signature=[spec([None], i64, "center"), spec([None, 1], i64, "context")])
    def train(center, context):
        with tf.GradientTape() as tape:
            x = tf.nn.embedding_lookup(emb, center)
            loss = tf.reduce_mean(tf.nn.sampled_softmax_loss(out_w, out_b, context, x, num_sampled=5,
                                                             num_classes=30, seed=7))
        grads = tape.gradient(loss, params)
        grads = [tf.convert_to_tensor(g) for g in grads]
        opt.apply_gradients(zip(grads, params))
        return loss

    feeds = {"center": rng.integers(0, 30, 6).astype(np.int64), "context": rng.integers(0, 30, (6, 1)).astype(np.int64)}
    fn_fixture("sweep5_word2vec_sampled_softmax_sgd", train, params + opt.variables, feeds, 2)


# 3 ------------------------------------------------------------------------------------------------
def sweep5_nuclear_norm_completion_sgd():
    """Low-rank matrix completion: squared error on observed entries plus the nuclear norm (sum of
    singular values, tf.linalg.svd and its gradient, which needs U and V); only singular values and the
    updated variable are compared (the signs of singular vectors are not unique)."""
    keras, L, rng = start(503)
    X = tf.Variable((0.5 * rng.standard_normal((5, 4))).astype(np.float32), name="X")
    params = [X]
    opt = keras.optimizers.SGD(0.1)
    opt.build(params)

    @tf.function(input_signature=[spec([5, 4], f32, "observed"), spec([5, 4], f32, "mask")])
    def train(obs, mask):
        with tf.GradientTape() as tape:
            s = tf.linalg.svd(X, compute_uv=False)
            loss = tf.reduce_sum(mask * tf.square(X - obs)) + 0.1 * tf.reduce_sum(s)
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        return loss, s

    feeds = {"observed": rng.standard_normal((5, 4)).astype(np.float32),
             "mask": (rng.uniform(0, 1, (5, 4)) < 0.6).astype(np.float32)}
    fn_fixture("sweep5_nuclear_norm_completion_sgd", train, params + opt.variables, feeds, 2)


# 4 ------------------------------------------------------------------------------------------------
def sweep5_lstsq_ridge_head_sgd():
    """A closed-form ridge head on learned features: tf.linalg.lstsq with an l2 regularizer (MatrixSolveLs,
    overdetermined and underdetermined) inside the tape, its gradient flowing into the feature layer; SGD."""
    keras, L, rng = start(504)
    w = tf.Variable((0.5 * rng.standard_normal((3, 4))).astype(np.float32), name="w")
    params = [w]
    opt = keras.optimizers.SGD(0.05)
    opt.build(params)

    @tf.function(input_signature=[spec([8, 3], f32, "x"), spec([8, 2], f32, "y")])
    def train(x, y):
        with tf.GradientTape() as tape:
            f = tf.tanh(tf.matmul(x, w))
            beta = tf.linalg.lstsq(f, y, l2_regularizer=0.1)
            loss = tf.reduce_mean(tf.square(tf.matmul(f, beta) - y))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        wide = tf.linalg.lstsq(tf.transpose(f[:3]), tf.ones([4, 1]), l2_regularizer=0.01)
        return loss, beta, wide

    feeds = {"x": rng.standard_normal((8, 3)).astype(np.float32), "y": rng.standard_normal((8, 2)).astype(np.float32)}
    fn_fixture("sweep5_lstsq_ridge_head_sgd", train, params + opt.variables, feeds, 2)


# 5 ------------------------------------------------------------------------------------------------
def sweep5_tridiagonal_smoothing_adam():
    """Smoothing a noisy signal by a learned penalty: (I + λ D^T D) x = y solved as a tridiagonal system
    (tf.linalg.tridiagonal_solve, compact and sequence formats, with partial pivoting), λ = exp(log_lam)
    trained by Adam against a clean target (TridiagonalSolve's gradient: another tridiagonal solve)."""
    keras, L, rng = start(505)
    log_lam = tf.Variable(np.float32(0.0), name="log_lam")
    params = [log_lam]
    opt = keras.optimizers.Adam(0.05)
    opt.build(params)

    @tf.function(input_signature=[spec([None, 9], f32, "noisy"), spec([None, 9], f32, "clean")])
    def train(y, clean):
        n = 9
        with tf.GradientTape() as tape:
            lam = tf.exp(log_lam)
            main = 1.0 + lam * tf.concat([[1.0], 2.0 * tf.ones([n - 2]), [1.0]], 0)
            off = -lam * tf.ones([n - 1])
            superdiag = tf.concat([off, [0.0]], 0)
            subdiag = tf.concat([[0.0], off], 0)
            diags = tf.stack([superdiag, main, subdiag])
            x = tf.linalg.tridiagonal_solve(diags, tf.transpose(y))
            loss = tf.reduce_mean(tf.square(tf.transpose(x) - clean))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        seq = tf.linalg.tridiagonal_solve((superdiag, main, subdiag), tf.transpose(y), diagonals_format="sequence",
                                          partial_pivoting=False)
        return loss, x, seq

    t = np.linspace(0, 3, 9)
    clean = np.stack([np.sin(t), np.cos(t)]).astype(np.float32)
    feeds = {"clean": clean, "noisy": (clean + 0.2 * rng.standard_normal(clean.shape)).astype(np.float32)}
    fn_fixture("sweep5_tridiagonal_smoothing_adam", train, params + opt.variables, feeds, 2)


# 6 ------------------------------------------------------------------------------------------------
def sweep5_expm_orthogonal_layer_sgd():
    """An orthogonal layer W = expm(A - A^T) (tf.linalg.expm: Padé approximation with scaling and
    squaring, written in Python with matrix_solve and a while loop), trained by SGD through the
    exponential; also tf.linalg.logdet of an SPD matrix."""
    keras, L, rng = start(506)
    A = tf.Variable((0.2 * rng.standard_normal((4, 4))).astype(np.float32), name="A")
    params = [A]
    opt = keras.optimizers.SGD(0.1)
    opt.build(params)

    @tf.function(input_signature=[spec([None, 4], f32, "x"), spec([None, 4], f32, "y")])
    def train(x, y):
        with tf.GradientTape() as tape:
            W = tf.linalg.expm(A - tf.transpose(A))
            loss = tf.reduce_mean(tf.square(tf.matmul(x, W) - y))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        spd = tf.matmul(x, x, transpose_a=True) + tf.eye(4)
        return loss, W, tf.linalg.logdet(spd)

    feeds = {"x": rng.standard_normal((6, 4)).astype(np.float32), "y": rng.standard_normal((6, 4)).astype(np.float32)}
    fn_fixture("sweep5_expm_orthogonal_layer_sgd", train, params + opt.variables, feeds, 2)


# 7 ------------------------------------------------------------------------------------------------
def sweep5_resize_antialias_bicubic_adam():
    """Super-resolution-style step: downsampling with antialias=True (ScaleAndTranslate and its
    gradient), bicubic upsampling (ResizeBicubic, ResizeBicubicGrad), area and lanczos3 resizes fetched;
    a small conv net; Adam."""
    keras, L, rng = start(507)
    m = keras.Sequential([keras.Input((8, 8, 2)), L.Conv2D(2, 3, padding="same")])
    opt = keras.optimizers.Adam(1e-2)
    opt.build(m.trainable_variables)

    @tf.function(input_signature=[spec([None, 16, 16, 2], f32, "hires")])
    def train(hr):
        with tf.GradientTape() as tape:
            lr = tf.image.resize(hr, [8, 8], method="bilinear", antialias=True)
            up = tf.image.resize(m(lr, training=True), [16, 16], method="bicubic")
            loss = tf.reduce_mean(tf.square(up - hr))
        grads = tape.gradient(loss, m.trainable_variables)
        opt.apply_gradients(zip(grads, m.trainable_variables))
        area = tf.image.resize(hr, [6, 6], method="area")
        lanczos = tf.image.resize(hr, [5, 7], method="lanczos3")
        return loss, area, lanczos

    feeds = {"hires": rng.uniform(0, 1, (2, 16, 16, 2)).astype(np.float32)}
    fn_fixture("sweep5_resize_antialias_bicubic_adam", train, m.variables + opt.variables, feeds, 2)


FIXTURES = [sweep5_gnn_segment_messages_adam, sweep5_word2vec_sampled_softmax_sgd, sweep5_nuclear_norm_completion_sgd,
            sweep5_lstsq_ridge_head_sgd, sweep5_tridiagonal_smoothing_adam, sweep5_expm_orthogonal_layer_sgd,
            sweep5_resize_antialias_bicubic_adam]



if __name__ == "__main__":
    run_main(FIXTURES)
