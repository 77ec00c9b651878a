//! The semantics explorer's and executor's integration tests, linked into one binary: every test binary links the
//! whole compiler and runtime, and one binary per file cost a link and ~30 MB of
//! disk each (the CI disk filled). Each file is a module; run one file's tests
//! with `cargo test -p autoclust-semantics --test suite -- <file>::`.

mod common;

mod control_flow;
mod executor;
mod functional_control_flow;
mod random_graphs;
mod resource_ops;
mod seeds;
