"""Fits the rational tanh used by compiler/src/math.rs: tanh(x) ~ x*P(x^2)/Q(x^2), Q(0) = 1.

Run by hand (needs numpy and scipy), never by CI:

    python3 compiler/tools/fit_tanh.py [C=7.9] [NP=7] [NQ=4]

Minimises the worst relative error on [0, C] by differential correction (Cheney-Loeb): each
step solves the linear program  min d  s.t.  |x P(z) - t Q(z)| <= d * t * Q_prev(z)  over
sample points (Chebyshev-spaced on [0, C] plus a geometric run near 0), z = x^2, t = tanh x.
The coefficients are then rounded to float32 one at a time, highest degree first, refitting
the remaining ones after each rounding. Finally it evaluates the rounded ratio the way the
JIT does (float32 Horner with fused multiply-adds, x*P, one division) at ~2.2M floats up to
C + 3 with the input clamped to C, and prints the worst error in ulps and the coefficients.

The ratio also tracks tanh a little beyond C (it reaches 1.0 near 8.4 for C = 7.9), which is
why math.rs clamps the input at 9.2 and the result to [-1, 1]: exactly +-1 where tanh rounds to
+-1. compiler/tests/math.rs checks the Rust implementation at every float in [0.5, 10].
"""
import sys

import numpy as np
from scipy.optimize import linprog

C = float(sys.argv[1]) if len(sys.argv) > 1 else 7.9
NP = int(sys.argv[2]) if len(sys.argv) > 2 else 7
NQ = int(sys.argv[3]) if len(sys.argv) > 3 else 4

x = np.unique(np.concatenate([C * (1 - np.cos(np.linspace(0, np.pi / 2, 3000))), np.geomspace(1e-4, 0.05, 200)]))[1:]
t = np.tanh(x)
z = x * x


def fit(fixed_p, fixed_q, steps=30):
    """Best (error, P, Q) over `steps` differential-correction steps, some coefficients fixed."""
    q_prev = np.ones_like(x)
    best = None
    for _ in range(steps):
        free = [("p", i) for i in range(NP) if i not in fixed_p] + [("q", j) for j in range(1, NQ) if j not in fixed_q]
        cols = np.stack([x * z**i if k == "p" else -t * z**i for k, i in free], 1)
        # residual x P - t Q = cols @ c + b
        b = -t.copy()
        for i, v in fixed_p.items():
            b += v * x * z**i
        for j, v in fixed_q.items():
            b -= v * t * z**j
        s = (t * q_prev)[:, None]
        n = len(free)
        cost = np.zeros(n + 1)
        cost[-1] = 1.0
        a_ub = np.vstack([np.hstack([cols, -s]), np.hstack([-cols, -s])])
        b_ub = np.concatenate([-b, b])
        res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=[(None, None)] * n + [(0, None)], method="highs")
        if res.x is None:
            break
        p, q = dict(fixed_p), dict(fixed_q)
        q[0] = 1.0
        for (k, i), v in zip(free, res.x[:n]):
            (p if k == "p" else q)[i] = v
        pz = sum(p[i] * z**i for i in range(NP))
        qz = sum(q[j] * z**j for j in range(NQ))
        err = np.max(np.abs(x * pz / qz - t) / t)
        if best is None or err < best[0]:
            best = (err, p, q)
        q_prev = qz
    return best


def f32_ratio(p, q, xs):
    """The JIT's evaluation order in float32 (an FMA is exact in float64 before rounding)."""
    r32 = lambda v: v.astype(np.float32).astype(np.float64)
    xs = r32(xs)
    zz = r32(xs * xs)
    pz = np.full_like(xs, p[NP - 1])
    for i in range(NP - 2, -1, -1):
        pz = r32(pz * zz + p[i])
    qz = np.full_like(xs, q[NQ - 1])
    for j in range(NQ - 2, -1, -1):
        qz = r32(qz * zz + q[j])
    return r32(r32(xs * pz) / qz)


err, _, _ = fit({}, {})
print(f"unrounded worst relative error {err:.3g}")
fixed_p, fixed_q = {}, {}
for k, i in [("p", i) for i in range(NP - 1, -1, -1)] + [("q", j) for j in range(NQ - 1, 0, -1)]:
    err, p, q = fit(fixed_p, fixed_q)
    (fixed_p if k == "p" else fixed_q)[i] = float(np.float32((p if k == "p" else q)[i]))
fixed_q[0] = 1.0

xs = np.unique(np.concatenate([np.linspace(0, C + 3, 2000001)[1:], np.geomspace(1e-30, 1, 200000)]).astype(np.float32))
got = f32_ratio(fixed_p, fixed_q, np.minimum(xs, np.float32(C)).astype(np.float64)).astype(np.float32)
want = np.tanh(xs.astype(np.float64)).astype(np.float32)
ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
print(f"rounded: worst {ulps.max()} ulp at {xs[ulps.argmax()]} (input clamped to {C})")
print("P (z^0 first):", [repr(float(fixed_p[i])) for i in range(NP)])
print("Q (z^0 first):", [repr(float(fixed_q[j])) for j in range(NQ)])
