"""Writes the fixtures of data movement and integer arithmetic on the dtypes beyond float/int32/int64/bool
(run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 /work/tfenv/bin/python testdata/tf/make_fixtures_dtypes.py

What serving and preprocessing graphs do to strings and to uint8 pixels before (or instead of) casting
them: concat, stack/unstack, slice, strided slice, transpose, reverse, tile, gather, gather_nd, pad,
mirror pad, select, split, fill, broadcast, dynamic stitch, space-to-batch, diag part, map_fn and
TensorArray round trips, unique, equality, and for the narrow integers sums, maxima, sort and wrapping
arithmetic. Cases in README.md.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_strings import write_string_fixture  # noqa: E402
from make_fixtures_tf2 import run_fixtures, OUT, write  # noqa: E402
from tf_harness import export  # noqa: E402


def movements(x, dt):
    """Element-moving ops of a [2, 3] tensor `x` of dtype `dt`."""
    zero = "" if dt == tf.string else 0
    mask = tf.constant([[True, False, True], [False, True, True]])
    return [
        tf.concat([x, x[::-1]], 0),
        tf.stack([x, x[::-1]], 1),
        tf.unstack(x, axis=1)[1],
        tf.slice(x, [1, 0], [1, 2]),
        x[::-1, 1:],
        tf.transpose(x),
        tf.reverse(x, [1]),
        tf.gather(x, [2, 0, 2], axis=1),
        tf.gather_nd(x, [[1, 1], [0, 2]]),
        tf.reshape(x, [3, 2]),
        tf.pad(x, [[1, 0], [0, 1]], constant_values=zero),
        tf.pad(x, [[1, 1], [1, 1]], mode="REFLECT"),
        tf.where(mask, x, tf.reverse(x, [0])),
        tf.split(x, 3, axis=1)[2],
        tf.fill([2, 2], x[0, 1]),
        tf.broadcast_to(x[:1], [3, 3]),
        tf.dynamic_stitch([[0, 2], [1]], [x[0, 0::2], x[1, 1:2]]),
        tf.map_fn(lambda r: tf.reverse(r, [0]), x),
        tf.TensorArray(dt, size=2).unstack(x).stack(),
        tf.unique(tf.reshape(tf.concat([x, x[:, :1]], 1), [-1]))[0],
        tf.cast(tf.equal(x, tf.reverse(x, [0])), tf.int32),
    ] + ([] if dt == tf.uint16 else [tf.tile(x, [2, 1])]) + ([] if dt == tf.string else [  # no string kernels
        tf.linalg.diag_part(x),
        tf.space_to_batch(tf.reshape(x, [1, 2, 3, 1])[:, :, :2], [2, 2], [[0, 0], [0, 0]]),
    ])


def dtypes_strings():
    """The movement ops on a fed string tensor, and string `Add` (concatenation, broadcasting)."""

    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.string, name="x")])
    def f(x):
        return movements(x, tf.string) + [x + tf.constant("!"), tf.constant(["<", ">"])[:, None] + x]

    cf = f.get_concrete_function()
    fetch = [t.name for t in cf.outputs]
    gd = export(cf.graph.as_graph_def(), OUT, "dtypes_strings")
    write_string_fixture("dtypes_strings", gd, {}, {"x": [["a", "bc", "a"], ["", "é", "bc"]]}, fetch, [])


NARROW = [tf.uint8, tf.int8, tf.uint16, tf.int16, tf.uint32]


def dtypes_narrow_ints():
    """The movement ops on fed uint8, int8, uint16, int16 and uint32 tensors, plus the integer arithmetic
    TensorFlow has kernels for: add/sub/mul (wrapping), sums and maxima, min/max, floordiv/floormod, abs,
    comparisons, sort, argmax, and casts to float32."""
    rng = np.random.default_rng(601)
    feeds = {}
    for dt in NARROW:
        info = np.iinfo(dt.as_numpy_dtype)
        v = rng.integers(info.min, info.max, (2, 3), endpoint=True).astype(dt.as_numpy_dtype)
        v[0, 2] = v[0, 0]  # a repeat, for unique and equality
        feeds["x_" + dt.name] = v

    @tf.function(input_signature=[tf.TensorSpec([2, 3], dt, name="x_" + dt.name) for dt in NARROW])
    def f(*xs):
        outs = []
        for x, dt in zip(xs, NARROW):
            outs += movements(x, dt)
            y = tf.reverse(x, [1])
            arith = [tf.add(x, y), tf.reduce_max(x, 1), tf.minimum(x, y), tf.maximum(x, y),
                     tf.cast(tf.less(x, y), tf.int32), tf.argmax(x, 1), tf.cast(x, tf.float32)]
            if dt in (tf.uint8, tf.int8, tf.uint16, tf.int16):
                arith += [tf.subtract(x, y), tf.multiply(x, y), tf.reduce_sum(x, 0), tf.math.floordiv(x, y | 1),
                          tf.math.floormod(x, y | 1)]
            if dt in (tf.int8, tf.int16):
                arith.append(tf.abs(x))
            if dt in (tf.uint8, tf.int8, tf.int16, tf.uint16):
                arith.append(tf.sort(x, axis=1))
            outs += arith
        return outs

    cf = f.get_concrete_function()
    write("dtypes_narrow_ints", cf, [], feeds, 1)


def dtypes_histogram():
    """`tf.histogram_fixed_width` (`HistogramFixedWidth`) of float32, float64 and int32 values, some outside
    the range (they fall in the end bins) and some on bin edges, with int32 and int64 counts and 1, 7 and 64
    bins; a summary-style normalised histogram of a fed batch."""
    rng = np.random.default_rng(602)

    @tf.function(input_signature=[tf.TensorSpec([None, 50], tf.float32, name="x"),
                                  tf.TensorSpec([40], tf.int32, name="k")])
    def f(x, k):
        edges = tf.constant([0.0, 0.25, 0.5, 1.0, -3.0, 7.0], tf.float64)
        h = tf.histogram_fixed_width(x, [-2.0, 2.0], nbins=64)
        return [h,
                tf.histogram_fixed_width(x, [-0.5, 1.5], nbins=7, dtype=tf.int64),
                tf.histogram_fixed_width(x, [0.0, 1.0], nbins=1),
                tf.histogram_fixed_width(tf.cast(x, tf.float64) * 3.0, tf.constant([-1.0, 4.0], tf.float64), 9),
                tf.histogram_fixed_width(edges, tf.constant([0.0, 1.0], tf.float64), 4),
                tf.histogram_fixed_width(k, [-5, 30], nbins=7),
                tf.cast(h, tf.float32) / tf.cast(tf.size(x), tf.float32)]

    cf = f.get_concrete_function()
    feeds = {"x": rng.standard_normal((6, 50)).astype(np.float32), "k": rng.integers(-10, 40, 40).astype(np.int32)}
    write("dtypes_histogram", cf, [], feeds, 1)


def dtypes_bitwise_shifts():
    """`LeftShift`/`RightShift`/`BitwiseAnd`/`BitwiseOr`/`BitwiseXor`/`Invert` on uint8, int8, uint16, int16,
    uint32 and uint64 (Keras' `RandomPosterization`, `RandAugment` and `AugMix` shift uint8 pixels), with shift
    amounts past the type's width (TensorFlow clamps them to width - 1) and negative ones (clamped to 0),
    a signed right shift of negative values (arithmetic) and a left shift that wraps; outputs cast to int64
    (sweep 62: the shifts of the narrow types had no kernel)."""
    rng = np.random.default_rng(603)
    types = [tf.uint8, tf.int8, tf.uint16, tf.int16, tf.uint32, tf.uint64]
    feeds = {}
    for dt in types:
        info = np.iinfo(dt.as_numpy_dtype)
        feeds["x_" + dt.name] = rng.integers(info.min, info.max, (2, 4), endpoint=True, dtype=dt.as_numpy_dtype)
        bits = 8 * dt.size
        lo = 0 if dt.is_unsigned else -3
        feeds["s_" + dt.name] = rng.integers(lo, bits + 5, (2, 4)).astype(dt.as_numpy_dtype)

    specs = [tf.TensorSpec([2, 4], dt, name=p + dt.name) for dt in types for p in ("x_", "s_")]

    @tf.function(input_signature=specs)
    def f(*args):
        outs = []
        for i, dt in enumerate(types):
            x, s = args[2 * i], args[2 * i + 1]
            k = tf.constant(3, dt)
            results = [tf.bitwise.right_shift(x, s), tf.bitwise.left_shift(x, s), tf.bitwise.right_shift(x, k),
                       tf.bitwise.left_shift(tf.bitwise.right_shift(x, k), k), tf.bitwise.bitwise_and(x, s),
                       tf.bitwise.bitwise_or(x, s), tf.bitwise.bitwise_xor(x, s), tf.bitwise.invert(x)]
            # uint64 does not fit int64: compare its high and low halves.
            if dt == tf.uint64:
                results = [tf.bitwise.right_shift(r, tf.constant(32, dt)) for r in results] + \
                          [tf.bitwise.bitwise_and(r, tf.constant(0xFFFFFFFF, dt)) for r in results]
            outs += [tf.cast(r, tf.int64) for r in results]
        return outs

    cf = f.get_concrete_function()
    write("dtypes_bitwise_shifts", cf, [], feeds, 1)


FIXTURES = [dtypes_strings, dtypes_narrow_ints, dtypes_histogram, dtypes_bitwise_shifts]


def main():
    run_fixtures(FIXTURES)


if __name__ == "__main__":
    main()
