//! Resource-variable kernels, run against a session's [`VariableStore`].
//!
//! A handle (`VarHandleOp`'s output) is a scalar `resource` tensor holding
//! the variable's [`VarId`]. Reads (`ReadVariableOp`, `ResourceGather`,
//! `VariableShape`, `VarIsInitializedOp`) take an atomic snapshot under the
//! lock. Writes replace the value under the lock. Read-modify-write ops
//! (`AssignAdd/SubVariableOp`, `ResourceScatter*`, and the optimizers'
//! `ResourceApply*`/`ResourceSparseApply*` in [`super::optimizer`]) hold
//! every variable they touch (locked in `VarId` order) for the whole op, and
//! validate everything before changing anything, so a failed op leaves its
//! variables as they were. Updates write into the variable's buffer in
//! place when no snapshot shares it (copy-on-write otherwise), with serial
//! loops: see the module docs of [`crate::variables`].

use std::sync::Arc;

use autoclust_graph::{DType, Node, Tensor, TensorData};

use super::elementwise::Num;
use super::{arity, attr_bool_or, attr_type_or, dispatch_num, int_tensor, int_values, one, Elem, Inputs, Outputs};
use crate::error::{KResult, KernelError};
use crate::variables::{VarId, VariableStore};

/// A prepared resource kernel.
pub type StatefulFn = Box<dyn Fn(&VariableStore, Inputs) -> KResult<Outputs> + Send + Sync>;

/// The handle tensor of a variable.
pub fn handle_tensor(id: VarId) -> Tensor {
    Tensor {
        dtype: DType::Resource,
        shape: vec![],
        data: TensorData::Raw(Arc::new((id.0 as u64).to_le_bytes().to_vec())),
    }
}

/// The variable a handle tensor names.
pub fn handle_var(t: &Tensor) -> KResult<VarId> {
    match (&t.data, t.dtype) {
        (TensorData::Raw(b), DType::Resource) if b.len() == 8 => {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            Ok(VarId(u64::from_le_bytes(a) as u32))
        }
        _ => Err(KernelError::invalid(format!("expected a resource handle, got {}", t.dtype))),
    }
}

fn uninit(store: &VariableStore, id: VarId) -> KernelError {
    KernelError::Uninitialized(store.get(id).name.clone())
}

fn check_dtype(store: &VariableStore, id: VarId, t: &Tensor, want: Option<DType>) -> KResult<()> {
    let v = store.get(id);
    let expected = want.unwrap_or(v.dtype);
    if t.dtype != expected || t.dtype != v.dtype {
        return Err(KernelError::invalid(format!(
            "variable '{}' has dtype {} but the value has dtype {}",
            v.name, v.dtype, t.dtype
        )));
    }
    Ok(())
}

