//! TensorFlow's Optional ops (`optional_ops.cc`): a `DT_VARIANT` scalar holding a list of
//! tensors or nothing. TF2's `cond_v2` wraps each differentiated branch's intermediates in
//! Optionals (`OptionalFromValue` in the branch that ran, `OptionalNone` in the others) so
//! the gradient's `If`/`Case` can unwrap the ones of the branch taken (`OptionalGetValue`).
//! An Optional is immutable and shares its component tensors. Errors use TensorFlow's
//! messages.

use autoclust_graph::{AttrValue, DType, ListValue, Node, Shape, Tensor};

use super::shape_ops::debug_shape;
use super::{arity, one, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The Optional `t` holds.
fn optional_of(t: &Tensor) -> KResult<&Option<Vec<Tensor>>> {
    t.as_optional().ok_or_else(|| {
        KernelError::invalid(format!("Input tensor must be an Optional (variant scalar), got {}", t.dtype))
    })
}

/// Whether `shape` is one of the tensors `declared` admits (unknown rank or dims match).
fn admits(declared: &Shape, shape: &[usize]) -> bool {
    match &declared.dims {
        None => true,
        Some(d) => d.len() == shape.len() && d.iter().zip(shape).all(|(d, &s)| d.is_none_or(|d| d == s as i64)),
    }
}

/// How TensorFlow's `PartialTensorShape::DebugString` writes a declared shape.
fn shape_text(s: &Shape) -> String {
    match &s.dims {
        None => "<unknown>".to_string(),
        Some(d) => {
            let dims: Vec<String> = d.iter().map(|d| d.map_or("?".to_string(), |d| d.to_string())).collect();
            format!("[{}]", dims.join(","))
        }
    }
}

/// Prepares an Optional kernel, or `None` if `node` is not an Optional op.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "OptionalFromValue" => Box::new(|inp: Inputs| one(Tensor::from_optional(Some(inp.into_iter().collect())))),
        "OptionalNone" => Box::new(|inp: Inputs| {
            arity(&inp, 0)?;
            one(Tensor::from_optional(None))
        }),
        "OptionalHasValue" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            one(Tensor::scalar_bool(optional_of(&inp[0])?.is_some()))
        }),
        "OptionalGetValue" => {
            let types: Vec<DType> = node
                .attr("output_types")
                .and_then(AttrValue::as_type_list)
                .ok_or_else(|| KernelError::invalid("OptionalGetValue needs its output_types attribute"))?
                .to_vec();
            let shapes: Vec<Shape> = match node.attr("output_shapes") {
                Some(AttrValue::List(ListValue::Shape(v))) if v.len() == types.len() => v.clone(),
                _ => vec![Shape::unknown(); types.len()],
            };
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let Some(components) = optional_of(&inp[0])? else {
                    return Err(KernelError::invalid("The optional variant does not have a value."));
                };
                if components.len() != types.len() {
                    return Err(KernelError::invalid(format!(
                        "The expected number of components is {} but the actual number of components is {}.",
                        types.len(),
                        components.len()
                    )));
                }
                for (i, (t, (&dtype, shape))) in components.iter().zip(types.iter().zip(&shapes)).enumerate() {
                    if t.dtype != dtype {
                        return Err(KernelError::invalid(format!(
                            "The expected type at index {i} is {dtype}, but the actual type is {}.",
                            t.dtype
                        )));
                    }
                    if !admits(shape, &t.shape) {
                        return Err(KernelError::invalid(format!(
                            "The expected shape at index {i} is {}, but the actual shape is {}.",
                            shape_text(shape),
                            debug_shape(&t.shape)
                        )));
                    }
                }
                Ok(components.iter().cloned().collect::<Outputs>())
            })
        }
        _ => return Ok(None),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::probe;

    fn run(node: &Node, inputs: Vec<Tensor>) -> KResult<Outputs> {
        (prepare(node)?.expect("an Optional op"))(inputs.into_iter().collect())
    }

    fn get_value(types: &[DType], shapes: Vec<Shape>) -> Node {
        let mut n = probe("OptionalGetValue");
        n.attrs.insert("output_types".into(), AttrValue::List(ListValue::Type(types.to_vec())));
        n.attrs.insert("output_shapes".into(), AttrValue::List(ListValue::Shape(shapes)));
        n
    }

    #[test]
    fn a_value_round_trips_and_none_has_none() {
        let x = Tensor::from_f32(vec![2], vec![1.0, 2.0]).unwrap();
        let k = Tensor::scalar_i32(7);
        let opt = run(&probe("OptionalFromValue"), vec![x.clone(), k.clone()]).unwrap().remove(0);
        assert_eq!(opt.dtype, DType::Variant);
        assert_eq!(run(&probe("OptionalHasValue"), vec![opt.clone()]).unwrap()[0], Tensor::scalar_bool(true));
        let shapes = vec![Shape::with_dims(vec![None]), Shape::scalar()];
        let got = run(&get_value(&[DType::Float32, DType::Int32], shapes.clone()), vec![opt.clone()]).unwrap();
        assert_eq!(got.to_vec(), vec![x, k]);

        let none = run(&probe("OptionalNone"), vec![]).unwrap().remove(0);
        assert_eq!(run(&probe("OptionalHasValue"), vec![none.clone()]).unwrap()[0], Tensor::scalar_bool(false));
        let err = run(&get_value(&[DType::Float32, DType::Int32], shapes), vec![none]).unwrap_err();
        assert!(err.to_string().contains("The optional variant does not have a value."), "{err}");
    }

    #[test]
    fn get_value_checks_count_types_and_shapes() {
        let x = Tensor::from_f32(vec![2], vec![1.0, 2.0]).unwrap();
        let opt = run(&probe("OptionalFromValue"), vec![x]).unwrap().remove(0);
        let count = run(&get_value(&[DType::Float32, DType::Float32], vec![Shape::unknown(); 2]), vec![opt.clone()]);
        assert!(count.unwrap_err().to_string().contains("expected number of components is 2"));
        let dtype = run(&get_value(&[DType::Int32], vec![Shape::unknown()]), vec![opt.clone()]);
        assert!(dtype.unwrap_err().to_string().contains("expected type at index 0 is int32"));
        let shape = run(&get_value(&[DType::Float32], vec![Shape::with_dims(vec![Some(3)])]), vec![opt.clone()]);
        assert!(shape
            .unwrap_err()
            .to_string()
            .contains("expected shape at index 0 is [3], but the actual shape is [2]"));
        let not_optional = run(&probe("OptionalHasValue"), vec![Tensor::scalar_f32(1.0)]);
        assert!(not_optional.is_err());
    }
}
