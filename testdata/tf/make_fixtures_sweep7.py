"""Writes the seventh sweep of TensorFlow graphs (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        testdata/tf/make_fixtures_sweep7.py [--out DIR] [NAME...]

Kinds of TF2 programs the earlier sweeps do not export, through make_fixtures_tf2.write (or `write_strings`
below, for string feeds and fetches): a mixed_float16 transformer block with LossScaleOptimizer(Adam), the
newer Keras optimizers (Muon, ScheduleFreeAdamW, gradient accumulation with Adamax, weight decay and global
clipnorm), Keras int8 quantization and LoRA fine-tuning, lookup tables built inside a tf.function
(StaticHashTable, StaticVocabularyTable, MutableHashTable, DenseHashTable) feeding an Embedding, string ops
(ngrams, unicode_decode, hash buckets strong, regex_full_match), data-dependent while loops with TensorArrays
and variable writes, tf.scan/tf.foldl RNNs, unique_with_counts/searchsorted/shuffle, sparse and ragged ops,
image ops (hsv_to_rgb, contrast, bounding boxes, nearest resize), stft/inverse_stft losses, nested
tf.functions. Cases: README.md.
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures_tf2  # noqa: E402
from make_fixtures_keras_sweep import check_captures, seed_states, set_half_tolerance  # noqa: E402,F401
from make_fixtures_sweep4 import f32, fn_fixture, i32, i64, run_main, spec, start  # noqa: E402,F401
from make_fixtures_tf2 import captured_variables, write  # noqa: E402,F401

strs = tf.string


def write_strings(name, cf, variables, feeds, steps, string_feeds):
    """make_fixtures_tf2.write for a function with string inputs or outputs: string inputs go in the
    manifest's `string_feeds` (given as `--feed NAME=JSON`), string outputs in `expected_strings`."""
    out_dir = make_fixtures_tf2.OUT
    graph_def = cf.graph.as_graph_def()
    tf.io.write_graph(graph_def, out_dir, name + ".pbtxt", as_text=True)
    names = make_fixtures_tf2.capture_names(name, cf, variables)
    for var, init in variables:
        var.assign(init)
    all_feeds = {**feeds, **{k: np.array([s.encode() for s in np.ravel(v)], dtype=object).reshape(np.shape(v))
                             for k, v in string_feeds.items()}}
    inputs = [tf.constant(all_feeds[s.name]) for s in cf.structured_input_signature[0]]
    out = None
    for _ in range(steps):
        out = cf(*inputs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    fetch = [t.name for t in cf.outputs]
    numeric, strings = {}, {}
    for f, o in zip(fetch, outs):
        v = o.numpy()
        v = np.asarray(v, dtype=object) if isinstance(v, bytes) else np.asarray(v)
        if v.dtype.kind in "OS":
            strings[f] = {"shape": list(v.shape), "data": [bytes(s).decode() for s in v.ravel()]}
        else:
            numeric[f] = np.array(v, order="C")
    arr = lambda v: np.array(v, order="C")  # noqa: E731
    manifest = {"graph": name + ".pbtxt", "feeds": None, "vars": None, "fetch": [f for f in fetch if f in numeric],
                "target": [], "steps": steps, "expected_fetches": name + ".expected.safetensors",
                "expected_vars": None, "racy": False, "outcomes": None,
                "string_feeds": {k: {"dtype": "string", "shape": list(np.shape(v)), "data": [str(s) for s in np.ravel(v)]}
                                 for k, v in string_feeds.items()},
                "expected_strings": strings}
    if feeds:
        save_file({k: arr(v) for k, v in feeds.items()}, os.path.join(out_dir, name + ".feeds.safetensors"))
        manifest["feeds"] = name + ".feeds.safetensors"
    if variables:
        save_file({names[id(v)]: arr(init) for v, init in variables}, os.path.join(out_dir, name + ".vars.safetensors"))
        save_file({names[id(v)]: arr(v.numpy()) for v, _ in variables},
                  os.path.join(out_dir, name + ".expected_vars.safetensors"))
        manifest["vars"] = name + ".vars.safetensors"
        manifest["expected_vars"] = name + ".expected_vars.safetensors"
    save_file(numeric, os.path.join(out_dir, name + ".expected.safetensors"))
    with open(os.path.join(out_dir, name + ".json"), "w") as fh:
        json.dump(manifest, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    print(name, sorted({n.op for n in graph_def.node}), "strings:", strings)


def fn_fixture_strings(name, fn, candidates, feeds, string_feeds, steps=2):
    cf = fn.get_concrete_function()
    variables = captured_variables(cf, candidates)
    write_strings(name, cf, variables, feeds, steps, string_feeds)
    return cf


def keras_step(name, m, opt, loss_fn, specs, feeds, steps=2, extra_vars=()):
    """A Keras training step written as users write a custom train_step (like train_fixture, but the
    optimizer may be any Keras 3 optimizer and its variables are all captured)."""
    opt.build(m.trainable_variables)

    @tf.function(input_signature=specs)
    def train(*args):
        *inputs, labels = args
        x = inputs[0] if len(inputs) == 1 else list(inputs)
        with tf.GradientTape() as tape:
            pred = m(x, training=True)
            loss = loss_fn(labels, pred)
            if m.losses:
                loss = loss + tf.add_n(m.losses)
        grads = tape.gradient(loss, m.trainable_variables)
        opt.apply_gradients(zip(grads, m.trainable_variables))
        return loss, pred

    fn_fixture(name, train, m.variables + opt.variables + seed_states(m) + list(extra_vars), feeds, steps)


# 1 ------------------------------------------------------------------------------------------------
def sweep7_mixed_float16_transformer_lossscale_adam():
    """mixed_float16 transformer encoder block: Embedding, MultiHeadAttention (float16 einsums, softmax in
    float32), residual LayerNormalization, Dense gelu, a float32 head; LossScaleOptimizer around Adam
    (dynamic loss scaling: IsFinite/All on float16 gradients, conditional apply, scale growth counter)."""
    keras, L, rng = start(701)
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        inp = keras.Input((6,), dtype="int32")
        x = L.Embedding(20, 8)(inp)
        a = L.MultiHeadAttention(num_heads=2, key_dim=4, use_bias=False)(x, x)  # a key bias has a zero gradient: Adam would step by float16 noise
        x = L.LayerNormalization()(x + a)
        f = L.Dense(8)(L.Dense(16, activation="gelu")(x))
        x = L.LayerNormalization()(x + f)
        out = L.Dense(3, dtype="float32")(L.GlobalAveragePooling1D()(x))
        m = keras.Model(inp, out)
        # epsilon 1e-3: gradients that are zero in exact arithmetic (float16 rounding noise, ~1e-6) must not take lr-sized Adam steps
        opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-2, epsilon=1e-3))
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        opt.build(m.trainable_variables)

        @tf.function(input_signature=[spec([None, 6], i32, "tokens"), spec([None], i32, "labels")])
        def train(tokens, labels):
            with tf.GradientTape() as tape:
                logits = m(tokens, training=True)
                loss = loss_fn(labels, logits)
                scaled = opt.scale_loss(loss)
            grads = tape.gradient(scaled, m.trainable_variables)
            opt.apply_gradients(zip(grads, m.trainable_variables))
            return loss, logits

        feeds = {"tokens": rng.integers(0, 20, (4, 6)).astype(np.int32), "labels": np.array([0, 1, 2, 1], np.int32)}
        name = "sweep7_mixed_float16_transformer_lossscale_adam"
        fn_fixture(name, train, m.variables + opt.variables, feeds, 3)
        set_half_tolerance(name, 0.002)
    finally:
        keras.mixed_precision.set_global_policy("float32")


