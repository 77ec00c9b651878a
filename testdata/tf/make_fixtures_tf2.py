"""Writes the TensorFlow 2 function-graph fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 /work/venv-tf/bin/python testdata/tf/make_fixtures_tf2.py

Each graph is a `tf.function`'s concrete FuncGraph as TensorFlow 2 exports it
(`get_concrete_function(...).graph.as_graph_def()`): its variables are *captured*, so they appear
as `Placeholder`s of dtype `resource` named after their first use (e.g.
`MatMul/ReadVariableOp/resource`), not as VarHandleOps; stateful ops are ordered by automatic
control dependencies; the input signature leaves the batch dimension unknown (`[?, n]`). autoclust
names such a variable after the placeholder node (docs/contract.md §3, a handle without `shared_name`),
so the `.vars.safetensors` files use those names.

Expected values come from calling the same concrete function eagerly, `steps` times with the same
feeds, on tf.Variables holding the initial values (the last step's outputs, and every variable
after the last step). File layout and manifest: README.md.

- tf2_linear_step: y = x·w + b, loss = Σ tanh(y); w -= 0.1·loss, b += mean(y, 0). 3 steps, batch 4.
- tf2_mlp_sgd: a 8-16-3 MLP (relu) with sparse softmax cross-entropy, gradients by
  tf.GradientTape (BroadcastGradientArgs, Shape-driven Reshapes, ReluGrad, ...), plain SGD with
  assign_sub, and an int64 step counter. 3 steps, batch 5.
- tf2_keras_adam: the same kind of step written with Keras 3 (Sequential Dense layers,
  SparseCategoricalCrossentropy, keras.optimizers.Adam): DivNoNan, Pow, Sqrt, IdentityN, the
  optimizer's iteration counter and moment variables. 3 steps, batch 6.
- tf2_control_flow: autograph `if` and `while` on tensors become `If` and `While` whose inputs
  include the captured variables' resource placeholders; the variables' element types are found
  in the branch and loop bodies. 2 steps.
- tf2_pad_clip_erf: `Pad`, `PadV2` and `MirrorPad` (REFLECT, SYMMETRIC), `ClipByValue` with scalar and
  tensor bounds, `Erf` (GELU) and `Selu`, with a variable clipped in place. 2 steps.
- tf2_scan_split_where: `Cumsum` (plain, exclusive + reverse), `Cumprod`, `SplitV` with an inferred
  size, and one-argument `Where` (data-dependent output shape). 2 steps.
- tf2_einsum_attention: Keras MultiHeadAttention's einsums written out (EinsumDense projections,
  "aecd,abcd->acbe" scores, softmax, context, output projection) in a training step whose gradients
  are einsums too, plus an ellipsis-broadcast, an implicit-output and a one-operand equation.
  2 steps, batch 3.
- tf2_segment_topk_assert: sorted `Segment{Sum,Mean,Max,Min,Prod}` with an empty segment, `TopKV2`
  with ties, and the `Assert` ops of `tf.debugging.assert_*` (passing). 2 steps.
- tf2_gather_scatter_nd: `GatherNd` (rows and elements of a variable) whose gradient is a `ScatterNd`,
  `ScatterNd` with duplicate indices, `ReverseV2` on one and two axes, and `tf.linspace` (which
  computes `BroadcastArgs`). 2 steps.
- tf2_keras_dropout: a Keras 3 training step with `Dropout` (its mask comes from
  `StatelessRandomGetKeyCounter` + `StatelessRandomUniformV2` seeded by the layer's seed-generator
  variable), plus every stateless sampler (V2 through `tf.random.stateless_*`, V1 through raw ops;
  float32/float64, int32/int64, int32 and int64 seeds) seeded from a counter variable. 3 steps.
- tf2_keras_layernorm_gelu: Keras 3 Embedding (its gradient: UnsortedSegmentSum), LayerNormalization,
  Dense with exact `gelu` (`Erfc`), GlobalAveragePooling1D and AdamW. 2 steps, batch 4.
- tf2_keras_lstm_gru: Keras 3 LSTM (return_sequences) into a Bidirectional SimpleRNN (`ReverseV2`,
  `ConcatOffset` in its gradient) into GRU into Dense, SGD: `While` loops over
  TensorLists (`TensorListFromTensor`/`Reserve`/`GetItem`/`SetItem`/`Stack`) whose gradient loops
  accumulate with `EmptyTensorList`/`TensorListPushBack`/`TensorListPopBack`. 2 steps, batch 4.
- tf2_keras_activations: Keras 3 activations and their gradient ops — softsign (`SoftsignGrad`), PReLU,
  selu (`SeluGrad`), elu (`EluGrad`), LeakyReLU (`LeakyReluGrad`), softplus (`SoftplusGrad`), mish,
  hard_sigmoid — with an L2 kernel regularizer, SGD. 2 steps, batch 5.
- tf2_band_atan2_bucketize: `MatrixBandPart` (a causal mask, its own gradient, bands (1, 1) and (0, 0)),
  `Atan2` with broadcasting and its gradient, `Bucketize` of floats (a value on a boundary) and of int64.
  2 steps.
- tf2_tensor_array: a `tf.TensorArray` written in a `While` loop, then gathered, concatenated and stacked
  (`TensorListGather`, `TensorListConcatV2`), with its gradient (`TensorListSplit`,
  `TensorListScatterIntoExistingList`, `TensorListResize`), and a scattered array read back. 2 steps.
- tf2_pure_loops: pure `tf.while_loop`s and `tf.cond`s in a step (TensorFlow 2 writes `StatelessWhile`
  and `StatelessIf`): Newton iterations for a square root with a loop-invariant operand, a nested loop
  (power iteration inside a loop over rounds), `maximum_iterations`, and a branch choosing between two
  pure functions of a reduced value; the variable is updated from the loops' results. Also `tf.eye`
  (`MatrixDiagV3`), a band `tf.linalg.diag_part`/`diag` with `k = (-1, 1)` and `set_diag`. 2 steps, batch 3.
- tf2_keras_cnn: Keras Conv2D(relu) + BatchNormalization (training mode: batch moments, moving
  averages) + MaxPooling2D + Flatten + Dense, SGD with momentum; the gradients reshape and
  broadcast by shapes of tensors computed in other clusters. 2 steps, batch 5.
- tf2_bn_depthwise_ftrl: a strided SAME `DepthwiseConv2dNative` into `FusedBatchNormV3` in training mode
  with `exponential_avg_factor` (moving statistics assigned from its outputs), relu plus `Sin`, a dropout
  mask from `tf.random.stateless_uniform` seeded by a counter variable, Dense, and `Cos` of the weights in
  the loss; the gradients (`DepthwiseConv2dNativeBackprop{Input,Filter}`, `FusedBatchNormGradV3`) feed
  `ResourceApplyFtrl`, `ResourceApplyAdaMax`, `ResourceApplyProximalAdagrad` and `ResourceApplyAddSign`;
  an exclusive `Cumsum` of the logits is fetched. 2 steps, batch 5.
"""

