"""Writes the Keras 3 sweep fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_keras_sweep.py [NAME...]

Issue 20's "Keras steps you have not seen": small training and inference steps built from the layers,
losses, metrics and optimizers users reach for that the other generators do not use, each exported as
a user would (`tf.function(step, input_signature).get_concrete_function().graph.as_graph_def()`) and
written by `make_fixtures_tf2.write` (variables captured as resource `Placeholder`s, expected values
from calling the concrete function eagerly `steps` times). Sizes are fixture sizes (batch 4-6) so the
test suite stays fast. File layout and manifest: README.md; the cases are listed there.
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures_tf2  # noqa: E402
from make_fixtures_tf2 import captured_variables, write  # noqa: E402


def seed_states(model):
    """The seed-generator state variables of `model`'s layers (Dropout, ...), which model.variables may omit."""
    import keras

    out = []
    for layer in model._flatten_layers(include_self=False) if hasattr(model, "_flatten_layers") else model.layers:
        for attr in vars(layer).values():
            if isinstance(attr, keras.random.SeedGenerator):
                out.append(attr.state)
    return out


def check_captures(name, cf, variables):
    """Every resource placeholder the graph captures must be one of the written variables."""
    resources = {internal.op.name for _, internal in cf.graph.captures if internal.dtype == tf.resource}
    assert len(resources) == len(variables), f"{name}: {len(resources)} captured resources, {len(variables)} variables"


def train_fixture(name, model, opt, loss_fn, specs, feeds, steps=2, metrics=(), clip_global=None):
    """A training step: `loss_fn(labels, model(inputs, training=True))` plus the model's losses,
    `tf.GradientTape` gradients (optionally clipped by global norm), `opt.apply_gradients`, then each
    metric's `update_state(labels, predictions)`; returns the loss and every metric's result. The last
    spec is the labels'."""
    opt.build(model.trainable_variables)

    @tf.function(input_signature=specs)
    def train(*args):
        *inputs, labels = args
        x = inputs[0] if len(inputs) == 1 else list(inputs)
        with tf.GradientTape() as tape:
            pred = model(x, training=True)
            loss = loss_fn(labels, pred)
            if model.losses:
                loss = loss + tf.add_n(model.losses)
        grads = tape.gradient(loss, model.trainable_variables)
        if clip_global is not None:
            grads, _ = tf.clip_by_global_norm(grads, clip_global)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        outs = [loss]
        for m in metrics:
            m.update_state(labels, pred)
            outs.append(m.result())
        return outs if len(outs) > 1 else loss

    cf = train.get_concrete_function()
    candidates = model.variables + opt.variables + seed_states(model)
    for m in metrics:
        candidates += m.variables
    variables = captured_variables(cf, candidates)
    check_captures(name, cf, variables)
    write(name, cf, variables, feeds, steps)


def set_half_tolerance(name, tolerance):
    """Records in `name`'s manifest how far a half-precision fixture's floats may differ from
    TensorFlow's, as a fraction of each tensor's largest magnitude (cli/tests/tf_fixtures.rs).

    Why not bit-exact: autoclust computes a float16/bfloat16 op in float32 and rounds once (and
    AddN and Sigmoid with TensorFlow's intermediate roundings), which gives TensorFlow's bits for
    elementwise ops, Conv2D, float16 MatMul and BiasAddGrad. TensorFlow's CPU kernels without oneDNN
    accumulate some sums in half precision, in Eigen's packet order: float16 Sum/Mean, Softmax's
    sum, Conv2DBackpropFilter, and bfloat16 MatMul/BiasAddGrad (measured op by op on TF 2.21); those
    differ by an ulp or a few, which training steps carry into the gradients. With oneDNN (TF's
    default on x86) TensorFlow accumulates in float32 as autoclust does."""
    path = os.path.join(make_fixtures_tf2.OUT, name + ".json")
    with open(path) as fh:
        manifest = json.load(fh)
    manifest["half_tolerance"] = tolerance
    with open(path, "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")


def start(seed):
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(seed)
    return keras, keras.layers, np.random.default_rng(seed)


