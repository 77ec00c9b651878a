//! Diagonals of matrices: `MatrixDiag` (V1/V2/V3, what `tf.eye` and `tf.linalg.diag`
//! emit), `MatrixDiagPart` (V1/V2/V3, `tf.linalg.diag_part`) and `MatrixSetDiag` (V1/V2/V3,
//! `tf.linalg.set_diag`), over the last two dimensions, batch dimensions in front.
//!
//! One geometry serves all three ([`Band`]), following the V3 ops' definition in
//! TensorFlow's `array_ops.cc`: for `k = [k0, k1]` the diagonals `d = k1, k1-1, …, k0` of an
//! `M×N` matrix (`d = n - m`) are the rows `k1 - d` of a `[num_diags, max_diag_len]` array,
//! `max_diag_len = min(M + min(k1, 0), N - max(k0, 0))`; element `(m, n)` of diagonal `d` is
//! at `n - max(d, 0) + offset`, where a diagonal shorter than `max_diag_len` is padded on
//! the left (`offset = max_diag_len - len(d)`) when it is aligned right — superdiagonals
//! (`d ≥ 0`) when `align` starts with `RIGHT`, subdiagonals (`d ≤ 0`) when it ends with
//! `RIGHT` — and on the right otherwise. V1 ops are the main diagonal; V2 ops align
//! `LEFT_LEFT`; V3 defaults to `RIGHT_LEFT`.

use autoclust_graph::{AttrValue, Node, Tensor};

use super::{arity, dispatch_all, int_scalar, int_values, one, tensor_of, Elem, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// The diagonals `k0..=k1` of an `rows × cols` matrix and how they are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Band {
    rows: i64,
    cols: i64,
    k0: i64,
    k1: i64,
    max_len: i64,
    super_right: bool,
    sub_right: bool,
}

impl Band {
    fn new(rows: i64, cols: i64, k0: i64, k1: i64, align: Align) -> KResult<Band> {
        if k0 > k1 {
            return Err(KernelError::invalid(format!(
                "lower_diag_index must not be larger than upper_diag_index: {k0} > {k1}"
            )));
        }
        if rows > 0 && cols > 0 && (k0 <= -rows || k1 >= cols) {
            return Err(KernelError::invalid(format!(
                "the diagonal indices [{k0}, {k1}] must lie in (-{rows}, {cols}) for a {rows}x{cols} matrix"
            )));
        }
        let max_len = (rows + k1.min(0)).min(cols - k0.max(0)).max(0);
        Ok(Band { rows, cols, k0, k1, max_len, super_right: align.super_right, sub_right: align.sub_right })
    }

    fn num_diags(&self) -> i64 {
        self.k1 - self.k0 + 1
    }

    /// The length of diagonal `d`.
    fn len(&self, d: i64) -> i64 {
        (self.rows + d.min(0)).min(self.cols - d.max(0)).max(0)
    }

    fn offset(&self, d: i64) -> i64 {
        let right = (d >= 0 && self.super_right) || (d <= 0 && self.sub_right);
        if right {
            self.max_len - self.len(d)
        } else {
            0
        }
    }

    /// Where element `(m, n)` sits in the diagonal array (row, column), if in the band.
    fn slot(&self, m: i64, n: i64) -> Option<(i64, i64)> {
        let d = n - m;
        (self.k0..=self.k1).contains(&d).then(|| (self.k1 - d, n - d.max(0) + self.offset(d)))
    }
}

#[derive(Clone, Copy, Debug)]
struct Align {
    super_right: bool,
    sub_right: bool,
}

fn align(node: &Node, default: &str) -> KResult<Align> {
    let a = node.attr("align").and_then(AttrValue::as_str).unwrap_or(default);
    match a {
        "LEFT_LEFT" | "LEFT_RIGHT" | "RIGHT_LEFT" | "RIGHT_RIGHT" => {
            Ok(Align { super_right: a.starts_with("RIGHT"), sub_right: a.ends_with("RIGHT") })
        }
        _ => Err(KernelError::invalid(format!("unknown align '{a}'"))),
    }
}

/// `k` as `(k0, k1)`: a scalar or a pair.
fn diag_range(t: &Tensor) -> KResult<(i64, i64)> {
    match int_values(t, "k")?.as_slice() {
        [k] => Ok((*k, *k)),
        [k0, k1] => Ok((*k0, *k1)),
        v => Err(KernelError::invalid(format!(
            "diag_index must be a scalar or a vector of 2 elements, got {} values",
            v.len()
        ))),
    }
}