import json
import os

import numpy as np
import tensorflow as tf
from safetensors.numpy import save_file

OUT = os.path.dirname(os.path.abspath(__file__))


def capture_names(name, cf, variables):
    """The capture placeholder of each variable of `variables` ((tf.Variable, initial value)
    pairs), by `id` of the variable: the name autoclust gives it."""
    names = {}
    for external, internal in cf.graph.captures:
        for var, _ in variables:
            if external is var.handle:
                names[id(var)] = internal.op.name
    assert len(names) == len(variables), f"{name}: not every variable is captured ({names})"
    return names


def write(name, cf, variables, feeds, steps):
    """Exports `cf`'s graph and writes the fixture; `variables` are (tf.Variable, initial value)."""
    graph_def = cf.graph.as_graph_def()
    path = tf.io.write_graph(graph_def, OUT, name + ".pbtxt", as_text=True)
    names = capture_names(name, cf, variables)
    for var, init in variables:
        var.assign(init)
    inputs = [tf.constant(feeds[s.name]) for s in cf.structured_input_signature[0]]
    out = None
    for _ in range(steps):
        out = cf(*inputs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    fetch = [t.name for t in cf.outputs]
    assert len(fetch) == len(outs)
    # Contiguous copies: safetensors 0.8 writes a non-contiguous view's underlying buffer, so a
    # feed such as `seq[:, :-1]` was written shifted (and TensorFlow's expected values, computed
    # from the view itself, then disagreed with the file). `np.array(v, order="C")`, not
    # `np.ascontiguousarray`, which makes a 0-d feed shape [1].
    arr = lambda v: np.array(v, order="C")  # noqa: E731  (0-d values become arrays too)
    save_file({k: arr(v) for k, v in feeds.items()}, os.path.join(OUT, name + ".feeds.safetensors"))
    save_file({names[id(v)]: arr(init) for v, init in variables}, os.path.join(OUT, name + ".vars.safetensors"))
    save_file({f: arr(o.numpy()) for f, o in zip(fetch, outs)}, os.path.join(OUT, name + ".expected.safetensors"))
    save_file({names[id(v)]: arr(v.numpy()) for v, _ in variables},
              os.path.join(OUT, name + ".expected_vars.safetensors"))
    manifest = {
        "graph": name + ".pbtxt",
        "feeds": name + ".feeds.safetensors",
        "vars": name + ".vars.safetensors",
        "fetch": fetch,
        "target": [],
        "steps": steps,
        "expected_fetches": name + ".expected.safetensors",
        "expected_vars": name + ".expected_vars.safetensors",
        "racy": False,
        "outcomes": None,
    }
    with open(os.path.join(OUT, name + ".json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")
    print(name, os.path.basename(path), sorted({n.op for n in graph_def.node}), "vars:", sorted(names.values()))


def captured_variables(cf, candidates):
    """(variable, initial value) for each candidate `cf` captures, once each, in order."""
    captured = {id(e) for e, _ in cf.graph.captures}
    out, seen = [], set()
    for v in candidates:
        if id(v.handle) in captured and id(v) not in seen:
            seen.add(id(v))
            out.append((v, v.numpy()))
    return out


def keras_train_fixture(name, model, opt, x_spec, feeds, steps):
    """Writes a Keras training step: sparse softmax cross-entropy on logits (plus the model's
    regularization losses), gradients by tf.GradientTape, `opt.apply_gradients`."""
    import keras

    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt.build(model.trainable_variables)

    @tf.function(input_signature=[x_spec, tf.TensorSpec([None], tf.int32, name="labels")])
    def train(x, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(x, training=True))
            if model.losses:
                loss = loss + tf.add_n(model.losses)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    cf = train.get_concrete_function()
    write(name, cf, captured_variables(cf, model.variables + opt.variables), feeds, steps)


def tf2_linear_step():
    w = tf.Variable(np.zeros((2, 3), np.float32), name="w")
    b = tf.Variable(np.zeros(3, np.float32), name="b")

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def step(x):
        y = tf.matmul(x, w) + b
        loss = tf.reduce_sum(tf.tanh(y))
        w.assign_sub(0.1 * tf.ones_like(w) * loss)
        b.assign_add(tf.reduce_mean(y, axis=0))
        return loss

    rng = np.random.default_rng(11)
    variables = [(w, rng.standard_normal((2, 3)).astype(np.float32) * 0.5),
                 (b, np.array([0.1, -0.2, 0.3], np.float32))]
    feeds = {"x": rng.standard_normal((4, 2)).astype(np.float32)}
    write("tf2_linear_step", step.get_concrete_function(), variables, feeds, 3)


def tf2_mlp_sgd():
    w1 = tf.Variable(np.zeros((8, 16), np.float32), name="w1")
    b1 = tf.Variable(np.zeros(16, np.float32), name="b1")
    w2 = tf.Variable(np.zeros((16, 3), np.float32), name="w2")
    b2 = tf.Variable(np.zeros(3, np.float32), name="b2")
    steps = tf.Variable(np.int64(0), name="steps")
    params = [w1, b1, w2, b2]

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x"),
                                  tf.TensorSpec([None], tf.int32, name="labels")])
    def train(x, labels):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(x, w1) + b1)
            logits = tf.matmul(h, w2) + b2
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.5 * g)
        steps.assign_add(1)
        return loss, tf.argmax(logits, axis=1, output_type=tf.int32)

    rng = np.random.default_rng(12)
    variables = [(w1, rng.standard_normal((8, 16)).astype(np.float32) * 0.4),
                 (b1, np.full(16, 0.05, np.float32)),
                 (w2, rng.standard_normal((16, 3)).astype(np.float32) * 0.4),
                 (b2, np.zeros(3, np.float32)),
                 (steps, np.int64(0))]
    feeds = {"x": rng.standard_normal((5, 8)).astype(np.float32),
             "labels": np.array([0, 2, 1, 2, 0], np.int32)}
    write("tf2_mlp_sgd", train.get_concrete_function(), variables, feeds, 3)


