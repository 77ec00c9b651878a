//! Why a graph could not be explored: each error names the node at fault.

/// An error building the model of a graph or exploring it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SemanticsError {
    #[error("{0}")]
    Cycle(#[from] autoclust_graph::CycleError),
    #[error("fetch or target '{name}' names no node in the graph")]
    UnknownNode { name: String },
    #[error("node '{node}': explore does not model op {op} ({why})")]
    Unsupported { node: String, op: String, why: String },
    #[error(
        "node '{node}': cannot tell which variable it accesses (its resource input does not come from a VarHandleOp)"
    )]
    UnknownVariable { node: String },
    #[error("node '{node}': reads variable '{var}', which is not initialised (give it with --vars or --var)")]
    Uninitialised { node: String, var: String },
    #[error("node '{node}': placeholder has no value (give it with --feeds or --feed)")]
    MissingFeed { node: String },
    #[error("node '{node}': {message}")]
    Kernel { node: String, message: String },
    #[error("clustering failed: {0}")]
    Clustering(String),
    #[error("explored more than {limit} states without finishing; raise --max-states or fetch less")]
    StateBound { limit: usize },
    #[error(
        "loop frame '{frame}' runs more than --max-iterations {max_iterations} iterations ('{node}' would start another); raise --max-iterations"
    )]
    LoopBound { frame: String, max_iterations: usize, node: String },
    #[error(
        "unrolling the loop frames to --max-iterations {max_iterations} makes more than {limit} operation instances; lower --max-iterations"
    )]
    TooManyInstances { limit: usize, max_iterations: usize },
    #[error("fetch '{fetch}' is dead (it lies on a branch or loop iteration that did not run)")]
    DeadFetch { fetch: String },
    #[error(
        "the clustered program deadlocks: {steps} can never run (a cluster depends on itself through other nodes)"
    )]
    Deadlock { steps: String },
}