/// The matrix shape of `t` (`[..., M, N]`): (batch, M, N).
fn matrices(t: &Tensor, what: &str) -> KResult<(usize, i64, i64)> {
    let r = t.rank();
    if r < 2 {
        return Err(KernelError::invalid(format!("{what} must be at least 2-dim, received shape: {:?}", t.shape)));
    }
    let (m, n) = (t.shape[r - 2], t.shape[r - 1]);
    Ok((t.shape[..r - 2].iter().product(), m as i64, n as i64))
}

/// `MatrixDiag*`: `diagonal` (`[..., max_len]` for one diagonal, `[..., num_diags, max_len]`
/// for a range) into `[..., rows, cols]` matrices, `padding` elsewhere.
fn diag<T: Elem>(
    diagonal: &Tensor,
    k: (i64, i64),
    rows: i64,
    cols: i64,
    padding: &Tensor,
    al: Align,
) -> KResult<Tensor> {
    let (k0, k1) = k;
    let single = k0 == k1;
    let lead = if single { 1 } else { 2 };
    if diagonal.rank() < lead {
        return Err(KernelError::invalid(format!(
            "diagonal must be at least {lead}-dim, received shape: {:?}",
            diagonal.shape
        )));
    }
    let r = diagonal.rank();
    let max_len = diagonal.shape[r - 1] as i64;
    if !single && diagonal.shape[r - 2] as i64 != k1 - k0 + 1 {
        return Err(KernelError::invalid(format!(
            "the number of diagonals provided in the input does not match the lower_diag_index and upper_diag_index range: {} vs {}",
            diagonal.shape[r - 2],
            k1 - k0 + 1
        )));
    }
    let min_rows = max_len - k1.min(0);
    let min_cols = max_len + k0.max(0);
    if (rows != -1 && rows < min_rows) || (cols != -1 && cols < min_cols) {
        return Err(KernelError::invalid(format!(
            "the number of rows ({rows}) or columns ({cols}) is too small for the diagonals (at least {min_rows} and {min_cols})"
        )));
    }
    let (rows, cols) = match (rows, cols) {
        (-1, -1) => (min_rows.max(min_cols), min_rows.max(min_cols)),
        (-1, c) => (min_rows, c),
        (r, -1) => (r, min_cols),
        rc => rc,
    };
    if rows != min_rows && cols != min_cols {
        return Err(KernelError::invalid(
            "The number of rows or columns is not consistent with the specified d_lower, d_upper, and diagonal.",
        ));
    }
    let band = Band::new(rows, cols, k0, k1, al)?;
    let pad = *T::slice(padding).first().ok_or_else(|| KernelError::invalid("padding_value must be a scalar"))?;
    let src = T::slice(diagonal);
    let batch: usize = diagonal.shape[..r - lead].iter().product();
    let per = (band.num_diags() * max_len) as usize;
    let mut shape = diagonal.shape[..r - lead].to_vec();
    shape.extend([rows as usize, cols as usize]);
    // Sizes from run-time values stay inside the tensor budget (`--max-tensor-bytes`).
    let mut out = Vec::with_capacity(super::budget(T::DTYPE, &shape)?);
    for b in 0..batch {
        for m in 0..rows {
            for n in 0..cols {
                out.push(match band.slot(m, n) {
                    Some((row, col)) => src[b * per + (row * max_len + col) as usize],
                    None => pad,
                });
            }
        }
    }
    Ok(tensor_of(shape, out))
}

/// `MatrixDiagPart*`: the diagonals `k` of `[..., M, N]` matrices, `padding` where a
/// diagonal is shorter than the longest.
fn diag_part<T: Elem>(input: &Tensor, k: (i64, i64), padding: Option<&Tensor>, al: Align) -> KResult<Tensor> {
    let (batch, rows, cols) = matrices(input, "input")?;
    let band = Band::new(rows, cols, k.0, k.1, al)?;
    let pad = match padding {
        Some(p) => *T::slice(p).first().ok_or_else(|| KernelError::invalid("padding_value must be a scalar"))?,
        None => T::zero(),
    };
    let src = T::slice(input);
    let (nd, len) = (band.num_diags(), band.max_len);
    let mut out = vec![pad; batch * (nd * len) as usize];
    for b in 0..batch {
        let base = b * (rows * cols) as usize;
        for m in 0..rows {
            for n in 0..cols {
                if let Some((row, col)) = band.slot(m, n) {
                    out[b * (nd * len) as usize + (row * len + col) as usize] = src[base + (m * cols + n) as usize];
                }
            }
        }
    }
    let mut shape = input.shape[..input.rank() - 2].to_vec();
    if nd > 1 {
        shape.push(nd as usize);
    }
    shape.push(len as usize);
    Ok(tensor_of(shape, out))
}

