//! autoclust-passes
pub mod arithmetic_simplify;
pub mod body_clusters;
pub mod cluster;
pub mod compilable;
pub mod constant_fold;
pub mod cse;
pub mod deadness;
pub mod dependency_optimize;
pub mod encapsulate;
mod function_bodies;
pub mod hoist_loop_reads;
pub mod inline;
pub mod lower_control_flow;
pub mod pass;
pub mod pipeline;
pub mod ref_variables;
pub(crate) mod rewrite;
pub mod safety;
