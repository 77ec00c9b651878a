"""Makes the SavedModel fixtures of testdata/savedmodel/ with TensorFlow (run by hand, never by CI).

    TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/savedmodel/make_fixtures.py

Each fixture NAME is a SavedModel directory NAME/ plus:
  NAME.feeds.npz          the batch, keyed by the signature's input names
  NAME.expected.npz       TensorFlow's outputs, keyed by the signature's output keys
                          (for train_step: the loss after STEPS steps, and every
                          variable after them keyed by its checkpoint key)
With --check-checkpoint PREFIX NPZ it instead loads a checkpoint (one
autoclust wrote) with tf.train.load_checkpoint and compares it with the npz.
With --check-train STEPS PREFIX it runs the train fixture's train_step STEPS
times in TensorFlow on train.feeds.npz and compares the variables with the
checkpoint at PREFIX, read by tf.train.load_checkpoint and restored by
tf.train.Checkpoint into the loaded SavedModel.
"""
import os
import sys

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN_STEPS = 5


class Dense2(tf.Module):
    """Two dense layers (relu, then linear); a serving signature with a None batch dim."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(1)
        self.w1 = tf.Variable(rng.standard_normal((4, 8)).astype(np.float32) * 0.5, name="w1")
        self.b1 = tf.Variable(rng.standard_normal((8,)).astype(np.float32) * 0.1, name="b1")
        self.w2 = tf.Variable(rng.standard_normal((8, 3)).astype(np.float32) * 0.5, name="w2")
        self.b2 = tf.Variable(rng.standard_normal((3,)).astype(np.float32) * 0.1, name="b2")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def __call__(self, x):
        h = tf.nn.relu(tf.matmul(x, self.w1) + self.b1)
        return {"logits": tf.matmul(h, self.w2) + self.b2, "hidden": h}


class Trainer(tf.Module):
    """A linear regression whose train_step(x, y) applies SGD and returns the loss."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(2)
        self.w = tf.Variable(rng.standard_normal((3, 2)).astype(np.float32), name="w")
        self.b = tf.Variable(np.zeros((2,), np.float32), name="b")
        self.lr = 0.1

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def predict(self, x):
        return {"y": tf.matmul(x, self.w) + self.b}

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x"),
                                  tf.TensorSpec([None, 2], tf.float32, name="y")])
    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, self.w) + self.b - y))
        gw, gb = tape.gradient(loss, [self.w, self.b])
        self.w.assign_sub(self.lr * gw)
        self.b.assign_sub(self.lr * gb)
        return {"loss": loss}


def dense2():
    m = Dense2()
    path = os.path.join(HERE, "dense2")
    tf.saved_model.save(m, path, signatures={"serving_default": m.__call__})
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    loaded = tf.saved_model.load(path)
    out = loaded.signatures["serving_default"](x=tf.constant(x))
    np.savez(os.path.join(HERE, "dense2.feeds.npz"), x=x)
    np.savez(os.path.join(HERE, "dense2.expected.npz"), **{k: v.numpy() for k, v in out.items()})
    np.save(os.path.join(HERE, "dense2.x.npy"), x)


def dense2_sliced():
    """dense2 again, its checkpoint written with MaxShardSizePolicy(100 bytes): w1 and w2 are
    split into slices across data shards; TensorFlow's outputs are dense2.expected.npz's."""
    m = Dense2()
    path = os.path.join(HERE, "dense2_sliced")
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=100)
    options = tf.saved_model.SaveOptions(experimental_sharding_callback=policy)
    tf.saved_model.save(m, path, signatures={"serving_default": m.__call__}, options=options)
    x = np.load(os.path.join(HERE, "dense2.feeds.npz"))["x"]
    out = tf.saved_model.load(path).signatures["serving_default"](x=tf.constant(x))
    want = np.load(os.path.join(HERE, "dense2.expected.npz"))
    assert all(np.allclose(out[k].numpy(), want[k], rtol=1e-6, atol=1e-6) for k in want.files)
    print("dense2_sliced", sorted(os.listdir(os.path.join(path, "variables"))))


def keras_export():
    """A Keras 3 `model.export()` (Dense-GELU, BatchNormalization, Dropout, softmax head): its
    graph holds two handles per weight (`head/bias` beside the `head/bias_1` the signatures
    read), so `--vars head/bias` sets a variable nothing reads (a `note:` says so)."""
    import keras

    keras.utils.set_random_seed(2)
    inp = keras.Input((8,), name="img")
    h = keras.layers.Dense(16, activation="gelu")(inp)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.Dropout(0.5)(h)
    out = keras.layers.Dense(3, activation="softmax", name="head")(h)
    model = keras.Model(inp, out)
    path = os.path.join(HERE, "keras_export")
    model.export(path)
    x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
    out = tf.saved_model.load(path).signatures["serve"](img=tf.constant(x))
    np.savez(os.path.join(HERE, "keras_export.feeds.npz"), img=x)
    np.savez(os.path.join(HERE, "keras_export.expected.npz"), **{k: v.numpy() for k, v in out.items()})