# 2 ------------------------------------------------------------------------------------------------
def sweep7_muon_mlp():
    """Keras 3's Muon optimizer (Newton-Schulz orthogonalization of 2-D gradients by repeated matmuls,
    AdamW for the 1-D biases and the excluded output layer) on an MLP classifier."""
    keras, L, rng = start(702)
    m = keras.Sequential([keras.Input((6,)), L.Dense(8, activation="relu"), L.Dense(8, activation="relu"), L.Dense(3)])
    feeds = {"x": rng.standard_normal((5, 6)).astype(np.float32), "labels": np.array([0, 1, 2, 1, 0], np.int32)}
    keras_step("sweep7_muon_mlp", m, keras.optimizers.Muon(learning_rate=0.02),
               keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               [spec([None, 6], f32, "x"), spec([None], i32, "labels")], feeds, 2)


# 3 ------------------------------------------------------------------------------------------------
def sweep7_schedule_free_adamw():
    """Keras 3's ScheduleFreeAdamW (interpolated iterates, warmup, running weighting by the learning rate's
    square) on a small conv classifier."""
    keras, L, rng = start(703)
    m = keras.Sequential([keras.Input((6, 6, 2)), L.Conv2D(4, 3, activation="relu"), L.Flatten(), L.Dense(3)])
    feeds = {"x": rng.standard_normal((4, 6, 6, 2)).astype(np.float32), "labels": np.array([0, 1, 2, 1], np.int32)}
    keras_step("sweep7_schedule_free_adamw", m, keras.optimizers.ScheduleFreeAdamW(0.01, warmup_steps=2),
               keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               [spec([None, 6, 6, 2], f32, "x"), spec([None], i32, "labels")], feeds, 3)


# 4 ------------------------------------------------------------------------------------------------
def sweep7_grad_accum_adamax_wd_clip_schedule():
    """Adamax with weight decay, global_clipnorm, a PiecewiseConstantDecay schedule and
    gradient_accumulation_steps=2 (the step accumulates into variables and applies every second call:
    a conditional whose branches write variables); 3 steps so both branches run."""
    keras, L, rng = start(704)
    m = keras.Sequential([keras.Input((5,)), L.Dense(6, activation="tanh"), L.Dense(1)])
    sched = keras.optimizers.schedules.PiecewiseConstantDecay([1, 2], [0.05, 0.02, 0.01])
    opt = keras.optimizers.Adamax(sched, weight_decay=0.01, global_clipnorm=0.5, gradient_accumulation_steps=2)
    feeds = {"x": rng.standard_normal((6, 5)).astype(np.float32), "y": rng.standard_normal((6, 1)).astype(np.float32)}
    keras_step("sweep7_grad_accum_adamax_wd_clip_schedule", m, opt, keras.losses.MeanSquaredError(),
               [spec([None, 5], f32, "x"), spec([None, 1], f32, "y")], feeds, 3)


