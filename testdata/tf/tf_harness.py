"""Shared helpers for the TensorFlow fixture and baseline scripts (run by hand, never by CI).

- `export(graph, directory, name)`: writes NAME.pbtxt exactly as `tf.io.write_graph(as_text=True)` does.
- `TfRunner`: imports a GraphDef into a fresh graph and session, loads variable values by the
  VarHandleOp's `shared_name` (docs/contract.md section 3) instead of running initializers, and runs
  fetches/targets with feeds, the way `autoclust run` does.
- `explore_outcomes`: enumerates every outcome the seeds' semantics allow for small graphs of
  resource ops (each read/write atomic; read-modify-write ops either split into read, compute,
  write, or atomic as the TensorFlow executor runs them). Used for racy fixtures.

Needs tensorflow, numpy and safetensors (see make_fixtures.py for the venv).
"""

import json
import os

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from safetensors.numpy import save_file


def var_name(node):
    """Variable name of a VarHandleOp NodeDef: its shared_name, or its node name when empty."""
    shared = node.attr["shared_name"].s.decode()
    return shared or node.name


def export(graph_or_def, directory, name):
    """Writes NAME.pbtxt and returns the GraphDef parsed back from that file, so everything
    downstream (expected values, timings) runs exactly what the file holds."""
    graph_def = graph_or_def.as_graph_def() if isinstance(graph_or_def, tf.Graph) else graph_or_def
    path = tf.io.write_graph(graph_def, directory, name + ".pbtxt", as_text=True)
    with open(path) as fh:
        parsed = text_format.Parse(fh.read(), tf.compat.v1.GraphDef())
    if parsed != graph_def:
        raise AssertionError(f"{path}: does not parse back to the graph written")
    return parsed


def variables_of(graph_def):
    """{variable name: (dtype, NodeDef)} for every VarHandleOp in graph order (first wins)."""
    out = {}
    for n in graph_def.node:
        if n.op == "VarHandleOp":
            out.setdefault(var_name(n), (tf.dtypes.as_dtype(n.attr["dtype"].type), n))
    return out


class TfRunner:
    """Runs an exported GraphDef in a real tf.compat.v1.Session with variables loaded from values."""

    def __init__(self, graph_def, variables, feeds, fetch, target, config=None):
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.import_graph_def(graph_def, name="")
            self.var_info = variables_of(graph_def)
            self.init_ops, self.init_feed = [], {}
            self.read_vars = {}
            for name, (dtype, node) in self.var_info.items():
                handle = self.graph.get_tensor_by_name(node.name + ":0")
                with tf.control_dependencies(None):
                    if name in variables:
                        ph = tf.compat.v1.placeholder(dtype, name="tfharness_init_value/" + node.name)
                        self.init_ops.append(
                            tf.raw_ops.AssignVariableOp(resource=handle, value=ph, name="tfharness_init/" + node.name))
                        self.init_feed[ph] = variables[name]
                    self.read_vars[name] = tf.raw_ops.ReadVariableOp(
                        resource=handle, dtype=dtype, name="tfharness_final_read/" + node.name)
            self.fetch = [self.graph.get_tensor_by_name(f) for f in fetch]
            self.target = [self.graph.get_operation_by_name(t) for t in target]
            self.feed = {self.graph.get_tensor_by_name(k + ":0"): v for k, v in feeds.items()}
        self.session = tf.compat.v1.Session(graph=self.graph, config=config)
        # A callable skips Session.run's per-call fetch/feed parsing (lower Python overhead per step).
        self._feed_keys = list(self.feed)
        self._callable = self.session.make_callable(self.fetch + self.target, feed_list=self._feed_keys)
        self.reset()

    def reset(self):
        if self.init_ops:
            self.session.run(self.init_ops, self.init_feed)

    def step(self):
        return self._callable(*[self.feed[k] for k in self._feed_keys])[: len(self.fetch)]

    def run(self, steps):
        out = None
        for _ in range(steps):
            out = self.step()
        return out

    def final_vars(self):
        return self.session.run(self.read_vars)


