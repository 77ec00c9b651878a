//! Schemas of the dense linear-algebra ops (`linalg_ops.cc`): `Svd`, `TridiagonalSolve`, `TridiagonalMatMul`,
//! `BandedTriangularSolve`, `MatrixSquareRoot`, `Qr`, `Lu`, `SelfAdjointEigV2`, `MatrixInverse`, `Cholesky`,
//! `MatrixTriangularSolve`, `MatrixSolve`, `MatrixDeterminant` and `LogMatrixDeterminant`,
//! over the last two dimensions with batch dimensions in front. Shape functions follow
//! TensorFlow's (`MakeBatchSquareMatrix`, `MatrixSolveShapeFn`,
//! `MatrixTriangularSolveShapeFn`): square matrices where the op needs them, the solves'
//! rows merged with the matrix's, the triangular solve's batch dimensions broadcast.
//! `Cross` (`math_ops.cc`, `tf.linalg.cross`) is here too. Complex dtypes are not supported (autoclust has no complex tensors).

use super::build::{arg, bool_attr_or, pure_op, type_attr, type_attr_or};
use super::{broadcast_shapes, merge_shapes, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{self, BFloat16, Float16, Float32, Float64, Int32, Int64};
use crate::{Dim, Shape};

type Shapes = Result<Vec<Shape>, String>;

const FLOAT: &[DType] = &[Float64, Float32, Float16, BFloat16];
const T: TypeRule = TypeRule::Attr("T");

/// `(batch, rows, cols)` of input `i`, `None` for an unknown rank.
fn matrix(c: &InferCtx<'_>, i: usize, what: &str) -> Result<Option<(Vec<Dim>, Dim, Dim)>, String> {
    match c.shape(i).dims.as_deref() {
        None => Ok(None),
        Some(d) if d.len() < 2 => Err(format!("{what} must have rank >= 2, but has shape {}", c.shape(i))),
        Some(d) => Ok(Some((d[..d.len() - 2].to_vec(), d[d.len() - 2], d[d.len() - 1]))),
    }
}

/// A square batch of matrices: `(batch, n)`.
fn square(c: &InferCtx<'_>, i: usize, what: &str) -> Result<Option<(Vec<Dim>, Dim)>, String> {
    let Some((batch, r, k)) = matrix(c, i, what)? else { return Ok(None) };
    match (r, k) {
        (Some(r), Some(k)) if r != k => Err(format!("{what} must be square, but has shape {}", c.shape(i))),
        _ => Ok(Some((batch, r.or(k)))),
    }
}

fn with(mut lead: Vec<Dim>, tail: &[Dim]) -> Shape {
    lead.extend_from_slice(tail);
    Shape::with_dims(lead)
}

/// `MatrixInverse`, `Cholesky`: the input's shape, made square.
fn same_square(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![match square(c, 0, "input")? {
        Some((batch, n)) => with(batch, &[n, n]),
        None => Shape::unknown(),
    }])
}

/// `MatrixDeterminant`: the batch dimensions.
fn determinant(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![square(c, 0, "input")?.map_or_else(Shape::unknown, |(batch, _)| Shape::with_dims(batch))])
}

/// `LogMatrixDeterminant`: the batch dimensions, twice.
fn log_determinant(c: &InferCtx<'_>) -> Shapes {
    let s = determinant(c)?.remove(0);
    Ok(vec![s.clone(), s])
}

/// A solve's matrix batch, rhs batch, rows and rhs columns.
type SolveDims = (Vec<Dim>, Vec<Dim>, Dim, Dim);

/// The rows the matrix and the right-hand side agree on, and the rhs's columns.
fn solve_dims(c: &InferCtx<'_>) -> Result<Option<SolveDims>, String> {
    let (Some((mb, n)), Some((rb, rows, k))) = (square(c, 0, "matrix")?, matrix(c, 1, "rhs")?) else {
        return Ok(None);
    };
    let n = match (n, rows) {
        (Some(a), Some(b)) if a != b => {
            return Err(format!("the matrix {} and the rhs {} have different rows", c.shape(0), c.shape(1)))
        }
        (a, b) => a.or(b),
    };
    Ok(Some((mb, rb, n, k)))
}

