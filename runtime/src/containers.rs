//! TensorFlow 1's per-step containers: stacks (`StackV2`, `StackPushV2`, `StackPopV2`,
//! `StackCloseV2`: how v1 while-loop gradients save forward values) and tensor arrays
//! (`TensorArrayV3` and its Read/Write/Gather/Scatter/Concat/Split/Size/Grad/Close V3 ops:
//! dynamic_rnn, map_fn).
//!
//! Unlike a TensorList (an immutable value), these are mutable objects named by a
//! `resource` handle: a 12-byte handle tensor (`CTNR` + id), told apart from a variable's
//! 8-byte handle. The objects live in one process-wide table; the frame-aware executor
//! (which runs on the calling thread) frees every container its run created when the run
//! ends, as TensorFlow's per-step resource manager does, and the close ops free theirs.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use autoclust_graph::{DType, Node, Tensor, TensorData};
use parking_lot::Mutex;

use crate::error::{KResult, KernelError};
use crate::kernels::resource::StatefulFn;
use crate::kernels::{array, Inputs, Outputs};

struct Stack {
    elem: Option<DType>,
    max_size: i64,
    items: Vec<Tensor>,
}

struct TensorArray {
    dtype: DType,
    dynamic: bool,
    /// Writes to a written slot add (gradient arrays); otherwise such a write is an error.
    aggregate: bool,
    element_shape: Option<Vec<i64>>,
    items: Vec<Option<Tensor>>,
    grads: HashMap<String, u64>,
}

enum Container {
    Stack(Stack),
    Array(TensorArray),
}

fn table() -> &'static Mutex<HashMap<u64, Container>> {
    static TABLE: OnceLock<Mutex<HashMap<u64, Container>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Containers created on this thread since [`begin_run`] (the frame-aware run).
    static CREATED: RefCell<Option<Vec<u64>>> = const { RefCell::new(None) };
}

/// Starts collecting the containers this thread's run creates.
pub(crate) fn begin_run() -> Option<Vec<u64>> {
    CREATED.with(|c| c.borrow_mut().replace(Vec::new()))
}

/// Frees the containers created since [`begin_run`] (given what it returned, for nesting).
pub(crate) fn end_run(outer: Option<Vec<u64>>) {
    let created = CREATED.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    if let Some(ids) = created {
        let mut t = table().lock();
        for id in ids {
            t.remove(&id);
        }
    }
}

fn create(c: Container) -> Tensor {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    table().lock().insert(id, c);
    CREATED.with(|cr| {
        if let Some(v) = cr.borrow_mut().as_mut() {
            v.push(id);
        }
    });
    handle(id)
}

fn handle(id: u64) -> Tensor {
    let mut b = b"CTNR".to_vec();
    b.extend_from_slice(&id.to_le_bytes());
    Tensor { dtype: DType::Resource, shape: vec![], data: TensorData::Raw(Arc::new(b)) }
}

fn id_of(t: &Tensor) -> KResult<u64> {
    match (&t.data, t.dtype) {
        (TensorData::Raw(b), DType::Resource) if b.len() == 12 && &b[..4] == b"CTNR" => {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[4..]);
            Ok(u64::from_le_bytes(a))
        }
        _ => Err(KernelError::invalid("the handle is not a stack or TensorArray handle")),
    }
}

fn with_stack<R>(t: &Tensor, f: impl FnOnce(&mut Stack) -> KResult<R>) -> KResult<R> {
    let id = id_of(t)?;
    let mut tab = table().lock();
    match tab.get_mut(&id) {
        Some(Container::Stack(s)) => f(s),
        Some(_) => Err(KernelError::invalid("the handle names a TensorArray, not a stack")),
        None => Err(KernelError::invalid("the stack has been closed (or belongs to another step)")),
    }
}

fn with_array<R>(t: &Tensor, f: impl FnOnce(&mut TensorArray) -> KResult<R>) -> KResult<R> {
    let id = id_of(t)?;
    let mut tab = table().lock();
    match tab.get_mut(&id) {
        Some(Container::Array(a)) => f(a),
        Some(_) => Err(KernelError::invalid("the handle names a stack, not a TensorArray")),
        None => Err(KernelError::invalid("the TensorArray has been closed (or belongs to another step)")),
    }
}