def cnn():
    tf.keras.utils.set_random_seed(4)
    inp = tf.keras.Input((8, 8, 1), name="image")
    h = tf.keras.layers.Conv2D(4, 3, activation="relu", name="conv")(inp)
    h = tf.keras.layers.MaxPooling2D(2, name="pool")(h)
    h = tf.keras.layers.Flatten(name="flat")(h)
    out = tf.keras.layers.Dense(3, name="dense")(h)
    model = tf.keras.Model(inp, out)
    path = os.path.join(HERE, "cnn")
    model.export(path, verbose=False)
    x = np.random.default_rng(5).standard_normal((2, 8, 8, 1)).astype(np.float32)
    loaded = tf.saved_model.load(path)
    sig = loaded.signatures["serving_default"]
    (in_name,) = sig.structured_input_signature[1].keys()
    out = sig(**{in_name: tf.constant(x)})
    # Deflated members: the npz reader must inflate.
    np.savez_compressed(os.path.join(HERE, "cnn.feeds.npz"), **{in_name: x})
    np.savez(os.path.join(HERE, "cnn.expected.npz"), **{k: v.numpy() for k, v in out.items()})


def lookup():
    """A Keras export with three lookup tables, each filled by the SavedModel's init op:
    IntegerLookup (int64 keys, a constant vocabulary), StringLookup with two out-of-vocabulary
    hash buckets (`StringToHashBucketFast`), and StringLookup on a vocabulary file (an asset:
    `InitializeTableFromTextFileV2` fed the file's path; the path also sits in a string
    variable). Feeds: `ids` in lookup.feeds.npz; the two string inputs are given as JSON by
    the test (npz holds no strings), their values in LOOKUP_WORDS / LOOKUP_COLORS."""
    tf.keras.utils.set_random_seed(7)
    layers = tf.keras.layers
    vocab = os.path.join(HERE, "lookup_colors.txt")
    with open(vocab, "w") as f:
        f.write("red\ngreen\nblue\n")
    ids = tf.keras.Input((3,), dtype="int64", name="ids")
    words = tf.keras.Input((2,), dtype="string", name="words")
    colors = tf.keras.Input((2,), dtype="string", name="colors")
    a = layers.Embedding(6, 2)(layers.IntegerLookup(vocabulary=[10, 20, 30, 40])(ids))
    b = layers.Embedding(6, 2)(layers.StringLookup(vocabulary=["cat", "dog", "fish"], num_oov_indices=2)(words))
    c = layers.Embedding(5, 2)(layers.StringLookup(vocabulary=vocab)(colors))
    h = layers.Concatenate(axis=1)([a, b, c])
    model = tf.keras.Model([ids, words, colors], layers.Dense(2, name="out")(layers.Flatten()(h)))
    path = os.path.join(HERE, "lookup")
    model.export(path, verbose=False)
    os.remove(vocab)  # the export copied it into lookup/assets/
    x = np.array([[10, 40, 99], [30, 20, 10]], np.int64)
    loaded = tf.saved_model.load(path)
    sig = loaded.signatures["serving_default"]
    out = sig(ids=tf.constant(x), words=tf.constant(LOOKUP_WORDS), colors=tf.constant(LOOKUP_COLORS))
    np.savez(os.path.join(HERE, "lookup.feeds.npz"), ids=x)
    np.savez(os.path.join(HERE, "lookup.expected.npz"), **{k: v.numpy() for k, v in out.items()})