/// The handle of a session resource other than a variable (a lookup table, a summary
/// writer): a scalar `resource` tensor holding the kind's four-byte `magic`, the container,
/// a NUL and the name, so a handle passed into a function body or through an `Identity`
/// still names its resource.
pub(crate) fn named_handle(magic: &[u8; 4], container: &str, name: &str) -> Tensor {
    let mut bytes = magic.to_vec();
    bytes.extend_from_slice(container.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(name.as_bytes());
    Tensor { dtype: DType::Resource, shape: vec![], data: TensorData::Raw(Arc::new(bytes)) }
}

/// The `(container, name)` a [`named_handle`] of kind `magic` holds; `None` for any other
/// tensor.
pub(crate) fn decode_named_handle(magic: &[u8; 4], t: &Tensor) -> Option<(String, String)> {
    let TensorData::Raw(b) = &t.data else { return None };
    let rest = b.strip_prefix(magic.as_slice()).filter(|_| t.dtype == DType::Resource)?;
    let nul = rest.iter().position(|&c| c == 0)?;
    let text = |s: &[u8]| String::from_utf8_lossy(s).into_owned();
    Some((text(&rest[..nul]), text(&rest[nul + 1..])))
}

/// TensorFlow's check (and words) for a write that must keep a variable's shape.
pub(crate) fn same_shape(name: &str, var: &Tensor, t: &Tensor) -> KResult<()> {
    if var.shape != t.shape {
        return Err(KernelError::invalid(format!(
            "Cannot update variable '{name}' with shape {:?} using a Tensor with shape {:?}, shapes must be equal",
            var.shape, t.shape
        )));
    }
    Ok(())
}

/// `var[i] = f(var[i], x[i])` serially, copying first if the buffer is shared.
fn update_with<T: Elem>(var: &mut Tensor, x: &[T], f: impl Fn(T, T) -> T) {
    let v = T::vec_mut(&mut var.data);
    for (p, &q) in v.iter_mut().zip(x) {
        *p = f(*p, q);
    }
}

fn assign_update<T: Num>(var: &mut Tensor, delta: &Tensor, sub: bool) -> KResult<()> {
    let d = T::slice(delta);
    if sub {
        update_with(var, d, T::sub);
    } else {
        update_with(var, d, T::add);
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scatter {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    Update,
}

fn scatter<T: Num>(op: Scatter, var: &mut Tensor, idx: &[i64], updates: &Tensor) -> KResult<()> {
    let inner: usize = var.shape.iter().skip(1).product();
    let u = T::slice(updates);
    let scalar = updates.num_elements() == 1 && updates.rank() == 0;
    if T::IS_INT && op == Scatter::Div && u.iter().any(|x| !x.is_nonzero()) {
        return Err(KernelError::invalid("Integer division by zero"));
    }
    let v = T::vec_mut(&mut var.data);
    for (k, &i) in idx.iter().enumerate() {
        let dst = &mut v[i as usize * inner..(i as usize + 1) * inner];
        for (j, p) in dst.iter_mut().enumerate() {
            let q = if scalar { u[0] } else { u[k * inner + j] };
            *p = combine(op, *p, q);
        }
    }
    Ok(())
}

/// An element `p` of the variable after a scatter of update `q`.
fn combine<T: Num>(op: Scatter, p: T, q: T) -> T {
    match op {
        Scatter::Add => p.add(q),
        Scatter::Sub => p.sub(q),
        Scatter::Mul => p.mul(q),
        Scatter::Div => p.div(q),
        Scatter::Min => p.minimum(q),
        Scatter::Max => p.maximum(q),
        Scatter::Update => q,
    }
}

/// `ResourceScatterNd{Add,Sub,Update,Max,Min}`: `indices` has shape `[..., k]`; each
/// row of it names a slice `var[i0, .., ik-1]` of shape `var.shape[k:]`, which
/// the matching slice of `updates` (shape `indices.shape[:-1] + var.shape[k:]`)
/// is added to, subtracted from, written over or compared with, in order (duplicates
/// accumulate; for Update the last wins). Every index is checked first.
fn scatter_nd_kernel(kind: Scatter) -> StatefulFn {
    Box::new(move |store: &VariableStore, inp: Inputs| {
        arity(&inp, 3)?;
        let id = handle_var(&inp[0])?;
        let (indices, updates) = (&inp[1], &inp[2]);
        let idx = int_values(indices, "indices")?;
        let var = store.get(id);
        let mut g = var.lock();
        let cur = g.as_ref().ok_or_else(|| uninit(store, id))?;
        if updates.dtype != cur.dtype {
            return Err(KernelError::invalid(format!(
                "updates have dtype {} but the variable {}",
                updates.dtype, cur.dtype
            )));
        }
        let shape_str = super::shape_ops::debug_shape;
        if indices.rank() == 0 {
            return Err(KernelError::invalid(format!(
                "Indices shape must have rank at least one. Found:{}",
                shape_str(&indices.shape)
            )));
        }
        let k = *indices.shape.last().expect("rank >= 1");
        if k > cur.rank() {
            return Err(KernelError::invalid(format!(
                "Dimensions [0,{k}) of indices[shape={}] = {k} must match dimensions [0,{k}) of updates[shape={}]",
                shape_str(&indices.shape),
                shape_str(&updates.shape)
            )));
        }
        let mut want = indices.shape[..indices.rank() - 1].to_vec();
        want.extend_from_slice(&cur.shape[k..]);
        if updates.shape != want {
            return Err(KernelError::invalid(format!(
                "updates must have shape {} (indices.shape[:-1] + ref.shape[{k}:]) for ref of shape {} and indices of shape {}, got {}",
                shape_str(&want),
                shape_str(&cur.shape),
                shape_str(&indices.shape),
                shape_str(&updates.shape)
            )));
        }
        let slice: usize = cur.shape[k..].iter().product();
        let strides = super::strides(&cur.shape[..k]);
        let rows: usize = indices.shape[..indices.rank() - 1].iter().product();
        let mut offsets = Vec::with_capacity(rows);
        for r in 0..rows {
            let ix = &idx[r * k..(r + 1) * k];
            let ok = ix.iter().zip(&cur.shape).all(|(&i, &d)| i >= 0 && (i as usize) < d);
            if !ok {
                let parts: Vec<String> = ix.iter().map(i64::to_string).collect();
                return Err(KernelError::invalid(format!(
                    "indices[{r}] = [{}] does not index into shape {}",
                    parts.join(", "),
                    shape_str(&cur.shape)
                )));
            }
            offsets.push(ix.iter().zip(&strides).map(|(&i, &s)| i as usize * s).sum::<usize>() * slice);
        }
        let mut t = g.take().expect("checked above");
        let r = if is_raw_int(t.dtype) {
            raw_int_update(kind, &mut t, updates, Placement::Slices { offsets: &offsets, slice })
        } else if kind == Scatter::Update && update_only(&t) {
            update_slices(&mut t, &offsets, slice, updates)
        } else {
            dispatch_num!(t.dtype, scatter_nd_apply(kind, &mut t, &offsets, slice, updates))
        };
        *g = Some(t);
        r.map(|()| Outputs::new())
    })
}

fn scatter_nd_apply<T: Num>(
    kind: Scatter,
    var: &mut Tensor,
    offsets: &[usize],
    slice: usize,
    updates: &Tensor,
) -> KResult<()> {
    let u = T::slice(updates);
    let v = T::vec_mut(&mut var.data);
    for (r, &off) in offsets.iter().enumerate() {
        let src = &u[r * slice..(r + 1) * slice];
        for (p, &q) in v[off..off + slice].iter_mut().zip(src) {
            *p = combine(kind, *p, q);
        }
    }
    Ok(())
}

/// Prepares a resource op's kernel, or `None` if `node.op` is not one. Public so that
/// `autoclust-semantics` computes these ops' updates with the very kernels `run` uses.
pub fn prepare(node: &Node) -> KResult<Option<StatefulFn>> {
    let f: StatefulFn = match node.op.as_str() {
        "ReadVariableOp" => {
            let dtype = node.attr("dtype").and_then(|a| a.as_type());
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, 1)?;
                let id = handle_var(&inp[0])?;
                let t = store.get(id).read().ok_or_else(|| uninit(store, id))?;
                if let Some(d) = dtype {
                    if d != t.dtype {
                        return Err(KernelError::invalid(format!(
                            "Trying to read variable '{}' with wrong dtype. Expected {} got {d}",
                            store.get(id).name,
                            t.dtype
                        )));
                    }
                }
                one(t)
            })
        }
        "AssignVariableOp" => {
            let dtype = node.attr("dtype").and_then(|a| a.as_type());
            let validate_shape = attr_bool_or(node, "validate_shape", false)?;
            Box::new(move |store: &VariableStore, mut inp: Inputs| {
                arity(&inp, 2)?;
                let value = inp.pop().expect("two inputs");
                let id = handle_var(&inp[0])?;
                check_dtype(store, id, &value, dtype)?;
                // Any value a variable can hold: numbers, strings (Keras keeps a vocabulary
                // file's path in a string variable), half-precision and byte types.
                let storable = match &value.data {
                    TensorData::Str(_) => value.dtype == DType::String,
                    TensorData::Raw(_) => !matches!(value.dtype, DType::Resource | DType::Variant),
                    _ => super::check_native(&value).is_ok(),
                };
                if !storable {
                    return Err(KernelError::DType(value.dtype));
                }
                let var = store.get(id);
                let mut g = var.lock();
                if validate_shape {
                    if let Some(old) = g.as_ref() {
                        same_shape(&var.name, old, &value)?;
                    }
                }
                *g = Some(value);
                Ok(Outputs::new())
            })
        }
        "AssignAddVariableOp" | "AssignSubVariableOp" => {
            let sub = node.op == "AssignSubVariableOp";
            let dtype = node.attr("dtype").and_then(|a| a.as_type());
            Box::new(move |store: &VariableStore, mut inp: Inputs| {
                arity(&inp, 2)?;
                let delta = inp.pop().expect("two inputs");
                let id = handle_var(&inp[0])?;
                check_dtype(store, id, &delta, dtype)?;
                let var = store.get(id);
                let mut g = var.lock();
                let cur = g.as_ref().ok_or_else(|| uninit(store, id))?;
                same_shape(&var.name, cur, &delta)?;
                let mut t = g.take().expect("checked above");
                let r = if t.dtype.is_half() {
                    half_update(&mut t, &delta, |w, d| dispatch_num!(w.dtype, assign_update(w, d, sub)))
                } else if is_raw_int(t.dtype) {
                    let kind = if sub { Scatter::Sub } else { Scatter::Add };
                    raw_int_update(kind, &mut t, &delta, Placement::Dense)
                } else {
                    dispatch_num!(t.dtype, assign_update(&mut t, &delta, sub))
                };
                *g = Some(t);
                r.map(|()| Outputs::new())
            })
        }
        "ResourceCountUpTo" => {
            // TensorFlow's `ResourceCountUpToOp`: under the variable's lock, the scalar before
            // the increment, or OutOfRange once it has reached `limit` (nothing written).
            let limit = node.attr("limit").and_then(|a| a.as_int()).ok_or_else(|| KernelError::Attr("limit".into()))?;
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, 1)?;
                let id = handle_var(&inp[0])?;
                let var = store.get(id);
                let mut g = var.lock();
                let cur = g.as_ref().ok_or_else(|| uninit(store, id))?;
                if !cur.shape.is_empty() {
                    return Err(KernelError::invalid(format!(
                        "input is not a scalar: {}",
                        super::shape_ops::debug_shape(&cur.shape)
                    )));
                }
                let before = match (cur.as_i32(), cur.as_i64()) {
                    (Some(v), _) => i64::from(v[0]),
                    (_, Some(v)) => v[0],
                    _ => return Err(KernelError::DType(cur.dtype)),
                };
                if before >= limit {
                    return Err(KernelError::invalid(format!("Reached limit of {limit}")));
                }
                let (old, new) = if cur.dtype == DType::Int32 {
                    (Tensor::scalar_i32(before as i32), Tensor::scalar_i32(before as i32 + 1))
                } else {
                    (Tensor::scalar_i64(before), Tensor::scalar_i64(before + 1))
                };
                *g = Some(new);
                Ok(std::iter::once(old).collect())
            })
        }
        "RngReadAndSkip" => Box::new(|store: &VariableStore, inp: Inputs| {
            arity(&inp, 3)?;
            let id = handle_var(&inp[0])?;
            let alg = super::int_scalar(&inp[1], "alg")?;
            let delta = uint64_scalar(&inp[2], "delta")?;
            let var = store.get(id);
            let mut g = var.lock();
            let state = g.as_ref().ok_or_else(|| uninit(store, id))?;
            let read = rng_read_and_skip(state, alg, delta)?;
            *g = Some(read.1);
            one(read.0)
        }),
        "RngSkip" => Box::new(|store: &VariableStore, inp: Inputs| {
            arity(&inp, 3)?;
            let id = handle_var(&inp[0])?;
            let alg = super::int_scalar(&inp[1], "algorithm")?;
            let delta = super::int_scalar(&inp[2], "delta")?;
            let var = store.get(id);
            let mut g = var.lock();
            let state = g.as_ref().ok_or_else(|| uninit(store, id))?;
            let (_, next) = rng_read_and_skip(state, alg, delta as u64)?;
            *g = Some(next);
            Ok(Outputs::new())
        }),
        // `tf.random.Generator.binomial`: TensorFlow's `RandomBinomialOp` draws from the state's
        // key and counter as the stateless op does from its seed's, then moves the counter past
        // `256 · num_batches · 200 · (samples_per_batch + 3) / 4` — Philox only (algorithm 1).
        "StatefulRandomBinomial" => {
            let dtype = super::random::binomial_output_type(attr_type_or(node, "dtype", DType::Int64)?)?;
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, 5)?;
                let id = handle_var(&inp[0])?;
                let operands = super::random::BinomialOperands::new(&inp[2], &inp[3], &inp[4])?;
                if inp[1].rank() != 0 {
                    return Err(KernelError::invalid(format!(
                        "algorithm must be of shape [], not {}",
                        super::shape_ops::debug_shape(&inp[1].shape)
                    )));
                }
                let alg = super::int_scalar(&inp[1], "algorithm")?;
                let var = store.get(id);
                let mut g = var.lock();
                let state = g.as_ref().ok_or_else(|| uninit(store, id))?;
                if alg != 1 && state.dtype == DType::Int64 && state.rank() == 1 {
                    return Err(KernelError::invalid(format!("Unsupported algorithm id: {alg}")));
                }
                let (read, next) = rng_read_and_skip(state, alg, operands.state_delta())?;
                let s = read.as_i64().ok_or(KernelError::DType(read.dtype))?;
                let (c0, c1, k) = (s[0] as u64, s[1] as u64, s[2] as u64);
                let gen = super::random::Philox {
                    counter: [c0 as u32, (c0 >> 32) as u32, c1 as u32, (c1 >> 32) as u32],
                    key: [k as u32, (k >> 32) as u32],
                };
                let out = operands.draw(gen, dtype)?;
                *g = Some(next);
                one(out)
            })
        }
        op if super::random::Draw::of_stateful(op).is_some() => {
            let draw = super::random::Draw::of_stateful(op).expect("checked");
            let default = if draw == super::random::Draw::FullInt { DType::UInt64 } else { DType::Float32 };
            let dtype = attr_type_or(node, "dtype", default)?;
            if !draw.takes(dtype) {
                return Err(KernelError::DType(dtype));
            }
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, if draw == super::random::Draw::Int { 5 } else { 3 })?;
                let id = handle_var(&inp[0])?;
                let alg = super::int_scalar(&inp[1], "algorithm")?;
                let shape = super::random::shape_operand(&inp[2])?;
                let n: usize = shape.iter().product();
                let var = store.get(id);
                let mut g = var.lock();
                let state = g.as_ref().ok_or_else(|| uninit(store, id))?;
                // The draw reads the state and advances the counter by 256 per output
                // element, as `RngReadAndSkip` with that count (`UpdateMemWithPhiloxRandom`).
                let (read, next) = rng_read_and_skip(state, alg, n as u64)?;
                let s = read.as_i64().ok_or(KernelError::DType(read.dtype))?;
                let (c0, c1, k) = (s[0] as u64, s[1] as u64, s[2] as u64);
                let gen = super::random::Philox {
                    counter: [c0 as u32, (c0 >> 32) as u32, c1 as u32, (c1 >> 32) as u32],
                    key: [k as u32, (k >> 32) as u32],
                };
                let bounds = (draw == super::random::Draw::Int).then(|| (&inp[3], &inp[4]));
                let out = super::random::draw(draw, gen, dtype, shape, bounds)?;
                *g = Some(next);
                one(out)
            })
        }
        "VarIsInitializedOp" => Box::new(|store: &VariableStore, inp: Inputs| {
            arity(&inp, 1)?;
            let id = handle_var(&inp[0])?;
            one(Tensor::scalar_bool(store.get(id).read().is_some()))
        }),
        "VariableShape" => {
            let out = attr_type_or(node, "out_type", DType::Int32)?;
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, 1)?;
                let id = handle_var(&inp[0])?;
                let t = store.get(id).read().ok_or_else(|| uninit(store, id))?;
                one(int_tensor(out, vec![t.rank()], t.shape.iter().map(|&d| d as i64).collect())?)
            })
        }
        "ResourceGather" => {
            // TensorFlow gathers along axis `batch_dims` of the variable.
            let batch_dims = super::attr_int_or(node, "batch_dims", 0)?;
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, 2)?;
                let id = handle_var(&inp[0])?;
                let t = store.get(id).read().ok_or_else(|| uninit(store, id))?;
                let bd = if batch_dims < 0 { batch_dims + inp[1].rank() as i64 } else { batch_dims };
                one(super::array::gather_batched(&t, &inp[1], bd, bd)?)
            })
        }
        "ResourceGatherNd" => Box::new(move |store: &VariableStore, inp: Inputs| {
            arity(&inp, 2)?;
            let id = handle_var(&inp[0])?;
            let t = store.get(id).read().ok_or_else(|| uninit(store, id))?;
            one(super::array::gather_nd_any(&t, &inp[1])?)
        }),
        "ResourceStridedSliceAssign" => {
            let m = super::array::SliceMasks::of(node)?;
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, 5)?;
                let id = handle_var(&inp[0])?;
                let (b, e, s) =
                    (int_values(&inp[1], "begin")?, int_values(&inp[2], "end")?, int_values(&inp[3], "strides")?);
                let var = store.get(id);
                let mut g = var.lock();
                let cur = g.as_ref().ok_or_else(|| uninit(store, id))?;
                let (pos, slice) = super::array::slice_positions(&cur.shape, &b, &e, &s, m)?;
                let next = super::array::assign_slice(cur, &pos, &slice, &inp[4])?;
                *g = Some(next);
                Ok(Outputs::new())
            })
        }
        "ResourceScatterNdAdd" => scatter_nd_kernel(Scatter::Add),
        "ResourceScatterNdSub" => scatter_nd_kernel(Scatter::Sub),
        "ResourceScatterNdUpdate" => scatter_nd_kernel(Scatter::Update),
        "ResourceScatterNdMax" => scatter_nd_kernel(Scatter::Max),
        "ResourceScatterNdMin" => scatter_nd_kernel(Scatter::Min),
        op if op.starts_with("ResourceScatter") && !op.contains("Nd") => {
            let kind = match op {
                "ResourceScatterAdd" => Scatter::Add,
                "ResourceScatterSub" => Scatter::Sub,
                "ResourceScatterMul" => Scatter::Mul,
                "ResourceScatterDiv" => Scatter::Div,
                "ResourceScatterMin" => Scatter::Min,
                "ResourceScatterMax" => Scatter::Max,
                "ResourceScatterUpdate" => Scatter::Update,
                _ => return Ok(None),
            };
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, 3)?;
                let id = handle_var(&inp[0])?;
                let idx = int_values(&inp[1], "indices")?;
                let updates = &inp[2];
                let var = store.get(id);
                let mut g = var.lock();
                let cur = g.as_ref().ok_or_else(|| uninit(store, id))?;
                if updates.dtype != cur.dtype {
                    return Err(KernelError::invalid(format!(
                        "updates have dtype {} but the variable {}",
                        updates.dtype, cur.dtype
                    )));
                }
                if cur.rank() == 0 {
                    return Err(KernelError::invalid("cannot scatter into a scalar variable"));
                }
                let rows = cur.shape[0];
                for (k, &i) in idx.iter().enumerate() {
                    if i < 0 || i as usize >= rows {
                        return Err(KernelError::invalid(format!("indices[{k}] = {i} is not in [0, {rows})")));
                    }
                }
                let mut want = inp[1].shape.clone();
                want.extend(&cur.shape[1..]);
                if !(updates.rank() == 0 || updates.shape == want) {
                    return Err(KernelError::invalid(format!(
                        "updates must have shape {want:?} or be a scalar, got {:?}",
                        updates.shape
                    )));
                }
                let mut t = g.take().expect("checked above");
                let r = if t.dtype.is_half() {
                    half_update(&mut t, updates, |w, u| dispatch_num!(w.dtype, scatter(kind, w, &idx, u)))
                } else if is_raw_int(t.dtype) {
                    let inner = t.shape.iter().skip(1).product();
                    let rows = Placement::Rows { idx: &idx, inner, scalar: updates.rank() == 0 };
                    raw_int_update(kind, &mut t, updates, rows)
                } else if kind == Scatter::Update && update_only(&t) {
                    let inner: usize = t.shape.iter().skip(1).product();
                    let offsets: Vec<usize> = idx.iter().map(|&i| i as usize * inner).collect();
                    update_slices(&mut t, &offsets, inner, updates)
                } else {
                    dispatch_num!(t.dtype, scatter(kind, &mut t, &idx, updates))
                };
                *g = Some(t);
                r.map(|()| Outputs::new())
            })
        }
        op if super::optimizer::is_optimizer_op(op) => return super::optimizer::prepare(node),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// The integer dtypes held as raw bytes (`int8`, `uint8`, `int16`, `uint16`, `uint32`,
