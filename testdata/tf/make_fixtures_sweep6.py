"""Writes the sixth sweep of TensorFlow graphs (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_sweep6.py [--out DIR] [NAME...]

Kinds of TF2 programs the earlier sweeps do not export, through make_fixtures_tf2.write: seeded gamma and
Poisson sampling (Dirichlet mixup), fractional pooling with DCT features, matrix square roots and
pseudo-inverses, and Keras attention variants (multi-axis MultiHeadAttention, EinsumDense). Cases: README.md.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_sweep4 import f32, fn_fixture, i32, i64, run_main, spec, start  # noqa: E402,F401


# 1 ------------------------------------------------------------------------------------------------
def sweep6_dirichlet_mixup_sgd():
    """Mixup with Dirichlet weights: seeded tf.random.gamma (RandomGamma) and the stateless gamma and
    Poisson samplers (StatelessRandomGammaV3, StatelessRandomPoisson) and tf.random.poisson
    (RandomPoissonV2); the gamma draws, normalized, mix three examples; SGD on a linear model."""
    keras, L, rng = start(601)
    w = tf.Variable((0.3 * rng.standard_normal((4, 1))).astype(np.float32), name="w")
    params = [w]
    opt = keras.optimizers.SGD(0.05)
    opt.build(params)

    @tf.function(input_signature=[spec([3, 4], f32, "x"), spec([3, 1], f32, "y")])
    def train(x, y):
        g = tf.random.gamma([5, 3], alpha=[0.5, 1.0, 2.5], seed=11)
        lam = g / tf.reduce_sum(g, -1, keepdims=True)
        xm, ym = tf.matmul(lam, x), tf.matmul(lam, y)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(xm, w) - ym))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        sg = tf.random.stateless_gamma([4], seed=[3, 4], alpha=1.5)
        sp = tf.random.stateless_poisson([4], seed=[5, 6], lam=3.0)
        p = tf.random.poisson([3], lam=[1.0, 10.0], seed=13)
        return loss, lam, sg, sp, p

    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32), "y": rng.standard_normal((3, 1)).astype(np.float32)}
    fn_fixture("sweep6_dirichlet_mixup_sgd", train, params + opt.variables, feeds, 2)


# 2 ------------------------------------------------------------------------------------------------
def sweep6_fractional_pool_dct_adam():
    """Fractional max and average pooling (seeded, pseudo-random and overlapping; FractionalMaxPool,
    FractionalAvgPool and their gradients) in a small conv net, and DCT-II/III features of a signal
    (tf.signal.dct/idct through RFFT) with framing and overlap-add; Adam."""
    keras, L, rng = start(602)
    k = tf.Variable((0.3 * rng.standard_normal((3, 3, 1, 3))).astype(np.float32), name="k")
    params = [k]
    opt = keras.optimizers.Adam(0.01)
    opt.build(params)

    @tf.function(input_signature=[spec([2, 9, 9, 1], f32, "image"), spec([2, 16], f32, "signal")])
    def train(x, s):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.nn.conv2d(x, k, 1, "SAME"))
            mp, _, _ = tf.raw_ops.FractionalMaxPool(value=h, pooling_ratio=[1.0, 1.5, 1.5, 1.0], pseudo_random=True,
                                                    overlapping=True, deterministic=True, seed=5, seed2=6)
            ap, _, _ = tf.raw_ops.FractionalAvgPool(value=h, pooling_ratio=[1.0, 1.44, 1.73, 1.0], pseudo_random=False,
                                                    overlapping=False, deterministic=True, seed=7, seed2=8)
            loss = tf.reduce_mean(tf.square(mp)) + tf.reduce_mean(ap)
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        c = tf.signal.dct(s, type=2, norm="ortho")
        r = tf.signal.idct(c, type=2, norm="ortho")
        frames = tf.signal.frame(s, 8, 4)
        ola = tf.signal.overlap_and_add(frames, 4)
        return loss, mp, ap, c, r, ola, tf.signal.dct(s, type=3)

    feeds = {"image": rng.standard_normal((2, 9, 9, 1)).astype(np.float32),
             "signal": rng.standard_normal((2, 16)).astype(np.float32)}
    fn_fixture("sweep6_fractional_pool_dct_adam", train, params + opt.variables, feeds, 2)


# 3 ------------------------------------------------------------------------------------------------
def sweep6_sqrtm_pinv_whitening_sgd():
    """ZCA-style whitening: the covariance's inverse square root by tf.linalg.sqrtm (MatrixSquareRoot)
    and matrix_inverse, a pseudo-inverse (tf.linalg.pinv: SVD) of a rank-deficient matrix, and
    matrix_rank; the whitened features train a linear layer by SGD."""
    keras, L, rng = start(603)
    w = tf.Variable((0.3 * rng.standard_normal((3, 2))).astype(np.float32), name="w")
    params = [w]
    opt = keras.optimizers.SGD(0.05)
    opt.build(params)

    @tf.function(input_signature=[spec([8, 3], f32, "x"), spec([8, 2], f32, "y")])
    def train(x, y):
        xc = x - tf.reduce_mean(x, 0)
        cov = tf.matmul(xc, xc, transpose_a=True) / 8.0 + 0.1 * tf.eye(3)
        root = tf.linalg.sqrtm(cov)
        xw = tf.matmul(xc, tf.linalg.inv(root))
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(xw, w) - y))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        low = tf.matmul(x[:, :2], x[:, :2], transpose_a=True)
        deficient = tf.concat([low, low[:, :1]], 1)
        return loss, root, tf.linalg.pinv(deficient), tf.linalg.matrix_rank(deficient)

    feeds = {"x": rng.standard_normal((8, 3)).astype(np.float32), "y": rng.standard_normal((8, 2)).astype(np.float32)}
    fn_fixture("sweep6_sqrtm_pinv_whitening_sgd", train, params + opt.variables, feeds, 2)


# 4 ------------------------------------------------------------------------------------------------
def sweep6_mha_2d_einsum_dense_adamw():
    """Keras attention variants: MultiHeadAttention over two axes of a 4-D input (attention_axes=(1, 2):
    einsums with several batch labels), EinsumDense with a bias over two output axes, a causal
    self-attention with a padding mask; AdamW."""
    keras, L, rng = start(604)
    inp = keras.Input((3, 4, 6))
    a = L.MultiHeadAttention(num_heads=2, key_dim=3, attention_axes=(1, 2))(inp, inp)
    e = L.EinsumDense("abcd,de->abce", output_shape=(3, 4, 5), bias_axes="e")(a)
    seq = L.Reshape((12, 5))(e)
    causal = L.MultiHeadAttention(num_heads=1, key_dim=4)(seq, seq, use_causal_mask=True)
    out = L.Dense(1)(L.GlobalAveragePooling1D()(causal))
    m = keras.Model(inp, out)
    opt = keras.optimizers.AdamW(1e-3, weight_decay=0.01)
    opt.build(m.trainable_variables)

    @tf.function(input_signature=[spec([2, 3, 4, 6], f32, "x"), spec([2, 1], f32, "y")])
    def train(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(m(x, training=True) - y))
        grads = tape.gradient(loss, m.trainable_variables)
        opt.apply_gradients(zip(grads, m.trainable_variables))
        return loss

    feeds = {"x": rng.standard_normal((2, 3, 4, 6)).astype(np.float32), "y": rng.standard_normal((2, 1)).astype(np.float32)}
    fn_fixture("sweep6_mha_2d_einsum_dense_adamw", train, m.variables + opt.variables, feeds, 2)


FIXTURES = [sweep6_dirichlet_mixup_sgd, sweep6_fractional_pool_dct_adam, sweep6_sqrtm_pinv_whitening_sgd,
            sweep6_mha_2d_einsum_dense_adamw]



if __name__ == "__main__":
    run_main(FIXTURES)
