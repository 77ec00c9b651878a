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

Five more steps, written after the six above made autoclust cluster them, to check the result on
models it had not been tuned on (each added one family of ops the JIT then learnt):

- keras_gru_rmsprop: Embedding + GRU + Dense; RMSprop. 2 steps, batch 4.
- keras_conv1d_nadam: Conv1D (ReLU) + MaxPooling1D + Conv1D (ELU, SAME) + GlobalMaxPooling1D + Dense;
  Nadam. 2 steps, batch 4.
- keras_cnn_pool_adamax: Conv2D (no bias: a bias before BatchNormalization has a zero gradient in
  exact arithmetic, which Adamax turns into a noise-driven step) + BatchNormalization + swish,
  MaxPooling2D, strided Conv2D (ReLU), AveragePooling2D, Flatten, Dense (softplus), Dense; Adamax.
- keras_bilstm_nesterov: Embedding + Bidirectional(LSTM, return_sequences) + GlobalAveragePooling1D +
  Dense; SGD with Nesterov momentum. 2 steps, batch 4.
- keras_mlp_activations: Dense layers with SELU, LayerNormalization, GELU, tanh (with an L2
  regularizer), leaky ReLU and ReLU6; Adagrad. 2 steps, batch 6.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures_tf2  # noqa: E402
from make_fixtures_tf2 import captured_variables, keras_train_fixture, write  # noqa: E402

# "small": the test fixtures of this directory. "bench": the sizes of issue 18's table, written by
# benches/keras/make_benches.py into benches/keras/out (never committed, never run by CI).
SIZE = "small"
SIZES = {
    "keras_transformer_block": {"small": dict(batch=4, seq=8, vocab=40, d=16, heads=2, key_dim=8, ffn=32, classes=4),
                                "bench": dict(batch=16, seq=32, vocab=1000, d=64, heads=4, key_dim=16, ffn=256,
                                              classes=10)},
    "keras_resnet_cnn": {"small": dict(batch=4, hw=8, filters=8, classes=4),
                         "bench": dict(batch=32, hw=32, filters=32, classes=10)},
    "keras_lstm_classifier": {"small": dict(batch=4, seq=6, vocab=30, emb=8, units=12, classes=3),
                              "bench": dict(batch=32, seq=20, vocab=1000, emb=32, units=64, classes=5)},
    "keras_wide_deep": {"small": dict(batch=8, wide_vocab=25, deep_vocab=20, emb=8, h1=16, h2=8),
                        "bench": dict(batch=256, wide_vocab=1000, deep_vocab=1000, emb=16, h1=64, h2=32)},
    "keras_vae": {"small": dict(batch=6, features=12, hidden=16, latent=4),
                  "bench": dict(batch=64, features=784, hidden=256, latent=32)},
    "keras_mlp_inference": {"small": dict(batch=8, features=32, width=256, classes=10),
                            "bench": dict(batch=128, features=1024, width=1024, classes=10)},
}


def size(name):
    """The dimensions of fixture `name` at the current SIZE."""
    return SIZES[name][SIZE]


def check_captures(name, cf, variables):
    """Every resource placeholder the graph captures must be one of the written variables."""
    resources = {internal.op.name for _, internal in cf.graph.captures if internal.dtype == tf.resource}
    assert len(resources) == len(variables), f"{name}: {len(resources)} captured resources, {len(variables)} variables"


def keras_transformer_block():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(31)
    L = keras.layers
    z = size("keras_transformer_block")
    tokens = keras.Input((z["seq"],), dtype="int32")
    h = L.Embedding(z["vocab"], z["d"])(tokens)
    att = L.MultiHeadAttention(num_heads=z["heads"], key_dim=z["key_dim"])(h, h)
    h = L.LayerNormalization()(L.Add()([h, att]))
    ffn = L.Dense(z["d"])(L.Dense(z["ffn"], activation="gelu")(h))
    h = L.LayerNormalization()(L.Add()([h, ffn]))
    logits = L.Dense(z["classes"])(L.GlobalAveragePooling1D()(h))
    model = keras.Model(tokens, logits)
    rng = np.random.default_rng(31)
    x = rng.integers(0, z["vocab"], (z["batch"], z["seq"])).astype(np.int32)
    labels = np.array([0, 3, 1, 2], np.int32) if SIZE == "small" else rng.integers(0, z["classes"], z["batch"])
    feeds = {"x": x, "labels": labels.astype(np.int32)}
    keras_train_fixture("keras_transformer_block", model, keras.optimizers.AdamW(0.01, epsilon=1e-3),
                        tf.TensorSpec([None, z["seq"]], tf.int32, name="x"), feeds, 2)