fn flow() -> Tensor {
    Tensor::scalar_f32(0.0)
}

fn int_scalar(t: &Tensor, what: &str) -> KResult<i64> {
    match t.to_i64_vec() {
        Some(v) if v.len() == 1 && t.shape.is_empty() => Ok(v[0]),
        _ => Err(KernelError::invalid(format!("{what} must be an integer scalar, got {} {:?}", t.dtype, t.shape))),
    }
}

fn ints(t: &Tensor, what: &str) -> KResult<Vec<i64>> {
    t.to_i64_vec().ok_or_else(|| KernelError::invalid(format!("{what} must be integers, got {}", t.dtype)))
}

fn attr_shape(node: &Node, name: &str) -> Option<Vec<i64>> {
    let s = node.attr(name)?.as_shape()?;
    s.dims.as_ref().map(|d| d.iter().map(|x| x.unwrap_or(-1)).collect())
}

fn add(a: Tensor, b: Tensor) -> KResult<Tensor> {
    let node = Node {
        name: String::new(),
        op: "AddV2".into(),
        inputs: Vec::new(),
        control_inputs: Vec::new(),
        attrs: Default::default(),
        device: String::new(),
        span: None,
    };
    Ok(crate::kernels::compute(&node, &[a, b])?.remove(0))
}

fn zeros(dtype: DType, shape: &Option<Vec<i64>>, what: &str) -> KResult<Tensor> {
    match shape {
        Some(s) if s.iter().all(|&d| d >= 0) => {
            let dims: Vec<usize> = s.iter().map(|&d| d as usize).collect();
            crate::kernels::budget(dtype, &dims)?;
            Tensor::zeros(dtype, dims).map_err(|e| KernelError::invalid(e.to_string()))
        }
        _ => {
            Err(KernelError::invalid(format!("{what}: the element was never written and its shape is not fully known")))
        }
    }
}

impl TensorArray {
    fn index(&mut self, i: i64, writing: bool) -> KResult<usize> {
        if i < 0 {
            return Err(KernelError::invalid(format!("index {i} is negative")));
        }
        let i = i as usize;
        if i >= self.items.len() {
            if writing && self.dynamic {
                crate::kernels::budget(DType::Resource, &[i + 1])?;
                self.items.resize(i + 1, None);
            } else {
                return Err(KernelError::invalid(format!(
                    "index {i} is out of range for a TensorArray of size {}",
                    self.items.len()
                )));
            }
        }
        Ok(i)
    }

    fn write(&mut self, i: i64, v: Tensor) -> KResult<()> {
        if v.dtype != self.dtype {
            return Err(KernelError::invalid(format!(
                "TensorArray dtype is {} but the value written is {}",
                self.dtype, v.dtype
            )));
        }
        let grows = i >= 0 && i as usize >= self.items.len();
        let i = self.index(i, true)?;
        if grows {
            // A dynamic TensorArray growing: as `TensorListSetItem` (`kernels::list`).
            crate::kernels::collection_budget(self.items.len(), &v)?;
        }
        let shape: Vec<i64> = v.shape.iter().map(|&d| d as i64).collect();
        if let Some(es) = &self.element_shape {
            let fits = es.len() == shape.len() && es.iter().zip(&shape).all(|(&a, &b)| a < 0 || a == b);
            if !fits {
                return Err(KernelError::invalid(format!(
                    "the value's shape {:?} does not fit the TensorArray's element shape {es:?}",
                    v.shape
                )));
            }
        }
        self.element_shape = Some(shape);
        if self.items[i].is_some() && !self.aggregate {
            return Err(KernelError::invalid(format!(
                "could not write to TensorArray index {i} because it has already been written to"
            )));
        }
        self.items[i] = match self.items[i].take() {
            Some(old) => Some(add(old, v)?),
            None => Some(v),
        };
        Ok(())
    }

