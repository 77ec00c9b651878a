//! autoclust-semantics: the seeds' semantics made executable.
//!
//! [`model`] turns a graph into atomic steps over resource variables (seed
//! 000's RFC, seed 002's operational model, seed 001's cluster bridge);
//! [`unroll`] turns TensorFlow 1 loop frames into operation instances up to a bound;
//! [`explore`] enumerates every outcome those steps can produce, with
//! memoisation and partial-order reduction; [`verify`] checks that the
//! clustered program produces no outcome the original cannot. See
//! docs/semantics.md.

mod error;
pub mod eval;
pub mod explore;
pub mod model;
pub mod unroll;
pub mod verify;

pub use error::SemanticsError;
pub use eval::{PureEval, RuntimeCalls, RuntimeKernels};
pub use explore::{explore, Exploration, Inputs, Limits, Outcome};
pub use model::{prune, ClusterSpec, LoopBound, Program, Rmw};
pub use unroll::{unroll, Unrolled, DEFAULT_MAX_ITERATIONS};
pub use verify::{autoclusterer, explore_graph, verify, ClusterFn, Query, Verdict};