# 5 ------------------------------------------------------------------------------------------------
def sweep7_int8_quantized_dense_inference():
    """Keras 3 post-training int8 quantization (`model.quantize("int8")`): Dense and EinsumDense kernels
    stored as int8 with per-channel scales, inputs quantized on the fly (abs-max, round, clip, cast),
    int8 x int8 matmuls accumulated in int32, dequantized; plus an int8 Embedding. Inference."""
    keras, L, rng = start(705)
    inp = keras.Input((5,), dtype="int32")
    e = L.Embedding(12, 6)(inp)
    h = L.Dense(8, activation="relu")(e)
    h = L.EinsumDense("abc,cd->abd", output_shape=(5, 4), bias_axes="d")(h)
    out = L.Dense(3)(L.Flatten()(h))
    m = keras.Model(inp, out)
    m.quantize("int8")

    @tf.function(input_signature=[spec([None, 5], i32, "tokens")])
    def infer(tokens):
        return m(tokens, training=False)

    feeds = {"tokens": rng.integers(0, 12, (3, 5)).astype(np.int32)}
    fn_fixture("sweep7_int8_quantized_dense_inference", infer, m.variables, feeds, 1)


# 6 ------------------------------------------------------------------------------------------------
def sweep7_lora_finetune_adam():
    """LoRA fine-tuning: Dense and Embedding with `enable_lora(rank)` (frozen kernels, trainable A/B
    factors added to the kernel each call), Adam on the LoRA weights only."""
    keras, L, rng = start(706)
    inp = keras.Input((4,), dtype="int32")
    emb = L.Embedding(10, 6)
    d1 = L.Dense(8, activation="relu")
    d2 = L.Dense(3)
    out = d2(d1(L.GlobalAveragePooling1D()(emb(inp))))
    m = keras.Model(inp, out)
    emb.enable_lora(2)
    d1.enable_lora(2)
    # LoRA B starts at zero; give it values so the step exercises every path.
    for b in (emb.lora_embeddings_b, d1.lora_kernel_b):
        b.assign(0.1 * rng.standard_normal(b.shape).astype(np.float32))
    feeds = {"tokens": rng.integers(0, 10, (5, 4)).astype(np.int32), "labels": np.array([0, 1, 2, 1, 0], np.int32)}
    keras_step("sweep7_lora_finetune_adam", m, keras.optimizers.Adam(0.01),
               keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               [spec([None, 4], i32, "tokens"), spec([None], i32, "labels")], feeds, 2)


# 7 ------------------------------------------------------------------------------------------------
def sweep7_lookup_tables_in_function_embedding_sgd():
    """Lookup tables built inside the tf.function (each call builds and fills them, so the graph holds
    them whole): StaticHashTable from a KeyValueTensorInitializer (HashTableV2, LookupTableImportV2,
    LookupTableFindV2) with string keys, StaticVocabularyTable with hashed out-of-vocabulary buckets,
    an int64 StaticHashTable, a MutableHashTable (insert, find with default, size, export) and a
    DenseHashTable; the ids feed an Embedding trained by SGD. String feed."""
    keras, L, rng = start(707)
    emb = tf.Variable((0.2 * rng.standard_normal((9, 4))).astype(np.float32), name="emb")
    w = tf.Variable((0.3 * rng.standard_normal((4, 1))).astype(np.float32), name="w")
    params = [emb, w]

    @tf.function(input_signature=[spec([None], strs, "words"), spec([None], i64, "codes"), spec([None], f32, "y")])
    def train(words, codes, y):
        vocab = tf.constant(["the", "cat", "sat", "mat"])
        t1 = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(vocab, tf.range(1, 5, dtype=i64)), 0)
        t2 = tf.lookup.StaticVocabularyTable(tf.lookup.KeyValueTensorInitializer(vocab, tf.range(4, dtype=i64)), 3)
        t3 = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant([10, 20, 30], i64), tf.constant([0.5, 1.5, 2.5], f32)), -1.0)
        mt = tf.lookup.experimental.MutableHashTable(strs, i64, default_value=-1)
        mt.insert(vocab, tf.constant([7, 6, 5, 4], i64))
        mt.insert(tf.constant(["cat"]), tf.constant([8], i64))
        dt = tf.lookup.experimental.DenseHashTable(i64, f32, default_value=0.0, empty_key=-1, deleted_key=-2)
        dt.insert(tf.constant([10, 30], i64), tf.constant([3.0, 4.0]))
        ids1 = t1.lookup(words)
        ids2 = t2.lookup(words)
        scale = t3.lookup(codes) + dt.lookup(codes)
        mids = mt.lookup(words)
        with tf.GradientTape() as tape:
            e = tf.gather(emb, ids1) + tf.gather(emb, ids2 + 2)
            pred = tf.squeeze(tf.matmul(e, w), -1) * scale
            loss = tf.reduce_mean(tf.square(pred - y))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.1 * tf.convert_to_tensor(g))
        keys, values = mt.export()
        order = tf.argsort(values)
        return loss, ids1, ids2, mids, scale, mt.size(), tf.gather(values, order), tf.gather(keys, order)

    feeds = {"codes": np.array([10, 20, 99, 30, 10], np.int64), "y": rng.standard_normal(5).astype(np.float32)}
    fn_fixture_strings("sweep7_lookup_tables_in_function_embedding_sgd", train, params, feeds,
                       {"words": ["cat", "dog", "the", "mat", "zebra"]}, 2)


