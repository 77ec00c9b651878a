"""Writes the fourth sweep of TensorFlow graphs (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_sweep4.py [--out DIR] [NAME...]

Kinds of TF2 programs the earlier sweeps do not export, through make_fixtures_tf2.write: a bag-of-words
text classifier over ragged token ids (values and row splits fed, the ragged mean inside the step), a
learning-to-rank step (ListNet softmax cross-entropy, cumulative sums, sort/argsort, logsumexp), image
losses (SSIM through a Gaussian depthwise filter, Sobel edges, total variation, HSV adjustments,
extract_patches), dilated (atrous) convolutions with local response normalization and max-pool argmax,
special functions in a likelihood (lgamma, digamma, the regularized incomplete gamma and beta functions,
log-ndtr, Bessel), a QR/orthogonality regularizer, and a sparse-feature step (sparse dense matmul, sparse
segment means, sparse softmax). Cases: README.md.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures_tf2  # noqa: E402
from make_fixtures_keras_sweep import start  # noqa: E402
from make_fixtures_sweep3 import fn_fixture, spec  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
make_fixtures_tf2.OUT = OUT
f32, i32, i64 = tf.float32, tf.int32, tf.int64


# 1 ------------------------------------------------------------------------------------------------
def sweep4_ragged_bag_of_words_adam():
    """Text classifier over ragged token ids: the step takes the flat ids and row splits (what a serving
    signature of a RaggedTensor becomes), embeds them, averages per row (ragged reduce_mean: segment ids
    from row splits, UnsortedSegmentSum), a Dense softmax head; Adam. Rows of length 0 included."""
    keras, L, rng = start(401)
    emb = tf.Variable((0.1 * rng.standard_normal((20, 6))).astype(np.float32), name="emb")
    w = tf.Variable((0.3 * rng.standard_normal((6, 3))).astype(np.float32), name="w")
    b = tf.Variable(np.zeros(3, np.float32), name="b")
    params = [emb, w, b]
    opt = keras.optimizers.Adam(0.01)
    opt.build(params)

    @tf.function(input_signature=[spec([None], i64, "ids"), spec([None], i64, "splits"), spec([None], i32, "labels")])
    def train(ids, splits, labels):
        with tf.GradientTape() as tape:
            rt = tf.RaggedTensor.from_row_splits(ids, splits)
            vecs = tf.ragged.map_flat_values(tf.nn.embedding_lookup, emb, rt)
            mean = tf.reduce_mean(vecs, axis=1)
            lengths = tf.cast(rt.row_lengths(), f32)
            logits = tf.matmul(mean, w) + b + 0.01 * lengths[:, None]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads = tape.gradient(loss, params)
        grads = [tf.convert_to_tensor(g) for g in grads]
        opt.apply_gradients(zip(grads, params))
        return loss, tf.argmax(logits, 1), rt.to_tensor(default_value=-1)

    feeds = {"ids": rng.integers(0, 20, 11).astype(np.int64), "splits": np.array([0, 3, 3, 7, 8, 11], np.int64),
             "labels": rng.integers(0, 3, 5).astype(np.int32)}
    fn_fixture("sweep4_ragged_bag_of_words_adam", train, params + opt.variables, feeds, 3)


# 2 ------------------------------------------------------------------------------------------------
def sweep4_listnet_rank_sgd():
    """Learning to rank: a scoring MLP, ListNet (softmax cross-entropy between label and score
    distributions per list), an approximate NDCG term from sort/argsort of the labels with exclusive
    reverse cumulative sums, reduce_logsumexp; SGD."""
    keras, L, rng = start(402)
    m = keras.Sequential([keras.Input((5,)), L.Dense(8, activation="tanh"), L.Dense(1)])
    opt = keras.optimizers.SGD(0.05)
    opt.build(m.trainable_variables)

    @tf.function(input_signature=[spec([None, 6, 5], f32, "feats"), spec([None, 6], f32, "rel")])
    def train(x, rel):
        with tf.GradientTape() as tape:
            s = tf.squeeze(m(tf.reshape(x, [-1, 5])), -1)
            s = tf.reshape(s, tf.shape(rel))
            listnet = -tf.reduce_sum(tf.nn.softmax(rel) * tf.nn.log_softmax(s), -1)
            order = tf.argsort(s, axis=-1, direction="DESCENDING", stable=True)
            gains = tf.gather(tf.pow(2.0, rel) - 1.0, order, batch_dims=1)
            disc = 1.0 / tf.math.log(tf.cast(tf.range(2, 8), f32))
            dcg = tf.reduce_sum(gains * disc, -1)
            ideal = tf.reduce_sum(tf.sort(tf.pow(2.0, rel) - 1.0, direction="DESCENDING") * disc, -1)
            tail = tf.math.cumsum(tf.exp(s), axis=-1, exclusive=True, reverse=True)
            lse = tf.reduce_logsumexp(s, -1)
            loss = tf.reduce_mean(listnet) + 0.01 * tf.reduce_mean(tf.math.log1p(tail)) + 0.001 * tf.reduce_mean(lse)
        grads = tape.gradient(loss, m.trainable_variables)
        opt.apply_gradients(zip(grads, m.trainable_variables))
        return loss, dcg / ideal, tf.math.cumprod(rel + 1.0, axis=-1, exclusive=True)

    feeds = {"feats": rng.standard_normal((3, 6, 5)).astype(np.float32),
             "rel": rng.integers(0, 4, (3, 6)).astype(np.float32)}
    fn_fixture("sweep4_listnet_rank_sgd", train, m.variables + opt.variables, feeds, 2)


# 3 ------------------------------------------------------------------------------------------------
def sweep4_image_ssim_sobel_tv_adam():
    """An image-restoration step: a small conv net denoises, the loss mixes 1 - SSIM (Gaussian filter by
    depthwise conv), Sobel edge differences, total variation, a grayscale term (rgb_to_grayscale) and
    extract_patches statistics; Adam. The HSV adjustments of the output are fetched (adjust_hue,
    adjust_saturation, rgb_to_hsv: TensorFlow has no gradient for them)."""
    keras, L, rng = start(403)
    m = keras.Sequential([keras.Input((12, 12, 3)), L.Conv2D(6, 3, padding="same", activation="relu"),
                          L.Conv2D(3, 3, padding="same", activation="sigmoid")])
    opt = keras.optimizers.Adam(1e-3)
    opt.build(m.trainable_variables)

    @tf.function(input_signature=[spec([None, 12, 12, 3], f32, "noisy"), spec([None, 12, 12, 3], f32, "clean")])
    def train(noisy, clean):
        with tf.GradientTape() as tape:
            out = m(noisy, training=True)
            ssim = tf.reduce_mean(tf.image.ssim(out, clean, max_val=1.0, filter_size=5))
            edges = tf.reduce_mean(tf.abs(tf.image.sobel_edges(out) - tf.image.sobel_edges(clean)))
            tv = tf.reduce_mean(tf.image.total_variation(out)) / 144.0
            gray = tf.reduce_mean(tf.abs(tf.image.rgb_to_grayscale(out) - tf.image.rgb_to_grayscale(clean)))
            patches = tf.image.extract_patches(out, sizes=[1, 3, 3, 1], strides=[1, 3, 3, 1], rates=[1, 1, 1, 1],
                                               padding="VALID")
            pvar = tf.reduce_mean(tf.math.reduce_variance(patches, -1))
            loss = (1.0 - ssim) + 0.5 * edges + 0.01 * tv + gray + 0.1 * pvar
        grads = tape.gradient(loss, m.trainable_variables)
        opt.apply_gradients(zip(grads, m.trainable_variables))
        hsv = tf.image.rgb_to_hsv(out)
        return loss, ssim, tf.image.adjust_hue(out, 0.2), tf.image.adjust_saturation(out, 1.5), hsv

    clean = rng.uniform(0, 1, (2, 12, 12, 3)).astype(np.float32)
    feeds = {"clean": clean, "noisy": np.clip(clean + 0.1 * rng.standard_normal(clean.shape), 0, 1).astype(np.float32)}
    fn_fixture("sweep4_image_ssim_sobel_tv_adam", train, m.variables + opt.variables, feeds, 2)


# 4 ------------------------------------------------------------------------------------------------
def sweep4_atrous_lrn_argmax_momentum():
    """Segmentation-style features: atrous convolution (SpaceToBatchND/BatchToSpaceND around Conv2D),
    local response normalization (LRN, LRNGrad), max_pool_with_argmax (its argmax fetched), depth_to_space
    and space_to_depth; momentum SGD."""
    keras, L, rng = start(404)
    k1 = tf.Variable((0.3 * rng.standard_normal((3, 3, 2, 4))).astype(np.float32), name="k1")
    k2 = tf.Variable((0.3 * rng.standard_normal((1, 1, 4, 8))).astype(np.float32), name="k2")
    params = [k1, k2]
    opt = keras.optimizers.SGD(0.02, momentum=0.9)
    opt.build(params)

    @tf.function(input_signature=[spec([None, 10, 10, 2], f32, "image"), spec([None, 10, 10, 2], f32, "target")])
    def train(x, t):
        with tf.GradientTape() as tape:
            h = tf.nn.atrous_conv2d(x, k1, rate=2, padding="SAME")
            h = tf.nn.local_response_normalization(tf.nn.relu(h), depth_radius=1, bias=1.0, alpha=0.5, beta=0.75)
            h = tf.nn.conv2d(h, k2, 1, "SAME")
            h = tf.nn.depth_to_space(h, 2)
            h = tf.nn.avg_pool2d(h, 2, 2, "VALID")
            loss = tf.reduce_mean(tf.square(h - t))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        pooled, argmax = tf.nn.max_pool_with_argmax(x, 2, 2, "VALID", include_batch_in_index=True)
        return loss, pooled, argmax, tf.nn.space_to_depth(x, 2)

    feeds = {"image": rng.standard_normal((2, 10, 10, 2)).astype(np.float32),
             "target": rng.standard_normal((2, 10, 10, 2)).astype(np.float32)}
    fn_fixture("sweep4_atrous_lrn_argmax_momentum", train, params + opt.variables, feeds, 2)


# 5 ------------------------------------------------------------------------------------------------
def sweep4_special_functions_likelihood():
    """A count/proportion model's likelihood and diagnostics: negative-binomial log-likelihood by lgamma,
    its digamma gradient, the regularized incomplete gamma (igamma/igammac: Poisson CDF) and beta (betainc:
    Beta CDF) functions, zeta, polygamma, ndtri, erfinv, Bessel i0e/i1e, xlogy/xlog1py; Adam on two
    log-parameters."""
    keras, L, rng = start(405)
    log_r = tf.Variable(np.float32(0.3), name="log_r")
    logit_p = tf.Variable(np.float32(-0.2), name="logit_p")
    params = [log_r, logit_p]
    opt = keras.optimizers.Adam(0.05)
    opt.build(params)

    @tf.function(input_signature=[spec([None], f32, "counts"), spec([None], f32, "props")])
    def train(k, u):
        with tf.GradientTape() as tape:
            r, p = tf.exp(log_r), tf.sigmoid(logit_p)
            ll = (tf.math.lgamma(k + r) - tf.math.lgamma(r) - tf.math.lgamma(k + 1.0)
                  + r * tf.math.log1p(-p) + tf.math.xlogy(k, p))
            loss = -tf.reduce_mean(ll)
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        pois_cdf = tf.math.igammac(k + 1.0, 2.5)
        gam = tf.math.igamma(2.0, k + 0.5)
        beta_cdf = tf.math.betainc(2.0, 3.0, u)
        z = tf.math.ndtri(u)
        return (loss, tf.math.digamma(k + r), pois_cdf, gam, beta_cdf, z, tf.math.zeta(2.0 + u, 1.0 + k),
                tf.math.polygamma(1.0, k + 1.0),
                tf.math.erfinv(2.0 * u - 1.0), tf.math.bessel_i0e(k), tf.math.bessel_i1e(-k), tf.math.xlog1py(u, k))

    feeds = {"counts": np.array([0, 1, 2, 5, 9, 3], np.float32), "props": np.array([0.05, 0.2, 0.5, 0.7, 0.9, 0.99], np.float32)}
    fn_fixture("sweep4_special_functions_likelihood", train, params + opt.variables, feeds, 2)


# 6 ------------------------------------------------------------------------------------------------
def sweep4_qr_orthogonal_regularizer_sgd():
    """A layer kept near-orthogonal: the penalty ||W^T W - I||^2 and a QR factorization of the weights
    (tf.linalg.qr: Qr and its gradient) whose R diagonal enters the loss; matrix_band_part, trace,
    norm; SGD."""
    keras, L, rng = start(406)
    W = tf.Variable((rng.standard_normal((6, 4)) / 2).astype(np.float32), name="W")
    params = [W]
    opt = keras.optimizers.SGD(0.05)
    opt.build(params)

    @tf.function(input_signature=[spec([None, 6], f32, "x"), spec([None, 4], f32, "y")])
    def train(x, y):
        with tf.GradientTape() as tape:
            pred = tf.matmul(x, W)
            fit = tf.reduce_mean(tf.square(pred - y))
            gram = tf.matmul(W, W, transpose_a=True)
            ortho = tf.reduce_sum(tf.square(gram - tf.eye(4)))
            q, r = tf.linalg.qr(W)
            logdiag = tf.reduce_sum(tf.math.log(tf.abs(tf.linalg.diag_part(r))))
            loss = fit + 0.1 * ortho - 0.01 * logdiag + 0.001 * tf.linalg.trace(tf.linalg.band_part(gram, 0, 1))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        return loss, tf.abs(q), tf.abs(r), tf.norm(W, ord="fro", axis=[0, 1])

    feeds = {"x": rng.standard_normal((8, 6)).astype(np.float32), "y": rng.standard_normal((8, 4)).astype(np.float32)}
    fn_fixture("sweep4_qr_orthogonal_regularizer_sgd", train, params + opt.variables, feeds, 2)


# 7 ------------------------------------------------------------------------------------------------
def sweep4_sparse_features_adagrad():
    """Sparse features: a SparseTensor fed as indices/values/dense_shape, sparse_dense_matmul (and its
    gradient), embedding_lookup_sparse with the sqrtn combiner (SparseSegmentSqrtN and its gradient),
    sparse.softmax and sparse.reduce_sum fetched; Adagrad."""
    keras, L, rng = start(407)
    w = tf.Variable((0.2 * rng.standard_normal((12, 3))).astype(np.float32), name="w")
    emb = tf.Variable((0.2 * rng.standard_normal((12, 3))).astype(np.float32), name="emb")
    params = [w, emb]
    opt = keras.optimizers.Adagrad(0.1)
    opt.build(params)

    @tf.function(input_signature=[spec([None, 2], i64, "indices"), spec([None], f32, "values"), spec([2], i64, "shape"),
                                  spec([None], f32, "y")])
    def train(indices, values, shape, y):
        sp = tf.SparseTensor(indices, values, shape)
        ids = tf.SparseTensor(indices, indices[:, 1], shape)
        with tf.GradientTape() as tape:
            lin = tf.sparse.sparse_dense_matmul(sp, w)
            e = tf.nn.embedding_lookup_sparse(emb, ids, sp, combiner="sqrtn")
            pred = tf.reduce_sum(lin * e, -1)
            loss = tf.reduce_mean(tf.square(pred - y))
        grads = tape.gradient(loss, params)
        grads = [tf.convert_to_tensor(g) for g in grads]
        opt.apply_gradients(zip(grads, params))
        smax = tf.sparse.softmax(sp)
        return loss, smax.values, tf.sparse.reduce_sum(sp, axis=1), tf.sparse.to_dense(tf.sparse.reorder(sp))

    indices = np.array([[0, 1], [0, 5], [1, 0], [2, 3], [2, 7], [2, 11], [3, 4]], np.int64)
    feeds = {"indices": indices, "values": rng.uniform(0.5, 2, 7).astype(np.float32),
             "shape": np.array([4, 12], np.int64), "y": rng.standard_normal(4).astype(np.float32)}
    fn_fixture("sweep4_sparse_features_adagrad", train, params + opt.variables, feeds, 2)


FIXTURES = [sweep4_ragged_bag_of_words_adam, sweep4_listnet_rank_sgd, sweep4_image_ssim_sobel_tv_adam,
            sweep4_atrous_lrn_argmax_momentum, sweep4_special_functions_likelihood,
            sweep4_qr_orthogonal_regularizer_sgd, sweep4_sparse_features_adagrad]



def run_main(fixtures):
    """`[--out DIR] [NAME...]`: writes the named fixtures (all by default) into DIR (default: this
    directory); a fixture that fails is reported and the rest still run (these are probes)."""
    args = sys.argv[1:]
    if "--out" in args:
        i = args.index("--out")
        make_fixtures_tf2.OUT = args[i + 1]
        os.makedirs(args[i + 1], exist_ok=True)
        del args[i:i + 2]
    for f in fixtures:
        if not args or f.__name__ in args:
            try:
                f()
            except Exception as e:  # noqa: BLE001  (a probe: report and go on)
                print(f"{f.__name__}: {type(e).__name__}: {e}", file=sys.stderr)


if __name__ == "__main__":
    run_main(FIXTURES)
