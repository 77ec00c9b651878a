"""One-run comparison of autoclust against TensorFlow, TensorFlow+XLA and jax.jit on testdata/bench.

Run by hand (never by CI), from anywhere, with a release build of the CLI:

    cargo build --release -p autoclust
    /work/venv-tf/bin/python benches/compare.py [--seconds 1] [--rounds 3] [--only chain_32,mlp_784]
        [--autoclust PATH] [--engines autoclust,tf,tf_xla,jax_jit] [--jsonl rows.jsonl]
        [--workloads DIR]

For each workload DIR/NAME.json (default DIR testdata/bench; manifest keys graph, vars, feeds, fetch,
target, paths relative to DIR), every engine is set up once, then timed in interleaved rounds --
autoclust, tf, tf_xla, jax_jit, autoclust, tf, ... -- so that drift in machine load hits every engine
alike; each figure is the median over the rounds. `--only` takes names or shell patterns.

The Keras model steps of testdata/tf (issue 20), with the tf.function columns:

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python benches/compare.py \
        --workloads testdata/tf --only 'keras_*' \
        --engines autoclust,tf,tf_xla,tf_function,tf_function_xla

Engines:
  autoclust   `autoclust bench --json --only MODE`, a fresh process per mode and round: unclustered
              (plain executor) and clustered (auto-clustered, JIT) steps/s, and compile_ms (the
              clustered mode's first compiles). Steps per round are calibrated so that each mode
              takes about --seconds per round.
  tf          TensorFlow's plain executor (global_jit_level OFF) on the same GraphDef
  tf_xla      XLA auto-clustering: TF_XLA_FLAGS=--tf_xla_cpu_global_jit, global_jit_level ON_2;
              compile_ms = sum(3 first steps) - 3 x steady step (as benches/tf/tf_baseline.py)
  jax_jit     the same math in JAX (benches/tf/tf_baseline.py's jax_workload), jax.jit with donated
              variables; compile_ms = lower + compile. No JAX version of scalar_10k.
  tf_function, tf_function_xla  (not run by default; keras_* workloads of testdata/tf only) the Keras
              step itself, rebuilt by testdata/tf/make_fixtures_keras_models.py's builder (same seeds,
              nothing written), called eagerly as the concrete tf.function the fixture exported, and
              as tf.function(jit_compile=True) around it; compile_ms = first call - steady step.

A TF2 export (tf.function's FuncGraph) holds its variables as captured `Placeholder`s of dtype
resource; for the Session engines (tf, tf_xla) each becomes a VarHandleOp whose shared_name is the
placeholder's name (autoclust's name for it, docs/contract.md section 3), typed from the vars file.
autoclust's columns include bench --json's cluster counts (clusters compiled+interpreted, clustered
nodes of total nodes).

The TensorFlow and JAX parts reuse benches/tf/tf_baseline.py (graph configs, TfRunner, steady_rate,
jax_workload); they are skipped, with a note, when TensorFlow or JAX is not installed. The table
reports steps/s (higher is better), the ratio of autoclust clustered to each other engine (> 1: autoclust
is faster), compile times, and the 1-minute load average before and after each workload: on a shared
2-core machine, figures taken under load are pessimistic and noisy, so compare ratios within one run.
"""

import argparse
import fnmatch
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH_DIR = os.path.join(ROOT, "testdata", "bench")
ENGINES = ["autoclust", "tf", "tf_xla", "jax_jit", "tf_function", "tf_function_xla"]
DEFAULT_ENGINES = ["autoclust", "tf", "tf_xla", "jax_jit"]
CLUSTER_KEYS = ("clusters", "compiled_clusters", "interpreted_clusters", "clustered_nodes", "total_nodes")


def load():
    return round(os.getloadavg()[0], 2)


def note(msg):
    print(f"compare: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# autoclust


def default_binary():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "autoclust")


