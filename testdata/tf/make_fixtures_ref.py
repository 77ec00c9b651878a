"""Writes the reference-variable (TF1 `VariableV2`) fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 /work/venv-tf/bin/python testdata/tf/make_fixtures_ref.py

Graphs built the way TensorFlow 1 code did by default — `tf.compat.v1.disable_resource_variables()`
— so variables are `VariableV2` nodes read through `Identity` (`w/read`) and updated by `Assign`,
`AssignAdd` and the optimizers' ref-taking `Apply*` ops. autoclust runs them by turning them into
resource variables (passes/src/ref_variables.rs); the variables keep their names (the node name:
TF1 leaves `shared_name` empty). Expected values come from a tf.compat.v1.Session on the same
graph, with the variables loaded from the `.vars.safetensors` values. File layout: README.md.

- ref_mlp_momentum: 6-10-3 tanh MLP, softmax cross-entropy, MomentumOptimizer (ApplyMomentum: two
  references) with a global step (`AssignAdd` on an int64 `VariableV2`), and `loss` fetched. 3 steps.
- ref_ema_after_train: ExponentialMovingAverage applied under control_dependencies([train_op]) (its
  updates see the in-place optimizer update through `w/read`). 3 steps.
- ref_cond_assign: a v1 `cond` (RefSwitch → Assign / AssignAdd → RefMerge) assigning a variable
  in each branch, the merged reference read after it, and a chained `assign_add(assign(c, …), …)`
  (a reference-taking op on another's output), and a fetched reference (`inc = assign_add(step, 1)`:
  TensorFlow returns the updated value). 3 steps.
"""

import json
import os

import numpy as np
import tensorflow as tf
from safetensors.numpy import save_file

OUT = os.path.dirname(os.path.abspath(__file__))
v1 = tf.compat.v1


def save_fixture(name, graph_def, values, feeds, fetched, final, fetch, target, steps):
    """Writes NAME's feeds, initial variables, TensorFlow's fetches and final variables, and its manifest."""
    arr = lambda v: np.array(v, order="C")  # noqa: E731
    save_file({k: arr(v) for k, v in feeds.items()}, os.path.join(OUT, name + ".feeds.safetensors"))
    save_file({k: arr(v) for k, v in values.items()}, os.path.join(OUT, name + ".vars.safetensors"))
    save_file({k: arr(v) for k, v in fetched.items()}, os.path.join(OUT, name + ".expected.safetensors"))
    save_file({k: arr(v) for k, v in final.items()}, os.path.join(OUT, name + ".expected_vars.safetensors"))
    manifest = {
        "graph": name + ".pbtxt", "feeds": name + ".feeds.safetensors", "vars": name + ".vars.safetensors",
        "fetch": fetch, "target": target, "steps": steps,
        "expected_fetches": name + ".expected.safetensors", "expected_vars": name + ".expected_vars.safetensors",
        "racy": False, "outcomes": None,
    }
    with open(os.path.join(OUT, name + ".json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")
    print(name, sorted({n.op for n in graph_def.node}), sorted(values))


def ref_mlp_momentum():
    v1.disable_eager_execution()
    v1.disable_resource_variables()
    rng = np.random.default_rng(21)
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 6], name="x")
        t = v1.placeholder(tf.float32, [None, 3], name="t")
        w1 = v1.Variable(np.zeros((6, 10), np.float32), name="w1")
        b1 = v1.Variable(np.zeros(10, np.float32), name="b1")
        w2 = v1.Variable(np.zeros((10, 3), np.float32), name="w2")
        step = v1.Variable(np.int64(0), name="global_step", trainable=False)
        h = tf.tanh(tf.matmul(x, w1) + b1)
        logits = tf.matmul(h, w2)
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=t, logits=logits), name="loss")
        opt = v1.train.MomentumOptimizer(0.2, momentum=0.9)
        train = opt.minimize(loss, global_step=step, name="train")
        variables = [w1, b1, w2, step] + [opt.get_slot(v, "momentum") for v in (w1, b1, w2)]
        init = v1.global_variables_initializer()
    assert all(v.op.type == "VariableV2" for v in variables), [v.op.type for v in variables]
    graph_def = g.as_graph_def()
    tf.io.write_graph(graph_def, OUT, "ref_mlp_momentum.pbtxt", as_text=True)
    values = {
        "w1": rng.standard_normal((6, 10)).astype(np.float32) * 0.5,
        "b1": np.full(10, 0.1, np.float32),
        "w2": rng.standard_normal((10, 3)).astype(np.float32) * 0.5,
        "global_step": np.array(0, np.int64),
    }
    for v in variables[4:]:
        values[v.op.name] = np.zeros(v.shape, np.float32)
    feeds = {"x": rng.standard_normal((7, 6)).astype(np.float32),
             "t": np.eye(3, dtype=np.float32)[[0, 1, 2, 1, 0, 2, 2]]}
    steps = 3
    with v1.Session(graph=g) as s:
        s.run(init)
        for v in variables:
            v.load(values[v.op.name], s)
        for _ in range(steps):
            out = s.run([loss, train], {x: feeds["x"], t: feeds["t"]})[0]
        final = {v.op.name: s.run(v) for v in variables}
    save_fixture("ref_mlp_momentum", graph_def, values, feeds, {"loss:0": out}, final, ["loss:0"], ["train"], steps)