def tf2_keras_adam():
    import keras

    keras.utils.set_random_seed(13)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])
    rng = np.random.default_rng(13)
    feeds = {"x": rng.standard_normal((6, 8)).astype(np.float32),
             "labels": np.array([0, 2, 1, 2, 0, 1], np.int32)}
    keras_train_fixture("tf2_keras_adam", model, keras.optimizers.Adam(0.01),
                        tf.TensorSpec([None, 8], tf.float32, name="x"), feeds, 3)



def tf2_keras_cnn():
    import keras

    keras.utils.set_random_seed(14)
    model = keras.Sequential([
        keras.Input((12, 12, 3)),
        keras.layers.Conv2D(8, 3, activation="relu"),
        keras.layers.BatchNormalization(),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(4),
    ])
    rng = np.random.default_rng(14)
    feeds = {"x": rng.standard_normal((5, 12, 12, 3)).astype(np.float32),
             "labels": np.array([0, 1, 2, 3, 0], np.int32)}
    keras_train_fixture("tf2_keras_cnn", model, keras.optimizers.SGD(0.05, momentum=0.9),
                        tf.TensorSpec([None, 12, 12, 3], tf.float32, name="x"), feeds, 2)



def tf2_control_flow():
    w = tf.Variable(np.ones(3, np.float32), name="w")
    n = tf.Variable(np.int32(0), name="n")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x"),
                                  tf.TensorSpec([], tf.int32, name="k")])
    def step(x, k):
        s = tf.reduce_sum(x, 0)
        if tf.reduce_sum(s) > 0:  # autograph: If with the captured variable as an input
            w.assign_add(s)
        else:
            w.assign_sub(s * 0.5)
        i = tf.constant(0)
        acc = tf.zeros(3)
        while i < k:  # autograph: While carrying both variables' handles
            acc = acc + tf.tanh(w * tf.cast(i, tf.float32))
            n.assign_add(1)
            i += 1
        return acc

    variables = [(w, np.array([1.0, -0.5, 0.25], np.float32)), (n, np.int32(0))]
    feeds = {"x": np.array([[1, 2, -0.5], [0.5, -1, 0.25]], np.float32), "k": np.array(4, np.int32)}
    write("tf2_control_flow", step.get_concrete_function(), variables, feeds, 2)