/// `MatrixSetDiag*`: `input` with its diagonals `k` replaced by `diagonal`'s.
fn set_diag<T: Elem>(input: &Tensor, diagonal: &Tensor, k: (i64, i64), al: Align) -> KResult<Tensor> {
    let (batch, rows, cols) = matrices(input, "input")?;
    let band = Band::new(rows, cols, k.0, k.1, al)?;
    let (nd, len) = (band.num_diags(), band.max_len);
    let mut want = input.shape[..input.rank() - 2].to_vec();
    if nd > 1 {
        want.push(nd as usize);
    }
    want.push(len as usize);
    if diagonal.shape != want {
        return Err(KernelError::invalid(format!(
            "diagonal must have shape {want:?} for an input of shape {:?}, got {:?}",
            input.shape, diagonal.shape
        )));
    }
    let (src, diag) = (T::slice(input), T::slice(diagonal));
    let mut out = src.to_vec();
    for b in 0..batch {
        let base = b * (rows * cols) as usize;
        for m in 0..rows {
            for n in 0..cols {
                if let Some((row, col)) = band.slot(m, n) {
                    out[base + (m * cols + n) as usize] = diag[b * (nd * len) as usize + (row * len + col) as usize];
                }
            }
        }
    }
    Ok(tensor_of(input.shape.clone(), out))
}