def ref_ema_after_train():
    """The TF1 idiom `with tf.control_dependencies([train_op]): ema.apply(vars)`: the moving
    averages' updates read the trained weights through `w/read`, whose output shares the
    variable's buffer, so they see the in-place `ApplyGradientDescent` that ran before them.
    A 4-3 linear layer, GradientDescent, ExponentialMovingAverage(0.9); 3 steps."""
    v1.disable_eager_execution()
    v1.disable_resource_variables()
    rng = np.random.default_rng(23)
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 4], name="x")
        t = v1.placeholder(tf.float32, [None, 3], name="t")
        w = v1.Variable(np.zeros((4, 3), np.float32), name="w")
        b = v1.Variable(np.zeros(3, np.float32), name="b")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - t), name="loss")
        train = v1.train.GradientDescentOptimizer(0.3).minimize(loss)
        ema = v1.train.ExponentialMovingAverage(0.9)
        with tf.control_dependencies([train]):
            step = tf.group(ema.apply([w, b]), name="train")
        variables = [w, b, ema.average(w), ema.average(b)]
        # The averages' initialisers read w and b: those first.
        inits = [v1.variables_initializer([w, b]), v1.variables_initializer(variables[2:])]
    assert all(v.op.type == "VariableV2" for v in variables), [v.op.type for v in variables]
    graph_def = g.as_graph_def()
    tf.io.write_graph(graph_def, OUT, "ref_ema_after_train.pbtxt", as_text=True)
    values = {"w": rng.standard_normal((4, 3)).astype(np.float32), "b": np.full(3, 0.2, np.float32)}
    values[ema.average(w).op.name] = values["w"].copy()
    values[ema.average(b).op.name] = values["b"].copy()
    feeds = {"x": rng.standard_normal((6, 4)).astype(np.float32), "t": rng.standard_normal((6, 3)).astype(np.float32)}
    steps = 3
    with v1.Session(graph=g) as s:
        for i in inits:
            s.run(i)
        for v in variables:
            v.load(values[v.op.name], s)
        for _ in range(steps):
            out = s.run([loss, step], {x: feeds["x"], t: feeds["t"]})[0]
        final = {v.op.name: s.run(v) for v in variables}
    save_fixture("ref_ema_after_train", graph_def, values, feeds, {"loss:0": out}, final, ["loss:0"], ["train"], steps)


def ref_cond_assign():
    """`tf.compat.v1.cond(p, lambda: assign_add(acc, [1, 2]), lambda: assign(acc, acc * 0.5 - 1))`
    under control flow v1: each branch updates the variable through its `RefSwitch`, `RefMerge`
    forwards the updated reference and `out` reads it. Beside it `assign_add(assign(c, c * 2),
    [1, 1])`, which adds to the reference the `Assign` returns. p is false: the `Assign` branch."""
    v1.disable_eager_execution()
    v1.disable_resource_variables()
    v1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        p = v1.placeholder(tf.bool, [], name="p")
        acc = v1.Variable(np.zeros(2, np.float32), name="acc")
        c = v1.Variable(np.zeros(2, np.float32), name="c")
        r = v1.cond(p, lambda: v1.assign_add(acc, [1.0, 2.0]), lambda: v1.assign(acc, acc * 0.5 - 1.0))
        out = tf.identity(r, name="out")
        chained = v1.assign_add(v1.assign(c, c * 2.0), [1.0, 1.0])
        chained_out = tf.identity(chained, name="chained")
        global_step = v1.Variable(np.int64(0), name="global_step", trainable=False)
        inc = v1.assign_add(global_step, 1, name="inc")
        step = tf.group(r, chained, inc, name="train")
    graph_def = g.as_graph_def()
    assert {"RefSwitch", "RefMerge"} <= {n.op for n in graph_def.node}
    tf.io.write_graph(graph_def, OUT, "ref_cond_assign.pbtxt", as_text=True)
    values = {"acc": np.array([4.0, 8.0], np.float32), "c": np.array([1.0, -2.0], np.float32),
              "global_step": np.int64(5)}
    feeds = {"p": np.array(False)}
    steps = 3
    # `inc:0` fetches a reference: TensorFlow returns the updated value.
    with v1.Session(graph=g) as s:
        acc.load(values["acc"], s)
        c.load(values["c"], s)
        global_step.load(values["global_step"], s)
        for _ in range(steps):
            fetched = s.run([out, chained_out, inc, step], {p: False})
        final = {"acc": s.run(acc), "c": s.run(c), "global_step": s.run(global_step)}
    names = ["out:0", "chained:0", "inc:0"]
    save_fixture("ref_cond_assign", graph_def, values, feeds, dict(zip(names, fetched)), final, names, ["train"],
                 steps)


if __name__ == "__main__":
    print("TensorFlow", tf.__version__)
    ref_mlp_momentum()
    ref_ema_after_train()
    ref_cond_assign()
