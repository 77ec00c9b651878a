//! Dense linear algebra on batches of small matrices, what `tf.linalg` puts in Gaussian
//! process, normalising-flow and second-order training graphs, and Keras' orthogonal
//! initializer (the default for LSTM and GRU recurrent kernels) in TF1 init graphs: `Svd`
//! (one-sided Jacobi; singular values exact to rounding, vectors up to sign), `TridiagonalSolve`
//! (LAPACK's `gtsv` pivoting, or Thomas without), `TridiagonalMatMul`, `BandedTriangularSolve`
//! (TensorFlow's band storage, batch dimensions broadcast), `MatrixSquareRoot` (principal root: symmetric
//! by eigendecomposition, otherwise Denman–Beavers), `Qr`
//! (Householder, Eigen's sign conventions), `Lu` (`tf.linalg.lu`: the packed factors and the
//! permutation `p` with `A[p] = L·U`, Eigen's `PartialPivLU` pivots), `MatrixInverse`, `Cholesky`,
//! `MatrixTriangularSolve`, `MatrixSolve`, `MatrixDeterminant` and `LogMatrixDeterminant`,
//! each over the last two dimensions of a float32 or float64 tensor (float16 and bfloat16
//! through the float32 kernel), batch dimensions in front; and `Cross` (3-vectors along the
//! last dimension, every real type).
//!
//! TensorFlow's CPU kernels run Eigen's decompositions in the input's precision; these run
//! the same decompositions (LU with partial pivoting, Cholesky–Banachiewicz, forward and
//! back substitution) in float64 and round once, so float32 results agree with
//! TensorFlow's to a few ulps and are never less accurate. The errors are TensorFlow's:
//! an LU pivot that is exactly zero makes `MatrixInverse` and `MatrixSolve` fail ("not
//! invertible") where `MatrixDeterminant` answers (signed) 0; a matrix that is not positive
//! definite gives `Cholesky` a lower triangle of NaNs, TensorFlow's answer since 2.x (it
//! only logs a warning). Only `MatrixTriangularSolve` and `BandedTriangularSolve` broadcast batch
//! dimensions (as TensorFlow's do); `MatrixSolve` requires them equal.
//!
//! The matrices of a batch are independent: [`per_matrix`] shares them between the cores
//! when there is enough work (each matrix is still computed by one thread, in the same
//! order of operations, so results do not depend on the split).

use autoclust_graph::{DType, Node, Tensor};

use super::elementwise::broadcast_shape;
use super::{arity, attr_bool_or, budget, tensor_of, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "MatrixInverse" => {
            let adjoint = attr_bool_or(node, "adjoint", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let m = Batch::square(&inp[0], "input")?;
                let n = m.rows;
                let inverses = per_matrix(m.count(), n * n * n, |i| {
                    let a = m.matrix(i);
                    let lu = Lu::new(if adjoint { transpose(a, n) } else { a.to_vec() }, n);
                    if lu.singular() {
                        return Err(KernelError::invalid("Input is not invertible."));
                    }
                    Ok(lu.solve(&identity(n), n))
                })?;
                single(m.output(inp[0].shape.clone(), inverses.concat()))
            })
        }
        "Qr" => {
            let full = attr_bool_or(node, "full_matrices", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let m = Batch::new(&inp[0], "input")?;
                let (rows, cols) = (m.rows, m.cols);
                let p = rows.min(cols);
                let (q_cols, r_rows) = if full { (rows, rows) } else { (p, p) };
                let (mut qs, mut rs) = (Vec::new(), Vec::new());
                for a in m.matrices() {
                    let (q, r) = householder_qr(a, rows, cols, q_cols, r_rows);
                    qs.extend(q);
                    rs.extend(r);
                }
                let lead = &inp[0].shape[..inp[0].rank() - 2];
                let mut o = Outputs::new();
                o.push(m.output([lead, &[rows, q_cols]].concat(), qs));
                o.push(m.output([lead, &[r_rows, cols]].concat(), rs));
                Ok(o)
            })
        }
        "Lu" => {
            let idx =
                node.attr("output_idx_type").and_then(autoclust_graph::AttrValue::as_type).unwrap_or(DType::Int32);
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let t = &inp[0];
                if t.rank() < 2 {
                    return Err(KernelError::invalid(format!("Input tensor must have rank >= 2, got {}", t.rank())));
                }
                if t.shape[t.rank() - 2] != t.shape[t.rank() - 1] {
                    return Err(KernelError::invalid("Input matrix must be square."));
                }
                let m = Batch::square(t, "input")?;
                let (mut packed, mut perms) = (Vec::with_capacity(m.data.len()), Vec::new());
                for a in m.matrices() {
                    let lu = Lu::new(a.to_vec(), m.rows);
                    if lu.singular() {
                        return Err(KernelError::invalid("Input is not invertible."));
                    }
                    packed.extend_from_slice(&lu.lu);
                    perms.extend(lu.perm.iter().map(|&p| p as i64));
                }
                let pshape = t.shape[..t.rank() - 1].to_vec();
                let p = match idx {
                    DType::Int64 => tensor_of(pshape, perms),
                    _ => tensor_of(pshape, perms.into_iter().map(|p| p as i32).collect()),
                };
                let mut o = Outputs::new();
                o.push(m.output(t.shape.clone(), packed));
                o.push(p);
                Ok(o)
            })
        }
        "Svd" => {
            let (uv, full) = (attr_bool_or(node, "compute_uv", true)?, attr_bool_or(node, "full_matrices", false)?);
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let m = Batch::new(&inp[0], "input")?;
                let (rows, cols) = (m.rows, m.cols);
                let p = rows.min(cols);
                let (u_cols, v_cols) = if full { (rows, cols) } else { (p, p) };
                let (mut ss, mut us, mut vs) = (Vec::new(), Vec::new(), Vec::new());
                // Each matrix on one core (its sweeps ~10·rows·cols² multiply-adds).
                let cost = rows.saturating_mul(cols).saturating_mul(p).saturating_mul(10);
                for f in per_matrix(m.count(), cost, |i| Ok(svd(m.matrix(i), rows, cols, u_cols, v_cols)))? {
                    ss.extend(f.s);
                    us.extend(f.u);
                    vs.extend(f.v);
                }
                let lead = &inp[0].shape[..inp[0].rank() - 2];
                let mut o = Outputs::new();
                o.push(m.output([lead, &[p]].concat(), ss));
                if uv {
                    o.push(m.output([lead, &[rows, u_cols]].concat(), us));
                    o.push(m.output([lead, &[cols, v_cols]].concat(), vs));
                } else {
                    // TensorFlow leaves `u` and `v` as uninitialised scalars.
                    o.push(m.output(vec![], vec![0.0]));
                    o.push(m.output(vec![], vec![0.0]));
                }
                Ok(o)
            })
        }
        "TridiagonalSolve" => {
            let pivoting = attr_bool_or(node, "partial_pivoting", true)?;
            if attr_bool_or(node, "perturb_singular", false)? {
                return Err(KernelError::invalid(
                    "TridiagonalSolve with perturb_singular = true is not supported (TensorFlow's perturbation of \
                     zero pivots is not reproduced)",
                ));
            }
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                tridiagonal_solve(&inp[0], &inp[1], pivoting)
            })
        }
        "TridiagonalMatMul" => Box::new(|inp: Inputs| {
            arity(&inp, 4)?;
            tridiagonal_matmul(&inp[0], &inp[1], &inp[2], &inp[3])
        }),
        "BandedTriangularSolve" => {
            let lower = attr_bool_or(node, "lower", true)?;
            let adjoint = attr_bool_or(node, "adjoint", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                banded_triangular_solve(&inp[0], &inp[1], lower, adjoint)
            })
        }
        "MatrixSquareRoot" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let m = Batch::square(&inp[0], "input")?;
            let mut out = Vec::with_capacity(m.data.len());
            for a in m.matrices() {
                out.extend(square_root(a, m.rows));
            }
            single(m.output(inp[0].shape.clone(), out))
        }),
        "Cholesky" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let m = Batch::square(&inp[0], "input")?;
            let n = m.rows;
            let factors = per_matrix(m.count(), n * n * n / 3, |i| {
                Ok(cholesky(m.matrix(i), n).unwrap_or_else(|| failed_cholesky(n)))
            })?;
            single(m.output(inp[0].shape.clone(), factors.concat()))
        }),
        "MatrixTriangularSolve" => {
            let lower = attr_bool_or(node, "lower", true)?;
            let adjoint = attr_bool_or(node, "adjoint", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                triangular_solve(&inp[0], &inp[1], lower, adjoint)
            })
        }
        "MatrixSolve" => {
            let adjoint = attr_bool_or(node, "adjoint", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let m = Batch::square(&inp[0], "matrix")?;
                let b = Batch::new(&inp[1], "rhs")?;
                m.check_rhs(&b, &inp[0], &inp[1])?;
                let n = m.rows;
                let solutions = per_matrix(m.count(), n * n * (n + b.cols), |i| {
                    let a = m.matrix(i);
                    let lu = Lu::new(if adjoint { transpose(a, n) } else { a.to_vec() }, n);
                    if lu.singular() {
                        return Err(KernelError::invalid("Input matrix is not invertible."));
                    }
                    Ok(lu.solve(b.matrix(i), b.cols))
                })?;
                single(b.output(inp[1].shape.clone(), solutions.concat()))
            })
        }
        "MatrixSolveLs" => {
            let fast = attr_bool_or(node, "fast", true)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                let m = Batch::new(&inp[0], "matrix")?;
                let b = Batch::new(&inp[1], "rhs")?;
                m.check_rhs(&b, &inp[0], &inp[1])?;
                let l2 = match inp[2].to_f64_vec().as_deref() {
                    Some(&[v]) if inp[2].rank() == 0 => v,
                    _ => return Err(KernelError::invalid("l2_regularizer must be a float64 scalar")),
                };
                let (rows, cols, k) = (m.rows, m.cols, b.cols);
                let eps = if m.dtype == DType::Float32 { f64::from(f32::EPSILON) } else { f64::EPSILON };
                let mut out = Vec::with_capacity(m.lead.iter().product::<usize>() * cols * k);
                for (a, rhs) in m.matrices().zip(b.matrices()) {
                    let x = if rows == 0 || cols == 0 || k == 0 {
                        vec![0.0; cols * k]
                    } else if fast {
                        least_squares_normal(a, rows, cols, rhs, k, l2).ok_or_else(|| {
                            KernelError::invalid(
                                "Input matrix was rank deficient or ill-conditioned. Try setting fast=False or \
                                 provide a larger l2_regularizer > 0.",
                            )
                        })?
                    } else {
                        least_squares_min_norm(a, rows, cols, rhs, k, eps)
                    };
                    out.extend(x);
                }
                let mut shape = m.lead.clone();
                shape.extend([cols, k]);
                single(m.output(shape, out))
            })
        }
        "MatrixDeterminant" | "LogMatrixDeterminant" => {
            let log = node.op == "LogMatrixDeterminant";
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let m = Batch::square(&inp[0], "input")?;
                let n = m.rows;
                let dets =
                    per_matrix(m.count(), n * n * n, |i| Ok(Lu::new(m.matrix(i).to_vec(), n).log_determinant()))?;
                let (signs, logs): (Vec<f64>, Vec<f64>) = dets.into_iter().unzip();
                let shape = m.lead.clone();
                if log {
                    let mut o = Outputs::new();
                    o.push(m.output(shape.clone(), signs));
                    o.push(m.output(shape, logs));
                    Ok(o)
                } else {
                    let det = signs.iter().zip(&logs).map(|(s, l)| s * l.exp()).collect();
                    single(m.output(shape, det))
                }
            })
        }
        "Cross" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            single(super::dispatch_num!(inp[0].dtype, cross(&inp[0], &inp[1], |x| x))?)
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// `Cross` (`tf.linalg.cross`, `cross_op.cc`): the cross product of each pair of 3-vectors
/// along the last dimension, `a × b = (a₁b₂ − a₂b₁, a₂b₀ − a₀b₂, a₀b₁ − a₁b₀)`, computed
/// in the element type as Eigen does (integers wrap). TensorFlow's checks and words.
/// `round` rounds each product and difference to the element type the arithmetic stands in
/// for (float16 and bfloat16 computed in float32, `half.rs`; the identity otherwise).
pub(crate) fn cross<T: super::Elem + autoclust_graph::arith::TfArith>(
    a: &Tensor,
    b: &Tensor,
    round: impl Fn(T) -> T,
) -> KResult<Tensor> {
    use super::shape_ops::debug_shape;
    if a.shape != b.shape {
        return Err(KernelError::invalid(format!(
            "Both inputs must be of same shape: {} vs. {}",
            debug_shape(&a.shape),
            debug_shape(&b.shape)
        )));
    }
    if a.shape.is_empty() {
        return Err(KernelError::invalid(format!("Input must be at least 1D{}", debug_shape(&a.shape))));
    }
    if a.shape[a.shape.len() - 1] != 3 {
        return Err(KernelError::invalid("Cross-products are only defined for 3-element vectors."));
    }
    if b.dtype != a.dtype {
        return Err(KernelError::DType(b.dtype));
    }
    let (x, y) = (T::slice(a), T::slice(b));
    let mut out = Vec::with_capacity(x.len());
    let term = |p: T, q: T, r: T, s: T| round(round(p.mul(q)).sub(round(r.mul(s))));
    for (u, v) in x.chunks_exact(3).zip(y.chunks_exact(3)) {
        out.push(term(u[1], v[2], u[2], v[1]));
        out.push(term(u[2], v[0], u[0], v[2]));
        out.push(term(u[0], v[1], u[1], v[0]));
    }
    Ok(tensor_of(a.shape.clone(), out))
}