    fn read(&mut self, i: i64) -> KResult<Tensor> {
        let i = self.index(i, false)?;
        match &self.items[i] {
            Some(t) => Ok(t.clone()),
            None if self.aggregate => zeros(self.dtype, &self.element_shape, "TensorArray read"),
            None => Err(KernelError::invalid(format!(
                "could not read from TensorArray index {i} because it has not yet been written to"
            ))),
        }
    }
}

fn outs(v: Vec<Tensor>) -> KResult<Outputs> {
    Ok(v.into_iter().collect())
}

/// The kernel of a stack or TensorArray op, or `None` for any other op.
pub(crate) fn prepare(node: &Node) -> KResult<Option<StatefulFn>> {
    let node_dtype = |name: &str| node.attr(name).and_then(|a| a.as_type());
    let f: StatefulFn = match node.op.as_str() {
        "StackV2" => {
            let elem = node_dtype("elem_type");
            Box::new(move |_, inp: Inputs| {
                crate::kernels::arity(&inp, 1)?;
                let max_size = int_scalar(&inp[0], "max_size")?;
                outs(vec![create(Container::Stack(Stack { elem, max_size, items: Vec::new() }))])
            })
        }
        "StackPushV2" => Box::new(|_, inp: Inputs| {
            crate::kernels::arity(&inp, 2)?;
            let v = inp[1].clone();
            with_stack(&inp[0], |s| {
                if s.elem.is_some_and(|d| d != v.dtype) {
                    return Err(KernelError::invalid(format!(
                        "the stack holds {} but the value pushed is {}",
                        s.elem.map(|d| d.name()).unwrap_or_default(),
                        v.dtype
                    )));
                }
                if s.max_size >= 0 && s.items.len() as i64 >= s.max_size {
                    return Err(KernelError::invalid(format!("the stack is full (max_size {})", s.max_size)));
                }
                crate::kernels::collection_budget(s.items.len() + 1, &v)?;
                s.items.push(v.clone());
                Ok(())
            })?;
            outs(vec![v])
        }),
        "StackPopV2" => Box::new(|_, inp: Inputs| {
            crate::kernels::arity(&inp, 1)?;
            let v = with_stack(&inp[0], |s| s.items.pop().ok_or_else(|| KernelError::invalid("the stack is empty")))?;
            outs(vec![v])
        }),
        "StackCloseV2" | "TensorArrayCloseV3" => Box::new(|_, inp: Inputs| {
            crate::kernels::arity(&inp, 1)?;
            let id = id_of(&inp[0])?;
            table().lock().remove(&id);
            outs(vec![])
        }),
        "TensorArrayV3" => {
            let dtype = node_dtype("dtype").ok_or_else(|| KernelError::Attr("dtype".into()))?;
            let dynamic = node.attr("dynamic_size").and_then(|a| a.as_bool()).unwrap_or(false);
            let element_shape = attr_shape(node, "element_shape");
            Box::new(move |_, inp: Inputs| {
                crate::kernels::arity(&inp, 1)?;
                let size = int_scalar(&inp[0], "size")?;
                if size < 0 {
                    return Err(KernelError::invalid(format!("size {size} is negative")));
                }
                crate::kernels::budget(DType::Resource, &[size as usize])?;
                let a = TensorArray {
                    dtype,
                    dynamic,
                    aggregate: false,
                    element_shape: element_shape.clone(),
                    items: vec![None; size as usize],
                    grads: HashMap::new(),
                };
                outs(vec![create(Container::Array(a)), flow()])
            })
        }
        "TensorArrayGradV3" | "TensorArrayGradWithShape" => {
            let source = node.attr("source").and_then(|a| a.as_str()).unwrap_or_default().to_string();
            Box::new(move |_, inp: Inputs| {
                let id = id_of(&inp[0])?;
                let mut tab = table().lock();
                let (existing, dtype, size, shape) = match tab.get(&id) {
                    Some(Container::Array(a)) => {
                        (a.grads.get(&source).copied(), a.dtype, a.items.len(), a.element_shape.clone())
                    }
                    _ => return Err(KernelError::invalid("the handle names no live TensorArray")),
                };
                let gid = match existing.filter(|g| tab.contains_key(g)) {
                    Some(g) => g,
                    None => {
                        drop(tab);
                        let h = create(Container::Array(TensorArray {
                            dtype,
                            dynamic: false,
                            aggregate: true,
                            element_shape: shape,
                            items: vec![None; size],
                            grads: HashMap::new(),
                        }));
                        let g = id_of(&h)?;
                        tab = table().lock();
                        if let Some(Container::Array(a)) = tab.get_mut(&id) {
                            a.grads.insert(source.clone(), g);
                        }
                        g
                    }
                };
                outs(vec![handle(gid), flow()])
            })
        }
        "TensorArrayWriteV3" => Box::new(|_, inp: Inputs| {
            crate::kernels::arity(&inp, 4)?;
            let i = int_scalar(&inp[1], "index")?;
            let v = inp[2].clone();
            with_array(&inp[0], |a| a.write(i, v))?;
            outs(vec![flow()])
        }),
        "TensorArrayReadV3" => Box::new(|_, inp: Inputs| {
            crate::kernels::arity(&inp, 3)?;
            let i = int_scalar(&inp[1], "index")?;
            outs(vec![with_array(&inp[0], |a| a.read(i))?])
        }),
        "TensorArraySizeV3" => Box::new(|_, inp: Inputs| {
            crate::kernels::arity(&inp, 2)?;
            let n = with_array(&inp[0], |a| Ok(a.items.len()))?;
            outs(vec![Tensor::scalar_i32(n as i32)])
        }),
        "TensorArrayGatherV3" => {
            let hint = attr_shape(node, "element_shape");
            Box::new(move |_, inp: Inputs| {
                crate::kernels::arity(&inp, 3)?;
                let idx = ints(&inp[1], "indices")?;
                let (items, dtype, shape) = with_array(&inp[0], |a| {
                    let items = idx.iter().map(|&i| a.read(i)).collect::<KResult<Vec<_>>>()?;
                    Ok((items, a.dtype, a.element_shape.clone().or_else(|| hint.clone())))
                })?;
                if items.is_empty() {
                    let mut dims = vec![0i64];
                    dims.extend(shape.unwrap_or_default());
                    return outs(vec![zeros(dtype, &Some(dims), "TensorArrayGatherV3")?]);
                }
                outs(vec![array::pack(&items, 0)?])
            })
        }
        "TensorArrayScatterV3" => Box::new(|_, inp: Inputs| {
            crate::kernels::arity(&inp, 4)?;
            let idx = ints(&inp[1], "indices")?;
            let value = &inp[2];
            if value.shape.first().copied() != Some(idx.len()) {
                return Err(KernelError::invalid(format!(
                    "the value's first dimension ({:?}) must match the number of indices ({})",
                    value.shape.first(),
                    idx.len()
                )));
            }
            let parts = array::split(value, 0, &vec![1; idx.len()])?;
            with_array(&inp[0], |a| {
                for (&i, p) in idx.iter().zip(parts) {
                    let mut p = p;
                    p.shape.remove(0);
                    a.write(i, p)?;
                }
                Ok(())
            })?;
            outs(vec![flow()])
        }),
        "TensorArrayConcatV3" => Box::new(|_, inp: Inputs| {
            crate::kernels::arity(&inp, 2)?;
            let (items, dtype, shape) = with_array(&inp[0], |a| {
                let n = a.items.len() as i64;
                let items = (0..n).map(|i| a.read(i)).collect::<KResult<Vec<_>>>()?;
                Ok((items, a.dtype, a.element_shape.clone()))
            })?;
            let lengths: Vec<i64> = items.iter().map(|t| t.shape.first().copied().unwrap_or(0) as i64).collect();
            let n = lengths.len();
            let value = if items.is_empty() {
                let mut dims = vec![0i64];
                dims.extend(shape.map(|s| s[1..].to_vec()).unwrap_or_default());
                zeros(dtype, &Some(dims), "TensorArrayConcatV3")?
            } else {
                array::concat(&items, 0)?
            };
            outs(vec![value, Tensor::from_i64(vec![n], lengths).map_err(|e| KernelError::invalid(e.to_string()))?])
        }),
        "TensorArraySplitV3" => Box::new(|_, inp: Inputs| {
            crate::kernels::arity(&inp, 4)?;
            let lengths = ints(&inp[2], "lengths")?;
            if lengths.iter().any(|&l| l < 0) {
                return Err(KernelError::invalid("lengths must be non-negative"));
            }
            let sizes: Vec<usize> = lengths.iter().map(|&l| l as usize).collect();
            let parts = array::split(&inp[1], 0, &sizes)?;
            with_array(&inp[0], |a| {
                for (i, p) in parts.into_iter().enumerate() {
                    a.write(i as i64, p)?;
                }
                Ok(())
            })?;
            outs(vec![flow()])
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variables::VariableStore;

    fn node(op: &str, attrs: &[(&str, autoclust_graph::AttrValue)]) -> Node {
        Node::unconnected("n", op, attrs)
    }

    fn call(n: &Node, store: &VariableStore, inp: Vec<Tensor>) -> KResult<Vec<Tensor>> {
        Ok(prepare(n)?.expect("a container op")(store, inp.into_iter().collect())?.into_vec())
    }

    #[test]
    fn stacks_pop_in_reverse_order_and_free_at_the_end_of_the_run() {
        let store = VariableStore::default();
        let outer = begin_run();
        let h = call(&node("StackV2", &[]), &store, vec![Tensor::scalar_i32(-1)]).unwrap().remove(0);
        for x in [1.0, 2.0] {
            call(&node("StackPushV2", &[]), &store, vec![h.clone(), Tensor::scalar_f32(x)]).unwrap();
        }
        let pop = node("StackPopV2", &[]);
        assert_eq!(call(&pop, &store, vec![h.clone()]).unwrap()[0], Tensor::scalar_f32(2.0));
        assert_eq!(call(&pop, &store, vec![h.clone()]).unwrap()[0], Tensor::scalar_f32(1.0));
        assert!(call(&pop, &store, vec![h.clone()]).unwrap_err().to_string().contains("empty"));
        end_run(outer);
        assert!(call(&pop, &store, vec![h]).unwrap_err().to_string().contains("closed"));
    }

    #[test]
    fn tensor_arrays_write_gather_and_aggregate_gradients() {
        use autoclust_graph::AttrValue;
        let store = VariableStore::default();
        let outer = begin_run();
        let ta = node("TensorArrayV3", &[("dtype", AttrValue::Type(DType::Float32))]);
        let h = call(&ta, &store, vec![Tensor::scalar_i32(2)]).unwrap().remove(0);
        let w = node("TensorArrayWriteV3", &[]);
        let v = |a: f32, b: f32| Tensor::from_f32(vec![2], vec![a, b]).unwrap();
        call(&w, &store, vec![h.clone(), Tensor::scalar_i32(1), v(3.0, 4.0), flow()]).unwrap();
        call(&w, &store, vec![h.clone(), Tensor::scalar_i32(0), v(1.0, 2.0), flow()]).unwrap();
        let err = call(&w, &store, vec![h.clone(), Tensor::scalar_i32(0), v(1.0, 2.0), flow()]).unwrap_err();
        assert!(err.to_string().contains("already been written"), "{err}");
        let g = node("TensorArrayGatherV3", &[("dtype", AttrValue::Type(DType::Float32))]);
        let idx = Tensor::from_i32(vec![2], vec![0, 1]).unwrap();
        let got = call(&g, &store, vec![h.clone(), idx.clone(), flow()]).unwrap().remove(0);
        assert_eq!(got, Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap());
        // The gradient array adds repeated writes and reads unwritten slots as zeros.
        let gh = call(&node("TensorArrayGradV3", &[]), &store, vec![h.clone(), flow()]).unwrap().remove(0);
        call(&w, &store, vec![gh.clone(), Tensor::scalar_i32(1), v(1.0, 1.0), flow()]).unwrap();
        call(&w, &store, vec![gh.clone(), Tensor::scalar_i32(1), v(2.0, 0.5), flow()]).unwrap();
        let got = call(&g, &store, vec![gh, idx, flow()]).unwrap().remove(0);
        assert_eq!(got, Tensor::from_f32(vec![2, 2], vec![0.0, 0.0, 3.0, 1.5]).unwrap());
        end_run(outer);
    }
}