def tf2_pad_clip_erf():
    w = tf.Variable(np.zeros((3, 4), np.float32), name="w")

    @tf.function(input_signature=[tf.TensorSpec([None, 3, 4], tf.float32, name="x")])
    def step(x):
        p0 = tf.pad(x, [[0, 0], [1, 2], [2, 1]])
        p1 = tf.pad(x, [[0, 0], [2, 1], [1, 3]], mode="REFLECT")
        p2 = tf.pad(x, [[1, 0], [3, 0], [0, 4]], mode="SYMMETRIC")
        p3 = tf.pad(x, [[0, 1], [0, 0], [1, 1]], constant_values=-2.5)
        gelu = 0.5 * x * (1.0 + tf.math.erf(x / np.sqrt(2.0).astype(np.float32)))
        act = tf.nn.selu(x * 3.0) + tf.clip_by_value(x * 4.0, -1.5, 2.0)
        upd = tf.reduce_mean(gelu + act, axis=0)
        w.assign(tf.clip_by_value(w + upd, -0.75, tf.ones_like(w)))
        return (tf.reduce_sum(p0, [1, 2]), tf.reduce_sum(p1, [1, 2]) + tf.reduce_sum(p2), tf.reduce_sum(p3),
                gelu, act)

    rng = np.random.default_rng(15)
    variables = [(w, rng.standard_normal((3, 4)).astype(np.float32))]
    feeds = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    write("tf2_pad_clip_erf", step.get_concrete_function(), variables, feeds, 2)


def tf2_scan_split_where():
    acc = tf.Variable(np.zeros(6, np.float32), name="acc")

    @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32, name="x")])
    def step(x):
        c0 = tf.cumsum(x, axis=1)
        c1 = tf.cumsum(x, axis=1, exclusive=True, reverse=True)
        c2 = tf.math.cumprod(x * 0.5 + 1.0, axis=0)
        a, b, c = tf.split(x, [1, -1, 2], axis=1)
        where = tf.where(x > 0.3)
        acc.assign_add(tf.reduce_sum(c0 + c1, axis=0))
        return c2, tf.reduce_sum(a) + tf.reduce_sum(b * 2.0) + tf.reduce_sum(c * 3.0), where

    rng = np.random.default_rng(16)
    variables = [(acc, rng.standard_normal(6).astype(np.float32))]
    feeds = {"x": rng.standard_normal((4, 6)).astype(np.float32)}
    write("tf2_scan_split_where", step.get_concrete_function(), variables, feeds, 2)


def tf2_einsum_attention():
    wq = tf.Variable(np.zeros((8, 2, 4), np.float32), name="wq")
    wk = tf.Variable(np.zeros((8, 2, 4), np.float32), name="wk")
    wv = tf.Variable(np.zeros((8, 2, 4), np.float32), name="wv")
    wo = tf.Variable(np.zeros((2, 4, 8), np.float32), name="wo")
    params = [wq, wk, wv, wo]

    @tf.function(input_signature=[tf.TensorSpec([None, 5, 8], tf.float32, name="x")])
    def step(x):
        with tf.GradientTape() as tape:
            # Keras MultiHeadAttention's einsums: EinsumDense projections, scores, context, output.
            q = tf.einsum("abc,cde->abde", x, wq) * 0.5
            k = tf.einsum("abc,cde->abde", x, wk)
            v = tf.einsum("abc,cde->abde", x, wv)
            scores = tf.nn.softmax(tf.einsum("aecd,abcd->acbe", k, q), axis=-1)
            ctx = tf.einsum("acbe,aecd->abcd", scores, v)
            out = tf.einsum("abcd,cde->abe", ctx, wo)
            loss = tf.reduce_mean(tf.square(out - x))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.2 * g)
        # Ellipsis broadcasting, an implicit-output equation and a one-operand sum.
        extra = tf.einsum("...ij,...jk->...ik", scores, tf.ones([1, 5, 3])) + tf.einsum("ij,jk", x[0], wq[:, 0, :2])[None, :, :1]
        return loss, out, extra, tf.einsum("abcd->ad", ctx)

    rng = np.random.default_rng(17)
    variables = [(w, rng.standard_normal(w.shape).astype(np.float32) * 0.3) for w in params]
    feeds = {"x": rng.standard_normal((3, 5, 8)).astype(np.float32)}
    write("tf2_einsum_attention", step.get_concrete_function(), variables, feeds, 2)


