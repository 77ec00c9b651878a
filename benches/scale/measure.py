"""Times autoclust's stages on generated training steps of growing size (issue 19; by hand, not CI):

    python3 benches/scale/measure.py [--autoclust target/release/autoclust] [N ...]

For each N (default 1000 10000 100000), writes the graph with gen_graph.py into a temporary
directory and runs, one process each, `analyze`, `cluster`, `run --no-cluster --target step` and
`run --target step` (clustered: parsing, optimization, clustering, encapsulation, every compile and
the first step), recording wall seconds and peak RSS (GNU time's %M). Prints a Markdown table and
the growth exponent of each stage between successive sizes (log(t2/t1) / log(N2/N1): 1 is linear).
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def timed(cmd):
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    secs, kb = r.stderr.strip().splitlines()[-1].split()
    return float(secs), int(kb) / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--autoclust", default=os.path.join(ROOT, "target", "release", "autoclust"))
    ap.add_argument("sizes", nargs="*", type=int, default=[1000, 10000, 100000])
    args = ap.parse_args()
    stages = {
        "analyze": lambda g, v: ["analyze", g],
        "cluster": lambda g, v: ["cluster", g],
        "run plain": lambda g, v: ["run", g, "--vars", v, "--target", "step", "--no-cluster"],
        "run clustered": lambda g, v: ["run", g, "--vars", v, "--target", "step"],
    }
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        for n in args.sizes:
            prefix = os.path.join(d, f"g{n}")
            subprocess.run([sys.executable, os.path.join(HERE, "gen_graph.py"), str(n), prefix], check=True,
                           capture_output=True)
            g, v = prefix + ".pbtxt", prefix + ".vars.safetensors"
            rows[n] = {name: timed([args.autoclust] + f(g, v)) for name, f in stages.items()}
            print(f"measured {n}", file=sys.stderr)
    print("| nodes | " + " | ".join(f"{s} s / MB" for s in stages) + " |")
    print("|---:|" + "---:|" * len(stages))
    for n, r in rows.items():
        print(f"| {n:,} | " + " | ".join(f"{r[s][0]:.2f} / {r[s][1]:.0f}" for s in stages) + " |")
    sizes = list(rows)
    for a, b in zip(sizes, sizes[1:]):
        exps = []
        for s in stages:
            t1, t2 = max(rows[a][s][0], 0.01), max(rows[b][s][0], 0.01)
            exps.append(f"{s} {math.log(t2 / t1) / math.log(b / a):.2f}")
        print(f"growth exponent {a:,} -> {b:,}: " + ", ".join(exps))


if __name__ == "__main__":
    main()
