"""Writes the second Keras 3 sweep (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_keras_sweep2.py [NAME...]

More of issue 20's "Keras steps you have not seen", in the manner of `make_fixtures_keras_sweep.py`
(same export, same `train_fixture`): layers, losses, metrics and optimizers none of the other generators
use. All fourteen ran and matched TensorFlow in both modes when first exported, except the Ftrl step, whose
clustered run was 4e-5 off until the JIT's Pow was made correctly rounded. Cases: README.md.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_keras_sweep import check_captures, seed_states, start, train_fixture  # noqa: E402
from make_fixtures_tf2 import captured_variables, write  # noqa: E402


def spec(shape, dt, name):
    return tf.TensorSpec(shape, dt, name=name)


def sweep2_groupnorm_prelu_adafactor():
    """Dilated Conv2D (`SpaceToBatchND`), GroupNormalization, PReLU, SpatialDropout2D (its noise shape),
    AveragePooling2D; Adafactor (factored second moments, `Pow` of a variable step)."""
    keras, L, rng = start(201)
    m = keras.Sequential([keras.Input((6, 6, 4)), L.Conv2D(8, 3, padding="same", dilation_rate=2),
                          L.GroupNormalization(groups=4), L.PReLU(), L.SpatialDropout2D(0.3),
                          L.AveragePooling2D(2), L.Flatten(), L.Dense(3)])
    feeds = {"x": rng.standard_normal((4, 6, 6, 4)).astype(np.float32), "labels": np.array([0, 1, 2, 1], np.int32)}
    train_fixture("sweep2_groupnorm_prelu_adafactor", m, keras.optimizers.Adafactor(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [spec([None, 6, 6, 4], tf.float32, "x"), spec([None], tf.int32, "labels")], feeds)


def sweep2_convlstm2d_logcosh_sgd():
    """ConvLSTM2D (convolutions inside the `While` body, TensorLists), GlobalMaxPooling2D; LogCosh loss (`Softplus`);
    SGD."""
    keras, L, rng = start(202)
    m = keras.Sequential([keras.Input((3, 5, 5, 2)), L.ConvLSTM2D(3, 3, padding="same"), L.GlobalMaxPooling2D(), L.Dense(2)])
    feeds = {"x": rng.standard_normal((2, 3, 5, 5, 2)).astype(np.float32), "labels": rng.standard_normal((2, 2)).astype(np.float32)}
    train_fixture("sweep2_convlstm2d_logcosh_sgd", m, keras.optimizers.SGD(0.05),
                  keras.losses.LogCosh(), [spec([None, 3, 5, 5, 2], tf.float32, "x"), spec([None, 2], tf.float32, "labels")], feeds)


def sweep2_attention_additive_hinge():
    """Dot-product `Attention` (scaled) and `AdditiveAttention` on one query/value pair, concatenated,
    GlobalAveragePooling1D, UnitNormalization, LeakyReLU, tanh output; Hinge loss; Adam."""
    keras, L, rng = start(203)
    q = keras.Input((4, 6)); v = keras.Input((5, 6))
    a = L.Attention(use_scale=True, score_mode="dot")([q, v])
    b = L.AdditiveAttention()([q, v])
    h = L.Concatenate()([a, b])
    h = L.UnitNormalization()(L.GlobalAveragePooling1D()(h))
    out = L.Dense(1, activation="tanh")(L.LeakyReLU(0.2)(L.Dense(5)(h)))
    m = keras.Model([q, v], out)
    feeds = {"q": rng.standard_normal((3, 4, 6)).astype(np.float32), "v": rng.standard_normal((3, 5, 6)).astype(np.float32),
             "labels": np.array([[1], [-1], [1]], np.float32)}
    train_fixture("sweep2_attention_additive_hinge", m, keras.optimizers.Adam(0.01),
                  keras.losses.Hinge(), [spec([None, 4, 6], tf.float32, "q"), spec([None, 5, 6], tf.float32, "v"),
                                         spec([None, 1], tf.float32, "labels")], feeds)


def sweep2_selu_noise_focal_auc_precision_recall():
    """SELU, GaussianNoise (a stateless random normal in training), sigmoid output; BinaryFocalCrossentropy; the AUC
    (20 thresholds: `Cumsum`, `ReverseV2`), Precision and Recall metrics updated in the step; RMSprop."""
    keras, L, rng = start(204)
    m = keras.Sequential([keras.Input((6,)), L.Dense(8, activation="selu"), L.GaussianNoise(0.1), L.Dense(1, activation="sigmoid")])
    feeds = {"x": rng.standard_normal((6, 6)).astype(np.float32), "labels": np.array([[1], [0], [1], [0], [0], [1]], np.float32)}
    train_fixture("sweep2_selu_noise_focal_auc_precision_recall", m, keras.optimizers.RMSprop(0.01),
                  keras.losses.BinaryFocalCrossentropy(gamma=2.0),
                  [spec([None, 6], tf.float32, "x"), spec([None, 1], tf.float32, "labels")], feeds,
                  metrics=[keras.metrics.AUC(num_thresholds=20), keras.metrics.Precision(), keras.metrics.Recall()])


def sweep2_conv1d_transpose_poisson_adagrad():
    """Conv1DTranspose (stride 2, ELU), AveragePooling1D, MaxPooling1D, softplus output; Poisson loss; Adagrad."""
    keras, L, rng = start(205)
    m = keras.Sequential([keras.Input((8, 3)), L.Conv1DTranspose(4, 3, strides=2, padding="same", activation="elu"),
                          L.AveragePooling1D(2), L.MaxPooling1D(2), L.Flatten(), L.Dense(2, activation="softplus")])
    feeds = {"x": rng.standard_normal((3, 8, 3)).astype(np.float32), "labels": rng.integers(0, 4, (3, 2)).astype(np.float32)}
    train_fixture("sweep2_conv1d_transpose_poisson_adagrad", m, keras.optimizers.Adagrad(0.05),
                  keras.losses.Poisson(), [spec([None, 8, 3], tf.float32, "x"), spec([None, 2], tf.float32, "labels")], feeds)


def sweep2_segmentation_focal_miou():
    """A per-pixel softmax classifier (Conv2D + Softmax); CategoricalFocalCrossentropy; OneHotMeanIoU (a confusion
    matrix by `ScatterNd`, `MatrixDiagPartV3`), CosineSimilarity and TopKCategoricalAccuracy (`InTopKV2`) metrics;
    Nadam."""
    keras, L, rng = start(206)
    m = keras.Sequential([keras.Input((6, 6, 2)), L.Conv2D(3, 3, padding="same"), L.Softmax(axis=-1)])
    lab = rng.integers(0, 3, (2, 6, 6))
    feeds = {"x": rng.standard_normal((2, 6, 6, 2)).astype(np.float32), "labels": np.eye(3, dtype=np.float32)[lab]}
    train_fixture("sweep2_segmentation_focal_miou", m, keras.optimizers.Nadam(0.01),
                  keras.losses.CategoricalFocalCrossentropy(),
                  [spec([None, 6, 6, 2], tf.float32, "x"), spec([None, 6, 6, 3], tf.float32, "labels")], feeds,
                  metrics=[keras.metrics.OneHotMeanIoU(num_classes=3), keras.metrics.CosineSimilarity(), keras.metrics.TopKCategoricalAccuracy(k=2)])


def sweep2_conv3d_upsample3d_squared_hinge():
    """Conv3D (swish), UpSampling3D, AveragePooling3D, GlobalAveragePooling3D; SquaredHinge loss; Adamax."""
    keras, L, rng = start(207)
    m = keras.Sequential([keras.Input((4, 4, 4, 1)), L.Conv3D(2, 2, padding="same", activation="swish"),
                          L.UpSampling3D(2), L.AveragePooling3D(2), L.GlobalAveragePooling3D(), L.Dense(1)])
    feeds = {"x": rng.standard_normal((2, 4, 4, 4, 1)).astype(np.float32), "labels": np.array([[1], [-1]], np.float32)}
    train_fixture("sweep2_conv3d_upsample3d_squared_hinge", m, keras.optimizers.Adamax(0.01),
                  keras.losses.SquaredHinge(), [spec([None, 4, 4, 4, 1], tf.float32, "x"), spec([None, 1], tf.float32, "labels")], feeds)


def sweep2_ftrl_l1l2_cosine_decay_regularizers():
    """Dense layers with hard_sigmoid (`Relu6`), mish and log_softmax, an L1L2 kernel regularizer and
    ActivityRegularization; Ftrl with L1/L2 strength under a warmup CosineDecay schedule (`StatelessIf`), 3 steps.
    Ftrl's `Pow(accumulator, 0.5)` and the cancellation after it are why the JIT's Pow is computed in float64: the
    float32 form put the accumulators 4e-5 of their scale off TensorFlow's."""
    keras, L, rng = start(208)
    m = keras.Sequential([keras.Input((5,)), L.Dense(6, activation="hard_sigmoid", kernel_regularizer=keras.regularizers.L1L2(0.01, 0.01)),
                          L.Dense(6, activation="mish"), L.ActivityRegularization(l1=0.01), L.Dense(3, activation="log_softmax")])
    sched = keras.optimizers.schedules.CosineDecay(0.1, decay_steps=10, warmup_target=0.2, warmup_steps=3)
    feeds = {"x": rng.standard_normal((4, 5)).astype(np.float32), "labels": np.array([0, 2, 1, 1], np.int32)}
    train_fixture("sweep2_ftrl_l1l2_cosine_decay_regularizers", m, keras.optimizers.Ftrl(sched, l1_regularization_strength=0.01, l2_regularization_strength=0.01),
                  keras.losses.SparseCategoricalCrossentropy(), [spec([None, 5], tf.float32, "x"), spec([None], tf.int32, "labels")], feeds, steps=3)


