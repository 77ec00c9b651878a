"""Writes the TensorFlow-made fixtures of TF1 dynamic control flow (control flow v1) (run by hand,
never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/tf/make_fixtures_v1cf.py

Control flow v2 is disabled before any graph is built, so tf.compat.v1.cond and
tf.compat.v1.while_loop build `Switch`/`Merge`/`Enter`/`Exit`/`NextIteration`/`LoopCond` nodes
(frames and dead tensors, seed 002), and their gradients save forward values on `StackV2`s
(`StackPushV2`/`StackPopV2`); dynamic_rnn and map_fn use `TensorArrayV3`. Variables are resource
variables (VarHandleOp). File layout and manifest: README.md (via tf_harness.write_fixture).

- v1cf_cond: tf.compat.v1.cond on a fed predicate, both branches pure, plus a cond whose branches
  read different variables; fetched after the Merge. 2 steps (the second with the same feeds).
- v1cf_while: a while loop (counter, accumulator) whose trip count is fed. 1 step.
- v1cf_nested_while: a while loop inside a while loop (the inner trip count depends on the outer
  counter). 1 step.
- v1cf_while_var: a while loop whose body does AssignAddVariableOp on a variable each iteration
  and reads it (ordered after the update). 2 steps.
- v1cf_grad_cond: tf.gradients through tf.compat.v1.cond. 1 step.
- v1cf_grad_while: tf.gradients through tf.compat.v1.while_loop (forward values saved on
  StackV2). 1 step.
- v1cf_dynamic_rnn: a tf.compat.v1.nn.dynamic_rnn training step (BasicRNNCell, batch 4, 5 steps,
  8 units, squared loss on the last output, GradientDescentOptimizer on resource variables):
  TensorArrayV3 + while loop forward, TensorArrayGradV3 + StackV2 backward. 3 steps.
- v1cf_ref_loop: reference variables (`VariableV2`, as TF1 made them by default) used in a while
  loop: the body does `AssignAdd` on a counter through a `RefEnter` and reads a weight through an
  `Enter` of `w/read`; then one GradientDescent step on the weight from the loop's result.
  Written last (it turns resource variables off for the process). 2 steps.
- v1cf_map_fn: tf.map_fn with parallel_iterations=3 over 6 rows (TensorArrayV3 scatter/read/
  write/gather inside a while loop). 1 step.
"""

import os
import sys

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_control_flow_v2()

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_harness import export, write_fixture  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))
v1 = tf.compat.v1
raw = tf.raw_ops


def var(name, dtype, shape):
    return raw.VarHandleOp(dtype=dtype, shape=shape, shared_name=name, name=name)


def ops_of(graph_def):
    return {n.op for n in graph_def.node}


def check_v1(name, gd):
    ops = ops_of(gd)
    assert "Switch" in ops or "Enter" in ops, f"{name}: no v1 control flow ({sorted(ops)})"
    assert not ops & {"If", "StatelessIf", "While", "StatelessWhile"}, f"{name}: v2 control flow"


def v1cf_cond():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        p = v1.placeholder(tf.bool, [], name="p")
        a = var("a", tf.float32, [3])
        b = var("b", tf.float32, [3])
        y = v1.cond(p, lambda: tf.tanh(x) * 2.0 + 1.0, lambda: x * x - 3.0)
        tf.identity(y, name="y")
        z = v1.cond(tf.reduce_sum(x) > 0.0,
                    lambda: raw.ReadVariableOp(resource=a, dtype=tf.float32) * x,
                    lambda: raw.ReadVariableOp(resource=b, dtype=tf.float32) + x)
        tf.identity(tf.reduce_sum(z * y), name="s")
    gd = export(g, OUT, "v1cf_cond")
    check_v1("v1cf_cond", gd)
    variables = {"a": np.array([1.0, 2.0, 3.0], np.float32), "b": np.array([-1.0, 0.5, 4.0], np.float32)}
    feeds = {"x": np.array([0.5, -1.5, 2.0], np.float32), "p": np.array(False)}
    write_fixture(OUT, "v1cf_cond", gd, variables, feeds, ["y:0", "s:0"], [], 2)


def v1cf_while():
    g = tf.Graph()
    with g.as_default():
        n = v1.placeholder(tf.int32, [], name="n")
        x = v1.placeholder(tf.float32, [4], name="x")
        i, acc = v1.while_loop(lambda i, acc: i < n,
                               lambda i, acc: (i + 1, acc * 0.9 + tf.sin(x * tf.cast(i, tf.float32))),
                               [tf.constant(0), tf.zeros([4])])
        tf.identity(i, name="i_out")
        tf.identity(acc, name="acc_out")
    gd = export(g, OUT, "v1cf_while")
    check_v1("v1cf_while", gd)
    feeds = {"n": np.array(7, np.int32), "x": np.array([0.1, 0.2, -0.3, 1.0], np.float32)}
    write_fixture(OUT, "v1cf_while", gd, {}, feeds, ["i_out:0", "acc_out:0"], [], 1)


