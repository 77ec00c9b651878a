//! The graph optimizations inside function bodies: `constant-fold`,
//! `arithmetic-simplify`, `cse` and `dependency-optimize` each rewrite, after
//! the graph itself, the body of every library function the graph still
//! calls — a functional `While`/`If`/`Case` body or branch, a call the
//! inliner left in place, and, transitively, what those call — as Grappler's
//! function optimizer does. A loop body's constant arithmetic then folds once
//! instead of running every iteration.
//!
//! How: each such function is instantiated (`_Arg`/`_Retval` around the
//! body, [`instantiate`]), the pass runs on that graph with a request that
//! pins the function's fixed interface — every `_Retval` (never pure, so
//! never rewritten), the nodes its control outputs name, and a `_Retval`'s
//! producer that has control inputs (a gate moved onto a `_Retval` would be
//! lost: a return value has no control inputs) — and the result is written
//! back under the function's name and signature ([`to_function_def`]).
//! Functions with a polymorphic signature (type attributes), whose body does
//! not instantiate, whose argument names clash with node names, or on which
//! the pass fails or gives a graph that does not verify are left as they
//! were: an optimization never required.
//!
//! A body a pass left as it was is remembered with the pass ([`PassContext::settled_bodies`]):
//! the pass would leave it again — a pass is a function of the body, the run's settings and
//! the resource effects of the functions the body calls, which none of these passes changes
//! (they never remove or add a stateful node) — so the meta-optimizer's second round skips
//! the bodies no pass of the first one changed.
//!
//! Soundness: within a body the passes keep their own guarantees (no
//! stateful op merged, removed or reordered; pinned nodes keep their names
//! and values), the `_Arg`s and `_Retval`s are the function's whole data
//! interface and keep their values, and control outputs keep their nodes. The
//! calling nodes and their attributes are never touched.

use std::collections::HashSet;

use autoclust_graph::function::instantiate;
use autoclust_graph::verify::verify;
use autoclust_graph::{FunctionDef, Graph};

use crate::body_clusters::{called_functions, to_function_def};
use crate::pass::{PassContext, PassError};

/// Runs `pass` over the body of every function `graph` calls (module doc),
/// rewriting `graph.library`; returns how many bodies changed. The bodies are independent
/// (each pass sees one body and the library as it was), so they are rewritten on all
/// cores, then written back in one edit of the library.
pub(crate) fn optimize_bodies(
    graph: &mut Graph,
    ctx: &PassContext,
    pass_name: &'static str,
    pass: impl Fn(&Graph, &PassContext) -> Result<Graph, PassError> + Sync,
) -> usize {
    if graph.library.functions.is_empty() {
        return 0;
    }
    let _span = tracing::debug_span!("optimize_bodies").entered();
    let library = &graph.library;
    let mut queue: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for n in graph.nodes() {
        visit(library, &n.op, &n.attrs, &mut seen, &mut queue);
    }
    let mut work: Vec<&FunctionDef> = Vec::new();
    {
        let settled = ctx.settled_bodies.lock().unwrap_or_else(|e| e.into_inner());
        let mut k = 0;
        while k < queue.len() {
            let name = queue[k];
            k += 1;
            let Some(function) = library.function(name) else { continue };
            for n in &function.nodes {
                visit(library, &n.op, &n.attrs, &mut seen, &mut queue);
            }
            if !settled.iter().any(|(p, g)| *p == pass_name && g == function) {
                work.push(function);
            }
        }
    }
    let inherited = Inherited { evaluator: ctx.evaluator.clone(), exact_signed_zeros: ctx.exact_signed_zeros };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(work.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let run = || {
        let mut done = Vec::new();
        while let Some(&function) = work.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
            done.push((function, optimize_body(function, library, &inherited, &pass)));
        }
        done
    };
    let results: Vec<(&FunctionDef, Option<FunctionDef>)> = if threads > 1 {
        std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(run)).collect();
            let mut all = run();
            for h in helpers {
                all.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
            }
            all
        })
    } else {
        run()
    };
    let mut rewritten = Vec::new();
    {
        let mut settled = ctx.settled_bodies.lock().unwrap_or_else(|e| e.into_inner());
        for (function, out) in results {
            match out {
                Some(new) => rewritten.push((function.signature.name.clone(), new)),
                None => settled.push((pass_name, function.clone())),
            }
        }
    }
    if rewritten.is_empty() {
        return 0;
    }
    let changed = rewritten.len();
    let functions = graph.library.functions_mut();
    for (name, new) in rewritten {
        if let Some(slot) = functions.iter_mut().find(|f| f.signature.name == name) {
            *slot = new;
        }
    }
    changed
}