def text():
    """A Keras export of a TextVectorization layer (lower-case and strip punctuation, split on
    whitespace, a fixed vocabulary in a lookup table the init op fills, ragged rows padded to
    a fixed length: StaticRegexReplace, StringLower, StringSplitV2, RaggedTensorToTensor) into an
    Embedding, a mean over the tokens and a Dense layer, plus a float input added to the logits.
    Feeds: `bias` in text.feeds.npz; the sentences are given as JSON by the test, their values
    in TEXT_SENTENCES."""
    tf.keras.utils.set_random_seed(11)
    layers = tf.keras.layers
    sentences = tf.keras.Input((), dtype="string", name="sentences")
    bias = tf.keras.Input((2,), dtype="float32", name="bias")
    vectorize = layers.TextVectorization(
        vocabulary=["the", "cat", "sat", "on", "mat", "dog"], output_sequence_length=6
    )
    h = layers.GlobalAveragePooling1D()(layers.Embedding(8, 3)(vectorize(sentences)))
    out = layers.Add(name="logits")([layers.Dense(2)(h), bias])
    model = tf.keras.Model([sentences, bias], out)
    path = os.path.join(HERE, "text")
    model.export(path, verbose=False)
    b = np.array([[0.5, -0.5], [1.0, 0.0], [0.0, 0.25]], np.float32)
    loaded = tf.saved_model.load(path)
    got = loaded.signatures["serving_default"](sentences=tf.constant(TEXT_SENTENCES), bias=tf.constant(b))
    np.savez(os.path.join(HERE, "text.feeds.npz"), bias=b)
    np.savez(os.path.join(HERE, "text.expected.npz"), **{k: v.numpy() for k, v in got.items()})


