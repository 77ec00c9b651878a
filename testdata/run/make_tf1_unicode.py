"""Makes tf1_unicode.pbtxt and tf1_unicode.expected.json with TensorFlow (by hand, never by CI):

    CUDA_VISIBLE_DEVICES=-1 TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/run/make_tf1_unicode.py

Character-level text input as `tf.strings` builds it: `tf.strings.unicode_decode` of a fed
batch of words (UnicodeDecode, a ragged result) into code-point ids for a character
embedding, `tf.strings.unicode_split_with_offsets` (UnicodeDecodeWithOffsets + UnicodeEncode)
and `tf.strings.unicode_encode` back, in UTF-8 and UTF-16-BE; and malformed bytes (a Const:
feeds are JSON text) decoded with `errors="replace"`, `"ignore"` and control characters
replaced. The JSON holds TensorFlow's value of every fetch.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()
g = tf1.Graph()
with g.as_default():
    words = tf1.placeholder(tf.string, [4], name="words")
    cps = tf.strings.unicode_decode(words, "UTF-8")
    tf.identity(cps.values, name="cp_values")
    tf.identity(cps.row_splits, name="cp_splits")
    # A character embedding: code points hashed into 32 rows, mean per word.
    table = tf.constant(np.linspace(-1, 1, 32 * 3, dtype=np.float32).reshape(32, 3))
    ids = tf.math.floormod(cps.values, 32)
    seg = tf.ragged.row_splits_to_segment_ids(cps.row_splits)
    tf.identity(tf.math.unsorted_segment_mean(tf.gather(table, ids), seg, 4), name="char_embedding")
    chars, starts = tf.strings.unicode_split_with_offsets(words, "UTF-8")
    tf.identity(chars.values, name="split_values")
    tf.identity(starts.values, name="split_starts")
    tf.identity(tf.strings.unicode_encode(cps, "UTF-16-BE"), name="utf16")
    back = tf.strings.unicode_encode(cps, "UTF-8")
    tf.identity(back, name="utf8")
    tf.identity(tf.strings.unicode_decode(tf.strings.unicode_encode(cps, "UTF-16-BE"), "UTF-16-BE").values,
                name="utf16_round_trip")
    bad = tf.constant([b"h\xc3\xa9llo", b"\xe2\x82\xac\xff\xfeab\xe2\x82", b"", b"\x01\x7f\xc2\x85z\xf0\x9f\x98\x80",
                       b"\xed\xa0\x80x\xc0\xafy\xf4\x90\x80\x80"], name="bad")
    r = tf.raw_ops.UnicodeDecodeWithOffsets(input=bad, input_encoding="UTF-8", errors="replace",
                                            replacement_char=65533, replace_control_characters=False)
    tf.identity(r.row_splits, name="bad_splits")
    tf.identity(r.char_values, name="bad_values")
    tf.identity(r.char_to_byte_starts, name="bad_starts")
    i = tf.raw_ops.UnicodeDecode(input=bad, input_encoding="UTF-8", errors="ignore", replace_control_characters=True,
                                 Tsplits=tf.int32)
    tf.identity(i.row_splits, name="ignored_splits")
    tf.identity(i.char_values, name="ignored_values")
    e = tf.raw_ops.UnicodeEncode(input_values=[104, 233, 128512, 0x110000, -5, 65], input_splits=[0, 3, 6],
                                 output_encoding="UTF-8", errors="replace", replacement_char=63)
    tf.identity(tf.strings.length(e), name="encoded_lengths")
    tf.identity(tf.strings.to_hash_bucket_fast(e, 1000), name="encoded_hashes")
    names = ["cp_values", "cp_splits", "char_embedding", "split_values", "split_starts", "utf8",
             "utf16_round_trip", "bad_splits", "bad_values", "bad_starts", "ignored_splits", "ignored_values",
             "encoded_lengths", "encoded_hashes"]
    wv = ["héllo", "", "naïve café", "😀 ok"]
    with tf1.Session(graph=g) as s:
        vals = s.run([n + ":0" for n in names], {words: wv})
    out = {}
    for n, v in zip(names, vals):
        v = np.asarray(v)
        data = [x.decode() for x in v.ravel()] if v.dtype == object else v.ravel().tolist()
        out[n] = {"dtype": "string" if v.dtype == object else str(tf.as_dtype(v.dtype).name), "shape": list(v.shape),
                  "data": data}
    out["feeds"] = {"words": wv}
    with open(os.path.join(HERE, "tf1_unicode.expected.json"), "w") as f:
        json.dump(out, f, indent=0, ensure_ascii=False)
    tf.io.write_graph(g.as_graph_def(), HERE, "tf1_unicode.pbtxt")
    print(sorted({n.op for n in g.as_graph_def().node}))
    for n in names:
        print(n, out[n]["shape"], out[n]["data"][:12])