def v1cf_nested_while():
    g = tf.Graph()
    with g.as_default():
        n = v1.placeholder(tf.int32, [], name="n")
        x = v1.placeholder(tf.float32, [2], name="x")

        def outer_body(i, acc):
            def inner_body(j, a):
                return j + 1, a + x * tf.cast(i * 10 + j, tf.float32)
            _, a = v1.while_loop(lambda j, a: j < i + 1, inner_body, [tf.constant(0), acc])
            return i + 1, a * 0.5

        i, acc = v1.while_loop(lambda i, acc: i < n, outer_body, [tf.constant(0), tf.zeros([2])])
        tf.identity(i, name="i_out")
        tf.identity(acc, name="acc_out")
    gd = export(g, OUT, "v1cf_nested_while")
    check_v1("v1cf_nested_while", gd)
    feeds = {"n": np.array(4, np.int32), "x": np.array([1.0, -2.0], np.float32)}
    write_fixture(OUT, "v1cf_nested_while", gd, {}, feeds, ["i_out:0", "acc_out:0"], [], 1)


def v1cf_while_var():
    g = tf.Graph()
    with g.as_default():
        n = v1.placeholder(tf.int32, [], name="n")
        v = var("v", tf.float32, [2])

        def body(i, s):
            upd = raw.AssignAddVariableOp(resource=v, value=tf.fill([2], tf.cast(i, tf.float32) + 0.5))
            with tf.control_dependencies([upd]):
                r = raw.ReadVariableOp(resource=v, dtype=tf.float32)
            return i + 1, s + tf.reduce_sum(r)

        i, s = v1.while_loop(lambda i, s: i < n, body, [tf.constant(0), tf.constant(0.0)],
                             parallel_iterations=1)
        tf.identity(s, name="s_out")
        tf.identity(i, name="i_out")
    gd = export(g, OUT, "v1cf_while_var")
    check_v1("v1cf_while_var", gd)
    variables = {"v": np.array([1.0, -1.0], np.float32)}
    feeds = {"n": np.array(5, np.int32)}
    write_fixture(OUT, "v1cf_while_var", gd, variables, feeds, ["s_out:0", "i_out:0"], [], 2)


def v1cf_grad_cond():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        p = v1.placeholder(tf.bool, [], name="p")
        w = var("w", tf.float32, [3])
        wv = raw.ReadVariableOp(resource=w, dtype=tf.float32)
        y = v1.cond(p, lambda: tf.tanh(x * wv), lambda: tf.square(x) * wv)
        loss = tf.reduce_sum(y * y)
        gx, gw = tf.gradients(loss, [x, wv])
        tf.identity(loss, name="loss")
        tf.identity(gx, name="gx")
        tf.identity(gw, name="gw")
    gd = export(g, OUT, "v1cf_grad_cond")
    check_v1("v1cf_grad_cond", gd)
    variables = {"w": np.array([0.5, -1.0, 2.0], np.float32)}
    feeds = {"x": np.array([0.3, 0.7, -1.2], np.float32), "p": np.array(True)}
    write_fixture(OUT, "v1cf_grad_cond", gd, variables, feeds, ["loss:0", "gx:0", "gw:0"], [], 1)


def v1cf_grad_while():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        w = var("w", tf.float32, [3])
        wv = raw.ReadVariableOp(resource=w, dtype=tf.float32)
        _, h = v1.while_loop(lambda i, h: i < 4, lambda i, h: (i + 1, tf.tanh(h * wv + x)),
                             [tf.constant(0), tf.zeros([3])])
        loss = tf.reduce_sum(h * h)
        gx, gw = tf.gradients(loss, [x, wv])
        tf.identity(loss, name="loss")
        tf.identity(gx, name="gx")
        tf.identity(gw, name="gw")
    gd = export(g, OUT, "v1cf_grad_while")
    check_v1("v1cf_grad_while", gd)
    variables = {"w": np.array([0.5, -1.0, 0.8], np.float32)}
    feeds = {"x": np.array([0.3, 0.7, -1.2], np.float32)}
    write_fixture(OUT, "v1cf_grad_while", gd, variables, feeds, ["loss:0", "gx:0", "gw:0"], [], 1)


class BasicRNNCell:
    """TF1's BasicRNNCell (tanh(concat(x, h) @ kernel + bias)), written out because
    tf.compat.v1.nn.rnn_cell.BasicRNNCell needs Keras 2; dynamic_rnn takes any object that
    behaves like an RNNCell."""

    def __init__(self, units):
        self.units = units
        self.kernel = None

    @property
    def state_size(self):
        return self.units

    @property
    def output_size(self):
        return self.units

    def zero_state(self, batch_size, dtype):
        return tf.zeros([batch_size, self.units], dtype)

    def __call__(self, inputs, state, scope=None):
        if self.kernel is None:
            depth = int(inputs.shape[-1]) + self.units
            self.kernel = v1.get_variable("kernel", [depth, self.units], use_resource=True)
            self.bias = v1.get_variable("bias", [self.units], use_resource=True,
                                        initializer=v1.zeros_initializer())
        h = tf.tanh(tf.matmul(tf.concat([inputs, state], 1), self.kernel) + self.bias)
        return h, h