def tf2_segment_topk_assert():
    table = tf.Variable(np.zeros((4, 3), np.float32), name="table")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x"),
                                  tf.TensorSpec([None], tf.int32, name="ids")])
    def step(x, ids):
        tf.debugging.assert_non_negative(ids, message="ids must be non-negative")
        tf.debugging.assert_equal(tf.shape(x)[0], tf.shape(ids)[0])
        s = tf.math.segment_sum(x, ids)
        m = tf.math.segment_mean(x, ids)
        mx = tf.math.segment_max(x, ids)
        mn = tf.math.segment_min(x * 2.0, ids)
        p = tf.math.segment_prod(x + 1.0, ids)
        values, indices = tf.math.top_k(tf.reshape(x, [-1]) + table[0, 0], k=4)
        v2, i2 = tf.math.top_k(table, k=2)
        table.assign_add(tf.pad(s, [[0, 4 - tf.shape(s)[0]], [0, 0]]) * 0.5)
        return s, m, mx, mn, p, values, indices, v2, i2

    rng = np.random.default_rng(18)
    variables = [(table, rng.standard_normal((4, 3)).astype(np.float32))]
    # Segment 1 is empty (Max/Min/Mean give 0 there); ties in x exercise TopK's index order.
    x = rng.standard_normal((6, 3)).astype(np.float32)
    x[4, 1] = x[2, 0]
    feeds = {"x": x, "ids": np.array([0, 0, 2, 2, 2, 3], np.int32)}
    write("tf2_segment_topk_assert", step.get_concrete_function(), variables, feeds, 2)


def tf2_gather_scatter_nd():
    table = tf.Variable(np.zeros((5, 4), np.float32), name="table")

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.int32, name="idx"),
                                  tf.TensorSpec([None, 4], tf.float32, name="x")])
    def step(idx, x):
        with tf.GradientTape() as tape:
            picked = tf.gather_nd(table, idx)  # its gradient is a ScatterNd
            rows = tf.gather_nd(table, idx[:, :1])
            loss = tf.reduce_sum(tf.square(picked - x[:, 0])) + tf.reduce_sum(rows * tf.reverse(x, [1]))
        g = tape.gradient(loss, table)
        table.assign_sub(0.1 * tf.convert_to_tensor(g))
        scattered = tf.scatter_nd(idx, x[:, 1] * 2.0, [5, 4])  # duplicate index pairs accumulate
        ramp = tf.linspace(0.0, 1.0, tf.shape(x)[0] + 1)  # BroadcastArgs inside
        return loss, scattered, tf.reverse(x, [0, 1]), ramp

    rng = np.random.default_rng(19)
    variables = [(table, rng.standard_normal((5, 4)).astype(np.float32))]
    feeds = {"idx": np.array([[0, 1], [3, 2], [0, 1], [4, 3]], np.int32),
             "x": rng.standard_normal((4, 4)).astype(np.float32)}
    write("tf2_gather_scatter_nd", step.get_concrete_function(), variables, feeds, 2)