def keras_resnet_cnn():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(32)
    L = keras.layers

    z = size("keras_resnet_cnn")

    def conv_bn(x, relu=True):
        x = L.BatchNormalization()(L.Conv2D(z["filters"], 3, padding="same", use_bias=False)(x))
        return L.ReLU()(x) if relu else x

    hw = z["hw"]
    images = keras.Input((hw, hw, 3))
    h = conv_bn(images)
    r = conv_bn(conv_bn(h), relu=False)
    h = L.ReLU()(L.Add()([h, r]))
    logits = L.Dense(z["classes"])(L.GlobalAveragePooling2D()(h))
    model = keras.Model(images, logits)
    rng = np.random.default_rng(32)
    x = rng.standard_normal((z["batch"], hw, hw, 3)).astype(np.float32)
    labels = np.array([0, 1, 2, 3], np.int32) if SIZE == "small" else rng.integers(0, z["classes"], z["batch"])
    feeds = {"x": x, "labels": labels.astype(np.int32)}
    keras_train_fixture("keras_resnet_cnn", model, keras.optimizers.SGD(0.05, momentum=0.9),
                        tf.TensorSpec([None, hw, hw, 3], tf.float32, name="x"), feeds, 2)


def keras_lstm_classifier():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(33)
    L = keras.layers
    z = size("keras_lstm_classifier")
    model = keras.Sequential([keras.Input((z["seq"],), dtype="int32"), L.Embedding(z["vocab"], z["emb"]),
                              L.LSTM(z["units"]), L.Dense(z["classes"])])
    rng = np.random.default_rng(33)
    x = rng.integers(0, z["vocab"], (z["batch"], z["seq"])).astype(np.int32)
    labels = np.array([0, 2, 1, 2], np.int32) if SIZE == "small" else rng.integers(0, z["classes"], z["batch"])
    feeds = {"x": x, "labels": labels.astype(np.int32)}
    keras_train_fixture("keras_lstm_classifier", model, keras.optimizers.Adam(0.01),
                        tf.TensorSpec([None, z["seq"]], tf.int32, name="x"), feeds, 2)


def keras_wide_deep():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(34)
    L = keras.layers
    wide_ids = keras.Input((3,), dtype="int32", name="wide_ids")
    deep_ids = keras.Input((2,), dtype="int32", name="deep_ids")
    # Wide: Σ of a 1-wide embedding over the ids = a linear model on their one-hot encoding.
    z = size("keras_wide_deep")
    wide = L.Flatten()(L.Embedding(z["wide_vocab"], 1)(wide_ids))
    wide = L.Lambda(lambda t: tf.reduce_sum(t, axis=1, keepdims=True))(wide)
    deep = L.Flatten()(L.Embedding(z["deep_vocab"], z["emb"])(deep_ids))
    deep = L.Dense(z["h2"], activation="relu")(L.Dense(z["h1"], activation="relu")(deep))
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
    b = z["batch"]
    feeds = {"wide_ids": rng.integers(0, z["wide_vocab"], (b, 3)).astype(np.int32),
             "deep_ids": rng.integers(0, z["deep_vocab"], (b, 2)).astype(np.int32),
             "labels": (np.array([[0], [1], [1], [0], [1], [0], [0], [1]]) if SIZE == "small"
                        else rng.integers(0, 2, (b, 1))).astype(np.float32)}
    write("keras_wide_deep", cf, variables, feeds, 2)


