"""Writes the quantisation-aware-training fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python testdata/tf/make_fixtures_quant.py

Fake quantisation as `tfmot.quantization.keras.quantize_model` and `tf.quantization.fake_quant_with_min_max_*`
put it in a graph: the forward ops (fixed range, scalar variable range, per-channel range) and their gradients.
Cases in README.md. Values were picked (seeds) so that no element sits within float32 rounding of a
quantisation step's edge, where two correct implementations may round apart.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_tf2 import run_fixtures, write  # noqa: E402


def spec(shape, name):
    return tf.TensorSpec(shape, tf.float32, name=name)


def quant_fake_quant_ops():
    """Every fake-quant op and its gradient on fed data: `FakeQuantWithMinMaxArgs` (default range, 4 bits
    narrow, a range that nudges), `FakeQuantWithMinMaxVars` (8 and 5 bits, a range not containing zero's
    step), `FakeQuantWithMinMaxVarsPerChannel` on ranks 1, 2 and 4, and the gradients of all of them
    (`GradientTape` inside the function: the `*Gradient` ops)."""
    rng = np.random.default_rng(701)

    @tf.function(input_signature=[spec([4, 3, 5, 6], "x"), spec([6], "lo"), spec([6], "hi"), spec([], "vmin"),
                                  spec([], "vmax")])
    def ops(x, lo, hi, vmin, vmax):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, lo, hi, vmin, vmax])
            outs = [
                tf.quantization.fake_quant_with_min_max_args(x),
                tf.quantization.fake_quant_with_min_max_args(x, min=-1.3, max=2.1, num_bits=4, narrow_range=True),
                tf.quantization.fake_quant_with_min_max_args(x, min=-0.37, max=5.0),
                tf.quantization.fake_quant_with_min_max_vars(x, vmin, vmax),
                tf.quantization.fake_quant_with_min_max_vars(x, vmin * 0.5, vmax * 2.0, num_bits=5),
                tf.quantization.fake_quant_with_min_max_vars_per_channel(x, lo, hi),
                tf.quantization.fake_quant_with_min_max_vars_per_channel(tf.reshape(x, [-1, 6]), lo, hi, num_bits=6,
                                                                         narrow_range=True),
                tf.quantization.fake_quant_with_min_max_vars_per_channel(x[0, 0, 0], lo, hi),
            ]
            loss = tf.add_n([tf.reduce_sum(o * (i + 1.0)) for i, o in enumerate(outs)])
        grads = tape.gradient(loss, [x, lo, hi, vmin, vmax])
        return outs + grads

    cf = ops.get_concrete_function()
    feeds = {"x": (rng.standard_normal((4, 3, 5, 6)) * 2.0).astype(np.float32),
             "lo": -rng.uniform(0.2, 2.0, 6).astype(np.float32), "hi": rng.uniform(0.5, 3.0, 6).astype(np.float32),
             "vmin": np.float32(-1.7), "vmax": np.float32(2.3)}
    write("quant_fake_quant_ops", cf, [], feeds, 1)


def quant_qat_cnn_sgd():
    """A quantisation-aware training step as tfmot builds it: the input fake-quantised to a fixed range,
    conv and dense kernels fake-quantised per output channel (8 bits, narrow range) between their running
    min and max, activations after ReLU fake-quantised between trainable min/max variables; cross-entropy,
    SGD on the weights and the activation ranges (their gradients: `FakeQuantWithMinMaxVarsGradient`)."""
    rng = np.random.default_rng(702)
    inits = {
        "conv": (rng.standard_normal((3, 3, 2, 4)) * 0.4).astype(np.float32),
        "conv_b": np.zeros(4, np.float32),
        "act_min": np.float32(0.0), "act_max": np.float32(3.0),
        "dense": (rng.standard_normal((4 * 4 * 4, 3)) * 0.3).astype(np.float32),
        "dense_b": np.zeros(3, np.float32),
    }
    v = {k: tf.Variable(val, name=k) for k, val in inits.items()}

    @tf.function(input_signature=[spec([None, 8, 8, 2], "images"), tf.TensorSpec([None], tf.int32, name="labels")])
    def step(images, labels):
        with tf.GradientTape() as tape:
            x = tf.quantization.fake_quant_with_min_max_args(images, min=-4.0, max=4.0)
            k = v["conv"]
            kq = tf.quantization.fake_quant_with_min_max_vars_per_channel(
                k, tf.stop_gradient(tf.reduce_min(k, [0, 1, 2])), tf.stop_gradient(tf.reduce_max(k, [0, 1, 2])),
                narrow_range=True)
            h = tf.nn.relu(tf.nn.conv2d(x, kq, 2, "SAME") + v["conv_b"])
            h = tf.quantization.fake_quant_with_min_max_vars(h, v["act_min"], v["act_max"])
            h = tf.reshape(h, [-1, 4 * 4 * 4])
            d = v["dense"]
            dq = tf.quantization.fake_quant_with_min_max_vars_per_channel(
                d, tf.stop_gradient(tf.reduce_min(d, 0)), tf.stop_gradient(tf.reduce_max(d, 0)), narrow_range=True)
            logits = h @ dq + v["dense_b"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        names = list(v)
        grads = tape.gradient(loss, [v[n] for n in names])
        for n, g in zip(names, grads):
            v[n].assign_sub(0.1 * g)
        return loss

    cf = step.get_concrete_function()
    feeds = {"images": rng.standard_normal((5, 8, 8, 2)).astype(np.float32) * 1.5,
             "labels": rng.integers(0, 3, 5).astype(np.int32)}
    write("quant_qat_cnn_sgd", cf, [(v[k], inits[k]) for k in inits], feeds, 2)


FIXTURES = [quant_fake_quant_ops, quant_qat_cnn_sgd]


def main():
    run_fixtures(FIXTURES)


if __name__ == "__main__":
    main()