def tf2_keras_dropout():
    import keras

    keras.utils.set_random_seed(21)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dropout(0.5), keras.layers.Dense(3)])
    opt = keras.optimizers.SGD(0.1)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt.build(model.trainable_variables)
    counter = tf.Variable(np.int64(3), name="counter")

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x"),
                                  tf.TensorSpec([None], tf.int32, name="labels")])
    def train(x, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        seed = tf.stack([counter, counter * 7 - 100])
        counter.assign_add(1)
        s32 = tf.cast(seed, tf.int32)
        return (loss,
                tf.random.stateless_uniform([3, 5], seed),
                tf.random.stateless_normal([4, 3], seed, dtype=tf.float64),
                tf.random.stateless_truncated_normal([9], s32),
                tf.random.stateless_uniform([6], seed, minval=-5, maxval=9, dtype=tf.int32),
                tf.raw_ops.StatelessRandomUniform(shape=[5], seed=seed),
                tf.raw_ops.StatelessRandomNormal(shape=[3], seed=s32),
                tf.raw_ops.StatelessTruncatedNormal(shape=[2, 3], seed=seed, dtype=tf.float64),
                tf.raw_ops.StatelessRandomUniformInt(shape=[4], seed=seed, minval=tf.constant(0, tf.int64),
                                                     maxval=tf.constant(1 << 40, tf.int64)))

    cf = train.get_concrete_function()
    candidates = model.variables + opt.variables + [counter]
    candidates += [layer.seed_generator.state for layer in model.layers if hasattr(layer, "seed_generator")]
    variables = captured_variables(cf, candidates)
    rng = np.random.default_rng(21)
    feeds = {"x": rng.standard_normal((6, 8)).astype(np.float32),
             "labels": np.array([0, 2, 1, 2, 0, 1], np.int32)}
    write("tf2_keras_dropout", cf, variables, feeds, 3)


def tf2_keras_layernorm_gelu():
    import keras

    keras.utils.set_random_seed(5)
    L = keras.layers
    model = keras.Sequential([keras.Input((7,), dtype="int32"), L.Embedding(50, 16), L.LayerNormalization(),
                              L.Dense(16, activation="gelu"), L.GlobalAveragePooling1D(), L.Dense(4)])
    rng = np.random.default_rng(5)
    feeds = {"x": rng.integers(0, 50, (4, 7)).astype(np.int32), "labels": np.array([0, 3, 1, 2], np.int32)}
    keras_train_fixture("tf2_keras_layernorm_gelu", model, keras.optimizers.AdamW(0.01),
                        tf.TensorSpec([None, 7], tf.int32, name="x"), feeds, 2)



def tf2_keras_lstm_gru():
    import keras

    keras.utils.set_random_seed(8)
    L = keras.layers
    model = keras.Sequential([keras.Input((5, 6)), L.LSTM(8, return_sequences=True),
                              L.Bidirectional(L.SimpleRNN(3, return_sequences=True)), L.GRU(4), L.Dense(3)])
    rng = np.random.default_rng(8)
    feeds = {"x": rng.standard_normal((4, 5, 6)).astype(np.float32), "labels": np.array([0, 2, 1, 2], np.int32)}
    keras_train_fixture("tf2_keras_lstm_gru", model, keras.optimizers.SGD(0.05),
                        tf.TensorSpec([None, 5, 6], tf.float32, name="x"), feeds, 2)



def tf2_keras_activations():
    import keras

    keras.utils.set_random_seed(9)
    L = keras.layers
    model = keras.Sequential([
        keras.Input((6,)),
        L.Dense(8, activation="softsign", kernel_regularizer=keras.regularizers.l2(0.01)), L.PReLU(),
        L.Dense(8, activation="selu"), L.Dense(8, activation="elu"), L.LeakyReLU(0.1),
        L.Dense(8, activation="softplus"), L.Dense(8, activation="mish"), L.Dense(8, activation="hard_sigmoid"),
        L.Dense(3)])
    rng = np.random.default_rng(9)
    feeds = {"x": rng.standard_normal((5, 6)).astype(np.float32), "labels": np.array([0, 2, 1, 2, 0], np.int32)}
    keras_train_fixture("tf2_keras_activations", model, keras.optimizers.SGD(0.05),
                        tf.TensorSpec([None, 6], tf.float32, name="x"), feeds, 2)


def tf2_band_atan2_bucketize():
    w = tf.Variable(np.zeros((4, 4), np.float32), name="w")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x"),
                                  tf.TensorSpec([None], tf.int64, name="ids")])
    def step(x, ids):
        with tf.GradientTape() as tape:
            causal = tf.linalg.band_part(tf.matmul(x, w), -1, 0)  # lower triangle: a causal mask
            angle = tf.math.atan2(w, x[:1] - 0.5)  # broadcasting, both signs
            loss = tf.reduce_sum(causal) + tf.reduce_sum(angle * angle)
        g = tape.gradient(loss, w)  # band_part's gradient is a band_part; atan2's divides
        w.assign_sub(0.1 * g)
        buckets = tf.raw_ops.Bucketize(input=x, boundaries=[-1.0, 0.0, 0.5, 2.0])
        int_buckets = tf.raw_ops.Bucketize(input=ids, boundaries=[1.0, 3.0, 3.0, 10.0])
        return loss, tf.linalg.band_part(x, 1, 1), tf.linalg.band_part(x, 0, 0), buckets, int_buckets

    rng = np.random.default_rng(23)
    variables = [(w, rng.standard_normal((4, 4)).astype(np.float32))]
    x = rng.standard_normal((4, 4)).astype(np.float32)
    x[0, 1] = 0.5  # on a boundary: upper_bound puts it in the next bucket
    feeds = {"x": x, "ids": np.array([0, 1, 3, 4, 10, 11], np.int64)}
    write("tf2_band_atan2_bucketize", step.get_concrete_function(), variables, feeds, 2)