def sweep_sepconv_bn_dropout_lion():
    """SeparableConv2D (no bias: Lion steps by the sign of the gradient, and a bias before
    BatchNormalization has a zero gradient in exact arithmetic, so its step would be the sign of rounding
    noise) + BatchNormalization (training) + DepthwiseConv2D + Dropout + GAP2D + Dense; Lion."""
    keras, L, rng = start(101)
    m = keras.Sequential([keras.Input((8, 8, 3)), L.SeparableConv2D(6, 3, padding="same", use_bias=False), L.BatchNormalization(),
                          L.ReLU(), L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2),
                          L.Dropout(0.3), L.GlobalAveragePooling2D(), L.Dense(3)])
    feeds = {"x": rng.standard_normal((4, 8, 8, 3)).astype(np.float32), "labels": np.array([0, 1, 2, 1], np.int32)}
    train_fixture("sweep_sepconv_bn_dropout_lion", m, keras.optimizers.Lion(0.003),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [tf.TensorSpec([None, 8, 8, 3], tf.float32, name="x"), tf.TensorSpec([None], tf.int32, name="labels")],
                  feeds)


def sweep_mha_mask_adadelta():
    """Embedding(mask_zero) + MultiHeadAttention with an explicit padding mask + LayerNorm + masked GAP1D;
    Adadelta."""
    keras, L, rng = start(102)
    tokens = keras.Input((6,), dtype="int32")
    h = L.Embedding(20, 8, mask_zero=True)(tokens)
    mask = L.Lambda(lambda t: tf.cast(t[:, tf.newaxis, :] > 0, tf.bool))(tokens)
    att = L.MultiHeadAttention(num_heads=2, key_dim=4)(h, h, attention_mask=mask)
    h = L.LayerNormalization()(L.Add()([h, att]))
    logits = L.Dense(3)(L.GlobalAveragePooling1D()(h))
    m = keras.Model(tokens, logits)
    x = rng.integers(1, 20, (4, 6)).astype(np.int32)
    x[0, 4:] = 0
    x[2, 2:] = 0
    feeds = {"x": x, "labels": np.array([0, 1, 2, 1], np.int32)}
    train_fixture("sweep_mha_mask_adadelta", m, keras.optimizers.Adadelta(1.0),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [tf.TensorSpec([None, 6], tf.int32, name="x"), tf.TensorSpec([None], tf.int32, name="labels")],
                  feeds)


def sweep_masking_lstm_ftrl():
    """Masking + LSTM over zero-padded float sequences (the mask selects inside the loop); Ftrl."""
    keras, L, rng = start(103)
    m = keras.Sequential([keras.Input((5, 3)), L.Masking(0.0), L.LSTM(6), L.Dense(3)])
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    x[1, 3:] = 0.0
    x[3, 1:] = 0.0
    feeds = {"x": x, "labels": np.array([0, 1, 2, 1], np.int32)}
    train_fixture("sweep_masking_lstm_ftrl", m, keras.optimizers.Ftrl(0.1),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [tf.TensorSpec([None, 5, 3], tf.float32, name="x"), tf.TensorSpec([None], tf.int32, name="labels")],
                  feeds)


def sweep_bigru_huber_adamw():
    """Bidirectional GRU (return_sequences) + GRU regression; Huber loss, AdamW with weight decay, gradients
    clipped by global norm."""
    keras, L, rng = start(104)
    m = keras.Sequential([keras.Input((5, 2)), L.Bidirectional(L.GRU(4, return_sequences=True)), L.GRU(4),
                          L.Dense(1)])
    feeds = {"x": rng.standard_normal((4, 5, 2)).astype(np.float32),
             "labels": rng.standard_normal((4, 1)).astype(np.float32)}
    train_fixture("sweep_bigru_huber_adamw", m, keras.optimizers.AdamW(0.01, weight_decay=0.05),
                  keras.losses.Huber(0.5),
                  [tf.TensorSpec([None, 5, 2], tf.float32, name="x"), tf.TensorSpec([None, 1], tf.float32,
                                                                                     name="labels")],
                  feeds, clip_global=0.5)


def sweep_conv1d_causal_bce_metrics():
    """Conv1D (causal, dilated) + Conv1D + GlobalMaxPooling1D + Dense sigmoid; BinaryCrossentropy on
    probabilities, BinaryAccuracy and AUC-free metrics updated in the step; SGD with Nesterov and clipnorm."""
    keras, L, rng = start(105)
    m = keras.Sequential([keras.Input((12, 2)), L.Conv1D(4, 3, padding="causal", dilation_rate=2, activation="relu"),
                          L.Conv1D(4, 2, strides=2, activation="tanh"), L.GlobalMaxPooling1D(),
                          L.Dense(1, activation="sigmoid")])
    feeds = {"x": rng.standard_normal((4, 12, 2)).astype(np.float32),
             "labels": np.array([[1], [0], [1], [0]], np.float32)}
    train_fixture("sweep_conv1d_causal_bce_metrics", m,
                  keras.optimizers.SGD(0.05, momentum=0.8, nesterov=True, clipnorm=1.0),
                  keras.losses.BinaryCrossentropy(),
                  [tf.TensorSpec([None, 12, 2], tf.float32, name="x"), tf.TensorSpec([None, 1], tf.float32,
                                                                                      name="labels")],
                  feeds, metrics=[keras.metrics.BinaryAccuracy(), keras.metrics.Mean()])