/// A singular value decomposition `A = U·diag(s)·Vᵀ` of one matrix (row-major `U`, `V`).
struct Svd {
    s: Vec<f64>,
    u: Vec<f64>,
    v: Vec<f64>,
}

/// The SVD of the `rows × cols` matrix `a` by one-sided Jacobi rotations (Hestenes) in float64:
/// columns of the taller orientation are rotated pairwise until orthogonal, their norms are the
/// singular values (decreasing), the normalised columns `U` and the accumulated rotations `V`.
/// `U` gets `u_cols` columns and `V` `v_cols`; columns beyond the rank (and `full_matrices`'
/// extra ones) complete an orthonormal basis. Singular values are unique; the signs of the
/// vectors are not, and need not be Eigen's (its gradients are sign-invariant).
fn svd(a: &[f64], rows: usize, cols: usize, u_cols: usize, v_cols: usize) -> Svd {
    if rows < cols {
        // Aᵀ = U'·S·V'ᵀ gives A = V'·S·U'ᵀ.
        let mut at = vec![0.0; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                at[j * rows + i] = a[i * cols + j];
            }
        }
        let t = svd(&at, cols, rows, v_cols, u_cols);
        return Svd { s: t.s, u: t.v, v: t.u };
    }
    let (m, n) = (rows, cols);
    // Columns of A and of V, each contiguous.
    let mut w: Vec<Vec<f64>> = (0..n).map(|j| (0..m).map(|i| a[i * n + j]).collect()).collect();
    let mut v: Vec<Vec<f64>> = (0..n).map(|j| (0..n).map(|i| f64::from(u8::from(i == j))).collect()).collect();
    for _sweep in 0..60 {
        let mut rotated = false;
        // Each column's squared norm, exact at the start of a sweep and then updated by
        // each rotation (`α − tγ`, `β + tγ`): one dot product per pair instead of three.
        let mut norms: Vec<f64> = w.iter().map(|c| dot4(c, c)).collect();
        for p in 0..n {
            for q in p + 1..n {
                let (alpha, beta, gamma) = (norms[p], norms[q], dot4(&w[p], &w[q]));
                if gamma == 0.0 || gamma.abs() <= 1e-15 * (alpha * beta).sqrt() {
                    continue;
                }
                rotated = true;
                let zeta = (beta - alpha) / (2.0 * gamma);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let t = if zeta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                norms[p] = alpha - t * gamma;
                norms[q] = beta + t * gamma;
                for cols in [&mut w, &mut v] {
                    let (lo, hi) = cols.split_at_mut(q);
                    for (x, y) in lo[p].iter_mut().zip(hi[0].iter_mut()) {
                        let (xp, yq) = (*x, *y);
                        *x = c * xp - s * yq;
                        *y = s * xp + c * yq;
                    }
                }
            }
        }
        if !rotated {
            break;
        }
    }
    let norms: Vec<f64> = w.iter().map(|c| dot4(c, c).sqrt()).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&x, &y| norms[y].total_cmp(&norms[x]).then(x.cmp(&y)));
    let s: Vec<f64> = order.iter().map(|&j| norms[j]).collect();
    let tiny = s.first().copied().unwrap_or(0.0) * f64::EPSILON * m.max(n) as f64;
    // U's columns: the normalised columns of rank, then a completion.
    let mut ucols: Vec<Vec<f64>> = Vec::new();
    for &j in &order {
        if norms[j] > tiny && norms[j] > 0.0 {
            ucols.push(w[j].iter().map(|x| x / norms[j]).collect());
        } else {
            break;
        }
    }
    complete_basis(&mut ucols, m, u_cols);
    let mut vcols: Vec<Vec<f64>> = order.iter().map(|&j| v[j].clone()).collect();
    complete_basis(&mut vcols, n, v_cols);
    let row_major = |c: &[Vec<f64>], len: usize, k: usize| {
        let mut out = vec![0.0; len * k];
        for (j, col) in c.iter().take(k).enumerate() {
            for i in 0..len {
                out[i * k + j] = col[i];
            }
        }
        out
    };
    Svd { s, u: row_major(&ucols, m, u_cols), v: row_major(&vcols, n, v_cols) }
}

