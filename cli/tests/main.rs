//! The command line's end-to-end tests, linked into one binary: every test binary links the
//! whole compiler and runtime, and one binary per file cost a link and ~30 MB of
//! disk each (the CI disk filled). Each file is a module; run one file's tests
//! with `cargo test -p autoclust --test suite -- <file>::`.

mod support;

mod analyze_cluster;
mod cluster_errors;
mod clustered;
mod convert;
mod errors_format;
mod errors_verify;
mod explore;
mod fuzz;
mod hostile;
mod jit_lowerings;
mod jit_property;
mod notes;
mod opt_stats;
mod optimize_property;
mod optimized_bodies;
mod run;
mod savedmodel;
mod scale;
mod tf_fixtures;