/// `MatrixSolve`: the batch dimensions must agree; `[..., N, K]`.
fn solve(c: &InferCtx<'_>) -> Shapes {
    let Some((mb, rb, n, k)) = solve_dims(c)? else { return Ok(vec![Shape::unknown()]) };
    let batch = merge_shapes(&Shape::with_dims(mb), &Shape::with_dims(rb))?;
    Ok(vec![with(batch.dims.unwrap_or_default(), &[n, k])])
}

/// `MatrixSolveLs`: the least-squares solution `[..., N, K]` of `matrix` `[..., M, N]` and `rhs`
/// `[..., M, K]` (equal batch dimensions and rows).
fn solve_ls(c: &InferCtx<'_>) -> Shapes {
    let (Some((mb, m, n)), Some((rb, rows, k))) = (matrix(c, 0, "matrix")?, matrix(c, 1, "rhs")?) else {
        return Ok(vec![Shape::unknown()]);
    };
    if let (Some(a), Some(b)) = (m, rows) {
        if a != b {
            return Err(format!("the matrix {} and the rhs {} have different rows", c.shape(0), c.shape(1)));
        }
    }
    let batch = merge_shapes(&Shape::with_dims(mb), &Shape::with_dims(rb))?;
    Ok(vec![with(batch.dims.unwrap_or_default(), &[n, k])])
}

/// `MatrixTriangularSolve`: the batch dimensions broadcast; `[..., N, K]`.
fn triangular_solve(c: &InferCtx<'_>) -> Shapes {
    let Some((mb, rb, n, k)) = solve_dims(c)? else { return Ok(vec![Shape::unknown()]) };
    let batch = broadcast_shapes(&Shape::with_dims(mb), &Shape::with_dims(rb))?;
    Ok(vec![match batch.dims {
        Some(b) => with(b, &[n, k]),
        None => Shape::unknown(),
    }])
}

const T_ATTR: &[AttrSpec] = &[type_attr("T", Some(FLOAT))];
const SOLVE_LS: &[AttrSpec] = &[type_attr("T", Some(FLOAT)), bool_attr_or("fast", true)];
const ADJOINT: &[AttrSpec] = &[bool_attr_or("adjoint", false), type_attr("T", Some(FLOAT))];
const TRIANGULAR: &[AttrSpec] =
    &[bool_attr_or("lower", true), bool_attr_or("adjoint", false), type_attr("T", Some(FLOAT))];

/// `Qr`: `q` `[..., M, P]` and `r` `[..., P, N]` with `P = min(M, N)`, or `[..., M, M]` and
/// `[..., M, N]` with `full_matrices`.
fn qr(c: &InferCtx<'_>) -> Shapes {
    let Some((batch, m, n)) = matrix(c, 0, "input")? else { return Ok(vec![Shape::unknown(), Shape::unknown()]) };
    let p = if c.attr_bool("full_matrices", false) {
        m
    } else {
        match (m, n) {
            (Some(m), Some(n)) => Some(m.min(n)),
            _ => None,
        }
    };
    Ok(vec![with(batch.clone(), &[m, p]), with(batch, &[p, n])])
}

/// `Svd`: `s` `[..., P]`, `u` `[..., M, P]` and `v` `[..., N, P]` with `P = min(M, N)` (`[..., M, M]`
/// and `[..., N, N]` with `full_matrices`; scalars without `compute_uv`, as TensorFlow leaves them).
fn svd(c: &InferCtx<'_>) -> Shapes {
    let uv = c.attr_bool("compute_uv", true);
    let Some((batch, m, n)) = matrix(c, 0, "input")? else {
        let vectors = if uv { Shape::unknown() } else { Shape::scalar() };
        return Ok(vec![Shape::unknown(), vectors.clone(), vectors]);
    };
    let p = match (m, n) {
        (Some(m), Some(n)) => Some(m.min(n)),
        _ => None,
    };
    let (uc, vc) = if c.attr_bool("full_matrices", false) { (m, n) } else { (p, p) };
    let s = with(batch.clone(), &[p]);
    if !uv {
        return Ok(vec![s, Shape::scalar(), Shape::scalar()]);
    }
    Ok(vec![s, with(batch.clone(), &[m, uc]), with(batch, &[n, vc])])
}

/// `TridiagonalSolve`: the right-hand side's shape (`[..., M, K]`, diagonals `[..., 3, M]`).
fn tridiagonal(c: &InferCtx<'_>) -> Shapes {
    if let Some((_, Some(r), _)) = matrix(c, 0, "diagonals")? {
        if r != 3 {
            return Err(format!("diagonals must have shape [..., 3, M], but has shape {}", c.shape(0)));
        }
    }
    Ok(vec![c.shape(1).clone()])
}