/// `Σ xᵢyᵢ` in four interleaved partial sums (vectorised; added pairwise at the end).
fn dot4(x: &[f64], y: &[f64]) -> f64 {
    let split = x.len().min(y.len()) / 4 * 4;
    let mut acc = [0.0f64; 4];
    for (a, b) in x[..split].chunks_exact(4).zip(y[..split].chunks_exact(4)) {
        for k in 0..4 {
            acc[k] += a[k] * b[k];
        }
    }
    let tail: f64 = x[split..].iter().zip(&y[split..]).map(|(a, b)| a * b).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// Extends orthonormal `cols` (vectors of length `len`) to `want` of them by Gram–Schmidt
/// (twice) over the unit vectors.
fn complete_basis(cols: &mut Vec<Vec<f64>>, len: usize, want: usize) {
    let mut e = 0;
    while cols.len() < want && e < len {
        let mut x: Vec<f64> = (0..len).map(|i| f64::from(u8::from(i == e))).collect();
        e += 1;
        for _ in 0..2 {
            for c in cols.iter() {
                let d: f64 = c.iter().zip(&x).map(|(a, b)| a * b).sum();
                x.iter_mut().zip(c).for_each(|(xi, ci)| *xi -= d * ci);
            }
        }
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm > 1e-8 {
            cols.push(x.into_iter().map(|v| v / norm).collect());
        }
    }
}

/// `TridiagonalSolve`: `diagonals` `[..., 3, M]` (superdiagonal, its last entry ignored; diagonal;
/// subdiagonal, its first ignored) and `rhs` `[..., M, K]`, batch dimensions equal. With
/// `partial_pivoting`, Gaussian elimination with row interchanges (LAPACK's `gtsv`), a zero pivot
/// failing as TensorFlow's ("not invertible"); without, the Thomas algorithm, whose zero pivot
/// gives NaNs, as TensorFlow's does. In float64, rounded once.
fn tridiagonal_solve(diags: &Tensor, rhs: &Tensor, pivoting: bool) -> KResult<Outputs> {
    let d = Batch::new(diags, "diagonals")?;
    let r = Batch::new(rhs, "rhs")?;
    if d.rows != 3 {
        return Err(KernelError::invalid(format!("diagonals must have shape [..., 3, M], got {:?}", diags.shape)));
    }
    let (n, k) = (d.cols, r.cols);
    if r.rows != n || d.lead != r.lead || d.dtype != r.dtype {
        return Err(KernelError::invalid(format!(
            "diagonals {:?} and rhs {:?} do not match: rhs must be [..., M, K] with the diagonals' batch and M",
            diags.shape, rhs.shape
        )));
    }
    let mut out = Vec::with_capacity(r.data.len());
    for (g, b) in d.matrices().zip(r.matrices()) {
        let (sup, dia, sub) = (&g[..n], &g[n..2 * n], &g[2 * n..]);
        let mut x = b.to_vec();
        if pivoting {
            if !gtsv(sup, dia, sub, &mut x, n, k) {
                return Err(KernelError::invalid("The matrix is not invertible."));
            }
        } else {
            thomas(sup, dia, sub, &mut x, n, k);
        }
        out.extend(x);
    }
    single(r.output(rhs.shape.clone(), out))
}

/// `TridiagonalMatMul` (`tridiagonal_matmul_op.cc`): `superdiag`, `maindiag` and `subdiag`
/// `[..., 1, M]` (the superdiagonal's last entry and the subdiagonal's first ignored) times `rhs`
/// `[..., M, N]`, all with the same batch dimensions (TensorFlow's kernel does not broadcast).
/// Row `i` is `(d[i]·x[i] + l[i]·x[i−1]) + u[i]·x[i+1]`, summed in that order in the element
/// type as Eigen does (each float64 operation rounded to float32 for float32, which is exactly
/// float32 arithmetic), so the results are TensorFlow's bit for bit.
fn tridiagonal_matmul(sup: &Tensor, dia: &Tensor, sub: &Tensor, rhs: &Tensor) -> KResult<Outputs> {
    let r = Batch::new(rhs, "rhs")?;
    let diags = [
        (sup, "superdiag", "Invalid superdiagonal shape."),
        (dia, "maindiag", "Invalid main diagonal shape."),
        (sub, "subdiag", "Invalid subdiagonal shape."),
    ];
    let mut ds = Vec::with_capacity(3);
    for (t, what, invalid) in diags {
        let d = Batch::new(t, what)?;
        if d.dtype != r.dtype {
            return Err(KernelError::invalid(format!("{what} is {} but rhs is {}", d.dtype, r.dtype)));
        }
        if d.lead != r.lead {
            return Err(KernelError::invalid(format!(
                "All input tensors must have the same outer dimensions: {what} {:?} vs. rhs {:?}",
                t.shape, rhs.shape
            )));
        }
        if d.rows != 1 || d.cols != r.rows {
            return Err(KernelError::invalid(format!(
                "{invalid} ({what} must be [..., 1, M] with the rhs's M = {}, got {:?})",
                r.rows, t.shape
            )));
        }
        ds.push(d);
    }
    let (m, n) = (r.rows, r.cols);
    let round: fn(f64) -> f64 = if r.dtype == DType::Float32 { |x| f64::from(x as f32) } else { |x| x };
    let mut out = Vec::with_capacity(r.data.len());
    for (b, x) in r.matrices().enumerate() {
        let (u, d, l) = (ds[0].matrix(b), ds[1].matrix(b), ds[2].matrix(b));
        for i in 0..m {
            for j in 0..n {
                let mut y = round(d[i] * x[i * n + j]);
                if i > 0 {
                    y = round(y + round(l[i] * x[(i - 1) * n + j]));
                }
                if i + 1 < m {
                    y = round(y + round(u[i] * x[(i + 1) * n + j]));
                }
                out.push(y);
            }
        }
    }
    single(r.output(rhs.shape.clone(), out))
}

/// `BandedTriangularSolve` (`banded_triangular_solve_op.cc`): `matrix` `[..., K, M]` holds the
/// `K` bands of an `M × M` triangular matrix `A` in TensorFlow's `LEFT_RIGHT` band storage — for
/// `lower`, row `d` is the `d`-th subdiagonal aligned right (`band[d][i] = A[i][i−d]`, the
/// diagonal on top, the first `d` entries padding); otherwise row `K−1−d` is the `d`-th
/// superdiagonal aligned left (`band[K−1−d][i] = A[i][i+d]`, the diagonal at the bottom, the last
/// `d` entries padding). Solves `op(A)·X = rhs` (`op` the transpose with `adjoint`; real types
/// only) for `rhs` `[..., M, K']`, the batch dimensions broadcast. TensorFlow's checks and
/// words; as its kernel, only the first matrix of the batch is checked for a zero on the diagonal
/// ("not invertible"), a zero elsewhere giving infinities and NaNs. In float64, rounded once.
fn banded_triangular_solve(matrix: &Tensor, rhs: &Tensor, lower: bool, adjoint: bool) -> KResult<Outputs> {
    for (i, t) in [matrix, rhs].into_iter().enumerate() {
        if t.rank() < 2 {
            return Err(KernelError::invalid(format!(
                "In[{i}] ndims must be >= 2: {} (shape {:?})",
                t.rank(),
                t.shape
            )));
        }
        if t.shape.contains(&0) {
            return Err(KernelError::invalid(format!("In[{i}] must not be an empty tensor: shape {:?}", t.shape)));
        }
    }
    let m = Batch::new(matrix, "matrix")?;
    let b = Batch::new(rhs, "rhs")?;
    if m.dtype != b.dtype {
        return Err(KernelError::invalid(format!("matrix is {} but rhs is {}", m.dtype, b.dtype)));
    }
    let lead = broadcast_shape(&m.lead, &b.lead).map_err(|_| {
        KernelError::invalid(format!(
            "In[0] and In[1] must have compatible batch dimensions: {:?} vs. {:?}",
            matrix.shape, rhs.shape
        ))
    })?;
    let (bands, n, k) = (m.rows, m.cols, b.cols);
    if b.rows != n {
        return Err(KernelError::invalid(format!(
            "In[0] mismatch In[1] shape: {n} vs. {}: {:?} {:?} (the bands' M and the rhs's rows differ)",
            b.rows, matrix.shape, rhs.shape
        )));
    }
    let mut shape = lead.clone();
    shape.extend([n, k]);
    budget(m.dtype, &shape)?;
    // The diagonal: the top band when lower, the bottom one otherwise.
    let diag = if lower { 0 } else { bands - 1 };
    if m.matrix(0)[diag * n..(diag + 1) * n].contains(&0.0) {
        return Err(KernelError::invalid("Input matrix is not invertible."));
    }
    let count: usize = lead.iter().product();
    let (sm, sb) =
        (super::elementwise::bcast_strides(&m.lead, &lead), super::elementwise::bcast_strides(&b.lead, &lead));
    let solutions = per_matrix(count, bands * n * k, |at| {
        let (mut im, mut ib, mut rest) = (0, 0, at);
        for d in (0..lead.len()).rev() {
            let i = rest % lead[d];
            rest /= lead[d];
            im += i * sm[d];
            ib += i * sb[d];
        }
        let band = m.matrix(im);
        let mut x = b.matrix(ib).to_vec();
        // A[i][j] for |i − j| < K on the stored side.
        let a = |i: usize, j: usize| {
            if lower {
                band[(i - j) * n + i]
            } else {
                band[(bands - 1 - (j - i)) * n + i]
            }
        };
        // op(A)[i][j], and whether op(A) is lower triangular (forward substitution).
        let op = |i: usize, j: usize| if adjoint { a(j, i) } else { a(i, j) };
        let forward = lower != adjoint;
        for step in 0..n {
            let i = if forward { step } else { n - 1 - step };
            let known = if forward { i.saturating_sub(bands - 1)..i } else { i + 1..n.min(i + bands) };
            for j in known {
                let f = op(i, j);
                for c in 0..k {
                    x[i * k + c] -= f * x[j * k + c];
                }
            }
            let d = op(i, i);
            for c in 0..k {
                x[i * k + c] /= d;
            }
        }
        Ok(x)
    })?;
    single(m.output(shape, solutions.concat()))
}

/// Solves in place (`b`: `n × k`, row-major); false on a zero pivot.
fn gtsv(sup: &[f64], dia: &[f64], sub: &[f64], b: &mut [f64], n: usize, k: usize) -> bool {
    if n == 0 {
        return true;
    }
    // dl[i] = A[i+1][i], du[i] = A[i][i+1]; after elimination dl holds the second superdiagonal.
    let mut d = dia.to_vec();
    let mut du: Vec<f64> = sup[..n - 1].to_vec();
    let mut dl: Vec<f64> = sub[1..].to_vec();
    for i in 0..n - 1 {
        if d[i].abs() >= dl[i].abs() {
            if d[i] == 0.0 {
                return false;
            }
            let fact = dl[i] / d[i];
            d[i + 1] -= fact * du[i];
            for j in 0..k {
                b[(i + 1) * k + j] -= fact * b[i * k + j];
            }
            dl[i] = 0.0;
        } else {
            let fact = d[i] / dl[i];
            d[i] = dl[i];
            let temp = d[i + 1];
            d[i + 1] = du[i] - fact * temp;
            if i + 2 < n {
                dl[i] = du[i + 1];
                du[i + 1] = -fact * dl[i];
            } else {
                dl[i] = 0.0;
            }
            du[i] = temp;
            for j in 0..k {
                let t = b[i * k + j];
                b[i * k + j] = b[(i + 1) * k + j];
                b[(i + 1) * k + j] = t - fact * b[(i + 1) * k + j];
            }
        }
    }
    if d[n - 1] == 0.0 {
        return false;
    }
    for j in 0..k {
        b[(n - 1) * k + j] /= d[n - 1];
        if n > 1 {
            b[(n - 2) * k + j] = (b[(n - 2) * k + j] - du[n - 2] * b[(n - 1) * k + j]) / d[n - 2];
        }
        for i in (0..n.saturating_sub(2)).rev() {
            b[i * k + j] = (b[i * k + j] - du[i] * b[(i + 1) * k + j] - dl[i] * b[(i + 2) * k + j]) / d[i];
        }
    }
    true
}

/// The Thomas algorithm in place; a zero pivot propagates as NaN/∞.
fn thomas(sup: &[f64], dia: &[f64], sub: &[f64], b: &mut [f64], n: usize, k: usize) {
    let mut c = vec![0.0; n];
    for i in 0..n {
        let denom = if i == 0 { dia[0] } else { dia[i] - sub[i] * c[i - 1] };
        c[i] = if i + 1 < n { sup[i] / denom } else { 0.0 };
        for j in 0..k {
            let prev = if i == 0 { 0.0 } else { sub[i] * b[(i - 1) * k + j] };
            b[i * k + j] = (b[i * k + j] - prev) / denom;
        }
    }
    for i in (0..n.saturating_sub(1)).rev() {
        for j in 0..k {
            b[i * k + j] -= c[i] * b[(i + 1) * k + j];
        }
    }
}

/// The principal square root of an `n × n` matrix (`tf.linalg.sqrtm`; TensorFlow runs Eigen's
/// Schur-based `sqrt()`): a symmetric matrix as `V·√Λ·Vᵀ` from its eigendecomposition (NaN
/// where an eigenvalue is negative: no real root), any other by the Denman–Beavers iteration
/// `Y ← (Y + Z⁻¹)/2, Z ← (Z + Y⁻¹)/2` from `Y = A, Z = I`, which converges to it when no
/// eigenvalue lies on the closed negative real axis (NaNs when an iterate turns singular).
fn square_root(a: &[f64], n: usize) -> Vec<f64> {
    let symmetric = (0..n).all(|i| (0..i).all(|j| a[i * n + j] == a[j * n + i]));
    if symmetric {
        if let Some((values, v)) = super::eigh::solve::<f64>(a, n, true) {
            let roots: Vec<f64> = values.iter().map(|&l| if l == 0.0 { 0.0 } else { l.sqrt() }).collect();
            let mut out = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    out[i * n + j] = (0..n).map(|k| v[i * n + k] * roots[k] * v[j * n + k]).sum();
                }
            }
            return out;
        }
    }
    let (mut y, mut z) = (a.to_vec(), identity(n));
    for _ in 0..100 {
        let (ly, lz) = (Lu::new(y.clone(), n), Lu::new(z.clone(), n));
        if ly.singular() || lz.singular() {
            return vec![f64::NAN; n * n];
        }
        let (yi, zi) = (ly.solve(&identity(n), n), lz.solve(&identity(n), n));
        let next: Vec<f64> = y.iter().zip(&zi).map(|(p, q)| (p + q) / 2.0).collect();
        z = z.iter().zip(&yi).map(|(p, q)| (p + q) / 2.0).collect();
        let change: f64 = next.iter().zip(&y).map(|(p, q)| (p - q) * (p - q)).sum::<f64>().sqrt();
        let size: f64 = next.iter().map(|p| p * p).sum::<f64>().sqrt();
        y = next;
        if change <= 1e-15 * size {
            break;
        }
    }
    y
}

fn single(t: Tensor) -> KResult<Outputs> {
    super::one(t)
}

/// The least multiply-adds worth sharing a batch between the cores.
const SHARE_WORK: usize = 1 << 16;

