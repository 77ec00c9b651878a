//! autoclust-compiler: lowers a cluster's pure function body to native code with Cranelift.
//!
//! # Pipeline
//! 0. **Half precision** ([`half`]): a body computing in float16/bfloat16 is rewritten to
//!    float32 with a rounding node after every op that makes a half value (TensorFlow's CPU
//!    kernels round once per op); the call widens half arguments and narrows half results.
//! 1. **Analysis** ([`analyze`]): the body (a [`Graph`] of `_Arg`, pure TF ops and `_Retval`)
//!    is walked in topological order for the concrete input dtypes and shapes, skipping
//!    nodes no `_Retval` needs (gradient graphs leave such nodes behind — in the MLP step a
//!    whole GEMM, the gradient with respect to the input batch — and the interpreter, pruned
//!    to its fetches, never runs them either). Every value
//!    gets a dtype and a fully known shape; values computable at compile time (`Const`,
//!    `Shape`, `Size`, `Rank`, `BroadcastGradientArgs` and small integer arithmetic on them)
//!    are folded into constants, so shape operands of `Reshape`, `Sum`, `Transpose`, … are known.
//! 2. **Partitioning** ([`plan`]): nodes become steps.
//!    - *Fused elementwise groups*: maximal convex DAGs of elementwise ops that share one
//!      output shape (inputs may broadcast). Each group is one Cranelift function, a loop nest
//!      that reads every external input once and writes every live output once (values used
//!      only inside the group are never stored). Broadcasting is done with per-input strides
//!      after collapsing mergeable dimensions; the inner loop is f32x4 unrolled ×8 (×4 for
//!      groups under 4 ops) with f32x4 and scalar tails when every input/output is float32,
//!      scalar otherwise; the byte offset of the iteration is computed once (a shift) and
//!      shared by every load and store. The unrolled copies are emitted op by op, interleaved, and
//!      Cranelift runs at `opt_level=none` so its e-graph does not re-serialise them into
//!      one long dependency chain per copy (deep chains are latency-bound). Vector
//!      constants live in a per-function table passed after the outputs and are loaded
//!      once before the loops. Large loops are split into a few chunks per thread, claimed
//!      by rayon work stealing, each a `[start, end)` range of the outermost dimension.
//!      exp/log/tanh/sigmoid/pow are inline polynomial approximations ([`math`]), not libm
//!      calls; subnormal exp/sigmoid results flush to zero (TensorFlow's CPU FTZ mode).
//!    - *MatMul*: a Cranelift function that calls the host GEMM (`autoclust_numeric::gemm`)
//!      through a symbol registered with the JIT (transposes become strides) followed by a fused, vectorised
//!      BiasAdd/Relu epilogue when those directly and solely consume the product.
//!    - *Library kernels* ([`kernels`]): reductions, BiasAddGrad, softmax and the
//!      cross-entropy ops, Transpose, Slice, StridedSlice, ConcatV2, Pack, BroadcastTo, Fill,
//!      GatherV2 (int32/int64 indices), TensorScatter{Add,Sub,Update,Max,Min} (indices
//!      `[..., K]` into the first K dims, duplicates accumulate; float32/float64/int32/int64,
//!      bool for Update): Rust routines called once per op (never per element). The array
//!      arithmetic behind them (GEMM, convolutions, einsum, reductions, layout copies, pooling,
//!      batch norm, random numbers) is the `autoclust-numeric` crate, which the interpreter's
//!      kernels call too; this crate is the lowering and the plan that sequences the calls.
//!    - *Views*: Reshape, ExpandDims, Squeeze, Identity, StopGradient share the input buffer.
//! 3. **Dumps**: with [`CompilerOptions::dump_clif_dir`], each generated function's CLIF is
//!    written as `<name>_<k>.clif` and its machine code as `<name>_<k>.s`.
//! 4. **Execution** ([`CompiledFunction::call`]): steps run in a topological order over a
//!    value table of [`Tensor`]s (reference-counted buffers). Outputs of fused loops, GEMMs
//!    and scatters of at least 16 KiB are written into **recycled buffers** (`buffers`):
//!    each value keeps a small pool and reuses a buffer only while the pool holds its only
//!    reference, so in a training step two buffers alternate between the variable and the
//!    next call (what buffer donation gives XLA and jax), without page faults or cold
//!    caches. A TensorScatter whose input is its own previous output (an embedding
//!    table written back to its variable) reuses the table from two steps ago and copies
//!    only the rows the last step changed, instead of the whole table.
//!
//! # Invariants
//! - Each fused group makes one pass: every external input element is loaded once (a
//!   broadcast operand once per inner row, a scalar constant is an immediate), every live
//!   output element is stored exactly once, and values used only inside the group stay in
//!   registers — no intermediate tensor exists.
//! - Groups are convex: no path leaves a group and re-enters it, so steps can be ordered.
//! - A compiled function is only called with the dtypes and shapes it was compiled for
//!   (checked on every call); [`CompileCache`] recompiles on a new signature.
//! - Buffer forwarding (TensorFlow's rule): a buffer is written only while nothing but the
//!   pool that hands it out references it, so no value anyone can still see ever changes.
//!
//! # Fallback
//! Anything else — an op outside the lists above, a dtype the chosen lowering does not
//! handle (for example float64 transcendentals, integer reductions), a dynamic shape
//! operand that is not a compile-time constant — is [`CompileError::Unsupported`], naming
//! the node, so the runtime can run the cluster in its interpreter instead.

