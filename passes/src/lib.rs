//! autoclust-passes
pub mod body_clusters;
pub mod cluster;
pub mod compilable;
pub mod encapsulate;
pub mod inline;
pub mod pass;
pub mod pipeline;
pub mod ref_variables;
pub mod safety;
