//! Property test: random graphs run clustered (the pipeline `autoclust run`
//! uses by default — prune, auto-cluster, anchor, encapsulate, JIT) give
//! the same fetches and variables as the plain executor, step after step.
//!
//! The graphs are built, in the native text format, from a list of random
//! "moves" that a deterministic builder interprets against the values built
//! so far, so every list (and every shrunk list) is a valid graph:
//! elementwise ops with broadcasting (`Add AddV2 Sub Mul RealDiv Maximum
//! Minimum Neg Abs Exp Log Tanh Sigmoid Relu Square Sqrt Rsqrt Erf Erfc Softplus Log1p Expm1 Elu Selu Relu6 LeakyRelu Sin Cos
//! FakeQuantWithMinMaxArgs`),
//! comparisons feeding `SelectV2`, `Cast` (float32 ↔ int32/bool) and int32
//! arithmetic, reductions (`Sum Mean Max Min` over random axes, with and
//! without `keep_dims`), `MatMul` (with `transpose_a/b`), `BiasAdd`,
//! `Reshape` and `Transpose`, reads and writes of resource variables
//! (`ReadVariableOp`, `AssignVariableOp`, `AssignAddVariableOp`) and
//! placeholders (a third of them declared with an unknown first dimension). Variable ops on one variable are chained by control edges
//! (as TensorFlow's automatic control dependencies do), so both modes are
//! deterministic.
//!
//! Comparison: float32 within 1e-5 relative plus 1e-5 absolute (values near
//! 0; `|a - b| <= rtol * (max(|a|, |b|) + 1)`), equal infinities, NaN only against NaN; int32 and bool exactly. Values
//! derived from variables (and the variables) get 1e-4 relative: each step's
//! last-ulp differences feed the next step. Inexact values (see `Val::exact`)
//! may also differ by 1e-5 of their tensor's largest magnitude, for cancellations. Divisions and logarithms only take
//! exact operands, and Exp's argument goes through Tanh, so a legitimate
//! rounding difference is never amplified past the tolerance; MatMul inner
//! dimensions stay ≤ 128 and Sum/Mean ≤ 1024 summands per output for the
//! same reason (longer sums reassociate differently, legitimately).
//! Comparisons, casts to integers and casts to bool only take *exactly
//! rounded* operands (no transcendental, reduction or matmul upstream), so a
//! last-ulp difference the tolerance allows cannot flip a branch.
//!
//! The test is worthless if it compares the interpreter with itself, so each
//! case asserts that the graph clustered and that at least one cluster was
//! compiled (the JIT's compile time is only counted for successful
//! compiles), and the whole run asserts that most cases ran every cluster
//! call compiled. A failure prints the shrunk graph, its inputs and the
//! first mismatch.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use autoclust_graph::{DType, Graph, Output, Tensor};
use autoclust_passes::cluster::ClusterConfig;
use autoclust_passes::pipeline::clustered_program;
use autoclust_runtime::cluster_call::CompilerOptions;
use autoclust_runtime::{Jit, RunRequest, Session, SessionOptions};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

// ---------------------------------------------------------------------------
// Deterministic data.

/// SplitMix64: the values of variables, placeholders and constants.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Mostly in [-2, 2], with some exact zeros, small integers and halves.
    fn value(&mut self) -> f32 {
        match self.below(16) {
            0 => 0.0,
            1 => (self.below(7) as f32) - 3.0,
            2 => (self.below(9) as f32) * 0.5 - 2.0,
            _ => (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0,
        }
    }
}

// ---------------------------------------------------------------------------
// The builder.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    F32,
    I32,
    Bool,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::F32 => "float32",
            Ty::I32 => "int32",
            Ty::Bool => "bool",
        }
    }
}

#[derive(Clone, Debug)]
struct Val {
    /// The input spelling (`node` or `node:port`).
    at: String,
    ty: Ty,
    shape: Vec<usize>,
    /// Computed only with exactly rounded ops (see the module doc).
    exact: bool,
    /// Depends on a variable's value (inexact from the second step on) or on a
    /// reassociated sum (MatMul, Sum, Mean): compared with [`STEP_RTOL`].
    from_var: bool,
}

struct Var {
    name: String,
    shape: Vec<usize>,
    /// The last op on this variable (the next one waits for it).
    last: Option<String>,
}

/// One random move; the builder reads its fields modulo what it needs.
#[derive(Clone, Copy, Debug)]
struct Move {
    kind: u8,
    a: u16,
    b: u16,
    c: u16,
}

#[derive(Clone, Debug)]
struct Case {
    /// Base shape every variable and placeholder broadcasts to.
    base: Vec<usize>,
    vars: u8,
    placeholders: u8,
    moves: Vec<Move>,
    seed: u64,
    threads: usize,
}

struct Built {
    text: String,
    vars: Vec<(String, Tensor)>,
    feeds: Vec<(String, Tensor)>,
    fetches: Vec<String>,
    /// Relative tolerance of each fetch (see [`STEP_RTOL`]).
    fetch_rtol: Vec<f64>,
    targets: Vec<String>,
}

/// Relative tolerance of a value computed in one step from exact inputs.
const RTOL: f64 = 1e-5;
/// Relative tolerance of a value derived from a variable (and of the variables): the last-ulp
/// differences of one step are the next step's inputs, and a few steps of feedback through
/// transcendental ops compound them beyond [`RTOL`] legitimately.
const STEP_RTOL: f64 = 1e-4;

struct Builder {
    lines: Vec<String>,
    vals: Vec<Val>,
    vars: Vec<Var>,
    rng: Rng,
    next: usize,
    targets: Vec<String>,
    /// Placeholders standing for random data, with their values.
    feeds: Vec<(String, Tensor)>,
}

/// The largest tensor a move may create (the largest base shape has 300,000 elements).
const MAX_ELEMENTS: usize = 400_000;

fn dims(shape: &[usize]) -> String {
    shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")
}

