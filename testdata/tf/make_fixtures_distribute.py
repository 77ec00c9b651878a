"""tf.distribute fixtures: MirroredStrategy steps over two logical CPUs, whose collectives
(`CollectiveReduceV2`, `CollectiveGatherV2`) have every peer in the graph
(`passes/src/collectives.rs`). Same conventions as `make_fixtures_tf2.py`:

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 python testdata/tf/make_fixtures_distribute.py [NAME]

The function's call-time captures (the collectives' instance keys, counters TensorFlow feeds
at each call) are written as feeds; its ordering tokens (resources no op reads) as scalar
variables, as a user exporting `concrete_function.graph.as_graph_def()` would have to.
First written by a sweep of unseen graphs (sweep 16).
"""

import os
import sys

import numpy as np
import tensorflow as tf
from safetensors.numpy import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures_tf2 as M  # noqa: E402

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
import keras  # noqa: E402


def components(variables):
    """Each replica's variable behind a Keras or distributed variable."""
    out = []
    for v in variables:
        if type(v).__module__.startswith("keras"):
            v = v.value if hasattr(v, "value") else v._value
        vals = getattr(v, "values", None)
        if vals is not None and not callable(vals):
            out.extend(vals)
        else:
            out.append(v)
    return out


def emit(name, cf, candidates, feeds, steps):
    captures = cf.graph.function_captures
    extra = {}
    for k, ph in captures.by_ref_internal.items():
        val = captures.by_ref_external[k]()
        val = val[0] if isinstance(val, (list, tuple)) else val
        extra[ph.op.name] = np.asarray(val.numpy())
    feeds = dict(feeds)
    feeds.update(extra)
    vs = M.captured_variables(cf, components(candidates))
    have = {id(v.handle) for v, _ in vs}
    tokens = [i.op.name for e, i in cf.graph.captures if i.dtype == tf.resource and id(e) not in have]
    M.write(name, cf, vs, feeds, steps)
    if tokens:
        path = os.path.join(M.OUT, name + ".vars.safetensors")
        values = dict(load_file(path))
        for t in tokens:
            values[t] = np.array(0.0, np.float32)
        save_file(values, path)


def allreduce():
    st = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with st.scope():
        w = tf.Variable(2.0, name="w")

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32, name="x")])
    def f(x):
        def r():
            return tf.distribute.get_replica_context().all_reduce("sum", w * x)

        return st.reduce("SUM", st.run(r), axis=None)

    emit("dist_mirrored_allreduce", f.get_concrete_function(), [w], {"x": np.array(3.0, np.float32)}, 1)


def allgather():
    st = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with st.scope():
        w = tf.Variable([1.0, 2.0], name="w")

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32, name="x")])
    def f(x):
        def r():
            ctx = tf.distribute.get_replica_context()
            v = w * x + tf.cast(ctx.replica_id_in_sync_group, tf.float32)
            return ctx.all_gather(tf.reshape(v, [1, 2]), axis=0)

        return st.experimental_local_results(st.run(r))[0]

    emit("dist_mirrored_allgather", f.get_concrete_function(), [w], {"x": np.array([3.0, 4.0], np.float32)}, 1)


def keras_adam():
    st = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    keras.utils.set_random_seed(1)
    with st.scope():
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
        opt = keras.optimizers.Adam(0.01)
        opt.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
    batch = 8

    @tf.function(input_signature=[tf.TensorSpec([batch, 6], tf.float32, name="x"), tf.TensorSpec([batch], tf.int32, name="y")])
    def train(x, y):
        def step(xs, ys):
            with tf.GradientTape() as t:
                loss = loss_fn(ys, model(xs, training=True)) / batch
            g = t.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(g, model.trainable_variables))
            return loss

        n = st.num_replicas_in_sync

        def replica_step():
            i = tf.distribute.get_replica_context().replica_id_in_sync_group
            xs = tf.gather(tf.reshape(x, [n, batch // n, 6]), i)
            ys = tf.gather(tf.reshape(y, [n, batch // n]), i)
            return step(xs, ys)

        return st.reduce("SUM", st.run(replica_step), axis=None)

    rng = np.random.default_rng(0)
    x = rng.standard_normal([batch, 6]).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
    emit("dist_mirrored_keras_adam", train.get_concrete_function(), model.variables + opt.variables, {"x": x, "y": y}, 2)


FIXTURES = {"allreduce": allreduce, "allgather": allgather, "keras_adam": keras_adam}

if __name__ == "__main__":
    # One process per fixture: collective instance keys are counters of the process, and a
    # second strategy in one process meets the first one's.
    if len(sys.argv) > 1:
        FIXTURES[sys.argv[1]]()
    else:
        import subprocess

        for name in FIXTURES:
            subprocess.run([sys.executable, os.path.abspath(__file__), name], check=True)