/// The kernels of the diagonal ops (module doc), `None` for other ops.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "MatrixDiag" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let zero = Tensor::zeros(inp[0].dtype, Vec::new()).map_err(|e| KernelError::invalid(e.to_string()))?;
            let al = Align { super_right: false, sub_right: false };
            one(dispatch_all!(inp[0].dtype, diag(&inp[0], (0, 0), -1, -1, &zero, al))?)
        }),
        "MatrixDiagV2" | "MatrixDiagV3" => {
            let al = align(node, if node.op == "MatrixDiagV3" { "RIGHT_LEFT" } else { "LEFT_LEFT" })?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 5)?;
                let k = diag_range(&inp[1])?;
                let (rows, cols) = (int_scalar(&inp[2], "num_rows")?, int_scalar(&inp[3], "num_cols")?);
                one(dispatch_all!(inp[0].dtype, diag(&inp[0], k, rows, cols, &inp[4], al))?)
            })
        }
        "MatrixDiagPart" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let al = Align { super_right: false, sub_right: false };
            one(dispatch_all!(inp[0].dtype, diag_part(&inp[0], (0, 0), None, al))?)
        }),
        "MatrixDiagPartV2" | "MatrixDiagPartV3" => {
            let al = align(node, if node.op == "MatrixDiagPartV3" { "RIGHT_LEFT" } else { "LEFT_LEFT" })?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                let k = diag_range(&inp[1])?;
                one(dispatch_all!(inp[0].dtype, diag_part(&inp[0], k, Some(&inp[2]), al))?)
            })
        }
        "MatrixSetDiag" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let al = Align { super_right: false, sub_right: false };
            one(dispatch_all!(inp[0].dtype, set_diag(&inp[0], &inp[1], (0, 0), al))?)
        }),
        "MatrixSetDiagV2" | "MatrixSetDiagV3" => {
            let al = align(node, if node.op == "MatrixSetDiagV3" { "RIGHT_LEFT" } else { "LEFT_LEFT" })?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                let k = diag_range(&inp[2])?;
                one(dispatch_all!(inp[0].dtype, set_diag(&inp[0], &inp[1], k, al))?)
            })
        }
        _ => return Ok(None),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], v: &[f32]) -> Tensor {
        tensor_of(shape.to_vec(), v.to_vec())
    }
    fn ints(v: &[i32]) -> Tensor {
        let shape = if v.len() == 1 { vec![] } else { vec![v.len()] };
        tensor_of(shape, v.to_vec())
    }
    fn node(op: &str, align: Option<&str>) -> Node {
        let mut attrs = autoclust_graph::Attrs::new();
        attrs.insert("T".into(), AttrValue::Type(autoclust_graph::DType::Float32));
        if let Some(a) = align {
            attrs.insert("align".into(), AttrValue::S(a.as_bytes().to_vec()));
        }
        Node {
            name: "d".into(),
            op: op.into(),
            inputs: vec![],
            control_inputs: vec![],
            attrs,
            device: String::new(),
            span: None,
        }
    }
    fn run(op: &str, align: Option<&str>, inp: Vec<Tensor>) -> Tensor {
        let f = prepare(&node(op, align)).unwrap().unwrap();
        f(inp.into_iter().collect()).unwrap().into_vec().remove(0)
    }
    fn f32s(t: &Tensor) -> Vec<f32> {
        <f32 as Elem>::slice(t).to_vec()
    }

    /// `tf.eye(3)` is `MatrixDiagV3(ones[3], k=0, -1, -1, 0)`; `tf.linalg.diag` of a batch.
    #[test]
    fn eye_and_batched_diag() {
        let e =
            run("MatrixDiagV3", None, vec![t(&[3], &[1.0; 3]), ints(&[0]), ints(&[-1]), ints(&[-1]), t(&[], &[0.0])]);
        assert_eq!(e.shape, vec![3, 3]);
        assert_eq!(f32s(&e), [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        let d = run("MatrixDiag", None, vec![t(&[2, 2], &[1.0, 2.0, 3.0, 4.0])]);
        assert_eq!(d.shape, vec![2, 2, 2]);
        assert_eq!(f32s(&d), [1.0, 0.0, 0.0, 2.0, 3.0, 0.0, 0.0, 4.0]);
    }

    /// TensorFlow's documented example of `tf.linalg.diag` with `k = (-1, 1)` and the default
    /// `RIGHT_LEFT` alignment: a 3×3 tridiagonal matrix from a `[3, 3]` diagonal array.
    #[test]
    fn a_band_with_right_left_alignment() {
        // superdiagonal [1, 2] padded left (right-aligned): [0, 1, 2]; main [3, 4, 5];
        // subdiagonal [6, 7] padded right (left-aligned): [6, 7, 0].
        let diags = t(&[3, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 0.0]);
        let m = run("MatrixDiagV3", None, vec![diags, ints(&[-1, 1]), ints(&[-1]), ints(&[-1]), t(&[], &[9.0])]);
        assert_eq!(m.shape, vec![3, 3]);
        assert_eq!(f32s(&m), [3.0, 1.0, 9.0, 6.0, 4.0, 2.0, 9.0, 7.0, 5.0]);
        // The part of it, read back with the same alignment and a padding of -1.
        let p = run("MatrixDiagPartV3", None, vec![m.clone(), ints(&[-1, 1]), t(&[], &[-1.0])]);
        assert_eq!(p.shape, vec![3, 3]);
        assert_eq!(f32s(&p), [-1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, -1.0]);
        // LEFT_LEFT (the V2 layout) pads every short diagonal on the right.
        let p2 = run("MatrixDiagPartV2", None, vec![m.clone(), ints(&[-1, 1]), t(&[], &[-1.0])]);
        assert_eq!(f32s(&p2), [1.0, 2.0, -1.0, 3.0, 4.0, 5.0, 6.0, 7.0, -1.0]);
        // set_diag writes the main diagonal, leaving the rest.
        let s = run("MatrixSetDiagV3", None, vec![m, t(&[3], &[-3.0, -4.0, -5.0]), ints(&[0])]);
        assert_eq!(f32s(&s), [-3.0, 1.0, 9.0, 6.0, -4.0, 2.0, 9.0, 7.0, -5.0]);
    }

    /// A rectangular output from one superdiagonal with an explicit column count, and the
    /// main diagonal of a wide matrix.
    #[test]
    fn rectangular_matrices() {
        let m =
            run("MatrixDiagV3", None, vec![t(&[2], &[1.0, 2.0]), ints(&[1]), ints(&[2]), ints(&[4]), t(&[], &[0.0])]);
        assert_eq!(m.shape, vec![2, 4]);
        assert_eq!(f32s(&m), [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0]);
        let p = run("MatrixDiagPart", None, vec![t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]);
        assert_eq!(p.shape, vec![2]);
        assert_eq!(f32s(&p), [1.0, 5.0]);
        // Inconsistent sizes are TensorFlow's error, not a wrong answer.
        let f = prepare(&node("MatrixDiagV3", None)).unwrap().unwrap();
        let bad =
            f(vec![t(&[2], &[1.0, 2.0]), ints(&[0]), ints(&[5]), ints(&[5]), t(&[], &[0.0])].into_iter().collect());
        assert!(bad.is_err());
    }
}
