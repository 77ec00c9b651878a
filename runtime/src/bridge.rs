//! The bridge ops a cluster runs behind (seed 001): `_AutoclustSnapshot`
//! and `_AutoclustWriteBack`, written into the graph by the encapsulation
//! pass (`autoclust_passes::encapsulate`).
//!
//! - Snapshot-read takes the handles of every variable the cluster reads,
//!   locks them all in ascending [`VarId`] order, clones each value (an
//!   `Arc` bump, no copy), and unlocks: the cluster sees one consistent
//!   state, and the compiled function then runs with no lock held.
//! - Write-back takes the handles of every written variable followed by
//!   their final values, locks them all in the same order and publishes all
//!   the new values before unlocking: nobody observes half a write-back.
//!   Each value is first checked the way the plain executor's write would
//!   check it (the variable's dtype; its current shape where the original
//!   write validates shapes), so a bad value publishes nothing.
//! - Errors read as the plain executor's: when the node records the
//!   original read or write behind each variable (`_autoclust_origins`,
//!   written by `autoclust_passes::pipeline`), the message starts with that
//!   node, e.g. `node 'w' (AssignVariableOp): Cannot update variable …`.
//!
//! - In-place write-back ([`InPlaceWriteBack`], XLA's input/output aliasing): when the
//!   cluster call's output goes back to a variable whose snapshot it received, and that
//!   snapshot and the variable hold the only two references to the buffer, the call
//!   (`crate::cluster_call`) locks the written variables, takes the value out of the variable,
//!   computes into its buffer and publishes every written value before unlocking — the
//!   write-back done early, as if this node ran right after the call (it may: it waits
//!   for nothing else). This node then finds its values already published
//!   ([`VarGuards::take_published`]) and leaves them (a writer that came in between
//!   keeps its value, as it would after the write-back). A reader that took the value
//!   before — any other reference — makes the call compute into a fresh buffer instead,
//!   and no one can take a new one while the call holds the lock.
//!
//! Why it cannot deadlock: every multi-variable locker in the runtime (these
//! two ops and the multi-variable optimizer kernels) acquires in ascending
//! `VarId` order through [`crate::variables::VarSet`], which locks a repeated
//! variable once, and nothing waits on other work while holding these locks.
//!
//! A variable may be passed twice. A cluster of the main graph names each
//! variable once (encapsulation declusters one reached through two handle
//! nodes), but a cluster inside a function body takes the body's resource
//! arguments, and a caller may pass one variable as two of them (TensorFlow's
//! XLA fails such a call with "Duplicate variable passed to XLA cluster").
//! The snapshot then gives the one value at every position, and the write-back
//! publishes its values in order, so the last one a repeated variable gets
//! wins: encapsulation orders a body's write-back by each argument's last
//! write, so that is the value of the write the graph orders last.

use std::sync::{Arc, OnceLock};

use autoclust_graph::{AttrValue, DType, ListValue, Node, Tensor, TensorData};

use crate::error::{KResult, KernelError};
use crate::kernels::resource::{handle_var, StatefulFn};
use crate::kernels::{Inputs, Outputs};
use crate::variables::{VarGuards, VarId, VarSet, VariableStore};

pub use autoclust_graph::protocol::{SNAPSHOT_OP, WRITE_BACK_OP};

// Per variable of a bridge node, the original node it stands for (written
// by `autoclust_passes::pipeline`; absent attributes mean "unknown").
use autoclust_graph::protocol::{ORIGINS_ATTR, ORIGIN_OPS_ATTR, VALIDATE_SHAPE_ATTR};

/// What a bridge node knows about the user's nodes behind each variable.
#[derive(Clone, Debug, Default)]
struct Origins {
    /// `node 'NAME' (OP)` per variable, when known.
    nodes: Vec<Option<String>>,
    /// Per written variable: must the value keep the variable's shape?
    validate_shape: Vec<bool>,
}

impl Origins {
    fn of(node: &Node) -> Origins {
        let strings = |name: &str| -> Vec<String> {
            match node.attr(name) {
                Some(AttrValue::List(ListValue::S(v))) => {
                    v.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()
                }
                _ => Vec::new(),
            }
        };
        let (names, ops) = (strings(ORIGINS_ATTR), strings(ORIGIN_OPS_ATTR));
        let nodes = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (!n.is_empty()).then(|| match ops.get(i).filter(|o| !o.is_empty()) {
                    Some(op) => format!("node '{n}' ({op})"),
                    None => format!("node '{n}'"),
                })
            })
            .collect();
        let validate_shape = match node.attr(VALIDATE_SHAPE_ATTR) {
            Some(AttrValue::List(ListValue::B(v))) => v.clone(),
            _ => Vec::new(),
        };
        Origins { nodes, validate_shape }
    }

    /// `error`, prefixed with the original node of variable `i` when known,
    /// so it reads as the plain executor's error for that node.
    fn blame(&self, i: usize, error: KernelError) -> KernelError {
        match self.nodes.get(i).and_then(Option::as_deref) {
            Some(origin) => KernelError::Invalid(format!("{origin}: {error}")),
            None => error,
        }
    }
}