def sweep2_birnn_unrolled_gru_msle_adamw_ema():
    """Bidirectional SimpleRNN (merge_mode "ave", `ReverseV2`), an unrolled GRU (no `While`);
    MeanSquaredLogarithmicError; AdamW with an exponential moving average of the weights (`use_ema`)."""
    keras, L, rng = start(209)
    m = keras.Sequential([keras.Input((6, 3)), L.Bidirectional(L.SimpleRNN(4, return_sequences=True), merge_mode="ave"),
                          L.GRU(3, unroll=True), L.Dense(2)])
    feeds = {"x": rng.standard_normal((3, 6, 3)).astype(np.float32), "labels": rng.standard_normal((3, 2)).astype(np.float32)}
    train_fixture("sweep2_birnn_unrolled_gru_msle_adamw_ema", m, keras.optimizers.AdamW(0.01, use_ema=True, ema_momentum=0.9),
                  keras.losses.MeanSquaredLogarithmicError(), [spec([None, 6, 3], tf.float32, "x"), spec([None, 2], tf.float32, "labels")], feeds)


def sweep2_hashing_embedding_dot_mape():
    """Hashing (`AsString` + `StringToHashBucketFast` on int64 ids), two Embeddings, normalized Dot (`BatchMatMulV2`),
    CategoryEncoding (one-hot), Multiply/Subtract/Maximum merges; MeanAbsolutePercentageError; SGD with momentum."""
    keras, L, rng = start(210)
    u = keras.Input((1,), dtype="int64"); i = keras.Input((1,), dtype="int64")
    hu = L.Hashing(num_bins=16)(u)
    eu = L.Flatten()(L.Embedding(16, 4)(hu)); ei = L.Flatten()(L.Embedding(10, 4)(i))
    d = L.Dot(axes=1, normalize=True)([eu, ei])
    enc = L.CategoryEncoding(num_tokens=10, output_mode="one_hot")(i)
    out = L.Dense(1)(L.Concatenate()([d, enc, L.Multiply()([eu, ei]), L.Subtract()([eu, ei]), L.Maximum()([eu, ei])]))
    m = keras.Model([u, i], out)
    feeds = {"u": rng.integers(0, 1000, (5, 1)).astype(np.int64), "i": rng.integers(0, 10, (5, 1)).astype(np.int64),
             "labels": rng.standard_normal((5, 1)).astype(np.float32)}
    train_fixture("sweep2_hashing_embedding_dot_mape", m, keras.optimizers.SGD(0.05, momentum=0.5),
                  keras.losses.MeanAbsolutePercentageError(),
                  [spec([None, 1], tf.int64, "u"), spec([None, 1], tf.int64, "i"), spec([None, 1], tf.float32, "labels")], feeds)


