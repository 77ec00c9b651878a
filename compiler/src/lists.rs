//! TensorList ops in a compiled body: their compile-time types, and a host-kernel step
//! ([`crate::host`]) that runs the interpreter's kernel on the list values.
//!
//! What it computes: for every `DT_VARIANT` list value a [`ListType`] — the element dtype,
//! the `element_shape` the list value itself carries (when known: what
//! `TensorListElementShape` returns and an unset slot's zeros are shaped by), the shape every
//! *set* element has (a join over the pushes and sets that can reach the value), whether a
//! slot may be unset, and the length when it is known. From those, each element read
//! (`TensorListGetItem`, `TensorListPopBack`, `TensorListStack`, `TensorListGather`) gets a
//! fully known output shape, as every value in a compiled body must; when it cannot, the op
//! declines and the interpreter runs the cluster.
//!
//! Why it is sound:
//! - A set element's shape is the join of the shapes of everything put into the list by
//!   the ops the analysis saw (`FromTensor`, `SetItem`, `PushBack`, `Scatter…`, the
//!   `AddN` of lists), so when that join is fully known, every set element has exactly it.
//!   Around a loop, [`crate::control_flow`] iterates the body's typing until the loop-carried
//!   list types are stable (the join only generalises, so this terminates).
//! - An unset slot reads as zeros of `merge(list element_shape, the op's element_shape)`,
//!   the interpreter's rule, which the analysis computes from the same two shapes.
//! - Lists whose origin the analysis did not see (a compiled function's argument) have no
//!   known element shape; a read is typed by the op's own `element_shape` operand when that
//!   is fully known, as TensorFlow's shape inference does.
//! - Every host-kernel call checks its outputs against these types ([`crate::host`]), so a
//!   list that breaks an assumption fails with an error, never a wrong read.

use autoclust_graph::{same_dims, AttrValue, DType, Node, Tensor};

use crate::analyze::{NodeInfo, NodeKind, ValueInfo};
use crate::host::HostStep;
use crate::kernels::KernelOp;
use crate::CompileError;

/// A partially known shape: `None` an unknown rank, `-1` an unknown dimension.
pub type PartialShape = Option<Vec<i64>>;

/// The compile-time type of a TensorList value (module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ListType {
    pub element_dtype: DType,
    /// The `element_shape` the list value carries; `None` when not known at compile time.
    pub declared: Option<PartialShape>,
    /// The join of every set element's shape; `None` while no element can be set.
    pub items: Option<PartialShape>,
    /// Whether a slot may be unset (reserved or resized, never written).
    pub unset: bool,
    /// The number of elements, when known.
    pub len: Option<usize>,
    /// When every set element is one small integer constant (a `Shape` a while-loop's
    /// gradient accumulates every iteration), its values: reads of it fold, so the shape
    /// arithmetic of a gradient body stays compile-time.
    pub konst: Option<Vec<i64>>,
}

impl ListType {
    /// A list nothing is known about but its element dtype.
    pub fn opaque(element_dtype: DType) -> ListType {
        ListType { element_dtype, declared: None, items: Some(None), unset: true, len: None, konst: None }
    }

    /// The least specific type describing both (the loop-carried type of a value that is
    /// either), or `None` when the element dtypes differ.
    pub fn join(&self, other: &ListType) -> Option<ListType> {
        if self.element_dtype != other.element_dtype {
            return None;
        }
        Some(ListType {
            element_dtype: self.element_dtype,
            declared: match (&self.declared, &other.declared) {
                (Some(a), Some(b)) if a == b => Some(a.clone()),
                _ => None,
            },
            items: match (&self.items, &other.items) {
                (None, x) | (x, None) => x.clone(),
                (Some(a), Some(b)) => Some(join_shapes(a, b)),
            },
            unset: self.unset || other.unset,
            len: if self.len == other.len { self.len } else { None },
            konst: match (&self.items, &other.items) {
                (None, _) => other.konst.clone(),
                (_, None) => self.konst.clone(),
                _ if self.konst == other.konst => self.konst.clone(),
                _ => None,
            },
        })
    }