def _np(value, dtype):
    return np.asarray(value, dtype=dtype)


def explore_outcomes(graph_def, variables, fetch, target, atomic_rmw):
    """All outcomes of a small graph under the seeds' semantics, deduplicated and sorted.

    Supports Const, Placeholder-free graphs of VarHandleOp, ReadVariableOp, AssignVariableOp,
    AssignAdd/SubVariableOp, AddV2, Sub, Mul, Identity and NoOp. Pure nodes are evaluated as soon as
    they are ready (their order cannot change an outcome); resource ops are interleaved in every
    order consistent with data and control edges. With atomic_rmw=False each AssignAdd/Sub is a
    read step then a write step (seed 000's model); with True it is one step (the TF executor).
    Returns [{"fetches": {name: flat list}, "variables": {name: flat list}}].
    """
    nodes = {n.name: n for n in graph_def.node}

    def parse_input(s):
        ctrl = s.startswith("^")
        s = s.lstrip("^")
        name, _, port = s.partition(":")
        return name, int(port or 0), ctrl

    # Prune to what fetches and targets need.
    needed, stack = set(), [f.partition(":")[0] for f in fetch] + list(target)
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        needed.add(n)
        stack.extend(parse_input(i)[0] for i in nodes[n].input)
    order = [n.name for n in graph_def.node if n.name in needed]
    resource_ops = {"ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"}
    rmw = {"AssignAddVariableOp", "AssignSubVariableOp"}
    var_of_handle = {n.name: var_name(n) for n in graph_def.node if n.op == "VarHandleOp"}
    outcomes = {}

    def pure_value(node, vals):
        ins = [vals[(nm, p)] for nm, p, c in map(parse_input, node.input) if not c]
        op = node.op
        if op == "Const":
            return tf.make_ndarray(node.attr["value"].tensor)
        if op == "VarHandleOp":
            return var_of_handle[node.name]
        if op == "Identity":
            return ins[0]
        if op == "AddV2":
            return ins[0] + ins[1]
        if op == "Sub":
            return ins[0] - ins[1]
        if op == "Mul":
            return ins[0] * ins[1]
        if op == "NoOp":
            return None
        raise ValueError(f"explore_outcomes: unsupported op {op} at {node.name}")

    def ready(name, done):
        return all(parse_input(i)[0] in done for i in nodes[name].input)

    def settle(done, vals):
        # Run every ready pure node until none is left.
        changed = True
        while changed:
            changed = False
            for name in order:
                node = nodes[name]
                if name not in done and node.op not in resource_ops and ready(name, done):
                    vals[(name, 0)] = pure_value(node, vals)
                    done.add(name)
                    changed = True

    def dfs(done, half, state, vals):
        settle(done, vals)
        steps = []
        for name in order:
            node = nodes[name]
            if name in done or node.op not in resource_ops:
                continue
            if name in half:
                steps.append((name, "write"))
            elif ready(name, done):
                steps.append((name, "read" if node.op in rmw and not atomic_rmw else "all"))
        if not steps:
            if len(done) != len(order):
                raise ValueError("explore_outcomes: stuck (cycle?)")
            fetched = {f: np.asarray(vals[(f.partition(":")[0], int(f.partition(":")[2]))]).ravel().tolist()
                       for f in fetch}
            variables_out = {k: np.asarray(v).ravel().tolist() for k, v in sorted(state.items())}
            key = json.dumps({"fetches": fetched, "variables": variables_out}, sort_keys=True)
            outcomes[key] = {"fetches": fetched, "variables": variables_out}
            return
        for name, kind in steps:
            node = nodes[name]
            ins = [vals[(nm, p)] for nm, p, c in map(parse_input, node.input) if not c]
            d2, h2, s2, v2 = set(done), dict(half), dict(state), dict(vals)
            var = ins[0]
            if node.op == "ReadVariableOp":
                v2[(name, 0)] = s2[var]
                d2.add(name)
            elif node.op == "AssignVariableOp":
                s2[var] = ins[1].astype(s2[var].dtype)
                d2.add(name)
            else:
                sign = 1 if node.op == "AssignAddVariableOp" else -1
                if kind == "read":
                    h2[name] = s2[var]
                else:
                    old = h2.pop(name) if kind == "write" else s2[var]
                    s2[var] = (old + sign * ins[1]).astype(s2[var].dtype)
                    d2.add(name)
            dfs(d2, h2, s2, v2)

    dfs(set(), {}, {k: np.asarray(v) for k, v in variables.items()}, {})
    return [outcomes[k] for k in sorted(outcomes)]