def sweep2_gru_recurrent_dropout_sgd():
    """GRU with input dropout and recurrent dropout (the recurrent mask drawn once and applied inside the `While`
    body); MSE; SGD."""
    keras, L, rng = start(302)
    m = keras.Sequential([keras.Input((5, 3)), L.GRU(4, dropout=0.2, recurrent_dropout=0.3), L.Dense(2)])
    feeds = {"x": rng.standard_normal((3, 5, 3)).astype(np.float32), "labels": rng.standard_normal((3, 2)).astype(np.float32)}
    train_fixture("sweep2_gru_recurrent_dropout_sgd", m, keras.optimizers.SGD(0.1), keras.losses.MeanSquaredError(),
                  [spec([None, 5, 3], tf.float32, "x"), spec([None, 2], tf.float32, "labels")], feeds)


def sweep2_random_augment_adam():
    """Keras' RandomFlip, RandomRotation, RandomZoom and RandomContrast in training (stateless random ops,
    `ImageProjectiveTransformV3`), Conv2D, GlobalAveragePooling2D; Adam."""
    keras, L, rng = start(303)
    m = keras.Sequential([keras.Input((8, 8, 3)), L.RandomFlip(), L.RandomRotation(0.1), L.RandomZoom(0.1), L.RandomContrast(0.2),
                          L.Conv2D(4, 3), L.GlobalAveragePooling2D(), L.Dense(3)])
    feeds = {"x": rng.uniform(0, 1, (2, 8, 8, 3)).astype(np.float32), "labels": np.array([0, 2], np.int32)}
    train_fixture("sweep2_random_augment_adam", m, keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [spec([None, 8, 8, 3], tf.float32, "x"), spec([None], tf.int32, "labels")], feeds)


