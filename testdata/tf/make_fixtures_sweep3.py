"""Writes the third sweep of TensorFlow graphs (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_sweep3.py [NAME...]

Kinds of TF2 programs none of the other generators export, through make_fixtures_tf2.write: second-order
gradients (a WGAN-GP critic's gradient penalty through Conv2D and LeakyReLU), Cholesky/triangular-solve
and slogdet/inverse losses, a PPO step with categorical sampling, a beam search in a `tf.while_loop`,
detection heads (NMS V5 hard and soft, padded NMS, CropAndResize and its gradients), `tf.vectorized_map`
per-example gradients (DP-SGD), a gradient through `tf.switch_case`/`tf.cond` (cond_v2 passes the branch
intermediates as Optionals: `OptionalFromValue`/`OptionalNone`/`OptionalGetValue`) with
`tf.custom_gradient` and `tf.recompute_grad`, `tf.random.Generator` draws (`RngReadAndSkip` on its int64 state variable,
`StatelessRandomUniformFullIntV2`) and a SimCLR InfoNCE step with LAMB. When first run, the gradient
through a conditional failed in both modes (no Optional kernels), and so did the generator (its state
variable typed float32 from an op without a `dtype`; no `RngReadAndSkip` or full-range integer kernels);
everything else matched TensorFlow. Cases: README.md.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures_tf2  # noqa: E402
from make_fixtures_keras_sweep import check_captures, start  # noqa: E402
from make_fixtures_tf2 import captured_variables, write  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
make_fixtures_tf2.OUT = OUT
f32, i32, i64 = tf.float32, tf.int32, tf.int64


def spec(shape, dt, name):
    return tf.TensorSpec(shape, dt, name=name)


def fn_fixture(name, fn, candidates, feeds, steps=2):
    cf = fn.get_concrete_function()
    variables = captured_variables(cf, candidates)
    check_captures(name, cf, variables)
    write(name, cf, variables, feeds, steps)
    return cf


# 1 ------------------------------------------------------------------------------------------------
def sweep3_wgan_gp_critic_adam():
    """WGAN-GP critic step: the gradient penalty differentiates the critic's input gradient (tape inside
    tape) through Conv2D + LeakyReLU + Dense: second-order Conv2D/Conv2DBackpropInput/LeakyReluGrad."""
    keras, L, rng = start(301)
    critic = keras.Sequential([keras.Input((6, 6, 1)), L.Conv2D(4, 3, padding="same"), L.LeakyReLU(0.2),
                               L.Flatten(), L.Dense(1)])
    opt = keras.optimizers.Adam(1e-3, beta_1=0.5, beta_2=0.9)
    opt.build(critic.trainable_variables)

    @tf.function(input_signature=[spec([None, 6, 6, 1], f32, "real"), spec([None, 6, 6, 1], f32, "fake"),
                                  spec([None, 1, 1, 1], f32, "eps")])
    def train(real, fake, eps):
        with tf.GradientTape() as tape:
            interp = eps * real + (1.0 - eps) * fake
            with tf.GradientTape() as gtape:
                gtape.watch(interp)
                d_int = critic(interp, training=True)
            g = gtape.gradient(d_int, interp)
            norm = tf.sqrt(tf.reduce_sum(tf.square(g), axis=[1, 2, 3]) + 1e-12)
            gp = tf.reduce_mean(tf.square(norm - 1.0))
            w_dist = tf.reduce_mean(critic(fake, training=True)) - tf.reduce_mean(critic(real, training=True))
            loss = w_dist + 10.0 * gp
        grads = tape.gradient(loss, critic.trainable_variables)
        opt.apply_gradients(zip(grads, critic.trainable_variables))
        return loss, gp, w_dist

    feeds = {"real": rng.standard_normal((4, 6, 6, 1)).astype(np.float32),
             "fake": rng.standard_normal((4, 6, 6, 1)).astype(np.float32) * 0.5,
             "eps": rng.uniform(0, 1, (4, 1, 1, 1)).astype(np.float32)}
    fn_fixture("sweep3_wgan_gp_critic_adam", train, critic.variables + opt.variables, feeds, 3)


# 2 ------------------------------------------------------------------------------------------------
def sweep3_gp_cholesky_adam():
    """Gaussian-process regression: negative log marginal likelihood through tf.linalg.cholesky,
    cholesky_solve (MatrixTriangularSolve twice), log of the diagonal; Adam on log hyperparameters;
    predictive mean and variance by triangular_solve. Gradients: TF2 differentiates Cholesky in Python (triangular solves, no CholeskyGrad op) and MatrixTriangularSolve."""
    keras, L, rng = start(302)
    log_ls = tf.Variable(np.float32(0.2), name="log_ls")
    log_sf = tf.Variable(np.float32(0.1), name="log_sf")
    log_sn = tf.Variable(np.float32(-1.5), name="log_sn")
    params = [log_ls, log_sf, log_sn]
    opt = keras.optimizers.Adam(0.05)
    opt.build(params)

    def kern(a, b, ls, sf2):
        d = a[:, None, :] - b[None, :, :]
        return sf2 * tf.exp(-0.5 * tf.reduce_sum(tf.square(d), -1) / tf.square(ls))

    @tf.function(input_signature=[spec([None, 2], f32, "xtrain"), spec([None], f32, "y"), spec([None, 2], f32, "xtest")])
    def train(X, y, Xs):
        n = tf.shape(X)[0]
        with tf.GradientTape() as tape:
            ls, sf2, sn2 = tf.exp(log_ls), tf.exp(2.0 * log_sf), tf.exp(2.0 * log_sn)
            K = kern(X, X, ls, sf2) + (sn2 + 1e-4) * tf.eye(n)
            Lc = tf.linalg.cholesky(K)
            alpha = tf.linalg.cholesky_solve(Lc, y[:, None])
            nll = (0.5 * tf.reduce_sum(y[:, None] * alpha) + tf.reduce_sum(tf.math.log(tf.linalg.diag_part(Lc)))
                   + 0.5 * tf.cast(n, f32) * np.log(2 * np.pi).astype(np.float32))
        grads = tape.gradient(nll, params)
        Ks = kern(Xs, X, ls, sf2)
        mean = tf.matmul(Ks, alpha)[:, 0]
        v = tf.linalg.triangular_solve(Lc, tf.transpose(Ks), lower=True)
        var = sf2 - tf.reduce_sum(tf.square(v), 0)
        opt.apply_gradients(zip(grads, params))
        return nll, mean, var

    X = rng.uniform(-2, 2, (8, 2)).astype(np.float32)
    y = (np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(8)).astype(np.float32)
    feeds = {"xtrain": X, "y": y, "xtest": rng.uniform(-2, 2, (5, 2)).astype(np.float32)}
    fn_fixture("sweep3_gp_cholesky_adam", train, params + opt.variables, feeds, 3)


# 3 ------------------------------------------------------------------------------------------------
def sweep3_flow_slogdet_inverse_sgd():
    """Normalizing-flow style step: an invertible linear map with an act-norm scale, the log-likelihood
    uses tf.linalg.slogdet (LogMatrixDeterminant) and the reconstruction uses tf.linalg.inv (MatrixInverse),
    plus tf.linalg.det fetched; SGD. Gradients of slogdet (MatrixInverse, adjoint) and of inv."""
    keras, L, rng = start(303)
    W = tf.Variable((np.eye(4) + 0.3 * rng.standard_normal((4, 4))).astype(np.float32), name="W")
    b = tf.Variable(np.zeros(4, np.float32), name="b")
    s = tf.Variable((0.1 * rng.standard_normal(4)).astype(np.float32), name="s")
    params = [W, b, s]
    opt = keras.optimizers.SGD(0.05)
    opt.build(params)

    @tf.function(input_signature=[spec([None, 4], f32, "x")])
    def train(x):
        with tf.GradientTape() as tape:
            z = tf.matmul(x * tf.exp(s), W) + b
            sign, logdet = tf.linalg.slogdet(W)
            ll = -0.5 * tf.reduce_sum(tf.square(z), 1) + logdet + tf.reduce_sum(s)
            Winv = tf.linalg.inv(W)
            x_rec = tf.matmul(z - b, Winv) * tf.exp(-s)
            loss = -tf.reduce_mean(ll) + 0.1 * tf.reduce_mean(tf.square(x_rec - x)) + 0.01 * tf.reduce_sum(
                tf.square(Winv))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        return loss, sign, logdet, tf.linalg.det(W), x_rec

    feeds = {"x": rng.standard_normal((6, 4)).astype(np.float32)}
    fn_fixture("sweep3_flow_slogdet_inverse_sgd", train, params + opt.variables, feeds, 3)


# 4 ------------------------------------------------------------------------------------------------
def sweep3_ppo_categorical_rmsprop():
    """RL policy-gradient (PPO-clip) step: actions from tf.random.stateless_categorical seeded by a step
    counter (StatelessMultinomial) and an exploration draw from tf.random.categorical with op seed
    (Multinomial, stateful: advances every step); log_softmax, gather(batch_dims=1), entropy bonus,
    clip_by_value ratio; RMSprop."""
    keras, L, rng = start(304)
    policy = keras.Sequential([keras.Input((4,)), L.Dense(16, activation="tanh"), L.Dense(3)])
    counter = tf.Variable(np.int64(5), name="counter")
    opt = keras.optimizers.RMSprop(0.01)
    opt.build(policy.trainable_variables)

    @tf.function(input_signature=[spec([None, 4], f32, "obs"), spec([None], f32, "adv"),
                                  spec([None], f32, "old_logp")])
    def train(obs, adv, old_logp):
        seed = tf.stack([counter.read_value(), tf.constant(7, tf.int64)])
        with tf.GradientTape() as tape:
            logits = policy(obs, training=True)
            actions = tf.random.stateless_categorical(logits, 1, seed=seed)[:, 0]
            logp_all = tf.nn.log_softmax(logits)
            logp = tf.gather(logp_all, actions, batch_dims=1)
            ratio = tf.exp(logp - old_logp)
            clipped = tf.clip_by_value(ratio, 0.8, 1.2)
            pg = -tf.reduce_mean(tf.minimum(ratio * adv, clipped * adv))
            ent = -tf.reduce_mean(tf.reduce_sum(tf.nn.softmax(logits) * logp_all, 1))
            loss = pg - 0.01 * ent
        grads = tape.gradient(loss, policy.trainable_variables)
        opt.apply_gradients(zip(grads, policy.trainable_variables))
        counter.assign_add(1)
        explore = tf.random.categorical(tf.stop_gradient(logits), 4, seed=11, dtype=tf.int32)
        return loss, actions, ent, explore

    feeds = {"obs": rng.standard_normal((8, 4)).astype(np.float32),
             "adv": rng.standard_normal(8).astype(np.float32),
             "old_logp": np.log(rng.uniform(0.2, 0.5, 8)).astype(np.float32)}
    fn_fixture("sweep3_ppo_categorical_rmsprop", train, policy.variables + opt.variables + [counter], feeds, 3)


# 5 ------------------------------------------------------------------------------------------------
def sweep3_beam_search_while_inference():
    """Seq2seq beam-search decoding (inference): a tf.while_loop (While: it reads variables) whose body runs an
    RNN cell on embeddings (ResourceGather), log_softmax, masks finished beams, TopKV2 over beam*vocab,
    reorders state by gather_nd, writes tokens by tensor_scatter_nd_update (TensorScatterUpdate), and exits
    early once every beam has emitted EOS (reduce_all in the loop condition)."""
    rng = np.random.default_rng(305)
    V, H, K, T, EOS = 7, 6, 3, 8, 0
    emb = tf.Variable((rng.standard_normal((V, H)) * 0.8).astype(np.float32), name="emb")
    Wx = tf.Variable((rng.standard_normal((H, H)) * 0.5).astype(np.float32), name="Wx")
    Wh = tf.Variable((rng.standard_normal((H, H)) * 0.5).astype(np.float32), name="Wh")
    Wo = tf.Variable((rng.standard_normal((H, V)) * 0.8).astype(np.float32), name="Wo")
    bo_init = np.zeros(V, np.float32)
    bo_init[EOS] = 1.6
    bo = tf.Variable(bo_init, name="bo")
    variables = [emb, Wx, Wh, Wo, bo]

    @tf.function(input_signature=[spec([None, H], f32, "h0"), spec([], i32, "bos")])
    def decode(h0, bos):
        B = tf.shape(h0)[0]
        h = tf.reshape(tf.tile(h0[:, None, :], [1, K, 1]), [B * K, H])
        tok = tf.fill([B * K], bos)
        scores = tf.tile(tf.constant([[0.0] + [-1e9] * (K - 1)], f32), [B, 1])
        finished = tf.zeros([B, K], tf.bool)
        seqs = tf.fill([B, K, T], -1)
        t = tf.constant(0)

        def cond(t, h, tok, scores, finished, seqs):
            return tf.logical_and(t < T, tf.logical_not(tf.reduce_all(finished)))

        def body(t, h, tok, scores, finished, seqs):
            x = tf.gather(emb, tok)
            h = tf.tanh(tf.matmul(x, Wx) + tf.matmul(h, Wh))
            logp = tf.nn.log_softmax(tf.matmul(h, Wo) + bo)
            logp = tf.reshape(logp, [B, K, V])
            eos_only = tf.constant([0.0] + [-1e9] * (V - 1), f32)
            logp = tf.where(finished[:, :, None], eos_only[None, None, :], logp)
            total = tf.reshape(scores[:, :, None] + logp, [B, K * V])
            top, idx = tf.math.top_k(total, K)
            beam = idx // V
            new_tok = idx % V
            bidx = tf.tile(tf.range(B)[:, None], [1, K])
            gidx = tf.stack([bidx, beam], -1)
            h = tf.reshape(tf.gather_nd(tf.reshape(h, [B, K, H]), gidx), [B * K, H])
            seqs = tf.gather_nd(seqs, gidx)
            finished = tf.logical_or(tf.gather_nd(finished, gidx), tf.equal(new_tok, EOS))
            sidx = tf.stack([bidx, tf.tile(tf.range(K)[None, :], [B, 1]), tf.fill([B, K], t)], -1)
            seqs = tf.tensor_scatter_nd_update(seqs, sidx, new_tok)
            return t + 1, h, tf.reshape(new_tok, [B * K]), top, finished, seqs

        t, h, tok, scores, finished, seqs = tf.while_loop(cond, body, [t, h, tok, scores, finished, seqs],
                                                          shape_invariants=[t.shape, tf.TensorShape([None, H]),
                                                                            tf.TensorShape([None]),
                                                                            tf.TensorShape([None, K]),
                                                                            tf.TensorShape([None, K]),
                                                                            tf.TensorShape([None, K, T])])
        best = tf.argmax(scores, 1, output_type=tf.int32)
        return t, seqs, scores, finished, best

    feeds = {"h0": (rng.standard_normal((3, H)) * 0.7).astype(np.float32), "bos": np.array(2, np.int32)}
    cf = fn_fixture("sweep3_beam_search_while_inference", decode, variables, feeds, 1)
    print("  beam: steps run", cf(tf.constant(feeds["h0"]), tf.constant(feeds["bos"]))[0].numpy())


# 6 ------------------------------------------------------------------------------------------------
# 7 ------------------------------------------------------------------------------------------------
def sweep3_detection_nms_crop_sgd():
    """Detection head: anchors decoded by fed deltas, tf.image.non_max_suppression_with_scores (NonMaxSuppressionV5,
    hard and soft-NMS), a padded NMS (NonMaxSuppressionV4), pairwise box IoU, crop_and_resize (bilinear and
    nearest) of a conv feature map at the kept boxes into a small classifier trained by SGD
    (CropAndResizeGradImage into Conv2DBackpropFilter)."""
    keras, L, rng = start(307)
    kconv = tf.Variable((rng.standard_normal((3, 3, 3, 4)) * 0.3).astype(np.float32), name="kconv")
    wcls = tf.Variable((rng.standard_normal((8, 3)) * 0.3).astype(np.float32), name="wcls")
    params = [kconv, wcls]
    opt = keras.optimizers.SGD(0.1)
    opt.build(params)

    def iou(a, b):
        ya1, xa1, ya2, xa2 = tf.unstack(a[:, None, :], axis=-1)
        yb1, xb1, yb2, xb2 = tf.unstack(b[None, :, :], axis=-1)
        ih = tf.maximum(0.0, tf.minimum(ya2, yb2) - tf.maximum(ya1, yb1))
        iw = tf.maximum(0.0, tf.minimum(xa2, xb2) - tf.maximum(xa1, xb1))
        inter = ih * iw
        area = lambda y1, x1, y2, x2: (y2 - y1) * (x2 - x1)  # noqa: E731
        return tf.math.divide_no_nan(inter, area(ya1, xa1, ya2, xa2) + area(yb1, xb1, yb2, xb2) - inter)

    @tf.function(input_signature=[spec([1, 12, 12, 3], f32, "image"), spec([None, 4], f32, "anchors"),
                                  spec([None, 4], f32, "deltas"), spec([None], f32, "score_logits"),
                                  spec([], i32, "label")])
    def train(image, anchors, deltas, score_logits, label):
        cy = (anchors[:, 0] + anchors[:, 2]) / 2 + deltas[:, 0] * 0.1
        cx = (anchors[:, 1] + anchors[:, 3]) / 2 + deltas[:, 1] * 0.1
        h = (anchors[:, 2] - anchors[:, 0]) * tf.exp(deltas[:, 2] * 0.2)
        w = (anchors[:, 3] - anchors[:, 1]) * tf.exp(deltas[:, 3] * 0.2)
        boxes = tf.clip_by_value(tf.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], 1), 0.0, 1.0)
        scores = tf.sigmoid(score_logits)
        sel, sel_scores = tf.image.non_max_suppression_with_scores(boxes, scores, 4, iou_threshold=0.5,
                                                                   score_threshold=0.2)
        soft_sel, soft_scores = tf.image.non_max_suppression_with_scores(boxes, scores, 5, iou_threshold=1.0,
                                                                         score_threshold=0.1, soft_nms_sigma=0.5)
        pad_sel, n_valid = tf.image.non_max_suppression_padded(boxes, scores, 6, iou_threshold=0.4,
                                                               pad_to_max_output_size=True)
        kept = tf.gather(boxes, sel)
        ious = iou(kept, boxes)
        with tf.GradientTape() as tape:
            feat = tf.nn.relu(tf.nn.conv2d(image, kconv, 1, "SAME"))
            crops = tf.image.crop_and_resize(feat, kept, tf.zeros_like(sel), [3, 3])
            crops_nn = tf.image.crop_and_resize(feat, kept, tf.zeros_like(sel), [2, 2], method="nearest")
            pooled = tf.concat([tf.reduce_mean(crops, [1, 2]), tf.reduce_max(crops_nn, [1, 2])], 1)
            logits = tf.matmul(pooled, wcls)
            lab = tf.fill([tf.shape(logits)[0]], label)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(lab, logits) * sel_scores)
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        return loss, sel, sel_scores, soft_sel, soft_scores, pad_sel, n_valid, ious, crops

    n = 12
    yx = rng.uniform(0.0, 0.7, (n, 2))
    hw = rng.uniform(0.15, 0.4, (n, 2))
    anchors = np.concatenate([yx, yx + hw], 1).astype(np.float32)
    anchors[5] = anchors[4] + 0.02  # heavy overlap
    feeds = {"image": rng.standard_normal((1, 12, 12, 3)).astype(np.float32), "anchors": anchors,
             "deltas": (rng.standard_normal((n, 4)) * 0.5).astype(np.float32),
             "score_logits": rng.standard_normal(n).astype(np.float32) * 2, "label": np.array(1, np.int32)}
    fn_fixture("sweep3_detection_nms_crop_sgd", train, params + opt.variables, feeds, 2)


# 8 ------------------------------------------------------------------------------------------------
# 9 ------------------------------------------------------------------------------------------------
def sweep3_vmap_per_example_dpsgd():
    """DP-SGD: per-example gradients of a small MLP by tf.vectorized_map (pfor-converted gradient ops),
    per-example global-norm clipping, Gaussian noise from tf.random.stateless_normal seeded by a step counter,
    update by assign_sub."""
    rng = np.random.default_rng(309)
    W1 = tf.Variable((rng.standard_normal((5, 8)) * 0.4).astype(np.float32), name="W1")
    b1 = tf.Variable(np.zeros(8, np.float32), name="b1")
    W2 = tf.Variable((rng.standard_normal((8, 3)) * 0.4).astype(np.float32), name="W2")
    b2 = tf.Variable(np.zeros(3, np.float32), name="b2")
    step = tf.Variable(np.int64(0), name="step")
    params = [W1, b1, W2, b2]
    C, sigma, lr = 1.0, 0.5, 0.1

    @tf.function(input_signature=[spec([None, 5], f32, "x"), spec([None], i32, "y")])
    def train(x, y):
        vals = [p.read_value() for p in params]

        def per_example(args):
            xi, yi = args
            with tf.GradientTape() as tape:
                tape.watch(vals)
                h = tf.nn.relu(tf.matmul(xi[None], vals[0]) + vals[1])
                logits = tf.matmul(h, vals[2]) + vals[3]
                li = tf.nn.sparse_softmax_cross_entropy_with_logits(yi[None], logits)[0]
            return tape.gradient(li, vals)

        g = tf.vectorized_map(per_example, (x, y))
        B = tf.shape(x)[0]
        sq = tf.add_n([tf.reduce_sum(tf.reshape(gi * gi, [B, -1]), 1) for gi in g])
        factor = tf.minimum(1.0, C / (tf.sqrt(sq) + 1e-6))
        seed = tf.stack([step.read_value(), tf.constant(3, tf.int64)])
        for i, (p, gi) in enumerate(zip(params, g)):
            f = tf.reshape(factor, [-1] + [1] * (len(gi.shape) - 1))
            noise = tf.random.stateless_normal(tf.shape(p), seed=seed + i) * (sigma * C)
            p.assign_sub(lr * (tf.reduce_sum(gi * f, 0) + noise) / tf.cast(B, f32))
        step.assign_add(1)
        return tf.sqrt(sq), factor

    feeds = {"x": rng.standard_normal((6, 5)).astype(np.float32) * 2, "y": np.array([0, 1, 2, 0, 1, 2], np.int32)}
    fn_fixture("sweep3_vmap_per_example_dpsgd", train, params + [step], feeds, 3)


# 10 -----------------------------------------------------------------------------------------------
def sweep3_switch_case_custom_grad_sgd():
    """tf.switch_case on a variable-derived index (Case, and its gradient Case), tf.cond on a variable
    (If), a tf.custom_gradient (gradient clipped to ±0.05) and tf.recompute_grad around a pure block; SGD by
    assign_sub; the mode counter advances so three steps take three branches."""
    rng = np.random.default_rng(310)
    W1 = tf.Variable((rng.standard_normal((4, 6)) * 0.5).astype(np.float32), name="W1")
    W2 = tf.Variable((rng.standard_normal((6, 2)) * 0.5).astype(np.float32), name="W2")
    mode = tf.Variable(np.int32(0), name="mode")
    params = [W1, W2]

    @tf.custom_gradient
    def clip_grad(h):
        def grad(dy):
            return tf.clip_by_value(dy, -0.05, 0.05)
        return tf.identity(h), grad

    def block(h):
        return tf.tanh(h) * h + tf.sin(h)

    rblock = tf.recompute_grad(block)

    @tf.function(input_signature=[spec([None, 4], f32, "x"), spec([None, 2], f32, "y")])
    def train(x, y):
        idx = mode.read_value() % 3
        with tf.GradientTape() as tape:
            h = tf.matmul(x, W1)
            h = tf.switch_case(idx, [lambda: tf.nn.relu(h), lambda: tf.tanh(h), lambda: h * tf.sigmoid(h)])
            h = rblock(clip_grad(h))
            out = tf.cond(mode > 0, lambda: tf.matmul(h, W2), lambda: 0.5 * tf.matmul(h, W2))
            loss = tf.reduce_mean(tf.square(out - y))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.2 * g)
        mode.assign_add(1)
        return loss, out, idx

    feeds = {"x": rng.standard_normal((5, 4)).astype(np.float32), "y": rng.standard_normal((5, 2)).astype(np.float32)}
    fn_fixture("sweep3_switch_case_custom_grad_sgd", train, params + [mode], feeds, 3)


# 11 -----------------------------------------------------------------------------------------------
# 12 -----------------------------------------------------------------------------------------------
def sweep3_rng_generator_dropout_sgd():
    """tf.random.Generator.from_seed (Philox state variable, int64[3]) used in the step: dropout mask from
    gen.uniform, noise from gen.normal, gen.uniform_full_int fetched (RngReadAndSkip + stateless V2 ops, or
    the Stateful* ops), Dense layer by hand, SGD by assign_sub. Deterministic given the state variable."""
    rng = np.random.default_rng(311)
    gen = tf.random.Generator.from_seed(1234)
    W = tf.Variable((rng.standard_normal((6, 3)) * 0.4).astype(np.float32), name="W")
    b = tf.Variable(np.zeros(3, np.float32), name="b")
    params = [W, b]

    @tf.function(input_signature=[spec([None, 6], f32, "x"), spec([None], i32, "y")])
    def train(x, y):
        keep = tf.cast(gen.uniform(tf.shape(x)) > 0.3, f32) / 0.7
        noise = gen.normal(tf.shape(x), stddev=0.1)
        ints = gen.uniform_full_int([4], dtype=tf.int64)
        bounded = gen.uniform([4], minval=0, maxval=10, dtype=tf.int32)
        with tf.GradientTape() as tape:
            logits = tf.matmul(x * keep + noise, W) + b
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.3 * g)
        return loss, keep, ints, bounded

    feeds = {"x": rng.standard_normal((4, 6)).astype(np.float32), "y": np.array([0, 1, 2, 1], np.int32)}
    fn_fixture("sweep3_rng_generator_dropout_sgd", train, params + [gen.state], feeds, 3)


def sweep3_rng_stateful_ops_sgd():
    """The stateful generator ops of tf.random.Generator before RngReadAndSkip (graphs exported by older
    TensorFlow, or tf.raw_ops): StatefulUniform for a dropout mask, StatefulStandardNormalV2 for noise,
    StatefulTruncatedNormal (float64), StatefulUniformInt, StatefulUniformFullInt and RngSkip, all on one
    Philox state variable (int64[3]); Dense layer by hand, SGD by assign_sub."""
    rng = np.random.default_rng(313)
    state = tf.Variable(np.array([7, 0, 99], np.int64), name="rng_state")
    W = tf.Variable((rng.standard_normal((6, 3)) * 0.4).astype(np.float32), name="W")
    b = tf.Variable(np.zeros(3, np.float32), name="b")
    params = [W, b]
    raw = tf.raw_ops

    @tf.function(input_signature=[spec([None, 6], f32, "x"), spec([None], i32, "y")])
    def train(x, y):
        shape = tf.shape(x, out_type=tf.int64)
        u = raw.StatefulUniform(resource=state.handle, algorithm=1, shape=shape, dtype=f32)
        keep = tf.cast(u > 0.3, f32) / 0.7
        noise = 0.1 * raw.StatefulStandardNormalV2(resource=state.handle, algorithm=1, shape=shape, dtype=f32)
        raw.RngSkip(resource=state.handle, algorithm=1, delta=3)
        tn = raw.StatefulTruncatedNormal(resource=state.handle, algorithm=3, shape=[5], dtype=tf.float64)
        ints = raw.StatefulUniformInt(resource=state.handle, algorithm=1, shape=[4], minval=tf.constant(-5, tf.int64),
                                      maxval=tf.constant(17, tf.int64))
        full = raw.StatefulUniformFullInt(resource=state.handle, algorithm=1, shape=[3], dtype=tf.int64)
        with tf.GradientTape() as tape:
            logits = tf.matmul(x * keep + noise, W) + b
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.3 * g)
        return loss, keep, tn, ints, full

    feeds = {"x": rng.standard_normal((4, 6)).astype(np.float32), "y": np.array([0, 1, 2, 1], np.int32)}
    fn_fixture("sweep3_rng_stateful_ops_sgd", train, params + [state], feeds, 3)


def sweep3_simclr_infonce_lamb():
    """SimCLR/InfoNCE: a small CNN encoder + projection head on two views, tf.math.l2_normalize, similarity
    matmul / temperature with the diagonal masked, labels from tf.range, sparse softmax cross-entropy; LAMB."""
    keras, L, rng = start(312)
    enc = keras.Sequential([keras.Input((8, 8, 1)), L.Conv2D(4, 3, activation="relu"), L.GlobalAveragePooling2D(),
                            L.Dense(8, activation="relu"), L.Dense(4)])
    opt = keras.optimizers.Lamb(0.01)
    opt.build(enc.trainable_variables)

    @tf.function(input_signature=[spec([None, 8, 8, 1], f32, "v1"), spec([None, 8, 8, 1], f32, "v2")])
    def train(a, b):
        B = tf.shape(a)[0]
        with tf.GradientTape() as tape:
            z = tf.math.l2_normalize(tf.concat([enc(a, training=True), enc(b, training=True)], 0), axis=1)
            sim = tf.matmul(z, z, transpose_b=True) / 0.2
            sim = sim - 1e9 * tf.eye(2 * B)
            labels = tf.concat([tf.range(B, 2 * B), tf.range(0, B)], 0)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, sim))
        grads = tape.gradient(loss, enc.trainable_variables)
        opt.apply_gradients(zip(grads, enc.trainable_variables))
        acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(sim, 1, output_type=tf.int32), labels), f32))
        return loss, acc

    x = rng.standard_normal((4, 8, 8, 1)).astype(np.float32)
    feeds = {"v1": x + 0.1 * rng.standard_normal(x.shape).astype(np.float32),
             "v2": np.flip(x, 2).copy() + 0.1 * rng.standard_normal(x.shape).astype(np.float32)}
    fn_fixture("sweep3_simclr_infonce_lamb", train, enc.variables + opt.variables, feeds, 3)


def sweep3_nms_ties_empty():
    """NMS with equal scores (ties broken by index), a score threshold no box passes (empty selection)
    flowing into gather, crop_and_resize and a reduction of an empty batch; TopK with ties, k = n."""
    rng = np.random.default_rng(322)
    v = tf.Variable(np.float32(1.0), name="v")

    @tf.function(input_signature=[spec([None, 4], f32, "boxes"), spec([None], f32, "scores"),
                                  spec([1, 5, 5, 2], f32, "fm")])
    def infer(boxes, scores, fm):
        sel, s = tf.image.non_max_suppression_with_scores(boxes, scores, 10, 0.5)
        sel_none, s_none = tf.image.non_max_suppression_with_scores(boxes, scores, 10, 0.5, score_threshold=0.99)
        empty_boxes = tf.gather(boxes, sel_none)
        crops = tf.image.crop_and_resize(fm, empty_boxes, tf.zeros_like(sel_none), [2, 2])
        total = tf.reduce_sum(crops) * v + tf.reduce_sum(s_none) + tf.cast(tf.size(sel_none), f32)
        vals, idx = tf.math.top_k(scores, tf.size(scores))
        v.assign_add(total + 1.0)
        return sel, s, sel_none, crops, total, vals, idx

    boxes = np.array([[0, 0, 0.5, 0.5], [0.1, 0.1, 0.6, 0.6], [0.5, 0.5, 1, 1], [0, 0.5, 0.5, 1],
                      [0.52, 0.5, 1, 1], [0.0, 0.0, 0.5, 0.5]], np.float32)
    scores = np.array([0.7, 0.7, 0.5, 0.7, 0.5, 0.7], np.float32)
    feeds = {"boxes": boxes, "scores": scores, "fm": rng.standard_normal((1, 5, 5, 2)).astype(np.float32)}
    fn_fixture("sweep3_nms_ties_empty", infer, [v], feeds, 2)


def sweep3_masked_policy_multinomial():
    """RL with invalid actions masked to -inf: Multinomial and StatelessMultinomial on logits containing -inf,
    log_softmax with -inf entries, entropy with where() to avoid 0*-inf; int64 samples; SGD by assign_sub."""
    rng = np.random.default_rng(323)
    W = tf.Variable((rng.standard_normal((4, 5)) * 0.5).astype(np.float32), name="W")

    @tf.function(input_signature=[spec([None, 4], f32, "obs"), spec([None, 5], tf.bool, "valid")])
    def train(obs, valid):
        with tf.GradientTape() as tape:
            logits = tf.matmul(obs, W)
            masked = tf.where(valid, logits, tf.fill(tf.shape(logits), -np.inf))
            logp = tf.nn.log_softmax(masked)
            p = tf.exp(logp)
            ent = -tf.reduce_sum(tf.where(valid, p * logp, 0.0), 1)
            a = tf.random.stateless_categorical(masked, 3, seed=[1, 2])
            lp = tf.gather(tf.where(valid, logp, 0.0), tf.minimum(a, 4), batch_dims=1)
            loss = -tf.reduce_mean(lp) - 0.1 * tf.reduce_mean(ent)
        g = tape.gradient(loss, W)
        W.assign_sub(0.1 * g)
        b = tf.random.categorical(masked, 5, seed=3)
        return loss, a, b, ent, logp

    valid = rng.uniform(size=(6, 5)) > 0.4
    valid[:, 0] = True
    valid[2] = [False, False, True, False, False]
    feeds = {"obs": rng.standard_normal((6, 4)).astype(np.float32), "valid": valid}
    fn_fixture("sweep3_masked_policy_multinomial", train, [W], feeds, 1)


def sweep3_batched_linalg():
    """Batched linear algebra with gradients: slogdet with negative determinants, batched inverse, Cholesky on
    A A^T + I, triangular_solve upper/adjoint, matrix_solve with adjoint, tf.linalg.det; SGD."""
    rng = np.random.default_rng(324)
    A = tf.Variable(rng.standard_normal((2, 3, 3)).astype(np.float32), name="A")
    B = tf.Variable(rng.standard_normal((2, 3, 2)).astype(np.float32), name="B")

    @tf.function(input_signature=[spec([2, 3, 2], f32, "rhs")])
    def train(rhs):
        with tf.GradientTape() as tape:
            sign, ld = tf.linalg.slogdet(A)
            inv = tf.linalg.inv(A)
            S = tf.matmul(A, A, transpose_b=True) + tf.eye(3, batch_shape=[2])
            Lc = tf.linalg.cholesky(S)
            U = tf.linalg.adjoint(Lc)
            x1 = tf.linalg.triangular_solve(U, rhs, lower=False)
            x2 = tf.linalg.triangular_solve(Lc, rhs, lower=True, adjoint=True)
            x3 = tf.linalg.solve(A, B, adjoint=True)
            loss = (tf.reduce_sum(ld * sign) + 0.01 * tf.reduce_sum(tf.square(inv)) + tf.reduce_sum(x1 * x2)
                    + 0.1 * tf.reduce_sum(tf.square(x3)))
        gA, gB = tape.gradient(loss, [A, B])
        A.assign_sub(0.01 * gA)
        B.assign_sub(0.01 * gB)
        return loss, sign, ld, tf.linalg.det(A), x1, x2, x3

    feeds = {"rhs": rng.standard_normal((2, 3, 2)).astype(np.float32)}
    fn_fixture("sweep3_batched_linalg", train, [A, B], feeds, 2)


def sweep3_vmap_cond_gather():
    """tf.vectorized_map over a per-example function with a tf.cond on the example (pfor converts the cond:
    partitions), a gather by a per-example index, and a reduction; the result trains a variable."""
    rng = np.random.default_rng(325)
    W = tf.Variable((rng.standard_normal((4, 3)) * 0.5).astype(np.float32), name="W")

    @tf.function(input_signature=[spec([None, 4], f32, "x"), spec([None], i32, "k")])
    def train(x, k):
        w = W.read_value()

        def f(args):
            xi, ki = args
            h = tf.linalg.matvec(w, xi, transpose_a=True)
            h = tf.cond(tf.reduce_sum(xi) > 0, lambda: tf.nn.relu(h), lambda: tf.tanh(h) * 2.0)
            return tf.gather(h, ki) + tf.reduce_max(h)

        y = tf.vectorized_map(f, (x, k))
        W.assign_add(0.01 * tf.reduce_sum(y) * tf.ones_like(W))
        return y

    feeds = {"x": rng.standard_normal((7, 4)).astype(np.float32), "k": np.array([0, 1, 2, 0, 1, 2, 2], np.int32)}
    fn_fixture("sweep3_vmap_cond_gather", train, [W], feeds, 2)


def sweep3_recompute_custom_grad_nocond():
    """Case 10 without tf.cond/switch_case (which TF differentiates through Optionals): tf.custom_gradient
    and tf.recompute_grad on a block, SGD by assign_sub."""
    rng = np.random.default_rng(326)
    W1 = tf.Variable((rng.standard_normal((4, 6)) * 0.5).astype(np.float32), name="W1")
    W2 = tf.Variable((rng.standard_normal((6, 2)) * 0.5).astype(np.float32), name="W2")
    params = [W1, W2]

    @tf.custom_gradient
    def clip_grad(h):
        def grad(dy):
            return tf.clip_by_value(dy, -0.05, 0.05)
        return tf.identity(h), grad

    rblock = tf.recompute_grad(lambda h: tf.tanh(h) * h + tf.sin(h))

    @tf.function(input_signature=[spec([None, 4], f32, "x"), spec([None, 2], f32, "y")])
    def train(x, y):
        with tf.GradientTape() as tape:
            h = rblock(clip_grad(tf.nn.relu(tf.matmul(x, W1))))
            out = tf.matmul(h, W2)
            loss = tf.reduce_mean(tf.square(out - y))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.2 * g)
        return loss, out

    feeds = {"x": rng.standard_normal((5, 4)).astype(np.float32), "y": rng.standard_normal((5, 2)).astype(np.float32)}
    fn_fixture("sweep3_recompute_custom_grad_nocond", train, params, feeds, 3)



FIXTURES = [sweep3_wgan_gp_critic_adam, sweep3_gp_cholesky_adam, sweep3_flow_slogdet_inverse_sgd, sweep3_ppo_categorical_rmsprop, sweep3_beam_search_while_inference, sweep3_detection_nms_crop_sgd, sweep3_vmap_per_example_dpsgd, sweep3_switch_case_custom_grad_sgd, sweep3_rng_generator_dropout_sgd, sweep3_rng_stateful_ops_sgd, sweep3_simclr_infonce_lamb, sweep3_nms_ties_empty, sweep3_masked_policy_multinomial, sweep3_batched_linalg, sweep3_vmap_cond_gather, sweep3_recompute_custom_grad_nocond]


if __name__ == "__main__":
    for f in FIXTURES:
        if len(sys.argv) == 1 or f.__name__ in sys.argv[1:]:
            f()
