"""Checks autoclust against TensorFlow on the bench-size Keras steps (run by hand, never by CI):

    /work/tfenv/bin/python benches/keras/check.py [--autoclust PATH] [NAME...]

For each benches/keras/out/NAME.json (written by make_benches.py), runs the step `steps` times with
`autoclust run`, clustered and with --no-cluster, and compares the fetches and every variable with
TensorFlow's: the error of each tensor relative to its largest magnitude, worst one printed, at most
--rtol (default 1e-3). These are float32 training steps at real sizes, where the summation order alone
moves low bits, and two places amplify it: gradient sums over 32K positions that cancel (the CNN's
momentum slots, ~3e-4) and Adam's m/(sqrt(v)+1e-7) on tiny gradient components (the VAE's decoder
kernel, ~8e-4) -- TensorFlow's own oneDNN-on and -off runs differ by as much (see
testdata/tf/make_fixtures_keras_models.py on AdamW). Exits non-zero on a mismatch.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")


def compare(what, got, want, rtol, worst):
    bad = []
    for k, w in want.items():
        if k not in got:
            bad.append(f"{what} {k}: missing")
            continue
        g = got[k]
        scale = max(float(np.max(np.abs(w))) if w.size else 0.0, 1e-6)
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) if w.size else 0.0
        worst[0] = max(worst[0], err / scale)
        if g.shape != w.shape or err > rtol * scale:
            bad.append(f"{what} {k}: shape {g.shape} vs {w.shape}, max error {err:.3g} (scale {scale:.3g})")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--autoclust", default=os.path.join(HERE, "..", "..", "target", "release", "autoclust"))
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    names = args.names or sorted(f[:-5] for f in os.listdir(OUT) if f.endswith(".json"))
    failed = False
    for name in names:
        m = json.load(open(os.path.join(OUT, name + ".json")))
        for mode in ["clustered", "unclustered"]:
            with tempfile.TemporaryDirectory() as tmp:
                out, vars_out = os.path.join(tmp, "out.safetensors"), os.path.join(tmp, "vars.safetensors")
                cmd = [args.autoclust, "run", os.path.join(OUT, m["graph"]), "--vars", os.path.join(OUT, m["vars"]),
                       "--steps", str(m["steps"]), "--out", out, "--save-vars", vars_out]
                if m.get("feeds"):
                    cmd += ["--feeds", os.path.join(OUT, m["feeds"])]
                for f in m["fetch"]:
                    cmd += ["--fetch", f]
                if mode == "unclustered":
                    cmd.append("--no-cluster")
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"{name} {mode}: autoclust failed: {r.stderr.strip()[-500:]}")
                    failed = True
                    continue
                worst = [0.0]
                bad = compare("fetch", load_file(out), load_file(os.path.join(OUT, m["expected_fetches"])), args.rtol,
                              worst)
                bad += compare("var", load_file(vars_out), load_file(os.path.join(OUT, m["expected_vars"])),
                               args.rtol, worst)
                print(f"{name} {mode}: {'ok' if not bad else 'MISMATCH'} (worst relative error {worst[0]:.2g})")
                for b in bad[:10]:
                    print("   ", b)
                failed |= bool(bad)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