# 8 ------------------------------------------------------------------------------------------------
def sweep7_string_features_ngrams_hash_adam():
    """Text features with tf.strings: lower/upper, strip, regex_full_match with a fed pattern
    (RegexFullMatch) and a constant one (StaticRegexFullMatch), split into words (StringSplitV2), word
    bigrams (StringNGrams), unicode_decode (UnicodeDecodeWithOffsets) character counts,
    to_hash_bucket_strong (keyed SipHash) and to_hash_bucket (Fingerprint64) ids into an embedding bag
    (ragged mean), tf.strings.length in UTF8_CHAR units; Adam."""
    keras, L, rng = start(708)
    emb = tf.Variable((0.2 * rng.standard_normal((16, 4))).astype(np.float32), name="emb")
    w = tf.Variable((0.3 * rng.standard_normal((6, 1))).astype(np.float32), name="w")
    params = [emb, w]
    opt = keras.optimizers.Adam(0.01)
    opt.build(params)

    @tf.function(input_signature=[spec([None], strs, "text"), spec([], strs, "pattern"), spec([None], f32, "y")])
    def train(text, pattern, y):
        clean = tf.strings.lower(tf.strings.strip(text))
        words = tf.strings.split(clean)
        bigrams = tf.strings.ngrams(words, 2, separator="_")
        ids = tf.strings.to_hash_bucket_strong(words, 16, key=[7, 11])
        bids = tf.strings.to_hash_bucket(bigrams, 16)
        chars = tf.strings.unicode_decode(text, "UTF-8")
        nchar = tf.cast(chars.row_lengths(), f32)
        match = tf.cast(tf.strings.regex_full_match(text, pattern), f32)
        static = tf.cast(tf.strings.regex_full_match(clean, r".*\d.*"), f32)
        ulen = tf.cast(tf.strings.length(text, unit="UTF8_CHAR"), f32)
        with tf.GradientTape() as tape:
            e1 = tf.reduce_mean(tf.ragged.map_flat_values(tf.gather, emb, ids), 1)
            e2 = tf.reduce_sum(tf.ragged.map_flat_values(tf.gather, emb, bids), 1)
            feats = tf.concat([e1 + 0.5 * e2, tf.stack([match, static], 1)], 1)
            pred = tf.squeeze(tf.matmul(feats, w), -1) + 0.01 * nchar
            loss = tf.reduce_mean(tf.square(pred - y))
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip([tf.convert_to_tensor(g) for g in grads], params))
        return (loss, ids.flat_values, bids.flat_values, chars.flat_values, nchar, match, static, ulen,
                tf.strings.upper(clean), bigrams.flat_values)

    feeds = {"y": rng.standard_normal(4).astype(np.float32)}
    text = ["  The Cat sat 2 times ", "héllo wörld again", "ONE", "a b c d e"]
    fn_fixture_strings("sweep7_string_features_ngrams_hash_adam", train, params + opt.variables, feeds,
                       {"text": text, "pattern": "[a-zA-Z ]+"}, 2)


# 9 ------------------------------------------------------------------------------------------------
def sweep7_while_convergence_tensorarray_assign():
    """A data-dependent while loop: fixed-point iterations of x <- tanh(W x + b) until the change is
    below a tolerance (the trip count depends on the fed input and on the variable), each iterate written
    to a dynamic-size TensorArray; a variable incremented inside the loop body (a stateful While); the
    iterates stacked and reduced; W trained by a gradient through the last few unrolled steps."""
    keras, L, rng = start(709)
    W = tf.Variable((0.4 * rng.standard_normal((4, 4))).astype(np.float32), name="W")
    b = tf.Variable((0.1 * rng.standard_normal(4)).astype(np.float32), name="b")
    calls = tf.Variable(np.int64(0), name="calls")

    @tf.function(input_signature=[spec([None, 4], f32, "x0"), spec([], f32, "tol")])
    def train(x0, tol):
        ta = tf.TensorArray(f32, size=0, dynamic_size=True, element_shape=tf.TensorShape([None, 4]))

        def cond(i, x, delta, ta):
            return tf.logical_and(delta > tol, i < 50)

        def body(i, x, delta, ta):
            nx = tf.tanh(tf.matmul(x, W) + b)
            calls.assign_add(1)
            return i + 1, nx, tf.reduce_max(tf.abs(nx - x)), ta.write(i, nx)

        n, xf, delta, ta = tf.while_loop(cond, body, [tf.constant(0), x0, tf.constant(np.inf, f32), ta])
        traj = ta.stack()
        with tf.GradientTape() as tape:
            x = tf.stop_gradient(xf)
            for _ in range(3):
                x = tf.tanh(tf.matmul(x, W) + b)
            loss = tf.reduce_mean(tf.square(x - xf)) + 0.01 * tf.reduce_sum(tf.square(W))
        gW, gb = tape.gradient(loss, [W, b])
        W.assign_sub(0.5 * gW)
        b.assign_sub(0.5 * gb)
        return n, xf, delta, tf.reduce_mean(traj, 0), tf.shape(traj), loss

    feeds = {"x0": rng.standard_normal((3, 4)).astype(np.float32), "tol": np.float32(1e-3)}
    fn_fixture("sweep7_while_convergence_tensorarray_assign", train, [W, b, calls], feeds, 2)