pub mod analyze;
// The host numeric kernels live in `autoclust-numeric`; these aliases keep the lowering's
// paths short (`crate::gemm`, `crate::conv`, ...).
use autoclust_numeric::{
    batchnorm, conv, einsum, gemm, layout, pool, random, reduce, reshuffle, resize, scatter, team,
};
mod buffers;
mod codegen;
pub mod constant_args;
pub mod control_flow;
pub mod half;
pub mod host;
pub mod kernels;
pub mod lists;
pub mod math;
pub mod plan;
pub mod profile;
mod tile_routines;

pub use constant_args::constant_args;
pub use kernels::{softmax_rows, softmax_xent, sparse_softmax_xent};
pub use tile_routines::{map_wide, TileTier, Wide};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use autoclust_graph::{DType, Graph, Tensor};

/// Why a body could not be compiled or a compiled function could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    /// An op, dtype or shape this compiler does not lower; run the interpreter instead.
    #[error("node '{node}' ({op}): not compiled: {reason}")]
    Unsupported { node: String, op: String, reason: String },
    /// The body is malformed (missing `_Arg`, bad arity, incompatible shapes, a cycle).
    #[error("invalid cluster body: {0}")]
    Invalid(String),
    /// Cranelift rejected the generated code (a compiler bug, reported instead of panicking).
    #[error("code generation failed: {0}")]
    Codegen(String),
    /// `call` got inputs that differ from the signature the function was compiled for.
    #[error("input {index}: expected {expected}, got {got}")]
    InputMismatch { index: usize, expected: String, got: String },
    /// A kernel failed at run time (e.g. a gather index out of range).
    #[error("run-time error in node '{node}': {reason}")]
    Runtime { node: String, reason: String },
    /// The function was compiled for so many input signatures in so few calls that new
    /// signatures are no longer compiled ([`CompileCache::get_or_compile_within`]).
    #[error(
        "its input shapes keep changing: compiled for {signatures} input shapes in {calls} calls, so new shapes \
         run in the interpreter (a megamorphic cluster, XLA's rule: more than {MEGAMORPHIC_COMPILES} compiles \
         and fewer than {MIN_CALLS_PER_COMPILE} calls per compile)"
    )]
    Megamorphic { signatures: usize, calls: u64 },
    /// The function was compiled for so many values of its compile-time constant arguments
    /// at one input shape, in so few calls, that new values are no longer compiled.
    #[error(
        "the values of its compile-time constant arguments (shape operands: slice bounds, sizes, …) keep \
         changing: compiled for {values} values in {calls} calls, so new values run in the interpreter (a \
         megamorphic cluster: more than {MEGAMORPHIC_CONSTANT_VALUES} values and fewer than \
         {MIN_CALLS_PER_COMPILE} calls per compile)"
    )]
    MegamorphicValues { values: usize, calls: u64 },
}

/// A function compiled for more signatures than this ...
pub const MEGAMORPHIC_COMPILES: usize = 10;
/// ... with fewer calls per compile than this is megamorphic: TensorFlow's XLA compilation
/// profiler's thresholds (`kCompileThreshold`, `kMinExecutionsPerCompile`). A cluster fed a
/// data-dependent shape (a boolean mask's `Where`) otherwise compiles on every step, each
/// compile costing more than the step and its code kept for good.
pub const MIN_CALLS_PER_COMPILE: u64 = 50;
/// A function compiled for more values of its compile-time constant arguments than this at
/// one input shape, with fewer than [`MIN_CALLS_PER_COMPILE`] calls per compile, is
/// megamorphic in those values: a slice offset drawn from a seed variable every step (Keras'
/// `RandomCrop`) would otherwise compile on every step, for good. Higher than
/// [`MEGAMORPHIC_COMPILES`] because a loop body taking its iteration's index as a shape
/// operand compiles once per iteration in its first run, a bounded set every later step
/// reuses.
pub const MEGAMORPHIC_CONSTANT_VALUES: usize = 32;