/// A placeholder's declared shape: usually `shape`, one time in three with the first dimension
/// unknown (`?`, a batch dimension), which clusters all the same and is compiled for the fed
/// shape.
fn declared_dims(shape: &[usize], rng: &mut Rng) -> String {
    if shape.is_empty() || rng.below(3) != 0 {
        return dims(shape);
    }
    let rest: Vec<String> = shape[1..].iter().map(|d| d.to_string()).collect();
    std::iter::once("?".to_string()).chain(rest).collect::<Vec<_>>().join(",")
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// NumPy broadcasting of two shapes.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let y = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if x == y || y == 1 {
            x
        } else if x == 1 {
            y
        } else {
            return None;
        };
    }
    Some(out)
}

impl Builder {
    fn fresh(&mut self, base: &str) -> String {
        self.next += 1;
        format!("{base}{}", self.next)
    }

    fn node(&mut self, base: &str, rhs: String) -> String {
        let name = self.fresh(base);
        self.lines.push(format!("{name} = {rhs}"));
        name
    }

    /// A new value; it derives from a variable when any input named in its node line does.
    fn push(&mut self, at: String, ty: Ty, shape: Vec<usize>, exact: bool) -> usize {
        let line = self.lines.last().map(String::as_str).unwrap_or("");
        let args = line.split_once('(').map(|(_, r)| r.split_once(')').map_or(r, |(a, _)| a)).unwrap_or("");
        let from_var = args.split(',').map(str::trim).any(|a| {
            let a = a.trim_start_matches('^');
            self.vals.iter().any(|v| v.from_var && v.at == a) || self.vars.iter().any(|v| v.name == a)
        });
        self.vals.push(Val { at, ty, shape, exact, from_var });
        self.vals.len() - 1
    }

    /// Random float32 data of `shape`: a `Placeholder` fed with it (a `Const` when
    /// `JIT_PROPERTY_CONSTS` is set, which also exercises the compiler's constant folding;
    /// off by default while folding has the known NaN/overflow bugs tested below).
    fn const_f32(&mut self, shape: &[usize]) -> usize {
        let data: Vec<f32> = (0..numel(shape)).map(|_| self.rng.value()).collect();
        if std::env::var_os("JIT_PROPERTY_CONSTS").is_some() {
            let values: Vec<String> = data.iter().map(|x| format!("{x:?}")).collect();
            let name = self.node(
                "c",
                format!("Const() {{dtype = float32, value = float32[{}]{{{}}}}}", dims(shape), values.join(", ")),
            );
            return self.push(name, Ty::F32, shape.to_vec(), true);
        }
        let declared = declared_dims(shape, &mut self.rng);
        let name = self.node("c", format!("Placeholder() {{dtype = float32, shape = shape[{declared}]}}"));
        self.feeds.push((name.clone(), Tensor::from_f32(shape.to_vec(), data).unwrap()));
        self.push(name, Ty::F32, shape.to_vec(), true)
    }

    fn const_scalar(&mut self, x: f32) -> usize {
        let name = self.node("c", format!("Const() {{dtype = float32, value = float32[]{{{x:?}}}}}"));
        self.push(name, Ty::F32, vec![], true)
    }

    fn const_i32(&mut self, values: &[i64]) -> String {
        let v: Vec<String> = values.iter().map(i64::to_string).collect();
        self.node("k", format!("Const() {{dtype = int32, value = int32[{}]{{{}}}}}", values.len(), v.join(", ")))
    }

    /// Exact in every step (not derived from a variable, which later steps may make inexact).
    fn stable(&self, i: usize) -> bool {
        self.vals[i].exact && !self.vals[i].from_var
    }

    /// A value of type `ty` chosen by `pick`, preferring `exact` ones when asked.
    fn pick(&self, ty: Ty, pick: u16, exact_only: bool) -> Option<usize> {
        let pool: Vec<usize> =
            (0..self.vals.len()).filter(|&i| self.vals[i].ty == ty && (!exact_only || self.stable(i))).collect();
        // Favour recent values, so graphs are deep rather than wide.
        let p = pick as usize;
        (!pool.is_empty()).then(|| {
            if p.is_multiple_of(3) {
                pool[p / 3 % pool.len()]
            } else {
                pool[pool.len() - 1 - p % pool.len().min(4)]
            }
        })
    }

    /// A value of `ty` whose shape broadcasts with `shape`, or a new constant (f32 only) that does.
    fn partner(&mut self, ty: Ty, shape: &[usize], pick: u16, exact_only: bool) -> Option<usize> {
        let pool: Vec<usize> = (0..self.vals.len())
            .filter(|&i| {
                let v = &self.vals[i];
                v.ty == ty
                    && (!exact_only || (v.exact && !v.from_var))
                    && broadcast(&v.shape, shape).is_some_and(|b| numel(&b) <= MAX_ELEMENTS)
            })
            .collect();
        if !pool.is_empty() && !pick.is_multiple_of(4) {
            return Some(pool[pool.len() - 1 - (pick as usize / 4) % pool.len()]);
        }
        if ty != Ty::F32 {
            return pool.first().copied();
        }
        // A constant of a shape that broadcasts: drop leading dims, set some to 1.
        let drop = (pick as usize / 4) % (shape.len() + 1);
        let mut s: Vec<usize> =
            shape[drop..].iter().enumerate().map(|(i, &d)| if (pick >> (i + 6)) & 1 == 1 { 1 } else { d }).collect();
        // Keep constants small: large ones vary along the last axis only.
        if numel(&s) > 4096 {
            let n = s.len();
            s.iter_mut().take(n.saturating_sub(1)).for_each(|d| *d = 1);
            if numel(&s) > 4096 {
                s.iter_mut().for_each(|d| *d = 1);
            }
        }
        Some(self.const_f32(&s))
    }

    fn unary(&mut self, op: &str, x: usize, exact: bool) -> usize {
        let (at, shape, e) = (self.vals[x].at.clone(), self.vals[x].shape.clone(), self.vals[x].exact);
        let name = self.node("u", format!("{op}({at}) {{T = float32}}"));
        self.push(name, Ty::F32, shape, e && exact)
    }