def tf2_tensor_array():
    w = tf.Variable(np.zeros((3,), np.float32), name="w")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def step(x):
        with tf.GradientTape() as tape:
            ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[3])
            for i in tf.range(tf.shape(x)[0]):  # a While loop writing a growing TensorArray
                ta = ta.write(i, x[i] * w + tf.cast(i, tf.float32))
            loss = (tf.reduce_sum(ta.gather([0, 2])) + tf.reduce_sum(tf.square(ta.concat()))
                    + tf.reduce_sum(ta.stack()))
        grad = tape.gradient(loss, w)  # TensorListSplit, ScatterIntoExistingList, Resize, ...
        w.assign_sub(0.01 * grad)
        tb = tf.TensorArray(tf.float32, size=4).scatter([3, 0], tf.ones((2, 2)))
        return loss, tb.read(3), tb.read(1), ta.size()

    variables = [(w, np.array([1.0, -0.5, 2.0], np.float32))]
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3) / 4.0}
    write("tf2_tensor_array", step.get_concrete_function(), variables, feeds, 2)


def tf2_bn_depthwise_ftrl():
    dw = tf.Variable(np.zeros((3, 3, 3, 2), np.float32), name="dw")
    gamma = tf.Variable(np.zeros(6, np.float32), name="gamma")
    beta = tf.Variable(np.zeros(6, np.float32), name="beta")
    moving_mean = tf.Variable(np.zeros(6, np.float32), name="moving_mean")
    moving_var = tf.Variable(np.ones(6, np.float32), name="moving_var")
    w = tf.Variable(np.zeros((54, 4), np.float32), name="w")
    slots = {k: tf.Variable(np.zeros(shape, np.float32), name=k) for k, shape in [
        ("w_accum", (54, 4)), ("w_linear", (54, 4)), ("dw_m", (3, 3, 3, 2)), ("dw_v", (3, 3, 3, 2)),
        ("gamma_accum", (6,)), ("beta_m", (6,))]}
    counter = tf.Variable(np.int64(5), name="counter")

    @tf.function(input_signature=[tf.TensorSpec([None, 6, 6, 3], tf.float32, name="x"),
                                  tf.TensorSpec([None], tf.int32, name="labels")])
    def train(x, labels):
        seed = tf.stack([counter, counter * 3 + 1])
        with tf.GradientTape() as tape:
            h = tf.nn.depthwise_conv2d(x, dw, strides=[1, 2, 2, 1], padding="SAME")
            y, batch_mean, batch_var, _, _, _ = tf.raw_ops.FusedBatchNormV3(
                x=h, scale=gamma, offset=beta, mean=moving_mean, variance=moving_var, epsilon=0.001,
                exponential_avg_factor=0.1, data_format="NHWC", is_training=True)
            a = tf.nn.relu(y) + 0.1 * tf.sin(y)
            keep = tf.random.stateless_uniform(tf.shape(a), seed) >= 0.25
            d = tf.where(keep, a / 0.75, tf.zeros_like(a))
            logits = tf.matmul(tf.reshape(d, [-1, 54]), w)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            loss += 0.01 * tf.reduce_sum(tf.cos(w))
        g_dw, g_gamma, g_beta, g_w = tape.gradient(loss, [dw, gamma, beta, w])
        moving_mean.assign(batch_mean)
        moving_var.assign(batch_var)
        tf.raw_ops.ResourceApplyFtrl(var=w.handle, accum=slots["w_accum"].handle, linear=slots["w_linear"].handle,
                                     grad=g_w, lr=0.05, l1=0.001, l2=0.002, lr_power=-0.5)
        tf.raw_ops.ResourceApplyAdaMax(var=dw.handle, m=slots["dw_m"].handle, v=slots["dw_v"].handle,
                                       beta1_power=0.9, lr=0.01, beta1=0.9, beta2=0.999, epsilon=1e-7, grad=g_dw)
        tf.raw_ops.ResourceApplyProximalAdagrad(var=gamma.handle, accum=slots["gamma_accum"].handle, lr=0.05,
                                                l1=0.001, l2=0.001, grad=g_gamma)
        tf.raw_ops.ResourceApplyAddSign(var=beta.handle, m=slots["beta_m"].handle, lr=0.01, alpha=1.0,
                                        sign_decay=0.9, beta=0.9, grad=g_beta)
        counter.assign_add(1)
        return loss, tf.cumsum(logits, axis=1, exclusive=True), batch_mean

    rng = np.random.default_rng(33)
    variables = [(dw, rng.standard_normal((3, 3, 3, 2)).astype(np.float32) * 0.4),
                 (gamma, (1.0 + 0.1 * rng.standard_normal(6)).astype(np.float32)),
                 (beta, (0.1 * rng.standard_normal(6)).astype(np.float32)),
                 (moving_mean, np.zeros(6, np.float32)), (moving_var, np.ones(6, np.float32)),
                 (w, rng.standard_normal((54, 4)).astype(np.float32) * 0.2),
                 (slots["w_accum"], np.full((54, 4), 0.1, np.float32)), (slots["w_linear"], np.zeros((54, 4), np.float32)),
                 (slots["dw_m"], np.zeros((3, 3, 3, 2), np.float32)), (slots["dw_v"], np.zeros((3, 3, 3, 2), np.float32)),
                 (slots["gamma_accum"], np.full(6, 0.1, np.float32)), (slots["beta_m"], np.zeros(6, np.float32)),
                 (counter, np.int64(5))]
    cf = train.get_concrete_function()
    captured = {id(e) for e, _ in cf.graph.captures}
    variables = [(v, init) for v, init in variables if id(v.handle) in captured]
    feeds = {"x": rng.standard_normal((5, 6, 6, 3)).astype(np.float32),
             "labels": np.array([0, 3, 1, 2, 3], np.int32)}
    write("tf2_bn_depthwise_ftrl", cf, variables, feeds, 2)