def sweep_mlp_mse_rmsprop_centered():
    """MLP regression with MSE, MeanAbsoluteError and RootMeanSquaredError metrics; centered RMSprop with
    momentum."""
    keras, L, rng = start(106)
    m = keras.Sequential([keras.Input((6,)), L.Dense(8, activation="sigmoid"), L.Dense(8, activation="elu"),
                          L.Dense(2)])
    feeds = {"x": rng.standard_normal((5, 6)).astype(np.float32),
             "labels": rng.standard_normal((5, 2)).astype(np.float32)}
    train_fixture("sweep_mlp_mse_rmsprop_centered", m, keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
                  keras.losses.MeanSquaredError(),
                  [tf.TensorSpec([None, 6], tf.float32, name="x"), tf.TensorSpec([None, 2], tf.float32, name="labels")],
                  feeds, metrics=[keras.metrics.MeanAbsoluteError(), keras.metrics.RootMeanSquaredError()])


def sweep_embedding_mask_pool_adam_amsgrad():
    """Embedding(mask_zero) + masked GlobalAveragePooling1D + Dense; CategoricalCrossentropy with label
    smoothing on one-hot labels, SparseCategoricalAccuracy-like metric; Adam with amsgrad."""
    keras, L, rng = start(107)
    m = keras.Sequential([keras.Input((7,), dtype="int32"), L.Embedding(25, 6, mask_zero=True),
                          L.GlobalAveragePooling1D(), L.Dense(8, activation="relu"), L.Dense(4)])
    x = rng.integers(1, 25, (5, 7)).astype(np.int32)
    x[0, 3:] = 0
    x[4, 5:] = 0
    labels = np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 1]]
    feeds = {"x": x, "labels": labels}
    train_fixture("sweep_embedding_mask_pool_adam_amsgrad", m, keras.optimizers.Adam(0.01, amsgrad=True),
                  keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
                  [tf.TensorSpec([None, 7], tf.int32, name="x"), tf.TensorSpec([None, 4], tf.float32, name="labels")],
                  feeds, metrics=[keras.metrics.CategoricalAccuracy()])


def sweep_autoencoder_conv_transpose_nadam():
    """Conv2D + MaxPooling2D + Conv2DTranspose + UpSampling2D + ZeroPadding2D/Cropping2D autoencoder,
    MeanAbsoluteError loss; Nadam."""
    keras, L, rng = start(108)
    m = keras.Sequential([keras.Input((8, 8, 1)), L.Conv2D(4, 3, padding="same", activation="relu"),
                          L.MaxPooling2D(2), L.Conv2DTranspose(4, 3, strides=2, padding="same", activation="relu"),
                          L.ZeroPadding2D(1), L.Cropping2D(1), L.UpSampling2D(1), L.Conv2D(1, 3, padding="same")])
    x = rng.standard_normal((4, 8, 8, 1)).astype(np.float32)
    feeds = {"x": x, "labels": x}
    train_fixture("sweep_autoencoder_conv_transpose_nadam", m, keras.optimizers.Nadam(0.01),
                  keras.losses.MeanAbsoluteError(),
                  [tf.TensorSpec([None, 8, 8, 1], tf.float32, name="x"),
                   tf.TensorSpec([None, 8, 8, 1], tf.float32, name="labels")],
                  feeds)


def sweep_simplernn_timedistributed_adamax():
    """SimpleRNN (return_sequences) + TimeDistributed(Dense) + Flatten + Dense, KLDivergence on softmax
    outputs; Adamax."""
    keras, L, rng = start(109)
    m = keras.Sequential([keras.Input((4, 3)), L.SimpleRNN(5, return_sequences=True),
                          L.TimeDistributed(L.Dense(3, activation="relu")), L.Flatten(),
                          L.Dense(3, activation="softmax")])
    labels = rng.uniform(0.1, 1.0, (4, 3)).astype(np.float32)
    labels /= labels.sum(axis=1, keepdims=True)
    feeds = {"x": rng.standard_normal((4, 4, 3)).astype(np.float32), "labels": labels}
    train_fixture("sweep_simplernn_timedistributed_adamax", m, keras.optimizers.Adamax(0.01),
                  keras.losses.KLDivergence(),
                  [tf.TensorSpec([None, 4, 3], tf.float32, name="x"), tf.TensorSpec([None, 3], tf.float32,
                                                                                     name="labels")],
                  feeds)


