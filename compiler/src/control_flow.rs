//! Functional control flow inside a compiled cluster: `While`/`StatelessWhile`,
//! `If`/`StatelessIf` and `Case`/`StatelessCase` whose functions this compiler can compile.
//!
//! What it lowers: the functions a `While` (`cond`, `body`), an `If` (`then_branch`,
//! `else_branch`) or a `Case` (`branches`) names are instantiated from the body's library and compiled — each once,
//! for the dtypes and shapes the node is called with — into [`CompiledFunction`]s, and the
//! node becomes one kernel step ([`crate::kernels::KernelOp::While`] / `If`) that runs them:
//! the loop calls the compiled condition and the compiled body in turn until the condition
//! is false; the conditional calls one compiled branch. No executor, no per-iteration
//! instantiation, no dispatch of single ops: each iteration is two calls of machine code.
//!
//! Why it is sound:
//! - The clusterer admits such a node only when its functions are pure (no resource op, no
//!   stateful op; `passes/src/compilable.rs`), so running them here, inside the cluster's
//!   SSA function, reorders no effect.
//! - A loop-carried value must keep its dtype and shape (TensorFlow's shape invariants, which
//!   XLA also requires): the body is compiled for the values the loop starts with and its
//!   outputs are checked, at compile time, to have exactly those types — so every
//!   iteration's call matches the signature the body was compiled for. A loop whose
//!   carried shapes change is declined ([`CompileError::Unsupported`]) and the interpreter
//!   runs the cluster, as TensorFlow's executor would run the loop.
//! - Constants: an `If`'s or `Case`'s operands that are compile-time constants of the enclosing body
//!   are constants of every call of it, so the branches are compiled with them fixed. A
//!   loop-carried value is a constant of the body only when the body returns it unchanged
//!   (its `_Retval` reads its `_Arg`): only those are fixed, so a shape operand threaded
//!   through the loop still folds.
//! - The condition is TensorFlow's `ToBool`: a scalar is true when non-zero; a tensor with
//!   elements is true.
//! - A loop that runs `max_loop_iterations` iterations with its condition still true is an
//!   error naming the condition, as in the runtime's `While` (never a hang).

use std::fmt;
use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, Graph, ListValue, Node, Tensor};

use crate::analyze::{NodeInfo, NodeKind, ValueInfo};
use crate::kernels::KernelOp;
use crate::lists::ListType;
use crate::{CompileError, CompiledFunction, Compiler};

/// How many iterations a compiled `While` may run before the call fails, unless
/// [`crate::CompilerOptions::max_loop_iterations`] says otherwise (the runtime's default).
pub use autoclust_graph::limits::DEFAULT_MAX_LOOP_ITERATIONS;

/// A compiled `While`: its condition and body, compiled for the loop-carried types.
pub struct Loop {
    cond: CompiledFunction,
    body: CompiledFunction,
    cond_name: String,
    body_name: String,
    limit: u64,
}

/// A compiled `If` (both branches, the predicate selecting) or `Case` (every branch, an
/// index selecting; an index out of range runs the last, as TensorFlow does), compiled for
/// the operands' types.
pub struct Branches {
    branches: Vec<(CompiledFunction, String)>,
    indexed: bool,
}

impl fmt::Debug for Loop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}, @{}", self.cond_name, self.body_name)
    }
}

impl fmt::Debug for Branches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.branches.iter().map(|(_, n)| format!("@{n}")).collect();
        f.write_str(&names.join(", "))
    }
}

/// The name of the function attribute `attr` of `node`, refusing instantiation attributes
/// (a polymorphic function the caller binds: not compiled here).
fn function_attr<'n>(node: &'n Node, attr: &str) -> Result<&'n str, CompileError> {
    match node.attr(attr).and_then(AttrValue::as_func) {
        Some(f) if f.attrs.is_empty() => Ok(f.name.as_str()),
        Some(f) => Err(CompileError::unsupported(
            node,
            format!("its function '{}' is called with instantiation attributes", f.name),
        )),
        None => {
            Err(CompileError::Invalid(format!("node '{}' ({}) has no function attribute '{attr}'", node.name, node.op)))
        }
    }
}