/// The variables the handles name, in input order. A variable may repeat: the handles of a
/// cluster inside a function body are its resource arguments, and two of them may name one
/// variable (the module doc); the [`VarSet`] locks it once.
fn resolve(store: &VariableStore, handles: &[Tensor]) -> KResult<Vec<VarId>> {
    let ids = handles.iter().map(handle_var).collect::<KResult<Vec<VarId>>>()?;
    if let Some(bad) = ids.iter().find(|id| id.0 as usize >= store.len()) {
        return Err(KernelError::invalid(format!("handle names no variable of this session ({})", bad.0)));
    }
    Ok(ids)
}

/// A bridge node's variables as its first call resolved them, ready to lock: its handles
/// come from fixed variable nodes, so later calls (same store, same handles) only compare
/// them instead of resolving, sorting and collecting the set again each step.
struct Resolved {
    store: usize,
    ids: Vec<VarId>,
    set: VarSet,
}

/// Runs `f` on the resolved variables of `handles` (cached in `cache` by the first call).
fn with_resolved<R>(
    cache: &OnceLock<Resolved>,
    store: &VariableStore,
    handles: &[Tensor],
    f: impl FnOnce(&[VarId], &VarSet) -> KResult<R>,
) -> KResult<R> {
    let key = store as *const VariableStore as usize;
    if let Some(r) = cache.get() {
        if r.store == key
            && r.ids.len() == handles.len()
            && handles.iter().zip(&r.ids).all(|(h, id)| handle_var(h).ok() == Some(*id))
        {
            return f(&r.ids, &r.set);
        }
    }
    let ids = resolve(store, handles)?;
    let set = store.var_set(&ids);
    let out = f(&ids, &set);
    let _ = cache.set(Resolved { store: key, ids, set });
    out
}

/// `_AutoclustSnapshot(h1, …, hn)`: the current values of the n variables,
/// taken atomically. An uninitialised variable fails the way the plain
/// executor's read fails, naming the original read op when `node` records it.
///
/// The node's `dtypes` (the dtypes its readers declared) are checked as the plain
/// `ReadVariableOp` checks its `dtype`: a variable of another dtype fails the read.
pub fn snapshot_for(node: &Node) -> StatefulFn {
    let declared: Vec<DType> =
        node.attr("dtypes").and_then(AttrValue::as_type_list).map(<[DType]>::to_vec).unwrap_or_default();
    snapshot_with(Origins::of(node), declared)
}

fn snapshot_with(origins: Origins, declared: Vec<DType>) -> StatefulFn {
    let cache = OnceLock::new();
    Box::new(move |store: &VariableStore, inputs: Inputs| -> KResult<Outputs> {
        with_resolved(&cache, store, &inputs, |ids, set| {
            let guards = set.lock();
            let mut out = Outputs::with_capacity(ids.len());
            for (i, &id) in ids.iter().enumerate() {
                match guards.get(id) {
                    Some(t) => {
                        if let Some(&want) = declared.get(i).filter(|&&d| d != t.dtype) {
                            return Err(origins.blame(
                                i,
                                KernelError::invalid(format!(
                                    "Trying to read variable '{}' with wrong dtype. Expected {} got {want}",
                                    store.get(id).name,
                                    t.dtype
                                )),
                            ));
                        }
                        out.push(t.clone())
                    }
                    None => return Err(origins.blame(i, KernelError::Uninitialized(store.get(id).name.clone()))),
                }
            }
            Ok(out)
        })
    })
}

/// `_AutoclustWriteBack(h1, …, hn, v1, …, vn)`: publishes the n values
/// atomically, after checking each the way the plain executor's write
/// checks it — the variable's dtype, and, where `node` records that the
/// original write validates shapes, the variable's current shape — so a
/// bad value fails with the plain executor's error (naming the original
/// writer when recorded) and publishes nothing.
pub fn write_back_for(node: &Node) -> StatefulFn {
    write_back_with(Origins::of(node))
}

