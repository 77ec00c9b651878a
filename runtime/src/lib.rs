//! autoclust-runtime: the reference executor.
//!
//! The plain executor is the baseline clustering is measured against and the
//! oracle every JIT result is checked against, so it follows TensorFlow's
//! semantics (shared/seeds 000 and 002) first and is fast second.
//!
//! Design:
//! - Values are [`autoclust_graph::Tensor`]s: immutable, in `Arc` buffers. A
//!   kernel reuses an input buffer in place only when it holds the only
//!   reference (TensorFlow's buffer forwarding).
//! - [`variables`]: a [`Session`]'s variables, keyed by `(container,
//!   shared_name)`, each with a stable [`VarId`] (the global lock order) and
//!   a mutex around its value. Reads are atomic snapshots; read-modify-write
//!   ops hold their variables' locks for the whole op (taken in `VarId` order
//!   when there are several), so concurrent increments are never lost;
//!   [`VarSet`] exposes that locking to the cluster bridge.
//! - [`kernels`]: one module per op family; [`kernels::compute`] is the pure
//!   entry point for stateless ops (used by the semantics explorer and the
//!   JIT's differential tests); resource ops are in `kernels::resource`.
//! - [`executor`](crate::executor): each (feeds, fetches, targets) request
//!   becomes a cached plan — pruned, kernels prepared, values in a flat slot
//!   array with use counts — run deterministically (one thread, lowest node
//!   id first), in a seeded-random order, or in parallel on a rayon pool.
//! - [`Session`]: `run(&self, ..)` may be called from many threads at once.
//! - [`bridge`] and [`cluster_call`]: the three node kinds of an encapsulated
//!   cluster — atomic snapshot-read, the call (JIT with interpreter
//!   fallback) and atomic write-back.
//! - `function_call`: every other call — `PartitionedCall`,
//!   `StatefulPartitionedCall`, Defun nodes, `If`/`Case`/`While` and their
//!   stateless forms — each body instantiated once per plan and run op by op
//!   against the session's variables (the call itself is not atomic).
//! - [`tensor_io`]: safetensors and JSON in and out (docs/contract.md §3).

pub mod bridge;
pub mod cluster_call;
mod containers;
mod error;
mod executor;
mod frames;
mod function_call;
pub mod kernels;
pub mod numpy;
mod session;
pub mod tensor_io;
pub mod variables;

pub use autoclust_numeric::denormals::FlushDenormals;
pub use cluster_call::{FunctionStatus, Jit};
pub use error::{KernelError, RunError};
pub use function_call::{run_call, DEFAULT_MAX_LOOP_ITERATIONS};
pub use kernels::compute;
pub use session::{RunOutputs, RunRequest, Session, SessionOptions};
pub use tensor_io::TensorIoError;
pub use variables::{VarGuards, VarId, VarSet, Variable, VariableStore};