def text_modes():
    """TextVectorization's other output modes in one Keras export: multi_hot over unigrams and
    bigrams (StringNGrams, RaggedBincount), count and tf_idf (RaggedBincount with weights),
    each feeding a Dense layer (so the step has work to cluster), plus the raw tf_idf
    vector. Feeds: `bias` in text_modes.feeds.npz; the sentences are TEXT_SENTENCES."""
    tf.keras.utils.set_random_seed(12)
    layers = tf.keras.layers
    sentences = tf.keras.Input((), dtype="string", name="sentences")
    bias = tf.keras.Input((2,), dtype="float32", name="bias")
    vocab = ["the", "cat", "sat", "on", "mat", "dog", "the cat", "cat sat", "on the"]
    multi_hot = layers.TextVectorization(vocabulary=vocab, ngrams=2, output_mode="multi_hot")
    count = layers.TextVectorization(vocabulary=vocab[:6], output_mode="count")
    tf_idf = layers.TextVectorization(
        vocabulary=vocab[:6], output_mode="tf_idf", idf_weights=[0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    )
    feats = layers.Concatenate()([multi_hot(sentences), count(sentences)])
    logits = layers.Add(name="logits")([layers.Dense(2)(feats), bias])
    idf = layers.Identity(name="tf_idf")(tf_idf(sentences))
    model = tf.keras.Model([sentences, bias], {"logits": logits, "tf_idf": idf})
    path = os.path.join(HERE, "text_modes")
    model.export(path, verbose=False)
    b = np.array([[0.5, -0.5], [1.0, 0.0], [0.0, 0.25]], np.float32)
    loaded = tf.saved_model.load(path)
    got = loaded.signatures["serving_default"](sentences=tf.constant(TEXT_SENTENCES), bias=tf.constant(b))
    np.savez(os.path.join(HERE, "text_modes.feeds.npz"), bias=b)
    np.savez(os.path.join(HERE, "text_modes.expected.npz"), **{k: v.numpy() for k, v in got.items()})


TEXT_SENTENCES = ["The cat sat on the MAT!", "A dog, a cat.", "zebras   dance on   mats and the dogs sing loudly"]


LOOKUP_WORDS = [["cat", "zebra"], ["fish", "bird"]]
LOOKUP_COLORS = [["green", "pink"], ["red", "blue"]]


def train():
    m = Trainer()
    path = os.path.join(HERE, "train")
    tf.saved_model.save(m, path, signatures={"serving_default": m.predict, "train_step": m.train_step})
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = (x @ np.array([[1, -1], [2, 0], [0.5, 3]], np.float32) + 0.25).astype(np.float32)
    loaded = tf.saved_model.load(path)
    step = loaded.signatures["train_step"]
    for _ in range(TRAIN_STEPS):
        out = step(x=tf.constant(x), y=tf.constant(y))
    np.savez(os.path.join(HERE, "train.feeds.npz"), x=x, y=y)
    expected = {"loss": out["loss"].numpy()}
    expected["w/.ATTRIBUTES/VARIABLE_VALUE"] = loaded.w.numpy()
    expected["b/.ATTRIBUTES/VARIABLE_VALUE"] = loaded.b.numpy()
    np.savez(os.path.join(HERE, "train.expected.npz"), **expected)


TF1_WORDS = ["b", "zz", "d", "a"]


def tf1_builder():
    """A TF1 SavedModel (`tf.compat.v1.saved_model.Builder`, graph mode): reference variables,
    one of them partitioned in three (`fixed_size_partitioner`: the checkpoint holds the whole
    variable as slices, and the Saver's restore op reads each part's slice), a vocabulary
    table on an asset file (recorded in the `saved_model_assets` collection, as the Builder
    does), and Adam. No object graph: TensorFlow's loader restores the variables by running
    the Saver's restore op with the checkpoint prefix fed, then runs the main op with the
    asset's path fed. Signatures `serving_default(words, x) -> {pred, ids}` and
    `train(words, x, y) -> {loss}` (the loss after an Adam step); expected: serving outputs
    (`tf1_builder.expected.npz`) and the loss of the last of TRAIN_STEPS `train` calls
    (`tf1_builder.train_expected.npz`); feeds `tf1_builder.feeds.npz`
    (x) and `tf1_builder.train.npz` (x, y). `words` is given as JSON (TF1_WORDS)."""
    v1 = tf.compat.v1
    import shutil
    path = os.path.join(HERE, "tf1_builder")
    shutil.rmtree(path, ignore_errors=True)
    vocab = os.path.join(HERE, "tf1_vocab.txt")
    with open(vocab, "w") as f:
        f.write("a\nb\nc\nd\n")
    rng = np.random.default_rng(29)
    g = tf.Graph()
    with g.as_default():
        v1.set_random_seed(3)
        words = v1.placeholder(tf.string, [None], name="words")
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        y = v1.placeholder(tf.float32, [None, 1], name="y")
        vocab_t = tf.constant(vocab, name="vocab_path")
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, vocab_t)
        init = tf.lookup.TextFileInitializer(vocab_t, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
                                             tf.lookup.TextFileIndex.LINE_NUMBER)
        ids = tf.lookup.StaticVocabularyTable(init, 2).lookup(words)
        with v1.variable_scope("m", use_resource=False):
            emb = v1.get_variable("emb", [6, 3], partitioner=v1.fixed_size_partitioner(3))
            w = v1.get_variable("w", [3, 1])
            b = v1.get_variable("b", [1], initializer=v1.zeros_initializer())
        feat = tf.nn.embedding_lookup(emb, ids) + x
        pred = tf.identity(tf.matmul(feat, w) + b, name="pred")
        loss = tf.reduce_mean(tf.square(pred - y))
        step = v1.train.AdamOptimizer(0.1).minimize(loss, global_step=v1.train.get_or_create_global_step())
        with tf.control_dependencies([step]):
            loss_out = tf.identity(loss, name="loss_after_train")
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(v1.tables_initializer())
            builder = v1.saved_model.Builder(path)
            info = v1.saved_model.build_tensor_info
            serving = v1.saved_model.predict_signature_def({"words": words, "x": x}, {"pred": pred, "ids": ids})
            train = v1.saved_model.signature_def_utils.build_signature_def(
                {"words": info(words), "x": info(x), "y": info(y)}, {"loss": info(loss_out)}, "train")
            builder.add_meta_graph_and_variables(sess, ["serve"],
                                                 signature_def_map={"serving_default": serving, "train": train},
                                                 assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS),
                                                 main_op=v1.tables_initializer())
            builder.save()
    os.remove(vocab)  # the Builder copied it into tf1_builder/assets/
    xs = rng.standard_normal((4, 3)).astype(np.float32)
    ys = rng.standard_normal((4, 1)).astype(np.float32)
    with v1.Session(graph=tf.Graph()) as sess:
        meta = v1.saved_model.loader.load(sess, ["serve"], path)
        sig = meta.signature_def["serving_default"]
        feed = {sig.inputs["words"].name: TF1_WORDS, sig.inputs["x"].name: xs}
        out = sess.run({k: v.name for k, v in sig.outputs.items()}, feed)
        tsig = meta.signature_def["train"]
        tfeed = {tsig.inputs["words"].name: TF1_WORDS, tsig.inputs["x"].name: xs, tsig.inputs["y"].name: ys}
        for _ in range(TRAIN_STEPS):
            out["loss"] = sess.run(tsig.outputs["loss"].name, tfeed)
    np.savez(os.path.join(HERE, "tf1_builder.feeds.npz"), x=xs)
    np.savez(os.path.join(HERE, "tf1_builder.train.npz"), x=xs, y=ys)
    np.savez(os.path.join(HERE, "tf1_builder.train_expected.npz"), loss=out.pop("loss"))
    np.savez(os.path.join(HERE, "tf1_builder.expected.npz"), **out)


