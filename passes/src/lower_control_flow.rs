//! Functional control flow lowered to TensorFlow 1 dataflow control flow
//! (`opt --passes lower-control-flow`; not in the `default` pipeline), as
//! TensorFlow's `LowerFunctionalOpsPass` does (`lower_if_op.cc`,
//! `lower_case_op.cc`, `lower_while_op.cc`): each `If`/`StatelessIf`,
//! `Case`/`StatelessCase` and `While`/`StatelessWhile` becomes `Switch`,
//! `Merge`, `Enter`, `Exit`, `NextIteration` and `LoopCond` nodes around its
//! bodies, inlined by [`crate::inline::inline_body`]. `explore`/`verify` use it
//! so the variable accesses inside loops and branches become operation
//! instances of their own (seed 000) instead of one opaque "modify" op.
//!
//! For a node `c` with control inputs `C`:
//! - **`If(p, x…)`**: `c/pred = Identity(p, C)` (so `C` gates everything); a
//!   `Switch(x_i, c/pred)` per input; the then-branch is inlined as
//!   `c/then/…` on `Identity(Switch:1)` of each input, the else-branch as
//!   `c/else/…` on `Switch:0`; every branch node with no input from its
//!   branch waits for the branch's *pivot* (`Identity` of
//!   `Switch(c/pred, c/pred):1`, resp. `:0`), so everything on the untaken
//!   side is dead and none of its stateful ops runs; `c/output_k = Merge` of
//!   the two branches' results.
//! - **`Case(i, x…)`** with branches `b_0 … b_{n-1}`: a chain of such switches
//!   on `Equal(i, k)` for `k < n-1` (the input of switch `k+1` is output 0 of
//!   switch `k`), so branch `k` runs when `i == k` and the last one otherwise
//!   (TensorFlow runs the last branch for an out-of-range index); `Merge`s of
//!   `n` inputs. An `If` is the chain of one switch on its predicate.
//! - a branch's results are read through an `IdentityN` waiting for the
//!   branch's effectful nodes, and `c/branch_executed` is a `Merge` of one
//!   `Identity(pivot, ^effects of the branch)` per branch: live when the taken
//!   branch is done.
//! - **`While(x…)`**: one frame, named `c/while_context` (unique), with
//!   `parallel_iterations` from the node: per loop variable `Enter` (with the
//!   node's control inputs) → `Merge(Enter, NextIteration)`; the condition
//!   inlined on the merges (its input-less nodes wait for the first merge),
//!   `LoopCond`, a `Switch` per variable, the body inlined on
//!   `Identity(Switch:1)` (its input-less nodes wait for the first of those),
//!   `NextIteration` of the body's results (read through an `IdentityN`
//!   waiting for the body's effects, so an iteration's writes are done before
//!   the next iteration starts), `Exit(Switch:0)`. A variable the body returns
//!   unchanged (a resource handle, typically) is loop-invariant, as TensorFlow
//!   marks it: one `is_constant` `Enter` seen by every iteration, no merge or
//!   switch, and the loop's output is the input itself — so a handle still
//!   names its variable statically.
//! - `c` itself stays, under its name, as an `IdentityN` of the results (a
//!   `NoOp` when there are none) after `c/branch_executed` or the exits:
//!   fetches, data consumers (`c:k`) and control consumers (`^c`) keep their
//!   meaning and wait for what they waited for before.
//! - Nested control flow in the inlined bodies is lowered in the next round,
//!   calls in them are inlined ([`crate::inline::inline_calls_where`]), up to
//!   [`MAX_ROUNDS`] levels; calls and nodes of the input graph are not inlined.
//!
//! Soundness: this is TensorFlow's own lowering, whose runs are the functional
//! ops' runs. Every node of a branch depends, by data or control, on a switch
//! output that is live exactly when its branch is taken, so the untaken
//! branch is dead as a whole (a dead stateful op does not run, seed 002); the
//! taken branch's nodes keep their edges. In a loop, iteration `j`'s
//! instances are fed by iteration `j-1`'s results (after its effects) and
//! gated by `LoopCond` of iteration `j`, so the body runs as often as the
//! condition says, each run's effects in the order the functional loop gives
//! them. Effects are never merged, dropped or duplicated within one
//! execution context; whatever followed `c` follows its effects.
//!
//! Left alone (with the reason, in tracing at `info`): a node with
//! `_lower_using_switch_merge = false`, a non-bool `If` predicate, a body
//! that cannot be instantiated or creates a variable, a loop whose variables
//! are all loop-invariant, arity or type mismatches.