/// `uint64`), which TensorFlow's read-modify-write variable kernels all cover
/// (`TF_CALL_NUMBER_TYPES` in `resource_variable_ops.cc` and `scatter_nd_op.cc`).
fn is_raw_int(d: DType) -> bool {
    matches!(d, DType::Int8 | DType::UInt8 | DType::Int16 | DType::UInt16 | DType::UInt32 | DType::UInt64)
}

/// Where a read-modify-write op puts each element of its update.
#[derive(Clone, Copy, Debug)]
enum Placement<'a> {
    /// Update element `i` onto variable element `i` (`AssignAdd/SubVariableOp`).
    Dense,
    /// Update row `k` onto variable row `idx[k]` of `inner` elements, or the scalar update
    /// onto each element of those rows (`ResourceScatter*`).
    Rows { idx: &'a [i64], inner: usize, scalar: bool },
    /// Update slice `r` onto the `slice` elements from `offsets[r]` (`ResourceScatterNd*`).
    Slices { offsets: &'a [usize], slice: usize },
}

/// An integer element type held as little-endian bytes, with C++'s wrapping arithmetic.
trait RawInt: Copy + Ord {
    const WIDTH: usize;
    fn get(b: &[u8]) -> Self;
    fn put(self, b: &mut [u8]);
    fn is_zero(self) -> bool;
    /// An element `p` of the variable after an update `q` (zero divisors ruled out).
    fn combine(op: Scatter, p: Self, q: Self) -> Self;
}

macro_rules! raw_int_impl {
    ($($t:ty),*) => {$(
        impl RawInt for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
            fn get(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("one element's bytes"))
            }
            fn put(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
            fn is_zero(self) -> bool {
                self == 0
            }
            fn combine(op: Scatter, p: Self, q: Self) -> Self {
                match op {
                    Scatter::Add => p.wrapping_add(q),
                    Scatter::Sub => p.wrapping_sub(q),
                    Scatter::Mul => p.wrapping_mul(q),
                    Scatter::Div => p.wrapping_div(q),
                    Scatter::Min => p.min(q),
                    Scatter::Max => p.max(q),
                    Scatter::Update => q,
                }
            }
        }
    )*};
}
raw_int_impl!(i8, u8, i16, u16, u32, u64);

/// A read-modify-write of a raw-byte integer variable `var` with `updates` (already checked
/// to fit `at`), in the variable's own width: sums, differences and products wrap, `Div`
/// truncates (a zero divisor is TensorFlow's error, nothing written).
fn raw_int_update(kind: Scatter, var: &mut Tensor, updates: &Tensor, at: Placement<'_>) -> KResult<()> {
    match var.dtype {
        DType::Int8 => raw_int_apply::<i8>(kind, var, updates, at),
        DType::UInt8 => raw_int_apply::<u8>(kind, var, updates, at),
        DType::Int16 => raw_int_apply::<i16>(kind, var, updates, at),
        DType::UInt16 => raw_int_apply::<u16>(kind, var, updates, at),
        DType::UInt32 => raw_int_apply::<u32>(kind, var, updates, at),
        DType::UInt64 => raw_int_apply::<u64>(kind, var, updates, at),
        d => Err(KernelError::DType(d)),
    }
}