def bench_args(binary, manifest, steps, directory):
    args = [binary, "bench", os.path.join(directory, manifest["graph"]), "--steps", str(steps), "--json"]
    for flag, key in (("--vars", "vars"), ("--feeds", "feeds")):
        if manifest.get(key):
            args += [flag, os.path.join(directory, manifest[key])]
    for flag, key in (("--fetch", "fetch"), ("--target", "target")):
        if manifest.get(key):
            args += [flag, ",".join(manifest[key])]
    return args


class Autoclust:
    """Rounds of `autoclust bench --json --only MODE`: each mode in a process of its own (as a user
    runs one mode, not both in one process: the plain executor's thread pool would otherwise still be
    spinning when a clustered step starts), each calibrated to take about `seconds`."""

    MODES = (("unclustered", "unclustered_steps_per_s"), ("clustered", "clustered_steps_per_s"))

    def __init__(self, binary, manifest, seconds, directory):
        self.binary, self.manifest, self.directory = binary, manifest, directory
        self.steps = {}
        for mode, key in self.MODES:
            probe = self.bench(mode, 3)
            self.steps[mode] = max(3, int(seconds * probe[key]))

    def bench(self, mode, steps):
        args = bench_args(self.binary, self.manifest, steps, self.directory) + ["--only", mode]
        res = subprocess.run(args, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"autoclust bench failed: {res.stderr.strip()}")
        return json.loads(res.stdout)

    def measure(self):
        row = {}
        for mode, key in self.MODES:
            out = self.bench(mode, self.steps[mode])
            row[key] = out[key]
            if mode == "clustered":
                row["compile_ms"] = out["compile_ms"]
                row.update({k: out[k] for k in CLUSTER_KEYS if k in out})
        return row


# ---------------------------------------------------------------------------------------------
# TensorFlow and JAX (through benches/tf/tf_baseline.py)


def import_baseline():
    """tf_baseline, or None (with a note) when TensorFlow is not installed."""
    if importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("safetensors") is None:
        note("TensorFlow/safetensors not installed: skipping tf, tf_xla and jax_jit")
        return None
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, os.path.join(HERE, "tf"))
    import tf_baseline  # noqa: E402  (sets TF_XLA_FLAGS before importing TensorFlow)

    return tf_baseline


def read_inputs(manifest, directory):
    from safetensors.numpy import load_file

    def read(key):
        return dict(load_file(os.path.join(directory, manifest[key]))) if manifest.get(key) else {}

    return read("vars"), read("feeds")


def read_graph_def(manifest, directory, variables):
    """The manifest's GraphDef, with every captured-variable resource Placeholder (a TF2 export)
    turned into a VarHandleOp named as autoclust names it, so that TfRunner can load and run it."""
    import tensorflow as tf
    from google.protobuf import text_format

    with open(os.path.join(directory, manifest["graph"])) as fh:
        graph_def = text_format.Parse(fh.read(), tf.compat.v1.GraphDef())
    for node in graph_def.node:
        if node.op == "Placeholder" and node.attr["dtype"].type == tf.resource.as_datatype_enum:
            if node.name not in variables:
                raise RuntimeError(f"resource placeholder {node.name} has no value in {manifest['vars']}")
            value = variables[node.name]
            node.op = "VarHandleOp"
            node.ClearField("attr")
            node.attr["dtype"].type = tf.as_dtype(value.dtype).as_datatype_enum
            node.attr["shape"].shape.CopyFrom(tf.TensorShape(value.shape).as_proto())
            node.attr["shared_name"].s = node.name.encode()
            node.attr["container"].s = b""
    return graph_def