    fn binary(&mut self, op: &str, x: usize, y: usize, ty: Ty, exact: bool) -> usize {
        let (vx, vy) = (self.vals[x].clone(), self.vals[y].clone());
        let shape = broadcast(&vx.shape, &vy.shape).expect("partner broadcasts");
        let name = self.node("b", format!("{op}({}, {}) {{T = {}}}", vx.at, vy.at, vx.ty.name()));
        self.push(name, ty, shape, vx.exact && vy.exact && exact)
    }

    fn cast(&mut self, x: usize, to: Ty) -> usize {
        let v = self.vals[x].clone();
        let name = self
            .node("cast", format!("Cast({}) {{SrcT = {}, DstT = {}, Truncate = false}}", v.at, v.ty.name(), to.name()));
        self.push(name, to, v.shape, v.exact)
    }

    /// A variable op on `var`, after the previous one on it.
    fn var_op(&mut self, var: usize, base: &str, rhs: impl FnOnce(&str, String) -> String) -> String {
        let handle = self.vars[var].name.clone();
        let dep = self.vars[var].last.as_ref().map(|l| format!(", ^{l}")).unwrap_or_default();
        let name = self.node(base, rhs(&handle, dep));
        self.vars[var].last = Some(name.clone());
        name
    }

    fn read(&mut self, var: usize) -> usize {
        let shape = self.vars[var].shape.clone();
        let name = self.var_op(var, "read", |h, dep| format!("ReadVariableOp({h}{dep}) {{dtype = float32}}"));
        self.push(name, Ty::F32, shape, true)
    }