# 10 -----------------------------------------------------------------------------------------------
def sweep7_scan_foldl_rnn_sgd():
    """An Elman RNN written with tf.scan (a While over TensorLists) trained by SGD through the scan's
    gradient, a tf.foldl accumulating a discounted loss, and tf.map_fn over the batch with a captured
    variable."""
    keras, L, rng = start(710)
    Wx = tf.Variable((0.4 * rng.standard_normal((3, 5))).astype(np.float32), name="Wx")
    Wh = tf.Variable((0.3 * rng.standard_normal((5, 5))).astype(np.float32), name="Wh")
    Wo = tf.Variable((0.3 * rng.standard_normal((5, 1))).astype(np.float32), name="Wo")
    params = [Wx, Wh, Wo]

    @tf.function(input_signature=[spec([None, None, 3], f32, "seq"), spec([None, None], f32, "target")])
    def train(seq, target):
        with tf.GradientTape() as tape:
            xs = tf.transpose(seq, [1, 0, 2])
            h0 = tf.zeros([tf.shape(seq)[0], 5])
            hs = tf.scan(lambda h, x: tf.tanh(tf.matmul(x, Wx) + tf.matmul(h, Wh)), xs, initializer=h0)
            ys = tf.squeeze(tf.einsum("tbh,ho->tbo", hs, Wo), -1)
            errs = tf.reduce_mean(tf.square(ys - tf.transpose(target)), 1)
            loss = tf.foldl(lambda acc, e: 0.9 * acc + e, errs, initializer=tf.constant(0.0))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.05 * g)
        norms = tf.map_fn(lambda s: tf.norm(tf.matmul(s, Wx)), seq)
        return loss, ys, norms

    feeds = {"seq": rng.standard_normal((2, 5, 3)).astype(np.float32), "target": rng.standard_normal((2, 5)).astype(np.float32)}
    fn_fixture("sweep7_scan_foldl_rnn_sgd", train, params, feeds, 2)


# 11 -----------------------------------------------------------------------------------------------
def sweep7_unique_searchsorted_shuffle():
    """Counting and searching: unique_with_counts (UniqueWithCounts), tf.unique along an axis (UniqueV2),
    searchsorted left and right (LowerBound, UpperBound) on a variable of sorted boundaries updated in the
    step, argsort stable, tf.math.unsorted_segment_sqrt_n, in_top_k, a seeded tf.random.shuffle
    (RandomShuffle) and tf.random.experimental.stateless_shuffle."""
    keras, L, rng = start(711)
    bounds = tf.Variable(np.array([-1.0, -0.2, 0.0, 0.5, 1.5], np.float32), name="bounds")

    @tf.function(input_signature=[spec([None], i32, "ids"), spec([None], f32, "values"), spec([None, 3], i64, "rows")])
    def step(ids, values, rows):
        u, idx, cnt = tf.unique_with_counts(ids)
        ur, ridx = tf.raw_ops.UniqueV2(x=rows, axis=[0])
        left = tf.searchsorted(bounds, values, side="left")
        right = tf.searchsorted(bounds, values, side="right", out_type=i64)
        order = tf.argsort(values, stable=True)
        sq = tf.math.unsorted_segment_sqrt_n(values, idx, tf.size(u))
        bounds.assign(tf.sort(bounds + 0.1 * tf.reduce_mean(values)))
        sh = tf.random.shuffle(tf.range(8), seed=5)
        ssh = tf.random.experimental.stateless_shuffle(tf.range(6), seed=[1, 2])
        topk = tf.math.in_top_k(tf.cast(idx, i32), tf.reshape(values[:4], [1, 4]) * tf.ones([tf.size(idx), 1]), 2)
        return u, idx, cnt, ur, ridx, left, right, order, sq, sh, ssh, topk

    feeds = {"ids": np.array([4, 2, 4, 7, 2, 2, 9], np.int32),
             "values": np.array([0.3, -0.5, 0.0, 2.0, -1.0, 0.5, 1.2], np.float32),
             "rows": np.array([[1, 2, 3], [0, 0, 0], [1, 2, 3], [4, 5, 6]], np.int64)}
    fn_fixture("sweep7_unique_searchsorted_shuffle", step, [bounds], feeds, 2)