def keras_vae():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(35)
    L = keras.layers
    z = size("keras_vae")
    latent, features = z["latent"], z["features"]
    enc_hidden, enc_mean, enc_logvar = L.Dense(z["hidden"], activation="relu"), L.Dense(latent), L.Dense(latent)
    dec_hidden, dec_out = L.Dense(z["hidden"], activation="relu"), L.Dense(features)
    x_in = keras.Input((features,))
    h = enc_hidden(x_in)
    encoder = keras.Model(x_in, [enc_mean(h), enc_logvar(h)])
    decoder = keras.Sequential([keras.Input((latent,)), dec_hidden, dec_out])
    params = encoder.trainable_variables + decoder.trainable_variables
    opt = keras.optimizers.Adam(0.01)
    opt.build(params)

    @tf.function(input_signature=[tf.TensorSpec([None, features], tf.float32, name="x"),
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
    feeds = {"x": rng.uniform(0.0, 1.0, (z["batch"], features)).astype(np.float32), "seed": np.array([7, 42], np.int32)}
    write("keras_vae", cf, variables, feeds, 2)


def keras_mlp_inference():
    import keras

    keras.backend.clear_session()  # layer names (hence placeholder names) independent of order
    keras.utils.set_random_seed(36)
    L = keras.layers
    z = size("keras_mlp_inference")
    model = keras.Sequential([keras.Input((z["features"],)), L.Dense(z["width"], activation="relu"),
                              L.Dense(z["width"], activation="relu"), L.Dense(z["classes"])])

    @tf.function(input_signature=[tf.TensorSpec([None, z["features"]], tf.float32, name="x")])
    def infer(x):
        return model(x, training=False)

    cf = infer.get_concrete_function()
    variables = captured_variables(cf, model.variables)
    check_captures("keras_mlp_inference", cf, variables)
    rng = np.random.default_rng(36)
    x = rng.standard_normal((z["batch"], z["features"])).astype(np.float32)
    write("keras_mlp_inference", cf, variables, {"x": x}, 2)


def keras_gru_rmsprop():
    import keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(1)
    L = keras.layers
    m = keras.Sequential([keras.Input((7,), dtype="int32"), L.Embedding(50, 8), L.GRU(10), L.Dense(3)])
    rng = np.random.default_rng(1)
    feeds = {"x": rng.integers(0, 50, (4, 7)).astype(np.int32), "labels": np.array([0, 1, 2, 1], np.int32)}
    keras_train_fixture("keras_gru_rmsprop", m, keras.optimizers.RMSprop(0.01),
                        tf.TensorSpec([None, 7], tf.int32, name="x"), feeds, 2)


def keras_conv1d_nadam():
    import keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(2)
    L = keras.layers
    m = keras.Sequential([keras.Input((16, 3)), L.Conv1D(8, 3, activation="relu"), L.MaxPooling1D(2),
                          L.Conv1D(8, 3, padding="same", activation="elu"), L.GlobalMaxPooling1D(), L.Dense(4)])
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((4, 16, 3)).astype(np.float32), "labels": np.array([0, 1, 2, 3], np.int32)}
    keras_train_fixture("keras_conv1d_nadam", m, keras.optimizers.Nadam(0.01),
                        tf.TensorSpec([None, 16, 3], tf.float32, name="x"), feeds, 2)


def keras_cnn_pool_adamax():
    import keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(3)
    L = keras.layers
    m = keras.Sequential([keras.Input((8, 8, 2)), L.Conv2D(4, 3, padding="same", use_bias=False),
                          L.BatchNormalization(), L.Activation("swish"), L.MaxPooling2D(2),
                          L.Conv2D(6, 3, strides=2, padding="same", activation="relu"), L.AveragePooling2D(2),
                          L.Flatten(), L.Dense(5, activation="softplus"), L.Dense(3)])
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((4, 8, 8, 2)).astype(np.float32), "labels": np.array([0, 1, 2, 1], np.int32)}
    keras_train_fixture("keras_cnn_pool_adamax", m, keras.optimizers.Adamax(0.01),
                        tf.TensorSpec([None, 8, 8, 2], tf.float32, name="x"), feeds, 2)


def keras_bilstm_nesterov():
    import keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(4)
    L = keras.layers
    m = keras.Sequential([keras.Input((6,), dtype="int32"), L.Embedding(30, 8),
                          L.Bidirectional(L.LSTM(6, return_sequences=True)), L.GlobalAveragePooling1D(), L.Dense(3)])
    rng = np.random.default_rng(4)
    feeds = {"x": rng.integers(0, 30, (4, 6)).astype(np.int32), "labels": np.array([0, 1, 2, 1], np.int32)}
    keras_train_fixture("keras_bilstm_nesterov", m, keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
                        tf.TensorSpec([None, 6], tf.int32, name="x"), feeds, 2)


def keras_mlp_activations():
    import keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(5)
    L = keras.layers
    inp = keras.Input((10,))
    h = L.Dense(16, activation="selu")(inp)
    h = L.LayerNormalization()(h)
    h = L.Dense(16, activation="gelu")(h)
    h = L.Dense(16, activation="tanh", kernel_regularizer=keras.regularizers.l2(1e-3))(h)
    h = L.Dense(16, activation="leaky_relu")(h)
    h = L.Dense(16, activation="relu6")(h)
    m = keras.Model(inp, L.Dense(4)(h))
    rng = np.random.default_rng(5)
    feeds = {"x": rng.standard_normal((6, 10)).astype(np.float32), "labels": np.array([0, 1, 2, 3, 1, 0], np.int32)}
    keras_train_fixture("keras_mlp_activations", m, keras.optimizers.Adagrad(0.05),
                        tf.TensorSpec([None, 10], tf.float32, name="x"), feeds, 2)


FIXTURES = [keras_transformer_block, keras_resnet_cnn, keras_lstm_classifier, keras_wide_deep, keras_vae,
            keras_mlp_inference, keras_gru_rmsprop, keras_conv1d_nadam, keras_cnn_pool_adamax, keras_bilstm_nesterov,
            keras_mlp_activations]


def main():
    """Writes every fixture, or only those named on the command line."""
    print("TensorFlow", tf.__version__)
    for f in FIXTURES:
        if len(sys.argv) == 1 or f.__name__ in sys.argv[1:]:
            f()


if __name__ == "__main__":
    main()