/// `f(i)` for each matrix `i < count` of a batch, in order: split over the cores
/// (`autoclust_numeric::team`, the pool the interpreter or the compiled step runs on) when
/// there are several matrices and `count · cost` multiply-adds make it worth it. The first
/// error in batch order is the answer, as a loop over the batch would give.
fn per_matrix<R: Send>(count: usize, cost: usize, f: impl Fn(usize) -> KResult<R> + Sync) -> KResult<Vec<R>> {
    let parts = autoclust_numeric::team::cores().min(count);
    if parts < 2 || count.saturating_mul(cost) < SHARE_WORK {
        return (0..count).map(f).collect();
    }
    let slots: Vec<parking_lot::Mutex<Option<KResult<R>>>> =
        (0..count).map(|_| parking_lot::Mutex::new(None)).collect();
    autoclust_numeric::team::run(parts, &|p| {
        for i in (p..count).step_by(parts) {
            *slots[i].lock() = Some(f(i));
        }
    });
    slots
        .into_iter()
        .map(|s| s.into_inner().unwrap_or_else(|| Err(KernelError::invalid("internal error: a matrix was skipped"))))
        .collect()
}

/// A float tensor read as a batch of `rows × cols` matrices, in float64.
struct Batch {
    dtype: DType,
    lead: Vec<usize>,
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Batch {
    fn new(t: &Tensor, what: &str) -> KResult<Batch> {
        if !matches!(t.dtype, DType::Float32 | DType::Float64) {
            return Err(KernelError::DType(t.dtype));
        }
        let r = t.rank();
        if r < 2 {
            return Err(KernelError::invalid(format!("{what} must have rank >= 2, got shape {:?}", t.shape)));
        }
        let data = t.to_f64_vec().ok_or(KernelError::DType(t.dtype))?;
        Ok(Batch { dtype: t.dtype, lead: t.shape[..r - 2].to_vec(), rows: t.shape[r - 2], cols: t.shape[r - 1], data })
    }

    fn square(t: &Tensor, what: &str) -> KResult<Batch> {
        let b = Batch::new(t, what)?;
        if b.rows != b.cols {
            return Err(KernelError::invalid(format!("{what} must be a square matrix, got shape {:?}", t.shape)));
        }
        Ok(b)
    }

    fn size(&self) -> usize {
        self.rows * self.cols
    }

    /// That `rhs` (the tensor `r`) goes with this matrix batch (the tensor `a`): the same
    /// batch dimensions, rows and dtype, as `MatrixSolve` and `MatrixSolveLs` require.
    fn check_rhs(&self, rhs: &Batch, a: &Tensor, r: &Tensor) -> KResult<()> {
        if self.lead != rhs.lead || self.rows != rhs.rows || self.dtype != rhs.dtype {
            return Err(KernelError::invalid(format!(
                "the matrix {:?} and the right-hand side {:?} do not agree (the batch dimensions and rows \
                 must be equal)",
                a.shape, r.shape
            )));
        }
        Ok(())
    }

    /// The number of matrices.
    fn count(&self) -> usize {
        self.lead.iter().product()
    }

    /// Matrix `i` of the batch.
    fn matrix(&self, i: usize) -> &[f64] {
        let size = self.size();
        &self.data[i * size..(i + 1) * size]
    }

    fn matrices(&self) -> impl Iterator<Item = &[f64]> {
        // `chunks_exact(0)` panics; a batch of empty matrices yields as many empty slices.
        let size = self.size();
        let count = self.lead.iter().product::<usize>();
        (0..count).map(move |i| &self.data[i * size..(i + 1) * size])
    }

    /// Rounds `v` back to the batch's dtype.
    fn output(&self, shape: Vec<usize>, v: Vec<f64>) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), v.len());
        match self.dtype {
            DType::Float32 => tensor_of(shape, v.into_iter().map(|x| x as f32).collect()),
            _ => tensor_of(shape, v),
        }
    }
}

/// Householder QR of the `rows × cols` matrix `a` (row-major), as Eigen's `HouseholderQR`
/// (TensorFlow's `Qr` kernel) computes it: column `k`'s reflector maps `x = a[k.., k]` to
/// `β e₁` with `β = −sign(x₀)‖x‖` — no reflection when `x` has nothing below `x₀` (`β = x₀`),
/// so the signs of `R`'s diagonal are Eigen's. Returns `Q`'s first `q_cols` columns
/// (`rows × q_cols`) and `R`'s first `r_rows` rows (`r_rows × cols`, zero below the diagonal).
fn householder_qr(a: &[f64], rows: usize, cols: usize, q_cols: usize, r_rows: usize) -> (Vec<f64>, Vec<f64>) {
    let mut r = a.to_vec();
    let p = rows.min(cols);
    // Each reflector `H = I − τ v vᵀ`, `v = [1, essential…]` over rows k.., by column k.
    let mut reflectors: Vec<(f64, Vec<f64>)> = Vec::with_capacity(p);
    for k in 0..p {
        let c0 = r[k * cols + k];
        let tail: f64 = (k + 1..rows).map(|i| r[i * cols + k] * r[i * cols + k]).sum();
        let (tau, v) = if tail <= f64::MIN_POSITIVE {
            (0.0, vec![0.0; rows - k - 1])
        } else {
            let mut beta = (c0 * c0 + tail).sqrt();
            if c0 >= 0.0 {
                beta = -beta;
            }
            let v: Vec<f64> = (k + 1..rows).map(|i| r[i * cols + k] / (c0 - beta)).collect();
            r[k * cols + k] = beta;
            for i in k + 1..rows {
                r[i * cols + k] = 0.0;
            }
            ((beta - c0) / beta, v)
        };
        if tau != 0.0 {
            // The columns right of k: x ← x − τ v (vᵀ x).
            for j in k + 1..cols {
                let dot =
                    r[k * cols + j] + v.iter().enumerate().map(|(i, vi)| vi * r[(k + 1 + i) * cols + j]).sum::<f64>();
                let t = tau * dot;
                r[k * cols + j] -= t;
                for (i, vi) in v.iter().enumerate() {
                    r[(k + 1 + i) * cols + j] -= t * vi;
                }
            }
        }
        reflectors.push((tau, v));
    }
    // Q = H₀ H₁ … H_{p−1} applied to the first `q_cols` columns of the identity, last first.
    let mut q = vec![0.0; rows * q_cols];
    for i in 0..q_cols.min(rows) {
        q[i * q_cols + i] = 1.0;
    }
    for (k, (tau, v)) in reflectors.iter().enumerate().rev() {
        if *tau == 0.0 {
            continue;
        }
        for j in 0..q_cols {
            let dot =
                q[k * q_cols + j] + v.iter().enumerate().map(|(i, vi)| vi * q[(k + 1 + i) * q_cols + j]).sum::<f64>();
            let t = tau * dot;
            q[k * q_cols + j] -= t;
            for (i, vi) in v.iter().enumerate() {
                q[(k + 1 + i) * q_cols + j] -= t * vi;
            }
        }
    }
    let mut rr = vec![0.0; r_rows * cols];
    for i in 0..r_rows.min(rows) {
        for j in i..cols {
            rr[i * cols + j] = r[i * cols + j];
        }
    }
    (q, rr)
}

fn transpose(a: &[f64], n: usize) -> Vec<f64> {
    let mut t = vec![0.0; a.len()];
    for i in 0..n {
        for j in 0..n {
            t[j * n + i] = a[i * n + j];
        }
    }
    t
}

fn identity(n: usize) -> Vec<f64> {
    let mut e = vec![0.0; n * n];
    for i in 0..n {
        e[i * n + i] = 1.0;
    }
    e
}

/// `P·A = L·U` with partial pivoting (the largest magnitude in the column, the first on
/// ties, as Eigen's `PartialPivLU`), stored compactly: `U` on and above the diagonal, `L`'s
/// multipliers below it.
struct Lu {
    n: usize,
    lu: Vec<f64>,
    /// Row `i` of `P·A` is row `perm[i]` of `A`.
    perm: Vec<usize>,
    swaps: usize,
}

impl Lu {
    fn new(mut a: Vec<f64>, n: usize) -> Lu {
        let mut perm: Vec<usize> = (0..n).collect();
        let mut swaps = 0;
        for k in 0..n {
            let mut p = k;
            for i in k + 1..n {
                if a[i * n + k].abs() > a[p * n + k].abs() {
                    p = i;
                }
            }
            if p != k {
                for j in 0..n {
                    a.swap(k * n + j, p * n + j);
                }
                perm.swap(k, p);
                swaps += 1;
            }
            let pivot = a[k * n + k];
            if pivot == 0.0 {
                continue;
            }
            for i in k + 1..n {
                let f = a[i * n + k] / pivot;
                a[i * n + k] = f;
                for j in k + 1..n {
                    a[i * n + j] -= f * a[k * n + j];
                }
            }
        }
        Lu { n, lu: a, perm, swaps }
    }

    fn singular(&self) -> bool {
        (0..self.n).any(|i| self.lu[i * self.n + i] == 0.0)
    }

    /// `A⁻¹·B` for `B` of `n × k`.
    fn solve(&self, b: &[f64], k: usize) -> Vec<f64> {
        let n = self.n;
        let mut x = vec![0.0; n * k];
        for i in 0..n {
            x[i * k..(i + 1) * k].copy_from_slice(&b[self.perm[i] * k..(self.perm[i] + 1) * k]);
        }
        for i in 0..n {
            for j in 0..i {
                let l = self.lu[i * n + j];
                for c in 0..k {
                    x[i * k + c] -= l * x[j * k + c];
                }
            }
        }
        for i in (0..n).rev() {
            for j in i + 1..n {
                let u = self.lu[i * n + j];
                for c in 0..k {
                    x[i * k + c] -= u * x[j * k + c];
                }
            }
            let d = self.lu[i * n + i];
            for c in 0..k {
                x[i * k + c] /= d;
            }
        }
        x
    }

    /// `(sign, log|det|)`: a signed zero and `-inf` for a singular matrix (the sign is the
    /// product of the permutation's and the pivots' signs, a zero pivot counting 0, as
    /// TensorFlow's), `(1, 0)` for an empty one.
    fn log_determinant(&self) -> (f64, f64) {
        let n = self.n;
        let mut sign = if self.swaps.is_multiple_of(2) { 1.0 } else { -1.0 };
        let mut log = 0.0;
        for i in 0..n {
            let d = self.lu[i * n + i];
            if d == 0.0 {
                sign *= 0.0;
            } else if d < 0.0 {
                sign = -sign;
            }
            log += d.abs().ln();
        }
        (sign, log)
    }
}