def tf2_pure_loops():
    w = tf.Variable(np.zeros((4, 4), np.float32), name="w")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x"),
                                  tf.TensorSpec([], tf.int32, name="k")])
    def step(x, k):
        h = tf.tanh(tf.matmul(x, w.read_value()))
        a = tf.reduce_sum(h * h, 0) + 1.0

        # Newton's iteration for sqrt(a): `a` is carried unchanged.
        def newton_cond(i, r, a_):
            return i < k

        def newton_body(i, r, a_):
            return i + 1, 0.5 * (r + a_ / r), a_

        _, root, _ = tf.while_loop(newton_cond, newton_body, [tf.constant(0), a, a])

        # Power iteration on a symmetric matrix, repeated for three rounds (a nested loop).
        m = tf.matmul(h, h, transpose_a=True) + tf.eye(4)

        def power(v):
            def pc(j, u):
                return j < 5

            def pb(j, u):
                u = tf.linalg.matvec(m, u)
                return j + 1, u / tf.norm(u)

            return tf.while_loop(pc, pb, [tf.constant(0), v])[1]

        def rounds_body(r, v, acc):
            v = power(v)
            return r + 1, v, acc + tf.reduce_sum(v * tf.linalg.matvec(m, v))

        _, vec, acc = tf.while_loop(lambda r, v, acc: r < 3, rounds_body,
                                    [tf.constant(0), tf.ones(4) / 2.0, tf.constant(0.0)],
                                    maximum_iterations=10)
        total = tf.reduce_sum(root)
        picked = tf.cond(total > 6.0, lambda: tf.exp(-vec) * total, lambda: tf.square(vec) - total)
        w.assign_add(0.01 * tf.tensordot(picked, root, axes=0))
        # The matrix-diagonal ops (tf.eye above is MatrixDiagV3): a tridiagonal band read
        # back, rebuilt, and a matrix with its diagonal replaced.
        band = tf.linalg.diag_part(m, k=(-1, 1))
        diagonal = tf.reduce_sum(tf.linalg.diag(band, k=(-1, 1)) * tf.linalg.set_diag(m, tf.zeros(4)))
        return picked, acc, root, diagonal

    variables = [(w, (np.arange(16, dtype=np.float32).reshape(4, 4) / 20.0 - 0.3))]
    feeds = {"x": np.array([[1, 2, -0.5, 0.3], [0.5, -1, 0.25, 0.1], [0.2, 0.4, -0.8, 1.5]], np.float32),
             "k": np.array(6, np.int32)}
    write("tf2_pure_loops", step.get_concrete_function(), variables, feeds, 2)


FIXTURES = [tf2_tensor_array, tf2_band_atan2_bucketize, tf2_keras_activations, tf2_keras_lstm_gru, tf2_keras_layernorm_gelu, tf2_keras_dropout, tf2_scan_split_where, tf2_pad_clip_erf, tf2_control_flow, tf2_linear_step, tf2_mlp_sgd, tf2_keras_adam,
            tf2_keras_cnn, tf2_einsum_attention, tf2_segment_topk_assert,
            tf2_gather_scatter_nd, tf2_bn_depthwise_ftrl, tf2_pure_loops]


def run_fixtures(fixtures):
    """Writes every fixture of `fixtures`, or only those named on the command line (every generator's `main`)."""
    import sys
    print("TensorFlow", tf.__version__)
    for f in fixtures:
        if len(sys.argv) == 1 or f.__name__ in sys.argv[1:]:
            f()


def main():
    run_fixtures(FIXTURES)


if __name__ == "__main__":
    main()