# 12 -----------------------------------------------------------------------------------------------
def sweep7_sparse_ops_step():
    """tf.sparse beyond matmul: sparse.add of two SparseTensors (SparseAdd) and with a dense tensor
    (SparseTensorDenseAdd), sparse.concat, sparse.slice, sparse.fill_empty_rows, sparse.reshape,
    sparse.maximum, sparse.reduce_max (SparseReduceMax), sparse * dense (SparseDenseCwiseMul), sparse.retain,
    sparse_dense_matmul with adjoint_a, and a training step through sparse.segment_sum (SparseSegmentSum
    and its gradient); SGD."""
    keras, L, rng = start(712)
    w = tf.Variable((0.3 * rng.standard_normal((6, 2))).astype(np.float32), name="w")

    @tf.function(input_signature=[spec([None, 2], i64, "indices"), spec([None], f32, "values"), spec([2], i64, "shape"),
                                  spec([None, 6], f32, "dense")])
    def step(indices, values, shape, dense):
        a = tf.SparseTensor(indices, values, shape)
        b = tf.SparseTensor(tf.constant([[0, 0], [1, 2], [3, 5]], i64), tf.constant([1.0, -2.0, 0.5]), shape)
        s = tf.sparse.add(a, b)
        sd = tf.sparse.add(a, dense)
        cat = tf.sparse.concat(1, [a, b])
        sl = tf.sparse.slice(a, [1, 0], [2, 4])
        filled, empty = tf.sparse.fill_empty_rows(a, -1.0)
        rs = tf.sparse.reshape(a, [-1, 3])
        mx = tf.sparse.maximum(a, b)
        rmax = tf.sparse.reduce_max(a, axis=1)
        cw = a * dense
        kept = tf.sparse.retain(a, a.values > 0.5)
        mm = tf.sparse.sparse_dense_matmul(a, dense, adjoint_a=True)
        with tf.GradientTape() as tape:
            seg = tf.sparse.segment_sum(w, indices[:, 1], indices[:, 0], num_segments=shape[0])
            loss = tf.reduce_sum(tf.square(seg)) + tf.reduce_sum(tf.sparse.sparse_dense_matmul(a, w))
        g = tape.gradient(loss, w)
        w.assign_sub(0.1 * tf.convert_to_tensor(g))
        dense_of = lambda t: tf.sparse.to_dense(tf.sparse.reorder(t))  # noqa: E731
        return (loss, dense_of(s), sd, dense_of(cat), dense_of(sl), dense_of(filled), empty, dense_of(rs),
                dense_of(mx), rmax, dense_of(cw), dense_of(kept), mm)

    feeds = {"indices": np.array([[0, 1], [0, 4], [2, 0], [2, 5], [3, 3]], np.int64),
             "values": np.array([0.7, -1.2, 2.0, 0.4, 1.1], np.float32), "shape": np.array([4, 6], np.int64),
             "dense": rng.standard_normal((4, 6)).astype(np.float32)}
    fn_fixture("sweep7_sparse_ops_step", step, [w], feeds, 2)


# 13 -----------------------------------------------------------------------------------------------
def sweep7_ragged_ops_adam():
    """Ragged tensors in a step: from_value_rowids, tf.ragged.range (RaggedRange), ragged gather of rows
    (RaggedGather), ragged boolean_mask, ragged reduce_max/reduce_sum, ragged.stack/concat along rows,
    ragged to_tensor with a shape, row_lengths/nested_row_splits, and a ragged embedding mean trained
    with Adam."""
    keras, L, rng = start(713)
    emb = tf.Variable((0.2 * rng.standard_normal((10, 3))).astype(np.float32), name="emb")
    opt = keras.optimizers.Adam(0.01)
    opt.build([emb])

    @tf.function(input_signature=[spec([None], i64, "ids"), spec([None], i64, "rowids"), spec([], i64, "nrows"),
                                  spec([None], i64, "starts"), spec([None], f32, "y")])
    def train(ids, rowids, nrows, starts, y):
        rt = tf.RaggedTensor.from_value_rowids(ids, rowids, nrows)
        rr = tf.ragged.range(starts, starts + 3, 2)
        picked = tf.gather(rt, [2, 0, 2])
        masked = tf.ragged.boolean_mask(rt, rt > 3)
        both = tf.concat([rt, rr], axis=0)
        stacked = tf.ragged.stack([rt, rr], axis=1)
        with tf.GradientTape() as tape:
            vecs = tf.ragged.map_flat_values(tf.gather, emb, rt)
            mean = tf.reduce_mean(vecs, 1)
            mean = tf.where(tf.math.is_nan(mean), tf.zeros_like(mean), mean)
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(mean, 1) - y)) + 0.1 * tf.reduce_mean(tf.maximum(tf.reduce_max(vecs, 1), -1.0))
        g = tape.gradient(loss, [emb])
        opt.apply_gradients(zip([tf.convert_to_tensor(g[0])], [emb]))
        return (loss, rr.to_tensor(-1), picked.to_tensor(-1, shape=[3, 4]), masked.to_tensor(-1), both.to_tensor(0),
                stacked.to_tensor(0), tf.reduce_max(rt, 1), tf.reduce_sum(masked, 1), rt.row_lengths())

    feeds = {"ids": np.array([1, 4, 2, 7, 5, 9, 0], np.int64), "rowids": np.array([0, 0, 1, 1, 1, 3, 3], np.int64),
             "nrows": np.int64(4), "starts": np.array([0, 5, 2, 1], np.int64), "y": rng.standard_normal(4).astype(np.float32)}
    fn_fixture("sweep7_ragged_ops_adam", train, [emb] + opt.variables, feeds, 2)


