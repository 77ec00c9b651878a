//! Evaluating pure ops: the `f` of seed 002's model.
//!
//! The explorer computes every pure node once its inputs are known, through
//! a [`PureEval`]. The production evaluator is the runtime's stateless
//! kernels ([`RuntimeKernels`]), so `explore` computes exactly what `run`
//! computes; tests may pass a smaller one.

use std::sync::Arc;

use autoclust_graph::{AttrValue, Attrs, DType, Library, Node, Tensor};
use autoclust_runtime::VariableStore;

/// Computes the outputs of a stateless op from its input values.
pub trait PureEval {
    /// The outputs of `node` given its data inputs; an error message otherwise.
    fn compute(&self, node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>, String>;
}

/// The runtime's kernels (`autoclust_runtime::kernels::compute`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RuntimeKernels;

impl PureEval for RuntimeKernels {
    fn compute(&self, node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        autoclust_runtime::kernels::compute(node, inputs).map_err(|e| e.to_string())
    }
}

/// The runtime's kernels, and calls of functions that touch no variable (a pure `While`,
/// `If`, `Case` or function call; `effects::calls_touch_no_resource`) run by the runtime
/// on `library` ([`autoclust_runtime::run_call`]): what `explore`/`verify` evaluate with, so
/// a graph whose loops and branches are pure (or clustered with them) is explored.
///
/// Seeded stateful random ops (`RandomUniform` in a dropout) take their first run's values
/// (`autoclust_runtime::kernels::random::first_run`); unseeded ones are refused.
///
/// Lookup tables (`StringLookup`, `IntegerLookup`, `TextVectorization`, vocabulary feature
/// columns) are read from `tables`, which the caller fills before exploring (a SavedModel's
/// initialisation op, run once as TensorFlow's loader runs it). A table the step only reads
/// holds the same entries whatever the schedule, so its reads are pure functions of their
/// keys; an op that writes a table inside the explored step would make the table's contents
/// depend on the schedule, which the model does not track: it is refused by name.
#[derive(Clone)]
pub struct RuntimeCalls {
    pub library: Library,
    /// The bound on a loop's iterations (`run --max-loop-iterations`'s default).
    pub max_loop_iterations: u64,
    /// The lookup tables, as initialised before the step (none: every table is empty, and
    /// reading one fails as in TensorFlow, "Table not initialized.").
    pub tables: Arc<VariableStore>,
}

impl std::fmt::Debug for RuntimeCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeCalls").field("max_loop_iterations", &self.max_loop_iterations).finish_non_exhaustive()
    }
}

impl RuntimeCalls {
    pub fn new(library: Library) -> RuntimeCalls {
        RuntimeCalls::with_tables(library, Arc::new(VariableStore::new()))
    }

    /// Reads lookup tables from `tables` (see the type's doc).
    pub fn with_tables(library: Library, tables: Arc<VariableStore>) -> RuntimeCalls {
        RuntimeCalls { library, max_loop_iterations: autoclust_runtime::DEFAULT_MAX_LOOP_ITERATIONS, tables }
    }

    fn lookup(&self, node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        use autoclust_runtime::kernels::lookup;
        if lookup::writes_table(&node.op) {
            return Err(format!(
                "{} writes a lookup table inside the explored step; explore and verify model tables \
                 as filled before the step (by a SavedModel's initialisation op)",
                node.op
            ));
        }
        let kernel =
            lookup::prepare(node).map_err(|e| e.to_string())?.ok_or_else(|| format!("no kernel for {}", node.op))?;
        let outputs = kernel(&self.tables, inputs.iter().cloned().collect()).map_err(|e| e.to_string())?;
        Ok(outputs.into_vec())
    }
}

impl PureEval for RuntimeCalls {
    fn compute(&self, node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        if autoclust_graph::effects::may_call_function(node, &self.library) {
            return autoclust_runtime::run_call(node, &self.library, inputs, self.max_loop_iterations)
                .map_err(|e| e.to_string());
        }
        if autoclust_runtime::kernels::lookup::is_lookup_op(&node.op) {
            return self.lookup(node, inputs);
        }
        if autoclust_runtime::kernels::random::is_random_op(&node.op) {
            // A seeded stateful random op (dropout's `RandomUniform`): its first run's values,
            // as `run`'s first step draws them; each node runs once in the explored step.
            return autoclust_runtime::kernels::random::first_run(node, inputs).map_err(|e| e.to_string());
        }
        RuntimeKernels.compute(node, inputs)
    }
}

