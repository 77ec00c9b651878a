//! Resource variables: the store a session keeps across runs.
//!
//! A variable is keyed by `(container, shared_name)` (the node name when
//! `shared_name` is empty) and has a stable [`VarId`], dense from 0 in
//! creation order. Its value is an immutable [`Tensor`] behind a mutex:
//! a read clones the tensor (an `Arc` bump) under the lock, so it never sees
//! a torn write; a read-modify-write op holds the lock for the whole op.
//! Whoever must hold several variables at once (multi-variable optimizer
//! ops, the cluster bridge's snapshot-read and write-back) locks them in
//! ascending `VarId` order through [`VarSet`], so no two lockers deadlock.
//!
//! Code running under a variable lock must not wait on rayon work (a rayon
//! worker blocked in `join` may pick up a job that takes the same lock):
//! update loops under a lock are serial.

use std::collections::HashMap;
use std::sync::Arc;

use autoclust_graph::{DType, Shape, Tensor};
use parking_lot::{Mutex, MutexGuard, RwLock};

/// A variable's stable number in its store (the global lock order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

/// One resource variable.
#[derive(Debug)]
pub struct Variable {
    pub id: VarId,
    pub container: String,
    /// The `shared_name` (or the `VarHandleOp`'s node name when that is empty).
    pub name: String,
    /// The dtype its `VarHandleOp` declares (for a resource placeholder, the dtype its
    /// users declare).
    pub dtype: DType,
    /// False when nothing in the graph declares the dtype (a captured variable whose users
    /// were all pruned away): `dtype` is then a stand-in and any value is accepted.
    pub typed: bool,
    /// The shape its `VarHandleOp` declares (often unknown).
    pub declared_shape: Shape,
    value: Mutex<Option<Tensor>>,
    /// The value a cluster call published ahead of its write-back node (an in-place
    /// write-back, `crate::bridge`), until that write-back sees it. Locked only while
    /// `value` is held.
    published: Mutex<Option<Tensor>>,
}

impl Variable {
    /// The current value (an atomic snapshot), or `None` if uninitialised.
    pub fn read(&self) -> Option<Tensor> {
        self.value.lock().clone()
    }
    /// Replaces the value atomically.
    pub fn write(&self, t: Tensor) {
        let mut value = self.value.lock();
        *self.published.lock() = None;
        *value = Some(t);
    }
    /// Locks the variable for a read-modify-write.
    pub fn lock(&self) -> MutexGuard<'_, Option<Tensor>> {
        self.value.lock()
    }
}

/// Every variable of a session.
#[derive(Debug, Default)]
pub struct VariableStore {
    vars: RwLock<Vec<Arc<Variable>>>,
    index: Mutex<HashMap<(String, String), VarId>>,
    /// The session's other per-node state that persists across runs: the
    /// generators of the stateful random ops.
    random: crate::kernels::random::RandomStates,
    /// The session's lookup tables (`HashTableV2`, ...).
    lookup: crate::kernels::lookup::LookupTables,
    /// The session's summary writers (`SummaryWriter`).
    summary_writers: crate::kernels::summary_writer::SummaryWriters,
}

impl VariableStore {
    /// Registers (or finds) the variable node `id` of `graph` names: a `VarHandleOp`, or a
    /// resource `Placeholder` (a TensorFlow 2 function graph's captured variable), named after
    /// the node, of the dtype its users declare (see `autoclust_graph::effects::names_variable`).
    pub(crate) fn register_node(&self, graph: &autoclust_graph::Graph, id: autoclust_graph::NodeId) -> VarId {
        self.register_node_in(graph, None, id)
    }

    /// [`VariableStore::register_node`], typing a new placeholder's variable from the graph's
    /// `successors` when given (linear in the handle's users, not in the graph: a Keras
    /// model's graph captures a thousand variables). A registered one is found by name.
    pub(crate) fn register_node_in(
        &self,
        graph: &autoclust_graph::Graph,
        successors: Option<&autoclust_graph::Successors>,
        id: autoclust_graph::NodeId,
    ) -> VarId {
        let node = graph.node(id);
        if node.op == "Placeholder" {
            if let Some(&known) = self.index.lock().get(&(String::new(), node.name.clone())) {
                return known;
            }
            let dtype = match successors {
                Some(s) => autoclust_graph::effects::variable_dtype_in(graph, s, id),
                None => autoclust_graph::effects::variable_dtype(graph, id),
            };
            return self.create("", &node.name, dtype, Shape::unknown());
        }
        self.register_handle(node)
    }