/// What TensorFlow (2.21) answers for a matrix that is not positive definite: no error,
/// the lower triangle NaN (it logs a warning), zeros above it.
/// `MatrixSolveLs` with `fast`: the normal equations by Cholesky, as TensorFlow solves them —
/// `(AᵀA + λI) X = Aᵀ B` when `A` (`rows × cols`) is at least as tall as wide, else the
/// minimum-norm `X = Aᵀ (AAᵀ + λI)⁻¹ B`; `None` when the Gram matrix is not positive definite.
fn least_squares_normal(a: &[f64], rows: usize, cols: usize, b: &[f64], k: usize, l2: f64) -> Option<Vec<f64>> {
    let tall = rows >= cols;
    let n = if tall { cols } else { rows };
    // The Gram matrix AᵀA (cols × cols) or AAᵀ (rows × rows), regularised.
    let mut g = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let v: f64 = if tall {
                (0..rows).map(|r| a[r * cols + i] * a[r * cols + j]).sum()
            } else {
                (0..cols).map(|c| a[i * cols + c] * a[j * cols + c]).sum()
            };
            g[i * n + j] = v + if i == j && l2 > 0.0 { l2 } else { 0.0 };
        }
    }
    let l = cholesky(&g, n)?;
    // Solves L Lᵀ y = z column by column, in place.
    let chol_solve = |z: &mut [f64]| {
        for c in 0..k {
            for i in 0..n {
                let s: f64 = (0..i).map(|p| l[i * n + p] * z[p * k + c]).sum();
                z[i * k + c] = (z[i * k + c] - s) / l[i * n + i];
            }
            for i in (0..n).rev() {
                let s: f64 = (i + 1..n).map(|p| l[p * n + i] * z[p * k + c]).sum();
                z[i * k + c] = (z[i * k + c] - s) / l[i * n + i];
            }
        }
    };
    if tall {
        // Aᵀ B (cols × k), then the solve.
        let mut z: Vec<f64> =
            (0..cols * k).map(|e| (0..rows).map(|r| a[r * cols + e / k] * b[r * k + e % k]).sum()).collect();
        chol_solve(&mut z);
        Some(z)
    } else {
        let mut y = b.to_vec();
        chol_solve(&mut y);
        Some((0..cols * k).map(|e| (0..rows).map(|r| a[r * cols + e / k] * y[r * k + e % k]).sum()).collect())
    }
}

/// `MatrixSolveLs` without `fast`: the minimum-norm least-squares solution `X = A⁺ B` (what
/// Eigen's complete orthogonal decomposition gives TensorFlow), through the SVD with singular
/// values below `max(rows, cols) · eps · σ_max` treated as zero.
fn least_squares_min_norm(a: &[f64], rows: usize, cols: usize, b: &[f64], k: usize, eps: f64) -> Vec<f64> {
    let p = rows.min(cols);
    let d = svd(a, rows, cols, p, p);
    let top = d.s.iter().cloned().fold(0.0, f64::max);
    let cut = rows.max(cols) as f64 * eps * top;
    let mut x = vec![0.0; cols * k];
    for (j, &s) in d.s.iter().enumerate() {
        if s <= cut || s == 0.0 {
            continue;
        }
        for c in 0..k {
            // (u_jᵀ b_c) / s_j · v_j.
            let w: f64 = (0..rows).map(|r| d.u[r * p + j] * b[r * k + c]).sum::<f64>() / s;
            for i in 0..cols {
                x[i * k + c] += d.v[i * p + j] * w;
            }
        }
    }
    x
}

fn failed_cholesky(n: usize) -> Vec<f64> {
    (0..n * n).map(|i| if i % n <= i / n { f64::NAN } else { 0.0 }).collect()
}