def outcome_of(fetch_values, var_values, fetch):
    fetched = {f: np.asarray(v).ravel().tolist() for f, v in zip(fetch, fetch_values)}
    variables_out = {k: np.asarray(v).ravel().tolist() for k, v in sorted(var_values.items())}
    return {"fetches": fetched, "variables": variables_out}


def write_fixture(directory, name, graph_def, variables, feeds, fetch, target, steps, racy=False,
                  explore=False, config=None, extra=None, tf_feeds=None):
    """Runs the graph in TF and writes NAME.json and the safetensors files; returns the manifest.
    `tf_feeds` are given to TensorFlow but not written (string feeds, which the manifest's
    `string_feeds` in `extra` carry)."""
    runner = TfRunner(graph_def, variables, {**feeds, **(tf_feeds or {})}, fetch, target, config=config)
    fetch_values = runner.run(steps)
    var_values = runner.final_vars()
    manifest = {
        "graph": name + ".pbtxt",
        "feeds": None,
        "vars": None,
        "fetch": list(fetch),
        "target": list(target),
        "steps": steps,
        "expected_fetches": name + ".expected.safetensors",
        "expected_vars": name + ".expected_vars.safetensors",
        "racy": racy,
        "outcomes": None,
    }
    if feeds:
        save_file({k: np.array(v, order="C") for k, v in feeds.items()},
                  os.path.join(directory, name + ".feeds.safetensors"))
        manifest["feeds"] = name + ".feeds.safetensors"
    if variables:
        save_file({k: np.array(v, order="C") for k, v in variables.items()},
                  os.path.join(directory, name + ".vars.safetensors"))
        manifest["vars"] = name + ".vars.safetensors"
    save_file({f: np.array(v, order="C") for f, v in zip(fetch, fetch_values)},
              os.path.join(directory, name + ".expected.safetensors"))
    save_file({k: np.array(v, order="C") for k, v in var_values.items()},
              os.path.join(directory, name + ".expected_vars.safetensors"))
    if explore:
        assert not feeds, "explore_outcomes does not take feeds"
        atomic = explore_outcomes(graph_def, variables, fetch, target, atomic_rmw=True)
        split = explore_outcomes(graph_def, variables, fetch, target, atomic_rmw=False)
        got = outcome_of(fetch_values, var_values, fetch)
        if got not in atomic:
            raise AssertionError(f"{name}: TensorFlow produced {got}, not among {atomic}")
        if any(o not in split for o in atomic):
            raise AssertionError(f"{name}: atomic outcomes not a subset of split outcomes")
        if racy:
            manifest["outcomes"] = atomic
            manifest["outcomes_split_rmw"] = split
        elif len(split) != 1:
            raise AssertionError(f"{name}: marked not racy but has outcomes {split}")
    if extra:
        manifest.update(extra)
    with open(os.path.join(directory, name + ".json"), "w") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=False)
        fh.write("\n")
    runner.session.close()
    return manifest


__all__ = ["export", "TfRunner", "explore_outcomes", "write_fixture", "variables_of", "var_name"]