    fn with_item(&self, item: &ValueInfo) -> ListType {
        let s: PartialShape = Some(item.shape.iter().map(|&d| d as i64).collect());
        let value = small_ints(item.konst.as_ref());
        let (items, konst) = match &self.items {
            None => (s, value),
            Some(a) => (join_shapes(a, &s), if self.konst == value { value } else { None }),
        };
        ListType { items: Some(items), konst, ..self.clone() }
    }

    /// The constant every element read from this list has, when there is one.
    fn read_constant(&self, shape: &[usize]) -> Option<Tensor> {
        let v = self.konst.clone().filter(|_| !self.unset)?;
        let t = match self.element_dtype {
            DType::Int32 => Tensor::from_i32(shape.to_vec(), v.iter().map(|&x| x as i32).collect()),
            DType::Int64 => Tensor::from_i64(shape.to_vec(), v),
            _ => return None,
        };
        t.ok()
    }
}

impl ListType {
    /// The type of a list value, read from the summary the list keeps of its elements
    /// ([`autoclust_graph::ItemSummary`]) in O(1) — a compiled loop body taking the list
    /// types it on every call, and a scan of the elements made such a loop O(n²). The
    /// summary may be wider than the elements now held (one popped or overwritten since
    /// widened it): a wider type only compiles reads less specifically, or declines them.
    pub fn of_value(list: &autoclust_graph::TensorList) -> ListType {
        let summary = list.summary();
        ListType {
            element_dtype: list.element_dtype,
            declared: Some(list.element_shape.clone()),
            items: summary.shape.clone(),
            unset: summary.unset > 0,
            len: Some(list.len()),
            konst: summary.shape.as_ref().and(summary.konst.clone()),
        }
    }