/// The lower Cholesky factor of the symmetric matrix whose lower triangle `a` holds (the
/// upper triangle is not read, as TensorFlow's), or `None` when it is not positive definite.
fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            if i == j {
                if s <= 0.0 || s.is_nan() {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// `MatrixTriangularSolve`: `X` with `op(A)·X = B`, `A` read from its lower (or upper)
/// triangle, `op` the transpose when `adjoint`; batch dimensions broadcast.
fn triangular_solve(matrix: &Tensor, rhs: &Tensor, lower: bool, adjoint: bool) -> KResult<Outputs> {
    let m = Batch::square(matrix, "matrix")?;
    let b = Batch::new(rhs, "rhs")?;
    if m.dtype != b.dtype {
        return Err(KernelError::invalid(format!("matrix is {} but rhs is {}", m.dtype, b.dtype)));
    }
    if m.rows != b.rows {
        return Err(KernelError::invalid(format!(
            "the matrix {:?} and the right-hand side {:?} have different numbers of rows",
            matrix.shape, rhs.shape
        )));
    }
    let lead = broadcast_shape(&m.lead, &b.lead)?;
    let (n, k) = (m.rows, b.cols);
    let mut shape = lead.clone();
    shape.extend([n, k]);
    budget(m.dtype, &shape)?;
    let count: usize = lead.iter().product();
    let (sm, sb) =
        (super::elementwise::bcast_strides(&m.lead, &lead), super::elementwise::bcast_strides(&b.lead, &lead));
    let solutions = per_matrix(count, n * n * k, |at| {
        // Batch element `at`'s index, and the matrix and right-hand side it broadcasts from.
        let (mut im, mut ib, mut rest) = (0, 0, at);
        for d in (0..lead.len()).rev() {
            let i = rest % lead[d];
            rest /= lead[d];
            im += i * sm[d];
            ib += i * sb[d];
        }
        let a = &m.data[im * n * n..(im + 1) * n * n];
        let mut x = b.data[ib * n * k..(ib + 1) * n * k].to_vec();
        // op(A)[i][j]: A's lower triangle transposed is an upper-triangular system.
        let at = |i: usize, j: usize| if adjoint { a[j * n + i] } else { a[i * n + j] };
        let forward = lower != adjoint;
        for step in 0..n {
            let i = if forward { step } else { n - 1 - step };
            let known = if forward { 0..i } else { i + 1..n };
            for j in known {
                let f = at(i, j);
                for c in 0..k {
                    x[i * k + c] -= f * x[j * k + c];
                }
            }
            let d = at(i, i);
            for c in 0..k {
                x[i * k + c] /= d;
            }
        }
        Ok(x)
    })?;
    let out = solutions.concat();
    single(m.output(shape, out))
}

#[cfg(test)]
#[allow(clippy::excessive_precision, clippy::approx_constant)] // TensorFlow's printed values
mod tests {
    use super::*;

    /// TensorFlow 2.21's `tf.linalg.cross`: floats, wrapping int32 and uint8 (through the
    /// int64 kernel, `widen.rs`), and its three errors.
    #[test]
    fn cross_matches_tensorflow() {
        let run = |a: Tensor, b: Tensor| {
            let node =
                crate::kernels::tests_support::node("Cross", &[("T", autoclust_graph::AttrValue::Type(a.dtype))]);
            crate::kernels::compute(&node, &[a, b])
        };
        let a = Tensor::from_f32(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]).unwrap();
        let b = Tensor::from_f32(vec![2, 3], vec![7., 8., 9., 1., 0., -1.]).unwrap();
        assert_eq!(run(a.clone(), b).unwrap()[0].as_f32().unwrap(), &[-6., 12., -6., -5., 10., -5.]);
        let i = |v: Vec<i32>| Tensor::from_i32(vec![3], v).unwrap();
        let o = run(i(vec![1 << 30, 3, 5]), i(vec![7, 1 << 30, 11])).unwrap();
        assert_eq!(o[0].as_i32().unwrap(), &[-1073741791, 1073741859, -21]);
        let u8s = |v: Vec<u8>| Tensor {
            dtype: DType::UInt8,
            shape: vec![3],
            data: autoclust_graph::TensorData::Raw(std::sync::Arc::new(v)),
        };
        let o = run(u8s(vec![200, 3, 5]), u8s(vec![7, 100, 11])).unwrap();
        assert_eq!(o[0].to_le_bytes().unwrap(), vec![45, 139, 11]);
        let err = |a: Tensor, b: Tensor| run(a, b).unwrap_err().to_string();
        let ones = |s: Vec<usize>| Tensor::from_f32(s.clone(), vec![1.0; s.iter().product()]).unwrap();
        assert!(err(ones(vec![2, 3]), ones(vec![3, 3])).contains("Both inputs must be of same shape: [2,3] vs. [3,3]"));
        assert!(
            err(ones(vec![2, 4]), ones(vec![2, 4])).contains("Cross-products are only defined for 3-element vectors.")
        );
        assert!(err(Tensor::scalar_f32(1.), Tensor::scalar_f32(2.)).contains("Input must be at least 1D[]"));
    }

    /// `A = U·diag(s)·Vᵀ` with orthonormal columns, singular values decreasing; TensorFlow's
    /// singular values (float64) for a 2 × 3 matrix.
    #[test]
    fn svd_reconstructs_and_matches_tensorflows_singular_values() {
        let a = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        let f = svd(&a, 2, 3, 2, 2);
        let want = [7.348_469_228_349_534, 1.000_000_000_000_000_2];
        assert!(f.s.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-12), "{:?}", f.s);
        for (rows, cols, m) in
            [(2, 3, a.to_vec()), (3, 2, a.to_vec()), (4, 3, (0..12).map(|x| f64::from(x * x % 7)).collect())]
        {
            for full in [false, true] {
                let p = rows.min(cols);
                let (uc, vc) = if full { (rows, cols) } else { (p, p) };
                let f = svd(&m, rows, cols, uc, vc);
                assert!(f.s.windows(2).all(|w| w[0] >= w[1]));
                for i in 0..rows {
                    for j in 0..cols {
                        let x: f64 = (0..p).map(|k| f.u[i * uc + k] * f.s[k] * f.v[j * vc + k]).sum();
                        assert!((x - m[i * cols + j]).abs() < 1e-12, "{rows}x{cols} full={full}: A[{i}][{j}]");
                    }
                }
                for (q, n, c) in [(&f.u, rows, uc), (&f.v, cols, vc)] {
                    for x in 0..c {
                        for y in 0..c {
                            let d: f64 = (0..n).map(|i| q[i * c + x] * q[i * c + y]).sum();
                            assert!((d - f64::from(u8::from(x == y))).abs() < 1e-12, "not orthonormal");
                        }
                    }
                }
            }
        }
        // Rank 1: the second left vector completes the basis.
        let f = svd(&[1.0, 2.0, 2.0, 4.0], 2, 2, 2, 2);
        assert!(f.s[1].abs() < 1e-12 && (f.s[0] - 5.0).abs() < 1e-12);
        let d = f.u[0] * f.u[1] + f.u[2] * f.u[3];
        assert!(d.abs() < 1e-12);
    }

    /// The principal root of a symmetric positive definite matrix (eigendecomposition) and of
    /// an upper triangular one (Denman–Beavers: [[4, 1], [0, 9]] has root [[2, 0.2], [0, 3]]);
    /// NaN for a symmetric matrix with a negative eigenvalue.
    #[test]
    fn matrix_square_roots() {
        let spd = [4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0];
        let r = square_root(&spd, 3);
        for i in 0..3 {
            for j in 0..3 {
                let x: f64 = (0..3).map(|k| r[i * 3 + k] * r[k * 3 + j]).sum();
                assert!((x - spd[i * 3 + j]).abs() < 1e-12, "({i}, {j}): {x}");
                assert!((r[i * 3 + j] - r[j * 3 + i]).abs() < 1e-12, "the root of a symmetric matrix is symmetric");
            }
        }
        let r = square_root(&[4.0, 1.0, 0.0, 9.0], 2);
        assert!(r.iter().zip([2.0, 0.2, 0.0, 3.0]).all(|(a, b)| (a - b).abs() < 1e-12), "{r:?}");
        assert!(square_root(&[1.0, 0.0, 0.0, -1.0], 2).iter().any(|v| v.is_nan()));
    }

    /// TensorFlow's answers: with pivoting where the first pivot is zero, without pivoting
    /// NaN there, and a diagonally dominant system with two right-hand sides.
    #[test]
    fn tridiagonal_solve_matches_tensorflow() {
        let t = |v: Vec<f64>, shape: Vec<usize>| Tensor::from_f64(shape, v).unwrap();
        let diags = t(vec![1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0], vec![3, 3]);
        let rhs = t(vec![1.0, 2.0, 3.0], vec![3, 1]);
        let x = tridiagonal_solve(&diags, &rhs, true).unwrap();
        assert_eq!(x[0].to_f64_vec().unwrap(), [-1.0, 1.0, 2.0]);
        let x = tridiagonal_solve(&diags, &rhs, false).unwrap();
        assert!(x[0].to_f64_vec().unwrap().iter().all(|v| v.is_nan()));
        let diags = t(vec![2.0, 1.0, 0.0, 1.0, 2.0, 1.0, 0.0, 1.0, 2.0], vec![3, 3]);
        let rhs = t(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], vec![3, 2]);
        let x = tridiagonal_solve(&diags, &rhs, true).unwrap()[0].to_f64_vec().unwrap();
        let want = [-2.0, -2.0, 1.5, 2.0, 2.0, 2.0];
        assert!(x.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{x:?}");
        // Thomas' second pivot is 2 − 1·2 = 0 there: NaN, as TensorFlow's.
        let x = tridiagonal_solve(&diags, &rhs, false).unwrap()[0].to_f64_vec().unwrap();
        assert!(x.iter().all(|v| v.is_nan()), "{x:?}");
        // [[1, 1, 0], [1, 1, 0], [0, 0, 1]]; and TensorFlow's [-1, 2, 1] for an invertible one.
        let singular = t(vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0], vec![3, 3]);
        assert!(tridiagonal_solve(&singular, &rhs, true).is_err());
        let diags = t(vec![1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0], vec![3, 3]);
        let x = tridiagonal_solve(&diags, &t(vec![1.0, 2.0, 3.0], vec![3, 1]), true).unwrap();
        assert_eq!(x[0].to_f64_vec().unwrap(), [-1.0, 2.0, 1.0]);
    }
    use crate::kernels::compute;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::AttrValue;

    /// Float32 results within 2 ulps-ish of TensorFlow's (both round a correct value).
    fn close(got: &Tensor, want: &[f32]) {
        let got = got.as_f32().expect("float32");
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= 3e-7 * w.abs().max(1.0);
            assert!(ok, "{got:?} vs {want:?}");
        }
    }

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32(shape.to_vec(), v.to_vec()).unwrap()
    }

    fn a3() -> Tensor {
        f32s(&[3, 3], &[4., 1., 2., 1., 5., 3., 2., 3., 6.])
    }

    fn with(op: &str, attrs: &[(&str, bool)]) -> Node {
        let attrs: Vec<(&str, AttrValue)> = attrs.iter().map(|&(k, v)| (k, AttrValue::B(v))).collect();
        node(op, &attrs)
    }

    // Every expected value below is TensorFlow 2.21's (tf.linalg on the CPU).

    /// `tf.linalg.qr` of a tall, a wide and a rank-deficient matrix, thin and full: Eigen's
    /// Householder signs (a column with nothing below the diagonal is not reflected).
    #[test]
    fn qr_matches_tensorflow() {
        let qr = |a: &Tensor, full: bool| {
            let f = prepare(&with("Qr", &[("full_matrices", full)])).unwrap().unwrap();
            let o = f(Inputs::from_vec(vec![a.clone()])).unwrap();
            (o[0].clone(), o[1].clone())
        };
        let close6 = |got: &Tensor, want: &[f32]| {
            let got = got.as_f32().unwrap();
            assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() <= 2e-6, "{got:?} vs {want:?}");
            }
        };
        let tall = f32s(&[4, 3], &[2., -1., 0.5, 1., 3., -2., 0., 1., 1., -4., 0.5, 2.]);
        let r_tall = [-4.582576, 0.218218, 1.963961, 0.0, -3.346996, 1.472536, 0.0, 0.0, -1.795688];
        let q_thin = [
            -0.436436, 0.270321, -0.534105, -0.218218, -0.910554, 0.128422, 0.0, -0.298775, -0.801897, 0.872872,
            -0.092478, -0.234947,
        ];
        let (q, r) = qr(&tall, false);
        assert_eq!((q.shape.clone(), r.shape.clone()), (vec![4, 3], vec![3, 3]));
        close6(&q, &q_thin);
        close6(&r, &r_tall);
        let (q, r) = qr(&tall, true);
        assert_eq!((q.shape.clone(), r.shape.clone()), (vec![4, 4], vec![4, 3]));
        close6(
            &q,
            &[
                -0.436436, 0.270321, -0.534105, 0.671701, -0.218218, -0.910554, 0.128422, 0.326774, 0.0, -0.298775,
                -0.801897, -0.517391, 0.872872, -0.092478, -0.234947, 0.417544,
            ],
        );
        close6(&r, &[r_tall.as_slice(), &[0.0; 3]].concat());
        let wide = f32s(&[3, 5], &[1., 2., 3., 4., 5., -1., 0., 1., 0., 2., 3., -2., 0., 1., 1.]);
        let (q, r) = qr(&wide, false);
        assert_eq!((q.shape.clone(), r.shape.clone()), (vec![3, 3], vec![3, 5]));
        close6(&q, &[-0.301511, -0.92387, 0.235702, 0.301511, 0.142134, 0.942809, -0.904534, 0.355334, 0.235702]);
        close6(
            &r,
            &[
                -3.316625, 1.206046, -0.603023, -2.110579, -1.809068, 0.0, -2.558408, -2.629476, -3.340145, -3.979747,
                0.0, 0.0, 1.649916, 1.178512, 3.299832,
            ],
        );
        let (q, r) = qr(&f32s(&[1, 2, 2], &[0., 1., 0., 2.]), false);
        assert_eq!(q.shape, vec![1, 2, 2]);
        close6(&q, &[1.0, 0.0, 0.0, 1.0]);
        close6(&r, &[0.0, 1.0, 0.0, 2.0]);
    }

    /// A batch large enough to be shared between the cores gives, matrix for matrix, the bits
    /// each matrix gives alone; a singular matrix anywhere fails the batch with its error.
    #[test]
    fn batches_shared_between_cores_give_each_matrixs_own_result() {
        let n = 24;
        let count = 6;
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f64 / (1u64 << 31) as f64) - 0.5
        };
        // Diagonally dominant and symmetric: invertible and positive definite.
        let mut a = vec![0.0; count * n * n];
        for m in 0..count {
            for i in 0..n {
                for j in 0..=i {
                    let v = if i == j { n as f64 } else { next() };
                    a[(m * n + i) * n + j] = v;
                    a[(m * n + j) * n + i] = v;
                }
            }
        }
        let rhs: Vec<f64> = (0..count * n * 3).map(|_| next()).collect();
        let batch = Tensor::from_f64(vec![count, n, n], a.clone()).unwrap();
        let rhs_t = Tensor::from_f64(vec![count, n, 3], rhs.clone()).unwrap();
        let one = |m: usize| Tensor::from_f64(vec![n, n], a[m * n * n..(m + 1) * n * n].to_vec()).unwrap();
        let one_rhs = |m: usize| Tensor::from_f64(vec![n, 3], rhs[m * n * 3..(m + 1) * n * 3].to_vec()).unwrap();
        for (op, with_rhs) in
            [("MatrixInverse", false), ("Cholesky", false), ("MatrixDeterminant", false), ("MatrixSolve", true)]
        {
            let k = with(op, &[]);
            let whole = if with_rhs {
                run1(&k, &[batch.clone(), rhs_t.clone()])
            } else {
                run1(&k, std::slice::from_ref(&batch))
            };
            let whole = whole.unwrap();
            let parts: Vec<f64> = (0..count)
                .flat_map(|m| {
                    let r = if with_rhs { run1(&k, &[one(m), one_rhs(m)]) } else { run1(&k, &[one(m)]) };
                    r.unwrap().as_f64().unwrap().to_vec()
                })
                .collect();
            assert_eq!(whole.as_f64().unwrap(), &parts[..], "{op}");
        }
        // The triangular solve broadcasts one matrix over the batch of right-hand sides.
        let k = with("MatrixTriangularSolve", &[("lower", true)]);
        let m0 = Tensor::from_f64(vec![1, n, n], a[..n * n].to_vec()).unwrap();
        let whole = run1(&k, &[m0, rhs_t.clone()]).unwrap();
        let parts: Vec<f64> =
            (0..count).flat_map(|m| run1(&k, &[one(0), one_rhs(m)]).unwrap().as_f64().unwrap().to_vec()).collect();
        assert_eq!(whole.as_f64().unwrap(), &parts[..]);
        // One singular matrix in the shared batch fails it.
        let mut singular = a.clone();
        singular[4 * n * n..5 * n * n].fill(0.0);
        let e =
            run1(&with("MatrixInverse", &[]), &[Tensor::from_f64(vec![count, n, n], singular).unwrap()]).unwrap_err();
        assert_eq!(e.to_string(), "Input is not invertible.");
    }

    #[test]
    fn inverse_matches_tensorflow() {
        let r = run1(&with("MatrixInverse", &[]), &[a3()]).unwrap();
        close(&r, &[0.3, 0.0, -0.1, 0.0, 0.2857143, -0.14285715, -0.1, -0.14285715, 0.2714286]);
        let b = f32s(&[2, 2, 2], &[2., -1., 0., 3., 0., 1., 1., 0.]);
        let r = run1(&with("MatrixInverse", &[]), &[b]).unwrap();
        assert_eq!(r.shape, vec![2, 2, 2]);
        close(&r, &[0.5, 0.16666667, 0.0, 0.33333334, 0.0, 1.0, 1.0, 0.0]);
        let r = run1(&with("MatrixInverse", &[("adjoint", true)]), &[f32s(&[2, 2], &[1., 2., 3., 4.])]).unwrap();
        close(&r, &[-2.0, 1.5, 1.0, -0.5]);
        let e = run1(&with("MatrixInverse", &[]), &[f32s(&[2, 2], &[1., 2., 2., 4.])]).unwrap_err();
        assert_eq!(e.to_string(), "Input is not invertible.");
        let a64 = Tensor::from_f64(vec![3, 3], vec![4., 1., 2., 1., 5., 3., 2., 3., 6.]).unwrap();
        let r = run1(&with("MatrixInverse", &[]), &[a64]).unwrap();
        let want = [
            0.3,
            0.0,
            -0.1,
            0.0,
            0.2857142857142857,
            -0.14285714285714282,
            -0.1,
            -0.14285714285714285,
            0.2714285714285714,
        ];
        for (g, w) in r.as_f64().unwrap().iter().zip(want) {
            assert!((g - w).abs() < 1e-15, "{g} vs {w}");
        }
        let e = run1(&with("MatrixInverse", &[]), &[f32s(&[2, 3], &[0.; 6])]).unwrap_err();
        assert!(e.to_string().contains("square"), "{e}");
    }

    #[test]
    fn cholesky_matches_tensorflow_and_fills_nan_when_not_positive_definite() {
        let r = run1(&with("Cholesky", &[]), &[a3()]).unwrap();
        close(&r, &[2.0, 0.0, 0.0, 0.5, 2.1794496, 0.0, 1.0, 1.1470786, 1.9194298]);
        let b = f32s(&[2, 2, 2], &[1., 2., 2., 1., 4., 2., 2., 3.]);
        let r = run1(&with("Cholesky", &[]), &[b]).unwrap();
        close(&r, &[f32::NAN, 0.0, f32::NAN, f32::NAN, 2.0, 0.0, 1.0, 1.4142135]);
        // The upper triangle is never read.
        let r = run1(&with("Cholesky", &[]), &[f32s(&[2, 2], &[4., 99., 2., 2.])]).unwrap();
        close(&r, &[2.0, 0.0, 1.0, 1.0]);
    }

    #[test]
    fn triangular_solve_matches_tensorflow_in_all_four_modes_and_broadcasts() {
        let l = [2., 0., 0., 1., 3., 0., -1., 2., 4.];
        let rhs = f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
        let solve = |m: &[f32], lower: bool, adjoint: bool| {
            let n = with("MatrixTriangularSolve", &[("lower", lower), ("adjoint", adjoint)]);
            run1(&n, &[f32s(&[3, 3], m), rhs.clone()]).unwrap()
        };
        let lower_no_adj = [0.5, 1.0, 0.8333334, 1.0, 0.9583333, 1.25];
        let lower_adj = [1.0416666, 1.5833333, 0.16666667, 0.33333334, 1.25, 1.5];
        close(&solve(&l, true, false), &lower_no_adj);
        close(&solve(&l, true, true), &lower_adj);
        // Lᵀ with garbage below the diagonal, which an upper solve must not read.
        let mut u = [0f32; 9];
        for i in 0..3 {
            for j in 0..3 {
                u[i * 3 + j] = if j >= i { l[j * 3 + i] } else { 100.0 };
            }
        }
        close(&solve(&u, false, false), &lower_adj);
        close(&solve(&u, false, true), &lower_no_adj);
        // matrix [2, 1, 3, 3] against rhs [1, 2, 3, 1]: the batch broadcasts to [2, 2].
        let l2: Vec<f32> = l.iter().copied().chain(l.iter().map(|x| x * 2.0)).collect();
        let m = f32s(&[2, 1, 3, 3], &l2);
        let r = f32s(&[1, 2, 3, 1], &[1., 3., 5., 2., 4., 6.]);
        let out = run1(&with("MatrixTriangularSolve", &[]), &[m, r]).unwrap();
        assert_eq!(out.shape, vec![2, 2, 3, 1]);
        close(&out, &[0.5, 0.8333334, 0.9583333, 1.0, 1.0, 1.25, 0.25, 0.41666669, 0.47916666, 0.5, 0.5, 0.625]);
    }

    /// `tf.linalg.lu` of a 2×2 needing a swap and of `a3` (no swap), as packed factors and
    /// the permutation (`A[p] = L·U`); a singular matrix is TensorFlow's error.
    #[test]
    fn lu_packs_factors_and_permutation() {
        let out = compute(&with("Lu", &[]), &[f32s(&[2, 2], &[1., 2., 3., 4.])]).unwrap();
        close(&out[0], &[3.0, 4.0, 1.0 / 3.0, 2.0 - 4.0 / 3.0]);
        assert_eq!(out[1].as_i32().unwrap(), &[1, 0]);
        let mut n = with("Lu", &[]);
        n.attrs.insert("output_idx_type".into(), AttrValue::Type(DType::Int64));
        let out = compute(&n, &[a3()]).unwrap();
        close(&out[0], &[4.0, 1.0, 2.0, 0.25, 4.75, 2.5, 0.5, 0.5263158, 3.6842105]);
        assert_eq!(out[1].as_i64().unwrap(), &[0, 1, 2]);
        let e = compute(&with("Lu", &[]), &[f32s(&[2, 2], &[1., 2., 2., 4.])]).unwrap_err();
        assert_eq!(e.to_string(), "Input is not invertible.");
        let e = compute(&with("Lu", &[]), &[f32s(&[2, 3], &[0.; 6])]).unwrap_err();
        assert_eq!(e.to_string(), "Input matrix must be square.");
    }

    #[test]
    fn solve_matches_tensorflow() {
        let rhs = f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
        let r = run1(&with("MatrixSolve", &[]), &[a3(), rhs]).unwrap();
        close(&r, &[-0.2, 0.0, 0.14285715, 0.2857143, 0.82857144, 0.85714287]);
        let m = f32s(&[2, 2], &[1., 2., 3., 4.]);
        let r = run1(&with("MatrixSolve", &[("adjoint", true)]), &[m, f32s(&[2, 1], &[1., 1.])]).unwrap();
        close(&r, &[-0.5, 0.5]);
        let e =
            run1(&with("MatrixSolve", &[]), &[f32s(&[2, 2], &[1., 2., 2., 4.]), f32s(&[2, 1], &[1., 1.])]).unwrap_err();
        assert_eq!(e.to_string(), "Input matrix is not invertible.");
    }

    #[test]
    fn determinants_match_tensorflow_including_signed_zero() {
        let r = run1(&with("MatrixDeterminant", &[]), &[a3()]).unwrap();
        close(&r, &[69.99999]);
        let b = f32s(&[2, 2, 2], &[2., -1., 0., 3., 0., 1., 1., 0.]);
        let r = run1(&with("MatrixDeterminant", &[]), std::slice::from_ref(&b)).unwrap();
        assert_eq!(r.shape, vec![2]);
        close(&r, &[6.0, -1.0]);
        let sing = f32s(&[2, 2], &[1., 2., 2., 4.]);
        let r = run1(&with("MatrixDeterminant", &[]), std::slice::from_ref(&sing)).unwrap();
        assert_eq!(r.as_f32().unwrap()[0].to_bits(), (-0.0f32).to_bits());
        let out = crate::kernels::compute(&with("LogMatrixDeterminant", &[]), &[b]).unwrap();
        close(&out[0], &[1.0, -1.0]);
        close(&out[1], &[1.7917595, 0.0]);
        let out = crate::kernels::compute(&with("LogMatrixDeterminant", &[]), &[sing]).unwrap();
        assert_eq!(out[0].as_f32().unwrap()[0].to_bits(), (-0.0f32).to_bits());
        assert_eq!(out[1].as_f32().unwrap(), &[f32::NEG_INFINITY]);
        let r = run1(&with("MatrixDeterminant", &[]), &[f32s(&[2, 0, 0], &[])]).unwrap();
        assert_eq!(r.as_f32().unwrap(), &[1.0, 1.0]);
    }

    /// `MatrixSolveLs` against TensorFlow 2.21: a tall system by the normal equations, with a
    /// regulariser, and by the minimum-norm path (`fast=False`); a wide one both ways; a
    /// rank-deficient float64 system's minimum-norm solution, and the fast path's refusal.
    #[test]
    fn least_squares_match_tensorflow() {
        let a = f32s(&[4, 2], &[1.0, 2.0, 3.0, -1.0, 0.5, 4.0, 2.0, 2.0]);
        let b = f32s(&[4, 2], &[1.0, 0.0, 2.0, 1.0, -1.0, 3.0, 0.5, 0.5]);
        let l2 = |v: f64| Tensor::from_f64(vec![], vec![v]).unwrap();
        let close = |t: &Tensor, want: &[f64], tol: f64| {
            let got = t.to_f64_vec().unwrap();
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() <= tol * w.abs().max(1.0), "{got:?} vs {want:?}");
            }
        };
        let fast = |f: bool| with("MatrixSolveLs", &[("fast", f)]);
        let tall = [0.6113207936286926, 0.2339622676372528, -0.24226416647434235, 0.43320754170417786];
        let r = run1(&fast(true), &[a.clone(), b.clone(), l2(0.0)]).unwrap();
        assert_eq!(r.shape, [2, 2]);
        close(&r, &tall, 1e-6);
        close(&run1(&fast(false), &[a.clone(), b.clone(), l2(0.0)]).unwrap(), &tall, 1e-6);
        let reg = [0.5873976945877075, 0.22855107486248016, -0.23282307386398315, 0.42577433586120605];
        close(&run1(&fast(true), &[a.clone(), b, l2(0.5)]).unwrap(), &reg, 1e-6);
        let w = f32s(&[2, 4], &[1.0, 3.0, 0.5, 2.0, 2.0, -1.0, 4.0, 2.0]);
        let c = f32s(&[2, 1], &[1.0, 2.0]);
        let wide = [0.18716982007026672, 0.06490562856197357, 0.3064151108264923, 0.23245282471179962];
        for f in [true, false] {
            let r = run1(&fast(f), &[w.clone(), c.clone(), l2(0.0)]).unwrap();
            assert_eq!(r.shape, [4, 1]);
            close(&r, &wide, 1e-6);
        }
        let rd =
            Tensor::from_f64(vec![4, 3], vec![1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0]).unwrap();
        let d = Tensor::from_f64(vec![4, 1], vec![1.0, 2.0, 0.5, 1.5]).unwrap();
        let r = run1(&fast(false), &[rd.clone(), d.clone(), l2(0.0)]).unwrap();
        close(&r, &[-0.16666666666666652, 0.3525641025641025, 0.18589743589743585], 1e-12);
        let e = run1(&fast(true), &[rd, d, l2(0.0)]).unwrap_err().to_string();
        assert!(e.contains("rank deficient or ill-conditioned"), "{e}");
    }
    /// Float64 results within `rel` of TensorFlow's (relative, absolute below 1).
    fn close64(got: &Tensor, want: &[f64], rel: f64) {
        let got = got.as_f64().expect("float64");
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= rel * w.abs().max(1.0), "{got:?} vs {want:?}");
        }
    }

    fn f64s(shape: &[usize], v: &[f64]) -> Tensor {
        Tensor::from_f64(shape.to_vec(), v.to_vec()).unwrap()
    }

    /// `tf.raw_ops.BandedTriangularSolve` in TensorFlow 2.21 (CPU; its outputs on these inputs,
    /// printed with `repr` and pasted): 3 bands of a 4 × 4 matrix, lower and upper (the same rows, reversed, so the
    /// diagonal is at the bottom), with and without adjoint, float32 and float64; padding entries
    /// (77, 99 below) are never read.
    #[test]
    fn banded_triangular_solve_matches_tensorflow() {
        let lower_bands = [2.0, -3.0, 4.0, 1.5, 0.5, 1.0, -2.0, 3.0, 9.0, -1.0, 0.25, 2.0];
        let upper_bands = [9.0, -1.0, 0.25, 2.0, 0.5, 1.0, -2.0, 3.0, 2.0, -3.0, 4.0, 1.5];
        let rhs = [1.0, 2.0, -1.0, 0.5, 3.0, -2.0, 0.25, 4.0];
        #[rustfmt::skip]
        let cases: [(bool, bool, [f64; 8]); 4] = [
            (true, false, [0.5, 1.0, 0.5, 0.16666666666666666, 0.96875, -0.4791666666666667, -2.4375, 3.402777777777778]),
            (true, true, [0.4079861111111111, -0.3263888888888886, 0.027777777777777773, 3.2777777777777772, 0.625, -2.5, 0.16666666666666666, 2.6666666666666665]),
            (false, false, [-3.388888888888889, -2.5555555555555554, 0.5555555555555556, -0.7777777777777777, 0.8333333333333334, 0.8333333333333333, 0.16666666666666666, 2.6666666666666665]),
            (false, true, [0.5, 1.0, 0.4166666666666667, -0.0, -0.4791666666666667, -2.75, -0.19444444444444442, -1.0]),
        ];
        // TensorFlow's float32 answers (its kernel solves in float32).
        #[rustfmt::skip]
        let want32: [[f32; 8]; 4] = [
            [0.5, 1.0, 0.5, 0.1666666716337204, 0.96875, -0.4791666567325592, -2.4375, 3.402777671813965],
            [0.4079861044883728, -0.326388955116272, 0.02777778171002865, 3.277777910232544, 0.625, -2.5, 0.1666666716337204, 2.6666667461395264],
            [-3.3888888359069824, -2.555555820465088, 0.555555522441864, -0.7777778506278992, 0.8333333134651184, 0.8333333730697632, 0.1666666716337204, 2.6666667461395264],
            [0.5, 1.0, 0.4166666567325592, -0.0, -0.4791666567325592, -2.75, -0.1944444626569748, -1.0],
        ];
        for ((lower, adjoint, want), want32) in cases.iter().zip(&want32) {
            let n = with("BandedTriangularSolve", &[("lower", *lower), ("adjoint", *adjoint)]);
            let bands = if *lower { &lower_bands } else { &upper_bands };
            let x = run1(&n, &[f64s(&[3, 4], bands), f64s(&[4, 2], &rhs)]).unwrap();
            assert_eq!(x.shape, vec![4, 2]);
            close64(&x, want, 1e-14);
            let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            let x = run1(&n, &[f32s(&[3, 4], &f(bands)), f32s(&[4, 2], &f(&rhs))]).unwrap();
            // TensorFlow's float32 arithmetic against ours (float64, rounded once): a few ulps.
            let got = x.as_f32().unwrap();
            for (g, w) in got.iter().zip(want32) {
                assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{lower} {adjoint}: {got:?} vs {want32:?}");
            }
        }
        // Padding is never read: the lower storage's leading and the upper's trailing entries.
        let mut padded = lower_bands;
        (padded[4], padded[8], padded[9]) = (77.0, 77.0, 77.0);
        let x = run1(&with("BandedTriangularSolve", &[]), &[f64s(&[3, 4], &padded), f64s(&[4, 2], &rhs)]).unwrap();
        close64(&x, &cases[0].2, 1e-14);
        let mut padded = upper_bands;
        (padded[3], padded[2], padded[7]) = (99.0, 99.0, 99.0);
        let n = with("BandedTriangularSolve", &[("lower", false)]);
        let x = run1(&n, &[f64s(&[3, 4], &padded), f64s(&[4, 2], &rhs)]).unwrap();
        close64(&x, &cases[2].2, 1e-14);
        // More bands than rows: 4 bands of a 2 × 2 matrix.
        let wide = [2.0, 4.0, 3.0, 5.0, 7.0, 11.0, 13.0, 17.0];
        for (lower, adjoint, want) in [
            (true, false, [0.5, -0.375]),
            (true, true, [-0.125, 0.25]),
            (false, false, [0.04524886877828054, 0.058823529411764705]),
            (false, true, [0.07692307692307693, 0.02714932126696832]),
        ] {
            let n = with("BandedTriangularSolve", &[("lower", lower), ("adjoint", adjoint)]);
            close64(&run1(&n, &[f64s(&[4, 2], &wide), f64s(&[2, 1], &[1.0, 1.0])]).unwrap(), &want, 1e-14);
        }
    }

    /// Batch broadcasting (bands `[2, 1, 2, 3]` against rhs `[3, 3, 1]`: `[2, 3, 3, 1]`), the zero
    /// diagonal TensorFlow refuses (only in the batch's first matrix; elsewhere infinity) and its
    /// shape errors, all TensorFlow 2.21's.
    #[test]
    fn banded_triangular_solve_broadcasts_and_fails_as_tensorflow() {
        let m = [1.0, 2.0, -4.0, 7.0, 0.5, 3.0, 2.0, -1.0, 0.5, 5.0, 1.0, -2.0];
        let r = [1.0, 2.0, 3.0, -1.0, 0.0, 1.0, 0.5, 0.25, -2.0];
        #[rustfmt::skip]
        let want = [
            (true, vec![1.0, 0.75, -0.1875, -1.0, 0.25, -0.0625, 0.5, 0.0, 0.5, 0.5, -1.5, 0.0, -0.5, -0.5, 0.0, 0.25, -0.0, -4.0]),
            (false, vec![0.14285714285714285, 0.0, 1.0, 0.04761904761904761, -1.3333333333333333, 0.3333333333333333, -0.38095238095238093, 3.1666666666666665, -0.6666666666666666, 0.0, 0.5, -1.5, 0.0, -0.5, -0.5, -0.4, 1.25, 1.0]),
        ];
        for (lower, want) in want {
            let n = with("BandedTriangularSolve", &[("lower", lower)]);
            let x = run1(&n, &[f64s(&[2, 1, 2, 3], &m), f64s(&[3, 3, 1], &r)]).unwrap();
            assert_eq!(x.shape, vec![2, 3, 3, 1]);
            close64(&x, &want, 1e-14);
            let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            let x = run1(&n, &[f32s(&[2, 1, 2, 3], &f(&m)), f32s(&[3, 3, 1], &f(&r))]).unwrap();
            assert_eq!(x.shape, vec![2, 3, 3, 1]);
            close(&x, &f(&want));
        }
        let n = with("BandedTriangularSolve", &[]);
        let err = |a: Tensor, b: Tensor| run1(&n, &[a, b]).unwrap_err().to_string();
        let ones = |s: &[usize]| f64s(s, &vec![1.0; s.iter().product()]);
        let e = err(f64s(&[2, 1, 2], &[0.0, 1.0, 1.0, 1.0]), ones(&[2, 2, 1]));
        assert!(e.contains("Input matrix is not invertible."), "{e}");
        let x = run1(&n, &[f64s(&[2, 1, 2], &[1.0, 1.0, 0.0, 1.0]), ones(&[2, 2, 1])]).unwrap();
        assert_eq!(x.as_f64().unwrap(), &[1.0, 1.0, f64::INFINITY, 1.0]);
        assert!(err(ones(&[2, 3]), ones(&[4, 1])).contains("In[0] mismatch In[1] shape: 3 vs. 4"));
        let e = err(ones(&[2, 2, 3]), ones(&[3, 3, 1]));
        assert!(e.contains("In[0] and In[1] must have compatible batch dimensions: [2, 2, 3] vs. [3, 3, 1]"), "{e}");
        assert!(err(ones(&[0, 3]), ones(&[3, 1])).contains("In[0] must not be an empty tensor"));
        assert!(err(ones(&[3]), ones(&[3, 1])).contains("In[0] ndims must be >= 2: 1"));
        assert!(err(ones(&[1, 3]), f32s(&[3, 1], &[1.0; 3])).contains("matrix is float64 but rhs is float32"));
    }

    /// `tf.raw_ops.TridiagonalMatMul` in TensorFlow 2.21 (CPU; its outputs pasted): a batch of two
    /// 4 × 4 tridiagonal matrices (the superdiagonal's last and the subdiagonal's first entries
    /// ignored: 99, −5, 77 and 8 below) times `[2, 4, 3]`, float64 and float32 (bit for bit: the
    /// same float32 operations in the same order), and TensorFlow's shape errors.
    #[test]
    fn tridiagonal_matmul_matches_tensorflow() {
        let sup = [1.5, -2.0, 0.3, 99.0, 0.1, 0.2, 0.7, -5.0];
        let dia = [2.0, 3.1, -1.0, 0.5, 1.0, -4.0, 2.5, 3.3];
        let sub = [77.0, 0.4, 1.1, -0.6, 8.0, 1.9, -0.25, 0.9];
        // np.arange(24).reshape(2, 4, 3) * 0.37 - 2.1
        let rhs: Vec<f64> = (0..24).map(|i| f64::from(i) * 0.37 - 2.1).collect();
        #[rustfmt::skip]
        let want64 = [
            -5.6850000000000005, -4.390000000000001, -3.095, -4.149, -3.594, -3.0389999999999997, -0.8400000000000001,
            -0.692, -0.5439999999999997, 0.5430000000000001, 0.5060000000000002, 0.4690000000000002, 2.6849999999999996,
            3.0919999999999996, 3.4989999999999997, -8.441999999999998, -9.145, -9.847999999999997, 14.5065,
            15.597999999999999, 16.689500000000002, 22.814999999999998, 24.369000000000003, 25.923,
        ];
        #[rustfmt::skip]
        let want32: [f32; 24] = [
            -5.684999942779541, -4.389999866485596, -3.0950000286102295, -4.1489996910095215, -3.5939998626708984,
            -3.0390000343322754, -0.8399999737739563, -0.6920000314712524, -0.543999969959259, 0.5429999828338623,
            0.5059999823570251, 0.468999981880188, 2.684999942779541, 3.0920000076293945, 3.498999834060669,
            -8.442000389099121, -9.144999504089355, -9.848000526428223, 14.506499290466309, 15.597999572753906,
            16.68950080871582, 22.815000534057617, 24.368999481201172, 25.92300033569336,
        ];
        let n = node("TridiagonalMatMul", &[]);
        let d = |v: &[f64]| f64s(&[2, 1, 4], v);
        let x = run1(&n, &[d(&sup), d(&dia), d(&sub), f64s(&[2, 4, 3], &rhs)]).unwrap();
        assert_eq!(x.shape, vec![2, 4, 3]);
        close64(&x, &want64, 1e-15);
        let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let d = |v: &[f64]| f32s(&[2, 1, 4], &f(v));
        let x = run1(&n, &[d(&sup), d(&dia), d(&sub), f32s(&[2, 4, 3], &f(&rhs))]).unwrap();
        assert_eq!(x.as_f32().unwrap(), &want32);
        let ones = |s: &[usize]| f64s(s, &vec![1.0; s.iter().product()]);
        let err = |s: [&[usize]; 4]| run1(&n, &s.map(ones)).unwrap_err().to_string();
        assert!(err([&[1, 4], &[1, 4], &[1, 3], &[4, 2]]).contains("Invalid subdiagonal shape."));
        assert!(err([&[2, 4], &[1, 4], &[1, 4], &[4, 2]]).contains("Invalid superdiagonal shape."));
        let e = err([&[2, 1, 4], &[2, 1, 4], &[2, 1, 4], &[3, 4, 2]]);
        assert!(e.contains("All input tensors must have the same outer dimensions"), "{e}");
        assert!(err([&[4], &[1, 4], &[1, 4], &[4, 2]]).contains("superdiag must have rank >= 2"));
    }
}