fn raw_int_apply<T: RawInt>(kind: Scatter, var: &mut Tensor, updates: &Tensor, at: Placement<'_>) -> KResult<()> {
    let (TensorData::Raw(ub), TensorData::Raw(_)) = (&updates.data, &var.data) else {
        return Err(KernelError::DType(var.dtype));
    };
    let u: Vec<T> = ub.chunks_exact(T::WIDTH).map(T::get).collect();
    if kind == Scatter::Div && u.iter().any(|x| x.is_zero()) {
        return Err(KernelError::invalid("Integer division by zero"));
    }
    let TensorData::Raw(vb) = &mut var.data else { unreachable!("matched above") };
    let v = Arc::make_mut(vb);
    let w = T::WIDTH;
    let mut apply = |i: usize, q: T| {
        let e = &mut v[i * w..(i + 1) * w];
        T::combine(kind, T::get(e), q).put(e);
    };
    match at {
        Placement::Dense => u.iter().enumerate().for_each(|(i, &q)| apply(i, q)),
        Placement::Rows { idx, inner, scalar } => {
            for (k, &row) in idx.iter().enumerate() {
                for j in 0..inner {
                    apply(row as usize * inner + j, if scalar { u[0] } else { u[k * inner + j] });
                }
            }
        }
        Placement::Slices { offsets, slice } => {
            for (r, &off) in offsets.iter().enumerate() {
                for j in 0..slice {
                    apply(off + j, u[r * slice + j]);
                }
            }
        }
    }
    Ok(())
}

/// A float16/bfloat16 variable `t` updated by `f` with `other` as TensorFlow's kernels update
/// it: each element computed in float32 and rounded once to the half type (a row a scatter
/// updates twice is rounded once, where TensorFlow rounds after each update).
fn half_update(t: &mut Tensor, other: &Tensor, f: impl FnOnce(&mut Tensor, &Tensor) -> KResult<()>) -> KResult<()> {
    let dtype = t.dtype;
    let mut wide = super::half::widen(t)?;
    let other = if other.dtype.is_half() { super::half::widen(other)? } else { other.clone() };
    f(&mut wide, &other)?;
    *t = super::half::narrow(&wide, dtype)?;
    Ok(())
}

/// A uint64 scalar operand (its little-endian bytes).
fn uint64_scalar(t: &Tensor, what: &str) -> KResult<u64> {
    match (&t.data, t.dtype) {
        (TensorData::Raw(b), DType::UInt64) if t.rank() == 0 && b.len() == 8 => {
            Ok(u64::from_le_bytes(b[..8].try_into().expect("8 bytes")))
        }
        _ => Err(KernelError::invalid(format!("{what} must be a uint64 scalar, got {} {:?}", t.dtype, t.shape))),
    }
}

/// `RngReadAndSkip` (`stateful_random_ops.cc`) on a generator `state`: the first three
/// elements of the int64 state — Philox's `[counter_lo, counter_hi, key]` — and the state
/// with its 128-bit counter advanced by 256·`delta` (the 256 words a Philox draw of one
/// element may take, TensorFlow's convention). Algorithms 1 (Philox) and 3 (auto-select,
/// Philox on a CPU) only, as on TensorFlow's CPU; TensorFlow's errors.
pub(crate) fn rng_read_and_skip(state: &Tensor, alg: i64, delta: u64) -> KResult<(Tensor, Tensor)> {
    if state.dtype != DType::Int64 {
        return Err(KernelError::invalid(format!("dtype of RNG state variable must be int64, not {}", state.dtype)));
    }
    if state.rank() != 1 {
        return Err(KernelError::invalid(format!(
            "RNG state must have one and only one dimension, not {}",
            state.rank()
        )));
    }
    if !matches!(alg, 1 | 3) {
        return Err(KernelError::invalid(format!("Unsupported algorithm id: {alg}")));
    }
    let s = state.as_i64().ok_or(KernelError::DType(state.dtype))?;
    if s.len() < 3 {
        return Err(KernelError::invalid(format!(
            "For the Philox algorithm, the size of state must be at least 3; got {}",
            s.len()
        )));
    }
    let read = Tensor::from_i64(vec![3], s[..3].to_vec()).map_err(|e| KernelError::invalid(e.to_string()))?;
    let counter = u128::from(s[0] as u64) | (u128::from(s[1] as u64) << 64);
    let counter = counter.wrapping_add(u128::from(delta) * 256);
    let mut next = s.to_vec();
    next[0] = counter as u64 as i64;
    next[1] = (counter >> 64) as u64 as i64;
    let next = Tensor::from_i64(state.shape.clone(), next).map_err(|e| KernelError::invalid(e.to_string()))?;
    Ok((read, next))
}

/// Whether `op` has a resource-variable kernel here: [`is_resource_op`]'s, and
/// `ResourceCountUpTo` (TF1's `count_up_to`), which TensorFlow's resource-op table — and so
/// the safety analysis and the semantics explorer's model — leaves out: it is never
/// clustered, and `explore` declines a graph holding it.
pub fn has_resource_kernel(op: &str) -> bool {
    is_resource_op(op) || op == "ResourceCountUpTo"
}

/// Whether `op` is a resource op of TensorFlow's table with a kernel here (each one the
/// semantics explorer models).
pub fn is_resource_op(op: &str) -> bool {
    matches!(
        op,
        "ReadVariableOp"
            | "AssignVariableOp"
            | "AssignAddVariableOp"
            | "AssignSubVariableOp"
            | "VarIsInitializedOp"
            | "VariableShape"
            | "ResourceGather"
            | "ResourceGatherNd"
            | "ResourceScatterAdd"
            | "ResourceScatterSub"
            | "ResourceScatterMul"
            | "ResourceScatterDiv"
            | "ResourceScatterMin"
            | "ResourceScatterMax"
            | "ResourceScatterUpdate"
            | "ResourceScatterNdAdd"
            | "ResourceScatterNdSub"
            | "ResourceScatterNdUpdate"
            | "ResourceScatterNdMax"
            | "ResourceScatterNdMin"
            | "ResourceStridedSliceAssign"
            | "RngReadAndSkip"
            | "RngSkip"
            | "StatefulUniform"
            | "StatefulStandardNormalV2"
            | "StatefulTruncatedNormal"
            | "StatefulUniformInt"
            | "StatefulUniformFullInt"
            | "StatefulRandomBinomial"
    ) || super::optimizer::is_optimizer_op(op)
}

/// `ResourceScatterUpdate` and `ResourceScatterNdUpdate` on a variable of a dtype the
/// arithmetic kernels do not take (bool, string, complex and the other raw fixed-width types;
/// TensorFlow registers the updates for every type): the `slice` elements at each
/// `offsets[k]` of `t` become update row `k` (all of them the scalar `updates` when it is
/// one), later rows winning, as TensorFlow's CPU kernels write them in order. Shapes and
/// bounds are checked by the caller.
fn update_slices(t: &mut Tensor, offsets: &[usize], slice: usize, updates: &Tensor) -> KResult<()> {
    fn copy<T: Clone>(dst: &mut [T], src: &[T], offsets: &[usize], slice: usize, scalar: bool) {
        for (k, &off) in offsets.iter().enumerate() {
            let row = &mut dst[off..][..slice];
            if scalar {
                row.fill(src[0].clone());
            } else {
                row.clone_from_slice(&src[k * slice..][..slice]);
            }
        }
    }
    let scalar = updates.rank() == 0;
    match (&mut t.data, &updates.data) {
        (TensorData::Bool(d), TensorData::Bool(u)) => copy(Arc::make_mut(d).as_mut_slice(), u, offsets, slice, scalar),
        (TensorData::Str(d), TensorData::Str(u)) => copy(Arc::make_mut(d).as_mut_slice(), u, offsets, slice, scalar),
        (TensorData::Raw(d), TensorData::Raw(u)) => {
            let size = t.dtype.size_of().ok_or(KernelError::DType(t.dtype))?;
            let d = Arc::make_mut(d);
            for (k, &off) in offsets.iter().enumerate() {
                let row = &mut d[off * size..][..slice * size];
                if scalar {
                    for e in row.chunks_mut(size) {
                        e.copy_from_slice(&u[..size]);
                    }
                } else {
                    row.copy_from_slice(&u[k * slice * size..][..slice * size]);
                }
            }
        }
        _ => return Err(KernelError::DType(t.dtype)),
    }
    Ok(())
}