use std::collections::HashSet;

use autoclust_graph::function::{fresh_name, instantiate_with};
use autoclust_graph::{AttrValue, DType, FuncAttr, Graph, GraphError, ListValue, Node, RawNode, Tensor};

use crate::inline::{inline_body, inline_calls_where, MAX_ROUNDS};
use crate::pass::{Pass, PassContext, PassError};

/// TensorFlow's attribute saying whether a functional op may be lowered (default: yes).
pub const LOWER_ATTR: &str = "_lower_using_switch_merge";

/// Whether `op` is functional control flow this pass lowers.
pub fn is_functional_control_flow(op: &str) -> bool {
    matches!(op, "If" | "StatelessIf" | "Case" | "StatelessCase" | "While" | "StatelessWhile")
}

/// `lower-control-flow`: [`lower_control_flow`] as a pass.
pub struct LowerControlFlowPass;

impl Pass for LowerControlFlowPass {
    fn name(&self) -> &'static str {
        "lower-control-flow"
    }
    fn description(&self) -> &'static str {
        "lower If/Case/While to Switch/Merge/Enter/Exit/NextIteration/LoopCond with their bodies inlined \
         (TensorFlow's LowerFunctionalOpsPass; _lower_using_switch_merge = false kept)"
    }
    fn run(&self, graph: Graph, _ctx: &PassContext) -> Result<Graph, PassError> {
        let (graph, _report) = lower_control_flow(graph)?;
        Ok(graph)
    }
}

/// What one run of [`lower_control_flow`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LowerReport {
    /// Functional control-flow nodes lowered (nested ones included).
    pub lowered: usize,
    /// Calls inside lowered bodies inlined.
    pub inlined: usize,
    /// Nodes left alone, with the reason.
    pub left: Vec<(String, String)>,
}

/// Lowers every functional control-flow node of `graph` (module doc).
pub fn lower_control_flow(graph: Graph) -> Result<(Graph, LowerReport), GraphError> {
    lower_control_flow_where(graph, &|_, _| true)
}