/// `BandedTriangularSolve`: `matrix` `[..., num_bands, M]` (band storage) and `rhs`
/// `[..., M, K]`, the batch dimensions broadcast; `[..., M, K]`.
fn banded_triangular_solve(c: &InferCtx<'_>) -> Shapes {
    let (Some((mb, _, m)), Some((rb, rows, k))) = (matrix(c, 0, "matrix")?, matrix(c, 1, "rhs")?) else {
        return Ok(vec![Shape::unknown()]);
    };
    let m = match (m, rows) {
        (Some(a), Some(b)) if a != b => {
            return Err(format!("the bands {} and the rhs {} have different M", c.shape(0), c.shape(1)))
        }
        (a, b) => a.or(b),
    };
    let batch = broadcast_shapes(&Shape::with_dims(mb), &Shape::with_dims(rb))?;
    Ok(vec![match batch.dims {
        Some(b) => with(b, &[m, k]),
        None => Shape::unknown(),
    }])
}

/// `TridiagonalMatMul`: the three diagonals `[..., 1, M]`, one shape, and `rhs` `[..., M, N]` with
/// the same batch dimensions; the rhs's shape.
fn tridiagonal_matmul(c: &InferCtx<'_>) -> Shapes {
    let mut diag = c.shape(0).clone();
    for (i, what) in [(0, "superdiag"), (1, "maindiag"), (2, "subdiag")] {
        if let Some((_, Some(r), _)) = matrix(c, i, what)? {
            if r != 1 {
                return Err(format!("{what} must have shape [..., 1, M], but has shape {}", c.shape(i)));
            }
        }
        diag = merge_shapes(&diag, c.shape(i))?;
    }
    let Some(rhs) = matrix(c, 3, "rhs")? else { return Ok(vec![c.shape(3).clone()]) };
    let Some(d) = diag.dims else { return Ok(vec![c.shape(3).clone()]) };
    let (rb, rows, n) = rhs;
    let (db, dm) = (d[..d.len() - 2].to_vec(), d[d.len() - 1]);
    let batch = merge_shapes(&Shape::with_dims(db), &Shape::with_dims(rb))?;
    let rows = merge_shapes(&Shape::with_dims(vec![dm]), &Shape::with_dims(vec![rows]))?;
    Ok(vec![with(batch.dims.unwrap_or_default(), &[rows.dims.unwrap_or_default()[0], n])])
}

/// `Lu`: the packed factors shaped as the (square) input, and the permutation `[..., N]`.
fn lu(c: &InferCtx<'_>) -> Shapes {
    Ok(match square(c, 0, "input")? {
        Some((batch, n)) => vec![with(batch.clone(), &[n, n]), with(batch, &[n])],
        None => vec![Shape::unknown(), Shape::unknown()],
    })
}

/// `SelfAdjointEigV2`: eigenvalues `[..., N]`, and eigenvectors `[..., N, N]` (`[0]` without
/// `compute_v`).
fn eigh(c: &InferCtx<'_>) -> Shapes {
    let vectors = c.attr_bool("compute_v", true);
    Ok(match square(c, 0, "input")? {
        Some((batch, n)) => vec![
            with(batch.clone(), &[n]),
            if vectors { with(batch, &[n, n]) } else { Shape::with_dims(vec![Some(0)]) },
        ],
        None => vec![Shape::unknown(), if vectors { Shape::unknown() } else { Shape::with_dims(vec![Some(0)]) }],
    })
}

/// `Cross`: both operands of one shape, of rank ≥ 1, whose last dimension is 3.
fn cross(c: &InferCtx<'_>) -> Shapes {
    for i in 0..2 {
        if c.shape(i).rank() == Some(0) {
            return Err(format!("Shape must be at least rank 1 but is rank 0 for input {i}"));
        }
    }
    let s = merge_shapes(c.shape(0), c.shape(1))?;
    if let Some(Some(d)) = s.dims.as_ref().and_then(|d| d.last().copied()) {
        if d != 3 {
            return Err(format!("Dimension must be 3 but is {d}"));
        }
    }
    Ok(vec![s])
}