    /// Registers (or finds) the variable a `VarHandleOp` names.
    pub(crate) fn register_handle(&self, node: &autoclust_graph::Node) -> VarId {
        let (container, name) = autoclust_graph::effects::resource_key(node);
        let dtype = node.attr("dtype").and_then(|a| a.as_type()).unwrap_or(autoclust_graph::DType::Float32);
        let shape = node.attr("shape").and_then(|a| a.as_shape()).cloned().unwrap_or_default();
        self.get_or_create(container, name, dtype, shape)
    }

    pub fn new() -> VariableStore {
        VariableStore::default()
    }

    /// The variable `(container, name)`, created uninitialised if new.
    pub fn get_or_create(&self, container: &str, name: &str, dtype: DType, declared_shape: Shape) -> VarId {
        self.create(container, name, Some(dtype), declared_shape)
    }

    /// The variable `(container, name)`, created uninitialised if new; of no declared dtype
    /// when `dtype` is `None` (see [`Variable::typed`]).
    fn create(&self, container: &str, name: &str, dtype: Option<DType>, declared_shape: Shape) -> VarId {
        let mut index = self.index.lock();
        if let Some(&id) = index.get(&(container.to_string(), name.to_string())) {
            return id;
        }
        let mut vars = self.vars.write();
        let id = VarId(vars.len() as u32);
        vars.push(Arc::new(Variable {
            id,
            container: container.to_string(),
            name: name.to_string(),
            dtype: dtype.unwrap_or(DType::Float32),
            typed: dtype.is_some(),
            declared_shape,
            value: Mutex::new(None),
            published: Mutex::new(None),
        }));
        index.insert((container.to_string(), name.to_string()), id);
        id
    }

    /// The session's lookup tables.
    pub fn lookup_tables(&self) -> &crate::kernels::lookup::LookupTables {
        &self.lookup
    }

    /// The session's summary writers.
    pub fn summary_writers(&self) -> &crate::kernels::summary_writer::SummaryWriters {
        &self.summary_writers
    }

    /// The generators of the session's stateful random ops.
    pub fn random_states(&self) -> &crate::kernels::random::RandomStates {
        &self.random
    }

    /// The variable with id `id`. Panics only on an id from another store.
    pub fn get(&self, id: VarId) -> Arc<Variable> {
        self.vars.read()[id.0 as usize].clone()
    }

    /// Looks a variable up by `(container, name)`.
    pub fn find(&self, container: &str, name: &str) -> Option<VarId> {
        self.index.lock().get(&(container.to_string(), name.to_string())).copied()
    }

    /// Looks a variable up by the name a session shows ([`variable_display_name`]): the
    /// default container first, then `container/name`, else the only variable of that name in
    /// any container.
    ///
    /// [`variable_display_name`]: autoclust_graph::effects::variable_display_name
    pub fn find_by_name(&self, name: &str) -> Option<Arc<Variable>> {
        if let Some(id) = self.find("", name) {
            return Some(self.get(id));
        }
        let vars = self.vars.read();
        if let Some(v) = vars.iter().find(|v| {
            !v.container.is_empty()
                && name.strip_prefix(v.container.as_str()).and_then(|rest| rest.strip_prefix('/')) == Some(&v.name)
        }) {
            return Some(v.clone());
        }
        let mut it = vars.iter().filter(|v| v.name == name);
        match (it.next(), it.next()) {
            (Some(v), None) => Some(v.clone()),
            _ => None,
        }
    }

    /// Every variable, in `VarId` order.
    pub fn all(&self) -> Vec<Arc<Variable>> {
        self.vars.read().clone()
    }

    /// Drops every value published ahead of its write-back (an in-place cluster call,
    /// `crate::bridge`) that no write-back has claimed: called when a run fails, whose
    /// write-back nodes may never have run, so a stale mark can never make a later
    /// write-back of the same buffer skip its write. Always safe: a write-back that finds
    /// no mark simply writes, which is the plain write-back's order.
    pub fn forget_published(&self) {
        for v in self.vars.read().iter() {
            let _value = v.value.lock();
            *v.published.lock() = None;
        }
    }