impl CompileError {
    /// The body node is named as the user wrote it: a node encapsulation rewrote (a
    /// `ResourceScatterAdd` become a pure `TensorScatterAdd` named after the variable's next
    /// value, `v_ssa_1`) carries its origin's name and op (`protocol::ORIGIN_NODE_ATTR`).
    pub(crate) fn unsupported(node: &autoclust_graph::Node, reason: impl Into<String>) -> CompileError {
        let (name, op) = as_written(node);
        CompileError::Unsupported { node: name, op, reason: reason.into() }
    }
}

/// A body node's name and op as the user wrote them: its origin's for a node encapsulation
/// rewrote (`protocol::ORIGIN_NODE_ATTR`), else its own.
pub(crate) fn as_written(node: &autoclust_graph::Node) -> (String, String) {
    let text = |key: &str| match node.attr(key) {
        Some(autoclust_graph::AttrValue::S(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    match text(autoclust_graph::protocol::ORIGIN_NODE_ATTR) {
        Some(origin) => (origin, text(autoclust_graph::ORIGIN_OP_ATTR).unwrap_or_else(|| node.op.clone())),
        None => (node.name.clone(), node.op.clone()),
    }
}

/// Why a donating call failed ([`CompiledFunction::call_donating`]), with the donated
/// inputs it had not written (`(input index, tensor)`), for the caller to put back.
pub type DonationFailure = (CompileError, Vec<(usize, Tensor)>);

/// Compiler settings.
#[derive(Clone, Debug, Default)]
pub struct CompilerOptions {
    /// When set, the Cranelift IR of every generated function is written here as
    /// `<name>.clif`, its machine code (Cranelift's disassembly) as `<name>.s`, and each
    /// compiled body's step plan (fused loops, GEMMs, reductions) as `<body>.plan`.
    pub dump_clif_dir: Option<PathBuf>,
    /// Threads for splitting large elementwise loops; 0 means all available cores.
    pub threads: usize,
    /// Never call the tile routines (`tile_routines.rs`) from fused loops, only
    /// Cranelift's own f32x4 code (results are bit-identical either way; for A/B
    /// measurements). `AUTOCLUST_NO_TILES=1` does the same.
    pub no_tile_routines: bool,
    /// The widest tier of tile routines to use (`None`: the widest the host has).
    /// `AUTOCLUST_NO_AVX512=1` caps at [`TileTier::Avx2`].
    pub max_tile_tier: Option<TileTier>,
    /// Iterations after which a compiled `While` fails (`None`:
    /// [`control_flow::DEFAULT_MAX_LOOP_ITERATIONS`], the runtime's default).
    pub max_loop_iterations: Option<u64>,
    /// Kernels for the ops the compiler types but does not lower (TensorList ops), which
    /// the runtime provides ([`host`]); `None`: such ops are not compiled.
    pub host_kernels: Option<host::HostKernelsRef>,
}

/// Compiles cluster bodies. Cheap to create; holds only options.
#[derive(Clone, Debug, Default)]
pub struct Compiler {
    options: CompilerOptions,
}

impl Compiler {
    pub fn new(options: CompilerOptions) -> Compiler {
        Compiler { options }
    }

    pub fn options(&self) -> &CompilerOptions {
        &self.options
    }

    /// Compiles `body` for the given input dtypes and shapes (indexed by `_Arg` `index`).
    pub fn compile(&self, body: &Graph, inputs: &[(DType, Vec<usize>)]) -> Result<CompiledFunction, CompileError> {
        self.compile_named(body, inputs, "cluster")
    }

    /// As [`Compiler::compile`], naming dumped `.clif` files after `name`.
    pub fn compile_named(
        &self,
        body: &Graph,
        inputs: &[(DType, Vec<usize>)],
        name: &str,
    ) -> Result<CompiledFunction, CompileError> {
        self.compile_with_constants(body, inputs, &[], name)
    }

    /// As [`Compiler::compile_named`], with the values of some arguments
    /// fixed at compile time (`(index, value)`; see [`constant_args`]). The
    /// result may only be called with those values for those arguments.
    pub fn compile_with_constants(
        &self,
        body: &Graph,
        inputs: &[(DType, Vec<usize>)],
        constants: &[(usize, Tensor)],
        name: &str,
    ) -> Result<CompiledFunction, CompileError> {
        self.compile_typed(body, inputs, &[], constants, name)
    }

    /// As [`Compiler::compile_with_constants`], with what is known of the TensorList
    /// arguments (`(index, type)`; [`lists`]): a loop body's lists carried from the
    /// enclosing body.
    pub(crate) fn compile_typed(
        &self,
        body: &Graph,
        inputs: &[(DType, Vec<usize>)],
        lists: &[(usize, lists::ListType)],
        constants: &[(usize, Tensor)],
        name: &str,
    ) -> Result<CompiledFunction, CompileError> {
        self.compile_settled(body, inputs, lists.to_vec(), constants, name, |_| Ok(None))
    }

    /// [`Compiler::compile_typed`] for a loop body whose TensorList argument types are found
    /// by iteration: after each analysis `settle` sees the body's result types and asks for
    /// another analysis with other list types (`Some`), or accepts this one (`None`), which
    /// alone is lowered. The analysis is what types a body; lowering it (the plan and its
    /// Cranelift code, most of a compile) for list types that do not settle would be thrown
    /// away — a Keras RNN's loop bodies took two full compiles each.
    pub(crate) fn compile_settled(
        &self,
        body: &Graph,
        inputs: &[(DType, Vec<usize>)],
        mut lists: Vec<(usize, lists::ListType)>,
        constants: &[(usize, Tensor)],
        name: &str,
        mut settle: impl FnMut(&Settling) -> Result<Option<Vec<(usize, lists::ListType)>>, CompileError>,
    ) -> Result<CompiledFunction, CompileError> {
        let span = tracing::debug_span!("compile", function = name, nodes = body.len());
        let _guard = span.enter();
        let start = Instant::now();
        for (i, t) in constants {
            match inputs.get(*i) {
                Some((d, s)) if *d == t.dtype && *s == t.shape => {}
                _ => return Err(CompileError::Invalid(format!("constant argument {i} does not match the signature"))),
            }
        }
        // Half precision is computed in float32, rounded after each op (`half.rs`).
        let original_constants = constants;
        let widened = half::widen(body, inputs)?;
        let wide_constants: Vec<(usize, Tensor)>;
        let (body, wide_inputs, constants) = match &widened {
            Some(w) => {
                wide_constants = constants
                    .iter()
                    .map(|(i, t)| (*i, autoclust_graph::half::widen(t).unwrap_or_else(|| t.clone())))
                    .collect();
                (&w.body, w.inputs.as_slice(), wide_constants.as_slice())
            }
            None => (body, inputs, constants),
        };
        let boundary = widened.as_ref().map(|w| &w.boundary);
        let analysis = loop {
            let analysis = analyze::analyze(body, wide_inputs, &lists, constants, self, name)?;
            let output_types = analysis
                .retvals
                .iter()
                .enumerate()
                .map(|(j, &o)| {
                    let v = analysis.value(o);
                    let half = boundary.and_then(|b| b.rets.get(j).copied().flatten());
                    (half.unwrap_or(v.dtype), v.shape.clone())
                })
                .collect();
            let output_lists = analysis.retvals.iter().map(|&o| analysis.value(o).list.clone()).collect();
            match settle(&Settling { output_types, output_lists })? {
                None => break analysis,
                Some(next) => lists = next,
            }
        };
        let output_lists = analysis.retvals.iter().map(|&o| analysis.value(o).list.clone()).collect();
        let program = plan::build(body, &analysis, &self.options, name)?;
        let compile_time = start.elapsed();
        tracing::debug!(?compile_time, steps = program.steps.len(), "compiled");
        if tracing::enabled!(tracing::Level::TRACE) {
            for (i, step) in program.describe().iter().enumerate() {
                tracing::trace!("step {i}: {step}");
            }
        }
        if let Some(dir) = &self.options.dump_clif_dir {
            // The step plan beside the functions' `.clif`: what the lowering filetests
            // (`testdata/compile/`) check first.
            let mut text = format!("plan {name} for {inputs:?}\n");
            for (i, step) in program.describe().iter().enumerate() {
                text.push_str(&format!("step {i}: {step}\n"));
            }
            let file = dir.join(format!("{}.plan", codegen::file_stem(name)));
            std::fs::write(&file, text)
                .map_err(|e| CompileError::Codegen(format!("writing {}: {e}", file.display())))?;
        }
        Ok(CompiledFunction {
            inputs: inputs.to_vec(),
            constants: original_constants.to_vec(),
            program: Arc::new(program),
            compile_time,
            output_lists,
            half: widened.map(|w| Arc::new(w.boundary)),
        })
    }
}

/// What one analysis of a body gives its result ([`Compiler::compile_settled`]).
pub(crate) struct Settling {
    /// The dtype and shape of each result, in `_Retval` order (half types as the caller sees them).
    pub output_types: Vec<(DType, Vec<usize>)>,
    /// What is known of each TensorList result.
    pub output_lists: Vec<Option<lists::ListType>>,
}

/// A body compiled for one input signature. `Send + Sync`; calls may run concurrently.
#[derive(Clone)]
pub struct CompiledFunction {
    inputs: Vec<(DType, Vec<usize>)>,
    /// Arguments compiled as constants: calls must pass these values.
    constants: Vec<(usize, Tensor)>,
    program: Arc<plan::Program>,
    compile_time: Duration,
    /// What is known of each TensorList output (`None` for other outputs).
    output_lists: Vec<Option<lists::ListType>>,
    /// The half-precision arguments and results the call widens and narrows (`half.rs`).
    half: Option<Arc<half::Boundary>>,
}

impl std::fmt::Debug for CompiledFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledFunction")
            .field("inputs", &self.inputs)
            .field("steps", &self.program.steps.len())
            .field("compile_time", &self.compile_time)
            .finish()
    }
}

impl CompiledFunction {
    /// Runs the function. Inputs must match the compiled dtypes and shapes.
    pub fn call(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, CompileError> {
        self.check(inputs)?;
        match &self.half {
            Some(h) => h.narrow_outputs(self.program.run(&h.widen_inputs(inputs.to_vec())?)?),
            None => self.program.run(inputs),
        }
    }

    /// As [`CompiledFunction::call`], taking the inputs: a value only the call holds (a
    /// loop's carried TensorList) can then be updated in place.
    pub fn call_owned(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, CompileError> {
        self.check(&inputs)?;
        match &self.half {
            Some(h) => h.narrow_outputs(self.program.run_owned(h.widen_inputs(inputs)?, &[]).map_err(|(e, _)| e)?),
            None => self.program.run_owned(inputs, &[]).map_err(|(e, _)| e),
        }
    }

    /// The `(input, output)` pairs this function can compute in place: output `j` written
    /// into the buffer of input `i` when the caller donates that input (see
    /// [`CompiledFunction::call_donating`]). Each input and each output is in at most one pair.
    pub fn in_place_pairs(&self) -> Vec<(usize, usize)> {
        self.in_place_iter().collect()
    }

    /// [`CompiledFunction::in_place_pairs`] without collecting them.
    pub fn in_place_iter(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        // A half argument or result is converted at the call, so it has no buffer to share.
        let converts = move |p: &&plan::InPlace| self.half.as_ref().is_some_and(|h| h.converts(p.arg, p.retval));
        self.program.in_place.iter().filter(move |p| !converts(p)).map(|p| (p.arg, p.retval))
    }

    /// The dtype and shape of output `j`.
    pub fn output_type(&self, j: usize) -> Option<(DType, &[usize])> {
        let (d, s) = self.program.output_type(j)?;
        Some((self.half_ret(j).unwrap_or(d), s))
    }

    /// The half type result `j` has outside, when the call narrows it.
    fn half_ret(&self, j: usize) -> Option<DType> {
        self.half.as_ref().and_then(|h| h.rets.get(j).copied().flatten())
    }

    /// [`CompiledFunction::call`] with owned inputs, computing each pair of `donate` (a
    /// subset of [`CompiledFunction::in_place_pairs`]) in place when the input holds the
    /// only reference to its buffer — what a variable's write-back gets from XLA's
    /// input/output aliasing. An input that shares its buffer with anyone is never written.
    /// On failure, the donated inputs not yet written come back (`(input index, tensor)`);
    /// the pairs are chosen so that nothing can fail once one was written.
    pub fn call_donating(
        &self,
        inputs: Vec<Tensor>,
        donate: &[(usize, usize)],
    ) -> Result<Vec<Tensor>, DonationFailure> {
        if let Err(e) = self.check(&inputs) {
            let back = donate.iter().filter_map(|&(i, _)| inputs.get(i).map(|t| (i, t.clone()))).collect();
            return Err((e, back));
        }
        let picked: Vec<usize> = self
            .program
            .in_place
            .iter()
            .enumerate()
            .filter(|(_, p)| donate.contains(&(p.arg, p.retval)))
            .filter(|(_, p)| !self.half.as_ref().is_some_and(|h| h.converts(p.arg, p.retval)))
            .map(|(k, _)| k)
            .collect();
        match &self.half {
            // Only pairs without a converted side are picked: the donated inputs given back on
            // failure are the caller's own tensors.
            Some(h) => {
                let wide = h.widen_inputs(inputs).map_err(|e| (e, Vec::new()))?;
                let outs = self.program.run_owned(wide, &picked)?;
                h.narrow_outputs(outs).map_err(|e| (e, Vec::new()))
            }
            None => self.program.run_owned(inputs, &picked),
        }
    }

    /// References to `input`'s buffer that the function itself holds (a recycled output
    /// buffer it keeps for reuse) and drops when input `i` is donated for pair `(i, j)`:
    /// the caller's count of outside references is the buffer's count minus these.
    pub fn own_refs(&self, pair: (usize, usize), input: &Tensor) -> usize {
        self.program
            .in_place
            .iter()
            .position(|p| (p.arg, p.retval) == pair)
            .map_or(0, |k| self.program.pool_refs(k, &input.data))
    }

    /// Inputs must match the compiled dtypes, shapes and constant arguments.
    fn check(&self, inputs: &[Tensor]) -> Result<(), CompileError> {
        if inputs.len() != self.inputs.len() {
            return Err(CompileError::InputMismatch {
                index: inputs.len().min(self.inputs.len()),
                expected: format!("{} inputs", self.inputs.len()),
                got: format!("{} inputs", inputs.len()),
            });
        }
        for (i, (t, (d, s))) in inputs.iter().zip(&self.inputs).enumerate() {
            if t.dtype != *d || !(t.shape.len() == s.len() && t.shape.iter().zip(s).all(|(x, y)| x == y)) {
                return Err(CompileError::InputMismatch {
                    index: i,
                    expected: format!("{d}{s:?}"),
                    got: format!("{}{:?}", t.dtype, t.shape),
                });
            }
        }
        for (i, t) in &self.constants {
            if !inputs[*i].bit_eq(t) {
                return Err(CompileError::InputMismatch {
                    index: *i,
                    expected: format!("the value compiled in ({:?})", t.to_i64_vec().unwrap_or_default()),
                    got: format!("{:?}", inputs[*i].to_i64_vec().unwrap_or_default()),
                });
            }
        }
        Ok(())
    }

    /// Wall time the compile took (analysis, partitioning and Cranelift).
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// The dtypes and shapes of the outputs, in `_Retval` index order.
    pub fn output_types(&self) -> Vec<(DType, Vec<usize>)> {
        let mut types = self.program.output_types();
        for (j, (d, _)) in types.iter_mut().enumerate() {
            *d = self.half_ret(j).unwrap_or(*d);
        }
        types
    }

    /// What the analysis knows of each TensorList output, in `_Retval` index order.
    pub fn output_lists(&self) -> &[Option<lists::ListType>] {
        &self.output_lists
    }

    /// A one-line-per-step description of the lowering (for logs and tests).
    pub fn describe(&self) -> Vec<String> {
        self.program.describe()
    }
}

/// The cache key: a function name, the input dtypes and shapes, and the
/// values of the arguments compiled as constants (`(index, elements)`).
/// The fourth part: what is known of the TensorList arguments ([`lists::list_args`]), for
/// which a body is compiled like for a shape.
pub type CacheKey = (String, Vec<(DType, Vec<usize>)>, Vec<(usize, Vec<i64>)>, Vec<(usize, lists::ListType)>);

/// The key form of constant arguments.
pub fn constant_key(constants: &[(usize, Tensor)]) -> Vec<(usize, Vec<i64>)> {
    constants.iter().map(|(i, t)| (*i, t.to_i64_vec().unwrap_or_default())).collect()
}

/// A compile cache keyed by function name and input signature, like tf.function's trace
/// cache and XLA's compilation cache. Failed compiles are cached too (so an unsupported
/// cluster is not retried on every step). Thread-safe, and compiles in parallel: the
/// lock is held only to find or insert a key's slot, never across a compile, so
/// threads calling different clusters compile them at the same time, while two
/// threads asking for one key compile it once (the second waits for the first).
///
/// Identical bodies at identical signatures compile once: a miss first looks the
/// body up by its canonical text ([`canonical_body`]: every node's op, inputs by
/// position, control inputs and attributes, without names) with the signature and
/// constant values, and shares that compiled code (XLA's cache keys on the
/// computation's fingerprint the same way). Sharing covers successful compiles only
/// — a decline is recompiled under its own name, so its reason names this body's
/// node — and is off when dumping (`dump_clif_dir`), so every body dumps its own
/// files. Each compile builds and finalizes its own JIT module on the compiling
/// thread ([`codegen`]), so concurrent compiles share nothing but this map.
#[derive(Default)]
pub struct CompileCache {
    compiler: Compiler,
    entries: Mutex<Entries>,
    /// Successful compiles by canonical body text, signature and constant values.
    by_body: Mutex<HashMap<CacheKey, Slot>>,
    compiles: AtomicUsize,
    hits: AtomicUsize,
    shared: AtomicUsize,
}

/// One key's compile, done by the first thread that asks for it.
type Slot = Arc<OnceLock<Result<CompiledFunction, CompileError>>>;

#[derive(Default)]
struct Entries {
    slots: HashMap<CacheKey, Slot>,
    /// Signatures compiled so far per function name (for the recompile log line and the
    /// megamorphic rule).
    signatures: HashMap<String, usize>,
    /// Functions found megamorphic ([`CompileCache::get_or_compile_within`]).
    megamorphic: std::collections::HashSet<String>,
    /// The input dtypes and shapes and list arguments' types compiled so far per function
    /// name, whatever the constant arguments' values: what the megamorphic rule counts.
    shapes: HashMap<String, std::collections::HashSet<InputTypes>>,
    /// The constant arguments' values compiled so far per function name and input types.
    values: HashMap<(String, Shapes), std::collections::HashSet<ConstantKey>>,
    /// Functions found megamorphic in their constant arguments' values.
    megamorphic_values: std::collections::HashSet<String>,
}

/// Each input's dtype and shape, and the list arguments' types.
type InputTypes = (Shapes, Vec<(usize, lists::ListType)>);

/// Each input's dtype and shape.
type Shapes = Vec<(DType, Vec<usize>)>;

/// The constant arguments' values, as the cache key holds them ([`constant_key`]).
type ConstantKey = Vec<(usize, Vec<i64>)>;

/// The text two bodies share exactly when they compute the same function: per node,
/// in body order, the op, device, data inputs as `(node position, port)`, control
/// inputs by position and every attribute (Debug-printed; a constant prints every
/// element, floats in their shortest exact form). `None` when some value prints as
/// `NaN`, whose payload the text would lose: such a body is never shared.
pub fn canonical_body(body: &Graph) -> Option<String> {
    use std::fmt::Write;
    let mut s = String::new();
    for id in body.node_ids() {
        let n = body.node(id);
        let _ = write!(s, "{}|{}|", n.op, n.device);
        for i in &n.inputs {
            let _ = write!(s, "{}:{},", i.node.0, i.port);
        }
        s.push('|');
        for c in &n.control_inputs {
            let _ = write!(s, "{},", c.0);
        }
        let _ = writeln!(s, "|{:?}", n.attrs);
    }
    (!s.contains("NaN")).then_some(s)
}

impl CompileCache {
    pub fn new(compiler: Compiler) -> CompileCache {
        CompileCache { compiler, ..Default::default() }
    }

    /// The compiled function for `name` at this signature, compiling on a miss.
    pub fn get_or_compile(
        &self,
        name: &str,
        body: &Graph,
        inputs: &[(DType, Vec<usize>)],
        constants: &[(usize, Tensor)],
    ) -> Result<CompiledFunction, CompileError> {
        self.get_or_compile_typed(name, body, inputs, &[], constants)
    }

    /// As [`CompileCache::get_or_compile`], for TensorList arguments of these types
    /// ([`lists::list_args`]).
    pub fn get_or_compile_typed(
        &self,
        name: &str,
        body: &Graph,
        inputs: &[(DType, Vec<usize>)],
        lists: &[(usize, lists::ListType)],
        constants: &[(usize, Tensor)],
    ) -> Result<CompiledFunction, CompileError> {
        self.get_or_compile_within(name, body, inputs, lists, constants, None)
    }

    /// As [`CompileCache::get_or_compile_typed`], for a function called `calls` times so far
    /// (`None`: unknown): once it has been compiled for more than [`MEGAMORPHIC_COMPILES`]
    /// input types (shapes and list types; constant arguments' values aside) with fewer than
    /// [`MIN_CALLS_PER_COMPILE`] calls per compile it is megamorphic for good, and a new input
    /// type gets [`CompileError::Megamorphic`] instead of a compile (signatures compiled
    /// before still hit, and so do new constant values at a known type).
    pub fn get_or_compile_within(
        &self,
        name: &str,
        body: &Graph,
        inputs: &[(DType, Vec<usize>)],
        lists: &[(usize, lists::ListType)],
        constants: &[(usize, Tensor)],
        calls: Option<u64>,
    ) -> Result<CompiledFunction, CompileError> {
        let key: CacheKey = (name.to_string(), inputs.to_vec(), constant_key(constants), lists.to_vec());
        let (slot, earlier) = {
            let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(hit) = entries.slots.get(&key) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                (hit.clone(), None)
            } else if let Some(calls) = calls.filter(|&c| {
                // Shapes and list types, not the values of compile-time constant arguments: a
                // loop body's cluster taking the iteration index as a constant compiles once
                // per iteration, a bounded set that every later step reuses. List types count:
                // a body compiled for each length of a list a loop grows (one the runtime
                // could not compile for any length) recompiled on every iteration, forever.
                let types = (inputs.to_vec(), lists.to_vec());
                let known = entries.shapes.get(name);
                let new_shape = !known.is_some_and(|k| k.contains(&types));
                let shapes = known.map_or(0, |k| k.len());
                new_shape
                    && (entries.megamorphic.contains(name)
                        || (shapes > MEGAMORPHIC_COMPILES && c < MIN_CALLS_PER_COMPILE * shapes as u64))
            }) {
                if entries.megamorphic.insert(name.to_string()) {
                    tracing::info!(function = name, calls, "megamorphic: new signatures run in the interpreter");
                }
                let signatures = entries.shapes.get(name).map_or(0, |k| k.len());
                return Err(CompileError::Megamorphic { signatures, calls });
            } else if let Some(calls) = calls.filter(|&c| {
                // New constant values at an input shape compiled before: the same rule, over
                // the values, with its own threshold ([`MEGAMORPHIC_CONSTANT_VALUES`]).
                let seen = entries.values.get(&(name.to_string(), inputs.to_vec()));
                let new_values = !seen.is_some_and(|v| v.contains(&key.2));
                let values = seen.map_or(0, |v| v.len());
                let compiles = entries.signatures.get(name).copied().unwrap_or(0) as u64;
                new_values
                    && (entries.megamorphic_values.contains(name)
                        || (values > MEGAMORPHIC_CONSTANT_VALUES && c < MIN_CALLS_PER_COMPILE * compiles))
            }) {
                if entries.megamorphic_values.insert(name.to_string()) {
                    tracing::info!(function = name, calls, "megamorphic in its constant arguments' values");
                }
                let values = entries.values.get(&(name.to_string(), inputs.to_vec())).map_or(0, |v| v.len());
                return Err(CompileError::MegamorphicValues { values, calls });
            } else {
                entries.values.entry((name.to_string(), inputs.to_vec())).or_default().insert(key.2.clone());
                entries.shapes.entry(name.to_string()).or_default().insert((inputs.to_vec(), lists.to_vec()));
                let slot = Slot::default();
                entries.slots.insert(key, slot.clone());
                let count = entries.signatures.entry(name.to_string()).or_insert(0);
                *count += 1;
                (slot, Some(*count - 1))
            }
        };
        // Only the thread that inserted the slot (or, should it panic, the next one)
        // runs this; the others wait for its result.
        slot.get_or_init(|| {
            let result = self.compile_or_share(name, body, inputs, lists, constants);
            let sig: Vec<String> = inputs.iter().map(|(d, s)| format!("{d}{s:?}")).collect();
            match &result {
                Ok(f) if earlier.unwrap_or(0) > 0 => tracing::info!(
                    function = name,
                    signature = %sig.join(","),
                    previous_signatures = earlier.unwrap_or(0),
                    compile_ms = f.compile_time().as_secs_f64() * 1e3,
                    "recompiling for a new input signature"
                ),
                Ok(f) => {
                    tracing::debug!(function = name, signature = %sig.join(","), compile_ms = f.compile_time().as_secs_f64() * 1e3, "compiled")
                }
                // The caller decides what runs instead (another signature, or the interpreter).
                Err(e) => tracing::debug!(function = name, error = %e, "not compiled for this signature"),
            }
            result
        })
        .clone()
    }

    /// Compiles `body`, or shares the code of an identical body compiled at the
    /// same signature (see the type's doc).
    fn compile_or_share(
        &self,
        name: &str,
        body: &Graph,
        inputs: &[(DType, Vec<usize>)],
        lists: &[(usize, lists::ListType)],
        constants: &[(usize, Tensor)],
    ) -> Result<CompiledFunction, CompileError> {
        let compile = || {
            self.compiles.fetch_add(1, Ordering::Relaxed);
            self.compiler.compile_typed(body, inputs, lists, constants, name)
        };
        let canonical = if self.compiler.options.dump_clif_dir.is_none() { canonical_body(body) } else { None };
        let Some(canonical) = canonical else { return compile() };
        let key: CacheKey = (canonical, inputs.to_vec(), constant_key(constants), lists.to_vec());
        let slot = self.by_body.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_default().clone();
        let mut ran = false;
        let result = slot.get_or_init(|| {
            ran = true;
            compile()
        });
        match result {
            Ok(f) if !ran => {
                self.shared.fetch_add(1, Ordering::Relaxed);
                // The compile's time is counted once, by the body that compiled it.
                Ok(CompiledFunction { compile_time: Duration::ZERO, ..f.clone() })
            }
            Ok(f) => Ok(f.clone()),
            // Declined: this body's own compile names its own node.
            Err(_) if !ran => compile(),
            Err(e) => Err(e.clone()),
        }
    }

    /// How many compiles (including failed ones) this cache has done; a body that
    /// shared the code of an identical one ([`CompileCache::shared_count`]) did none.
    pub fn compile_count(&self) -> usize {
        self.compiles.load(Ordering::Relaxed)
    }

    /// How many lookups were answered from the cache.
    pub fn hit_count(&self) -> usize {
        self.hits.load(Ordering::Relaxed)
    }

    /// How many (function, signature) entries reuse the code compiled for an
    /// identical body under another name.
    pub fn shared_count(&self) -> usize {
        self.shared.load(Ordering::Relaxed)
    }

    /// Number of cached signatures.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