/// [`lower_control_flow`] limited to the nodes of `graph` that `select` picks; the
/// functional nodes inside their bodies are all lowered.
pub fn lower_control_flow_where(
    graph: Graph,
    select: &dyn Fn(&Graph, &Node) -> bool,
) -> Result<(Graph, LowerReport), GraphError> {
    let _span = tracing::debug_span!("lower_control_flow", nodes = graph.len()).entered();
    let original: HashSet<String> = graph.nodes().iter().map(|n| n.name.clone()).collect();
    let mut refused: HashSet<String> = HashSet::new();
    let mut report = LowerReport::default();
    let mut current = graph;
    for _ in 0..MAX_ROUNDS {
        let picked: Vec<bool> = current
            .nodes()
            .iter()
            .map(|n| {
                is_functional_control_flow(&n.op)
                    && !refused.contains(&n.name)
                    && (!original.contains(&n.name) || select(&current, n))
            })
            .collect();
        if !picked.iter().any(|&p| p) {
            break;
        }
        let mut taken: HashSet<String> = current.nodes().iter().map(|n| n.name.clone()).collect();
        // Frame names already used by TensorFlow 1 loops.
        taken.extend(current.nodes().iter().filter_map(|n| n.attr("frame_name")?.as_str().map(str::to_string)));
        let mut out: Vec<RawNode> = Vec::with_capacity(current.len());
        let mut lowered = 0;
        for (id, raw) in current.node_ids().zip(current.to_raw()) {
            if !picked[id.index()] {
                out.push(raw);
                continue;
            }
            let node = current.node(id);
            match lower_node(&current, node, &raw, &mut taken) {
                Ok(nodes) => {
                    lowered += 1;
                    out.extend(nodes);
                }
                Err(why) => {
                    tracing::info!(node = %node.name, op = %node.op, reason = %why, "not lowered");
                    refused.insert(node.name.clone());
                    report.left.push((node.name.clone(), why));
                    out.push(raw);
                }
            }
        }
        if lowered == 0 {
            break;
        }
        report.lowered += lowered;
        let next = Graph::from_raw(out, current.library.clone(), current.versions.clone())?;
        let (next, inlined) = inline_calls_where(next, &|n| !original.contains(&n.name))?;
        report.inlined += inlined.inlined;
        current = next;
    }
    tracing::debug!(lowered = report.lowered, left = report.left.len(), nodes = current.len(), "lowering done");
    Ok((current, report))
}

/// `^name` of a body's effectful nodes.
type Effects = Vec<String>;

/// The nodes being built for one lowered node `c`: names `c/…`, its device and span.
struct Site<'a> {
    graph: &'a Graph,
    node: &'a Node,
    taken: &'a mut HashSet<String>,
    nodes: Vec<RawNode>,
}

impl Site<'_> {
    /// A fresh name `c/base`.
    fn name(&mut self, base: &str) -> String {
        fresh_name(&format!("{}/{base}", self.node.name), self.taken)
    }
    /// Adds node `name` (from [`Site::name`]); returns its name.
    fn push(&mut self, name: String, op: &str, inputs: Vec<String>, attrs: Vec<(&str, AttrValue)>) -> String {
        self.nodes.push(RawNode {
            name: name.clone(),
            op: op.into(),
            inputs,
            attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            device: self.node.device.clone(),
            span: self.node.span,
        });
        name
    }
    /// Adds a fresh node `c/base`; returns its name.
    fn add(&mut self, base: &str, op: &str, inputs: Vec<String>, attrs: Vec<(&str, AttrValue)>) -> String {
        let name = self.name(base);
        self.push(name, op, inputs, attrs)
    }
    /// A function's body inlined under `c/prefix` on `args`, input-less nodes after `gate`;
    /// its results (read after its effects when it has any) and its effects.
    fn body(
        &mut self,
        f: &FuncAttr,
        prefix: &str,
        args: &[String],
        gate: &str,
        want: usize,
    ) -> Result<(Vec<(String, DType)>, Effects), String> {
        let prefix = format!("{}/{prefix}", self.node.name);
        let body = inline_body(self.graph, &f.name, &f.attrs, &prefix, args, &[format!("^{gate}")], false, self.taken)?;
        if body.returns.len() != want {
            return Err(format!("function '{}' returns {} values, {want} expected", f.name, body.returns.len()));
        }
        self.nodes.extend(body.nodes);
        let mut results = Vec::with_capacity(want);
        for (v, t) in &body.returns {
            let t = t.as_type().ok_or_else(|| format!("function '{}' has a return without a dtype", f.name))?;
            results.push((v.clone(), t));
        }
        if !body.effectful.is_empty() && !results.is_empty() {
            // The results wait for the body's effects (what the functional op's outputs did).
            let mut inputs: Vec<String> = results.iter().map(|r| r.0.clone()).collect();
            inputs.extend(body.effectful.iter().cloned());
            let types = results.iter().map(|r| r.1).collect();
            let name = format!("{prefix}_outputs");
            let name = fresh_name(&name, self.taken);
            let out = self.push(name, "IdentityN", inputs, vec![("T", type_list(types))]);
            for (k, r) in results.iter_mut().enumerate() {
                r.0 = port(&out, k);
            }
        }
        Ok((results, body.effectful))
    }
}

