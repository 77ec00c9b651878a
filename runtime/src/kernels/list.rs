//! TensorFlow's TensorList ops (`list_kernels.cc`): the `DT_VARIANT` lists that Keras RNN
//! loops (`TensorListFromTensor` to unstack the time steps, `TensorListReserve` +
//! `TensorListSetItem` + `TensorListStack` for the outputs), `tf.TensorArray` and the
//! while-loop gradient accumulators (`EmptyTensorList`, `TensorListPushBack`,
//! `TensorListPopBack`) are made of.
//!
//! A list is an immutable value ([`TensorList`] in a variant scalar): every op returns a new
//! list sharing the element tensors, so a list seen by another op never changes. A slot
//! reserved but never set reads as zeros of the element shape, which must then be known —
//! from the list, the op's `element_shape` operand or (for a stack) the other elements —
//! as in TensorFlow. Errors use TensorFlow's messages.

use autoclust_graph::{DType, Node, Tensor, TensorData, TensorList};

use super::elementwise::add_n;
use super::shape_ops::debug_shape;
use super::{arity, attr_type, int_scalar, int_values, one, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The list `t` holds, owned: moved out when `t` is its only reference (the
/// executor moves a value to its last use and a body's feed to its `_Arg`, so
/// a loop threading a list through `TensorListSetItem`/`PushBack` updates it in
/// place instead of copying every item each iteration), copied otherwise.
fn into_list(t: Tensor, what: &str) -> KResult<TensorList> {
    match t.data {
        TensorData::List(l) => Ok(std::sync::Arc::try_unwrap(l).unwrap_or_else(|l| (*l).clone())),
        _ => Err(KernelError::invalid(format!("{what} must be a TensorList (variant), got {}", t.dtype))),
    }
}

fn list_of<'t>(t: &'t Tensor, what: &str) -> KResult<&'t TensorList> {
    t.as_list().ok_or_else(|| KernelError::invalid(format!("{what} must be a TensorList (variant), got {}", t.dtype)))
}

/// An `element_shape` operand: a scalar −1 is an unknown rank, −1 entries unknown dims.
fn element_shape(t: &Tensor) -> KResult<Option<Vec<i64>>> {
    int_values(t, "element_shape")?;
    autoclust_graph::element_shape_operand(t).ok_or_else(|| {
        KernelError::invalid(format!(
            "element_shape must be a vector or the scalar -1, got shape {}",
            debug_shape(&t.shape)
        ))
    })
}

/// The most specific shape both describe, or an error if they conflict.
fn merge(a: &Option<Vec<i64>>, b: &Option<Vec<i64>>) -> KResult<Option<Vec<i64>>> {
    autoclust_graph::merge_element_shapes(a, b).ok_or_else(|| {
        let text = |s: &Option<Vec<i64>>| format!("{:?}", s.as_deref().unwrap_or_default());
        KernelError::invalid(format!("Incompatible shapes during merge: {} vs. {}", text(a), text(b)))
    })
}

/// Zeros for an unset slot; the shape must be fully known.
fn zeros(dtype: DType, shape: &Option<Vec<i64>>) -> KResult<Tensor> {
    match shape {
        Some(d) if d.iter().all(|&x| x >= 0) => Tensor::zeros(dtype, d.iter().map(|&x| x as usize).collect())
            .map_err(|e| KernelError::invalid(e.to_string())),
        _ => Err(KernelError::invalid(format!(
            "Trying to read an uninitialized tensor but element_shape: {} is not fully defined",
            shape_text(shape)
        ))),
    }
}

fn shape_text(s: &Option<Vec<i64>>) -> String {
    match s {
        None => "<unknown>".into(),
        Some(d) => format!(
            "[{}]",
            d.iter().map(|x| if *x < 0 { "?".into() } else { x.to_string() }).collect::<Vec<_>>().join(",")
        ),
    }
}