/// Instantiates `name` from `library_of`'s library.
fn instantiate(node: &Node, library_of: &Graph, name: &str) -> Result<Graph, CompileError> {
    let function = library_of.library.function(name).ok_or_else(|| {
        CompileError::Invalid(format!("node '{}': function '{name}' is not in the library", node.name))
    })?;
    autoclust_graph::function::instantiate(function, &library_of.library)
        .map_err(|e| CompileError::unsupported(node, format!("cannot instantiate '{name}': {e}")))
}

pub(crate) use autoclust_graph::function::passed_through;

fn signature(ins: &[ValueInfo]) -> Vec<(DType, Vec<usize>)> {
    ins.iter().map(|v| (v.dtype, v.shape.clone())).collect()
}

fn constants(ins: &[ValueInfo], keep: impl Fn(usize) -> bool) -> Vec<(usize, Tensor)> {
    ins.iter().enumerate().filter(|&(i, _)| keep(i)).filter_map(|(i, v)| v.konst.clone().map(|t| (i, t))).collect()
}

/// The types of the TensorLists a loop starts with. Their lengths are kept: a body that
/// only sets elements (`tf.scan`'s and a Keras RNN's output accumulator, reserved to the
/// sequence length) returns a list of the same length, so the join keeps it and the
/// stacked result has a compile-time shape; a body that pushes or pops makes the join drop
/// it in the next round.
fn carried_lists(ins: &[ValueInfo]) -> Vec<(usize, ListType)> {
    ins.iter().enumerate().filter_map(|(i, v)| v.list.as_ref().map(|t| (i, t.clone()))).collect()
}

/// The loop-carried list types after one more iteration: each entering type joined with
/// what the body returns (dropped, i.e. unknown, when the body's result is not known).
fn join_lists(
    node: &Node,
    lists: &[(usize, ListType)],
    outs: &[Option<ListType>],
) -> Result<Vec<(usize, ListType)>, CompileError> {
    let mut next = Vec::with_capacity(lists.len());
    for (i, t) in lists {
        let Some(Some(out)) = outs.get(*i) else { continue };
        let joined = t.join(out).ok_or_else(|| {
            CompileError::unsupported(node, format!("loop-carried list {i} changes its element dtype"))
        })?;
        next.push((*i, joined));
    }
    Ok(next)
}

fn compiled_name(outer: &str, name: &str) -> String {
    format!("{outer}/{name}")
}

/// The condition's output must be one scalar (TensorFlow's loop predicate).
fn check_condition(node: &Node, name: &str, cond: &CompiledFunction) -> Result<(), CompileError> {
    match cond.output_types().as_slice() {
        [(d, s)]
            if s.is_empty()
                && matches!(d, DType::Bool | DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64) =>
        {
            Ok(())
        }
        [(d, s)] => Err(CompileError::unsupported(
            node,
            format!("the loop condition '{name}' returns a {d}{s:?}, not a scalar"),
        )),
        outs => Err(CompileError::unsupported(
            node,
            format!("the loop condition '{name}' returns {} values, not 1", outs.len()),
        )),
    }
}

