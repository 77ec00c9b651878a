//! Errors of the runtime: a kernel's own failure ([`KernelError`]) and a
//! failed run ([`RunError`]), which always names the node at fault.

use autoclust_graph::DType;

/// Why a kernel could not produce its outputs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KernelError {
    /// The op has no kernel here (unknown op, function call, or an op the
    /// runtime does not implement).
    #[error("no kernel for op '{0}'")]
    NoKernel(String),
    /// A dtype the kernel does not support.
    #[error("unsupported dtype {0}")]
    DType(DType),
    /// A missing or malformed attribute.
    #[error("attribute '{0}' is missing or malformed")]
    Attr(String),
    /// Wrong number of inputs.
    #[error("expected {expected} inputs, got {got}")]
    Arity { expected: usize, got: usize },
    /// Bad input values or shapes (TensorFlow's `InvalidArgument`).
    #[error("{0}")]
    Invalid(String),
    /// An output past the tensor size budget (`--max-tensor-bytes`), refused before allocating.
    #[error(transparent)]
    TooLarge(#[from] autoclust_graph::limits::SizeError),
    /// A variable read before it was assigned.
    #[error("variable '{0}' is uninitialised")]
    Uninitialized(String),
}

impl KernelError {
    pub(crate) fn invalid(msg: impl Into<String>) -> KernelError {
        KernelError::Invalid(msg.into())
    }
}

/// A failed `Session::run`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// A node failed (or cannot run); names the node and its op.
    #[error("node '{node}' ({op}): {error}")]
    Node { node: String, op: String, error: KernelError },
    /// A `Placeholder` that must run has no feed.
    #[error("node '{node}': Placeholder needs a feed (dtype {dtype})")]
    MissingFeed { node: String, dtype: String },
    /// A feed that does not fit its placeholder, or names no node.
    #[error("feed '{name}': {message}")]
    BadFeed { name: String, message: String },
    /// A fetch or target that names no node or output.
    #[error("'{name}': {message}")]
    BadRequest { name: String, message: String },
    /// The graph has a cycle among the nodes that must run.
    #[error("{0}")]
    Cycle(#[from] autoclust_graph::CycleError),
    /// A variable named by `set_variable` or a variables file.
    #[error("variable '{name}': {message}")]
    Variable { name: String, message: String },
}

/// Shorthand used by kernels.
pub(crate) type KResult<T> = Result<T, KernelError>;