/// An element that is about to enter a list: the list's dtype, a compatible shape.
fn check_element(list: &TensorList, t: &Tensor) -> KResult<()> {
    if t.dtype != list.element_dtype {
        return Err(KernelError::invalid(format!(
            "Invalid data types; list elements {} but tried to append {}",
            list.element_dtype, t.dtype
        )));
    }
    let have = Some(t.shape.iter().map(|&d| d as i64).collect());
    merge(&list.element_shape, &have).map_err(|_| {
        KernelError::invalid(format!(
            "Tried to append a tensor with incompatible shape to a list. Op element shape: {} list shape: {}",
            debug_shape(&t.shape),
            shape_text(&list.element_shape)
        ))
    })?;
    Ok(())
}

/// Index `i` checked against a list of `len` elements.
fn index_of(i: i64, len: usize, what: &str) -> KResult<usize> {
    if i < 0 || i as usize >= len {
        return Err(KernelError::invalid(format!("Trying to {what} element {i} in a list with {len} elements.")));
    }
    Ok(i as usize)
}

/// `[n, ...element]` from the elements, unset ones as zeros of the known element shape.
fn stack(list: &TensorList, shape_hint: &Option<Vec<i64>>) -> KResult<Tensor> {
    let mut shape = merge(&list.element_shape, shape_hint)?;
    for t in list.items().iter().flatten() {
        shape = merge(&shape, &Some(t.shape.iter().map(|&d| d as i64).collect()))?;
    }
    if list.is_empty() {
        let z = zeros(list.element_dtype, &shape).map_err(|_| {
            KernelError::invalid(format!(
                "Tried to stack elements of an empty list with non-fully-defined element_shape: {}",
                shape_text(&shape)
            ))
        })?;
        let mut dims = vec![0usize];
        dims.extend(&z.shape);
        return Tensor::zeros(list.element_dtype, dims).map_err(|e| KernelError::invalid(e.to_string()));
    }
    let items: Vec<Tensor> = list
        .items()
        .iter()
        .map(|x| match x {
            Some(t) => Ok(t.clone()),
            None => zeros(list.element_dtype, &shape),
        })
        .collect::<KResult<_>>()?;
    super::array::pack(&items, 0)
}

/// `AddN` of TensorLists (TensorFlow's `TensorListBinaryAdd`, met where RNN gradients
/// meet): slot by slot, an unset slot taking the other list's element.
pub(crate) fn add_lists(lists: &[Tensor]) -> KResult<Tensor> {
    let first = list_of(&lists[0], "AddN input")?;
    let mut items = first.items().to_vec();
    for t in &lists[1..] {
        let other = list_of(t, "AddN input")?;
        if other.element_dtype != first.element_dtype {
            return Err(KernelError::invalid(format!(
                "Trying to add two lists of tensors of different dtypes. One is {} and the other is {}",
                first.element_dtype, other.element_dtype
            )));
        }
        if other.len() != items.len() {
            return Err(KernelError::invalid(format!(
                "Trying to add two lists of tensors with different lengths. One is {} and the other is {}",
                items.len(),
                other.len()
            )));
        }
        for (acc, x) in items.iter_mut().zip(other.items()) {
            *acc = match (acc.take(), x) {
                (Some(a), Some(b)) => {
                    let pair: Inputs = [a, b.clone()].into_iter().collect();
                    Some(super::dispatch_num!(first.element_dtype, add_n(pair))?)
                }
                (a, b) => a.or_else(|| b.clone()),
            };
        }
    }
    Ok(Tensor::from_list(first.with_items(items)))
}

/// Prepares a TensorList kernel, or `None` if `node` is not a TensorList op.
/// A list length taken from an operand's value, checked against the tensor budget (a
/// slot costs what a variant handle does) before the slots are allocated.
/// The rows of `t` along its first dimension, each without that dimension: a list's
/// elements made from a tensor (`TensorListFromTensor`, the scatters).
fn rows_of(t: &Tensor) -> KResult<Vec<Tensor>> {
    let mut rows = super::array::split(t, 0, &vec![1; t.shape[0]])?;
    for r in &mut rows {
        r.shape.remove(0);
    }
    Ok(rows.into_vec())
}