/// Whether `t` holds a type only [`update_slices`] scatters into.
fn update_only(t: &Tensor) -> bool {
    matches!(t.data, TensorData::Bool(_) | TensorData::Str(_) | TensorData::Raw(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::node;
    use autoclust_graph::{AttrValue, Shape};
    use smallvec::smallvec;

    #[test]
    fn rng_read_and_skip_returns_the_state_and_advances_the_counter_with_carry() {
        let state = Tensor::from_i64(vec![3], vec![5, 0, 42]).unwrap();
        let (read, next) = rng_read_and_skip(&state, 1, 10).unwrap();
        assert_eq!(read, state);
        assert_eq!(next.as_i64().unwrap(), &[5 + 2560, 0, 42]);
        // The low word wraps into the high one (a 128-bit counter).
        let state = Tensor::from_i64(vec![3], vec![-1, 7, 9]).unwrap();
        let (_, next) = rng_read_and_skip(&state, 3, 1).unwrap();
        assert_eq!(next.as_i64().unwrap(), &[255, 8, 9]);
        // The kernel: read under the variable's lock, state written back.
        let (store, id) = store_with(Tensor::from_i64(vec![3], vec![1, 2, 3]).unwrap());
        let f = prepare(&node("RngReadAndSkip", &[])).unwrap().unwrap();
        let delta = Tensor {
            dtype: DType::UInt64,
            shape: vec![],
            data: TensorData::Raw(Arc::new(4u64.to_le_bytes().to_vec())),
        };
        let out = f(&store, smallvec![handle_tensor(id), Tensor::scalar_i32(1), delta.clone()]).unwrap();
        assert_eq!(out[0].as_i64().unwrap(), &[1, 2, 3]);
        assert_eq!(store.get(id).read().unwrap().as_i64().unwrap(), &[1 + 1024, 2, 3]);
        // TensorFlow's checks.
        let bad = rng_read_and_skip(&Tensor::from_i32(vec![3], vec![1, 2, 3]).unwrap(), 1, 1).unwrap_err();
        assert!(bad.to_string().contains("must be int64, not int32"), "{bad}");
        let alg = rng_read_and_skip(&Tensor::from_i64(vec![3], vec![1, 2, 3]).unwrap(), 2, 1).unwrap_err();
        assert!(alg.to_string().contains("Unsupported algorithm id: 2"), "{alg}");
        let short = rng_read_and_skip(&Tensor::from_i64(vec![2], vec![1, 2]).unwrap(), 1, 1).unwrap_err();
        assert!(short.to_string().contains("at least 3; got 2"), "{short}");
    }

    /// `tf.raw_ops.Stateful*` on a variable holding `[5, 1, 42]` (TensorFlow 2.21, eager):
    /// each draw equals the stateless V2 op's from key 42 and counter [5, 1], and leaves the
    /// counter advanced by 256 per element; `RngSkip` by 256·delta. Bounds are checked
    /// before the state moves.
    #[test]
    fn stateful_generators_draw_like_tensorflow_and_advance_the_state() {
        let draw = |op: &str, attrs: &[(&str, AttrValue)], alg: i64, shape: &[i64], extra: Vec<Tensor>| {
            let (store, id) = store_with(Tensor::from_i64(vec![3], vec![5, 1, 42]).unwrap());
            let f = prepare(&node(op, attrs)).unwrap().unwrap();
            let mut inp: Inputs = smallvec![
                handle_tensor(id),
                Tensor::scalar_i64(alg),
                Tensor::from_i64(vec![shape.len()], shape.to_vec()).unwrap()
            ];
            inp.extend(extra);
            let out = f(&store, inp).map(|mut o| o.remove(0));
            let state = store.get(id).read().unwrap().as_i64().unwrap().to_vec();
            (out, state)
        };
        let bits = |t: &Tensor| t.as_f32().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let (u, st) = draw("StatefulUniform", &[], 1, &[5], vec![]);
        assert_eq!(bits(&u.unwrap()), [0x3e5ae6f8, 0x3f32a0ce, 0x3e5c7ca0, 0x3eafe0dc, 0x3f46559e]);
        assert_eq!(st, [5 + 5 * 256, 1, 42]);
        let (u, st) = draw("StatefulUniform", &[], 3, &[2], vec![]);
        assert_eq!(bits(&u.unwrap()), [0x3e5ae6f8, 0x3f32a0ce], "auto-select is Philox");
        assert_eq!(st, [517, 1, 42]);
        let (n, st) = draw("StatefulStandardNormalV2", &[], 1, &[2, 3], vec![]);
        let n = n.unwrap();
        assert_eq!(n.shape, [2, 3]);
        assert_eq!(bits(&n), [0xbfd4d87a, 0xbf10f3a0, 0x3fbab392, 0xbf78b1c1, 0x3f0eaaa6, 0x3ee4e663]);
        assert_eq!(st, [1541, 1, 42]);
        let f64s = [("dtype", AttrValue::Type(DType::Float64))];
        let (t, st) = draw("StatefulTruncatedNormal", &f64s, 1, &[4], vec![]);
        let want: [u64; 4] = [0xbfea1507a2090d5f, 0xbfc22bf9fd70369a, 0x3fc2f6d28ddeb078, 0x3ffab648c2c5010f];
        assert_eq!(t.unwrap().as_f64().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want);
        assert_eq!(st, [1029, 1, 42]);
        let i64s = [("dtype", AttrValue::Type(DType::Int64))];
        let (x, st) = draw("StatefulUniformFullInt", &i64s, 1, &[3], vec![]);
        assert_eq!(x.unwrap().as_i64().unwrap(), [-623378668783444769, -4094906518269620332, 8435868877738683087]);
        assert_eq!(st, [773, 1, 42]);
        let i32s = [("dtype", AttrValue::Type(DType::Int32))];
        let bounds = vec![Tensor::scalar_i32(-3), Tensor::scalar_i32(10)];
        let (x, st) = draw("StatefulUniformInt", &i32s, 1, &[6], bounds);
        assert_eq!(x.unwrap().as_i32().unwrap(), [5, 8, 2, -1, 1, 0]);
        assert_eq!(st, [1541, 1, 42]);
        let (bad, st) = draw("StatefulUniformInt", &i32s, 1, &[6], vec![Tensor::scalar_i32(3), Tensor::scalar_i32(3)]);
        assert!(bad.unwrap_err().to_string().contains("Need minval < maxval, got 3 >= 3"));
        assert_eq!(st, [5, 1, 42], "a refused draw leaves the state");
        let (bad, _) = draw("StatefulUniform", &[], 2, &[1], vec![]);
        assert!(bad.unwrap_err().to_string().contains("Unsupported algorithm id: 2"));
        // RngSkip(delta = 7).
        let (store, id) = store_with(Tensor::from_i64(vec![3], vec![5, 1, 42]).unwrap());
        let out =
            run("RngSkip", &store, smallvec![handle_tensor(id), Tensor::scalar_i64(1), Tensor::scalar_i64(7)]).unwrap();
        assert!(out.is_empty());
        assert_eq!(store.get(id).read().unwrap().as_i64().unwrap(), &[1797, 1, 42]);
    }

    /// `tf.raw_ops.StatefulRandomBinomial` on a variable holding `[5, 1, 42]` (TensorFlow 2.21,
    /// eager): `v = tf.Variable(tf.constant([5, 1, 42], tf.int64));
    /// tf.raw_ops.StatefulRandomBinomial(resource=v.handle, algorithm=tf.constant(1, tf.int64),
    /// shape=tf.constant([3], tf.int32), counts=tf.constant([4., 8., 16.]), probs=tf.constant([.5,
    /// .5, .1]), dtype=tf.int32)`, then `v.numpy()`; the others alike. The counter moves by
    /// 256 · pairs · 200 · (samples + 3) / 4; auto-select (3) is refused, as TensorFlow does.
    #[test]
    fn stateful_binomial_draws_like_tensorflow_and_advances_the_state() {
        let draw = |t: DType, dtype: DType, alg: i64, shape: &[i32], counts: Tensor, probs: Tensor| {
            let (store, id) = store_with(Tensor::from_i64(vec![3], vec![5, 1, 42]).unwrap());
            let f = prepare(&node(
                "StatefulRandomBinomial",
                &[("T", AttrValue::Type(t)), ("dtype", AttrValue::Type(dtype))],
            ))
            .unwrap()
            .unwrap();
            let inp: Inputs = smallvec![
                handle_tensor(id),
                Tensor::scalar_i64(alg),
                Tensor::from_i32(vec![shape.len()], shape.to_vec()).unwrap(),
                counts,
                probs
            ];
            let out = f(&store, inp).map(|mut o| o.remove(0));
            (out, store.get(id).read().unwrap().as_i64().unwrap().to_vec())
        };
        let f32s = |s: &[usize], v: &[f32]| Tensor::from_f32(s.to_vec(), v.to_vec()).unwrap();
        let f64s = |s: &[usize], v: &[f64]| Tensor::from_f64(s.to_vec(), v.to_vec()).unwrap();
        let (f32_, f64_, i32_, i64_) = (DType::Float32, DType::Float64, DType::Int32, DType::Int64);
        let (x, st) = draw(f32_, i32_, 1, &[3], f32s(&[3], &[4.0, 8.0, 16.0]), f32s(&[3], &[0.5, 0.5, 0.1]));
        assert_eq!(x.unwrap().as_i32().unwrap(), [3, 2, 0]);
        assert_eq!(st, [5 + 256 * 600, 1, 42]);
        let (x, st) = draw(f64_, f64_, 1, &[2, 2], f64s(&[2, 1], &[100.0, 6.0]), f64s(&[2], &[0.3, 0.8]));
        assert_eq!(x.unwrap().as_f64().unwrap(), [33.0, 79.0, 1.0, 3.0]);
        assert_eq!(st, [204805, 1, 42]);
        let half = |v: &[f32]| crate::kernels::half::narrow(&f32s(&[v.len()], v), DType::Float16).unwrap();
        let (x, st) = draw(DType::Float16, i64_, 1, &[4, 3], half(&[50.0]), half(&[0.2, 0.5, 0.7]));
        assert_eq!(x.unwrap().as_i64().unwrap(), [12, 30, 35, 11, 25, 32, 8, 26, 36, 5, 29, 39]);
        assert_eq!(st, [268805, 1, 42]);
        let (bad, st) = draw(f32_, i32_, 3, &[3], f32s(&[3], &[4.0, 8.0, 16.0]), f32s(&[3], &[0.5, 0.5, 0.1]));
        assert!(bad.unwrap_err().to_string().contains("Unsupported algorithm id: 3"));
        assert_eq!(st, [5, 1, 42], "a refused draw leaves the state");
    }

    fn store_with(v: Tensor) -> (VariableStore, VarId) {
        let s = VariableStore::new();
        let id = s.get_or_create("", "w", v.dtype, Shape::unknown());
        s.get(id).write(v);
        (s, id)
    }

    fn run(op: &str, store: &VariableStore, inp: Inputs) -> KResult<Outputs> {
        prepare(&node(op, &[]))?.expect("a resource op")(store, inp)
    }

    /// Raw-byte integer tensors of `dtype` (values truncated to its width).
    fn raw_ints(dtype: DType, shape: Vec<usize>, v: &[i128]) -> Tensor {
        let w = dtype.size_of().unwrap();
        Tensor::from_raw(dtype, shape, v.iter().flat_map(|x| x.to_le_bytes()[..w].to_vec()).collect()).unwrap()
    }

    /// A raw-byte integer tensor's values (sign-extended for int8/int16).
    fn raw_values(t: &Tensor) -> Vec<i128> {
        let w = t.dtype.size_of().unwrap();
        let signed = matches!(t.dtype, DType::Int8 | DType::Int16);
        let TensorData::Raw(b) = &t.data else { panic!("raw bytes") };
        b.chunks_exact(w)
            .map(|c| {
                let mut le = [0u8; 16];
                le[..w].copy_from_slice(c);
                let u = u128::from_le_bytes(le);
                if signed && (u >> (8 * w - 1)) & 1 == 1 {
                    u as i128 - (1i128 << (8 * w))
                } else {
                    u as i128
                }
            })
            .collect()
    }

    /// `AssignAdd/SubVariableOp`, `ResourceScatter{Add,Sub,Mul,Div,Min,Max,Update}`,
    /// `ResourceScatterNd{Add,Sub,Update,Min,Max}` and `ResourceGather` on the raw-byte integer
    /// variables ("unsupported dtype" before, sweep 65): each row is TensorFlow 2.21's value of
    /// the variable after one op from `init` with `upd` (tf.compat.v1 graphs, one op each:
    /// wrapping sums and products, truncating division, `uint64` past `i64::MAX`).
    #[test]
    fn narrow_and_unsigned_integer_variables_update_like_tensorflow() {
        use DType::*;
        type Case = (DType, [i128; 4], [i128; 4], [[i128; 4]; 16]);
        let cases: [Case; 6] = [
            (
                Int8,
                [5, -7, 127, -128],
                [3, 2, 100, -1],
                [
                    [8, -5, -29, 127],    // AssignAdd
                    [2, -9, 27, -127],    // AssignSub
                    [7, -7, -26, -128],   // ScatterAdd
                    [3, -7, 24, -128],    // ScatterSub
                    [-12, 7, -2, -128],   // ScatterMul
                    [2, 0, 42, -128],     // ScatterDiv
                    [3, -7, 100, -128],   // ScatterMin
                    [5, 2, 127, -1],      // ScatterMax
                    [5, -1, 127, 100],    // ScatterUpdate
                    [5, 93, 127, -28],    // ScatterAddScalar
                    [5, -6, 127, -28],    // NdAdd
                    [5, -107, 127, -127], // NdSub
                    [100, -7, -1, -128],  // NdUpdate
                    [3, -7, 100, -128],   // NdMin
                    [5, 2, 127, -1],      // NdMax
                    [-128, 5, -7, -7],    // Gather
                ],
            ),
            (
                UInt8,
                [5, 255, 134, 10],
                [3, 2, 128, 253],
                [
                    [8, 1, 6, 7],        // AssignAdd
                    [2, 253, 6, 13],     // AssignSub
                    [7, 255, 9, 10],     // ScatterAdd
                    [3, 255, 3, 10],     // ScatterSub
                    [128, 3, 12, 10],    // ScatterMul
                    [2, 1, 44, 0],       // ScatterDiv
                    [3, 2, 128, 10],     // ScatterMin
                    [5, 255, 134, 253],  // ScatterMax
                    [5, 253, 134, 128],  // ScatterUpdate
                    [5, 127, 134, 138],  // ScatterAddScalar
                    [5, 254, 134, 138],  // NdAdd
                    [5, 127, 134, 13],   // NdSub
                    [128, 255, 253, 10], // NdUpdate
                    [3, 2, 128, 10],     // NdMin
                    [5, 255, 134, 253],  // NdMax
                    [10, 5, 255, 255],   // Gather
                ],
            ),
            (
                Int16,
                [5, -7, 32767, -32768],
                [3, 2, 100, -1],
                [
                    [8, -5, -32669, 32767],   // AssignAdd
                    [2, -9, 32667, -32767],   // AssignSub
                    [7, -7, -32666, -32768],  // ScatterAdd
                    [3, -7, 32664, -32768],   // ScatterSub
                    [500, 7, -2, -32768],     // ScatterMul
                    [2, 0, 10922, -32768],    // ScatterDiv
                    [3, -7, 100, -32768],     // ScatterMin
                    [5, 2, 32767, -1],        // ScatterMax
                    [5, -1, 32767, 100],      // ScatterUpdate
                    [5, 93, 32767, -32668],   // ScatterAddScalar
                    [5, -6, 32767, -32668],   // NdAdd
                    [5, -107, 32767, -32767], // NdSub
                    [100, -7, -1, -32768],    // NdUpdate
                    [3, -7, 100, -32768],     // NdMin
                    [5, 2, 32767, -1],        // NdMax
                    [-32768, 5, -7, -7],      // Gather
                ],
            ),
            (
                UInt16,
                [5, 65535, 32774, 10],
                [3, 2, 32768, 65533],
                [
                    [8, 1, 6, 7],              // AssignAdd
                    [2, 65533, 6, 13],         // AssignSub
                    [7, 65535, 9, 10],         // ScatterAdd
                    [3, 65535, 3, 10],         // ScatterSub
                    [32768, 3, 12, 10],        // ScatterMul
                    [2, 1, 10924, 0],          // ScatterDiv
                    [3, 2, 32768, 10],         // ScatterMin
                    [5, 65535, 32774, 65533],  // ScatterMax
                    [5, 65533, 32774, 32768],  // ScatterUpdate
                    [5, 32767, 32774, 32778],  // ScatterAddScalar
                    [5, 65534, 32774, 32778],  // NdAdd
                    [5, 32767, 32774, 13],     // NdSub
                    [32768, 65535, 65533, 10], // NdUpdate
                    [3, 2, 32768, 10],         // NdMin
                    [5, 65535, 32774, 65533],  // NdMax
                    [10, 5, 65535, 65535],     // Gather
                ],
            ),
            (
                UInt32,
                [5, 4294967295, 2147483654, 10],
                [3, 2, 2147483648, 4294967293],
                [
                    [8, 1, 6, 7],                             // AssignAdd
                    [2, 4294967293, 6, 13],                   // AssignSub
                    [7, 4294967295, 9, 10],                   // ScatterAdd
                    [3, 4294967295, 3, 10],                   // ScatterSub
                    [2147483648, 3, 12, 10],                  // ScatterMul
                    [2, 1, 715827884, 0],                     // ScatterDiv
                    [3, 2, 2147483648, 10],                   // ScatterMin
                    [5, 4294967295, 2147483654, 4294967293],  // ScatterMax
                    [5, 4294967293, 2147483654, 2147483648],  // ScatterUpdate
                    [5, 2147483647, 2147483654, 2147483658],  // ScatterAddScalar
                    [5, 4294967294, 2147483654, 2147483658],  // NdAdd
                    [5, 2147483647, 2147483654, 13],          // NdSub
                    [2147483648, 4294967295, 4294967293, 10], // NdUpdate
                    [3, 2, 2147483648, 10],                   // NdMin
                    [5, 4294967295, 2147483654, 4294967293],  // NdMax
                    [10, 5, 4294967295, 4294967295],          // Gather
                ],
            ),
            (
                UInt64,
                [5, 18446744073709551615, 9223372036854775815, 10],
                [3, 2, 9223372036854775808, 18446744073709551613],
                [
                    [8, 1, 7, 7],                                                          // AssignAdd
                    [2, 18446744073709551613, 7, 13],                                      // AssignSub
                    [7, 18446744073709551615, 10, 10],                                     // ScatterAdd
                    [3, 18446744073709551615, 4, 10],                                      // ScatterSub
                    [9223372036854775808, 3, 14, 10],                                      // ScatterMul
                    [2, 1, 3074457345618258605, 0],                                        // ScatterDiv
                    [3, 2, 9223372036854775808, 10],                                       // ScatterMin
                    [5, 18446744073709551615, 9223372036854775815, 18446744073709551613],  // ScatterMax
                    [5, 18446744073709551613, 9223372036854775815, 9223372036854775808],   // ScatterUpdate
                    [5, 9223372036854775807, 9223372036854775815, 9223372036854775818],    // ScatterAddScalar
                    [5, 18446744073709551614, 9223372036854775815, 9223372036854775818],   // NdAdd
                    [5, 9223372036854775807, 9223372036854775815, 13],                     // NdSub
                    [9223372036854775808, 18446744073709551615, 18446744073709551613, 10], // NdUpdate
                    [3, 2, 9223372036854775808, 10],                                       // NdMin
                    [5, 18446744073709551615, 9223372036854775815, 18446744073709551613],  // NdMax
                    [10, 5, 18446744073709551615, 18446744073709551615],                   // Gather
                ],
            ),
        ];
        let idx = |v: &[i64]| Tensor::from_i64(vec![v.len()], v.to_vec()).unwrap();
        let nd = |v: &[i64]| Tensor::from_i64(vec![v.len(), 1], v.to_vec()).unwrap();
        for (dtype, init, upd, want) in cases {
            let u = |from: usize, to: usize| raw_ints(dtype, vec![to - from], &upd[from..to]);
            let ops: [(&str, Tensor, Tensor); 15] = [
                ("AssignAddVariableOp", u(0, 4), u(0, 0)),
                ("AssignSubVariableOp", u(0, 4), u(0, 0)),
                ("ResourceScatterAdd", idx(&[2, 0, 2]), u(0, 3)),
                ("ResourceScatterSub", idx(&[2, 0, 2]), u(0, 3)),
                ("ResourceScatterMul", idx(&[2, 0, 1]), u(1, 4)),
                ("ResourceScatterDiv", idx(&[2, 0, 1, 3]), u(0, 4)),
                ("ResourceScatterMin", idx(&[0, 1, 2, 3]), u(0, 4)),
                ("ResourceScatterMax", idx(&[0, 1, 2, 3]), u(0, 4)),
                ("ResourceScatterUpdate", idx(&[3, 1]), u(2, 4)),
                ("ResourceScatterAdd", idx(&[1, 3]), raw_ints(dtype, vec![], &upd[2..3])),
                ("ResourceScatterNdAdd", nd(&[1, 3, 1]), u(1, 4)),
                ("ResourceScatterNdSub", nd(&[1, 3]), u(2, 4)),
                ("ResourceScatterNdUpdate", nd(&[0, 2]), u(2, 4)),
                ("ResourceScatterNdMin", nd(&[0, 1, 2, 3]), u(0, 4)),
                ("ResourceScatterNdMax", nd(&[0, 1, 2, 3]), u(0, 4)),
            ];
            for (k, (op, a, b)) in ops.into_iter().enumerate() {
                let (s, id) = store_with(raw_ints(dtype, vec![4], &init));
                let inp = if op.starts_with("Assign") {
                    smallvec![handle_tensor(id), a]
                } else {
                    smallvec![handle_tensor(id), a, b]
                };
                run(op, &s, inp).unwrap_or_else(|e| panic!("{op} on {dtype}: {e}"));
                let got = s.get(id).read().unwrap();
                assert_eq!((got.dtype, raw_values(&got)), (dtype, want[k].to_vec()), "{op} on {dtype}");
            }
            let (s, id) = store_with(raw_ints(dtype, vec![4], &init));
            let gi = Tensor::from_i32(vec![2, 2], vec![3, 0, 1, 1]).unwrap();
            let g = run("ResourceGather", &s, smallvec![handle_tensor(id), gi]).unwrap().remove(0);
            assert_eq!(
                (g.dtype, g.shape.clone(), raw_values(&g)),
                (dtype, vec![2, 2], want[15].to_vec()),
                "gather {dtype}"
            );
            // A zero divisor is TensorFlow's error and leaves the variable as it was.
            let zero = raw_ints(dtype, vec![1], &[0]);
            let e = run("ResourceScatterDiv", &s, smallvec![handle_tensor(id), idx(&[1]), zero]).unwrap_err();
            assert!(e.to_string().contains("division by zero"), "{e}");
            assert_eq!(raw_values(&s.get(id).read().unwrap()), init.to_vec());
        }
    }

    #[test]
    fn strided_slice_assign_broadcasts_like_tensorflow() {
        // TensorFlow 2.21: v = arange(12).reshape(3, 4); v[1:3, ::2].assign([[100, 101],
        // [102, 103]]); v[0, 1:].assign(5.0); v[0, :].assign([7., 8.]) fails.
        let (store, id) = store_with(Tensor::from_f32(vec![3, 4], (0..12).map(|i| i as f32).collect()).unwrap());
        let i32s = |v: &[i32]| Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap();
        let h = handle_tensor(id);
        let value = Tensor::from_f32(vec![2, 2], vec![100., 101., 102., 103.]).unwrap();
        run(
            "ResourceStridedSliceAssign",
            &store,
            smallvec![h.clone(), i32s(&[1, 0]), i32s(&[3, 4]), i32s(&[1, 2]), value],
        )
        .unwrap();
        let shrink = node("ResourceStridedSliceAssign", &[("shrink_axis_mask", autoclust_graph::AttrValue::I(1))]);
        let f = prepare(&shrink).unwrap().unwrap();
        f(&store, smallvec![h.clone(), i32s(&[0, 1]), i32s(&[1, 4]), i32s(&[1, 1]), Tensor::scalar_f32(5.0)]).unwrap();
        let got = store.get(id).lock().clone().unwrap();
        assert_eq!(got.as_f32().unwrap(), &[0., 5., 5., 5., 100., 5., 101., 7., 102., 9., 103., 11.]);
        let two = Tensor::from_f32(vec![2], vec![7., 8.]).unwrap();
        let e = f(&store, smallvec![h, i32s(&[0, 0]), i32s(&[1, 4]), i32s(&[1, 1]), two]).unwrap_err();
        assert_eq!(e.to_string(), "Cannot broadcast input shape [2] into final shape [4]");
        let x = Tensor::from_i32(vec![2, 3], (0..6).collect()).unwrap();
        let v = Tensor::from_i32(vec![2, 2], vec![9, 9, 8, 8]).unwrap();
        let r = crate::kernels::compute(
            &node("TensorStridedSliceUpdate", &[]),
            &[x, i32s(&[0, 1]), i32s(&[2, 3]), i32s(&[1, 1]), v],
        )
        .unwrap();
        assert_eq!(r[0].as_i32().unwrap(), &[0, 9, 9, 3, 8, 8]);
    }

    #[test]
    fn gradient_descent_and_shape_errors_leave_value_intact() {
        let (s, id) = store_with(Tensor::from_f32(vec![2], vec![1.0, 2.0]).unwrap());
        let snapshot = s.get(id).read().unwrap();
        let g = Tensor::from_f32(vec![2], vec![10.0, 20.0]).unwrap();
        run("ResourceApplyGradientDescent", &s, smallvec![handle_tensor(id), Tensor::scalar_f32(0.1), g]).unwrap();
        assert_eq!(s.get(id).read().unwrap().as_f32().unwrap(), &[0.0, 0.0]);
        assert_eq!(snapshot.as_f32().unwrap(), &[1.0, 2.0], "an earlier read is a snapshot");
        let bad = Tensor::from_f32(vec![3], vec![1.0; 3]).unwrap();
        assert!(run(
            "ResourceApplyGradientDescent",
            &s,
            smallvec![handle_tensor(id), Tensor::scalar_f32(0.1), bad.clone()]
        )
        .is_err());
        assert!(run("AssignAddVariableOp", &s, smallvec![handle_tensor(id), bad]).is_err());
        assert_eq!(s.get(id).read().unwrap().as_f32().unwrap(), &[0.0, 0.0]);
    }

    /// float16/bfloat16 variables update in float32 rounded once (they failed with
    /// "unsupported dtype float16" before): 2048 + 1 is not a float16 (ties to even: 2048),
    /// 2048 + 3 rounds to 2052.
    #[test]
    fn half_variables_add_subtract_and_scatter() {
        for dtype in [DType::Float16, DType::BFloat16] {
            let half = |v: &[f32]| {
                autoclust_graph::half::narrow(&Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap(), dtype).unwrap()
            };
            let value = |s: &VariableStore, id| {
                autoclust_graph::half::widen(&s.get(id).read().unwrap()).unwrap().as_f32().unwrap().to_vec()
            };
            let (s, id) = store_with(half(&[2048.0, 1.0, -3.0]));
            run("AssignAddVariableOp", &s, smallvec![handle_tensor(id), half(&[1.0, 0.5, 3.0])]).unwrap();
            let (big, odd) = if dtype == DType::Float16 { (2048.0, 2052.0) } else { (2048.0, 2048.0) };
            assert_eq!(value(&s, id), [big, 1.5, 0.0], "{dtype}");
            run("AssignSubVariableOp", &s, smallvec![handle_tensor(id), half(&[-3.0, 0.5, 1.0])]).unwrap();
            assert_eq!(value(&s, id), [odd, 1.0, -1.0], "{dtype}");
            assert_eq!(s.get(id).read().unwrap().dtype, dtype);
            let idx = Tensor::from_i32(vec![1], vec![2]).unwrap();
            run("ResourceScatterAdd", &s, smallvec![handle_tensor(id), idx.clone(), half(&[0.25])]).unwrap();
            run(
                "ResourceScatterUpdate",
                &s,
                smallvec![handle_tensor(id), Tensor::from_i32(vec![1], vec![1]).unwrap(), half(&[7.0])],
            )
            .unwrap();
            assert_eq!(value(&s, id), [odd, 7.0, -0.75], "{dtype}");
        }
    }

    #[test]
    fn scatter_and_gather() {
        let (s, id) = store_with(Tensor::from_i32(vec![3, 2], vec![0; 6]).unwrap());
        let idx = Tensor::from_i32(vec![2], vec![2, 2]).unwrap();
        let upd = Tensor::from_i32(vec![2, 2], vec![1, 2, 3, 4]).unwrap();
        run("ResourceScatterAdd", &s, smallvec![handle_tensor(id), idx, upd]).unwrap();
        assert_eq!(s.get(id).read().unwrap().as_i32().unwrap(), &[0, 0, 0, 0, 4, 6]);
        let g = run("ResourceGather", &s, smallvec![handle_tensor(id), Tensor::from_i32(vec![1], vec![2]).unwrap()])
            .unwrap();
        assert_eq!(g[0].as_i32().unwrap(), &[4, 6]);
        let oob = Tensor::from_i32(vec![1], vec![3]).unwrap();
        let e = run("ResourceScatterUpdate", &s, smallvec![handle_tensor(id), oob, Tensor::scalar_i32(9)]).unwrap_err();
        assert!(e.to_string().contains("not in [0, 3)"));
        assert_eq!(s.get(id).read().unwrap().as_i32().unwrap(), &[0, 0, 0, 0, 4, 6]);
    }

    /// `ResourceScatterUpdate` on bool, string and complex64 variables (TensorFlow registers
    /// it for every type): rows replaced in index order, a scalar update fills each row; the
    /// arithmetic scatters still refuse those types.
    #[test]
    fn scatter_update_on_bool_string_and_complex_variables() {
        let idx = || Tensor::from_i32(vec![2], vec![2, 0]).unwrap();
        let (s, id) = store_with(Tensor::from_bool(vec![3, 2], vec![false; 6]).unwrap());
        let upd = Tensor::from_bool(vec![2, 2], vec![true, false, false, true]).unwrap();
        run("ResourceScatterUpdate", &s, smallvec![handle_tensor(id), idx(), upd]).unwrap();
        assert_eq!(s.get(id).read().unwrap().as_bool().unwrap(), &[false, true, false, false, true, false]);
        let strings = |v: &[&str]| v.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
        let (s, id) = store_with(Tensor::from_strings(vec![3], strings(&["a", "b", "c"])).unwrap());
        run(
            "ResourceScatterUpdate",
            &s,
            smallvec![handle_tensor(id), idx(), Tensor::from_strings(vec![], strings(&["z"])).unwrap()],
        )
        .unwrap();
        assert_eq!(s.get(id).read().unwrap().as_strings().unwrap(), &strings(&["z", "b", "z"])[..]);
        let c64 = |v: &[f32]| Tensor {
            dtype: DType::Complex64,
            shape: vec![v.len() / 2],
            data: TensorData::Raw(Arc::new(v.iter().flat_map(|x| x.to_le_bytes()).collect())),
        };
        let (s, id) = store_with(c64(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
        let upd = c64(&[-1.0, -2.0, -5.0, -6.0]);
        run("ResourceScatterUpdate", &s, smallvec![handle_tensor(id), idx(), upd.clone()]).unwrap();
        let got = s.get(id).read().unwrap();
        assert_eq!(got.data, c64(&[-5.0, -6.0, 3.0, 4.0, -1.0, -2.0]).data);
        let e = run("ResourceScatterAdd", &s, smallvec![handle_tensor(id), idx(), upd]).unwrap_err();
        assert!(e.to_string().contains("complex64"), "{e}");
        // The Nd form: indices [[1], [0]] into a [3] string variable.
        let (s, id) = store_with(Tensor::from_strings(vec![3], strings(&["a", "b", "c"])).unwrap());
        let nd = Tensor::from_i32(vec![2, 1], vec![1, 0]).unwrap();
        run(
            "ResourceScatterNdUpdate",
            &s,
            smallvec![handle_tensor(id), nd, Tensor::from_strings(vec![2], strings(&["x", "y"])).unwrap()],
        )
        .unwrap();
        assert_eq!(s.get(id).read().unwrap().as_strings().unwrap(), &strings(&["y", "x", "c"])[..]);
    }

    #[test]
    fn adam_matches_hand_computation() {
        let s = VariableStore::new();
        let ids: Vec<VarId> =
            ["w", "m", "v"].iter().map(|n| s.get_or_create("", n, DType::Float64, Shape::scalar())).collect();
        s.get(ids[0]).write(Tensor::from_f64(vec![], vec![1.0]).unwrap());
        s.get(ids[1]).write(Tensor::from_f64(vec![], vec![0.0]).unwrap());
        s.get(ids[2]).write(Tensor::from_f64(vec![], vec![0.0]).unwrap());
        let f = |x: f64| Tensor::from_f64(vec![], vec![x]).unwrap();
        let inp: Inputs = smallvec![
            handle_tensor(ids[0]),
            handle_tensor(ids[1]),
            handle_tensor(ids[2]),
            f(0.9),
            f(0.999),
            f(0.1),
            f(0.9),
            f(0.999),
            f(1e-8),
            f(2.0)
        ];
        run("ResourceApplyAdam", &s, inp).unwrap();
        let m = 0.1 * 2.0;
        let v = 0.001 * 4.0;
        let alpha = 0.1 * (1.0f64 - 0.999).sqrt() / (1.0 - 0.9);
        let w = 1.0 - m * alpha / (f64::sqrt(v) + 1e-8);
        assert!((s.get(ids[0]).read().unwrap().as_f64().unwrap()[0] - w).abs() < 1e-12);
        assert!((s.get(ids[1]).read().unwrap().as_f64().unwrap()[0] - m).abs() < 1e-12);
    }

    #[test]
    fn scatter_nd_accumulates_and_validates_first() {
        let (s, id) = store_with(Tensor::from_f32(vec![2, 3], vec![0.0; 6]).unwrap());
        let idx = Tensor::from_i32(vec![3, 2], vec![0, 1, 1, 2, 0, 1]).unwrap();
        let upd = Tensor::from_f32(vec![3], vec![1.0, 2.0, 4.0]).unwrap();
        run("ResourceScatterNdAdd", &s, smallvec![handle_tensor(id), idx, upd]).unwrap();
        assert_eq!(s.get(id).read().unwrap().as_f32().unwrap(), &[0.0, 5.0, 0.0, 0.0, 0.0, 2.0]);
        let rows = Tensor::from_i32(vec![1, 1], vec![1]).unwrap();
        let row = Tensor::from_f32(vec![1, 3], vec![1.0, 1.0, 1.0]).unwrap();
        run("ResourceScatterNdSub", &s, smallvec![handle_tensor(id), rows, row]).unwrap();
        assert_eq!(s.get(id).read().unwrap().as_f32().unwrap(), &[0.0, 5.0, 0.0, -1.0, -1.0, 1.0]);
        // One bad index: nothing changes.
        let bad = Tensor::from_i32(vec![2, 2], vec![0, 0, 2, 0]).unwrap();
        let two = Tensor::from_f32(vec![2], vec![9.0, 9.0]).unwrap();
        let e = run("ResourceScatterNdUpdate", &s, smallvec![handle_tensor(id), bad, two]).unwrap_err();
        assert_eq!(e.to_string(), "indices[1] = [2, 0] does not index into shape [2,3]");
        assert_eq!(s.get(id).read().unwrap().as_f32().unwrap(), &[0.0, 5.0, 0.0, -1.0, -1.0, 1.0]);
        let ok = Tensor::from_i32(vec![1, 2], vec![1, 0]).unwrap();
        run(
            "ResourceScatterNdUpdate",
            &s,
            smallvec![handle_tensor(id), ok, Tensor::from_f32(vec![1], vec![7.0]).unwrap()],
        )
        .unwrap();
        assert_eq!(s.get(id).read().unwrap().as_f32().unwrap()[3], 7.0);
        // Max and Min keep the larger or smaller of the element and each update (TensorFlow
        // 2.21: `tf.raw_ops.ResourceScatterNdMax` of [[0,1],[1,2],[0,1]] ← [1,2,4]).
        let idx = Tensor::from_i32(vec![3, 2], vec![0, 1, 1, 2, 0, 1]).unwrap();
        let upd = Tensor::from_f32(vec![3], vec![1.0, 2.0, 4.0]).unwrap();
        run("ResourceScatterNdMax", &s, smallvec![handle_tensor(id), idx.clone(), upd.clone()]).unwrap();
        assert_eq!(s.get(id).read().unwrap().as_f32().unwrap(), &[0.0, 5.0, 0.0, 7.0, -1.0, 2.0]);
        run("ResourceScatterNdMin", &s, smallvec![handle_tensor(id), idx, upd]).unwrap();
        assert_eq!(s.get(id).read().unwrap().as_f32().unwrap(), &[0.0, 1.0, 0.0, 7.0, -1.0, 2.0]);
    }

    #[test]
    fn uninitialised_read_names_the_variable() {
        let s = VariableStore::new();
        let id = s.get_or_create("", "weights", DType::Float32, Shape::scalar());
        let e = run("ReadVariableOp", &s, smallvec![handle_tensor(id)]).unwrap_err();
        assert_eq!(e, KernelError::Uninitialized("weights".into()));
        let ok = run("VarIsInitializedOp", &s, smallvec![handle_tensor(id)]).unwrap();
        assert_eq!(ok[0].as_bool().unwrap(), &[false]);
    }
}
