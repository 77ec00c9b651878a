"""Writes the issue-20 "ops real Keras graphs use" fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_keras_ops4.py [NAME...]

One small fixture per op family autoclust could not run before: grouped convolution (`Conv2D` whose
filter's in-depth is the input depth / groups, and its two gradients), `Conv3D`/`MaxPool3D`/`AvgPool3D`
and their gradients, `DenseBincount` (Keras `CategoryEncoding`, `tf.math.bincount`),
`ImageProjectiveTransformV3` (Keras' RandomRotation/RandomTranslation/RandomZoom, and every interpolation
and fill mode through the raw op) and a non-float32 `ResizeBilinear`. Each is exported as a user would
(`tf.function(step, input_signature).get_concrete_function().graph.as_graph_def()`) and written by
`make_fixtures_tf2.write` (TensorFlow's values from calling the concrete function eagerly).
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_keras_sweep import check_captures, seed_states, start, train_fixture  # noqa: E402
from make_fixtures_tf2 import captured_variables, write  # noqa: E402


def ops4_grouped_conv_sgd():
    """Conv2D(groups=2) + Conv2D(groups=3, strided, same) + GAP2D + Dense; SGD with momentum: `Conv2D`
    with a filter of in-depth C/groups and its two gradients."""
    keras, L, rng = start(401)
    m = keras.Sequential([keras.Input((7, 6, 4)), L.Conv2D(6, 3, groups=2, activation="tanh"),
                          L.Conv2D(6, 2, strides=2, padding="same", groups=3), L.GlobalAveragePooling2D(),
                          L.Dense(3)])
    feeds = {"x": rng.standard_normal((4, 7, 6, 4)).astype(np.float32), "labels": np.array([0, 1, 2, 1], np.int32)}
    train_fixture("ops4_grouped_conv_sgd", m, keras.optimizers.SGD(0.1, momentum=0.5),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [tf.TensorSpec([None, 7, 6, 4], tf.float32, name="x"), tf.TensorSpec([None], tf.int32, name="labels")],
                  feeds)


def ops4_conv3d_pool3d_adam():
    """Conv3D (same) + MaxPooling3D + Conv3D (valid, strided) + AveragePooling3D (same) + GAP3D + Dense;
    Adam: `Conv3D`, `MaxPool3D`, `AvgPool3D` and their gradients."""
    keras, L, rng = start(402)
    m = keras.Sequential([keras.Input((6, 7, 5, 2)), L.Conv3D(3, 3, padding="same", activation="relu"),
                          L.MaxPooling3D(2), L.Conv3D(4, (2, 2, 1), strides=(1, 2, 1), activation="tanh"),
                          L.AveragePooling3D((2, 1, 2), strides=1, padding="same"),
                          L.GlobalAveragePooling3D(), L.Dense(3)])
    feeds = {"x": rng.standard_normal((3, 6, 7, 5, 2)).astype(np.float32), "labels": np.array([0, 1, 2], np.int32)}
    train_fixture("ops4_conv3d_pool3d_adam", m, keras.optimizers.Adam(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [tf.TensorSpec([None, 6, 7, 5, 2], tf.float32, name="x"),
                   tf.TensorSpec([None], tf.int32, name="labels")],
                  feeds)


def ops4_bincount():
    """Keras CategoryEncoding (multi_hot, count, count with weights) and `tf.math.bincount` (1-D with
    weights and minlength, 2-D with axis=-1, binary_output): `DenseBincount`, int32 and int64."""
    keras, L, rng = start(403)
    multi = L.CategoryEncoding(num_tokens=6, output_mode="multi_hot")
    count = L.CategoryEncoding(num_tokens=6, output_mode="count")

    @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.int32, name="x"),
                                  tf.TensorSpec([None, 5], tf.float32, name="w"),
                                  tf.TensorSpec([None], tf.int64, name="v")])
    def encode(x, w, v):
        return (multi(x), count(x), count(x, count_weights=w),
                tf.math.bincount(v, minlength=9),
                tf.math.bincount(tf.cast(v, tf.int32), weights=tf.cast(v, tf.float32) * 0.5, minlength=3, maxlength=6),
                tf.math.bincount(x, axis=-1, minlength=7),
                tf.math.bincount(x, axis=-1, minlength=4, binary_output=True))

    cf = encode.get_concrete_function()
    feeds = {"x": rng.integers(0, 6, (4, 5)).astype(np.int32), "w": rng.uniform(0, 2, (4, 5)).astype(np.float32),
             "v": rng.integers(0, 8, (11,)).astype(np.int64)}
    write("ops4_bincount", cf, [], feeds, 1)


def ops4_image_transform_raw():
    """`ImageProjectiveTransformV3` straight: every interpolation (NEAREST, BILINEAR) and fill mode
    (REFLECT, WRAP, CONSTANT with a fill value, NEAREST) on fed projective transforms (one per image,
    and one shared), an output shape other than the input's, float32 and uint8 images."""
    _, _, rng = start(404)

    @tf.function(input_signature=[tf.TensorSpec([None, 5, 6, 2], tf.float32, name="x"),
                                  tf.TensorSpec([None, 8], tf.float32, name="t"),
                                  tf.TensorSpec([1, 8], tf.float32, name="t1"),
                                  tf.TensorSpec([None, 5, 6, 2], tf.uint8, name="xu")])
    def transform(x, t, t1, xu):
        outs = []
        for interp in ["NEAREST", "BILINEAR"]:
            for fill in ["REFLECT", "WRAP", "CONSTANT", "NEAREST"]:
                outs.append(tf.raw_ops.ImageProjectiveTransformV3(
                    images=x, transforms=t, output_shape=tf.constant([5, 6]), interpolation=interp,
                    fill_mode=fill, fill_value=tf.constant(0.75)))
        outs.append(tf.raw_ops.ImageProjectiveTransformV3(
            images=x, transforms=t1, output_shape=tf.constant([7, 4]), interpolation="BILINEAR",
            fill_mode="CONSTANT", fill_value=tf.constant(-1.0)))
        outs.append(tf.raw_ops.ImageProjectiveTransformV3(
            images=xu, transforms=t, output_shape=tf.constant([5, 6]), interpolation="BILINEAR",
            fill_mode="REFLECT", fill_value=tf.constant(3.0)))
        return outs

    cf = transform.get_concrete_function()
    n = 3
    ang = rng.uniform(-0.6, 0.6, n)
    t = np.zeros((n, 8), np.float32)
    t[:, 0] = np.cos(ang) * 1.1
    t[:, 1] = -np.sin(ang)
    t[:, 2] = rng.uniform(-3, 3, n)
    t[:, 3] = np.sin(ang)
    t[:, 4] = np.cos(ang) * 0.9
    t[:, 5] = rng.uniform(-3, 3, n)
    t[:, 6] = rng.uniform(-0.03, 0.03, n)
    t[:, 7] = rng.uniform(-0.03, 0.03, n)
    t1 = np.array([[0.8, 0.3, -1.5, -0.2, 1.3, 0.7, 0.01, -0.02]], np.float32)
    feeds = {"x": rng.standard_normal((n, 5, 6, 2)).astype(np.float32), "t": t, "t1": t1,
             "xu": rng.integers(0, 256, (n, 5, 6, 2)).astype(np.uint8)}
    write("ops4_image_transform_raw", cf, [], feeds, 1)


