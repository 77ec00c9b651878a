//! Host numeric kernels: the array arithmetic that the interpreter's kernels and compiled
//! clusters' library calls share — GEMM, convolutions (im2col and Winograd), einsum, pooling,
//! fused batch norm, reductions, layout changes (strided copies, transposes), TensorScatter,
//! space/batch reshuffles, image resizing and TensorFlow's stateless random numbers.
//!
//! This crate knows nothing of graphs, clusters or Cranelift: each kernel takes its
//! parameters already resolved (axes, shapes, windows) and plain slices or tensors.
//!
//! **Invariant:** one implementation per op, called by both execution modes, so the plain
//! executor and a compiled cluster compute the same bits for the same inputs (and both match
//! TensorFlow's CPU kernels where the kernels' own docs say so). Results never depend on the
//! number of threads: work is split into fixed parts whose order of accumulation is fixed.

pub mod batchnorm;
pub mod conv;
pub mod denormals;
pub mod einsum;
pub mod gemm;
pub mod layout;
pub mod pool;
pub mod random;
pub mod reduce;
pub mod reshuffle;
pub mod resize;
pub mod scatter;
pub mod team;
