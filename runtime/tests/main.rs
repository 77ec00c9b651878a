//! The runtime's integration tests, linked into one binary: every test binary links the
//! whole compiler and runtime, and one binary per file cost a link and ~30 MB of
//! disk each (the CI disk filled). Each file is a module; run one file's tests
//! with `cargo test -p autoclust-runtime --test suite -- <file>::`.

mod in_place;
mod precompile;
mod random_ops;
mod registry_kernels;
mod session;