class TfEngine:
    """A TfRunner kept alive across rounds; the first 3 steps (and XLA's compiles) at setup."""

    def __init__(self, tb, graph_def, variables, feeds, manifest, xla):
        self.tb = tb
        self.runner = tb.TfRunner(graph_def, variables, feeds, manifest.get("fetch") or [],
                                  manifest.get("target") or [], config=tb.session_config(xla))
        self.first = []
        for _ in range(3):
            t0 = time.perf_counter()
            self.runner.step()
            self.first.append((time.perf_counter() - t0) * 1e3)
        self.xla = xla

    def measure(self, seconds):
        return {"steps_per_s": self.tb.steady_rate(self.runner.step, seconds)}

    def compile_ms(self, rate):
        if not self.xla:
            return None
        return max(0.0, sum(self.first) - len(self.first) * 1e3 / rate)

    def first_ms(self):
        return self.first[0]

    def close(self):
        self.runner.session.close()


class TfFunctionEngine:
    """The Keras step as the user calls it: the concrete tf.function that make_fixtures_keras_models.py
    exports for this workload (rebuilt with the same seeds; its writer swapped for a capture, so no
    file is touched), called eagerly; with xla, wrapped in tf.function(jit_compile=True)."""

    _built = {}
    size = "small"  # make_fixtures_keras_models.SIZE: --keras-size

    @classmethod
    def build(cls, name):
        """(concrete function, inputs) for keras workload `name`, or None when no builder exists."""
        if name not in cls._built:
            sys.path.insert(0, os.path.join(ROOT, "testdata", "tf"))
            import make_fixtures_keras_models as builders  # noqa: E402
            import make_fixtures_tf2  # noqa: E402
            import tensorflow as tf

            captured = {}

            def capture(fixture, cf, variables, feeds, steps):
                captured[fixture] = (cf, variables, feeds)

            builders.SIZE = cls.size
            builder = getattr(builders, name, None)
            if builder not in builders.FIXTURES:
                return None
            saved = (builders.write, make_fixtures_tf2.write)
            builders.write = make_fixtures_tf2.write = capture
            try:
                builder()
            finally:
                builders.write, make_fixtures_tf2.write = saved
            cf, variables, feeds = captured[name]
            for var, init in variables:
                var.assign(init)
            inputs = [tf.constant(feeds[s.name]) for s in cf.structured_input_signature[0]]
            # The variables (and the model owning them) must outlive the function: it holds only weak
            # references to what it captures.
            cls._built[name] = (cf, inputs, variables)
        return cls._built[name][:2]

    def __init__(self, tb, name, xla):
        import tensorflow as tf

        self.tb = tb
        cf, self.inputs = self.build(name)
        self.fn = tf.function(lambda *a: cf(*a), jit_compile=True) if xla else cf
        t0 = time.perf_counter()
        self.step()
        self.first = (time.perf_counter() - t0) * 1e3

    def step(self):
        out = self.fn(*self.inputs)
        for t in out if isinstance(out, (list, tuple)) else [out]:
            t.numpy()

    def measure(self, seconds):
        return {"steps_per_s": self.tb.steady_rate(self.step, seconds)}

    def compile_ms(self, rate):
        return max(0.0, self.first - 1e3 / rate)

    def first_ms(self):
        return self.first


class JaxEngine:
    """jax_workload's jitted step, compiled once; state carried across rounds."""

    def __init__(self, tb, name, variables, feeds):
        import jax

        self.jax, self.tb = jax, tb
        fn, state, extra = tb.jax_workload(name, variables, feeds)
        t0 = time.perf_counter()
        self.compiled = fn.lower(*state, *extra).compile()
        self.compile = (time.perf_counter() - t0) * 1e3
        self.state, self.extra = state, extra
        self.has_aux = not name.startswith("chain_")  # mlp/embedding return (new state, loss)
        self.step()

    def step(self):
        out = self.compiled(*self.state, *self.extra)
        self.state = (out[0] if self.has_aux else out,)
        self.jax.block_until_ready(out)

    def measure(self, seconds):
        return {"steps_per_s": self.tb.steady_rate(self.step, seconds)}

    def compile_ms(self, rate):
        return self.compile


