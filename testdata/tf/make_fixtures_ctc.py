"""Writes the CTC fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python testdata/tf/make_fixtures_ctc.py

Connectionist-temporal-classification losses as speech and handwriting models put them in a graph: the
`CTCLoss` op (`tf.compat.v1.nn.ctc_loss`, Keras 2's `ctc_batch_cost`, `tf.nn.ctc_loss` with sparse labels,
which rotates the blank to the last class around it) with its attributes, its gradient output feeding a
training step, and `keras.ops.ctc_loss` (dense labels: TensorFlow's own forward-backward in ordinary ops).
Cases in README.md.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_tf2 import captured_variables, run_fixtures, write  # noqa: E402


def sparse_labels(rows):
    idx = [[b, t] for b, r in enumerate(rows) for t in range(len(r))]
    vals = [v for r in rows for v in r]
    return (np.array(idx, np.int64).reshape(-1, 2), np.array(vals, np.int32),
            np.array([len(rows), max(len(r) for r in rows)], np.int64))


def ctc_loss_ops():
    """`CTCLoss` on fed logits `[time 12, batch 4, classes 6]` with sequence lengths 12, 9, 5, 12 and labels with
    repeats: the default attributes, `preprocess_collapse_repeated`, `ctc_merge_repeated=False`,
    `ignore_longer_outputs_than_inputs` with one label too long, float64, `tf.nn.ctc_loss` with sparse labels and
    `blank_index=0`; the gradients of all of them with respect to the logits."""
    rng = np.random.default_rng(801)
    rows = [[1, 2, 2, 3], [0, 0, 4], [4, 1], [3, 1, 3, 1, 2, 0]]
    idx, vals, shape = sparse_labels(rows)
    long_rows = [[1, 2], [0, 1, 2, 3, 4, 0, 1, 2, 3, 4], [4], [2]]
    lidx, lvals, lshape = sparse_labels(long_rows)

    @tf.function(input_signature=[tf.TensorSpec([12, 4, 6], tf.float32, name="logits"),
                                  tf.TensorSpec([4], tf.int32, name="lengths")])
    def ops(logits, lengths):
        labels = tf.SparseTensor(tf.constant(idx), tf.constant(vals), tf.constant(shape))
        shifted = tf.SparseTensor(tf.constant(idx), tf.constant(vals + 1), tf.constant(shape))  # blank 0: labels 1..5
        long_labels = tf.SparseTensor(tf.constant(lidx), tf.constant(lvals), tf.constant(lshape))
        v1 = tf.compat.v1.nn.ctc_loss
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(logits)
            losses = [
                v1(labels, logits, lengths),
                v1(labels, logits, lengths, preprocess_collapse_repeated=True),
                v1(labels, logits, lengths, ctc_merge_repeated=False),
                v1(long_labels, logits, lengths, ignore_longer_outputs_than_inputs=True),
                tf.cast(v1(labels, tf.cast(logits, tf.float64) * 1.5, lengths), tf.float32),
                tf.nn.ctc_loss(shifted, logits, None, lengths, logits_time_major=True, blank_index=0),
            ]
            total = tf.add_n([tf.reduce_sum(l * (i + 1.0)) for i, l in enumerate(losses)])
        return losses + [tape.gradient(total, logits)]

    feeds = {"logits": (rng.standard_normal((12, 4, 6)) * 2.0).astype(np.float32),
             "lengths": np.array([12, 9, 5, 12], np.int32)}
    write("ctc_loss_ops", ops.get_concrete_function(), [], feeds, 1)


def ctc_speech_step():
    """A Keras-2-style speech/handwriting training step: features `[batch, time, 8]` -> a dense layer and tanh ->
    logits over 5 labels and the blank -> `ctc_batch_cost`'s form of the loss (`log` of a softmax, made
    time-major, `CTCLoss` on sparse labels built from dense padded labels and their lengths) -> mean -> Adam on
    both layers' weights. Two steps."""
    rng = np.random.default_rng(802)
    inits = {"w1": (rng.standard_normal((8, 16)) * 0.4).astype(np.float32), "b1": np.zeros(16, np.float32),
             "w2": (rng.standard_normal((16, 6)) * 0.4).astype(np.float32), "b2": np.zeros(6, np.float32)}
    v = {k: tf.Variable(val, name=k) for k, val in inits.items()}
    opt = tf.keras.optimizers.Adam(0.01)
    opt.build(list(v.values()))

    @tf.function(input_signature=[tf.TensorSpec([None, 10, 8], tf.float32, name="features"),
                                  tf.TensorSpec([None, 4], tf.int32, name="labels"),
                                  tf.TensorSpec([None], tf.int32, name="label_length"),
                                  tf.TensorSpec([None], tf.int32, name="input_length")])
    def step(features, labels, label_length, input_length):
        with tf.GradientTape() as tape:
            h = tf.tanh(tf.einsum("btf,fh->bth", features, v["w1"]) + v["b1"])
            y_pred = tf.nn.softmax(tf.einsum("bth,hc->btc", h, v["w2"]) + v["b2"])
            # keras 2's ctc_batch_cost
            mask = tf.sequence_mask(label_length, tf.shape(labels)[1])
            where = tf.where(mask)
            sparse = tf.SparseTensor(where, tf.gather_nd(labels, where), tf.cast(tf.shape(labels), tf.int64))
            logp = tf.math.log(tf.transpose(y_pred, [1, 0, 2]) + 1e-7)
            loss = tf.reduce_mean(tf.compat.v1.nn.ctc_loss(sparse, logp, input_length))
        names = list(v)
        grads = tape.gradient(loss, [v[n] for n in names])
        opt.apply_gradients(zip(grads, [v[n] for n in names]))
        return loss

    feeds = {"features": rng.standard_normal((3, 10, 8)).astype(np.float32),
             "labels": np.array([[1, 2, 2, 0], [3, 4, 0, 0], [0, 1, 4, 3]], np.int32),
             "label_length": np.array([3, 2, 4], np.int32),
             "input_length": np.array([10, 7, 9], np.int32)}
    cf = step.get_concrete_function()
    write("ctc_speech_step", cf, captured_variables(cf, list(v.values()) + opt.variables), feeds, 2)