# 14 -----------------------------------------------------------------------------------------------
def sweep7_image_ops_unet_adam():
    """Image ops around a tiny U-Net: nearest-neighbour resize (ResizeNearestNeighbor and its gradient,
    Keras UpSampling2D), hsv_to_rgb (HSVToRGB), adjust_contrast (AdjustContrastv2), adjust_gamma,
    per_image_standardization, rot90, flip_left_right, central_crop, pad_to_bounding_box,
    draw_bounding_boxes (DrawBoundingBoxesV2), stateless_random_flip_up_down; Adam."""
    keras, L, rng = start(714)
    inp = keras.Input((8, 8, 3))
    d = L.Conv2D(4, 3, padding="same", activation="relu")(inp)
    p = L.MaxPooling2D(2)(d)
    u = L.UpSampling2D(2)(L.Conv2D(4, 3, padding="same", activation="relu")(p))
    out = L.Conv2D(3, 1, activation="sigmoid")(L.Concatenate()([u, d]))
    m = keras.Model(inp, out)
    opt = keras.optimizers.Adam(0.01)
    opt.build(m.trainable_variables)

    @tf.function(input_signature=[spec([None, 8, 8, 3], f32, "image"), spec([None, 4, 4], f32, "boxes")])
    def train(image, boxes):
        x = tf.image.per_image_standardization(image)
        aug = tf.image.stateless_random_flip_up_down(tf.image.rot90(tf.image.flip_left_right(image), 1), seed=[3, 4])
        with tf.GradientTape() as tape:
            y = m(x, training=True)
            small = tf.image.resize(y, [5, 5], method="nearest")
            loss = tf.reduce_mean(tf.square(y - aug)) + 0.1 * tf.reduce_mean(small)
        grads = tape.gradient(loss, m.trainable_variables)
        opt.apply_gradients(zip(grads, m.trainable_variables))
        rgb = tf.image.hsv_to_rgb(tf.clip_by_value(image, 0.0, 1.0))
        con = tf.image.adjust_contrast(image, 1.7)
        gam = tf.image.adjust_gamma(tf.abs(image), 0.8, 1.2)
        crop = tf.image.pad_to_bounding_box(tf.image.central_crop(image, 0.5), 1, 2, 7, 8)
        drawn = tf.image.draw_bounding_boxes(tf.clip_by_value(image, 0.0, 1.0), boxes, tf.constant([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0]]))
        big = tf.raw_ops.ResizeNearestNeighbor(images=image, size=[11, 13], align_corners=False, half_pixel_centers=True)
        return loss, rgb, con, gam, crop, drawn, big, aug

    feeds = {"image": rng.uniform(0, 1, (2, 8, 8, 3)).astype(np.float32),
             "boxes": np.array([[[0.1, 0.1, 0.6, 0.7], [0.2, 0.5, 0.9, 0.95], [0, 0, 1, 1], [0.3, 0.3, 0.3, 0.9]]] * 2, np.float32)}
    fn_fixture("sweep7_image_ops_unet_adam", train, m.variables + opt.variables, feeds, 2)


# 15 -----------------------------------------------------------------------------------------------
def sweep7_stft_istft_spectral_loss_sgd():
    """A learned FIR denoiser trained with a multi-resolution STFT loss: tf.signal.stft with a Hann window
    at two frame sizes (frame, RFFT, ComplexAbs and their gradients), log magnitudes, a mel projection
    (linear_to_mel_weight_matrix), and inverse_stft with inverse_stft_window_fn (IRFFT, overlap_and_add)
    of the clean signal fetched; SGD."""
    keras, L, rng = start(715)
    k = tf.Variable(np.array([0.1, 0.2, 0.4, 0.2, 0.1], np.float32).reshape(5, 1, 1), name="fir")

    @tf.function(input_signature=[spec([None, 64], f32, "noisy"), spec([None, 64], f32, "clean")])
    def train(noisy, clean):
        with tf.GradientTape() as tape:
            y = tf.squeeze(tf.nn.conv1d(noisy[:, :, None], k, 1, "SAME"), -1)
            loss = 0.0
            for n, hop in ((16, 4), (32, 8)):
                sy = tf.abs(tf.signal.stft(y, n, hop, window_fn=tf.signal.hann_window))
                sc = tf.abs(tf.signal.stft(clean, n, hop, window_fn=tf.signal.hann_window))
                # log(|S| + 0.05), not + 1e-3: near-zero bins make float32 results differ from float64 by 3e-5 (TF's own error)
                loss += tf.reduce_mean(tf.abs(tf.math.log(sy + 0.05) - tf.math.log(sc + 0.05)))
                loss += tf.norm(sy - sc) / (tf.norm(sc) + 1e-6)
            mel = tf.signal.linear_to_mel_weight_matrix(4, 17, 1000, 20.0, 400.0)
            loss += 0.1 * tf.reduce_mean(tf.square(tf.tensordot(sy - sc, mel, 1)))
        g = tape.gradient(loss, k)
        k.assign_sub(0.01 * g)
        st = tf.signal.stft(clean, 16, 4, fft_length=16)
        rec = tf.signal.inverse_stft(st, 16, 4, fft_length=16, window_fn=tf.signal.inverse_stft_window_fn(4))
        return loss, rec, tf.math.real(st), tf.math.imag(st)

    t = np.arange(64, dtype=np.float32)
    clean = np.stack([np.sin(0.3 * t), np.sin(0.7 * t) * np.cos(0.05 * t)]).astype(np.float32)
    feeds = {"clean": clean, "noisy": (clean + 0.3 * rng.standard_normal(clean.shape)).astype(np.float32)}
    fn_fixture("sweep7_stft_istft_spectral_loss_sgd", train, [k], feeds, 2)