def ops4_random_augment():
    """Keras RandomRotation, RandomTranslation and RandomZoom with `training=True` (their stateless
    random draws from a SeedGenerator state variable feed `ImageProjectiveTransformV3`), then a Conv2D;
    inference of a preprocessing graph."""
    keras, L, rng = start(405)
    m = keras.Sequential([keras.Input((8, 8, 3)), L.RandomRotation(0.2, fill_mode="reflect", seed=1),
                          L.RandomTranslation(0.2, 0.1, fill_mode="constant", fill_value=0.5, seed=2),
                          L.RandomZoom(0.3, fill_mode="nearest", interpolation="nearest", seed=3),
                          L.Conv2D(2, 3)])

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32, name="x")])
    def augment(x):
        return m(x, training=True)

    cf = augment.get_concrete_function()
    variables = captured_variables(cf, m.variables + seed_states(m))
    check_captures("ops4_random_augment", cf, variables)
    write("ops4_random_augment", cf, variables, {"x": rng.standard_normal((3, 8, 8, 3)).astype(np.float32)}, 2)


def ops4_resize_uint8_half():
    """`ResizeBilinear` on uint8 and float16 images (Keras Resizing on a uint8 input; the output is
    float32), half-pixel centers and align_corners, then float arithmetic around them."""
    _, _, rng = start(406)

    @tf.function(input_signature=[tf.TensorSpec([None, 4, 5, 3], tf.uint8, name="xu"),
                                  tf.TensorSpec([None, 4, 5, 3], tf.float16, name="xh")])
    def resize(xu, xh):
        a = tf.raw_ops.ResizeBilinear(images=xu, size=[7, 3], half_pixel_centers=True)
        b = tf.raw_ops.ResizeBilinear(images=xu, size=[6, 8], align_corners=True)
        c = tf.raw_ops.ResizeBilinear(images=xh, size=[5, 9], half_pixel_centers=True)
        return a * 0.5 + 1.0, tf.reduce_sum(b, axis=[1, 2]), tf.tanh(c)

    cf = resize.get_concrete_function()
    feeds = {"xu": rng.integers(0, 256, (2, 4, 5, 3)).astype(np.uint8),
             "xh": rng.standard_normal((2, 4, 5, 3)).astype(np.float16)}
    write("ops4_resize_uint8_half", cf, [], feeds, 1)