def ctc_keras3_dense_loss():
    """`keras.ops.ctc_loss` (dense labels and lengths, blank 0: Keras's forward recursion in ordinary ops, a
    While over time) and `tf.nn.ctc_loss` with dense labels (TensorFlow's `ctc_loss_dense`: forward-backward in
    ordinary ops, scans over time). (A tape records no gradient for either inside a `tf.function` here.)"""
    import keras
    rng = np.random.default_rng(803)

    @tf.function(input_signature=[tf.TensorSpec([3, 9, 5], tf.float32, name="logits"),
                                  tf.TensorSpec([3, 4], tf.int32, name="target"),
                                  tf.TensorSpec([3], tf.int32, name="target_length"),
                                  tf.TensorSpec([3], tf.int32, name="output_length")])
    def ops(logits, target, target_length, output_length):
        loss = keras.ops.ctc_loss(target, logits, target_length, output_length, mask_index=0)
        dense = tf.nn.ctc_loss(target, logits, target_length, output_length, logits_time_major=False, blank_index=0)
        return [loss, dense]

    feeds = {"logits": rng.standard_normal((3, 9, 5)).astype(np.float32),
             "target": np.array([[1, 2, 2, 4], [3, 1, 0, 0], [4, 4, 0, 0]], np.int32),
             "target_length": np.array([4, 2, 2], np.int32),
             "output_length": np.array([9, 6, 8], np.int32)}
    write("ctc_keras3_dense_loss", ops.get_concrete_function(), [], feeds, 1)