    /// A float value of exactly `shape`, from `x` (`BroadcastTo` when needed).
    fn shaped_like(&mut self, x: usize, shape: &[usize]) -> Option<usize> {
        if self.vals[x].shape == shape {
            return Some(x);
        }
        if broadcast(&self.vals[x].shape, shape).as_deref() != Some(shape) {
            return None;
        }
        let v = self.vals[x].clone();
        let k = self.const_i32(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
        let name = self.node("bc", format!("BroadcastTo({}, {k}) {{T = float32, Tidx = int32}}", v.at));
        Some(self.push(name, Ty::F32, shape.to_vec(), v.exact))
    }

    fn apply(&mut self, m: Move) {
        let Some(x) = self.pick(Ty::F32, m.a, false) else { return };
        match m.kind % 16 {
            // Binary elementwise, broadcasting.
            0..=2 => {
                let ops = ["Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum"];
                let shape = self.vals[x].shape.clone();
                if let Some(y) = self.partner(Ty::F32, &shape, m.b, false) {
                    let (x, y) = if m.c & 1 == 1 { (y, x) } else { (x, y) };
                    let mut op = ops[m.c as usize / 2 % ops.len()];
                    // Dividing by an inexact value near 0 (after a cancelling Add/Sub) turns
                    // last-ulp differences into large ones: divide only by exact values.
                    if op == "RealDiv" && !self.stable(y) {
                        op = "Mul";
                    }
                    self.binary(op, x, y, Ty::F32, true);
                }
            }
            // Unary.
            3..=4 => {
                let ops = [
                    ("Neg", true),
                    ("Abs", true),
                    ("Exp", false),
                    ("Log", false),
                    ("Tanh", false),
                    ("Sigmoid", false),
                    ("Relu", true),
                    ("Square", true),
                    ("Sqrt", true),
                    ("Rsqrt", false),
                    ("Erf", false),
                    ("Erfc", false),
                    ("Softplus", false),
                    ("Log1p", false),
                    ("Expm1", false),
                    ("Elu", false),
                    ("Selu", false),
                    ("Relu6", true),
                    ("LeakyRelu", false),
                    ("Sin", false),
                    ("Cos", false),
                    ("FakeQuantWithMinMaxArgs", true),
                ];
                let (mut op, exact) = ops[m.b as usize % ops.len()];
                // Quantising rounds to a step: an inexact input one ulp from a step's edge
                // may land on either side. Quantise exact values only.
                if op == "FakeQuantWithMinMaxArgs" && !self.vals[x].exact {
                    op = "Relu6";
                }
                // Log's absolute error is its argument's relative error, and Rsqrt is a
                // division (1/√x of a cancelled, inexact x amplifies its error; seed 7):
                // same concern.
                if matches!(op, "Log" | "Rsqrt" | "Log1p") && !self.stable(x) {
                    op = "Sigmoid";
                }
                // Usually keep Log/Sqrt/Rsqrt in their domain (NaN stays possible).
                let x = if matches!(op, "Log" | "Sqrt" | "Rsqrt" | "Log1p") && !m.c.is_multiple_of(4) {
                    self.unary("Abs", x, true)
                } else {
                    x
                };
                // Exp multiplies its argument's relative error by the argument: keep the
                // argument in [-1, 1] (through Tanh) unless it is exact and not derived
                // from a variable (whose value, read in a later step, may not be).
                let stable = self.vals[x].exact && !self.vals[x].from_var;
                // Sin and Cos turn an argument's relative error into an absolute one of the
                // same size times the argument: the same guard.
                let x = if matches!(op, "Exp" | "Expm1" | "Elu" | "Selu" | "Sin" | "Cos")
                    && (!stable || !m.c.is_multiple_of(4))
                {
                    self.unary("Tanh", x, false)
                } else {
                    x
                };
                self.unary(op, x, exact);
            }
            // Comparison feeding SelectV2 (three-way broadcasting).
            5 => {
                let Some(p) = self.pick(Ty::F32, m.a, true) else { return };
                let shape = self.vals[p].shape.clone();
                let Some(q) = self.partner(Ty::F32, &shape, m.b, true) else { return };
                let cmp = ["Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"];
                let cond = self.binary(cmp[m.c as usize % cmp.len()], p, q, Ty::Bool, true);
                let cshape = self.vals[cond].shape.clone();
                let Some(t) = self.partner(Ty::F32, &cshape, m.c / 8, false) else { return };
                let (vc, vt, ve) = (self.vals[cond].clone(), self.vals[t].clone(), self.vals[x].clone());
                let Some(shape) = broadcast(&vc.shape, &vt.shape).and_then(|s| broadcast(&s, &ve.shape)) else {
                    return;
                };
                if numel(&shape) > MAX_ELEMENTS {
                    return;
                }
                let name = self.node("sel", format!("SelectV2({}, {}, {}) {{T = float32}}", vc.at, vt.at, ve.at));
                self.push(name, Ty::F32, shape, vt.exact && ve.exact);
            }
            // Casts and int32 / bool arithmetic.
            6 => {
                let Some(p) = self.pick(Ty::F32, m.a, true) else { return };
                match m.b % 4 {
                    0 => {
                        // float -> bool -> float.
                        let b = self.cast(p, Ty::Bool);
                        self.cast(b, Ty::F32);
                    }
                    _ => {
                        // float -> int32, int arithmetic, -> float.
                        let scaled = {
                            let shape = self.vals[p].shape.clone();
                            let c = self.const_f32(&shape[shape.len().saturating_sub(1)..]);
                            self.binary("Mul", p, c, Ty::F32, true)
                        };
                        // Clamp first: int32 overflow is tested by
                        // `constant_int32_overflow_wraps` (a known folding bug), not here.
                        let clamped = {
                            let lo = self.const_scalar(-1000.0);
                            let hi = self.const_scalar(1000.0);
                            let x = self.binary("Maximum", scaled, lo, Ty::F32, true);
                            self.binary("Minimum", x, hi, Ty::F32, true)
                        };
                        let i = self.cast(clamped, Ty::I32);
                        let shape = self.vals[i].shape.clone();
                        let j = self.partner(Ty::I32, &shape, m.c, true).unwrap_or(i);
                        let ops = ["Add", "AddV2", "Sub", "Mul", "Maximum", "Minimum"];
                        let k = self.binary(ops[m.c as usize / 2 % ops.len()], i, j, Ty::I32, true);
                        self.cast(k, Ty::F32);
                    }
                }
            }
            // Reductions.
            7..=8 => {
                let v = self.vals[x].clone();
                if v.shape.is_empty() {
                    return;
                }
                let rank = v.shape.len();
                let mut axes: Vec<i64> = (0..rank as i64).filter(|i| (m.b >> i) & 1 == 1).collect();
                if axes.is_empty() {
                    axes.push((m.b as usize / 16 % rank) as i64);
                }
                // Sometimes spell an axis negatively.
                if m.c & 8 == 8 {
                    axes[0] -= rank as i64;
                }
                // As for MatMul: at most 1024 summands per output.
                let summands: usize = v
                    .shape
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| axes.iter().any(|&a| (a + rank as i64) as usize % rank == *i))
                    .map(|(_, &d)| d)
                    .product();
                if summands > 1024 && matches!(m.c as usize / 2 % 4, 0 | 1) {
                    return;
                }
                let keep = m.c & 1 == 1;
                let ops = [("Sum", false), ("Mean", false), ("Max", true), ("Min", true)];
                let (op, exact) = ops[m.c as usize / 2 % 4];
                let k = self.const_i32(&axes);
                let reduced: Vec<bool> =
                    (0..rank).map(|i| axes.iter().any(|&a| (a + rank as i64) as usize % rank == i)).collect();
                let shape: Vec<usize> = v
                    .shape
                    .iter()
                    .zip(&reduced)
                    .filter_map(|(&d, &r)| if r { keep.then_some(1) } else { Some(d) })
                    .collect();
                let name =
                    self.node("red", format!("{op}({}, {k}) {{T = float32, Tidx = int32, keep_dims = {keep}}}", v.at));
                let r = self.push(name, Ty::F32, shape, v.exact && exact);
                if !exact {
                    self.vals[r].from_var = true; // reassociated sums: the looser tolerance
                }
            }
            // MatMul.
            9..=10 => {
                let x = self.matrix(x, m.b);
                let v = self.vals[x].clone();
                let (ta, tb) = (m.c & 1 == 1, m.c & 2 == 2);
                let (rows, inner) = if ta { (v.shape[1], v.shape[0]) } else { (v.shape[0], v.shape[1]) };
                // Long dot products reassociate differently in the GEMM and the
                // interpreter: beyond ~128 terms the rounding difference of a cancelling
                // sum exceeds the element-wise tolerance legitimately.
                if inner > 128 {
                    return;
                }
                let want = |n: usize| if tb { vec![n, inner] } else { vec![inner, n] };
                let found = (0..self.vals.len()).rev().find(|&i| {
                    let w = &self.vals[i];
                    w.ty == Ty::F32 && w.shape.len() == 2 && w.shape == want(if tb { w.shape[0] } else { w.shape[1] })
                });
                let y = match found {
                    Some(y) if m.c & 4 == 4 => y,
                    _ => {
                        let n = [1, 2, 3, 5, 8, 17][m.c as usize / 8 % 6];
                        self.const_f32(&want(n))
                    }
                };
                let vy = self.vals[y].clone();
                let cols = if tb { vy.shape[0] } else { vy.shape[1] };
                if rows * cols > 1 << 20 {
                    return;
                }
                let name = self.node(
                    "mm",
                    format!("MatMul({}, {}) {{T = float32, transpose_a = {ta}, transpose_b = {tb}}}", v.at, vy.at),
                );
                let r = self.push(name, Ty::F32, vec![rows, cols], false);
                self.vals[r].from_var = true; // reassociated sums: the looser tolerance
            }
            // BiasAdd.
            11 => {
                let x = if self.vals[x].shape.len() < 2 { self.matrix(x, m.b) } else { x };
                let v = self.vals[x].clone();
                let last = *v.shape.last().expect("rank >= 2");
                let b = match (0..self.vals.len())
                    .rev()
                    .find(|&i| self.vals[i].ty == Ty::F32 && self.vals[i].shape == [last])
                {
                    Some(b) if m.c & 1 == 1 => b,
                    _ => self.const_f32(&[last]),
                };
                let vb = self.vals[b].clone();
                let name = self.node("bias", format!("BiasAdd({}, {}) {{T = float32}}", v.at, vb.at));
                self.push(name, Ty::F32, v.shape, v.exact && vb.exact);
            }
            // Reshape.
            12 => {
                self.reshape(x, m.b, m.c);
            }
            // Transpose.
            13 => {
                let v = self.vals[x].clone();
                let rank = v.shape.len();
                if rank < 2 {
                    return;
                }
                let mut perm: Vec<usize> = (0..rank).collect();
                let mut r = m.b as usize;
                for i in (1..rank).rev() {
                    perm.swap(i, r % (i + 1));
                    r /= i + 1;
                }
                let k = self.const_i32(&perm.iter().map(|&p| p as i64).collect::<Vec<_>>());
                let shape = perm.iter().map(|&p| v.shape[p]).collect();
                let name = self.node("tr", format!("Transpose({}, {k}) {{T = float32, Tperm = int32}}", v.at));
                self.push(name, Ty::F32, shape, v.exact);
            }
            // Read a variable.
            14 => {
                if !self.vars.is_empty() {
                    self.read(m.b as usize % self.vars.len());
                }
            }
            // Write a variable (assign, or assign-add a delta of its shape).
            _ => {
                if self.vars.is_empty() {
                    return;
                }
                let var = m.b as usize % self.vars.len();
                let shape = self.vars[var].shape.clone();
                let pool: Vec<usize> = (0..self.vals.len())
                    .filter(|&i| {
                        self.vals[i].ty == Ty::F32
                            && broadcast(&self.vals[i].shape, &shape).as_deref() == Some(&shape[..])
                    })
                    .collect();
                let Some(&src) = pool.get(pool.len().saturating_sub(1 + m.a as usize % 3)) else { return };
                let Some(value) = self.shaped_like(src, &shape) else { return };
                let at = self.vals[value].at.clone();
                let (op, base) =
                    if m.c & 1 == 1 { ("AssignAddVariableOp", "assign_add") } else { ("AssignVariableOp", "assign") };
                let name = self.var_op(var, base, |h, dep| format!("{op}({h}, {at}{dep}) {{dtype = float32}}"));
                self.targets.push(name);
                // Sometimes read it back right away (a read after a write).
                if m.c & 2 == 2 {
                    self.read(var);
                }
            }
        }
    }