fn write_back_with(origins: Origins) -> StatefulFn {
    let cache = OnceLock::new();
    Box::new(move |store: &VariableStore, mut inputs: Inputs| -> KResult<Outputs> {
        if !inputs.len().is_multiple_of(2) {
            return Err(KernelError::invalid(format!(
                "expected handles then values (an even number of inputs), got {}",
                inputs.len()
            )));
        }
        let n = inputs.len() / 2;
        let values: Vec<Tensor> = inputs.drain(n..).collect();
        with_resolved(&cache, store, &inputs, |ids, set| write_back_to(store, &origins, ids, set, values))
    })
}

/// Checks and publishes `values` into the variables `ids` (see [`write_back_for`]).
fn write_back_to(
    store: &VariableStore,
    origins: &Origins,
    ids: &[VarId],
    set: &VarSet,
    values: Vec<Tensor>,
) -> KResult<Outputs> {
    for (i, (&id, v)) in ids.iter().zip(&values).enumerate() {
        let var = store.get(id);
        if var.dtype != v.dtype {
            return Err(origins.blame(
                i,
                KernelError::invalid(format!(
                    "variable '{}' has dtype {} but the value has dtype {}",
                    var.name, var.dtype, v.dtype
                )),
            ));
        }
    }
    let mut guards = set.lock();
    // Values the cluster call already published (an in-place write-back) stay as they are.
    let ahead: smallvec::SmallVec<[bool; 8]> = ids
        .iter()
        .zip(&values)
        .map(|(&id, v)| guards.take_published(id).is_some_and(|p| same_buffer(&p.data, &v.data)))
        .collect();
    for (i, (&id, v)) in ids.iter().zip(&values).enumerate() {
        if ahead[i] || !origins.validate_shape.get(i).copied().unwrap_or(false) {
            continue;
        }
        if let Some(old) = guards.get(id) {
            if old.shape != v.shape {
                return Err(origins.blame(
                    i,
                    KernelError::invalid(format!(
                        "Cannot update variable '{}' with shape {:?} using a Tensor with shape {:?}, \
                         shapes must be equal",
                        store.get(id).name,
                        old.shape,
                        v.shape
                    )),
                ));
            }
        }
    }
    for ((&id, v), ahead) in ids.iter().zip(values).zip(ahead) {
        if !ahead {
            guards.set(id, v);
        }
    }
    Ok(Outputs::new())
}

