"""Writes a TF1-style training-step GraphDef of about N nodes, of the shape issue 19 describes (and
TensorFlow's own clustering benchmarks use), without TensorFlow:

    python3 benches/scale/gen_graph.py N OUT_PREFIX [--seed S]

writes OUT_PREFIX.pbtxt and OUT_PREFIX.vars.safetensors. The graph: N/100 resource variables
(float32[4], `VarHandleOp`); blocks of a `ReadVariableOp`, a short path of float elementwise ops
(`AddV2`/`Mul`/`Sub` with constants or the block's earlier values, `Tanh`, `Neg`, `Sigmoid`) and an
`AssignVariableOp` or `AssignAddVariableOp` of the variable it read — about 10% resource ops;
blocks that share a variable are ordered by a control edge from one's write to the next one's read,
so the step has one outcome (both modes must give the same variables); in ~1% of blocks a string
round trip (`AsString` -> `StringToNumber`) on the path, and a `StringFormat` -> `PrintV2` (to
file:///dev/null) that the step waits on through a control edge; ~5% of nodes get an extra control
input from an earlier node (never a cycle); one final `NoOp` named `step` depends on every write and
print. Run one step with `autoclust run OUT.pbtxt --vars OUT.vars.safetensors --target step`.
"""

import json
import random
import struct
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n_target, prefix = int(sys.argv[1]), sys.argv[2]
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 1
    rng = random.Random(seed)
    nodes = []  # (name, op, inputs, attrs-text)
    sinks = []

    def add(name, op, inputs, attrs=""):
        nodes.append((name, op, inputs, attrs))
        return name

    f32 = 'attr { key: "T" value { type: DT_FLOAT } }'
    dtype = 'attr { key: "dtype" value { type: DT_FLOAT } }'
    n_vars = max(10, n_target // 100)
    for i in range(n_vars):
        add(f"v{i}", "VarHandleOp", [],
            dtype + ' attr { key: "shape" value { shape { dim { size: 4 } } } }'
            f' attr {{ key: "shared_name" value {{ s: "v{i}" }} }} attr {{ key: "container" value {{ s: "" }} }}')
    add("one", "Const", [], dtype + ' attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } '
        'float_val: 0.5 } } }')
    b = 0
    last_write = {}
    while len(nodes) < n_target - 1:
        p = f"b{b}/"
        var = b % n_vars
        after = [f"^{last_write[var]}"] if var in last_write else []
        x = add(p + "read", "ReadVariableOp", [f"v{var}"] + after, dtype)
        vals = [x]
        for j in range(rng.randint(5, 10)):
            kind = rng.choice(["AddV2", "Mul", "Sub", "Tanh", "Neg", "Sigmoid", "AddV2"])
            if kind in ("Tanh", "Neg", "Sigmoid"):
                y = add(f"{p}e{j}", kind, [vals[-1]], f32)
            else:
                other = rng.choice(vals + ["one"])
                y = add(f"{p}e{j}", kind, [vals[-1], other], f32)
            vals.append(y)
        if rng.random() < 0.01:
            s = add(p + "as_string", "AsString", [vals[-1]],
                    f32 + ' attr { key: "precision" value { i: 9 } } attr { key: "scientific" value { b: true } }'
                    ' attr { key: "shortest" value { b: false } } attr { key: "width" value { i: -1 } }'
                    ' attr { key: "fill" value { s: "" } }')
            vals.append(add(p + "to_number", "StringToNumber", [s], 'attr { key: "out_type" value { type: DT_FLOAT } }'))
            fmt = add(p + "format", "StringFormat", [vals[-1]],
                      'attr { key: "T" value { list { type: DT_FLOAT } } } attr { key: "template" value { s: "x = {}" } }'
                      ' attr { key: "placeholder" value { s: "{}" } } attr { key: "summarize" value { i: 3 } }')
            sinks.append(add(p + "print", "PrintV2", [fmt],
                             'attr { key: "output_stream" value { s: "file:///dev/null" } } attr { key: "end" value { s: "\\n" } }'))
        op = rng.choice(["AssignVariableOp", "AssignAddVariableOp"])
        last_write[var] = add(p + "write", op, [f"v{var}", vals[-1]], dtype)
        sinks.append(last_write[var])
        b += 1
    # Extra control edges from earlier to later nodes (positions only grow: never a cycle).
    first_op = n_vars + 1
    order = {name: i for i, (name, *_rest) in enumerate(nodes)}
    extra = {}
    for _ in range(len(nodes) // 20):
        i = rng.randrange(first_op + 1, len(nodes))
        j = rng.randrange(first_op, i)
        extra.setdefault(nodes[i][0], set()).add(nodes[j][0])
    add("step", "NoOp", ["^" + s for s in sinks])
    with open(prefix + ".pbtxt", "w") as fh:
        for name, op, inputs, attrs in nodes:
            ins = list(inputs) + ["^" + c for c in sorted(extra.get(name, ())) if order[c] < order[name]]
            fh.write(f'node {{ name: "{name}" op: "{op}" ' + " ".join(f'input: "{i}"' for i in ins) + f" {attrs} }}\n")
        fh.write("versions { producer: 1087 }\n")
    # safetensors: a JSON header (little-endian u64 length) then the raw data.
    header, data = {}, b""
    for i in range(n_vars):
        vals = [rng.uniform(-1, 1) for _ in range(4)]
        header[f"v{i}"] = {"dtype": "F32", "shape": [4], "data_offsets": [len(data), len(data) + 16]}
        data += struct.pack("<4f", *vals)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(prefix + ".vars.safetensors", "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h + data)
    print(f"{prefix}.pbtxt: {len(nodes)} nodes, {n_vars} variables, {len(sinks)} writes and prints")


if __name__ == "__main__":
    main()