def ops4_conv3d_transpose_rmsprop():
    """Conv3DTranspose (stride 2: `Conv3DBackpropInputV2` forward, `Conv3D` in its gradient),
    UpSampling3D, ZeroPadding3D + Cropping3D, MaxPooling3D, GlobalMaxPooling3D; RMSprop."""
    keras, L, rng = start(407)
    m = keras.Sequential([keras.Input((4, 4, 4, 2)), L.Conv3DTranspose(3, 2, strides=2), L.UpSampling3D(1),
                          L.ZeroPadding3D(1), L.Cropping3D(1), L.MaxPooling3D(2), L.GlobalMaxPooling3D(), L.Dense(2)])
    feeds = {"x": rng.standard_normal((2, 4, 4, 4, 2)).astype(np.float32), "labels": np.array([0, 1], np.int32)}
    train_fixture("ops4_conv3d_transpose_rmsprop", m, keras.optimizers.RMSprop(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [tf.TensorSpec([None, 4, 4, 4, 2], tf.float32, name="x"),
                   tf.TensorSpec([None], tf.int32, name="labels")],
                  feeds)


def ops4_preprocess_random():
    """Keras RandomFlip, RandomContrast, RandomBrightness, RandomCrop, Rescaling, CenterCrop with
    `training=True` (stateless draws from SeedGenerator states), then Discretization +
    CategoryEncoding(one_hot) of a second input: inference of a preprocessing graph, 2 steps."""
    keras, L, rng = start(408)
    m = keras.Sequential([keras.Input((8, 8, 3)), L.RandomFlip(seed=1), L.RandomContrast(0.3, seed=2),
                          L.RandomBrightness(0.2, seed=3), L.RandomCrop(6, 6, seed=4), L.Rescaling(1 / 255.0),
                          L.CenterCrop(4, 4)])
    disc = L.Discretization(bin_boundaries=[-1.0, 0.0, 1.5])
    onehot = L.CategoryEncoding(4, output_mode="one_hot")

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32, name="x"),
                                  tf.TensorSpec([None, 4], tf.float32, name="v")])
    def preprocess(x, v):
        return m(x, training=True), onehot(disc(v))

    cf = preprocess.get_concrete_function()
    variables = captured_variables(cf, m.variables + seed_states(m))
    check_captures("ops4_preprocess_random", cf, variables)
    write("ops4_preprocess_random", cf, variables,
          {"x": rng.uniform(0, 255, (3, 8, 8, 3)).astype(np.float32), "v": rng.standard_normal((3, 4)).astype(np.float32)},
          2)


FIXTURES = [ops4_grouped_conv_sgd, ops4_conv3d_pool3d_adam, ops4_bincount, ops4_image_transform_raw,
            ops4_random_augment, ops4_resize_uint8_half, ops4_conv3d_transpose_rmsprop, ops4_preprocess_random]


def main():
    """Writes every fixture, or only those named on the command line."""
    print("TensorFlow", tf.__version__)
    for f in FIXTURES:
        if len(sys.argv) == 1 or f.__name__ in sys.argv[1:]:
            f()


if __name__ == "__main__":
    main()