/// `Cross`'s types: TensorFlow's real number types.
const CROSS_TYPES: &[DType] = &[
    Float32,
    Float64,
    Int32,
    DType::UInt8,
    DType::Int16,
    DType::Int8,
    Int64,
    BFloat16,
    DType::UInt16,
    Float16,
    DType::UInt32,
    DType::UInt64,
];

pub(super) static OPS: &[OpSchema] = &[
    pure_op(
        "Cross",
        OpFamily::MatMul,
        &[arg("a", T), arg("b", T)],
        &[arg("product", T)],
        &[type_attr("T", Some(CROSS_TYPES))],
        cross,
    ),
    pure_op(
        "SelfAdjointEigV2",
        OpFamily::MatMul,
        &[arg("input", T)],
        &[arg("e", T), arg("v", T)],
        &[bool_attr_or("compute_v", true), type_attr("T", Some(&[Float64, Float32]))],
        eigh,
    ),
    pure_op(
        "Lu",
        OpFamily::MatMul,
        &[arg("input", T)],
        &[arg("lu", T), arg("p", TypeRule::Attr("output_idx_type"))],
        &[type_attr("T", Some(&[Float64, Float32])), type_attr_or("output_idx_type", Int32, &[Int32, Int64])],
        lu,
    ),
    pure_op(
        "Qr",
        OpFamily::MatMul,
        &[arg("input", T)],
        &[arg("q", T), arg("r", T)],
        &[bool_attr_or("full_matrices", false), type_attr("T", Some(FLOAT))],
        qr,
    ),
    pure_op(
        "Svd",
        OpFamily::MatMul,
        &[arg("input", T)],
        &[arg("s", T), arg("u", T), arg("v", T)],
        &[
            bool_attr_or("compute_uv", true),
            bool_attr_or("full_matrices", false),
            type_attr("T", Some(&[Float64, Float32])),
        ],
        svd,
    ),
    pure_op(
        "TridiagonalSolve",
        OpFamily::MatMul,
        &[arg("diagonals", T), arg("rhs", T)],
        &[arg("output", T)],
        &[
            bool_attr_or("partial_pivoting", true),
            bool_attr_or("perturb_singular", false),
            type_attr("T", Some(&[Float64, Float32])),
        ],
        tridiagonal,
    ),
    pure_op(
        "TridiagonalMatMul",
        OpFamily::MatMul,
        &[arg("superdiag", T), arg("maindiag", T), arg("subdiag", T), arg("rhs", T)],
        &[arg("output", T)],
        &[type_attr("T", Some(&[Float64, Float32]))],
        tridiagonal_matmul,
    ),
    pure_op(
        "BandedTriangularSolve",
        OpFamily::MatMul,
        &[arg("matrix", T), arg("rhs", T)],
        &[arg("output", T)],
        &[bool_attr_or("lower", true), bool_attr_or("adjoint", false), type_attr("T", Some(&[Float64, Float32]))],
        banded_triangular_solve,
    ),
    pure_op("MatrixInverse", OpFamily::MatMul, &[arg("input", T)], &[arg("output", T)], ADJOINT, same_square),
    pure_op("MatrixSquareRoot", OpFamily::MatMul, &[arg("input", T)], &[arg("output", T)], T_ATTR, same_square),
    pure_op("Cholesky", OpFamily::MatMul, &[arg("input", T)], &[arg("output", T)], T_ATTR, same_square),
    pure_op(
        "MatrixTriangularSolve",
        OpFamily::MatMul,
        &[arg("matrix", T), arg("rhs", T)],
        &[arg("output", T)],
        TRIANGULAR,
        triangular_solve,
    ),
    pure_op("MatrixSolve", OpFamily::MatMul, &[arg("matrix", T), arg("rhs", T)], &[arg("output", T)], ADJOINT, solve),
    pure_op(
        "MatrixSolveLs",
        OpFamily::MatMul,
        &[arg("matrix", T), arg("rhs", T), arg("l2_regularizer", TypeRule::Fixed(Float64))],
        &[arg("output", T)],
        SOLVE_LS,
        solve_ls,
    ),
    pure_op("MatrixDeterminant", OpFamily::MatMul, &[arg("input", T)], &[arg("output", T)], T_ATTR, determinant),
    pure_op(
        "LogMatrixDeterminant",
        OpFamily::MatMul,
        &[arg("input", T)],
        &[arg("sign", T), arg("log_abs_determinant", T)],
        T_ATTR,
        log_determinant,
    ),
];
