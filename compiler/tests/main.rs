//! The compiler's integration tests, linked into one binary: every test binary links the
//! whole compiler and runtime, and one binary per file cost a link and ~30 MB of
//! disk each (the CI disk filled). Each file is a module; run one file's tests
//! with `cargo test -p autoclust-compiler --test suite -- <file>::`.

mod common;

mod elementwise;
mod half;
mod hostile;
mod math;
mod mlp;
mod ops;
mod perf_probe;
mod regalloc;
mod scatter;
mod smoke;
mod tile_routines;