fn port(node: &str, k: usize) -> String {
    if k == 0 {
        node.to_string()
    } else {
        format!("{node}:{k}")
    }
}

fn type_list(types: Vec<DType>) -> AttrValue {
    if types.is_empty() {
        AttrValue::List(ListValue::Empty)
    } else {
        AttrValue::List(ListValue::Type(types))
    }
}

fn types_attr(node: &Node, key: &str) -> Result<Vec<DType>, String> {
    node.attr(key)
        .and_then(AttrValue::as_type_list)
        .map(<[DType]>::to_vec)
        .ok_or_else(|| format!("no type list '{key}'"))
}

fn func_attr<'n>(node: &'n Node, key: &str) -> Result<&'n FuncAttr, String> {
    node.attr(key).and_then(AttrValue::as_func).ok_or_else(|| format!("no function attribute '{key}'"))
}

/// The nodes replacing `node` (the last one keeps its name), or why it stays.
fn lower_node(graph: &Graph, node: &Node, raw: &RawNode, taken: &mut HashSet<String>) -> Result<Vec<RawNode>, String> {
    if matches!(node.attr(LOWER_ATTR), Some(AttrValue::B(false))) {
        return Err(format!("{LOWER_ATTR} is false"));
    }
    let data: Vec<String> = raw.inputs.iter().filter(|s| !s.starts_with('^')).cloned().collect();
    let control: Vec<String> = raw.inputs.iter().filter(|s| s.starts_with('^')).cloned().collect();
    let mut site = Site { graph, node, taken, nodes: Vec::new() };
    match node.op.as_str() {
        "If" | "StatelessIf" => {
            if let Some(t) = node.attr("Tcond").and_then(AttrValue::as_type) {
                if t != DType::Bool {
                    return Err(format!("its predicate is {t:?}, not bool (TensorFlow's ToBool is not lowered)"));
                }
            }
            let branches = vec![func_attr(node, "then_branch")?.clone(), func_attr(node, "else_branch")?.clone()];
            let (pred, args) = data.split_first().ok_or("no predicate")?;
            let mut inputs = vec![pred.clone()];
            inputs.extend(control);
            let root = site.add("pred", "Identity", inputs, vec![("T", AttrValue::Type(DType::Bool))]);
            lower_branches(&mut site, (root.clone(), DType::Bool), vec![root], &branches, &["then", "else"], args)?;
        }
        "Case" | "StatelessCase" => {
            let branches: Vec<FuncAttr> = match node.attr("branches") {
                Some(AttrValue::List(ListValue::Func(fs))) if !fs.is_empty() => fs.clone(),
                _ => return Err("no branches".into()),
            };
            let (index, args) = data.split_first().ok_or("no branch index")?;
            let mut inputs = vec![index.clone()];
            inputs.extend(control);
            let root = site.add("branch_index", "Identity", inputs, vec![("T", AttrValue::Type(DType::Int32))]);
            let mut selectors = Vec::new();
            for k in 0..branches.len() - 1 {
                let value = AttrValue::Tensor(Tensor::scalar_i32(k as i32));
                let kc = site.add(
                    &format!("index_{k}"),
                    "Const",
                    vec![format!("^{root}")],
                    vec![("dtype", AttrValue::Type(DType::Int32)), ("value", value)],
                );
                let eq = site.add(
                    &format!("is_branch_{k}"),
                    "Equal",
                    vec![root.clone(), kc],
                    vec![("T", AttrValue::Type(DType::Int32))],
                );
                selectors.push(eq);
            }
            let labels: Vec<String> = (0..branches.len()).map(|k| format!("branch{k}")).collect();
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            lower_branches(&mut site, (root, DType::Int32), selectors, &branches, &labels, args)?;
        }
        "While" | "StatelessWhile" => lower_while(&mut site, &data, &control)?,
        op => return Err(format!("{op} is not functional control flow")),
    }
    Ok(site.nodes)
}