def v1cf_dynamic_rnn():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [4, 5, 3], name="x")
        t = v1.placeholder(tf.float32, [4, 8], name="t")
        with v1.variable_scope("rnn_model", use_resource=True):
            cell = BasicRNNCell(8)
            outputs, state = v1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        last = outputs[:, -1, :]
        loss = tf.reduce_mean(tf.square(last - t))
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        tf.identity(loss, name="loss")
        tf.identity(state, name="state")
    gd = export(g, OUT, "v1cf_dynamic_rnn")
    check_v1("v1cf_dynamic_rnn", gd)
    rng = np.random.default_rng(15)
    names = sorted(n.attr["shared_name"].s.decode() or n.name for n in gd.node if n.op == "VarHandleOp")
    shapes = {"kernel": (11, 8), "bias": (8,)}
    variables = {}
    for nm in names:
        shape = shapes[nm.rsplit("/", 1)[-1]]
        variables[nm] = (rng.standard_normal(shape) * 0.4).astype(np.float32)
    feeds = {"x": rng.standard_normal((4, 5, 3)).astype(np.float32),
             "t": rng.standard_normal((4, 8)).astype(np.float32)}
    write_fixture(OUT, "v1cf_dynamic_rnn", gd, variables, feeds, ["loss:0", "state:0"], [train.name], 3)


def v1cf_map_fn():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [6, 4], name="x")
        y = tf.map_fn(lambda r: tf.reduce_sum(tf.tanh(r) * r) + r[0], x, parallel_iterations=3)
        tf.identity(y, name="y")
    gd = export(g, OUT, "v1cf_map_fn")
    check_v1("v1cf_map_fn", gd)
    rng = np.random.default_rng(16)
    feeds = {"x": rng.standard_normal((6, 4)).astype(np.float32)}
    write_fixture(OUT, "v1cf_map_fn", gd, {}, feeds, ["y:0"], [], 1)


def v1cf_ref_loop():
    import json
    from safetensors.numpy import save_file
    v1.disable_resource_variables()
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        w = v1.Variable(np.zeros(3, np.float32), name="w")
        count = v1.Variable(np.float32(0), name="count", trainable=False)

        def body(i, h):
            bump = v1.assign_add(count, 1.0)
            with tf.control_dependencies([bump]):
                return i + 1, tf.tanh(h * w + x)

        _, h = v1.while_loop(lambda i, h: i < 3, body, [tf.constant(0), tf.zeros([3])])
        loss = tf.reduce_sum(h * h, name="loss")
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[w], name="train")
        variables = [w, count]
    gd = g.as_graph_def()
    assert all(v.op.type == "VariableV2" for v in variables)
    ops = ops_of(gd)
    assert "RefEnter" in ops, sorted(ops)
    check_v1("v1cf_ref_loop", gd)
    tf.io.write_graph(gd, OUT, "v1cf_ref_loop.pbtxt", as_text=True)
    values = {"w": np.array([0.5, -0.4, 0.9], np.float32), "count": np.array(0, np.float32)}
    feeds = {"x": np.array([0.2, 0.1, -0.3], np.float32)}
    steps = 2
    with v1.Session(graph=g) as s:
        s.run(v1.global_variables_initializer())
        for v in variables:
            v.load(values[v.op.name], s)
        for _ in range(steps):
            out = s.run([loss, train], {x: feeds["x"]})[0]
        final = {v.op.name: s.run(v) for v in variables}
    arr = lambda v: np.array(v, order="C")  # noqa: E731
    name = "v1cf_ref_loop"
    save_file({k: arr(v) for k, v in feeds.items()}, os.path.join(OUT, name + ".feeds.safetensors"))
    save_file({k: arr(v) for k, v in values.items()}, os.path.join(OUT, name + ".vars.safetensors"))
    save_file({"loss:0": arr(out)}, os.path.join(OUT, name + ".expected.safetensors"))
    save_file({k: arr(v) for k, v in final.items()}, os.path.join(OUT, name + ".expected_vars.safetensors"))
    manifest = {
        "graph": name + ".pbtxt", "feeds": name + ".feeds.safetensors", "vars": name + ".vars.safetensors",
        "fetch": ["loss:0"], "target": ["train"], "steps": steps,
        "expected_fetches": name + ".expected.safetensors", "expected_vars": name + ".expected_vars.safetensors",
        "racy": False, "outcomes": None,
    }
    with open(os.path.join(OUT, name + ".json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")


FIXTURES = [v1cf_cond, v1cf_while, v1cf_nested_while, v1cf_while_var, v1cf_grad_cond, v1cf_grad_while,
            v1cf_dynamic_rnn, v1cf_map_fn, v1cf_ref_loop]

if __name__ == "__main__":
    only = sys.argv[1:]
    for f in FIXTURES:
        if not only or f.__name__ in only:
            f()
            print("wrote", f.__name__)
