"""Writes the LU fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python testdata/tf/make_fixtures_linalg.py

`tf.linalg.lu` (the `Lu` op: packed factors and the pivot permutation) and what `tf.linalg` builds on it:
`lu_reconstruct`, `lu_solve`, `lu_matrix_inverse`; `tf.linalg.eigh` (`SelfAdjointEigV2`); `tf.linalg.banded_triangular_solve`
and `tf.linalg.tridiagonal_matmul` with their gradients. Cases in README.md.
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


def linalg_eigh():
    """`tf.linalg.eigh` (`SelfAdjointEigV2`) of fed symmetric matrices — a batch `[3, 5, 5]` float32 (one built from
    known eigenvalues, one diagonal; no repeated eigenvalue, whose eigenvectors any rounding may rotate), a float64 `[4, 4]` whose upper triangle is garbage (only the lower is
    read) — and `tf.linalg.eigvalsh`; a PCA-style projection of data onto the eigenvectors, whose signs
    TensorFlow's solver chooses."""
    rng = np.random.default_rng(902)

    @tf.function(input_signature=[tf.TensorSpec([3, 5, 5], tf.float32, name="s"),
                                  tf.TensorSpec([4, 4], tf.float64, name="g"),
                                  tf.TensorSpec([6, 5], tf.float32, name="data")])
    def ops(s, g, data):
        e, v = tf.linalg.eigh(s)
        ge, gv = tf.linalg.eigh(g)
        centred = data - tf.reduce_mean(data, 0)
        cov = tf.matmul(centred, centred, transpose_a=True) / 5.0
        ce, cv = tf.linalg.eigh(cov)
        return [e, v, tf.cast(ge, tf.float32), tf.cast(gv, tf.float32), tf.linalg.eigvalsh(s),
                tf.matmul(centred, cv[:, -2:]), ce]

    m = rng.standard_normal((3, 5, 5)).astype(np.float32)
    s = (m + np.transpose(m, (0, 2, 1))) / 2
    q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    s[1] = (q @ np.diag([1.0, 2.0, 2.5, 3.0, -1.0]) @ q.T).astype(np.float32)
    s[2] = np.diag([3.0, -1.0, 2.0, 0.5, 4.0]).astype(np.float32)
    g = rng.standard_normal((4, 4))
    g = np.tril(g + g.T) + np.triu(rng.standard_normal((4, 4)) * 100, 1)
    feeds = {"s": s, "g": g, "data": rng.standard_normal((6, 5)).astype(np.float32)}
    write("linalg_eigh", ops.get_concrete_function(), [], feeds, 1)


def linalg_banded_tridiagonal():
    """`tf.linalg.banded_triangular_solve` (`BandedTriangularSolve`) of a variable `[2, 3, 5]` float32 band storage
    against a fed `[5, 2]` right-hand side (batch broadcast), lower and upper-with-adjoint, and of its first matrix in
    float64, upper, against a fed `[3, 5, 2]`; `tf.linalg.tridiagonal_matmul` (`TridiagonalMatMul`, compact format) of a
    variable `[3, 5]` float32 and in float64; two SGD steps through both gradients (`BandedTriangularSolve` again,
    `BatchMatMulV2`, `MatrixDiagPartV3` and the unbroadcasting sums; the tridiagonal one's pads and slices)."""
    rng = np.random.default_rng(903)
    b0 = rng.standard_normal((2, 3, 5)).astype(np.float32) * 0.3
    b0[:, 0, :] = 2.0 + rng.random((2, 5)).astype(np.float32)  # the lower storage's diagonal
    b0[:, 2, :] = -1.5 - rng.random((2, 5)).astype(np.float32)  # the upper storage's diagonal
    d0 = rng.standard_normal((3, 5)).astype(np.float32)
    bands = tf.Variable(b0, name="bands")
    diags = tf.Variable(d0, name="diags")

    @tf.function(input_signature=[tf.TensorSpec([5, 2], tf.float32, name="rhs"),
                                  tf.TensorSpec([3, 5, 2], tf.float64, name="rhs64")])
    def step(rhs, rhs64):
        with tf.GradientTape() as tape:
            lo = tf.linalg.banded_triangular_solve(bands, rhs)
            up = tf.linalg.banded_triangular_solve(bands, rhs, lower=False, adjoint=True)
            tm = tf.linalg.tridiagonal_matmul(diags, rhs)
            loss = tf.reduce_sum(lo * lo) + 0.5 * tf.reduce_sum(up * up) + 0.1 * tf.reduce_sum(tm * tm)
        gb, gd = tape.gradient(loss, [bands, diags])
        bands.assign_sub(0.01 * gb)
        diags.assign_sub(0.01 * gd)
        b64 = tf.linalg.banded_triangular_solve(tf.cast(bands, tf.float64)[:1], rhs64, lower=False)
        tm64 = tf.linalg.tridiagonal_matmul(tf.cast(diags, tf.float64), rhs64[0])
        return [lo, up, tm, loss, tf.cast(b64, tf.float32), tf.cast(tm64, tf.float32)]

    feeds = {"rhs": rng.standard_normal((5, 2)).astype(np.float32), "rhs64": rng.standard_normal((3, 5, 2))}
    write("linalg_banded_tridiagonal", step.get_concrete_function(), [(bands, b0), (diags, d0)], feeds, 2)


FIXTURES = [linalg_lu, linalg_eigh, linalg_banded_tridiagonal]


def main():
    run_fixtures([f for f in FIXTURES if len(sys.argv) < 2 or f.__name__ in sys.argv[1:]])


if __name__ == "__main__":
    main()