/// Branch `k < n-1` runs when `selectors[k]` is true and no earlier one was; the last
/// branch otherwise. `root` (live whenever the node runs, after its control inputs) is
/// what the pivots switch.
fn lower_branches(
    site: &mut Site<'_>,
    root: (String, DType),
    selectors: Vec<String>,
    branches: &[FuncAttr],
    labels: &[&str],
    args: &[String],
) -> Result<(), String> {
    let node = site.node;
    let tin = types_attr(node, "Tin")?;
    let tout = types_attr(node, "Tout")?;
    if tin.len() != args.len() {
        return Err(format!("{} inputs for {} types in Tin", args.len(), tin.len()));
    }
    let n = branches.len();
    let mut pending_args: Vec<String> = args.to_vec();
    let mut pending_pivot = root.0.clone();
    let root_t = AttrValue::Type(root.1);
    let mut values: Vec<Vec<String>> = Vec::new();
    let mut dones: Vec<String> = Vec::new();
    for (k, f) in branches.iter().enumerate() {
        let label = labels[k];
        let (srcs, pivot_src) = if k + 1 < n {
            let sel = selectors[k].clone();
            let ps = site.add(
                &format!("switch_pivot_{label}"),
                "Switch",
                vec![pending_pivot.clone(), sel.clone()],
                vec![("T", root_t.clone())],
            );
            let mut srcs = Vec::with_capacity(args.len());
            for (i, a) in pending_args.iter_mut().enumerate() {
                let sw = site.add(
                    &format!("switch_{label}_{i}"),
                    "Switch",
                    vec![a.clone(), sel.clone()],
                    vec![("T", AttrValue::Type(tin[i]))],
                );
                srcs.push(format!("{sw}:1"));
                *a = format!("{sw}:0");
            }
            pending_pivot = format!("{ps}:0");
            (srcs, format!("{ps}:1"))
        } else {
            (pending_args.clone(), pending_pivot.clone())
        };
        let pivot = site.add(&format!("pivot_{label}"), "Identity", vec![pivot_src], vec![("T", root_t.clone())]);
        let mut branch_args = Vec::with_capacity(srcs.len());
        for (i, s) in srcs.into_iter().enumerate() {
            let a = site.add(&format!("{label}_input_{i}"), "Identity", vec![s], vec![("T", AttrValue::Type(tin[i]))]);
            branch_args.push(a);
        }
        let (results, effects) = site.body(f, label, &branch_args, &pivot, tout.len())?;
        for (j, (_, t)) in results.iter().enumerate() {
            if *t != tout[j] {
                return Err(format!("branch '{}' returns {t:?} as result {j}, Tout says {:?}", f.name, tout[j]));
            }
        }
        let mut done_inputs = vec![pivot];
        done_inputs.extend(effects);
        dones.push(site.add(&format!("{label}_done"), "Identity", done_inputs, vec![("T", root_t.clone())]));
        values.push(results.into_iter().map(|r| r.0).collect());
    }
    let mut outputs = Vec::with_capacity(tout.len());
    for (j, &t) in tout.iter().enumerate() {
        let inputs = values.iter().map(|v| v[j].clone()).collect();
        outputs.push(site.add(
            &format!("output_{j}"),
            "Merge",
            inputs,
            vec![("T", AttrValue::Type(t)), ("N", AttrValue::I(n as i64))],
        ));
    }
    let executed = site.add("branch_executed", "Merge", dones, vec![("T", root_t), ("N", AttrValue::I(n as i64))]);
    stand_in(site, outputs, tout, format!("^{executed}"));
    Ok(())
}