    /// `x` as a matrix (reshaped when it is not one).
    fn matrix(&mut self, x: usize, pick: u16) -> usize {
        if self.vals[x].shape.len() == 2 {
            return x;
        }
        let n = numel(&self.vals[x].shape);
        let divisors: Vec<usize> = (1..=n).filter(|d| n.is_multiple_of(*d)).collect();
        let rows = divisors[pick as usize % divisors.len()];
        self.reshape_to(x, &[rows, n / rows], false)
    }

    fn reshape(&mut self, x: usize, pick: u16, how: u16) -> usize {
        let n = numel(&self.vals[x].shape);
        let rank = 1 + pick as usize % 3;
        let mut shape = Vec::new();
        let mut rest = n;
        for i in 0..rank - 1 {
            let divisors: Vec<usize> = (1..=rest).filter(|d| rest.is_multiple_of(*d)).collect();
            let d = divisors[(pick as usize >> (2 + 3 * i)) % divisors.len()];
            shape.push(d);
            rest /= d;
        }
        shape.push(rest);
        self.reshape_to(x, &shape, how & 1 == 1)
    }

    fn reshape_to(&mut self, x: usize, shape: &[usize], infer_one: bool) -> usize {
        let v = self.vals[x].clone();
        let mut spelled: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        if infer_one && numel(shape) > 0 {
            spelled[0] = -1;
        }
        let k = self.const_i32(&spelled);
        let name = self.node("rs", format!("Reshape({}, {k}) {{T = float32, Tshape = int32}}", v.at));
        self.push(name, Ty::F32, shape.to_vec(), v.exact)
    }
}

fn build(case: &Case) -> Built {
    let mut b = Builder {
        lines: Vec::new(),
        vals: Vec::new(),
        vars: Vec::new(),
        rng: Rng(case.seed),
        next: 0,
        targets: vec![],
        feeds: vec![],
    };
    // Inputs broadcast to the base shape: drop leading dims, set some to 1.
    let sub_shape = |rng: &mut Rng| -> Vec<usize> {
        let drop = rng.below(case.base.len() + 1).min(rng.below(case.base.len() + 1));
        case.base[drop..].iter().map(|&d| if rng.below(4) == 0 { 1 } else { d }).collect()
    };
    let mut vars = Vec::new();
    for i in 0..case.vars {
        let shape = if i == 0 { case.base.clone() } else { sub_shape(&mut b.rng) };
        let name = format!("v{i}");
        b.lines.push(format!(
            "{name} = VarHandleOp() {{dtype = float32, shape = shape[{}], shared_name = \"{name}\", container = \"\"}}",
            dims(&shape)
        ));
        let values: Vec<f32> = (0..numel(&shape)).map(|_| b.rng.value()).collect();
        vars.push((name.clone(), Tensor::from_f32(shape.clone(), values).unwrap()));
        b.vars.push(Var { name, shape, last: None });
    }
    let mut feeds = Vec::new();
    for i in 0..case.placeholders {
        let shape = if i == 0 && case.vars == 0 { case.base.clone() } else { sub_shape(&mut b.rng) };
        let name = format!("p{i}");
        let declared = declared_dims(&shape, &mut b.rng);
        b.lines.push(format!("{name} = Placeholder() {{dtype = float32, shape = shape[{declared}]}}"));
        let values: Vec<f32> = (0..numel(&shape)).map(|_| b.rng.value()).collect();
        feeds.push((name.clone(), Tensor::from_f32(shape.clone(), values).unwrap()));
        b.push(name, Ty::F32, shape, true);
    }
    for v in 0..b.vars.len() {
        b.read(v);
    }
    if b.vals.is_empty() {
        b.const_f32(&case.base.clone());
    }
    let first_computed = b.vals.len();
    for &m in &case.moves {
        b.apply(m);
    }
    // Fetch the last few computed values and a spread of earlier ones.
    let computed: Vec<usize> = (first_computed..b.vals.len()).collect();
    let mut fetch: Vec<usize> = computed.iter().rev().take(3).copied().collect();
    fetch.extend(computed.iter().step_by(3).copied());
    fetch.sort_unstable();
    fetch.dedup();
    let fetches = fetch.iter().map(|&i| b.vals[i].at.clone()).collect();
    // Values through a polynomial transcendental (Exp, Tanh, Sigmoid, Log, Rsqrt) carry its few-ulp
    // error, which a later cancellation (e.g. exp(tanh x) + tanh x) can raise past 1e-5 relative;
    // the approximations themselves are checked to float32 tolerance in compiler/src/math.rs.
    let fetch_rtol =
        fetch.iter().map(|&i| if b.vals[i].from_var || !b.vals[i].exact { STEP_RTOL } else { RTOL }).collect();
    feeds.append(&mut b.feeds);
    Built { text: b.lines.join("\n") + "\n", vars, feeds, fetches, fetch_rtol, targets: b.targets }
}