/// Analyses a `While`/`StatelessWhile` node: compiles its condition and body for the
/// loop-carried types `ins` (module doc).
pub(crate) fn analyze_while(
    node: &Node,
    ins: &[ValueInfo],
    outer: &Graph,
    compiler: &Compiler,
    outer_name: &str,
) -> Result<NodeInfo, CompileError> {
    let (cond_name, body_name) = (function_attr(node, "cond")?, function_attr(node, "body")?);
    let (cond_graph, body_graph) = (instantiate(node, outer, cond_name)?, instantiate(node, outer, body_name)?);
    let sig = signature(ins);
    let invariant = passed_through(&body_graph, ins.len());
    let fixed = constants(ins, |i| invariant[i]);
    // The loop-carried lists' types: the body is typed again with the join of what enters
    // and what it returns until they settle (`crate::lists`); only the settled analysis is
    // lowered.
    let mut lists = carried_lists(ins);
    let mut rounds = 0;
    let body = compiler.compile_settled(
        &body_graph,
        &sig,
        lists.clone(),
        &fixed,
        &compiled_name(outer_name, body_name),
        |typed| {
            let outs = &typed.output_types;
            if outs.len() != sig.len() {
                return Err(CompileError::unsupported(
                    node,
                    format!("the loop body '{body_name}' takes {} values but returns {}", sig.len(), outs.len()),
                ));
            }
            for (i, (want, got)) in sig.iter().zip(outs).enumerate() {
                if want != got {
                    return Err(CompileError::unsupported(
                        node,
                        format!(
                            "loop-carried value {i} enters as {}{:?} and leaves the body '{body_name}' as {}{:?} \
                             (a shape that changes across iterations is not compiled)",
                            want.0, want.1, got.0, got.1
                        ),
                    ));
                }
            }
            let next = join_lists(node, &lists, &typed.output_lists)?;
            if next == lists {
                return Ok(None);
            }
            rounds += 1;
            if rounds > 4 {
                return Err(CompileError::unsupported(
                    node,
                    format!("the list types of the loop body '{body_name}' do not settle"),
                ));
            }
            lists = next.clone();
            Ok(Some(next))
        },
    )?;
    let cond = compiler.compile_typed(&cond_graph, &sig, &lists, &fixed, &compiled_name(outer_name, cond_name))?;
    check_condition(node, cond_name, &cond)?;
    let limit = compiler.options().max_loop_iterations.unwrap_or(DEFAULT_MAX_LOOP_ITERATIONS);
    let outputs = ins
        .iter()
        .enumerate()
        .map(|(i, v)| ValueInfo {
            konst: None,
            list: lists.iter().find(|(k, _)| *k == i).map(|(_, t)| t.clone()),
            ..v.clone()
        })
        .collect();
    let lp = Loop { cond, body, cond_name: cond_name.to_string(), body_name: body_name.to_string(), limit };
    Ok(NodeInfo {
        kind: NodeKind::Kernel { op: KernelOp::While(LoopRef(Arc::new(lp))), data_inputs: (0..ins.len()).collect() },
        outputs,
    })
}

