"""Writes the Keras benchmark steps of issue 18 at their real sizes (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        benches/keras/make_benches.py [NAME...]

The models are testdata/tf/make_fixtures_keras_models.py's, built with its "bench" sizes
(transformer block batch 16 x 32 tokens, d 64; residual CNN batch 32, 32x32x3; LSTM classifier
batch 32 x 20; VAE batch 64, 784 features; wide-and-deep batch 256; inference MLP 1024-1024-1024-10
batch 128), and written in the fixture format (testdata/tf/README.md) into benches/keras/out/, which
git ignores (the variables of the MLP alone are 8 MB). Time them with

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python benches/compare.py \
        --workloads benches/keras/out --keras-size bench \
        --engines autoclust,tf_function,tf_function_xla

and check autoclust's results against TensorFlow's (both modes) with `benches/keras/check.py`.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testdata", "tf"))

import make_fixtures_keras_models as builders  # noqa: E402
import make_fixtures_tf2  # noqa: E402


def main():
    out = os.path.join(HERE, "out")
    os.makedirs(out, exist_ok=True)
    builders.SIZE = "bench"
    make_fixtures_tf2.OUT = out
    for f in builders.FIXTURES:
        if len(sys.argv) == 1 or f.__name__ in sys.argv[1:]:
            f()


if __name__ == "__main__":
    main()