/// What a body's pass takes from the graph's context.
struct Inherited {
    evaluator: Option<crate::pass::Evaluator>,
    exact_signed_zeros: bool,
}

/// Queues the library functions a node calls: through its attributes, or as its op.
fn visit<'a>(
    library: &autoclust_graph::Library,
    op: &'a str,
    attrs: &'a autoclust_graph::Attrs,
    seen: &mut HashSet<&'a str>,
    queue: &mut Vec<&'a str>,
) {
    for f in called_functions(attrs).chain(std::iter::once(op)) {
        if library.function(f).is_some() && seen.insert(f) {
            queue.push(f);
        }
    }
}

fn optimize_body(
    function: &FunctionDef,
    library: &autoclust_graph::Library,
    ctx: &Inherited,
    pass: &impl Fn(&Graph, &PassContext) -> Result<Graph, PassError>,
) -> Option<FunctionDef> {
    if !function.signature.attrs.is_empty() {
        return None;
    }
    let node_names: HashSet<&str> = function.nodes.iter().map(|n| n.name.as_str()).collect();
    if function.signature.inputs.iter().any(|a| node_names.contains(a.name.as_str())) {
        return None;
    }
    let body = instantiate(function, library).ok()?;
    let mut preserve: HashSet<String> = function.control_ret.iter().map(|(_, node)| node.clone()).collect();
    for n in body.nodes().iter().filter(|n| n.op == "_Retval") {
        preserve.insert(n.name.clone());
        if let Some(p) = n.inputs.first() {
            if !body.node(p.node).control_inputs.is_empty() {
                preserve.insert(body.name(p.node).to_string());
            }
        }
    }
    let body_ctx = PassContext {
        preserve: Some(preserve),
        evaluator: ctx.evaluator.clone(),
        exact_signed_zeros: ctx.exact_signed_zeros,
        ..PassContext::default()
    };
    let before = body.revision();
    let out = match pass(&body, &body_ctx) {
        Ok(out) => out,
        Err(e) => {
            tracing::debug!(function = %function.signature.name, error = %e, "body left as it was");
            return None;
        }
    };
    // Unchanged: untouched, or edited back to the same nodes in the same order.
    if out.unchanged_since(&before) || out.nodes() == body.nodes() {
        return None;
    }
    if verify(&out).is_err() || out.nodes().iter().any(|n| n.op == "_Retval" && !n.control_inputs.is_empty()) {
        return None;
    }
    let mut rewritten = to_function_def(&out, function).ok()?;
    rewritten.control_ret = function.control_ret.clone();
    Some(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoclust_graph::{AttrValue, Tensor};

    /// A stand-in evaluator: AddV2/Mul of float scalars.
    fn ctx() -> PassContext {
        let eval: crate::pass::Evaluator = std::sync::Arc::new(|n, ins| {
            let a = ins[0].as_f32().ok_or("f32")?[0];
            let b = ins[1].as_f32().ok_or("f32")?[0];
            let v = match n.op.as_str() {
                "AddV2" => a + b,
                "Mul" => a * b,
                _ => return Err("no kernel".into()),
            };
            Ok(vec![Tensor::scalar_f32(v)])
        });
        PassContext { evaluator: Some(eval), ..PassContext::default() }
    }

    /// for i in 0..n: v += 1; s = s * (2 * 3) + 1 — the 2 * 3 folds in the body.
    const LOOP: &str = "v = VarHandleOp() {container = \"\", dtype = float32, shape = shape[], shared_name = \"v\"}
n = Placeholder() {dtype = int32, shape = shape[]}
zero = Const() {dtype = int32, value = int32[]{0}}
s0 = Const() {dtype = float32, value = float32[]{1.0}}
loop = While(zero, s0, v, n) {T = [int32, float32, resource, int32], cond = @cond, body = @body, parallel_iterations = 10}
function cond(i: int32, s: float32, h: resource, n: int32) -> (c: bool) {
  l = Less(i, n) {T = int32}
  return c = l:z:0
}
function body(i: int32, s: float32, h: resource, n: int32) -> (i2: int32, s2: float32, h2: resource, n2: int32) stateful {
  onef = Const() {dtype = float32, value = float32[]{1.0}}
  add = AssignAddVariableOp(h, onef:output:0) {dtype = float32}
  one = Const() {dtype = int32, value = int32[]{1}}
  next = AddV2(i, one:output:0) {T = int32}
  two = Const() {dtype = float32, value = float32[]{2.0}}
  three = Const() {dtype = float32, value = float32[]{3.0}}
  six = Mul(two:output:0, three:output:0) {T = float32}
  dbl = Mul(s, six:z:0) {T = float32}
  inc = AddV2(dbl:z:0, onef:output:0) {T = float32}
  id = Identity(inc:z:0) {T = float32}
  return i2 = next:z:0
  return s2 = id:output:0
  return h2 = h
  return n2 = n
  control_return done = add
}
";

    #[test]
    fn loop_body_constants_fold_and_the_interface_stays() {
        let g = autoclust_graph::text::parse(LOOP).unwrap();
        let before = g.library.function("body").unwrap().clone();
        let c = ctx();
        let mut out = crate::constant_fold::constant_fold(&g, &c).unwrap().0;
        assert_eq!(
            optimize_bodies(&mut out, &c, "constant-fold", |b, c| Ok(crate::constant_fold::constant_fold(b, c)?.0)),
            1
        );
        let mut out2 = out.clone();
        optimize_bodies(&mut out2, &c, "arithmetic-simplify", |b, c| {
            Ok(crate::arithmetic_simplify::arithmetic_simplify(b, c)?.0)
        });
        let body = out2.library.function("body").unwrap();
        assert_eq!(body.signature, before.signature);
        assert_eq!(body.control_ret, before.control_ret);
        let six = body.nodes.iter().find(|n| n.name == "six").unwrap();
        assert_eq!(six.op, "Const");
        assert_eq!(six.attrs.get("value"), Some(&AttrValue::Tensor(Tensor::scalar_f32(6.0))));
        assert!(!body.nodes.iter().any(|n| n.name == "two" || n.name == "three" || n.name == "id"), "{body:#?}");
        assert!(body.nodes.iter().any(|n| n.op == "AssignAddVariableOp"));
        // s2 reads the add directly now; the body still instantiates.
        assert!(body.ret.iter().any(|(o, v)| o == "s2" && v.starts_with("inc")), "{:?}", body.ret);
        instantiate(body, &out2.library).unwrap();
        // The loop node is untouched.
        assert_eq!(out2.node(out2.find("loop").unwrap()).attrs, g.node(g.find("loop").unwrap()).attrs);
    }

    /// A body a pass left as it was is not given to that pass again while it stays as it
    /// is; another pass still sees it, and once changed it is seen again.
    #[test]
    fn settled_bodies_are_skipped_until_they_change() {
        let g = autoclust_graph::text::parse(LOOP).unwrap();
        let c = ctx();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let unchanged = |b: &Graph, _: &PassContext| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(b.clone())
        };
        let mut out = g.clone();
        // The loop's condition and body.
        assert_eq!(optimize_bodies(&mut out, &c, "p", unchanged), 0);
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 2);
        optimize_bodies(&mut out, &c, "p", unchanged);
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 2, "settled for p");
        optimize_bodies(&mut out, &c, "q", unchanged);
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 4, "not settled for q");
        // Constant folding changes the body (not the condition): p sees the body again.
        assert_eq!(optimize_bodies(&mut out, &c, "fold", |b, c| Ok(crate::constant_fold::constant_fold(b, c)?.0)), 1);
        optimize_bodies(&mut out, &c, "p", unchanged);
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 5, "the body changed since");
    }
}
