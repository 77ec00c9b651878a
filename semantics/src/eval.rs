//! Evaluating pure ops: the `f` of seed 002's model.
//!
//! The explorer computes every pure node once its inputs are known, through
//! a [`PureEval`]. The production evaluator is the runtime's stateless
//! kernels ([`RuntimeKernels`]), so `explore` computes exactly what `run`
//! computes; tests may pass a smaller one.

use autoclust_graph::{AttrValue, Attrs, DType, Library, Node, Tensor};

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
#[derive(Clone, Debug)]
pub struct RuntimeCalls {
    pub library: Library,
    /// The bound on a loop's iterations (`run --max-loop-iterations`'s default).
    pub max_loop_iterations: u64,
}

impl RuntimeCalls {
    pub fn new(library: Library) -> RuntimeCalls {
        RuntimeCalls { library, max_loop_iterations: autoclust_runtime::DEFAULT_MAX_LOOP_ITERATIONS }
    }
}

impl PureEval for RuntimeCalls {
    fn compute(&self, node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        if autoclust_graph::effects::may_call_function(node, &self.library) {
            return autoclust_runtime::run_call(node, &self.library, inputs, self.max_loop_iterations)
                .map_err(|e| e.to_string());
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
    use autoclust_runtime::VariableStore;
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