    pub fn len(&self) -> usize {
        self.vars.read().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A set of variables to lock together (sorted by id, deduplicated).
    pub fn var_set(&self, ids: &[VarId]) -> VarSet {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let vars = self.vars.read();
        VarSet { vars: ids.iter().map(|id| vars[id.0 as usize].clone()).collect() }
    }
}

/// Variables to be locked together, in ascending `VarId` order.
#[derive(Debug, Clone)]
pub struct VarSet {
    vars: Vec<Arc<Variable>>,
}

impl VarSet {
    /// Locks every variable, in `VarId` order.
    pub fn lock(&self) -> VarGuards<'_> {
        VarGuards { vars: &self.vars, guards: self.vars.iter().map(|v| v.value.lock()).collect() }
    }
    pub fn ids(&self) -> impl Iterator<Item = VarId> + '_ {
        self.vars.iter().map(|v| v.id)
    }
}

/// The held locks of a [`VarSet`]; released on drop.
pub struct VarGuards<'a> {
    vars: &'a [Arc<Variable>],
    guards: Vec<MutexGuard<'a, Option<Tensor>>>,
}

impl VarGuards<'_> {
    fn pos(&self, id: VarId) -> Option<usize> {
        self.vars.binary_search_by_key(&id, |v| v.id).ok()
    }
    /// The value of a locked variable (`None`: uninitialised or not in the set).
    pub fn get(&self, id: VarId) -> Option<&Tensor> {
        self.pos(id).and_then(|i| self.guards[i].as_ref())
    }
    /// Writes a locked variable. Returns false if `id` is not in the set.
    pub fn set(&mut self, id: VarId, t: Tensor) -> bool {
        match self.pos(id) {
            Some(i) => {
                // Whatever a cluster call published ahead is superseded.
                *self.vars[i].published.lock() = None;
                *self.guards[i] = Some(t);
                true
            }
            None => false,
        }
    }
    /// Takes a locked variable's value out (leaving it uninitialised until
    /// [`VarGuards::set`] puts one back), so an update can own its buffer.
    pub fn take(&mut self, id: VarId) -> Option<Tensor> {
        self.pos(id).and_then(|i| self.guards[i].take())
    }
    /// Publishes `t` on behalf of the write-back node that follows (see
    /// [`VarGuards::take_published`]). Returns false if `id` is not in the set.
    pub(crate) fn publish_ahead(&mut self, id: VarId, t: Tensor) -> bool {
        match self.pos(id) {
            Some(i) => {
                *self.vars[i].published.lock() = Some(t.clone());
                *self.guards[i] = Some(t);
                true
            }
            None => false,
        }
    }
    /// The value published ahead of its write-back ([`VarGuards::publish_ahead`]), if any;
    /// cleared.
    pub(crate) fn take_published(&mut self, id: VarId) -> Option<Tensor> {
        self.pos(id).and_then(|i| self.vars[i].published.lock().take())
    }
    /// The variable record of a locked id.
    pub fn variable(&self, id: VarId) -> Option<&Arc<Variable>> {
        self.pos(id).map(|i| &self.vars[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_by_container_and_name() {
        let s = VariableStore::new();
        let a = s.get_or_create("", "x", DType::Float32, Shape::scalar());
        let b = s.get_or_create("", "x", DType::Float32, Shape::scalar());
        let c = s.get_or_create("other", "x", DType::Float32, Shape::scalar());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(s.find_by_name("x").unwrap().id, a);
        // The name `Session::variables` shows a variable outside the default container by.
        assert_eq!(s.find_by_name("other/x").unwrap().id, c);
        assert!(s.find_by_name("nowhere/x").is_none());
        assert!(s.get(a).read().is_none());
        s.get(a).write(Tensor::scalar_f32(1.0));
        assert_eq!(s.get(a).read(), Some(Tensor::scalar_f32(1.0)));
    }

    #[test]
    fn lock_many_in_id_order() {
        let s = VariableStore::new();
        let x = s.get_or_create("", "x", DType::Float32, Shape::scalar());
        let y = s.get_or_create("", "y", DType::Float32, Shape::scalar());
        let set = s.var_set(&[y, x, y]);
        assert_eq!(set.ids().collect::<Vec<_>>(), vec![x, y]);
        let mut g = set.lock();
        assert!(g.get(x).is_none());
        assert!(g.set(y, Tensor::scalar_f32(2.0)));
        drop(g);
        assert_eq!(s.get(y).read(), Some(Tensor::scalar_f32(2.0)));
    }
}
