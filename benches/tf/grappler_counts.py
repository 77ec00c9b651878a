"""Node counts after TensorFlow's own Grappler against autoclust's `opt --passes default` (issue 14).

Run by hand (never by CI), with TensorFlow installed and a release build of the CLI:

    cargo build --release -p autoclust
    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python benches/tf/grappler_counts.py \
        [--autoclust target/release/autoclust] [--only 'keras_*'] [--markdown]

For every fixture testdata/tf/NAME.json (graph, fetch, target), TensorFlow's meta-optimizer runs on
the GraphDef with the manifest's fetches and targets as the item's fetch nodes (the `train_op`
collection, as `tf.compat.v1.train.export_meta_graph` + `tf_optimizer.OptimizeGraph` do for a
Session), default RewriterConfig (what a Session applies before running); autoclust runs `opt GRAPH
--fetch .. --target .. --passes default`. Both are counted alike: top-level nodes plus the nodes of
every library function the optimized graph still calls, transitively (TensorFlow keeps a
`StatefulPartitionedCall` as one node with its body in the library; autoclust inlines it).
"""

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def grappler_nodes(graph_path, fetch_nodes):
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import config_pb2, meta_graph_pb2
    from tensorflow.python.grappler import tf_optimizer

    gd = graph_pb2.GraphDef()
    with open(graph_path) as f:
        text_format.Parse(f.read(), gd)
    mg = meta_graph_pb2.MetaGraphDef()
    mg.graph_def.CopyFrom(gd)
    for n in fetch_nodes:
        mg.collection_def["train_op"].node_list.value.append(n)
    cfg = config_pb2.ConfigProto()
    out = tf_optimizer.OptimizeGraph(cfg, mg)
    return count(out)


def called(attr_values):
    """Names of the functions a node's attributes call (func, list of func, nested attrs)."""
    for v in attr_values:
        if v.HasField("func"):
            yield v.func.name
            yield from called(v.func.attr.values())
        if v.HasField("list"):
            for f in v.list.func:
                yield f.name
                yield from called(f.attr.values())


def count(gd):
    """Top-level nodes plus the nodes of every library function the graph still calls (transitively)."""
    lib = {f.signature.name: f for f in gd.library.function}
    todo = []
    for n in gd.node:
        todo.extend(called(n.attr.values()))
        if n.op in lib:
            todo.append(n.op)
    seen = set()
    body = 0
    while todo:
        name = todo.pop()
        if name in seen or name not in lib:
            continue
        seen.add(name)
        f = lib[name]
        body += len(f.node_def)
        for n in f.node_def:
            todo.extend(called(n.attr.values()))
            if n.op in lib:
                todo.append(n.op)
    return len(gd.node) + body


def autoclust_nodes(exe, graph_path, fetch, target):
    """The same count on `opt --passes default`'s output (converted to a GraphDef by `convert`)."""
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2

    args = [exe, "opt", graph_path, "--passes", "default"]
    if fetch:
        args += ["--fetch", ",".join(fetch)]
    if target:
        args += ["--target", ",".join(target)]
    res = subprocess.run(args, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(res.stderr.strip())
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "opt.pbtxt")
        conv = subprocess.run([exe, "convert", "-", "--format", "native", "-o", out], input=res.stdout,
                              capture_output=True, text=True)
        if conv.returncode != 0:
            raise RuntimeError(conv.stderr.strip())
        gd = graph_pb2.GraphDef()
        with open(out) as f:
            text_format.Parse(f.read(), gd)
    return count(gd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--autoclust", default=os.path.join(ROOT, "target", "release", "autoclust"))
    ap.add_argument("--only", default="*")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    d = os.path.join(ROOT, "testdata", "tf")
    rows = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".json") or not fnmatch.fnmatch(name[:-5], a.only):
            continue
        m = json.load(open(os.path.join(d, name)))
        if "graph" not in m or not m["graph"].endswith((".pbtxt", ".pb")):
            continue
        graph = os.path.join(d, m["graph"])
        fetch = m.get("fetch") or []
        target = m.get("target") or []
        nodes = sorted({t.split(":")[0].lstrip("^") for t in fetch + target})
        try:
            tf_n = grappler_nodes(graph, nodes)
        except Exception as e:  # report, keep going
            tf_n = f"failed: {type(e).__name__}"
        try:
            ours = autoclust_nodes(a.autoclust, graph, fetch, target)
        except Exception as e:
            ours = f"failed: {e}"
        rows.append((name[:-5], ours, tf_n))
        print(f"{name[:-5]}: autoclust {ours}, grappler {tf_n}", file=sys.stderr)
    if a.markdown:
        print("| fixture | autoclust default | TensorFlow Grappler | autoclust ≤ TF |")
        print("|---|---:|---:|:-:|")
        for n, o, t in rows:
            ok = "yes" if isinstance(o, int) and isinstance(t, int) and o <= t else "no"
            print(f"| {n} | {o} | {t} | {ok} |")
        ints = [(o, t) for _, o, t in rows if isinstance(o, int) and isinstance(t, int)]
        print(f"\n{sum(o for o, _ in ints)} vs {sum(t for _, t in ints)} nodes over {len(ints)} fixtures; "
              f"autoclust at most TensorFlow's on {sum(o <= t for o, t in ints)}.")


if __name__ == "__main__":
    main()