def ctc_beam_search():
    """`CTCBeamSearchDecoder` as `tf.nn.ctc_beam_search_decoder` (merge_repeated=False; beam 4, 3 paths),
    `tf.compat.v1.nn.ctc_beam_search_decoder` (merge_repeated=True; beam 6, 2 paths) and float64 give it on fed
    logits `[10, 3, 5]` with lengths 10, 7, 3; uniform logits (every prefix tied: which are kept and in which
    order is decided by TensorFlow's TopN heap); `keras.ops.ctc_decode(strategy="beam_search")` on batch-major
    softmax outputs. Each decoded sparse tensor fetched as indices, values and dense shape."""
    import keras
    rng = np.random.default_rng(804)

    def flat(decoded, log_probs):
        out = []
        for sp in decoded:
            out += [sp.indices, sp.values, sp.dense_shape]
        return out + [log_probs]

    @tf.function(input_signature=[tf.TensorSpec([10, 3, 5], tf.float32, name="logits"),
                                  tf.TensorSpec([3], tf.int32, name="lengths")])
    def ops(logits, lengths):
        outs = flat(*tf.nn.ctc_beam_search_decoder(logits, lengths, beam_width=4, top_paths=3))
        outs += flat(*tf.compat.v1.nn.ctc_beam_search_decoder(logits, lengths, beam_width=6, top_paths=2))
        d, lp = tf.nn.ctc_beam_search_decoder(tf.cast(logits, tf.float64) * 0.7, lengths, beam_width=3, top_paths=2)
        outs += flat(d, tf.cast(lp, tf.float32))
        outs += flat(*tf.nn.ctc_beam_search_decoder(tf.zeros([6, 2, 4]), [6, 5], beam_width=5, top_paths=4))
        dense, scores = keras.ops.ctc_decode(tf.nn.softmax(tf.transpose(logits, [1, 0, 2])), lengths,
                                             strategy="beam_search", beam_width=5, top_paths=2, mask_index=4)
        return outs + [dense, scores]

    feeds = {"logits": (rng.standard_normal((10, 3, 5)) * 1.5).astype(np.float32),
             "lengths": np.array([10, 7, 3], np.int32)}
    write("ctc_beam_search", ops.get_concrete_function(), [], feeds, 1)


def ctc_edit_distance_eval():
    """An evaluation step's label error rate: `tf.nn.ctc_greedy_decoder` and `ctc_beam_search_decoder` on fed
    logits `[9, 4, 5]` (lengths 9, 6, 4, 1), `tf.edit_distance` (`EditDistance`) of each decoding against
    sparse int64 labels, normalized (one empty label row: infinity where something was decoded) and not; a
    string hypothesis against string truths (`tf.strings` tokens), and the mean error rate."""
    rng = np.random.default_rng(805)
    rows = [[1, 2, 2, 3], [0, 3], [], [2]]
    idx = np.array([[b, t] for b, r in enumerate(rows) for t in range(len(r))], np.int64).reshape(-1, 2)
    vals = np.array([v for r in rows for v in r], np.int64)

    @tf.function(input_signature=[tf.TensorSpec([9, 4, 5], tf.float32, name="logits"),
                                  tf.TensorSpec([4], tf.int32, name="lengths")])
    def ops(logits, lengths):
        truth = tf.SparseTensor(tf.constant(idx), tf.constant(vals), tf.constant([4, 4], tf.int64))
        (greedy,), _ = tf.nn.ctc_greedy_decoder(logits, lengths)
        (beam,), _ = tf.nn.ctc_beam_search_decoder(logits, lengths, beam_width=3, top_paths=1)
        rates = [tf.edit_distance(greedy, truth), tf.edit_distance(greedy, truth, normalize=False),
                 tf.edit_distance(beam, truth)]
        words = tf.strings.split(tf.constant(["the cat sat", "a dog", "", "hello world again"]))
        said = tf.strings.split(tf.constant(["the bat sat", "a dog barked", "oh", "world again"]))
        rates.append(tf.edit_distance(said.to_sparse(), words.to_sparse()))
        return rates + [tf.reduce_mean(tf.where(tf.math.is_finite(rates[0]), rates[0], 0.0))]

    feeds = {"logits": (rng.standard_normal((9, 4, 5)) * 2.0).astype(np.float32),
             "lengths": np.array([9, 6, 4, 1], np.int32)}
    write("ctc_edit_distance_eval", ops.get_concrete_function(), [], feeds, 1)


FIXTURES = [ctc_loss_ops, ctc_speech_step, ctc_keras3_dense_loss, ctc_beam_search, ctc_edit_distance_eval]


def main():
    run_fixtures([f for f in FIXTURES if len(sys.argv) < 2 or f.__name__ in sys.argv[1:]])


if __name__ == "__main__":
    main()