/// Whether two tensors share one buffer.
pub(crate) fn same_buffer(a: &TensorData, b: &TensorData) -> bool {
    match (a, b) {
        (TensorData::F32(x), TensorData::F32(y)) => Arc::ptr_eq(x, y),
        (TensorData::F64(x), TensorData::F64(y)) => Arc::ptr_eq(x, y),
        (TensorData::I32(x), TensorData::I32(y)) => Arc::ptr_eq(x, y),
        (TensorData::I64(x), TensorData::I64(y)) => Arc::ptr_eq(x, y),
        (TensorData::Bool(x), TensorData::Bool(y)) => Arc::ptr_eq(x, y),
        (TensorData::Str(x), TensorData::Str(y)) => Arc::ptr_eq(x, y),
        (TensorData::Raw(x), TensorData::Raw(y)) => Arc::ptr_eq(x, y),
        (TensorData::List(x), TensorData::List(y)) => Arc::ptr_eq(x, y),
        (TensorData::Optional(x), TensorData::Optional(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

/// The references to a tensor's buffer.
pub(crate) fn ref_count(data: &TensorData) -> usize {
    match data {
        TensorData::F32(v) => Arc::strong_count(v),
        TensorData::F64(v) => Arc::strong_count(v),
        TensorData::I32(v) => Arc::strong_count(v),
        TensorData::I64(v) => Arc::strong_count(v),
        TensorData::Bool(v) => Arc::strong_count(v),
        TensorData::Str(v) => Arc::strong_count(v),
        TensorData::Raw(v) => Arc::strong_count(v),
        TensorData::List(v) => Arc::strong_count(v),
        TensorData::Optional(v) => Arc::strong_count(v),
    }
}

/// The write-back node after a cluster call, for the call to perform itself (see the
/// module docs): the variables it writes, the call output each takes, and its checks.
pub(crate) struct InPlaceWriteBack {
    vars: Vec<VarId>,
    /// Per variable, the call output written to it.
    outputs: Vec<usize>,
    set: VarSet,
    origins: Origins,
}

impl InPlaceWriteBack {
    /// For write-back `node`, which writes `outputs[k]` of the call to `vars[k]`.
    pub(crate) fn new(store: &VariableStore, node: &Node, vars: Vec<VarId>, outputs: Vec<usize>) -> InPlaceWriteBack {
        let set = store.var_set(&vars);
        InPlaceWriteBack { vars, outputs, set, origins: Origins::of(node) }
    }

    /// The call output written to `var`, if this write-back writes it.
    pub(crate) fn output_for(&self, var: VarId) -> Option<usize> {
        self.vars.iter().position(|&v| v == var).map(|k| self.outputs[k])
    }

    /// Locks the written variables (in `VarId` order).
    pub(crate) fn lock(&self) -> VarGuards<'_> {
        self.set.lock()
    }

    /// Whether outputs of these dtypes and shapes pass the node's checks against the
    /// locked variables (else the node itself runs and reports the error).
    pub(crate) fn accepts<'t>(
        &self,
        guards: &VarGuards<'_>,
        output_type: impl Fn(usize) -> Option<(autoclust_graph::DType, &'t [usize])>,
    ) -> bool {
        self.vars.iter().zip(&self.outputs).enumerate().all(|(k, (&id, &j))| {
            let Some((dtype, shape)) = output_type(j) else { return false };
            let Some(var) = guards.variable(id) else { return false };
            if var.dtype != dtype {
                return false;
            }
            !self.origins.validate_shape.get(k).copied().unwrap_or(false)
                || guards.get(id).is_none_or(|old| old.shape == shape)
        })
    }

    /// Publishes the call's outputs, marked for the write-back node to leave alone.
    pub(crate) fn publish(&self, guards: &mut VarGuards<'_>, outputs: &[Tensor]) {
        for (&id, &j) in self.vars.iter().zip(&self.outputs) {
            guards.publish_ahead(id, outputs[j].clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::resource::handle_tensor;
    use autoclust_graph::{DType, Shape, Tensor};

    #[test]
    fn snapshot_then_write_back() {
        let s = VariableStore::new();
        let x = s.get_or_create("", "x", DType::Float32, Shape::scalar());
        let y = s.get_or_create("", "y", DType::Float32, Shape::scalar());
        s.get(x).write(Tensor::scalar_f32(1.0));
        let snap = snapshot_for(&bridge_node(SNAPSHOT_OP, &[], None));
        let err = snap(&s, [handle_tensor(y)].into_iter().collect()).unwrap_err();
        assert_eq!(err, KernelError::Uninitialized("y".into()));
        let wb = write_back_for(&bridge_node(WRITE_BACK_OP, &[], None));
        wb(
            &s,
            [handle_tensor(y), handle_tensor(x), Tensor::scalar_f32(5.0), Tensor::scalar_f32(6.0)]
                .into_iter()
                .collect(),
        )
        .unwrap();
        let out = snap(&s, [handle_tensor(x), handle_tensor(y)].into_iter().collect()).unwrap();
        assert_eq!(out.into_vec(), vec![Tensor::scalar_f32(6.0), Tensor::scalar_f32(5.0)]);
    }

    /// Two resource arguments of a body naming one variable: read once, written last-wins,
    /// and locked once (a second lock of the same mutex would never return).
    #[test]
    fn a_repeated_variable_is_read_once_and_its_last_value_wins() {
        let s = VariableStore::new();
        let x = s.get_or_create("", "x", DType::Float32, Shape::scalar());
        let y = s.get_or_create("", "y", DType::Float32, Shape::scalar());
        s.get(x).write(Tensor::scalar_f32(1.0));
        s.get(y).write(Tensor::scalar_f32(7.0));
        let snap = snapshot_for(&bridge_node(SNAPSHOT_OP, &[], None));
        let out = snap(&s, [handle_tensor(x), handle_tensor(y), handle_tensor(x)].into_iter().collect()).unwrap();
        assert_eq!(out.into_vec(), vec![Tensor::scalar_f32(1.0), Tensor::scalar_f32(7.0), Tensor::scalar_f32(1.0)]);
        let wb = write_back_for(&bridge_node(WRITE_BACK_OP, &[], None));
        wb(
            &s,
            [handle_tensor(x), handle_tensor(x), Tensor::scalar_f32(2.0), Tensor::scalar_f32(3.0)]
                .into_iter()
                .collect(),
        )
        .unwrap();
        assert_eq!(s.get(x).read(), Some(Tensor::scalar_f32(3.0)));
        // The cached resolution serves a second call with other handles too.
        wb(
            &s,
            [handle_tensor(y), handle_tensor(x), Tensor::scalar_f32(4.0), Tensor::scalar_f32(5.0)]
                .into_iter()
                .collect(),
        )
        .unwrap();
        assert_eq!((s.get(x).read(), s.get(y).read()), (Some(Tensor::scalar_f32(5.0)), Some(Tensor::scalar_f32(4.0))));
    }

    fn bridge_node(op: &str, origins: &[(&str, &str)], validate: Option<Vec<bool>>) -> Node {
        let list = |second: bool| {
            let pick = |o: &(&str, &str)| if second { o.1 } else { o.0 }.as_bytes().to_vec();
            AttrValue::List(ListValue::S(origins.iter().map(pick).collect()))
        };
        let mut attrs = autoclust_graph::Attrs::new();
        attrs.insert(ORIGINS_ATTR.into(), list(false));
        attrs.insert(ORIGIN_OPS_ATTR.into(), list(true));
        if let Some(v) = validate {
            attrs.insert(VALIDATE_SHAPE_ATTR.into(), AttrValue::List(ListValue::B(v)));
        }
        Node {
            name: "c_bridge".into(),
            op: op.into(),
            inputs: vec![],
            control_inputs: vec![],
            attrs,
            device: String::new(),
            span: None,
        }
    }

    fn vector(v: &[f32]) -> Tensor {
        Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap()
    }

    #[test]
    fn uninitialised_snapshot_names_the_original_read() {
        let s = VariableStore::new();
        let x = s.get_or_create("", "x", DType::Float32, Shape::scalar());
        let y = s.get_or_create("", "y", DType::Float32, Shape::scalar());
        s.get(x).write(Tensor::scalar_f32(1.0));
        let node = bridge_node(SNAPSHOT_OP, &[("rx", "ReadVariableOp"), ("ay", "AssignAddVariableOp")], None);
        let err = snapshot_for(&node)(&s, [handle_tensor(x), handle_tensor(y)].into_iter().collect()).unwrap_err();
        assert_eq!(err.to_string(), "node 'ay' (AssignAddVariableOp): variable 'y' is uninitialised");
        // Unknown origins keep the typed error.
        let bare = bridge_node(SNAPSHOT_OP, &[], None);
        let err = snapshot_for(&bare)(&s, [handle_tensor(y)].into_iter().collect()).unwrap_err();
        assert_eq!(err, KernelError::Uninitialized("y".into()));
    }

    #[test]
    fn write_back_rejects_a_shape_change_where_the_writer_validates_and_publishes_nothing() {
        let s = VariableStore::new();
        let x = s.get_or_create("", "x", DType::Float32, Shape::scalar());
        let y = s.get_or_create("", "y", DType::Float32, Shape::scalar());
        s.get(x).write(vector(&[1.0, 2.0]));
        s.get(y).write(vector(&[3.0, 4.0]));
        let node = bridge_node(
            WRITE_BACK_OP,
            &[("wx", "AssignVariableOp"), ("wy", "AssignAddVariableOp")],
            Some(vec![false, true]),
        );
        let wb = write_back_for(&node);
        let args = |a: &[f32], b: &[f32]| -> Inputs {
            [handle_tensor(x), handle_tensor(y), vector(a), vector(b)].into_iter().collect()
        };
        let err = wb(&s, args(&[9.0], &[5.0, 6.0, 7.0])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node 'wy' (AssignAddVariableOp): Cannot update variable 'y' with shape [2] using a Tensor with \
             shape [3], shapes must be equal"
        );
        assert_eq!(s.get(x).read(), Some(vector(&[1.0, 2.0])), "nothing published");
        assert_eq!(s.get(y).read(), Some(vector(&[3.0, 4.0])));
        // A non-validating writer may change the shape, as AssignVariableOp may.
        wb(&s, args(&[9.0], &[5.0, 6.0])).unwrap();
        assert_eq!(s.get(x).read(), Some(vector(&[9.0])));
        assert_eq!(s.get(y).read(), Some(vector(&[5.0, 6.0])));
    }

    #[test]
    fn write_back_rejects_a_dtype_change_naming_the_writer() {
        let s = VariableStore::new();
        let x = s.get_or_create("", "x", DType::Float32, Shape::scalar());
        s.get(x).write(Tensor::scalar_f32(1.0));
        let node = bridge_node(WRITE_BACK_OP, &[("wx", "AssignVariableOp")], Some(vec![true]));
        let err =
            write_back_for(&node)(&s, [handle_tensor(x), Tensor::scalar_i64(3)].into_iter().collect()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node 'wx' (AssignVariableOp): variable 'x' has dtype float32 but the value has dtype int64"
        );
        assert_eq!(s.get(x).read(), Some(Tensor::scalar_f32(1.0)));
    }
}