// ---------------------------------------------------------------------------
// Running and comparing.

static CASES: AtomicUsize = AtomicUsize::new(0);
static ALL_COMPILED: AtomicUsize = AtomicUsize::new(0);

const STEPS: usize = 3;

/// How the pipeline reports a graph with no clusters.
const NO_CLUSTERS: &str = "no clusters";

struct Mode {
    session: Session,
    request: RunRequest,
}

fn plain_mode(graph: &Arc<Graph>, built: &Built, threads: usize) -> Result<Mode, String> {
    let session = Session::new(graph.clone(), SessionOptions { threads, schedule_seed: None, ..Default::default() });
    for (n, t) in &built.vars {
        session.set_variable(n, t.clone()).map_err(|e| e.to_string())?;
    }
    let feeds = built.feeds.iter().map(|(n, t)| Ok((session.output(n)?, t.clone()))).collect::<Result<Vec<_>, _>>();
    let fetches = built.fetches.iter().map(|n| session.output(n)).collect::<Result<Vec<_>, _>>();
    let targets = built.targets.iter().map(|n| session.node(n)).collect::<Result<Vec<_>, _>>();
    let (feeds, fetches, targets) = (
        feeds.map_err(|e: autoclust_runtime::RunError| e.to_string())?,
        fetches.map_err(|e| e.to_string())?,
        targets.map_err(|e| e.to_string())?,
    );
    Ok(Mode { session, request: RunRequest { feeds, fetches, targets } })
}

/// The clustered mode, as `autoclust run` builds it; also the number of clusters.
fn clustered_mode(graph: &Graph, plain: &Mode, built: &Built, threads: usize) -> Result<(Mode, usize), String> {
    let req = &plain.request;
    let fed: Vec<Output> = req.feeds.iter().map(|(o, _)| *o).collect();
    let program = clustered_program(graph, &fed, &req.fetches, &req.targets, ClusterConfig::default())
        .map_err(|e| format!("the pipeline failed: {e}"))?;
    let clusters = program.clusters.len();
    let g = Arc::new(program.graph);
    let session = Session::with_jit(
        g.clone(),
        SessionOptions { threads, schedule_seed: None, ..Default::default() },
        Jit::new(CompilerOptions { threads: 2, ..Default::default() }, true),
    );
    for (n, t) in &built.vars {
        session.set_variable(n, t.clone()).map_err(|e| e.to_string())?;
    }
    let find = |n: &str| g.find(n).ok_or_else(|| format!("'{n}' is missing after the rewrite"));
    // A placeholder pruned away (nothing needs it) is not fed, as in `autoclust run`.
    let feeds =
        built.feeds.iter().filter_map(|(n, t)| g.find(n).map(|node| (Output { node, port: 0 }, t.clone()))).collect();
    let fetches =
        program.fetch_anchors.iter().map(|n| Ok(Output { node: find(n)?, port: 0 })).collect::<Result<_, String>>()?;
    let targets = program.target_anchors.iter().map(|n| find(n)).collect::<Result<_, String>>()?;
    Ok((Mode { session, request: RunRequest { feeds, fetches, targets } }, clusters))
}

fn close(what: &str, got: &Tensor, want: &Tensor, rtol: f64) -> Result<(), String> {
    if got.dtype != want.dtype || got.shape != want.shape {
        return Err(format!("{what}: clustered {} {:?}, plain {} {:?}", got.dtype, got.shape, want.dtype, want.shape));
    }
    let (Some(g), Some(w)) = (got.to_f64_vec(), want.to_f64_vec()) else {
        return Err(format!("{what}: {} is not numeric", got.dtype));
    };
    // Inexact values (through a transcendental or a reassociated sum, or derived from a
    // variable) also get RTOL of the tensor's largest finite magnitude: a cancellation such
    // as x + exp(tanh x) ≈ 0 turns the approximations' last-ulp differences into a large
    // *relative* difference of that element, legitimately (found with seed 7: 3e-4 relative
    // on an element 1e-4 of the tensor's largest).
    let norm = if rtol > RTOL { w.iter().filter(|x| x.is_finite()).fold(0.0f64, |m, x| m.max(x.abs())) } else { 0.0 };
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let ok = if got.dtype == DType::Float32 {
            a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= rtol * (a.abs().max(b.abs()) + 1.0) + RTOL * norm
        } else {
            a == b
        };
        if !ok {
            return Err(format!("{what}[{i}] (shape {:?}): clustered {a}, plain {b}", got.shape));
        }
    }
    Ok(())
}

/// One step; a panic becomes an error, so the failure report still prints the graph.
fn guarded_run(
    mode: &Mode,
    which: &str,
) -> Result<Result<autoclust_runtime::RunOutputs, autoclust_runtime::RunError>, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| mode.session.run(&mode.request))).map_err(|e| {
        let msg = e.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| e.downcast_ref::<String>().cloned());
        format!("the {which} run panicked: {}", msg.unwrap_or_default())
    })
}