def sweep_inference_bn_dropout():
    """Inference (`training=False`): Conv2D + BatchNormalization (moving statistics) + Dropout (identity) +
    LayerNormalization + Dense softmax, and the argmax class."""
    keras, L, rng = start(110)
    m = keras.Sequential([keras.Input((6, 6, 2)), L.Conv2D(4, 3, activation="relu"), L.BatchNormalization(),
                          L.Dropout(0.5), L.Flatten(), L.LayerNormalization(), L.Dense(5, activation="softmax")])
    # Non-trivial moving statistics, as after training.
    for layer in m.layers:
        if isinstance(layer, L.BatchNormalization):
            layer.moving_mean.assign(rng.standard_normal(4).astype(np.float32) * 0.1)
            layer.moving_variance.assign(rng.uniform(0.5, 2.0, 4).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 6, 6, 2], tf.float32, name="x")])
    def infer(x):
        probs = m(x, training=False)
        return probs, tf.argmax(probs, axis=-1, output_type=tf.int32)

    cf = infer.get_concrete_function()
    variables = captured_variables(cf, m.variables + seed_states(m))
    check_captures("sweep_inference_bn_dropout", cf, variables)
    write("sweep_inference_bn_dropout", cf, variables, {"x": rng.standard_normal((4, 6, 6, 2)).astype(np.float32)}, 2)


def sweep_gru_stacked_sgd_clipvalue():
    """GRU(reset_after=False) + LSTM(go_backwards) + Dense; SparseCategoricalCrossentropy and
    SparseCategoricalAccuracy; SGD with clipvalue and an ExponentialDecay schedule."""
    keras, L, rng = start(111)
    m = keras.Sequential([keras.Input((5, 3)), L.GRU(4, reset_after=False, return_sequences=True),
                          L.LSTM(4, go_backwards=True), L.Dense(3)])
    sched = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    feeds = {"x": rng.standard_normal((4, 5, 3)).astype(np.float32), "labels": np.array([2, 1, 0, 1], np.int32)}
    train_fixture("sweep_gru_stacked_sgd_clipvalue", m, keras.optimizers.SGD(sched, clipvalue=0.1),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [tf.TensorSpec([None, 5, 3], tf.float32, name="x"), tf.TensorSpec([None], tf.int32, name="labels")],
                  feeds, metrics=[keras.metrics.SparseCategoricalAccuracy()])


