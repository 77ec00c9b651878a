"""Writes the string-op fixtures in testdata/tf/ (run by hand, never by CI).

How to run (from the repository root; see make_fixtures.py for the venv):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 /work/tfenv/bin/python testdata/tf/make_fixtures_strings.py

String tensors have no safetensors dtype, so these manifests carry three more fields
(cli/tests/tf_fixtures.rs reads them; README.md describes them):

- "string_feeds": {placeholder: {"dtype": "string", "shape": [..], "data": [..]}}, each given to
  `autoclust run` as `--feed NAME=JSON`;
- "expected_strings": {"node:port": {"shape": [..], "data": [..]}}, TensorFlow's string fetches
  (UTF-8), fetched with `--json` and compared exactly;
- "expected_stderr": what TensorFlow's PrintV2 ops wrote to standard error during the run
  (captured at file descriptor 2), compared exactly with autoclust's stderr less its `note:` lines.

Fixtures:

- strings_print: tf.print ops ordered by control edges (PrintV2 -> PrintV2 -> Identity), their
  StringFormat templates over a fed 2-D float tensor with summarize=2, an int scalar, a string
  constant, a custom `end`; the fetched value depends on the prints through a control edge only.
- strings_ops: AsString (default, precision, scientific, shortest, width with fill '0', '-' and
  ' ', ints and bools) -> StringToNumber round trips (float32, float64, int32, int64),
  StringFormat of a 5x6 float tensor with summarize=2 and of a 2x3x4 int tensor, StringJoin with
  a scalar broadcast, Substr (scalar, vector and negative pos; UTF8_CHAR), StringLength (BYTE and
  UTF8_CHAR), StringSplitV2 (a separator, whitespace, maxsplit), StaticRegexReplace (global with
  groups, first only), ReduceJoin (one axis, two axes in a given order with keepdims, all axes),
  Equal/NotEqual on strings; on a fed string vector and string constants.
- strings_tf2_print: a TF2 function graph (tf.function's concrete function) with three tf.print
  calls that automatic control dependencies chain (the last prints a ReduceJoin of AsString), run
  with its final NoOp as the target: the prints come out in program order.
"""

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_harness import TfRunner, export  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
v1 = tf.compat.v1