def sweep2_spectral_norm_discretization_huber():
    """Discretization (`Bucketize`) + CategoryEncoding(count) beside the raw features, SpectralNormalization around a
    Dense (power iteration updating its vector variable), relu6; Huber; RMSprop."""
    keras, L, rng = start(304)
    x = keras.Input((4,))
    d = L.Discretization(bin_boundaries=[-1.0, 0.0, 1.0])(x)
    e = L.CategoryEncoding(num_tokens=4, output_mode="count")(d)
    h = L.SpectralNormalization(L.Dense(6))(L.Concatenate()([x, e]))
    out = L.Dense(1)(L.Activation("relu6")(h))
    m = keras.Model(x, out)
    feeds = {"x": rng.standard_normal((5, 4)).astype(np.float32), "labels": rng.standard_normal((5, 1)).astype(np.float32)}
    train_fixture("sweep2_spectral_norm_discretization_huber", m, keras.optimizers.RMSprop(0.01), keras.losses.Huber(),
                  [spec([None, 4], tf.float32, "x"), spec([None, 1], tf.float32, "labels")], feeds)


def sweep2_bilstm_return_state_adagrad():
    """Bidirectional LSTM with return_sequences and return_state (both directions' final h and c used),
    GlobalMaxPooling1D; Adagrad."""
    keras, L, rng = start(305)
    x = keras.Input((6, 3))
    seq, h1, c1, h2, c2 = L.Bidirectional(L.LSTM(4, return_sequences=True, return_state=True))(x)
    out = L.Dense(2)(L.Concatenate()([L.GlobalMaxPooling1D()(seq), h1, c2]))
    m = keras.Model(x, out)
    feeds = {"x": rng.standard_normal((3, 6, 3)).astype(np.float32), "labels": np.array([0, 1, 1], np.int32)}
    train_fixture("sweep2_bilstm_return_state_adagrad", m, keras.optimizers.Adagrad(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [spec([None, 6, 3], tf.float32, "x"), spec([None], tf.int32, "labels")], feeds)


def sweep2_bilstm_tagger_called_twice():
    """Inference: an Embedding + Bidirectional LSTM tagger called twice in one function (argmax tags and
    softmax probabilities), as sweep 71 exported it: each call traces its own two `While` loops, whose
    bodies differ only in their scope-prefixed names. `cse` merges the second call into the first
    (`testdata/cse/pure_calls.graph`); the outputs must still be TensorFlow's."""
    keras, L, rng = start(306)
    m = keras.Sequential([keras.Input((5,), dtype="int32"), L.Embedding(30, 6),
                          L.Bidirectional(L.LSTM(4, return_sequences=True)), L.TimeDistributed(L.Dense(3))])

    @tf.function(input_signature=[spec([None, 5], tf.int32, "x")])
    def infer(x):
        return tf.argmax(m(x, training=False), -1, output_type=tf.int32), tf.nn.softmax(m(x, training=False))

    cf = infer.get_concrete_function()
    variables = captured_variables(cf, m.variables + seed_states(m))
    check_captures("sweep2_bilstm_tagger_called_twice", cf, variables)
    write("sweep2_bilstm_tagger_called_twice", cf, variables, {"x": rng.integers(0, 30, (3, 5)).astype(np.int32)}, 1)


FIXTURES = [
    sweep2_bilstm_tagger_called_twice,
    sweep2_gru_recurrent_dropout_sgd,
    sweep2_random_augment_adam,
    sweep2_spectral_norm_discretization_huber,
    sweep2_bilstm_return_state_adagrad,
    sweep2_groupnorm_prelu_adafactor,
    sweep2_convlstm2d_logcosh_sgd,
    sweep2_attention_additive_hinge,
    sweep2_selu_noise_focal_auc_precision_recall,
    sweep2_conv1d_transpose_poisson_adagrad,
    sweep2_segmentation_focal_miou,
    sweep2_conv3d_upsample3d_squared_hinge,
    sweep2_ftrl_l1l2_cosine_decay_regularizers,
    sweep2_birnn_unrolled_gru_msle_adamw_ema,
    sweep2_hashing_embedding_dot_mape,
]


def main():
    """Writes every fixture, or only those named on the command line."""
    print("TensorFlow", tf.__version__)
    for f in FIXTURES:
        if len(sys.argv) == 1 or f.__name__ in sys.argv[1:]:
            f()


if __name__ == "__main__":
    main()
