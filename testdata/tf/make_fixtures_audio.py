"""Writes the speech-commands front-end fixture in testdata/tf/ (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 /work/tfenv/bin/python testdata/tf/make_fixtures_audio.py

Fixture:

- audio_mfcc_conv_sgd (TF1 graph): the front end of TensorFlow's speech-commands model
  (tensorflow/examples/speech_commands, `conv_actions_frozen.pb`) in front of a small classifier. A fed
  WAV string (1500 samples of two tones and noise at 16 kHz, 16-bit PCM as `tf.audio.encode_wav` writes
  it, plus a trailing `LIST` chunk the decoder skips) -> `tf.audio.decode_wav(desired_channels=1,
  desired_samples=1600)` (zero-padded to 1600 samples) -> `AudioSpectrogram(window_size=160, stride=80,
  magnitude_squared=True)` (a window that is not a power of two: transform length 256, 129 bins,
  19 frames) -> `Mfcc` at the decoded sample rate (20 coefficients of 40 mel bands) -> a conv layer,
  max pooling and a dense layer (resource variables) -> softmax cross-entropy, trained one SGD step.
  Fetches the decoded audio and sample rate, the spectrogram, the MFCCs, the logits and the loss.
"""

import base64
import os
import struct
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_harness import export, write_fixture  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
v1 = tf.compat.v1

RATE = 16000


def wav_bytes(rng):
    """1500 samples at 16 kHz as `tf.audio.encode_wav` encodes them, then a LIST chunk."""
    t = np.arange(1500) / RATE
    x = 0.5 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 1870 * t) + 0.05 * rng.standard_normal(1500)
    wav = tf.audio.encode_wav(x.astype(np.float32)[:, None], RATE).numpy()
    extra = b"LIST" + struct.pack("<I", 6) + b"INFOab"
    body = wav[8:] + extra
    return b"RIFF" + struct.pack("<I", len(body)) + body


def audio_mfcc_conv_sgd():
    name = "audio_mfcc_conv_sgd"
    rng = np.random.default_rng(21)
    g = tf.Graph()
    with g.as_default():
        wav = v1.placeholder(tf.string, [], name="wav")
        audio, rate = tf.audio.decode_wav(wav, desired_channels=1, desired_samples=1600, name="decode")
        spectrogram = tf.raw_ops.AudioSpectrogram(input=audio, window_size=160, stride=80, magnitude_squared=True,
                                                  name="spectrogram")
        mfcc = tf.raw_ops.Mfcc(spectrogram=spectrogram, sample_rate=rate, dct_coefficient_count=20, name="mfcc")
        fingerprint = tf.reshape(mfcc, [1, 19, 20, 1])
        with v1.variable_scope("model", use_resource=True):
            w1 = v1.get_variable("conv_w", [5, 5, 1, 4])
            b1 = v1.get_variable("conv_b", [4], initializer=v1.zeros_initializer())
            w2 = v1.get_variable("dense_w", [10 * 10 * 4, 3])
            b2 = v1.get_variable("dense_b", [3], initializer=v1.zeros_initializer())
        h = tf.nn.relu(tf.nn.conv2d(fingerprint / 30.0, w1, [1, 1, 1, 1], "SAME") + b1)
        h = tf.nn.max_pool2d(h, 2, 2, "SAME")
        logits = tf.identity(tf.matmul(tf.reshape(h, [1, 10 * 10 * 4]), w2) + b2, name="logits")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.constant([2]), logits=logits),
                              name="loss")
        v1.train.GradientDescentOptimizer(0.05).minimize(loss, name="train")
    gd = export(g, OUT, name)
    ops = {n.op for n in gd.node}
    for op in ["DecodeWav", "AudioSpectrogram", "Mfcc"]:
        assert op in ops, f"{name}: expected a {op} node"
    variables = {"model/conv_w": rng.normal(scale=0.3, size=(5, 5, 1, 4)).astype(np.float32),
                 "model/conv_b": np.zeros(4, np.float32),
                 "model/dense_w": rng.normal(scale=0.1, size=(400, 3)).astype(np.float32),
                 "model/dense_b": np.zeros(3, np.float32)}
    data = wav_bytes(rng)
    fetch = ["decode:0", "decode:1", "spectrogram:0", "mfcc:0", "logits:0", "loss:0"]
    manifest = write_fixture(OUT, name, gd, variables, {}, fetch, ["train"], 1, extra={
        "string_feeds": {"wav": {"dtype": "string", "shape": [],
                                 "data": [{"b64": base64.b64encode(data).decode()}]}},
    }, tf_feeds={"wav": np.array(data, dtype=object)})
    print(name, manifest["fetch"])


if __name__ == "__main__":
    audio_mfcc_conv_sgd()