# 16 -----------------------------------------------------------------------------------------------
def sweep7_nested_functions_captures():
    """Nested tf.functions as users factor code: an inner @tf.function that captures and updates a variable
    (a counter and running statistics), called twice from the outer step with different shapes, an inner
    function returning a gradient (tape inside), and a tf.function with reduce_retracing; the calls are
    StatefulPartitionedCall nodes with their bodies in the graph's function library."""
    keras, L, rng = start(716)
    w = tf.Variable((0.3 * rng.standard_normal((4, 2))).astype(np.float32), name="w")
    mean = tf.Variable(np.zeros(4, np.float32), name="running_mean")
    count = tf.Variable(np.int32(0), name="count")

    @tf.function
    def update_stats(x):
        count.assign_add(1)
        mean.assign(0.9 * mean + 0.1 * tf.reduce_mean(x, 0))
        return x - mean

    @tf.function
    def loss_and_grad(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        return loss, tape.gradient(loss, w)

    @tf.function(reduce_retracing=True)
    def apply(g, lr):
        w.assign_sub(lr * g)
        return tf.norm(w)

    @tf.function(input_signature=[spec([None, 4], f32, "x"), spec([None, 2], f32, "y")])
    def train(x, y):
        xc = update_stats(x)
        xc2 = update_stats(x[:2])
        loss, g = loss_and_grad(xc, y)
        n = apply(g, tf.constant(0.1))
        return loss, n, xc2, count.read_value()

    feeds = {"x": rng.standard_normal((5, 4)).astype(np.float32), "y": rng.standard_normal((5, 2)).astype(np.float32)}
    fn_fixture("sweep7_nested_functions_captures", train, [w, mean, count], feeds, 3)


# 17 -----------------------------------------------------------------------------------------------
def sweep7_mutable_hash_table_counts_sgd():
    """A MutableHashTable built in the function (MutableHashTableV2 with an empty shared_name: the kernel
    keeps its table across calls, as TensorFlow's does): word -> id inserted, looked up with a default,
    remove (LookupTableRemoveV2), size and export (sorted for a deterministic order); the ids feed an
    Embedding trained by SGD. String feed."""
    keras, L, rng = start(717)
    emb = tf.Variable((0.2 * rng.standard_normal((8, 3))).astype(np.float32), name="emb")

    @tf.function(input_signature=[spec([None], strs, "words"), spec([None], f32, "y")])
    def train(words, y):
        mt = tf.lookup.experimental.MutableHashTable(strs, i64, default_value=7)
        mt.insert(tf.constant(["the", "cat", "sat", "mat"]), tf.constant([1, 2, 3, 4], i64))
        mt.insert(tf.constant(["cat"]), tf.constant([5], i64))
        mt.remove(tf.constant(["sat"]))
        ids = mt.lookup(words)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(tf.gather(emb, ids), 1) - y))
        g = tape.gradient(loss, emb)
        emb.assign_sub(0.1 * tf.convert_to_tensor(g))
        keys, values = mt.export()
        order = tf.argsort(values)
        return loss, ids, mt.size(), tf.gather(values, order), tf.gather(keys, order)

    fn_fixture_strings("sweep7_mutable_hash_table_counts_sgd", train, [emb], {"y": rng.standard_normal(5).astype(np.float32)},
                       {"words": ["cat", "dog", "the", "sat", "mat"]}, 2)


# 18 -----------------------------------------------------------------------------------------------
def sweep7_stateful_branches_and_loop():
    """Control flow whose branches write variables: tf.switch_case on a step counter variable whose
    branches assign different variables (a stateful Case), tf.cond on a variable's value with assign_add
    in one branch and assign in the other (a stateful If), and a data-dependent tf.while_loop whose body
    reads a variable, branches on it with tf.cond and writes an accumulator variable."""
    keras, L, rng = start(718)
    step = tf.Variable(np.int32(0), name="step")
    a = tf.Variable(np.float32(1.0), name="a")
    b = tf.Variable(np.zeros(3, np.float32), name="b")
    acc = tf.Variable(np.float32(0.0), name="acc")

    @tf.function(input_signature=[spec([3], f32, "x"), spec([], f32, "limit")])
    def fn(x, limit):
        def br0():
            a.assign(a * 2.0)
            return tf.constant(0.0)

        def br1():
            b.assign_add(x)
            return tf.reduce_sum(b)

        def br2():
            a.assign_sub(0.5)
            b.assign(b * 0.5)
            return a.read_value()

        r = tf.switch_case(step % 3, [br0, br1, br2])

        def pos():
            acc.assign_add(tf.reduce_sum(x))
            return acc.read_value()

        def neg():
            acc.assign(-1.0)
            return tf.constant(-1.0)

        c = tf.cond(a > 1.5, pos, neg)

        def body(i, s):
            inc = tf.cond(s + a < limit, lambda: a * 1.0, lambda: tf.constant(0.5))
            acc.assign_add(inc)
            return i + 1, s + inc

        n, s = tf.while_loop(lambda i, s: s < limit, body, [tf.constant(0), tf.constant(0.0)])
        step.assign_add(1)
        return r, c, n, s

    fn_fixture("sweep7_stateful_branches_and_loop", fn, [step, a, b, acc],
               {"x": np.array([0.5, -1.0, 2.0], np.float32), "limit": np.float32(4.2)}, 4)


FIXTURES = [sweep7_mixed_float16_transformer_lossscale_adam, sweep7_muon_mlp, sweep7_schedule_free_adamw,
            sweep7_grad_accum_adamax_wd_clip_schedule, sweep7_int8_quantized_dense_inference, sweep7_lora_finetune_adam,
            sweep7_lookup_tables_in_function_embedding_sgd, sweep7_string_features_ngrams_hash_adam,
            sweep7_while_convergence_tensorarray_assign, sweep7_scan_foldl_rnn_sgd, sweep7_unique_searchsorted_shuffle,
            sweep7_sparse_ops_step, sweep7_ragged_ops_adam, sweep7_image_ops_unet_adam,
            sweep7_stft_istft_spectral_loss_sgd, sweep7_nested_functions_captures,
            sweep7_mutable_hash_table_counts_sgd, sweep7_stateful_branches_and_loop]


if __name__ == "__main__":
    run_main(FIXTURES)