def sweep_resize_topk_lamb():
    """UpSampling2D(bilinear) + Conv2D + Resizing (bilinear, half-pixel centers: `ResizeBilinear` and its
    gradient) + GlobalAveragePooling2D + Dense; SparseTopKCategoricalAccuracy (`InTopKV2`); Lamb."""
    keras, L, rng = start(112)
    m = keras.Sequential([keras.Input((4, 4, 2)), L.UpSampling2D(2, interpolation="bilinear"),
                          L.Conv2D(3, 3, activation="relu"), L.Resizing(5, 7), L.GlobalAveragePooling2D(), L.Dense(4)])
    feeds = {"x": rng.standard_normal((4, 4, 4, 2)).astype(np.float32), "labels": np.array([0, 1, 2, 3], np.int32)}
    train_fixture("sweep_resize_topk_lamb", m, keras.optimizers.Lamb(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [tf.TensorSpec([None, 4, 4, 2], tf.float32, name="x"), tf.TensorSpec([None], tf.int32, name="labels")],
                  feeds, metrics=[keras.metrics.SparseTopKCategoricalAccuracy(k=2)])


def sweep_mixed_float16_conv_bn_lossscale():
    """Keras' `mixed_float16` policy: Conv2D (no bias: before BatchNormalization its gradient is zero
    in exact arithmetic, so its value would be float16 rounding noise) + BatchNormalization (FusedBatchNormV3 with T = half,
    U = float) + ReLU + GAP2D + Dense in float16, a float32 softmax head, float32 variables and
    optimizer; LossScaleOptimizer around SGD with momentum (dynamic loss scale: the gradients'
    finiteness decides, in an `If`, whether to step and how the scale moves)."""
    keras, L, rng = start(113)
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        m = keras.Sequential([keras.Input((6, 6, 2)), L.Conv2D(4, 3, padding="same", use_bias=False), L.BatchNormalization(), L.ReLU(),
                              L.GlobalAveragePooling2D(), L.Dense(3), L.Activation("softmax", dtype="float32")])
        opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.05, momentum=0.9))
        loss_fn = keras.losses.SparseCategoricalCrossentropy()
        opt.build(m.trainable_variables)

        @tf.function(input_signature=[tf.TensorSpec([None, 6, 6, 2], tf.float32, name="x"),
                                      tf.TensorSpec([None], tf.int32, name="labels")])
        def train(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, m(x, training=True))
                scaled = opt.scale_loss(loss)
            grads = tape.gradient(scaled, m.trainable_variables)
            opt.apply_gradients(zip(grads, m.trainable_variables))
            return loss

        cf = train.get_concrete_function()
        variables = captured_variables(cf, m.variables + opt.variables)
        check_captures("sweep_mixed_float16_conv_bn_lossscale", cf, variables)
        feeds = {"x": rng.standard_normal((4, 6, 6, 2)).astype(np.float32), "labels": np.array([0, 1, 2, 1], np.int32)}
        write("sweep_mixed_float16_conv_bn_lossscale", cf, variables, feeds, 3)
        set_half_tolerance("sweep_mixed_float16_conv_bn_lossscale", 0.002)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def sweep_mixed_bfloat16_mlp_layernorm_sgd():
    """Keras' `mixed_bfloat16` policy (the CPU/TPU one): Dense + GELU + LayerNormalization + Dense in
    bfloat16 with a float32 logits cast; SGD with momentum on float32 variables (not Adam: Adam's
    m / sqrt(v) turns a gradient component that is bfloat16 rounding noise into a full step of
    either sign); the step also returns the bfloat16 hidden activations (fetched as bfloat16)."""
    keras, L, rng = start(114)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        inp = keras.Input((5,))
        h = L.Dense(8, activation="gelu")(inp)
        h = L.LayerNormalization()(h)
        logits = L.Activation("linear", dtype="float32")(L.Dense(3)(h))
        m = keras.Model(inp, [logits, h])
        opt = keras.optimizers.SGD(0.1, momentum=0.9)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        opt.build(m.trainable_variables)

        @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.float32, name="x"),
                                      tf.TensorSpec([None], tf.int32, name="labels")])
        def train(x, y):
            with tf.GradientTape() as tape:
                logits, hidden = m(x, training=True)
                loss = loss_fn(y, logits)
            grads = tape.gradient(loss, m.trainable_variables)
            opt.apply_gradients(zip(grads, m.trainable_variables))
            return loss, hidden

        cf = train.get_concrete_function()
        variables = captured_variables(cf, m.variables + opt.variables)
        check_captures("sweep_mixed_bfloat16_mlp_layernorm_sgd", cf, variables)
        feeds = {"x": rng.standard_normal((4, 5)).astype(np.float32), "labels": np.array([2, 0, 1, 1], np.int32)}
        write("sweep_mixed_bfloat16_mlp_layernorm_sgd", cf, variables, feeds, 2)
        set_half_tolerance("sweep_mixed_bfloat16_mlp_layernorm_sgd", 0.03)
    finally:
        keras.mixed_precision.set_global_policy("float32")


FIXTURES = [sweep_sepconv_bn_dropout_lion, sweep_mha_mask_adadelta, sweep_masking_lstm_ftrl, sweep_bigru_huber_adamw,
            sweep_conv1d_causal_bce_metrics, sweep_mlp_mse_rmsprop_centered, sweep_embedding_mask_pool_adam_amsgrad,
            sweep_autoencoder_conv_transpose_nadam, sweep_simplernn_timedistributed_adamax, sweep_inference_bn_dropout,
            sweep_gru_stacked_sgd_clipvalue, sweep_resize_topk_lamb, sweep_mixed_float16_conv_bn_lossscale,
            sweep_mixed_bfloat16_mlp_layernorm_sgd]


def main():
    """Writes every fixture, or only those named on the command line."""
    print("TensorFlow", tf.__version__)
    for f in FIXTURES:
        if len(sys.argv) == 1 or f.__name__ in sys.argv[1:]:
            f()


if __name__ == "__main__":
    main()
