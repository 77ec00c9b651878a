"""Writes v1cf_xla_clusters.txt: TensorFlow's own XLA auto-clusters of the v1cf_* fixtures (run by
hand, never by CI; TensorFlow with XLA needed):

    TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/tf/xla_clusters_v1cf.py

Each fixture's graph is imported and run once in a TF1 Session with global_jit_level ON_1 (a run
error after clustering, e.g. an uninitialized variable, does not matter: the clustering is dumped
before); mark_for_compilation's dump (`--tf_xla_clustering_debug`) gives each node's
`_XlaCluster`. Nodes Grappler created before clustering (`.../clone_0`, `ArithmeticOptimizer/...`)
are listed too; the test skips names the fixture does not have.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = ["cond", "while", "nested_while", "while_var", "grad_cond", "grad_while", "dynamic_rnn", "map_fn",
            "ref_loop"]


def child(name, dump):
    os.environ["TF_XLA_FLAGS"] = ("--tf_xla_clustering_debug --tf_xla_auto_jit=1 --tf_xla_cpu_global_jit "
                                  "--tf_xla_min_cluster_size=2")
    os.environ["TF_DUMP_GRAPH_PREFIX"] = dump
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import tensorflow as tf
    from google.protobuf import text_format
    from safetensors.numpy import load_file
    tf.compat.v1.disable_control_flow_v2()
    man = json.load(open(os.path.join(HERE, name + ".json")))
    gd = tf.compat.v1.GraphDef()
    text_format.Parse(open(os.path.join(HERE, man["graph"])).read(), gd)
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.import_graph_def(gd, name="")
    feeds = load_file(os.path.join(HERE, man["feeds"])) if man.get("feeds") else {}
    cfg = tf.compat.v1.ConfigProto()
    cfg.graph_options.optimizer_options.global_jit_level = tf.compat.v1.OptimizerOptions.ON_1
    with tf.compat.v1.Session(graph=g, config=cfg) as s:
        fd = {g.get_tensor_by_name(k + ":0"): v for k, v in feeds.items()}
        fetch = [g.get_tensor_by_name(f) for f in man["fetch"]] + [g.get_operation_by_name(t) for t in man["target"]]
        try:
            s.run(fetch, fd)
        except Exception:  # noqa: BLE001 - clustering is dumped before the run fails
            pass
    out = tf.compat.v1.GraphDef()
    text_format.Parse(open(os.path.join(dump, "mark_for_compilation.pbtxt")).read(), out)
    clusters = {}
    for n in out.node:
        if "_XlaCluster" in n.attr:
            clusters.setdefault(n.attr["_XlaCluster"].s.decode(), []).append(n.name)
    for k, v in sorted(clusters.items()):
        print(name, k, " ".join(sorted(v)))


def main():
    if len(sys.argv) == 3:
        child(sys.argv[1], sys.argv[2])
        return
    lines = []
    for f in FIXTURES:
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, __file__, "v1cf_" + f, d], capture_output=True, text=True, check=True)
            lines += r.stdout.splitlines()
    head = open(os.path.join(HERE, "v1cf_xla_clusters.txt")).read().splitlines()
    head = [h for h in head if h.startswith("#")]
    open(os.path.join(HERE, "v1cf_xla_clusters.txt"), "w").write("\n".join(head + lines) + "\n")


if __name__ == "__main__":
    main()
