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