def run_capturing_stderr(runner, steps):
    """Runs the session with file descriptor 2 redirected, so PrintV2's std::cerr is captured."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            values = runner.run(steps)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode()
    return values, text


def write_string_fixture(name, graph_def, feeds, string_feeds, fetch, target, steps=1):
    tf_feeds = dict(feeds)
    for k, v in string_feeds.items():
        tf_feeds[k] = np.array([s.encode() for s in np.ravel(v)], dtype=object).reshape(np.shape(v))
    runner = TfRunner(graph_def, {}, tf_feeds, fetch, target)
    values, stderr = run_capturing_stderr(runner, steps)
    numeric, strings = {}, {}
    for f, v in zip(fetch, values):
        v = np.asarray(v, dtype=object) if isinstance(v, bytes) else np.asarray(v)
        if v.dtype.kind in "OS":
            strings[f] = {"shape": list(v.shape), "data": [bytes(s).decode() for s in v.ravel()]}
        else:
            numeric[f] = np.array(v, order="C")
    manifest = {
        "graph": name + ".pbtxt",
        "feeds": None,
        "vars": None,
        "fetch": [f for f in fetch if f in numeric],
        "target": list(target),
        "steps": steps,
        "expected_fetches": name + ".expected.safetensors",
        "expected_vars": None,
        "racy": False,
        "outcomes": None,
        "string_feeds": {
            k: {"dtype": "string", "shape": list(np.shape(v)), "data": [str(s) for s in np.ravel(v)]}
            for k, v in string_feeds.items()
        },
        "expected_strings": strings,
        "expected_stderr": stderr,
    }
    if feeds:
        save_file({k: np.array(v, order="C") for k, v in feeds.items()}, os.path.join(OUT, name + ".feeds.safetensors"))
        manifest["feeds"] = name + ".feeds.safetensors"
    save_file(numeric, os.path.join(OUT, name + ".expected.safetensors"))
    with open(os.path.join(OUT, name + ".json"), "w") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=False, ensure_ascii=False)
        fh.write("\n")
    runner.session.close()
    print(name, "stderr:", repr(stderr))
    for k, v in strings.items():
        print(" ", k, v)


def strings_print():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [4, 5], name="x")
        n = tf.constant(7, name="n")
        first = tf.print("first:", x, n, summarize=2, name="print_first")
        with tf.control_dependencies([first]):
            second = tf.print("second", tf.constant(["a b", "c\"d"]), tf.reduce_sum(x), output_stream=sys.stderr,
                              end="|\n", name="print_second")
        with tf.control_dependencies([second]):
            tf.identity(x * 2.0, name="out")
    feeds = {"x": (np.arange(20, dtype=np.float32).reshape(4, 5) * 0.25 - 1.0)}
    gd = export(g, OUT, "strings_print")
    ops = [n.op for n in gd.node]
    assert ops.count("PrintV2") == 2 and "StringFormat" in ops, ops
    write_string_fixture("strings_print", gd, feeds, {}, ["out:0"], [])


def strings_ops():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [7], name="x")
        i = v1.placeholder(tf.int32, [4], name="i")
        words = v1.placeholder(tf.string, [4], name="words")
        s = tf.strings
        # AsString and the round trips back to numbers.
        s.as_string(x, name="as_default")
        s.as_string(x, precision=2, name="as_prec2")
        s.as_string(x, scientific=True, precision=3, name="as_sci")
        short = s.as_string(x, shortest=True, name="as_shortest")
        s.as_string(x, width=12, fill="0", precision=3, name="as_zero_fill")
        s.as_string(x, width=9, fill="-", name="as_left")
        s.as_string(x, width=11, fill=" ", name="as_space")
        s.as_string(tf.cast(x, tf.float64), precision=12, name="as_f64")
        s.as_string(i, width=6, fill="0", name="as_int")
        s.as_string(tf.cast(i, tf.int64), name="as_int64")
        s.as_string(tf.greater(x, 0.0), name="as_bool")
        s.to_number(s.as_string(x, precision=9, scientific=True), tf.float32, name="round_trip_f32")
        s.to_number(short, tf.float64, name="round_trip_f64")
        s.to_number(s.as_string(i), tf.int32, name="round_trip_i32")
        s.to_number(tf.constant(["12", " -7", "+3", "9000000000"]), tf.int64, name="to_i64")
        # StringFormat: a 2-D tensor past summarize, a 3-D int tensor, a custom placeholder.
        m = tf.reshape(x[:6], [2, 3]) * tf.constant([[1.0], [100.0]])
        big = tf.reshape(tf.range(30, dtype=tf.float32) * 0.5 - 3.25, [5, 6])
        s.format("m={} big={}", (m, big), summarize=2, name="fmt_2d")
        s.format("t=%", tf.reshape(tf.range(24), [2, 3, 4]), placeholder="%", summarize=1, name="fmt_3d")
        s.format("{} and {}", (words, tf.constant(True)), name="fmt_words")
        # Join, Substr, Length, Split, Regex, comparisons on the fed strings.
        s.join([words, tf.constant("-"), words], separator="/", name="join")
        s.substr(words, 1, 3, name="substr")
        s.substr(words, [0, 1, 2, 0], [2, 10, 1, 0], name="substr_vec")
        s.substr(tf.constant(["hello", "world"]), -3, 2, name="substr_neg")
        s.substr(tf.constant(["héllo", "añb"]), 1, 2, unit="UTF8_CHAR", name="substr_utf8")
        s.length(words, name="len_bytes")
        s.length(words, unit="UTF8_CHAR", name="len_chars")
        comma = tf.raw_ops.StringSplitV2(input=tf.constant(["a,b,,c", "x", ""]), sep=",", name="split_comma")
        space = tf.raw_ops.StringSplitV2(input=words, sep="", name="split_space")
        maxs = tf.raw_ops.StringSplitV2(input=tf.constant(["a,b,,c", " p q r "]), sep=",", maxsplit=1,
                                        name="split_max")
        for t, nm in [(comma, "split_comma"), (space, "split_space"), (maxs, "split_max")]:
            for k, o in enumerate(t):
                tf.identity(o, name=f"{nm}_{k}")
        s.regex_replace(words, "([a-z])([a-z])", "<\\2\\1>", name="regex_global")
        s.regex_replace(words, "[aeiou]", "_", replace_global=False, name="regex_first")
        grid = tf.reshape(words, [2, 2])
        tf.identity(s.reduce_join(grid, axis=1, separator="+"), name="reduce_join_1")
        tf.identity(s.reduce_join(grid, axis=[1, 0], keepdims=True, separator="|"), name="reduce_join_10")
        tf.identity(s.reduce_join(grid), name="reduce_join_all")
        tf.equal(words, tf.constant("b c"), name="eq")
        tf.not_equal(words, tf.constant(["ab", "x", "b c", "d"]), name="ne")
    feeds = {
        "x": np.array([1.5, -2.25, 3e10, 1.2345678e-7, 0.1, -0.0, 123.456], np.float32),
        "i": np.array([0, -5, 123456, 2147483647], np.int32),
    }
    string_feeds = {"words": ["ab,cd", "héllo wörld", "b c", "  lead  trail "]}
    gd = export(g, OUT, "strings_ops")
    ops = {n.op for n in gd.node}
    for op in ["AsString", "StringToNumber", "StringFormat", "StringJoin", "Substr", "StringLength", "StringSplitV2",
               "StaticRegexReplace", "ReduceJoin", "Equal", "NotEqual"]:
        assert op in ops, f"strings_ops: expected a {op} node"
    fetch = ["as_default:0", "as_prec2:0", "as_sci:0", "as_shortest:0", "as_zero_fill:0", "as_left:0", "as_space:0",
             "as_f64:0", "as_int:0", "as_int64:0", "as_bool:0", "round_trip_f32:0", "round_trip_f64:0",
             "round_trip_i32:0", "to_i64:0", "fmt_2d:0", "fmt_3d:0", "fmt_words:0", "join:0", "substr:0",
             "substr_vec:0", "substr_neg:0", "substr_utf8:0", "len_bytes:0", "len_chars:0"]
    fetch += [f"{nm}_{k}:0" for nm in ["split_comma", "split_space", "split_max"] for k in range(3)]
    fetch += ["regex_global:0", "regex_first:0", "reduce_join_1:0", "reduce_join_10:0", "reduce_join_all:0", "eq:0",
              "ne:0"]
    write_string_fixture("strings_ops", gd, feeds, string_feeds, fetch, [])


def strings_tf2_print():
    @tf.function
    def f(x):
        tf.print("start", x)
        y = x * 2.0
        tf.print("y =", y, summarize=1, output_stream=sys.stderr)
        tf.print(tf.strings.reduce_join(tf.strings.as_string(y, precision=1), separator=";"), end=".\n")
        return y + 1.0

    cf = f.get_concrete_function(tf.TensorSpec([3], tf.float32, name="x"))
    gd = export(cf.graph.as_graph_def(), OUT, "strings_tf2_print")
    ops = [n.op for n in gd.node]
    assert ops.count("PrintV2") == 3 and "ReduceJoin" in ops, ops
    # The function's outputs and its control outputs (the prints, through the final NoOp).
    target = [n.name for n in gd.node if n.op == "NoOp"]
    write_string_fixture("strings_tf2_print", gd, {"x": np.array([1.0, 2.5, -3.0], np.float32)}, {},
                         [cf.outputs[0].name], target)


if __name__ == "__main__":
    strings_print()
    strings_ops()
    strings_tf2_print()