# ---------------------------------------------------------------------------------------------
# The run


def median(rows, key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def run_workload(name, manifest, args, tb, engines):
    """{engine: {"steps_per_s", "compile_ms", ...}} for one workload; a failed engine's entry is
    {"error": message}."""
    setup, results = {}, {}
    load_before = load()
    if "autoclust" in engines:
        setup["autoclust"] = Autoclust(args.autoclust, manifest, args.seconds, args.workloads)
    if tb is not None and any(e in engines for e in ("tf", "tf_xla", "jax_jit")):
        variables, feeds = read_inputs(manifest, args.workloads)
        graph_def = read_graph_def(manifest, args.workloads, variables)
        if "tf" in engines:
            setup["tf"] = TfEngine(tb, graph_def, variables, feeds, manifest, xla=False)
        if "tf_xla" in engines:
            setup["tf_xla"] = TfEngine(tb, graph_def, variables, feeds, manifest, xla=True)
        if "jax_jit" in engines and importlib.util.find_spec("jax") is not None:
            if tb.jax_workload(name, variables, feeds) is not None:
                setup["jax_jit"] = JaxEngine(tb, name, variables, feeds)
    for engine, xla in (("tf_function", False), ("tf_function_xla", True)):
        if tb is not None and engine in engines and TfFunctionEngine.build(name) is not None:
            try:
                setup[engine] = TfFunctionEngine(tb, name, xla)
            except Exception as e:  # noqa: BLE001  (XLA refusing a step is a result, reported)
                lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
                # TensorFlow's "in user code:" traceback first; its error is the first line naming one.
                message = next((ln for ln in lines if "Error" in ln or "must be" in ln), lines[0] if lines else "")[:300]
                note(f"{name}: {engine} failed: {message}")
                results[engine] = {"error": message}
    rows = {e: [] for e in setup}
    for _ in range(args.rounds):
        for engine, runner in setup.items():
            rows[engine].append(runner.measure() if engine == "autoclust" else runner.measure(args.seconds))
    for engine, rs in rows.items():
        if engine == "autoclust":
            results["autoclust"] = {
                "unclustered_steps_per_s": median(rs, "unclustered_steps_per_s"),
                "clustered_steps_per_s": median(rs, "clustered_steps_per_s"),
                "compile_ms": median(rs, "compile_ms"),
                "steps_per_round": setup[engine].steps,
                **{k: rs[-1][k] for k in CLUSTER_KEYS if k in rs[-1]},
            }
        else:
            rate = median(rs, "steps_per_s")
            results[engine] = {"steps_per_s": rate, "compile_ms": setup[engine].compile_ms(rate)}
            if hasattr(setup[engine], "first_ms"):
                results[engine]["first_ms"] = setup[engine].first_ms()
            if hasattr(setup[engine], "close"):
                setup[engine].close()
    results["load"] = (load_before, load())
    return results


def fmt(x, digits=1):
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "–"


def table(all_results, engines):
    others = [e for e in engines if e != "autoclust"]
    compiled = [e for e in others if e in ("tf_xla", "jax_jit", "tf_function_xla")]
    clusters = any("clusters" in r.get("autoclust", {}) for r in all_results.values())
    head = ["workload", "autoclust unclustered", "autoclust clustered", *others, "clustered/unclustered",
            *(f"clustered/{e}" for e in others),
            "compile ms: " + " / ".join(["autoclust", *(e for e in compiled)])]
    if any(e in engines for e in ("tf_xla", "tf_function_xla")):
        head.append("first step ms: " + " / ".join(e for e in ("tf_xla", "tf_function_xla") if e in engines))
    if clusters:
        head += ["clusters (compiled+interpreted)", "clustered nodes"]
    head.append("load before→after")
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]
    for name, r in all_results.items():
        a = r.get("autoclust", {})
        u, c = a.get("unclustered_steps_per_s"), a.get("clustered_steps_per_s")

        def rate(e):
            return r.get(e, {}).get("steps_per_s")

        def shown(e, key="steps_per_s"):
            return "failed" if "error" in r.get(e, {}) else fmt(r.get(e, {}).get(key))

        cells = [name, fmt(u), fmt(c), *(shown(e) for e in others), ratio(c, u),
                 *(ratio(c, rate(e)) for e in others),
                 " / ".join([fmt(a.get("compile_ms"))] + [shown(e, "compile_ms") for e in compiled])]
        if any(e in engines for e in ("tf_xla", "tf_function_xla")):
            cells.append(" / ".join(shown(e, "first_ms") for e in ("tf_xla", "tf_function_xla") if e in engines))
        if clusters:
            if "clusters" in a:
                cells += [f"{a['clusters']} ({a['compiled_clusters']}+{a['interpreted_clusters']})",
                          f"{a['clustered_nodes']}/{a['total_nodes']}"]
            else:
                cells += ["–", "–"]
        cells.append(f"{r['load'][0]}→{r['load'][1]}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="timed seconds per engine per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (figures are medians)")
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--engines", default=",".join(DEFAULT_ENGINES), help=f"of {','.join(ENGINES)}")
    parser.add_argument("--workloads", default=BENCH_DIR, help="directory of workload manifests NAME.json")
    parser.add_argument("--autoclust", default=default_binary(), help="the release autoclust binary")
    parser.add_argument("--jsonl", help="also write one JSON line per workload here")
    parser.add_argument("--keras-size", default="small", choices=["small", "bench"],
                        help="the sizes tf_function rebuilds Keras steps at (bench: benches/keras/out)")
    args = parser.parse_args()
    TfFunctionEngine.size = args.keras_size
    engines = [e for e in args.engines.split(",") if e]
    unknown = set(engines) - set(ENGINES)
    if unknown or args.rounds < 1 or args.seconds <= 0:
        parser.error(f"bad --engines/--rounds/--seconds ({', '.join(sorted(unknown))})")
    if "autoclust" in engines and not os.access(args.autoclust, os.X_OK):
        parser.error(f"no autoclust binary at {args.autoclust} (cargo build --release -p autoclust, or --autoclust)")
    names = sorted(f[:-5] for f in os.listdir(args.workloads) if f.endswith(".json"))
    if args.only:
        wanted = args.only.split(",")
        names = [n for n in names if any(fnmatch.fnmatchcase(n, w) for w in wanted)]
    tb = import_baseline() if any(e != "autoclust" for e in engines) else None
    versions = {"python": platform.python_version()}
    if tb is not None:
        versions["tensorflow"] = tb.tf.__version__
        if importlib.util.find_spec("jax") is not None:
            import jax

            versions["jax"] = jax.__version__
        else:
            note("jax not installed: skipping jax_jit")
    print(f"# benches/compare.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
          f"{os.cpu_count()} cores, {platform.machine()}, {', '.join(f'{k} {v}' for k, v in versions.items())}; "
          f"--seconds {args.seconds} --rounds {args.rounds}; load average (1 min) at start {load()}", flush=True)
    all_results = {}
    out = open(args.jsonl, "w") if args.jsonl else None
    for name in names:
        with open(os.path.join(args.workloads, name + ".json")) as fh:
            manifest = json.load(fh)
        note(f"{name} (load {load()})")
        all_results[name] = run_workload(name, manifest, args, tb, engines)
        if out:
            out.write(json.dumps({"workload": name, **all_results[name]}) + "\n")
            out.flush()
    if out:
        out.close()
    print(table(all_results, engines))
    print(f"\nsteps/s are medians of {args.rounds} interleaved rounds; ratios > 1 mean autoclust clustered is "
          f"faster. Load average (1 min) at the end: {load()}.")


if __name__ == "__main__":
    main()
