"""Writes the spectral (complex-number and Fourier-transform) fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_spectral.py [NAME...]

Audio front ends as users export them: Keras 3's `MelSpectrogram` and `STFTSpectrogram` layers
(`RFFT`, `Real`, `Imag`) in a training step and an inference step, and a `tf.signal` function that
uses every complex op autoclust runs (`RFFT`/`IRFFT` in one to three dimensions, `FFT`/`IFFT`
2-D, `ComplexAbs`, `Angle`, `Complex`, `Conj`, `Real`, `Imag`, complex `Mul`/`AddV2`/`RealDiv`,
`Cast` to complex, `inverse_stft`). Fetched values are real (safetensors has no complex dtype).
Exported and checked like the Keras sweeps (`make_fixtures_keras_sweep.train_fixture`,
`make_fixtures_tf2.write`); cases in README.md.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_keras_sweep import check_captures, seed_states, start, train_fixture  # noqa: E402
from make_fixtures_tf2 import run_fixtures, captured_variables, write  # noqa: E402


def spec(shape, dt, name):
    return tf.TensorSpec(shape, dt, name=name)


def tone(rng, batch, samples):
    """Sine tones of random pitch plus noise: a spectrum with real peaks, not flat noise."""
    t = np.arange(samples) / 8000.0
    f = rng.uniform(200, 1800, (batch, 1))
    return (np.sin(2 * np.pi * f * t) + 0.1 * rng.standard_normal((batch, samples))).astype(np.float32)


def spectral_melspec_conv_adam():
    """Keyword spotting: MelSpectrogram (Hann window, 256-point RFFT, 32 mel bins, log power in dB) ->
    Conv1D -> GlobalAveragePooling1D -> Dense; SparseCategoricalCrossentropy; Adam."""
    keras, L, rng = start(301)
    m = keras.Sequential([keras.Input((2000,)),
                          L.MelSpectrogram(fft_length=256, sequence_stride=128, sequence_length=200, num_mel_bins=32,
                                           sampling_rate=8000, max_freq=4000),
                          L.Conv1D(8, 3, activation="relu"), L.GlobalAveragePooling1D(), L.Dense(3)])
    feeds = {"audio": tone(rng, 4, 2000), "labels": np.array([0, 2, 1, 2], np.int32)}
    train_fixture("spectral_melspec_conv_adam", m, keras.optimizers.Adam(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  [spec([None, 2000], tf.float32, "audio"), spec([None], tf.int32, "labels")], feeds)


def spectral_stft_layer_inference():
    """Inference: STFTSpectrogram in "log" mode (a 100-point frame padded to a 128-point RFFT, `Real`,
    `Imag`, magnitude) and in "angle" mode, concatenated, Flatten -> Dense; softmax and argmax."""
    keras, L, rng = start(302)
    x = keras.Input((800, 1))
    a = L.STFTSpectrogram(mode="log", frame_length=100, frame_step=50, fft_length=128)(x)
    b = L.STFTSpectrogram(mode="angle", frame_length=64, frame_step=50, fft_length=64, window="hamming")(x)
    h = L.Concatenate()([L.Flatten()(a), L.Flatten()(b)])
    m = keras.Model(x, L.Dense(4, activation="softmax")(h))

    @tf.function(input_signature=[spec([None, 800, 1], tf.float32, "audio")])
    def infer(audio):
        probs = m(audio, training=False)
        return probs, tf.argmax(probs, axis=-1, output_type=tf.int32)

    cf = infer.get_concrete_function()
    variables = captured_variables(cf, m.variables + seed_states(m))
    check_captures("spectral_stft_layer_inference", cf, variables)
    write("spectral_stft_layer_inference", cf, variables, {"audio": tone(rng, 3, 800)[:, :, None]}, 1)


def spectral_signal_ops():
    """`tf.signal` and complex arithmetic without Keras: stft -> |X| (`ComplexAbs`) and the phase of its strong bins (`Angle`),
    a spectral gain (complex `Mul` by a real mask cast to complex), inverse_stft (`IRFFT`) back to audio;
    rfft2d/irfft2d and rfft3d of an image batch; fft2d/ifft2d of `Complex(x, y)`, `Conj`, complex
    `RealDiv` and `AddV2`, `Real`/`Imag`; an odd-length (Bluestein) rfft/irfft pair."""
    keras, L, rng = start(303)
    del keras, L

    @tf.function(input_signature=[spec([None, 512], tf.float32, "audio"), spec([None, 6, 10], tf.float32, "image")])
    def signal_ops(audio, image):
        stft = tf.signal.stft(audio, frame_length=64, frame_step=32, fft_length=64)
        mag = tf.abs(stft)
        # The phase of the strong bins only: a weak bin's phase is as uncertain as float32's rounding
        # of its real and imaginary parts relative to its magnitude (TensorFlow's own float32 phase of a
        # 0.12-magnitude bin is 1.2e-6 off the float64 one).
        phase = tf.where(mag > 4.0, tf.math.angle(stft), tf.zeros_like(mag))
        gain = tf.cast(tf.sigmoid(mag - 1.0), tf.complex64)
        filtered = tf.signal.inverse_stft(stft * gain, frame_length=64, frame_step=32, fft_length=64)
        img = tf.signal.rfft2d(image)
        back = tf.signal.irfft2d(img * tf.complex(0.5, 0.25), fft_length=[6, 10])
        vol = tf.abs(tf.signal.rfft3d(tf.reshape(image, [-1, 2, 3, 10])))
        z = tf.complex(image, tf.reverse(image, axis=[2]))
        zz = tf.signal.ifft2d(tf.signal.fft2d(z) / tf.complex(2.0, -1.0)) + tf.math.conj(z)
        odd = tf.signal.irfft(tf.signal.rfft(audio[:, :101], fft_length=[101]) * tf.complex(1.0, 0.5), fft_length=[101])
        return (mag, phase, filtered, back, vol, tf.math.real(zz), tf.math.imag(zz), odd)

    cf = signal_ops.get_concrete_function()
    feeds = {"audio": tone(rng, 2, 512), "image": rng.standard_normal((3, 6, 10)).astype(np.float32)}
    write("spectral_signal_ops", cf, [], feeds, 1)


def spectral_learned_frontend_sgd():
    """A learned front end: Conv1D filters on the raw waveform, then `tf.signal.stft` magnitude (a Lambda
    layer) -> log1p -> Dense; SGD. The gradient flows back through `ComplexAbs` (complex `DivNoNan`) and
    `RFFT` (its gradient: `IRFFT` and complex arithmetic) into the filters."""
    keras, L, rng = start(304)

    def spectrum(x):
        frames = tf.signal.stft(tf.transpose(x, [0, 2, 1]), frame_length=32, frame_step=16, fft_length=32)
        return tf.math.log1p(tf.abs(frames))

    m = keras.Sequential([keras.Input((256, 1)), L.Conv1D(2, 5, padding="same"), L.Lambda(spectrum),
                          L.Flatten(), L.Dense(2)])
    feeds = {"audio": tone(rng, 3, 256)[:, :, None], "labels": rng.standard_normal((3, 2)).astype(np.float32)}
    train_fixture("spectral_learned_frontend_sgd", m, keras.optimizers.SGD(0.05), keras.losses.MeanSquaredError(),
                  [spec([None, 256, 1], tf.float32, "audio"), spec([None, 2], tf.float32, "labels")], feeds)


def spectral_ctc_gru_sgd():
    """Speech recognition: MelSpectrogram -> Conv1D -> GRU (return_sequences) -> Dense softmax over 6
    classes (blank last), trained with Keras' CTC loss (`ctc_loss_dense`: two `While` loops of log-sum-exp
    over the label lattice, `OneHot`, `MatrixDiagV3`, `TensorScatterAdd`); SGD with momentum. (With Adam the
    GRU biases whose gradients are rounding noise — 1e-9 against 1e-2 — move by lr times that noise's ratio,
    which no two float32 implementations share. One step: the CTC lattice's log-sum-exps leave weights a few
    1e-6 of their scale apart after two, TensorFlow's own float32 noise, past the fixtures' per-element test.)"""
    keras, L, rng = start(305)
    m = keras.Sequential([keras.Input((1600,)),
                          L.MelSpectrogram(fft_length=128, sequence_stride=64, sequence_length=128, num_mel_bins=16,
                                           sampling_rate=8000, max_freq=4000),
                          L.Permute((2, 1)), L.Conv1D(8, 3, padding="same", activation="relu"),
                          L.GRU(8, return_sequences=True), L.Dense(6, activation="softmax")])
    labels = np.array([[1, 2, 3, 0], [4, 4, 2, 0], [3, 1, 0, 0]], np.int32)  # 0-padded (Keras' CTC pads with 0)
    feeds = {"audio": tone(rng, 3, 1600), "labels": labels + (labels > 0)}  # classes 1..5 used, 0 padding
    train_fixture("spectral_ctc_gru_sgd", m, keras.optimizers.SGD(0.05, momentum=0.9), keras.losses.CTC(),
                  [spec([None, 1600], tf.float32, "audio"), spec([None, 4], tf.int32, "labels")], feeds, steps=1)


def spectral_ctc_greedy_decode():
    """Inference: Dense log-probabilities decoded by `keras.ops.ctc_decode` (greedy: `CTCGreedyDecoder`,
    merge_repeated, `SparseToDense` back to a padded batch) with per-sequence lengths."""
    keras, L, rng = start(306)
    m = keras.Sequential([keras.Input((12, 5)), L.Dense(4, activation="softmax")])

    @tf.function(input_signature=[spec([None, 12, 5], tf.float32, "x"), spec([None], tf.int32, "lengths")])
    def decode(x, lengths):
        probs = m(x, training=False)
        paths, scores = keras.ops.ctc_decode(probs, lengths, strategy="greedy")
        return tf.cast(paths[0], tf.int32), scores

    cf = decode.get_concrete_function()
    variables = captured_variables(cf, m.variables)
    check_captures("spectral_ctc_greedy_decode", cf, variables)
    feeds = {"x": rng.standard_normal((3, 12, 5)).astype(np.float32), "lengths": np.array([12, 7, 10], np.int32)}
    write("spectral_ctc_greedy_decode", cf, variables, feeds, 1)


FIXTURES = [spectral_melspec_conv_adam, spectral_stft_layer_inference, spectral_signal_ops,
            spectral_learned_frontend_sgd, spectral_ctc_gru_sgd, spectral_ctc_greedy_decode]


def main():
    run_fixtures(FIXTURES)


if __name__ == "__main__":
    main()
