"""Writes the numerics edge-case fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_numerics.py [NAME...]

Values where TensorFlow's x86 kernels define results C++ leaves undefined or special, found by the
third sweep to differ: Cast of NaN, infinities and out-of-range floats to every integer dtype (TensorFlow
gives the "integer indefinite" minimum of the 32/64-bit conversion and saturates that for the narrow
types; autoclust saturated the float), Pow with a −inf or −1 base (the JIT gave NaN where C's pow gives
inf/0/1), and the second-order gradient through MaxPool (`MaxPoolGradGrad`, with ties in the windows;
it had no kernel). Every value is repeated along a long axis so TensorFlow's vectorised loop, not its
scalar tail, computes it (the generator checks each row came out uniform).
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures_tf2  # noqa: E402
from make_fixtures_keras_sweep import check_captures  # noqa: E402
from make_fixtures_tf2 import captured_variables, write  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
make_fixtures_tf2.OUT = OUT
f32, f64 = tf.float32, tf.float64
REPEAT = 64


def spec(shape, dt, name):
    return tf.TensorSpec(shape, dt, name=name)


def fn_fixture(name, fn, candidates, feeds, steps=2):
    cf = fn.get_concrete_function()
    variables = captured_variables(cf, candidates)
    check_captures(name, cf, variables)
    write(name, cf, variables, feeds, steps)
    return cf


def uniform_rows(name, value, rows):
    """Each of `rows` consecutive blocks of `value` holds one value (TF's vector loop, not its tail)."""
    v = np.asarray(value).reshape(rows, -1)
    for i, row in enumerate(v):
        same = np.all(row == row[0]) or np.all(np.isnan(row))
        assert same, f"{name}: row {i} is not uniform: {sorted(set(row.tolist()))}"


CAST_VALUES = [np.nan, np.inf, -np.inf, 3e9, -3e9, 4.5e9, 1e20, -1e20, 1.5e19, -2.7, 2.7, 300.0, -1.0, 40000.0,
               70000.0, -300.0, 129.5, -129.5, 2.0**31, -2.0**31, 2.0**32, 2.0**63, 2.0**64, -0.5, 255.9]
CAST_TYPES = [tf.int32, tf.int64, tf.uint8, tf.int8, tf.int16, tf.uint16, tf.uint32, tf.uint64]


def numerics_cast_edges():
    """Cast float32 and float64 NaN/±inf/out-of-range/negative/fractional values to every integer dtype and
    to bool, after a multiply by a fed scale (so the float32 → int32/int64 casts join a compiled cluster)."""
    acc = tf.Variable(np.float32(0.0), name="acc")

    @tf.function(input_signature=[spec([None], f32, "x"), spec([None], f64, "xd"), spec([], f32, "scale")])
    def casts(x, xd, scale):
        xs = x * scale
        xds = xd * tf.cast(scale, f64)
        outs = [tf.cast(xs, t) for t in CAST_TYPES] + [tf.cast(xds, t) for t in CAST_TYPES]
        outs += [tf.cast(xs, tf.bool), tf.cast(xds, tf.bool)]
        i32 = tf.cast(xs, tf.int32)
        acc.assign_add(tf.cast(tf.reduce_sum(tf.cast(i32 < 0, f32)), f32))
        return outs

    x = np.repeat(np.array(CAST_VALUES, np.float32), REPEAT)
    feeds = {"x": x, "xd": x.astype(np.float64), "scale": np.float32(1.0)}
    for o in casts(tf.constant(x), tf.constant(x.astype(np.float64)), tf.constant(np.float32(1.0))):
        uniform_rows("numerics_cast_edges", o.numpy(), len(CAST_VALUES))
    acc.assign(0.0)
    fn_fixture("numerics_cast_edges", casts, [acc], feeds, 2)


def numerics_pow_edges():
    """Pow over a grid of special bases (±inf, ±0, ±1, negatives, NaN) and exponents (±inf, odd/even
    integers, fractions, 0, NaN) in float32 and float64, the float32 one inside a compiled cluster."""
    acc = tf.Variable(np.float32(0.0), name="acc")
    bases = [-np.inf, np.inf, -0.0, 0.0, -1.0, 1.0, -2.0, 2.0, -0.5, 0.5, np.nan, 3.0]
    exps = [-np.inf, np.inf, -3.0, -2.0, -2.5, -0.5, 0.0, 0.5, 2.0, 3.0, 2.5, np.nan, 1e10]
    grid = [(b, e) for b in bases for e in exps]

    @tf.function(input_signature=[spec([None], f32, "x"), spec([None], f32, "y"), spec([], f32, "scale")])
    def pows(x, y, scale):
        p = tf.pow(x * scale, y)
        pd = tf.pow(tf.cast(x, f64) * tf.cast(scale, f64), tf.cast(y, f64))
        finite = tf.where(tf.math.is_finite(p), p, tf.zeros_like(p))
        acc.assign_add(tf.reduce_sum(tf.minimum(tf.abs(finite), 10.0)))
        return p, pd

    x = np.repeat(np.array([b for b, _ in grid], np.float32), REPEAT)
    y = np.repeat(np.array([e for _, e in grid], np.float32), REPEAT)
    for o in pows(tf.constant(x), tf.constant(y), tf.constant(np.float32(1.0))):
        uniform_rows("numerics_pow_edges", o.numpy(), len(grid))
    acc.assign(0.0)
    fn_fixture("numerics_pow_edges", pows, [acc], {"x": x, "y": y, "scale": np.float32(1.0)}, 2)


def numerics_maxpool_gradient_penalty():
    """A gradient penalty through MaxPool (second order: MaxPoolGradGrad) in VALID stride 2 and SAME stride 1
    (overlapping windows), on integer-valued inputs so windows hold ties; SGD on a per-channel scale."""
    rng = np.random.default_rng(401)
    w = tf.Variable(np.array([0.5, 1.5, 1.0], np.float32), name="w")

    @tf.function(input_signature=[spec([None, 5, 6, 3], f32, "x")])
    def train(x):
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                inner.watch(x)
                h = x * w
                a = tf.nn.max_pool2d(h, 2, 2, "VALID")
                b = tf.nn.max_pool2d(h, 3, 1, "SAME")
                y = tf.reduce_sum(tf.square(a)) + tf.reduce_sum(b * b * 0.5)
            g = inner.gradient(y, x)
            penalty = tf.reduce_mean(tf.square(g))
        dw = outer.gradient(penalty, w)
        w.assign_sub(0.01 * dw)
        return penalty, dw

    x = rng.integers(-2, 3, (2, 5, 6, 3)).astype(np.float32)
    fn_fixture("numerics_maxpool_gradient_penalty", train, [w], {"x": x}, 3)


FIXTURES = [numerics_cast_edges, numerics_pow_edges, numerics_maxpool_gradient_penalty]


if __name__ == "__main__":
    for f in FIXTURES:
        if len(sys.argv) == 1 or f.__name__ in sys.argv[1:]:
            f()
