"""Writes the LU fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python testdata/tf/make_fixtures_linalg.py

`tf.linalg.lu` (the `Lu` op: packed factors and the pivot permutation) and what `tf.linalg` builds on it:
`lu_reconstruct`, `lu_solve`, `lu_matrix_inverse`. Cases in README.md.
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_tf2 import run_fixtures, write  # noqa: E402


def linalg_lu():
    """`tf.linalg.lu` of a fed batch `[2, 5, 5]` float32 (rows scaled so that pivoting reorders them) with int32
    and int64 permutations, and of a float64 `[3, 3]`; `lu_reconstruct`, `lu_solve` against a `[2, 5, 2]`
    right-hand side and `lu_matrix_inverse` from the factors."""
    rng = np.random.default_rng(901)

    @tf.function(input_signature=[tf.TensorSpec([2, 5, 5], tf.float32, name="a"),
                                  tf.TensorSpec([2, 5, 2], tf.float32, name="rhs"),
                                  tf.TensorSpec([3, 3], tf.float64, name="b")])
    def ops(a, rhs, b):
        lu, p = tf.linalg.lu(a)
        lu64, p64 = tf.linalg.lu(a, output_idx_type=tf.int64)
        blu, bp = tf.linalg.lu(b)
        return [lu, p, lu64, p64, tf.cast(blu, tf.float32), bp,
                tf.linalg.lu_reconstruct(lu, p), tf.linalg.lu_solve(lu, p, rhs), tf.linalg.lu_matrix_inverse(lu, p)]

    a = rng.standard_normal((2, 5, 5)).astype(np.float32)
    a[:, 0, :] *= 0.01  # a small first row: the first pivot comes from below
    feeds = {"a": a, "rhs": rng.standard_normal((2, 5, 2)).astype(np.float32),
             "b": rng.standard_normal((3, 3))}
    write("linalg_lu", ops.get_concrete_function(), [], feeds, 1)


FIXTURES = [linalg_lu]


def main():
    run_fixtures(FIXTURES)


if __name__ == "__main__":
    main()