/// Runs resource op `node` with the interpreter's own kernel
/// (`autoclust_runtime::kernels::resource::prepare`, what `run` executes) on a private
/// variable store holding `vars`: `inputs[i]` is data input `i`, `None` where the input
/// is a variable handle; `vars` gives, in the order of those handles, each variable's name
/// (a name given twice is one variable, passed twice, as the graph passed it) and value.
/// Returns the op's outputs and every variable's value afterwards, in `vars` order. The
/// given tensors are never changed (the kernel copies a shared buffer before writing).
pub fn resource_kernel(
    node: &Node,
    inputs: &[Option<Tensor>],
    vars: &[(&str, Tensor)],
) -> Result<(Vec<Tensor>, Vec<Tensor>), String> {
    use autoclust_runtime::kernels::resource::{handle_tensor, prepare};
    let kernel = prepare(node).map_err(|e| e.to_string())?.ok_or_else(|| format!("no kernel for {}", node.op))?;
    let store = VariableStore::new();
    let mut ids = Vec::with_capacity(vars.len());
    let mut given = vars.iter();
    let mut args = autoclust_runtime::kernels::Inputs::new();
    for input in inputs {
        match input {
            Some(t) => args.push(t.clone()),
            None => {
                let (name, value) = given.next().ok_or("more handle inputs than variables (internal)")?;
                let id = store.get_or_create("", name, value.dtype, autoclust_graph::Shape::unknown());
                if store.get(id).read().is_none() {
                    store.get(id).write(value.clone());
                }
                ids.push(id);
                args.push(handle_tensor(id));
            }
        }
    }
    let outputs = kernel(&store, args).map_err(|e| e.to_string())?;
    let after = ids
        .iter()
        .map(|&id| store.get(id).read().ok_or_else(|| "a variable lost its value (internal)".to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((outputs.into_vec(), after))
}

/// A synthetic node running `op` with type attribute `T = dtype`, used to
/// express the compute half of a read-modify-write (`AssignAdd` is `AddV2`).
pub(crate) fn synthetic(name: &str, op: &str, dtype: DType) -> Node {
    let mut attrs = Attrs::new();
    attrs.insert("T".to_string(), AttrValue::Type(dtype));
    Node {
        name: name.to_string(),
        op: op.to_string(),
        inputs: Vec::new(),
        control_inputs: Vec::new(),
        attrs,
        device: String::new(),
        span: None,
    }
}

#[cfg(test)]
mod lookup_tests {
    use super::*;

    fn node(op: &str, attrs: &[(&str, AttrValue)]) -> Node {
        Node::unconnected("t", op, attrs)
    }

    #[test]
    fn tables_are_read_as_filled_and_never_written_in_the_step() {
        let types = [("key_dtype", AttrValue::Type(DType::Int64)), ("value_dtype", AttrValue::Type(DType::Int64))];
        let table = node("HashTableV2", &types);
        // Filled before the step, on the store the evaluator reads.
        let store = Arc::new(VariableStore::new());
        let filled = RuntimeCalls::with_tables(Library::default(), store.clone());
        let handle = filled.compute(&table, &[]).unwrap().remove(0);
        let import =
            autoclust_runtime::kernels::lookup::prepare(&node("LookupTableImportV2", &types)).unwrap().unwrap();
        let keys = Tensor::from_i64(vec![2], vec![10, 20]).unwrap();
        let values = Tensor::from_i64(vec![2], vec![1, 2]).unwrap();
        import(&store, [handle.clone(), keys.clone(), values.clone()].into_iter().collect()).unwrap();
        let find = node(
            "LookupTableFindV2",
            &[("Tin", AttrValue::Type(DType::Int64)), ("Tout", AttrValue::Type(DType::Int64))],
        );
        let asked = Tensor::from_i64(vec![3], vec![20, 99, 10]).unwrap();
        let default = Tensor::from_i64(vec![], vec![-1]).unwrap();
        let got = filled.compute(&find, &[handle.clone(), asked.clone(), default.clone()]).unwrap();
        assert_eq!(got[0].as_i64().unwrap(), &[2, -1, 1]);
        // A write inside the explored step is refused by name.
        let e = filled.compute(&node("LookupTableImportV2", &types), &[handle, keys, values]).unwrap_err();
        assert!(e.contains("LookupTableImportV2 writes a lookup table"), "{e}");
        // Without initialisation, reading fails as in TensorFlow.
        let empty = RuntimeCalls::new(Library::default());
        let h = empty.compute(&table, &[]).unwrap().remove(0);
        let e = empty.compute(&find, &[h, asked, default]).unwrap_err();
        assert!(e.contains("not initialized"), "{e}");
    }
}
