"""Writes the Keras 3 model fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_keras_models.py [NAME...]

Small versions of the training steps a TensorFlow user exports (issue 20): each is a `tf.function`'s
concrete FuncGraph, written by `make_fixtures_tf2.write` (variables captured as resource
`Placeholder`s, the vars files named after those placeholders, expected values from calling the
concrete function eagerly `steps` times). Sizes are kept small (batch 4-8) so the test suite stays
fast. File layout and manifest: README.md.

- keras_transformer_block: token Embedding + one transformer encoder block (MultiHeadAttention,
  LayerNormalization, Dense GELU feed-forward, residual Adds), GlobalAveragePooling1D, Dense
  classifier; sparse softmax cross-entropy, AdamW. 2 steps, batch 4. AdamW's epsilon is 1e-3, not
  the default 1e-7: with 1e-7 a first-step gradient component of ~1e-6 (cancellation noise, 1e-5 of
  the largest) makes the update lr·g/(|g|+eps) amplify float32 rounding by ~1e4, so TensorFlow's own
  oneDNN-on and oneDNN-off runs differ by 3e-4 relative on that element, beyond the tests' 1e-5
  tolerance (autoclust, both modes, was closer to a float64 reference than TensorFlow).
- keras_resnet_cnn: Conv2D(use_bias=False) + BatchNormalization (training) + ReLU, a residual block
  with an Add, GlobalAveragePooling2D, Dense; SGD with momentum. 2 steps, batch 4.
- keras_lstm_classifier: Embedding + LSTM + Dense; Adam. 2 steps, batch 4.
- keras_wide_deep: two Embedding tables, a wide part (a 1-wide embedding summed over the ids: a
  linear model on the one-hot ids) and a deep part (an 8-wide embedding, flattened, through an MLP),
  concatenated into one logit; binary cross-entropy from logits (`sigmoid_cross_entropy_with_logits`:
  a `GreaterEqual` feeding `Select`), Adagrad. 2 steps, batch 8.
- keras_vae: a dense VAE (encoder to mean and log-variance, reparameterised by
  `tf.random.stateless_normal` seeded by the fed int32 `seed`, sigmoid decoder); loss = reconstruction
  binary cross-entropy + KL divergence; Adam. Fetches the loss and the reconstruction. 2 steps, batch 6.
- keras_mlp_inference: a 32-256-256-10 ReLU MLP, inference only: fetches the logits, updates nothing
  (its expected_vars equal its vars). 2 steps, batch 8.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_tf2 import captured_variables, keras_train_fixture, write  # noqa: E402


def check_captures(name, cf, variables):
    """Every resource placeholder the graph captures must be one of the written variables."""
    resources = {internal.op.name for _, internal in cf.graph.captures if internal.dtype == tf.resource}
    assert len(resources) == len(variables), f"{name}: {len(resources)} captured resources, {len(variables)} variables"


def keras_transformer_block():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(31)
    L = keras.layers
    tokens = keras.Input((8,), dtype="int32")
    h = L.Embedding(40, 16)(tokens)
    att = L.MultiHeadAttention(num_heads=2, key_dim=8)(h, h)
    h = L.LayerNormalization()(L.Add()([h, att]))
    ffn = L.Dense(16)(L.Dense(32, activation="gelu")(h))
    h = L.LayerNormalization()(L.Add()([h, ffn]))
    logits = L.Dense(4)(L.GlobalAveragePooling1D()(h))
    model = keras.Model(tokens, logits)
    rng = np.random.default_rng(31)
    feeds = {"x": rng.integers(0, 40, (4, 8)).astype(np.int32), "labels": np.array([0, 3, 1, 2], np.int32)}
    keras_train_fixture("keras_transformer_block", model, keras.optimizers.AdamW(0.01, epsilon=1e-3),
                        tf.TensorSpec([None, 8], tf.int32, name="x"), feeds, 2)


def keras_resnet_cnn():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(32)
    L = keras.layers

    def conv_bn(x, relu=True):
        x = L.BatchNormalization()(L.Conv2D(8, 3, padding="same", use_bias=False)(x))
        return L.ReLU()(x) if relu else x

    images = keras.Input((8, 8, 3))
    h = conv_bn(images)
    r = conv_bn(conv_bn(h), relu=False)
    h = L.ReLU()(L.Add()([h, r]))
    logits = L.Dense(4)(L.GlobalAveragePooling2D()(h))
    model = keras.Model(images, logits)
    rng = np.random.default_rng(32)
    feeds = {"x": rng.standard_normal((4, 8, 8, 3)).astype(np.float32), "labels": np.array([0, 1, 2, 3], np.int32)}
    keras_train_fixture("keras_resnet_cnn", model, keras.optimizers.SGD(0.05, momentum=0.9),
                        tf.TensorSpec([None, 8, 8, 3], tf.float32, name="x"), feeds, 2)


def keras_lstm_classifier():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(33)
    L = keras.layers
    model = keras.Sequential([keras.Input((6,), dtype="int32"), L.Embedding(30, 8), L.LSTM(12), L.Dense(3)])
    rng = np.random.default_rng(33)
    feeds = {"x": rng.integers(0, 30, (4, 6)).astype(np.int32), "labels": np.array([0, 2, 1, 2], np.int32)}
    keras_train_fixture("keras_lstm_classifier", model, keras.optimizers.Adam(0.01),
                        tf.TensorSpec([None, 6], tf.int32, name="x"), feeds, 2)


def keras_wide_deep():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(34)
    L = keras.layers
    wide_ids = keras.Input((3,), dtype="int32", name="wide_ids")
    deep_ids = keras.Input((2,), dtype="int32", name="deep_ids")
    # Wide: Σ of a 1-wide embedding over the ids = a linear model on their one-hot encoding.
    wide = L.Flatten()(L.Embedding(25, 1)(wide_ids))
    wide = L.Lambda(lambda t: tf.reduce_sum(t, axis=1, keepdims=True))(wide)
    deep = L.Flatten()(L.Embedding(20, 8)(deep_ids))
    deep = L.Dense(8, activation="relu")(L.Dense(16, activation="relu")(deep))
    logit = L.Dense(1)(L.Concatenate()([wide, deep]))
    model = keras.Model([wide_ids, deep_ids], logit)
    opt = keras.optimizers.Adagrad(0.1)
    loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)
    opt.build(model.trainable_variables)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.int32, name="wide_ids"),
                                  tf.TensorSpec([None, 2], tf.int32, name="deep_ids"),
                                  tf.TensorSpec([None, 1], tf.float32, name="labels")])
    def train(wide_ids, deep_ids, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model([wide_ids, deep_ids], training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    cf = train.get_concrete_function()
    variables = captured_variables(cf, model.variables + opt.variables)
    check_captures("keras_wide_deep", cf, variables)
    rng = np.random.default_rng(34)
    feeds = {"wide_ids": rng.integers(0, 25, (8, 3)).astype(np.int32),
             "deep_ids": rng.integers(0, 20, (8, 2)).astype(np.int32),
             "labels": np.array([[0], [1], [1], [0], [1], [0], [0], [1]], np.float32)}
    write("keras_wide_deep", cf, variables, feeds, 2)


def keras_vae():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(35)
    L = keras.layers
    latent = 4
    enc_hidden, enc_mean, enc_logvar = L.Dense(16, activation="relu"), L.Dense(latent), L.Dense(latent)
    dec_hidden, dec_out = L.Dense(16, activation="relu"), L.Dense(12)
    x_in = keras.Input((12,))
    h = enc_hidden(x_in)
    encoder = keras.Model(x_in, [enc_mean(h), enc_logvar(h)])
    decoder = keras.Sequential([keras.Input((latent,)), dec_hidden, dec_out])
    params = encoder.trainable_variables + decoder.trainable_variables
    opt = keras.optimizers.Adam(0.01)
    opt.build(params)

    @tf.function(input_signature=[tf.TensorSpec([None, 12], tf.float32, name="x"),
                                  tf.TensorSpec([2], tf.int32, name="seed")])
    def train(x, seed):
        with tf.GradientTape() as tape:
            mean, logvar = encoder(x, training=True)
            eps = tf.random.stateless_normal(tf.shape(mean), seed=seed)
            z = mean + tf.exp(0.5 * logvar) * eps
            logits = decoder(z, training=True)
            recon = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=x, logits=logits), axis=1)
            kl = -0.5 * tf.reduce_sum(1.0 + logvar - tf.square(mean) - tf.exp(logvar), axis=1)
            loss = tf.reduce_mean(recon + kl)
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        return loss, tf.sigmoid(logits)

    cf = train.get_concrete_function()
    variables = captured_variables(cf, encoder.variables + decoder.variables + opt.variables)
    check_captures("keras_vae", cf, variables)
    rng = np.random.default_rng(35)
    feeds = {"x": rng.uniform(0.0, 1.0, (6, 12)).astype(np.float32), "seed": np.array([7, 42], np.int32)}
    write("keras_vae", cf, variables, feeds, 2)


def keras_mlp_inference():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(36)
    L = keras.layers
    model = keras.Sequential([keras.Input((32,)), L.Dense(256, activation="relu"), L.Dense(256, activation="relu"),
                              L.Dense(10)])

    @tf.function(input_signature=[tf.TensorSpec([None, 32], tf.float32, name="x")])
    def infer(x):
        return model(x, training=False)

    cf = infer.get_concrete_function()
    variables = captured_variables(cf, model.variables)
    check_captures("keras_mlp_inference", cf, variables)
    rng = np.random.default_rng(36)
    write("keras_mlp_inference", cf, variables, {"x": rng.standard_normal((8, 32)).astype(np.float32)}, 2)


FIXTURES = [keras_transformer_block, keras_resnet_cnn, keras_lstm_classifier, keras_wide_deep, keras_vae,
            keras_mlp_inference]


def main():
    """Writes every fixture, or only those named on the command line."""
    print("TensorFlow", tf.__version__)
    for f in FIXTURES:
        if len(sys.argv) == 1 or f.__name__ in sys.argv[1:]:
            f()


if __name__ == "__main__":
    main()