class MutableTables(tf.Module):
    """A MutableHashTable (string -> float) and a DenseHashTable (int64 -> float) filled
    before saving: their entries live only in the checkpoint (`table-keys`/`table-values`)."""

    def __init__(self):
        super().__init__()
        self.words = tf.lookup.experimental.MutableHashTable(tf.string, tf.float32, default_value=-1.0)
        self.words.insert(tf.constant(["apple", "fig", "kiwi"]), tf.constant([0.5, 2.5, 4.0]))
        self.words.remove(tf.constant(["kiwi"]))
        self.ids = tf.lookup.experimental.DenseHashTable(tf.int64, tf.float32, default_value=-1.0, empty_key=-5,
                                                         deleted_key=-6, initial_num_buckets=8)
        self.ids.insert(tf.constant([3, 7], tf.int64), tf.constant([0.25, 1.5]))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="words"),
                                  tf.TensorSpec([None], tf.int64, name="ids")])
    def serve(self, words, ids):
        return {"w": self.words.lookup(words), "n": self.words.size(), "d": self.ids.lookup(ids)}


MUTABLE_WORDS = ["fig", "apple", "zzz"]


def mutable_tables():
    """`tf.saved_model.save` of MutableTables: TensorFlow's loader restores the tables' entries
    from the checkpoint. Feeds: `ids` in mutable_tables.feeds.npz, `words` as JSON
    (MUTABLE_WORDS)."""
    path = os.path.join(HERE, "mutable_tables")
    m = MutableTables()
    tf.saved_model.save(m, path, signatures={"serving_default": m.serve})
    ids = np.array([7, 3, 1], np.int64)
    out = tf.saved_model.load(path).signatures["serving_default"](words=tf.constant(MUTABLE_WORDS), ids=tf.constant(ids))
    np.savez(os.path.join(HERE, "mutable_tables.feeds.npz"), ids=ids)
    np.savez(os.path.join(HERE, "mutable_tables.expected.npz"), **{k: v.numpy() for k, v in out.items()})


def check_checkpoint(prefix, expect):
    """Loads `prefix` with TensorFlow and compares every tensor in `expect` (an npz)."""
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    want = np.load(expect)
    bad = 0
    keys = [k for k in want.files if "/.ATTRIBUTES/" in k]
    for key in keys:
        if key not in shapes:
            print(f"missing {key}; checkpoint has {sorted(shapes)}")
            bad += 1
            continue
        got = reader.get_tensor(key)
        if not np.allclose(got, want[key], rtol=1e-5, atol=1e-6):
            print(f"{key}: {got} != {want[key]}")
            bad += 1
    # tf.train.Checkpoint restores it into a fresh module too (through the object graph).
    if "w/.ATTRIBUTES/VARIABLE_VALUE" in shapes:
        m = Trainer()
        tf.train.Checkpoint(m).restore(prefix).expect_partial()
        if not (np.array_equal(m.w.numpy(), reader.get_tensor("w/.ATTRIBUTES/VARIABLE_VALUE"))
                and np.array_equal(m.b.numpy(), reader.get_tensor("b/.ATTRIBUTES/VARIABLE_VALUE"))):
            print("tf.train.Checkpoint restored different values")
            bad += 1
    print("checked", len(keys), "tensors;", "OK" if not bad else f"{bad} bad")
    return 1 if bad else 0


def check_train(steps, prefix):
    """TensorFlow's variables after `steps` train_steps against the checkpoint at `prefix`."""
    feeds = np.load(os.path.join(HERE, "train.feeds.npz"))
    loaded = tf.saved_model.load(os.path.join(HERE, "train"))
    for _ in range(steps):
        loaded.signatures["train_step"](x=tf.constant(feeds["x"]), y=tf.constant(feeds["y"]))
    reader = tf.train.load_checkpoint(prefix)
    restored = tf.saved_model.load(os.path.join(HERE, "train"))
    tf.train.Checkpoint(restored).restore(prefix).expect_partial()
    bad = 0
    for name in ["w", "b"]:
        want = getattr(loaded, name).numpy()
        for how, got in [("load_checkpoint", reader.get_tensor(f"{name}/.ATTRIBUTES/VARIABLE_VALUE")),
                         ("Checkpoint.restore", getattr(restored, name).numpy())]:
            if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                print(f"{name} ({how}): {got} != TensorFlow's {want}")
                bad += 1
    print(f"{steps} steps: w, b", "equal TensorFlow's" if not bad else f"{bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--check-checkpoint":
        sys.exit(check_checkpoint(sys.argv[2], sys.argv[3]))
    if len(sys.argv) > 1 and sys.argv[1] == "--check-train":
        sys.exit(check_train(int(sys.argv[2]), sys.argv[3]))
    dense2()
    dense2_sliced()
    cnn()
    train()
    lookup()
    text()
    text_modes()
    tf1_builder()
    mutable_tables()
    keras_export()