/// The element shape of a list made from `t`'s rows: `hint` merged with the rows' shape,
/// TensorFlow's error when they disagree.
fn rows_element_shape(hint: &Option<Vec<i64>>, t: &Tensor) -> KResult<Option<Vec<i64>>> {
    let elem: Vec<i64> = t.shape[1..].iter().map(|&d| d as i64).collect();
    merge(hint, &Some(elem)).map_err(|_| {
        KernelError::invalid(format!(
            "Specified a list with shape {} from a tensor with shape {}",
            shape_text(hint),
            debug_shape(&t.shape)
        ))
    })
}

fn slots(n: u64) -> KResult<usize> {
    Ok(autoclust_graph::limits::check_count(DType::Variant, n)?)
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let op = node.op.as_str();
    if !matches!(
        op,
        "EmptyTensorList"
            | "TensorListReserve"
            | "TensorListFromTensor"
            | "TensorListGetItem"
            | "TensorListSetItem"
            | "TensorListPushBack"
            | "TensorListPopBack"
            | "TensorListStack"
            | "TensorListLength"
            | "TensorListElementShape"
            | "TensorListGather"
            | "TensorListConcatV2"
            | "TensorListSplit"
            | "TensorListResize"
            | "TensorListScatterIntoExistingList"
            | "TensorListScatter"
            | "TensorListScatterV2"
    ) {
        return Ok(None);
    }
    let dtype = match op {
        "TensorListLength" | "TensorListResize" => DType::Int32,
        "TensorListElementShape" => attr_type(node, "shape_type")?,
        _ => attr_type(node, "element_dtype")?,
    };
    let resize = node.attr("resize_if_index_out_of_bounds").and_then(|a| a.as_bool()).unwrap_or(false);
    let num_elements = node.attr("num_elements").and_then(|a| a.as_int()).unwrap_or(-1);
    let f: PureFn = match op {
        "EmptyTensorList" => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            let element_shape = element_shape(&inp[0])?;
            one(Tensor::from_list(TensorList::new(dtype, element_shape, Vec::new())))
        }),
        "TensorListReserve" => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            let element_shape = element_shape(&inp[0])?;
            let n = int_scalar(&inp[1], "num_elements")?;
            if n < 0 {
                return Err(KernelError::invalid(format!(
                    "The num_elements to reserve must be a non negative number, but got {n}"
                )));
            }
            let n = slots(n as u64)?;
            one(Tensor::from_list(TensorList::new(dtype, element_shape, vec![None; n])))
        }),
        "TensorListFromTensor" => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            let t = &inp[0];
            if t.rank() == 0 {
                return Err(KernelError::invalid("Tensor must be at least a vector, but saw shape: []"));
            }
            let hint = element_shape(&inp[1])?;
            let element_shape = rows_element_shape(&hint, t)?;
            let items = rows_of(t)?.into_iter().map(Some).collect();
            one(Tensor::from_list(TensorList::new(dtype, hint.or(element_shape), items)))
        }),
        "TensorListGetItem" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            let list = list_of(&inp[0], "input_handle")?;
            let i = index_of(int_scalar(&inp[1], "index")?, list.len(), "access")?;
            match &list.items()[i] {
                Some(t) => one(t.clone()),
                None => one(zeros(dtype, &merge(&list.element_shape, &element_shape(&inp[2])?)?)?),
            }
        }),
        "TensorListSetItem" => Box::new(move |mut inp: Inputs| {
            arity(&inp, 3)?;
            check_element(list_of(&inp[0], "input_handle")?, &inp[2])?;
            let i = int_scalar(&inp[1], "index")?;
            let len = list_of(&inp[0], "input_handle")?.len();
            if i < 0 || (i as usize >= len && !resize) {
                return Err(KernelError::invalid(format!(
                    "Trying to modify element {i} in a list with {len} elements."
                )));
            }
            let item = inp.pop().expect("three inputs");
            if i as usize >= len {
                // Growing (a dynamic-size TensorArray's write): the list as the tensor
                // stacking it must fit the budget. A write within a reserved length is not
                // checked: most slots of a large reservation may never be set.
                super::collection_budget(i as usize + 1, &item)?;
            }
            let mut list = into_list(inp.swap_remove(0), "input_handle")?;
            if i as usize >= list.len() {
                list.resize(slots(i as u64 + 1)?);
            }
            list.set(i as usize, item);
            one(Tensor::from_list(list))
        }),
        "TensorListPushBack" => Box::new(move |mut inp: Inputs| {
            arity(&inp, 2)?;
            check_element(list_of(&inp[0], "input_handle")?, &inp[1])?;
            let item = inp.pop().expect("two inputs");
            super::collection_budget(list_of(&inp[0], "input_handle")?.len() + 1, &item)?;
            let mut list = into_list(inp.pop().expect("two inputs"), "input_handle")?;
            list.push(item);
            one(Tensor::from_list(list))
        }),
        "TensorListPopBack" => Box::new(move |mut inp: Inputs| {
            arity(&inp, 2)?;
            let shape_operand = inp.pop().expect("two inputs");
            let mut list = into_list(inp.pop().expect("two inputs"), "input_handle")?;
            let last = list.pop().ok_or_else(|| KernelError::invalid("Trying to pop from an empty list."))?;
            let t = match last {
                Some(t) => t,
                None => zeros(dtype, &merge(&list.element_shape, &element_shape(&shape_operand)?)?)?,
            };
            let mut o = Outputs::new();
            o.push(Tensor::from_list(list));
            o.push(t);
            Ok(o)
        }),
        "TensorListStack" => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            let list = list_of(&inp[0], "input_handle")?;
            if list.element_dtype != dtype {
                return Err(KernelError::invalid(format!(
                    "Invalid data types; op elements {dtype} but list elements {}",
                    list.element_dtype
                )));
            }
            if num_elements >= 0 && num_elements as usize != list.len() {
                return Err(KernelError::invalid(format!(
                    "Operation expected a list with {num_elements} elements but got a list with {} elements.",
                    list.len()
                )));
            }
            one(stack(list, &element_shape(&inp[1])?)?)
        }),
        "TensorListGather" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            let list = list_of(&inp[0], "input_handle")?;
            let hint = element_shape(&inp[2])?;
            let mut picked = Vec::new();
            for i in int_values(&inp[1], "indices")? {
                let k = index_of(i, list.len(), "gather")?;
                picked.push(list.items()[k].clone());
            }
            one(stack(&list.with_items(picked), &hint)?)
        }),
        "TensorListConcatV2" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            let list = list_of(&inp[0], "input_handle")?;
            let hint = element_shape(&inp[1])?;
            let leading = int_values(&inp[2], "leading_dims")?;
            // Unset elements are zeros of [leading_dims[i]] + the element shape after dim 0.
            let rest = merge(&list.element_shape, &hint)?.map(|d| d[1..].to_vec());
            let mut pieces = Vec::with_capacity(list.len());
            for (i, x) in list.items().iter().enumerate() {
                pieces.push(match x {
                    Some(t) if t.rank() == 0 => {
                        return Err(KernelError::invalid(
                            "Concat requires elements to be at least vectors, found scalars instead.",
                        ));
                    }
                    Some(t) => t.clone(),
                    None => {
                        let mut d = vec![*leading.get(i).ok_or_else(|| {
                            KernelError::invalid("Cannot concat an uninitialized element without leading_dims")
                        })?];
                        d.extend(rest.clone().unwrap_or_default());
                        zeros(dtype, &Some(d))?
                    }
                });
            }
            let lengths: Vec<i64> = pieces.iter().map(|t| t.shape[0] as i64).collect();
            let tensor = if pieces.is_empty() {
                let mut d = vec![0i64];
                d.extend(rest.unwrap_or_default());
                zeros(dtype, &Some(d))?
            } else {
                super::array::concat(&pieces, 0)?
            };
            let mut o = Outputs::new();
            o.push(tensor);
            o.push(Tensor::from_i64(vec![lengths.len()], lengths).expect("vector"));
            Ok(o)
        }),
        "TensorListSplit" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            let t = &inp[0];
            if t.rank() == 0 {
                return Err(KernelError::invalid("Tensor must be at least a vector, but saw shape: []"));
            }
            let lengths = int_values(&inp[2], "lengths")?;
            if lengths.iter().any(|&l| l < 0) || lengths.iter().sum::<i64>() != t.shape[0] as i64 {
                return Err(KernelError::invalid(format!(
                    "Unused values in tensor. Length of tensor: {} Values used: {}",
                    t.shape[0],
                    lengths.iter().sum::<i64>()
                )));
            }
            let sizes: Vec<usize> = lengths.iter().map(|&l| l as usize).collect();
            let items = super::array::split(t, 0, &sizes)?.into_iter().map(Some).collect();
            let mut elem: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
            elem[0] = -1;
            let element_shape = merge(&element_shape(&inp[1])?, &Some(elem))?;
            if t.dtype != dtype {
                return Err(KernelError::invalid(format!(
                    "Invalid data types; list elements {dtype} but tensor is {}",
                    t.dtype
                )));
            }
            one(Tensor::from_list(TensorList::new(dtype, element_shape, items)))
        }),
        "TensorListResize" => Box::new(move |inp: Inputs| {
            arity(&inp, 2)?;
            let list = list_of(&inp[0], "input_handle")?;
            let n = int_scalar(&inp[1], "size")?;
            if n < 0 {
                return Err(KernelError::invalid(format!("TensorListSlice expects size to be non-negative. Got: {n}")));
            }
            let mut list = list.clone();
            list.resize(slots(n as u64)?);
            one(Tensor::from_list(list))
        }),
        // A new list with row k of `tensor` at `indices[k]` (the last write wins), as long as
        // the largest index needs — for V2, at least `num_elements` (-1: no minimum); the
        // slots no index names are unset. `tf.TensorArray.scatter` on a fresh array.
        "TensorListScatter" | "TensorListScatterV2" => {
            let v2 = op == "TensorListScatterV2";
            Box::new(move |inp: Inputs| {
                arity(&inp, if v2 { 4 } else { 3 })?;
                let t = &inp[0];
                let indices = int_values(&inp[1], "indices")?;
                let hint = element_shape(&inp[2])?;
                let minimum = if v2 { int_scalar(&inp[3], "num_elements")? } else { -1 };
                if minimum < -1 {
                    return Err(KernelError::invalid(format!(
                        "TensorListScatter expects num_elements >= -1, found: {minimum}"
                    )));
                }
                if t.rank() == 0 || t.shape[0] != indices.len() {
                    return Err(KernelError::invalid(format!(
                        "Number of indices ({}) does not match the leading dimension of the tensor ({})",
                        indices.len(),
                        debug_shape(&t.shape)
                    )));
                }
                let element_shape = rows_element_shape(&hint, t)?;
                if let Some(&i) = indices.iter().find(|&&i| i < 0) {
                    return Err(KernelError::invalid(format!(
                        "Indices in TensorListScatter must all be non-negative. Found: {i}"
                    )));
                }
                let highest = indices.iter().map(|&i| i + 1).max().unwrap_or(0);
                let mut items = vec![None; slots(highest.max(minimum).max(0) as u64)?];
                for (&i, row) in indices.iter().zip(rows_of(t)?) {
                    items[i as usize] = Some(row);
                }
                if t.dtype != dtype {
                    return Err(KernelError::invalid(format!("element_dtype {dtype} but the tensor is {}", t.dtype)));
                }
                one(Tensor::from_list(TensorList::new(dtype, element_shape, items)))
            })
        }
        "TensorListScatterIntoExistingList" => Box::new(move |inp: Inputs| {
            arity(&inp, 3)?;
            let list = list_of(&inp[0], "input_handle")?;
            let t = &inp[1];
            let indices = int_values(&inp[2], "indices")?;
            if t.rank() == 0 || t.shape[0] != indices.len() {
                return Err(KernelError::invalid(format!(
                    "Number of indices ({}) does not match the leading dimension of the tensor ({})",
                    indices.len(),
                    debug_shape(&t.shape)
                )));
            }
            let mut items = list.items().to_vec();
            for (&i, row) in indices.iter().zip(rows_of(t)?) {
                check_element(list, &row)?;
                if i < 0 || i as usize >= items.len() {
                    return Err(KernelError::invalid(format!(
                        "Trying to scatter at index {i} in list with size {}",
                        items.len()
                    )));
                }
                items[i as usize] = Some(row);
            }
            one(Tensor::from_list(list.with_items(items)))
        }),
        "TensorListElementShape" => Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            let list = list_of(&inp[0], "input_handle")?;
            one(match &list.element_shape {
                None => super::int_tensor(dtype, Vec::new(), vec![-1])?,
                Some(d) => super::int_tensor(dtype, vec![d.len()], d.clone())?,
            })
        }),
        _ => Box::new(move |inp: Inputs| {
            arity(&inp, 1)?;
            let list = list_of(&inp[0], "input_handle")?;
            one(Tensor::scalar_i32(list.len() as i32))
        }),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::node;
    use autoclust_graph::AttrValue;

    fn kernel(op: &str) -> PureFn {
        prepare(&node(op, &[("element_dtype", AttrValue::Type(DType::Float32))])).unwrap().unwrap()
    }
    fn ints(v: &[i32]) -> Tensor {
        Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap()
    }
    fn run(f: &PureFn, inp: Vec<Tensor>) -> KResult<Outputs> {
        f(inp.into_iter().collect())
    }

    /// TensorFlow 2.21: `TensorListScatterV2(tensor=[[1,2],[3,4]], indices=[3,0],
    /// element_shape=[2], num_elements=5)` has length 5 and stacks to
    /// `[[3,4],[0,0],[0,0],[1,2],[0,0]]`; V1 with the same operands has length 4; a repeated
    /// index keeps the last row; a negative index is TensorFlow's error.
    #[test]
    fn scatter_makes_a_list_as_long_as_its_indices_need() {
        let t = Tensor::from_f32(vec![2, 2], vec![1., 2., 3., 4.]).unwrap();
        let v2 = run(&kernel("TensorListScatterV2"), vec![t.clone(), ints(&[3, 0]), ints(&[2]), Tensor::scalar_i32(5)])
            .unwrap()
            .remove(0);
        let n = run(&kernel("TensorListLength"), vec![v2.clone()]).unwrap();
        assert_eq!(n[0].as_i32().unwrap(), &[5]);
        let stacked = run(&kernel("TensorListStack"), vec![v2, ints(&[2])]).unwrap();
        assert_eq!(stacked[0].as_f32().unwrap(), &[3., 4., 0., 0., 0., 0., 1., 2., 0., 0.]);
        let v1 = run(&kernel("TensorListScatter"), vec![t.clone(), ints(&[3, 0]), ints(&[2])]).unwrap().remove(0);
        assert_eq!(run(&kernel("TensorListLength"), vec![v1]).unwrap()[0].as_i32().unwrap(), &[4]);
        let dup =
            run(&kernel("TensorListScatterV2"), vec![t.clone(), ints(&[1, 1]), ints(&[2]), Tensor::scalar_i32(-1)])
                .unwrap()
                .remove(0);
        let stacked = run(&kernel("TensorListStack"), vec![dup, ints(&[2])]).unwrap();
        assert_eq!(stacked[0].as_f32().unwrap(), &[0., 0., 3., 4.]);
        let e = run(&kernel("TensorListScatter"), vec![t, ints(&[-1, 0]), ints(&[2])]).unwrap_err().to_string();
        assert!(e.contains("Indices in TensorListScatter must all be non-negative"), "{e}");
    }

    /// An RNN's life cycle: unstack the inputs, reserve the outputs, set them in a loop,
    /// stack them; and a gradient accumulator's: push, then pop in reverse.
    #[test]
    fn unstack_set_stack_push_pop() {
        let x = Tensor::from_f32(vec![3, 2], vec![1., 2., 3., 4., 5., 6.]).unwrap();
        let xs = run(&kernel("TensorListFromTensor"), vec![x.clone(), ints(&[2])]).unwrap().remove(0);
        let row = run(&kernel("TensorListGetItem"), vec![xs.clone(), Tensor::scalar_i32(1), ints(&[2])]).unwrap();
        assert_eq!(row[0].as_f32().unwrap(), &[3., 4.]);
        let mut out = run(&kernel("TensorListReserve"), vec![ints(&[-1]), Tensor::scalar_i32(3)]).unwrap().remove(0);
        for i in [2, 0] {
            let item = Tensor::from_f32(vec![1], vec![i as f32 + 10.]).unwrap();
            out = run(&kernel("TensorListSetItem"), vec![out, Tensor::scalar_i32(i), item]).unwrap().remove(0);
        }
        // Slot 1 was never set: zeros of the shape the other elements give.
        let stacked = run(&kernel("TensorListStack"), vec![out.clone(), ints(&[-1])]).unwrap();
        assert_eq!(stacked[0].shape, vec![3, 1]);
        assert_eq!(stacked[0].as_f32().unwrap(), &[10., 0., 12.]);
        // The list before the last SetItem is unchanged (values are immutable).
        let len = prepare(&node("TensorListLength", &[])).unwrap().unwrap();
        assert_eq!(run(&len, vec![out]).unwrap()[0].as_i32().unwrap(), &[3]);
        let es = prepare(&node("TensorListElementShape", &[("shape_type", AttrValue::Type(DType::Int32))])).unwrap();
        assert_eq!(run(&es.unwrap(), vec![xs]).unwrap()[0].as_i32().unwrap(), &[2]);

        let mut acc = run(&kernel("EmptyTensorList"), vec![ints(&[2]), Tensor::scalar_i32(-1)]).unwrap().remove(0);
        for k in 0..3 {
            let t = Tensor::from_f32(vec![2], vec![k as f32, -(k as f32)]).unwrap();
            acc = run(&kernel("TensorListPushBack"), vec![acc, t]).unwrap().remove(0);
        }
        let popped = run(&kernel("TensorListPopBack"), vec![acc, ints(&[2])]).unwrap();
        assert_eq!(popped[1].as_f32().unwrap(), &[2., -2.]);
        assert_eq!(popped[0].as_list().unwrap().len(), 2);
    }

    /// tf.TensorArray's gather, concat (with lengths), split, resize and scatter.
    #[test]
    fn gather_concat_split_resize_scatter() {
        let x = Tensor::from_f32(vec![3, 2], vec![1., 2., 3., 4., 5., 6.]).unwrap();
        let xs = run(&kernel("TensorListFromTensor"), vec![x.clone(), ints(&[2])]).unwrap().remove(0);
        let g = run(&kernel("TensorListGather"), vec![xs.clone(), ints(&[2, 0]), ints(&[2])]).unwrap();
        assert_eq!(g[0].as_f32().unwrap(), &[5., 6., 1., 2.]);
        let longs = |v: &[i64]| Tensor::from_i64(vec![v.len()], v.to_vec()).unwrap();
        let c = run(&kernel("TensorListConcatV2"), vec![xs.clone(), ints(&[-1]), longs(&[])]).unwrap();
        assert_eq!((c[0].shape.clone(), c[1].as_i64().unwrap()), (vec![6], &[2i64, 2, 2][..]));
        let sp = run(&kernel("TensorListSplit"), vec![x.clone(), ints(&[-1, 2]), longs(&[1, 2])]).unwrap().remove(0);
        assert_eq!(sp.as_list().unwrap().items()[1].as_ref().unwrap().shape, vec![2, 2]);
        assert!(run(&kernel("TensorListSplit"), vec![x.clone(), ints(&[-1, 2]), longs(&[1, 1])]).is_err());
        let resize = prepare(&node("TensorListResize", &[])).unwrap().unwrap();
        let r = run(&resize, vec![xs.clone(), Tensor::scalar_i32(5)]).unwrap().remove(0);
        assert_eq!(r.as_list().unwrap().len(), 5);
        let rows = Tensor::from_f32(vec![1, 2], vec![9., 9.]).unwrap();
        let sc = run(&kernel("TensorListScatterIntoExistingList"), vec![r, rows.clone(), ints(&[4])]).unwrap();
        assert_eq!(sc[0].as_list().unwrap().items()[4].as_ref().unwrap().as_f32().unwrap(), &[9., 9.]);
        let e = run(&kernel("TensorListScatterIntoExistingList"), vec![xs, rows, ints(&[7])]).unwrap_err();
        assert!(e.to_string().contains("scatter at index 7"), "{e}");
    }

    /// AddN of lists: slot by slot; an unset slot takes the other's element.
    #[test]
    fn lists_add_slot_by_slot() {
        let f = |v: f32| Some(Tensor::from_f32(vec![1], vec![v]).unwrap());
        let list = |items| Tensor::from_list(TensorList::new(DType::Float32, Some(vec![1]), items));
        let sum = add_lists(&[list(vec![f(1.), None, None]), list(vec![f(2.), f(5.), None])]).unwrap();
        let items = sum.as_list().unwrap().items();
        assert_eq!(items[0].as_ref().unwrap().as_f32().unwrap(), &[3.]);
        assert_eq!(items[1].as_ref().unwrap().as_f32().unwrap(), &[5.]);
        assert!(items[2].is_none());
        let e = add_lists(&[list(vec![f(1.)]), list(vec![])]).unwrap_err();
        assert!(e.to_string().contains("different lengths"), "{e}");
    }

    #[test]
    fn errors_name_the_problem() {
        let empty = run(&kernel("EmptyTensorList"), vec![ints(&[-1]), Tensor::scalar_i32(-1)]).unwrap().remove(0);
        let e = run(&kernel("TensorListPopBack"), vec![empty.clone(), ints(&[-1])]).unwrap_err();
        assert!(e.to_string().contains("pop from an empty list"), "{e}");
        let e = run(&kernel("TensorListGetItem"), vec![empty.clone(), Tensor::scalar_i32(0), ints(&[-1])]).unwrap_err();
        assert!(e.to_string().contains("element 0 in a list with 0 elements"), "{e}");
        let e = run(&kernel("TensorListStack"), vec![empty.clone(), ints(&[-1])]).unwrap_err();
        assert!(e.to_string().contains("non-fully-defined"), "{e}");
        let ok = run(&kernel("TensorListStack"), vec![empty.clone(), ints(&[4])]).unwrap();
        assert_eq!(ok[0].shape, vec![0, 4]);
        let wrong = Tensor::from_i32(vec![1], vec![1]).unwrap();
        let e = run(&kernel("TensorListPushBack"), vec![empty, wrong]).unwrap_err();
        assert!(e.to_string().contains("Invalid data types"), "{e}");
    }
}
