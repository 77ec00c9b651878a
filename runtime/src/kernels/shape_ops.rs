//! Shape kernels and pass-throughs: `Const`, `Identity`, `IdentityN`,
//! `StopGradient`, `Snapshot`, `NoOp`, `Reshape` (one `-1`), `Shape`,
//! `ShapeN`, `Size`, `Rank` (with `out_type`), `ExpandDims`, `Squeeze`.
//! Reshapes share the input buffer: only the shape changes.

use autoclust_graph::{AttrValue, DType, Node, Tensor};

use super::{
    arity, attr_ints_or, attr_type_or, int_scalar, int_tensor, int_values, norm_axis, one, Inputs, Outputs, PureFn,
};
use crate::error::{KResult, KernelError};

/// `t` with a new shape holding the same number of elements (one `-1` inferred).
pub fn reshape(t: Tensor, spec: &[i64]) -> KResult<Tensor> {
    let n = t.num_elements();
    let mut unknown = None;
    let mut known = 1usize;
    for (i, &d) in spec.iter().enumerate() {
        if d == -1 {
            if unknown.replace(i).is_some() {
                return Err(KernelError::invalid("Reshape: only one input size may be -1"));
            }
        } else if d < 0 {
            return Err(KernelError::invalid(format!("Reshape: size {i} must be non-negative, not {d}")));
        } else {
            known = known.checked_mul(d as usize).ok_or_else(|| {
                KernelError::invalid(format!("Reshape: shape {spec:?} has more elements than can be counted"))
            })?;
        }
    }
    let mut shape: Vec<usize> = spec.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = unknown {
        if known == 0 || !n.is_multiple_of(known) {
            return Err(KernelError::invalid(format!(
                "Reshape: cannot reshape a tensor with {n} elements to shape {spec:?}"
            )));
        }
        shape[i] = n / known;
    } else if known != n {
        return Err(KernelError::invalid(format!(
            "Reshape: cannot reshape a tensor with {n} elements to shape {spec:?} ({known} elements)"
        )));
    }
    Ok(Tensor { shape, ..t })
}

/// A shape as TensorFlow's `TensorShape::DebugString` prints it: `[2,3]`, `[]`.
pub(crate) fn debug_shape(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(","))
}