/// Analyses an `If`/`StatelessIf` node (operand 0 the predicate, the rest the branches'
/// arguments) or a `Case`/`StatelessCase` node (operand 0 the branch index): compiles every
/// branch; their results must agree in dtype and shape.
pub(crate) fn analyze_branches(
    node: &Node,
    ins: &[ValueInfo],
    outer: &Graph,
    compiler: &Compiler,
    outer_name: &str,
) -> Result<NodeInfo, CompileError> {
    let Some((pred, args)) = ins.split_first() else {
        return Err(CompileError::Invalid(format!("{} '{}' has no predicate or index", node.op, node.name)));
    };
    if !pred.shape.is_empty() {
        return Err(CompileError::unsupported(node, "the predicate or branch index is not a scalar"));
    }
    let indexed = node.op.ends_with("Case");
    let names: Vec<&str> = if indexed {
        match node.attr("branches") {
            Some(AttrValue::List(ListValue::Func(fs))) if !fs.is_empty() => fs
                .iter()
                .map(|f| {
                    if f.attrs.is_empty() {
                        Ok(f.name.as_str())
                    } else {
                        Err(CompileError::unsupported(
                            node,
                            format!("its function '{}' is called with attributes", f.name),
                        ))
                    }
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(CompileError::Invalid(format!("Case '{}' has no branches", node.name))),
        }
    } else {
        vec![function_attr(node, "then_branch")?, function_attr(node, "else_branch")?]
    };
    let sig = signature(args);
    let fixed = constants(args, |_| true);
    let lists: Vec<(usize, ListType)> =
        args.iter().enumerate().filter_map(|(i, v)| v.list.clone().map(|t| (i, t))).collect();
    let mut branches = Vec::with_capacity(names.len());
    for name in names {
        let graph = instantiate(node, outer, name)?;
        let f = compiler.compile_typed(&graph, &sig, &lists, &fixed, &compiled_name(outer_name, name))?;
        branches.push((f, name.to_string()));
    }
    let types = branches[0].0.output_types();
    if let Some((f, name)) = branches.iter().find(|(f, _)| f.output_types() != types) {
        return Err(CompileError::unsupported(
            node,
            format!(
                "its branches '{}' and '{name}' return different types ({types:?} and {:?})",
                branches[0].1,
                f.output_types()
            ),
        ));
    }
    // A list result is what any branch may return: the join of theirs.
    let mut out_lists: Vec<Option<ListType>> = branches[0].0.output_lists().to_vec();
    for (f, _) in &branches[1..] {
        for (acc, t) in out_lists.iter_mut().zip(f.output_lists()) {
            *acc = match (acc.take(), t) {
                (Some(a), Some(b)) => a.join(b),
                _ => None,
            };
        }
    }
    let outputs = types
        .into_iter()
        .zip(out_lists)
        .map(|((dtype, shape), list)| ValueInfo { dtype, shape, konst: None, list })
        .collect();
    let br = Branches { branches, indexed };
    let op = if indexed { KernelOp::Case(BranchesRef(Arc::new(br))) } else { KernelOp::If(BranchesRef(Arc::new(br))) };
    Ok(NodeInfo { kind: NodeKind::Kernel { op, data_inputs: (0..ins.len()).collect() }, outputs })
}

/// TensorFlow's `ToBool` of a predicate ([`Tensor::truth`]).
fn to_bool(t: &Tensor) -> Result<bool, String> {
    t.truth().ok_or_else(|| format!("a predicate of dtype {} is not a number", t.dtype))
}

impl Loop {
    /// Runs the loop from `inputs` (the initial loop-carried values).
    pub(crate) fn run(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
        let mut values: Vec<Tensor> = inputs.iter().map(|&t| t.clone()).collect();
        let mut done: u64 = 0;
        loop {
            let c = self.cond.call(&values).map_err(|e| format!("in the loop condition '{}': {e}", self.cond_name))?;
            if !to_bool(&c[0])? {
                return Ok(values);
            }
            if done == self.limit {
                return Err(format!(
                    "the loop ran {} iterations and its condition '{}' is still true: --max-loop-iterations {} \
                     reached (raise it if the loop is meant to run longer)",
                    self.limit, self.cond_name, self.limit
                ));
            }
            values = self
                .body
                .call_owned(std::mem::take(&mut values))
                .map_err(|e| format!("in the loop body '{}': {e}", self.body_name))?;
            done += 1;
        }
    }
}

impl Branches {
    /// Runs the branch `inputs[0]` selects on `inputs[1..]`.
    pub(crate) fn run(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
        let (select, args) = inputs.split_first().ok_or("no predicate or branch index")?;
        let args: Vec<Tensor> = args.iter().map(|&t| t.clone()).collect();
        let k = if self.indexed {
            let i = select.to_f64_vec().and_then(|v| v.first().copied()).ok_or("the branch index is not a number")?;
            // TensorFlow runs the last branch for an index out of range.
            if i >= 0.0 && (i as usize) < self.branches.len() {
                i as usize
            } else {
                self.branches.len() - 1
            }
        } else if to_bool(select)? {
            0
        } else {
            1
        };
        let (f, name) = &self.branches[k];
        f.call(&args).map_err(|e| format!("in the branch '{name}': {e}"))
    }
}

/// A shared [`Loop`] in a [`KernelOp`] (equal when it is the same compiled loop).
#[derive(Clone)]
pub struct LoopRef(pub(crate) Arc<Loop>);

/// A shared [`Branches`] in a [`KernelOp`] (equal when they are the same compiled branches).
#[derive(Clone)]
pub struct BranchesRef(pub(crate) Arc<Branches>);

impl PartialEq for LoopRef {
    fn eq(&self, other: &LoopRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl PartialEq for BranchesRef {
    fn eq(&self, other: &BranchesRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for LoopRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for BranchesRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