    /// Whether `list`'s type ([`ListType::of_value`]) is this one — with the length left out
    /// when `any_length` — compared in place, without building the type: a compiled loop
    /// body checks every list argument on every call.
    pub fn describes(&self, list: &autoclust_graph::TensorList, any_length: bool) -> bool {
        let summary = list.summary();
        let partial = |a: &PartialShape, b: &PartialShape| match (a, b) {
            (Some(a), Some(b)) => same_dims(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        let konst = summary.shape.as_ref().and(summary.konst.as_ref());
        self.element_dtype == list.element_dtype
            && self.declared.as_ref().is_some_and(|d| partial(d, &list.element_shape))
            && match (&self.items, &summary.shape) {
                (Some(a), Some(b)) => partial(a, b),
                (a, b) => a.is_none() && b.is_none(),
            }
            && self.unset == (summary.unset > 0)
            && (if any_length { self.len.is_none() } else { self.len == Some(list.len()) })
            && match (&self.konst, konst) {
                (Some(a), Some(b)) => same_dims(a, b),
                (a, b) => a.is_none() && b.is_none(),
            }
    }

    /// This type with the length forgotten: what a body compiled for any length of the list
    /// is compiled for (`TensorListLength` then runs as a host step, and a `TensorListStack`
    /// without `num_elements` declines — such a body is compiled for each length instead).
    pub fn any_length(&self) -> ListType {
        ListType { len: None, ..self.clone() }
    }
}

/// The types of the TensorList arguments among `inputs` (`(index, type)`): a body is
/// compiled for them as for the arguments' shapes.
pub fn list_args(inputs: &[Tensor]) -> Vec<(usize, ListType)> {
    inputs.iter().enumerate().filter_map(|(i, t)| t.as_list().map(|l| (i, ListType::of_value(l)))).collect()
}

/// The values of a small integer tensor (a shape), the only constants a list type records
/// (the rule a list value's own summary applies: [`autoclust_graph::small_int_values`]).
fn small_ints(t: Option<&Tensor>) -> Option<Vec<i64>> {
    autoclust_graph::small_int_values(t?)
}

/// The least specific shape describing both.
pub fn join_shapes(a: &PartialShape, b: &PartialShape) -> PartialShape {
    match (a, b) {
        (Some(x), Some(y)) if x.len() == y.len() => {
            Some(x.iter().zip(y).map(|(&p, &q)| if p == q { p } else { -1 }).collect())
        }
        _ => None,
    }
}

/// The most specific shape both describe, `Err` if they conflict
/// ([`autoclust_graph::merge_element_shapes`], the interpreter's rule).
fn merge_shapes(a: &PartialShape, b: &PartialShape) -> Result<PartialShape, ()> {
    autoclust_graph::merge_element_shapes(a, b).ok_or(())
}

fn full(s: &PartialShape) -> Option<Vec<usize>> {
    s.as_ref()?.iter().map(|&d| usize::try_from(d).ok()).collect()
}

/// Whether `op` is a TensorList op this module types.
pub fn is_list_op(op: &str) -> bool {
    autoclust_graph::TENSOR_LIST_OPS.contains(&op)
}

/// An `element_shape` operand's value: a scalar −1 is an unknown rank. `None` when the
/// operand is not a compile-time constant.
fn shape_operand(v: &ValueInfo) -> Option<PartialShape> {
    autoclust_graph::element_shape_operand(v.konst.as_ref()?)
}

fn int_operand(v: &ValueInfo) -> Option<i64> {
    v.konst.as_ref()?.to_i64_vec()?.first().copied()
}

/// The list type of a variant operand (an opaque one when its origin is unknown).
fn list_of(node: &Node, v: &ValueInfo) -> Result<ListType, CompileError> {
    if v.dtype != DType::Variant {
        return Err(CompileError::Invalid(format!(
            "node '{}' ({}): operand is {}, not a list",
            node.name, node.op, v.dtype
        )));
    }
    let dtype = node.attr("element_dtype").and_then(AttrValue::as_type).unwrap_or(DType::Float32);
    Ok(v.list.clone().unwrap_or_else(|| ListType::opaque(dtype)))
}

/// The element shape of `TensorListStack`/`TensorListGather`: the interpreter merges the
/// list's element_shape, the operand and every set element's shape, and gives unset slots
/// zeros of that — so with set elements of one known shape, that shape.
fn stack_shape(node: &Node, list: &ListType, hint: Option<&PartialShape>) -> Result<Vec<usize>, CompileError> {
    let hint = hint.cloned().flatten();
    let conflict = || CompileError::unsupported(node, "the list's element shapes and the op's element_shape conflict");
    let mut base = match &list.declared {
        Some(d) => merge_shapes(d, &hint).map_err(|_| conflict())?,
        None => hint.clone(),
    };
    if let Some(items) = &list.items {
        base = merge_shapes(&base, items).map_err(|_| conflict())?;
        if let Some(s) = full(items) {
            return Ok(s);
        }
    }
    full(&base)
        .ok_or_else(|| CompileError::unsupported(node, "the shape of the list's elements is not known at compile time"))
}

/// The shape an element read from `list` has (a set element or an unset slot's zeros),
/// given the op's `element_shape` operand `hint`.
fn read_shape(node: &Node, list: &ListType, hint: Option<&PartialShape>) -> Result<Vec<usize>, CompileError> {
    let hint = hint.cloned().flatten();
    let unset: Option<PartialShape> = if list.unset {
        Some(match &list.declared {
            Some(d) => merge_shapes(d, &hint).map_err(|_| {
                CompileError::unsupported(node, "the list's element shape and the op's element_shape conflict")
            })?,
            None => hint.clone(),
        })
    } else {
        None
    };
    let joined = match (&list.items, &unset) {
        (None, None) => None,
        (Some(a), None) | (None, Some(a)) => Some(a.clone()),
        (Some(a), Some(b)) => Some(join_shapes(a, b)),
    };
    if let Some(s) = joined.as_ref().and_then(full) {
        return Ok(s);
    }
    // Elements of a shape the analysis cannot see: the op's own element_shape, checked at
    // run time.
    full(&hint)
        .ok_or_else(|| CompileError::unsupported(node, "the shape of the list's elements is not known at compile time"))
}

fn list_value(list: ListType) -> ValueInfo {
    ValueInfo { dtype: DType::Variant, shape: Vec::new(), konst: None, list: Some(list) }
}

fn host(node: &Node, compiler: &crate::Compiler, outputs: Vec<ValueInfo>) -> Result<NodeInfo, CompileError> {
    let dtypes = outputs.iter().map(|v| v.dtype).collect();
    let step = HostStep::prepare(node, compiler.options().host_kernels.as_ref(), dtypes)?;
    Ok(NodeInfo {
        kind: NodeKind::Kernel { op: KernelOp::Host(step), data_inputs: (0..node.inputs.len()).collect() },
        outputs,
    })
}

fn need(node: &Node, ins: &[ValueInfo], n: usize) -> Result<(), CompileError> {
    if ins.len() != n {
        return Err(CompileError::Invalid(format!(
            "node '{}' ({}) needs {n} inputs, has {}",
            node.name,
            node.op,
            ins.len()
        )));
    }
    Ok(())
}

/// Types a TensorList op (or an `Identity`/`AddN` of lists) and makes it a host-kernel step.
pub(crate) fn analyze_list_op(
    node: &Node,
    ins: &[ValueInfo],
    compiler: &crate::Compiler,
) -> Result<NodeInfo, CompileError> {
    let op = node.op.as_str();
    let element_dtype = || {
        node.attr("element_dtype")
            .and_then(AttrValue::as_type)
            .ok_or_else(|| CompileError::Invalid(format!("node '{}' ({op}) has no element_dtype", node.name)))
    };
    let value = |dtype: DType, shape: Vec<usize>| ValueInfo { dtype, shape, konst: None, list: None };
    match op {
        "Identity" | "Snapshot" | "StopGradient" => {
            need(node, ins, 1)?;
            Ok(NodeInfo { kind: NodeKind::View, outputs: vec![ValueInfo { konst: None, ..ins[0].clone() }] })
        }
        "AddN" => {
            let first = list_of(node, ins.first().ok_or_else(|| CompileError::Invalid("AddN of nothing".into()))?)?;
            let mut t = first.clone();
            for v in &ins[1..] {
                let other = list_of(node, v)?;
                t = t
                    .join(&other)
                    .ok_or_else(|| CompileError::unsupported(node, "lists of different element dtypes"))?;
            }
            // The sum keeps the first list's element_shape and length.
            t.declared = first.declared;
            t.len = first.len.or(t.len);
            host(node, compiler, vec![list_value(t)])
        }
        "EmptyTensorList" | "TensorListReserve" => {
            need(node, ins, 2)?;
            let len = if op == "EmptyTensorList" {
                Some(0)
            } else {
                int_operand(&ins[1]).and_then(|n| usize::try_from(n).ok())
            };
            let unset = op == "TensorListReserve" && len != Some(0);
            let t = ListType {
                element_dtype: element_dtype()?,
                declared: shape_operand(&ins[0]),
                items: None,
                unset,
                len,
                konst: None,
            };
            host(node, compiler, vec![list_value(t)])
        }
        "TensorListFromTensor" => {
            need(node, ins, 2)?;
            let x = &ins[0];
            let Some((&n, elem)) = x.shape.split_first() else {
                return Err(CompileError::unsupported(node, "a scalar cannot be unstacked"));
            };
            let hint = shape_operand(&ins[1]);
            let exact: PartialShape = Some(elem.iter().map(|&d| d as i64).collect());
            // The value carries the operand's shape when given, else the tensor's rows'.
            let declared = match hint {
                Some(Some(h)) => Some(Some(h)),
                Some(None) => Some(exact.clone()),
                None => None,
            };
            let items = if n == 0 { None } else { Some(exact) };
            let t = ListType { element_dtype: x.dtype, declared, items, unset: false, len: Some(n), konst: None };
            host(node, compiler, vec![list_value(t)])
        }
        "TensorListGetItem" => {
            need(node, ins, 3)?;
            let list = list_of(node, &ins[0])?;
            let shape = read_shape(node, &list, shape_operand(&ins[2]).as_ref())?;
            let konst = list.read_constant(&shape);
            host(node, compiler, vec![ValueInfo { konst, ..value(element_dtype()?, shape) }])
        }
        "TensorListSetItem" => {
            need(node, ins, 3)?;
            let list = list_of(node, &ins[0])?;
            let mut t = list.with_item(&ins[2]);
            if node.attr("resize_if_index_out_of_bounds").and_then(AttrValue::as_bool).unwrap_or(false) {
                t.len = None;
                t.unset = true;
            }
            host(node, compiler, vec![list_value(t)])
        }
        "TensorListPushBack" => {
            need(node, ins, 2)?;
            let list = list_of(node, &ins[0])?;
            let mut t = list.with_item(&ins[1]);
            t.len = list.len.map(|n| n + 1);
            host(node, compiler, vec![list_value(t)])
        }
        "TensorListPopBack" => {
            need(node, ins, 2)?;
            let list = list_of(node, &ins[0])?;
            let shape = read_shape(node, &list, shape_operand(&ins[1]).as_ref())?;
            let konst = list.read_constant(&shape);
            let rest = ListType { len: list.len.and_then(|n| n.checked_sub(1)), ..list };
            host(node, compiler, vec![list_value(rest), ValueInfo { konst, ..value(element_dtype()?, shape) }])
        }
        "TensorListStack" => {
            need(node, ins, 2)?;
            let list = list_of(node, &ins[0])?;
            let shape = stack_shape(node, &list, shape_operand(&ins[1]).as_ref())?;
            let attr = node.attr("num_elements").and_then(AttrValue::as_int).and_then(|n| usize::try_from(n).ok());
            let Some(n) = attr.or(list.len) else {
                return Err(CompileError::unsupported(node, "the list's length is not known at compile time"));
            };
            let mut dims = vec![n];
            dims.extend(shape);
            host(node, compiler, vec![value(element_dtype()?, dims)])
        }
        "TensorListGather" => {
            need(node, ins, 3)?;
            let list = list_of(node, &ins[0])?;
            let shape = stack_shape(node, &list, shape_operand(&ins[2]).as_ref())?;
            let mut dims = vec![ins[1].elements()];
            dims.extend(shape);
            host(node, compiler, vec![value(element_dtype()?, dims)])
        }
        "TensorListLength" => {
            need(node, ins, 1)?;
            let list = list_of(node, &ins[0])?;
            match list.len {
                Some(n) => {
                    let t = Tensor::scalar_i32(n as i32);
                    Ok(NodeInfo { kind: NodeKind::Constant, outputs: vec![ValueInfo::constant(t)] })
                }
                None => host(node, compiler, vec![value(DType::Int32, Vec::new())]),
            }
        }
        "TensorListElementShape" => {
            need(node, ins, 1)?;
            let list = list_of(node, &ins[0])?;
            let dtype = node.attr("shape_type").and_then(AttrValue::as_type).unwrap_or(DType::Int32);
            let Some(declared) = list.declared else {
                return Err(CompileError::unsupported(node, "the list's element_shape is not known at compile time"));
            };
            let (shape, v) = match declared {
                None => (Vec::new(), vec![-1i64]),
                Some(d) => (vec![d.len()], d),
            };
            let t = match dtype {
                DType::Int64 => Tensor::from_i64(shape, v),
                _ => Tensor::from_i32(shape, v.iter().map(|&x| x as i32).collect()),
            }
            .map_err(|e| CompileError::Invalid(e.to_string()))?;
            Ok(NodeInfo { kind: NodeKind::Constant, outputs: vec![ValueInfo::constant(t)] })
        }
        "TensorListResize" => {
            need(node, ins, 2)?;
            let list = list_of(node, &ins[0])?;
            let len = int_operand(&ins[1]).and_then(|n| usize::try_from(n).ok());
            host(node, compiler, vec![list_value(ListType { len, unset: true, ..list })])
        }
        "TensorListScatterIntoExistingList" => {
            need(node, ins, 3)?;
            let list = list_of(node, &ins[0])?;
            let row = ValueInfo {
                dtype: ins[1].dtype,
                shape: ins[1].shape.get(1..).unwrap_or_default().to_vec(),
                konst: None,
                list: None,
            };
            let t = if ins[1].shape.first() == Some(&0) { list } else { list.with_item(&row) };
            host(node, compiler, vec![list_value(t)])
        }
        _ => Err(CompileError::unsupported(node, "not a TensorList op")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(declared: Option<PartialShape>, items: Option<PartialShape>, unset: bool) -> ListType {
        ListType { element_dtype: DType::Float32, declared, items, unset, len: None, konst: None }
    }

    #[test]
    fn joins_generalise_and_merges_specialise() {
        assert_eq!(join_shapes(&Some(vec![32, 64]), &Some(vec![16, 64])), Some(vec![-1, 64]));
        assert_eq!(join_shapes(&Some(vec![32]), &Some(vec![32, 1])), None);
        assert_eq!(merge_shapes(&Some(vec![-1, 64]), &Some(vec![32, -1])), Ok(Some(vec![32, 64])));
        assert!(merge_shapes(&Some(vec![2]), &Some(vec![3])).is_err());
        // An accumulator: created empty with a partial shape, pushed [32, 64] elements.
        let empty = list(Some(Some(vec![-1, 64])), None, false);
        let item = ValueInfo { dtype: DType::Float32, shape: vec![32, 64], konst: None, list: None };
        let pushed = empty.with_item(&item);
        let carried = empty.join(&pushed).unwrap();
        assert_eq!(carried.items, Some(Some(vec![32, 64])));
        assert_eq!(carried.declared, Some(Some(vec![-1, 64])));
        assert_eq!(carried.join(&carried.with_item(&item)).unwrap(), carried);
        // A shape pushed every iteration stays a constant of the list; two differ: not.
        let shape = |v: &[i32]| ValueInfo::constant(Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap());
        let ints = ListType { element_dtype: DType::Int32, ..empty.clone() };
        let once = ints.join(&ints.with_item(&shape(&[32, 64]))).unwrap();
        assert_eq!(once.konst, Some(vec![32, 64]));
        assert_eq!(once.read_constant(&[2]).unwrap().to_i64_vec(), Some(vec![32, 64]));
        assert_eq!(once.join(&once.with_item(&shape(&[1, 64]))).unwrap().konst, None);
    }

    #[test]
    fn describes_is_equality_with_the_values_type() {
        use autoclust_graph::TensorList;
        let f = |v: f32| Tensor::from_f32(vec![2], vec![v, v]).unwrap();
        let i = |v: &[i32]| Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap();
        let lists = [
            TensorList::new(DType::Float32, None, vec![]),
            TensorList::new(DType::Float32, Some(vec![-1]), vec![Some(f(1.0))]),
            TensorList::new(DType::Float32, Some(vec![-1]), vec![Some(f(1.0)), None]),
            TensorList::new(DType::Float32, Some(vec![-1]), vec![Some(f(1.0)), Some(f(2.0))]),
            TensorList::new(DType::Int32, None, vec![Some(i(&[3, 4]))]),
            TensorList::new(DType::Int32, None, vec![Some(i(&[3, 4])), Some(i(&[3, 5]))]),
            TensorList::new(DType::Int32, None, vec![Some(i(&[3, 4, 5]))]),
        ];
        for a in &lists {
            for b in &lists {
                let t = ListType::of_value(a);
                assert_eq!(t.describes(b, false), t == ListType::of_value(b), "{a:?} / {b:?}");
                let t = t.any_length();
                assert_eq!(t.describes(b, true), t == ListType::of_value(b).any_length(), "{a:?} / {b:?}");
            }
        }
    }

    #[test]
    fn reads_need_a_known_shape() {
        let n = Node {
            name: "r".into(),
            op: "TensorListPopBack".into(),
            inputs: Vec::new(),
            control_inputs: Vec::new(),
            attrs: Default::default(),
            device: String::new(),
            span: None,
        };
        // Set elements only: their shape.
        let l = list(Some(Some(vec![-1, 64])), Some(Some(vec![32, 64])), false);
        assert_eq!(read_shape(&n, &l, Some(&Some(vec![-1, 64]))).unwrap(), vec![32, 64]);
        // Unset slots too: zeros of the merged declared and operand shapes must agree.
        let l = list(Some(Some(vec![-1, 64])), Some(Some(vec![32, 64])), true);
        assert!(read_shape(&n, &l, Some(&Some(vec![-1, 64]))).is_err());
        assert_eq!(read_shape(&n, &l, Some(&Some(vec![32, -1]))).unwrap(), vec![32, 64]);
        // Nothing known: the operand's shape when fully known.
        let l = ListType::opaque(DType::Float32);
        assert_eq!(read_shape(&n, &l, Some(&Some(vec![4]))).unwrap(), vec![4]);
        assert!(read_shape(&n, &l, Some(&None)).is_err());
    }
}