fn shape_of(t: &Tensor, out: DType) -> KResult<Tensor> {
    int_tensor(out, vec![t.rank()], t.shape.iter().map(|&d| d as i64).collect())
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "Const" => {
            match node.attr("value") {
                Some(AttrValue::Tensor(t)) => {
                    let value = t.clone();
                    Box::new(move |_inp: Inputs| one(value.clone()))
                }
                // A compact constant (a large splat) is expanded when the node first runs,
                // through the size budget, and kept: a constant in a branch or loop body
                // that never runs costs nothing and cannot fail (as in TensorFlow).
                Some(AttrValue::Compact(c)) => {
                    let compact = c.clone();
                    let expanded: std::sync::OnceLock<KResult<Tensor>> = std::sync::OnceLock::new();
                    Box::new(move |_inp: Inputs| {
                        let t = expanded.get_or_init(|| {
                            compact.expand().map_err(|e| match e {
                                autoclust_graph::TensorError::TooLarge(e) => KernelError::TooLarge(e),
                                e => KernelError::invalid(e.to_string()),
                            })
                        });
                        one(t.clone()?)
                    })
                }
                _ => return Err(KernelError::Attr("value".into())),
            }
        }
        autoclust_graph::protocol::SAME_SHAPE_OP => {
            let variable = node.attr("variable").and_then(|a| a.as_str()).unwrap_or("").to_string();
            Box::new(move |mut inp: Inputs| {
                if inp.len() != 2 {
                    return Err(KernelError::Arity { expected: 2, got: inp.len() });
                }
                let current = inp.pop().expect("two inputs");
                let value = inp.pop().expect("two inputs");
                // The plain executor's check and words for the same write.
                super::resource::same_shape(&variable, &current, &value)?;
                one(value)
            })
        }
        "Identity" | "StopGradient" | "Snapshot" | "PreventGradient" | "GuaranteeConst" | "EnsureShape"
        | "CheckNumerics" | "CheckNumericsV2" => {
            let ensure_shape = node.op == "EnsureShape";
            let check_numerics = match node.op.as_str() {
                "CheckNumerics" => Some(false),
                "CheckNumericsV2" => Some(true),
                _ => None,
            };
            let wanted = node.attr("shape").and_then(|a| a.as_shape()).cloned();
            let message = node.attr("message").and_then(|a| a.as_str()).unwrap_or("").to_string();
            Box::new(move |mut inp: Inputs| {
                if inp.is_empty() {
                    return Err(KernelError::Arity { expected: 1, got: 0 });
                }
                inp.truncate(1);
                let t = inp.pop().expect("one input");
                if ensure_shape {
                    if let Some(dims) = wanted.as_ref().and_then(|s| s.dims.as_ref()) {
                        let ok = dims.len() == t.rank()
                            && dims.iter().zip(&t.shape).all(|(d, &n)| d.is_none_or(|d| d == n as i64));
                        if !ok {
                            return Err(KernelError::invalid(format!(
                                "Shape of tensor {:?} is not compatible with expected shape",
                                t.shape
                            )));
                        }
                    }
                }
                if let Some(signed) = check_numerics {
                    if let Some(what) = t.to_f64_vec().and_then(|v| non_finite(&v, signed)) {
                        return Err(KernelError::invalid(format!("{message} : Tensor had {what} values")));
                    }
                }
                one(t)
            })
        }
        "IdentityN" => Box::new(|inp: Inputs| Ok(inp.into_iter().collect())),
        "NoOp" | "ControlTrigger" => Box::new(|_inp: Inputs| Ok(Outputs::new())),
        "Reshape" => Box::new(|mut inp: Inputs| {
            arity(&inp, 2)?;
            let spec = int_values(&inp[1], "shape")?;
            inp.truncate(1);
            one(reshape(inp.pop().expect("one input"), &spec)?)
        }),
        "Shape" => {
            let out = attr_type_or(node, "out_type", DType::Int32)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(shape_of(&inp[0], out)?)
            })
        }
        "ConcatOffset" => Box::new(|inp: Inputs| {
            if inp.len() < 3 {
                return Err(KernelError::invalid(format!(
                    "ConcatOffset needs at least 2 shapes, got {}",
                    inp.len().saturating_sub(1)
                )));
            }
            let shapes: Vec<Vec<i64>> = inp[1..].iter().map(|t| int_values(t, "shape")).collect::<KResult<_>>()?;
            let rank = shapes[0].len();
            let dim = int_scalar(&inp[0], "concat_dim")?;
            let axis = if dim < 0 { dim + rank as i64 } else { dim };
            if axis < 0 || axis as usize >= rank {
                return Err(KernelError::invalid(format!("Concat dim is out of range: {dim} vs. {rank}")));
            }
            let axis = axis as usize;
            let mut offset = 0i64;
            let mut out = Outputs::new();
            for (k, s) in shapes.iter().enumerate() {
                if s.len() != rank || s.iter().enumerate().any(|(d, &x)| d != axis && x != shapes[0][d]) {
                    return Err(KernelError::invalid(format!(
                        "input dimensions should match: shape[0] = {:?} vs. shape[{k}] = {s:?}",
                        shapes[0]
                    )));
                }
                let mut o = vec![0i64; rank];
                o[axis] = offset;
                offset += s[axis];
                out.push(int_tensor(inp[k + 1].dtype, vec![rank], o)?);
            }
            Ok(out)
        }),
        "ShapeN" => {
            let out = attr_type_or(node, "out_type", DType::Int32)?;
            Box::new(move |inp: Inputs| inp.iter().map(|t| shape_of(t, out)).collect())
        }
        "Size" => {
            let out = attr_type_or(node, "out_type", DType::Int32)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                one(int_tensor(out, vec![], vec![inp[0].num_elements() as i64])?)
            })
        }
        "Rank" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            one(Tensor::scalar_i32(inp[0].rank() as i32))
        }),
        "ExpandDims" => Box::new(|mut inp: Inputs| {
            arity(&inp, 2)?;
            let axis = int_scalar(&inp[1], "dim")?;
            inp.truncate(1);
            let mut t = inp.pop().expect("one input");
            let ax = norm_axis(axis, t.rank() + 1, "ExpandDims dim")?;
            t.shape.insert(ax, 1);
            one(t)
        }),
        "Squeeze" => {
            let dims = attr_ints_or(node, "squeeze_dims").or_else(|_| attr_ints_or(node, "axis"))?;
            Box::new(move |mut inp: Inputs| {
                arity(&inp, 1)?;
                let mut t = inp.pop().expect("one input");
                let rank = t.rank();
                let mut drop = vec![false; rank];
                if dims.is_empty() {
                    for (i, &d) in t.shape.iter().enumerate() {
                        drop[i] = d == 1;
                    }
                } else {
                    for &d in &dims {
                        let i = norm_axis(d, rank, "squeeze dim")?;
                        if t.shape[i] != 1 {
                            return Err(KernelError::invalid(format!(
                                "Can not squeeze dim[{i}], expected a dimension of 1, got {}",
                                t.shape[i]
                            )));
                        }
                        drop[i] = true;
                    }
                }
                t.shape = t.shape.iter().zip(&drop).filter(|(_, &x)| !x).map(|(&d, _)| d).collect();
                one(t)
            })
        }
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// What `CheckNumerics` (`signed`: `CheckNumericsV2`, which tells −Inf from +Inf) says a
/// tensor had, in TensorFlow's words: the kinds present in the order −Inf, +Inf (or Inf),
/// NaN, joined as "A", "A and B" or "A, B, and C". `None` when every value is finite.
fn non_finite(values: &[f64], signed: bool) -> Option<String> {
    let (mut neg, mut pos, mut nan) = (false, false, false);
    for x in values {
        neg |= *x == f64::NEG_INFINITY;
        pos |= *x == f64::INFINITY;
        nan |= x.is_nan();
    }
    let kinds: Vec<&str> = if signed {
        [(neg, "-Inf"), (pos, "+Inf"), (nan, "NaN")].iter().filter(|k| k.0).map(|k| k.1).collect()
    } else {
        [(neg || pos, "Inf"), (nan, "NaN")].iter().filter(|k| k.0).map(|k| k.1).collect()
    };
    match kinds.as_slice() {
        [] => None,
        [a] => Some(a.to_string()),
        [a, b] => Some(format!("{a} and {b}")),
        [a, b, c] => Some(format!("{a}, {b}, and {c}")),
        _ => unreachable!("three kinds at most"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::AttrValue;

    #[test]
    fn concat_offsets_accumulate_along_the_axis() {
        let f = prepare(&node("ConcatOffset", &[])).unwrap().unwrap();
        let v = |x: &[i32]| Tensor::from_i32(vec![x.len()], x.to_vec()).unwrap();
        let out = f([Tensor::scalar_i32(-1), v(&[2, 3]), v(&[2, 5]), v(&[2, 1])].into_iter().collect()).unwrap();
        let got: Vec<&[i32]> = out.iter().map(|t| t.as_i32().unwrap()).collect();
        assert_eq!(got, vec![&[0, 0][..], &[0, 3][..], &[0, 8][..]]);
        let e = f([Tensor::scalar_i32(1), v(&[2, 3]), v(&[3, 5])].into_iter().collect()).unwrap_err();
        assert!(e.to_string().contains("should match"), "{e}");
    }

    #[test]
    fn reshape_infers_and_shares_buffer() {
        let t = Tensor::from_f32(vec![2, 3], vec![1.0; 6]).unwrap();
        let spec = Tensor::from_i32(vec![2], vec![3, -1]).unwrap();
        let r = run1(&node("Reshape", &[]), &[t.clone(), spec]).unwrap();
        assert_eq!(r.shape, vec![3, 2]);
        assert_eq!(r.as_f32().unwrap().as_ptr(), t.as_f32().unwrap().as_ptr());
        let bad = Tensor::from_i32(vec![1], vec![4]).unwrap();
        assert!(run1(&node("Reshape", &[]), &[t, bad]).is_err());
        // An empty tensor to a shape whose other dimensions overflow: an error, not a
        // wrapped count that matches 0.
        let empty = Tensor::from_f32(vec![0], vec![]).unwrap();
        let huge = Tensor::from_i64(vec![3], vec![1 << 62, 4, 1]).unwrap();
        let e = run1(&node("Reshape", &[]), &[empty, huge]).unwrap_err();
        assert!(e.to_string().contains("more elements than can be counted"), "{e}");
    }

    #[test]
    fn shape_size_expand_squeeze() {
        let t = Tensor::from_f32(vec![2, 1, 3], vec![0.0; 6]).unwrap();
        let s = run1(&node("Shape", &[("out_type", AttrValue::Type(DType::Int64))]), std::slice::from_ref(&t)).unwrap();
        assert_eq!(s.as_i64().unwrap(), &[2, 1, 3]);
        let n = run1(&node("Size", &[]), std::slice::from_ref(&t)).unwrap();
        assert_eq!(n.as_i32().unwrap(), &[6]);
        let e = run1(&node("ExpandDims", &[]), &[t.clone(), Tensor::scalar_i32(-1)]).unwrap();
        assert_eq!(e.shape, vec![2, 1, 3, 1]);
        let q = run1(&node("Squeeze", &[]), &[e]).unwrap();
        assert_eq!(q.shape, vec![2, 3]);
        let sq = node("Squeeze", &[("squeeze_dims", AttrValue::List(autoclust_graph::ListValue::I(vec![0])))]);
        assert!(run1(&sq, &[t]).is_err());
    }

    /// The messages of TensorFlow 2.21's `CheckNumerics` and `CheckNumericsV2` for each mix of
    /// non-finite values (recorded from `gen_array_ops.check_numerics{,_v2}(x, message="msg")`).
    #[test]
    fn check_numerics_says_what_tensorflow_says() {
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        let cases: [(&[f32], &str, &str); 7] = [
            (&[1.0, nan], "NaN", "NaN"),
            (&[inf, 1.0], "Inf", "+Inf"),
            (&[-inf], "Inf", "-Inf"),
            (&[nan, inf], "Inf and NaN", "+Inf and NaN"),
            (&[inf, -inf], "Inf", "-Inf and +Inf"),
            (&[nan, inf, -inf], "Inf and NaN", "-Inf, +Inf, and NaN"),
            (&[nan, -inf], "Inf and NaN", "-Inf and NaN"),
        ];
        let msg = [("message", AttrValue::S(b"msg".to_vec()))];
        for (values, v1, v2) in cases {
            let x = Tensor::from_f32(vec![values.len()], values.to_vec()).unwrap();
            for (op, want) in [("CheckNumerics", v1), ("CheckNumericsV2", v2)] {
                let e = run1(&node(op, &msg), std::slice::from_ref(&x)).unwrap_err();
                assert!(e.to_string().contains(&format!("msg : Tensor had {want} values")), "{op} {values:?}: {e}");
            }
        }
        let fine = Tensor::from_f32(vec![2], vec![1.0, -3.0]).unwrap();
        let y = run1(&node("CheckNumericsV2", &msg), std::slice::from_ref(&fine)).unwrap();
        assert_eq!(y.as_f32().unwrap().as_ptr(), fine.as_f32().unwrap().as_ptr());
    }
}