fn check(case: &Case) -> Result<(), String> {
    let built = build(case);
    if std::env::var_os("JIT_PROPERTY_TRACE").is_some() {
        eprintln!("case: base {:?}, {} moves, {} bytes of graph", case.base, case.moves.len(), built.text.len());
    }
    let graph = Arc::new(autoclust_graph::text::parse(&built.text).map_err(|e| format!("generated graph: {e}"))?);
    let plain = plain_mode(&graph, &built, case.threads)?;
    let (clustered, clusters) = clustered_mode(&graph, &plain, &built, case.threads)?;
    if clusters == 0 {
        return Err(NO_CLUSTERS.into());
    }
    for step in 0..STEPS {
        let p = guarded_run(&plain, "plain")?;
        let c = guarded_run(&clustered, "clustered")?;
        let (p, c) = match (p, c) {
            (Ok(p), Ok(c)) => (p, c),
            (Err(p), Err(_)) if step == 0 => return Err(format!("the generated graph fails: {p}")),
            (Err(p), Err(c)) => return Err(format!("step {step}: both failed: plain: {p}; clustered: {c}")),
            (Err(p), Ok(_)) => return Err(format!("step {step}: only the plain run failed: {p}")),
            (Ok(_), Err(c)) => return Err(format!("step {step}: only the clustered run failed: {c}")),
        };
        for (((name, g), w), &rtol) in built.fetches.iter().zip(&c.fetches).zip(&p.fetches).zip(&built.fetch_rtol) {
            close(&format!("step {step}: fetch {name}"), g, w, rtol)?;
        }
    }
    let (pv, cv) = (plain.session.variables(), clustered.session.variables());
    for (name, w) in &pv {
        let g = cv.iter().find(|(n, _)| n == name).ok_or_else(|| format!("variable {name} missing"))?;
        close(&format!("variable {name}"), &g.1, w, STEP_RTOL)?;
    }
    let jit = clustered.session.jit();
    if jit.compile_time().is_zero() {
        return Err(format!(
            "no cluster was compiled ({} compile attempts, {} interpreted calls): the test would compare the \
             interpreter with itself",
            jit.compile_count(),
            jit.interpreted_calls()
        ));
    }
    if std::env::var_os("JIT_PROPERTY_TRACE").is_some() {
        eprintln!(
            "  {clusters} clusters, {} compiles ({:?}), {} interpreted calls",
            jit.compile_count(),
            jit.compile_time(),
            jit.interpreted_calls()
        );
    }
    CASES.fetch_add(1, Ordering::Relaxed);
    if jit.interpreted_calls() == 0 {
        ALL_COMPILED.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn describe(case: &Case, error: &str) -> String {
    let built = build(case);
    let mut s = format!("{error}\n--- graph ---\n{}", built.text);
    let _ = writeln!(s, "--- fetch {} target {}", built.fetches.join(","), built.targets.join(","));
    for (kind, list) in [("variable", &built.vars), ("feed", &built.feeds)] {
        for (n, t) in list {
            let _ = writeln!(s, "{kind} {n} = {}", autoclust_runtime::tensor_io::tensor_to_json(t));
        }
    }
    s
}

// ---------------------------------------------------------------------------
// Strategies.

/// Inter-op threads of both sessions: 1 (deterministic order) or 2 (parallel runs, which once
/// exposed an executor race, fixed with a regression test in the runtime);
/// `JIT_PROPERTY_THREADS=1` keeps every case single-threaded.
fn threads_strategy() -> BoxedStrategy<usize> {
    if std::env::var("JIT_PROPERTY_THREADS").as_deref() == Ok("1") {
        Just(1usize).boxed()
    } else {
        prop_oneof![Just(1usize), Just(2)].boxed()
    }
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let dim = prop_oneof![4 => 1usize..=5, 1 => Just(8usize), 1 => Just(17usize), 1 => Just(33usize)];
    let small = prop::collection::vec(dim, 0..=3);
    // Now and then a shape large enough for the JIT's SIMD loops and thread split.
    let large = prop_oneof![Just(vec![64usize, 1031]), Just(vec![3, 128, 700]), Just(vec![300_000usize])];
    // One case in 13 (about 4 s of the test's time); `JIT_PROPERTY_LARGE=0` leaves them out.
    let large_weight = if std::env::var("JIT_PROPERTY_LARGE").as_deref() == Ok("0") { 0 } else { 1 };
    let base = prop_oneof![12 => small, large_weight => large];
    let mv = (any::<u8>(), any::<u16>(), any::<u16>(), any::<u16>()).prop_map(|(kind, a, b, c)| Move { kind, a, b, c });
    (base, 0u8..=3, 0u8..=2, prop::collection::vec(mv, 3..40), any::<u64>(), threads_strategy()).prop_map(
        |(base, vars, placeholders, moves, seed, threads)| Case {
            base,
            vars,
            placeholders: if vars == 0 { placeholders.max(1) } else { placeholders },
            moves,
            seed,
            threads,
        },
    )
}

#[test]
fn random_graphs_clustered_match_plain() {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    // A fixed seed keeps CI deterministic; set PROPTEST_RNG_SEED to explore others (seeds 1-12
    // pass). Seed 9 found that the interpreter and the JIT broke ±0 ties of Maximum/Minimum
    // differently (x / max(0, -0) then had opposite infinities); seed 7 found the cancellation
    // the normwise tolerance in `close` allows.
    let seed = std::env::var("PROPTEST_RNG_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&case_strategy(), |case| {
        check(&case).map_err(|e| {
            // A graph with nothing clusterable says nothing about the JIT: draw another.
            if e.ends_with(NO_CLUSTERS) {
                TestCaseError::reject(NO_CLUSTERS)
            } else {
                TestCaseError::fail(describe(&case, &e))
            }
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (n, all) = (CASES.load(Ordering::Relaxed), ALL_COMPILED.load(Ordering::Relaxed));
    eprintln!("{n} cases; every cluster call compiled in {all}");
    assert!(all * 2 >= n, "only {all} of {n} cases ran every cluster compiled: the JIT declines too much");
}

/// The plain executor's and the clustered run's fetches for a native graph with no inputs.
fn both_fetches(text: &str, fetches: &[&str]) -> (Vec<Tensor>, Vec<Tensor>) {
    both_fetches_fed(text, vec![], fetches)
}

/// [`both_fetches`] with placeholder values.
fn both_fetches_fed(text: &str, feeds: Vec<(String, Tensor)>, fetches: &[&str]) -> (Vec<Tensor>, Vec<Tensor>) {
    let built = Built {
        text: text.to_string(),
        vars: vec![],
        feeds,
        fetches: fetches.iter().map(|s| s.to_string()).collect(),
        fetch_rtol: vec![RTOL; fetches.len()],
        targets: vec![],
    };
    let graph = Arc::new(autoclust_graph::text::parse(text).unwrap());
    let plain = plain_mode(&graph, &built, 1).unwrap();
    let (clustered, clusters) = clustered_mode(&graph, &plain, &built, 1).unwrap();
    assert!(clusters > 0);
    let p = plain.session.run(&plain.request).unwrap().fetches;
    let c = clustered.session.run(&clustered.request).unwrap().fetches;
    assert!(!clustered.session.jit().compile_time().is_zero(), "compiled");
    (p, c)
}

/// `Maximum`/`Minimum` propagate NaN (TensorFlow, the plain executor, and the JIT's generated code
/// on non-constant inputs); a cluster whose operands are all constants must too.
#[test]
fn constant_maximum_propagates_nan() {
    let text = "z = Const() {dtype = float32, value = float32[2]{0.0, 1.0}}\n\
                q = RealDiv(z, z) {T = float32}\n\
                lo = Const() {dtype = float32, value = float32[]{-1000.0}}\n\
                mx = Maximum(q, lo) {T = float32}\n\
                mn = Minimum(q, lo) {T = float32}\n";
    let (plain, clustered) = both_fetches(text, &["mx", "mn"]);
    assert!(plain[0].to_f64_vec().unwrap()[0].is_nan());
    for (c, p) in clustered.iter().zip(&plain) {
        let (c, p) = (c.to_f64_vec().unwrap(), p.to_f64_vec().unwrap());
        assert!(c.iter().zip(&p).all(|(a, b)| a == b || (a.is_nan() && b.is_nan())), "clustered {c:?}, plain {p:?}");
    }
}

/// int32 arithmetic wraps on overflow (TensorFlow's kernels, the plain executor, and the JIT's
/// generated code on non-constant inputs); a cluster whose operands are all constants must too.
#[test]
fn constant_int32_overflow_wraps() {
    let text = "a = Const() {dtype = int32, value = int32[2]{2147483647, 5}}\n\
                s = Add(a, a) {T = int32}\n\
                n = Neg(s) {T = int32}\n";
    let (plain, clustered) = both_fetches(text, &["s", "n"]);
    assert_eq!(plain[0].to_f64_vec().unwrap(), [-2.0, 10.0]);
    assert_eq!(clustered, plain);
}

/// A ±0 tie in `Maximum`/`Minimum` returns the second operand and `Relu(-0)` is +0, as
/// TensorFlow's vectorised (Eigen packet) kernels do for all but a tensor's last few elements
/// (checked with TensorFlow 2.21 on float32[16]: max(+0, -0) = -0, max(-0, +0) = +0,
/// min(+0, -0) = -0, relu(-0) = +0); both modes must agree, element for element and sign for
/// sign. The fed operands keep the JIT from folding them (seed 9 of the property test found
/// the two modes breaking these ties differently).
#[test]
fn signed_zero_ties_match_tensorflow() {
    let text = "a = Placeholder() {dtype = float32, shape = shape[8]}\n\
                b = Placeholder() {dtype = float32, shape = shape[8]}\n\
                z = Const() {dtype = float32, value = float32[]{0.0}}\n\
                mx = Maximum(a, b) {T = float32}\n\
                mn = Minimum(a, b) {T = float32}\n\
                r = Relu(a) {T = float32}\n\
                mz = Maximum(a, z) {T = float32}\n\
                zm = Maximum(z, a) {T = float32}\n";
    let a = [0.0f32, -0.0, 0.0, -0.0, 1.0, -1.0, f32::NAN, 2.0];
    let b = [-0.0f32, 0.0, 0.0, -0.0, 1.0, -1.0, 1.0, f32::NAN];
    let feeds = vec![
        ("a".to_string(), Tensor::from_f32(vec![8], a.to_vec()).unwrap()),
        ("b".to_string(), Tensor::from_f32(vec![8], b.to_vec()).unwrap()),
    ];
    let (plain, clustered) = both_fetches_fed(text, feeds, &["mx", "mn", "r", "mz", "zm"]);
    let bits = |t: &Tensor| {
        t.as_f32().unwrap().iter().map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() }).collect::<Vec<_>>()
    };
    let expect = |v: &[f32]| v.iter().map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() }).collect::<Vec<_>>();
    let nan = f32::NAN;
    let want: [&[f32]; 5] = [
        &[-0.0, 0.0, 0.0, -0.0, 1.0, -1.0, nan, nan],
        &[-0.0, 0.0, 0.0, -0.0, 1.0, -1.0, nan, nan],
        &[0.0, 0.0, 0.0, 0.0, 1.0, 0.0, nan, 2.0],
        &[0.0, 0.0, 0.0, 0.0, 1.0, 0.0, nan, 2.0],
        &[0.0, -0.0, 0.0, -0.0, 1.0, 0.0, nan, 2.0],
    ];
    for (i, w) in want.iter().enumerate() {
        assert_eq!(bits(&plain[i]), expect(w), "plain fetch {i}: {:?}", plain[i].as_f32());
        assert_eq!(bits(&clustered[i]), expect(w), "clustered fetch {i}: {:?}", clustered[i].as_f32());
    }
}