/// The node keeping `c`'s name: an `IdentityN` of `values` (a `NoOp` when there are none)
/// after `after`.
fn stand_in(site: &mut Site<'_>, values: Vec<String>, types: Vec<DType>, after: String) {
    let name = site.node.name.clone();
    if values.is_empty() {
        site.push(name, "NoOp", vec![after], Vec::new());
    } else {
        let mut inputs = values;
        inputs.push(after);
        site.push(name, "IdentityN", inputs, vec![("T", type_list(types))]);
    }
}

/// Which loop variables the body returns unchanged (its result `i` is its argument `i`).
fn loop_invariant(graph: &Graph, body: &FuncAttr, n: usize) -> Result<Vec<bool>, String> {
    let function = graph.library.function(&body.name).ok_or_else(|| format!("no function '{}'", body.name))?;
    let g = instantiate_with(function, &graph.library, &body.attrs).map_err(|e| e.to_string())?;
    let index = |n: &Node| n.attr("index").and_then(AttrValue::as_int);
    let mut invariant = vec![false; n];
    for id in g.node_ids() {
        let r = g.node(id);
        if r.op != "_Retval" {
            continue;
        }
        let (Some(k), Some(input)) = (index(r), r.inputs.first()) else { continue };
        let src = g.node(input.node);
        if src.op == "_Arg" && index(src) == Some(k) && (k as usize) < n {
            invariant[k as usize] = true;
        }
    }
    Ok(invariant)
}

fn lower_while(site: &mut Site<'_>, data: &[String], control: &[String]) -> Result<(), String> {
    let node = site.node;
    let t = types_attr(node, "T")?;
    if t.len() != data.len() {
        return Err(format!("{} inputs for {} types in T", data.len(), t.len()));
    }
    let cond = func_attr(node, "cond")?.clone();
    let body = func_attr(node, "body")?.clone();
    let parallel = node.attr("parallel_iterations").and_then(AttrValue::as_int).unwrap_or(10);
    let invariant = loop_invariant(site.graph, &body, data.len())?;
    let Some(first) = invariant.iter().position(|&i| !i) else {
        return Err("every loop variable is loop-invariant".into());
    };
    let frame = site.name("while_context");
    let ty = |i: usize| AttrValue::Type(t[i]);

    // Enter → Merge(Enter, NextIteration) per variable (invariant ones: a constant Enter).
    let mut enters = Vec::with_capacity(data.len());
    for (i, d) in data.iter().enumerate() {
        let mut inputs = vec![d.clone()];
        inputs.extend(control.iter().cloned());
        enters.push(site.add(
            &format!("enter_{i}"),
            "Enter",
            inputs,
            vec![
                ("T", ty(i)),
                ("frame_name", AttrValue::S(frame.clone().into_bytes())),
                ("is_constant", AttrValue::B(invariant[i])),
                ("parallel_iterations", AttrValue::I(parallel)),
            ],
        ));
    }
    let next_names: Vec<Option<String>> =
        (0..data.len()).map(|i| (!invariant[i]).then(|| site.name(&format!("next_iteration_{i}")))).collect();
    let mut merges: Vec<Option<String>> = Vec::with_capacity(data.len());
    for i in 0..data.len() {
        merges.push(next_names[i].as_ref().map(|next| {
            site.add(
                &format!("merge_{i}"),
                "Merge",
                vec![enters[i].clone(), next.clone()],
                vec![("T", ty(i)), ("N", AttrValue::I(2))],
            )
        }));
    }
    let current = |i: usize| merges[i].clone().unwrap_or_else(|| enters[i].clone());

    // The condition, LoopCond, a Switch per variable.
    let cond_args: Vec<String> = (0..data.len()).map(current).collect();
    let gate = merges[first].clone().expect("a variable that is not invariant");
    let (cond_out, _) = site.body(&cond, "cond", &cond_args, &gate, 1)?;
    if cond_out[0].1 != DType::Bool {
        return Err(format!("the condition '{}' returns {:?}, not bool", cond.name, cond_out[0].1));
    }
    let loop_cond = site.add("loop_cond", "LoopCond", vec![cond_out[0].0.clone()], Vec::new());
    let mut body_args = Vec::with_capacity(data.len());
    let mut exits: Vec<Option<String>> = Vec::with_capacity(data.len());
    for i in 0..data.len() {
        let Some(m) = merges[i].clone() else {
            body_args.push(enters[i].clone());
            exits.push(None);
            continue;
        };
        let sw = site.add(&format!("switch_{i}"), "Switch", vec![m, loop_cond.clone()], vec![("T", ty(i))]);
        body_args.push(site.add(&format!("body_input_{i}"), "Identity", vec![format!("{sw}:1")], vec![("T", ty(i))]));
        exits.push(Some(site.add(&format!("exit_{i}"), "Exit", vec![format!("{sw}:0")], vec![("T", ty(i))])));
    }

    // The body, NextIteration of its results.
    let gate = body_args[first].clone();
    let (results, _) = site.body(&body, "body", &body_args, &gate, data.len())?;
    for (i, (value, rt)) in results.into_iter().enumerate() {
        if rt != t[i] {
            return Err(format!("the body '{}' returns {rt:?} as variable {i}, T says {:?}", body.name, t[i]));
        }
        if let Some(next) = next_names[i].clone() {
            site.push(next, "NextIteration", vec![value], vec![("T", ty(i))]);
        }
    }
    let values: Vec<String> = (0..data.len()).map(|i| exits[i].clone().unwrap_or_else(|| data[i].clone())).collect();
    let after = format!("^{}", exits[first].clone().expect("an exit"));
    stand_in(site, values, t, after);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lower(text: &str) -> (Graph, LowerReport) {
        let g = autoclust_graph::text::parse(text).unwrap();
        lower_control_flow(g).unwrap()
    }

    const IF_GRAPH: &str = "\
function t(v: resource, x: float32) -> (y: float32) {
  a = AssignAddVariableOp(v, x) {dtype = float32}
  return y = x
}
function e(v: resource, x: float32) -> (y: float32) {
  n = Neg(x) {T = float32}
  return y = n:y:0
}
v = VarHandleOp() {container = \"\", dtype = float32, shape = shape[], shared_name = \"v\"}
p = Placeholder() {dtype = bool, shape = shape[]}
x = Placeholder() {dtype = float32, shape = shape[]}
c = If(p, v, x) {Tcond = bool, Tin = [resource, float32], Tout = [float32], then_branch = @t, else_branch = @e}
";

    /// An If becomes switches, both branches and merges; the node keeps its name.
    #[test]
    fn an_if_becomes_switches_and_merges() {
        let (g, report) = lower(IF_GRAPH);
        assert_eq!(report.lowered, 1, "{report:?}");
        let c = g.node(g.find("c").unwrap());
        assert_eq!(c.op, "IdentityN");
        let ops: Vec<&str> = g.nodes().iter().map(|n| n.op.as_str()).collect();
        assert!(ops.contains(&"Switch") && ops.contains(&"Merge") && ops.contains(&"AssignAddVariableOp"));
        assert!(!ops.contains(&"If"));
        autoclust_graph::verify::verify(&g).unwrap();
    }

    /// `_lower_using_switch_merge = false` leaves the node alone, with its reason.
    #[test]
    fn the_attribute_false_keeps_the_node() {
        let text = IF_GRAPH.replace("else_branch = @e}", "else_branch = @e, _lower_using_switch_merge = false}");
        let (g, report) = lower(&text);
        assert_eq!(report.lowered, 0);
        assert_eq!(report.left.len(), 1);
        assert_eq!(g.node(g.find("c").unwrap()).op, "If");
    }
}
