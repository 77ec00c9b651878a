//! Arithmetic simplification (`opt --passes arithmetic-simplify`), the
//! identities of Grappler's `arithmetic_optimizer` that remove a node
//! outright. A pure node `n` whose value is provably one of its inputs `x`
//! is bypassed: its data users read `x`, its control users wait for `x`'s
//! producer, and `n` is removed when nothing else needs it. The identities:
//! - `x * 1`, `1 * x`, `x / 1` (`Mul`, `RealDiv`, `Div`), `x - 0` (`Sub`),
//!   `x + 0`, `0 + x` (`Add`, `AddV2`) — only when the constant's every
//!   dimension is 1 and its rank is at most `x`'s, so broadcasting leaves
//!   `x`'s shape (`x + zeros([4])` with `x` of shape `[1]` is *not* `x`).
//!   `x - (+0.0)`, `x + (-0.0)` and `x * 1` are `x` bit for bit; a float
//!   `x + (+0.0)` is `x` except that `-0.0 + +0.0` is `+0.0`: bypassed all
//!   the same, as TensorFlow's constant folding does (`x + zeros` becomes
//!   `Identity(x)` there), so the result may differ from the unoptimized
//!   graph's only in the sign of a zero (and what that sign reaches, e.g. the
//!   sign of `1 / x`) — what TensorFlow's optimized graphs compute too. With
//!   [`PassContext::exact_signed_zeros`] only `x + (-0.0)` is bypassed;
//! - reductions (`Sum`, `Prod`, `Mean`, `Max`, `Min`, `All`, `Any`) over no
//!   axes (a constant, empty axis list), or with `keep_dims` over axes whose
//!   every dimension is 1: TensorFlow's reduction kernels copy the input
//!   then (`ReductionHelper` finds nothing to reduce), and Grappler rewrites
//!   them to `Identity`;
//! - `Neg(Neg(x))`, `Transpose(x, p)` with `p` the identity permutation,
//!   `Transpose(Transpose(x, p), q)` when `p∘q` is the identity (both
//!   permutations constant);
//! - `AddN(x)` of one input, `Identity`/`Snapshot`/`StopGradient` of a value
//!   (so Identity chains disappear), every output of an `IdentityN`, `Cast`
//!   to the type it already has, `Reshape` to the static shape `x` already
//!   has (the same rank and known dimensions, at most one dimension unknown
//!   on either side — the element count a `Reshape` keeps fixes it — and no
//!   known 0, Grappler's `ReshapeIsIdentity`).
//!
//! One rewrite replaces a node instead: `Reshape(Reshape(x, s1), s2)`
//! becomes `Reshape(x, s2)` (a `Reshape` moves no element, so only the last
//! shape matters; the inner one, when nothing else reads it, goes).
//!
//! And a float `Pow(x, c)` by a constant whose every element is `c` and which
//! broadcasts into `x`'s shape is what Grappler's `ConvertPow` makes of it: `c = 1`
//! bypassed (above), 2 → `Square(x)`, 3 → `Mul(x, Square(x))`, 0.5 → `Sqrt(x)`,
//! −0.5 → `Rsqrt(x)`, −1 → `Reciprocal(x)`, under the node's own name. This is not bit for
//! bit: `Square` and `Reciprocal` round once where `pow` may be half an ulp off, `x³` rounds
//! twice, and `Sqrt` differs from `pow(x, 0.5)` at −0 and −∞ (−0 and NaN instead of +0 and
//! +∞). It is what TensorFlow computes for `x ** 2` and friends in every graph Grappler
//! optimizes (`tf.function`'s default), and `x ** 2` is several times cheaper as a product
//! than as a `pow` (in a compiled loop and in the interpreter alike).
//!
//! Conditions: `n` has no control inputs (its data users would otherwise
//! stop waiting for them), is not fetched, targeted or fed (its name must
//! stay), and inference gives `n` and `x` the same dtype (and the same
//! shape where the rule does not imply it).
//!
//! Soundness: `n`'s value equals `x`'s value bit for bit under the
//! conditions above, and `n`, having no control inputs, starts as soon as `x`
//! is ready; so every user of `n` sees the same value no earlier than before,
//! and a control user of `n` still waits for `x`'s producer. Only pure
//! nodes are bypassed: stateful and resource ops are untouched.

use std::collections::HashMap;

use autoclust_graph::infer::TypeInfo;
use autoclust_graph::{AttrValue, DType, Graph, Node, NodeId, Output, RawNode, Tensor};

use crate::pass::{PassContext, PassError};
use crate::rewrite::{input_strings, is_control_flow, is_pure, pinned, pinned_names, remove_dead, Rewrite};

/// What one run of [`arithmetic_simplify`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimplifyReport {
    /// Nodes bypassed.
    pub bypassed: usize,
    /// `Pow` nodes by a constant exponent turned into cheaper ops.
    pub converted: usize,
}

fn const_of<'g>(graph: &'g Graph, o: Output, ctx: &PassContext) -> Option<&'g Tensor> {
    let n = graph.node(o.node);
    if n.op != "Const" || ctx.fed.contains(&n.name) {
        return None;
    }
    match n.attr("value") {
        Some(AttrValue::Tensor(t)) => Some(t),
        _ => None,
    }
}

/// Every element equals `v` (floats compared with their sign bit: `want_neg_zero`).
fn all_equal(t: &Tensor, v: f64, neg_zero: Option<bool>) -> bool {
    if !(t.dtype.is_float() || t.dtype.is_integer()) {
        return false;
    }
    let Some(vals) = t.to_f64_vec() else { return false };
    !vals.is_empty()
        && vals.iter().all(|&x| x == v && neg_zero.is_none_or(|neg| !t.dtype.is_float() || x.is_sign_negative() == neg))
}

fn rank(info: &TypeInfo, o: Output) -> Option<usize> {
    info.output(o).and_then(|(_, s)| s.rank())
}

/// The constant `c` broadcasts into `x` without changing `x`'s shape.
fn broadcasts_into(c: &Tensor, x_rank: Option<usize>) -> bool {
    c.shape.iter().all(|&d| d == 1) && x_rank.is_some_and(|r| c.shape.len() <= r)
}

fn perm(graph: &Graph, o: Output, ctx: &PassContext) -> Option<Vec<i64>> {
    const_of(graph, o, ctx)?.to_i64_vec()
}

/// A `Reshape` from static shape `before` to `out` leaves the shape as it
/// was: the same rank, the same dimension wherever both are known, at most one
/// position unknown on either side (the element count, which a `Reshape`
/// keeps, then fixes it), and no known dimension 0 (which would hide it).
fn reshape_is_identity(before: &[Option<i64>], out: &[Option<i64>]) -> bool {
    if before.len() != out.len() {
        return false;
    }
    let mut unknown = 0;
    for (a, b) in before.iter().zip(out) {
        match (a, b) {
            (Some(a), Some(b)) if a == b && *a != 0 => {}
            (Some(_), Some(_)) => return false,
            (Some(0), None) | (None, Some(0)) => return false,
            _ => unknown += 1,
        }
    }
    unknown <= 1
}

/// The input `n`'s value provably equals (module doc), if any.
fn bypass(graph: &Graph, id: NodeId, info: &TypeInfo, ctx: &PassContext) -> Option<Output> {
    let node: &Node = graph.node(id);
    let ins = &node.inputs;
    let binary = |identity: f64, neg_zero: Option<bool>, commutes: bool| -> Option<Output> {
        if ins.len() != 2 {
            return None;
        }
        if let Some(c) = const_of(graph, ins[1], ctx) {
            if all_equal(c, identity, neg_zero) && broadcasts_into(c, rank(info, ins[0])) {
                return Some(ins[0]);
            }
        }
        if commutes {
            if let Some(c) = const_of(graph, ins[0], ctx) {
                if all_equal(c, identity, neg_zero) && broadcasts_into(c, rank(info, ins[1])) {
                    return Some(ins[1]);
                }
            }
        }
        None
    };
    match node.op.as_str() {
        "Mul" => binary(1.0, None, true),
        "RealDiv" | "Div" => binary(1.0, None, false),
        // pow(x, 1) is x for every x, NaN and infinities included.
        "Pow" => binary(1.0, None, false),
        "Sub" => binary(0.0, Some(false), false),
        "Add" | "AddV2" => binary(0.0, ctx.exact_signed_zeros.then_some(true), true),
        "Sum" | "Prod" | "Mean" | "Max" | "Min" | "All" | "Any" if ins.len() == 2 => {
            let axes = const_of(graph, ins[1], ctx)?.to_i64_vec()?;
            if axes.is_empty() {
                return Some(ins[0]);
            }
            if node.attr("keep_dims").and_then(AttrValue::as_bool) != Some(true) {
                return None;
            }
            let dims = info.output(ins[0])?.1.dims.clone()?;
            let r = dims.len() as i64;
            let all_one = axes.iter().all(|&a| {
                let a = if a < 0 { a + r } else { a };
                (0..r).contains(&a) && dims[a as usize] == Some(1)
            });
            all_one.then(|| ins[0])
        }
        "Neg" => {
            let inner = graph.node(ins.first()?.node);
            (inner.op == "Neg" && inner.control_inputs.is_empty() && is_pure(graph, inner)).then(|| inner.inputs[0])
        }
        "Transpose" if ins.len() == 2 && perm(graph, ins[1], ctx)?.iter().enumerate().all(|(i, &p)| p == i as i64) => {
            // The identity permutation (Keras's Tensordot makes `perm = [0, 1, 2]`).
            Some(ins[0])
        }
        "Transpose" => {
            let inner = graph.node(ins.first()?.node);
            if inner.op != "Transpose" || !inner.control_inputs.is_empty() || ins.len() != 2 || inner.inputs.len() != 2
            {
                return None;
            }
            let (p, q) = (perm(graph, inner.inputs[1], ctx)?, perm(graph, ins[1], ctx)?);
            // out[i] = inner[q[i]] = x[p[q[i]]]
            let identity = p.len() == q.len()
                && q.iter()
                    .enumerate()
                    .all(|(i, &qi)| usize::try_from(qi).ok().and_then(|k| p.get(k)) == Some(&(i as i64)));
            identity.then(|| inner.inputs[0])
        }
        "AddN" if ins.len() == 1 => Some(ins[0]),
        "Identity" | "Snapshot" | "StopGradient" if ins.len() == 1 => Some(ins[0]),
        "Cast" if ins.len() == 1 => {
            let src = node.attr("SrcT").and_then(AttrValue::as_type)?;
            let dst = node.attr("DstT").and_then(AttrValue::as_type)?;
            (src == dst).then(|| ins[0])
        }
        "Reshape" if ins.len() == 2 => {
            let before = info.output(ins[0])?.1.dims.clone()?;
            let out = info.outputs(id).first()?.1.dims.clone()?;
            reshape_is_identity(&before, &out).then(|| ins[0])
        }
        _ => None,
    }
}

/// What a float `Pow(x, c)` by a constant `c` (every element equal, broadcasting into `x`'s
/// shape) becomes: Grappler's `ConvertPow` — `Square` for 2, `Mul(x, Square(x))` for 3,
/// `Sqrt` for 0.5, `Rsqrt` for -0.5, `Reciprocal` for -1 (1 is bypassed, see [`bypass`]).
fn pow_conversion(graph: &Graph, id: NodeId, info: &TypeInfo, ctx: &PassContext) -> Option<&'static str> {
    let node = graph.node(id);
    if node.op != "Pow" || node.inputs.len() != 2 {
        return None;
    }
    let dtype = node.attr("T").and_then(AttrValue::as_type)?;
    if !dtype.is_float() {
        return None;
    }
    let c = const_of(graph, node.inputs[1], ctx)?;
    if !broadcasts_into(c, rank(info, node.inputs[0])) {
        return None;
    }
    [(2.0, "Square"), (3.0, "Cube"), (0.5, "Sqrt"), (-0.5, "Rsqrt"), (-1.0, "Reciprocal")]
        .into_iter()
        .find(|&(v, _)| all_equal(c, v, None))
        .map(|(_, op)| op)
}

/// `Reshape(Reshape(x, s1), s2)` (the inner one pure, ungated and not
/// pinned): `x` and `s2`.
fn reshape_of_reshape(graph: &Graph, id: NodeId, pin: &[bool]) -> Option<(Output, Output)> {
    let node = graph.node(id);
    if node.op != "Reshape" || node.inputs.len() != 2 {
        return None;
    }
    let inner = graph.node(node.inputs[0].node);
    let ok = inner.op == "Reshape"
        && inner.inputs.len() == 2
        && inner.control_inputs.is_empty()
        && !pin[node.inputs[0].node.index()]
        && is_pure(graph, inner)
        && inner.attr("T") == node.attr("T")
        && !is_control_flow(graph, inner.inputs[0].node);
    ok.then(|| (inner.inputs[0], node.inputs[1]))
}

/// Bypasses the nodes the identities of the module doc make redundant.
pub fn arithmetic_simplify(graph: &Graph, ctx: &PassContext) -> Result<(Graph, SimplifyReport), PassError> {
    arithmetic_simplify_owned(graph.clone(), ctx)
}

/// [`arithmetic_simplify`] editing `graph` in place (what the pass runs).
pub(crate) fn arithmetic_simplify_owned(owned: Graph, ctx: &PassContext) -> Result<(Graph, SimplifyReport), PassError> {
    let graph = &owned;
    let _span = tracing::debug_span!("arithmetic_simplify", nodes = graph.len()).entered();
    let keep = pinned_names(graph, ctx);
    let pin = pinned(graph, ctx);
    let info = ctx.types(graph)?;
    let succ = graph.successors();
    let mut rw = Rewrite::default();
    let mut report = SimplifyReport::default();
    let mut bypassed: HashMap<NodeId, Output> = HashMap::new();
    let mut identity_ns: Vec<(NodeId, Vec<NodeId>)> = Vec::new();
    for id in graph.topo_order()? {
        let node = graph.node(id);
        if pin[id.index()] || !node.control_inputs.is_empty() || !is_pure(graph, node) {
            continue;
        }
        if node.op == "IdentityN" {
            // Each output is its input: users read the inputs themselves.
            if node.inputs.iter().any(|o| is_control_flow(graph, o.node)) {
                continue;
            }
            for (k, &x) in node.inputs.iter().enumerate() {
                // To the end of `x`'s own redirections (bypassed before it, in topological
                // order), so no chain of redirections forms: resolving one through a
                // 10⁴-node Identity chain, once per node, was quadratic.
                let x = rw.resolve(x);
                rw.redirect(Output { node: id, port: k as u32 }, x);
            }
            let producers: Vec<NodeId> = node.inputs.iter().map(|o| rw.resolve(*o).node).collect();
            identity_ns.push((id, producers));
            report.bypassed += 1;
            continue;
        }
        if let Some((x, shape)) = reshape_of_reshape(graph, id, &pin) {
            // Reshape(Reshape(x, s1), s2) is Reshape(x, s2): a Reshape moves no element.
            let raw = RawNode {
                name: node.name.clone(),
                op: node.op.clone(),
                inputs: input_strings(graph, &rw, &[x, shape], &[]),
                attrs: node.attrs.clone(),
                device: node.device.clone(),
                span: node.span,
            };
            rw.replace(id, raw);
            report.bypassed += 1;
            continue;
        }
        if let Some(op) = pow_conversion(graph, id, &info, ctx) {
            let x = node.inputs[0];
            let attrs = node.attrs.clone();
            let raw = |name: String, op: &str, inputs: Vec<String>| RawNode {
                name,
                op: op.into(),
                inputs,
                attrs: attrs.clone(),
                device: node.device.clone(),
                span: node.span,
            };
            let x_in = input_strings(graph, &rw, &[x], &[]);
            if op == "Cube" {
                // x * (x * x), as Grappler writes x³ on a CPU.
                let square = crate::anchor::fresh_name(graph, &format!("{}/square", node.name));
                rw.add(raw(square.clone(), "Square", x_in.clone()));
                rw.replace(id, raw(node.name.clone(), "Mul", vec![x_in[0].clone(), format!("{square}:0")]));
            } else {
                rw.replace(id, raw(node.name.clone(), op, x_in));
            }
            report.converted += 1;
            continue;
        }
        let Some(x) = bypass(graph, id, &info, ctx) else { continue };
        if is_control_flow(graph, x.node) && !succ.control[id.index()].is_empty() {
            // An Identity of a Switch output is a frame's pivot: its control
            // users must not move onto the Switch (a control edge out of a
            // Switch waits for both branches). Data users may read the Switch
            // output itself: a dead value reaches them either way.
            continue;
        }
        let same_dtype = match (info.outputs(id).first(), info.output(x)) {
            (Some((t, _)), Some((u, _))) => t == u && !matches!(t, DType::Resource),
            // An Identity's value is its input whatever inference knows (a
            // resource Identity is not pure, so never gets here).
            _ => matches!(node.op.as_str(), "Identity" | "Snapshot" | "StopGradient"),
        };
        if !same_dtype || graph.output_count(id) != Some(1) {
            continue;
        }
        // Straight to the end of `x`'s redirections (as for `IdentityN` above).
        let x = rw.resolve(x);
        rw.redirect(Output { node: id, port: 0 }, x);
        bypassed.insert(id, x);
        report.bypassed += 1;
    }
    // Bypassed nodes keep existing for their control users until dependency
    // optimization or dead-node removal; control users of a bypassed node
    // now wait for the producer of the value instead.
    for (&id, &x) in &bypassed {
        rw.remove(id, vec![rw.resolve(x).node]);
    }
    for (id, producers) in identity_ns {
        let mut to: Vec<NodeId> = producers.into_iter().map(|p| rw.resolve(Output { node: p, port: 0 }).node).collect();
        to.dedup();
        rw.remove(id, to);
    }
    let out = rw.apply(owned)?;
    let out = remove_dead(out, &keep, ctx)?;
    tracing::debug!(bypassed = report.bypassed, nodes = out.len(), "arithmetic-simplify done");
    Ok((out, report))
}

/// `arithmetic-simplify`: [`arithmetic_simplify`] as a registered pass.
pub(crate) struct ArithmeticSimplifyPass;

impl crate::pass::Pass for ArithmeticSimplifyPass {
    fn name(&self) -> &'static str {
        "arithmetic-simplify"
    }
    fn description(&self) -> &'static str {
        "bypass x*1, x/1, x-0, x+0, Neg(Neg x), identity and inverse Transposes, AddN(x), Identity chains, Cast to the same \
         type, Reshape to the same shape, reductions over no axes or size-1 kept axes (same dtype and shape only); \
         Pow by a constant 2, 3, 0.5, -0.5, -1 as Square, x*Square, Sqrt, Rsqrt, Reciprocal (Grappler's ConvertPow)"
    }
    fn run(&self, graph: Graph, ctx: &PassContext) -> Result<Graph, PassError> {
        let mut out = arithmetic_simplify_owned(graph, ctx)?.0;
        crate::function_bodies::optimize_bodies(&mut out, ctx, "arithmetic-simplify", |body, c| {
            Ok(arithmetic_simplify(body, c)?.0)
        });
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Graph {
        autoclust_graph::text::parse(src).unwrap()
    }

    fn run(src: &str) -> (Graph, SimplifyReport) {
        arithmetic_simplify(&parse(src), &PassContext::default()).unwrap()
    }

    #[test]
    fn bypasses_identities_and_chains() {
        let (out, r) = run("x = Placeholder() {dtype = float32, shape = shape[2, 3]}\n\
             one = Const() {dtype = float32, value = float32[]{1.0}}\n\
             m = Mul(x, one) {T = float32}\n\
             i1 = Identity(m) {T = float32}\n\
             i2 = Identity(i1) {T = float32}\n\
             n1 = Neg(i2) {T = float32}\n\
             n2 = Neg(n1) {T = float32}\n\
             c = Cast(n2) {SrcT = float32, DstT = float32}\n\
             y = Exp(c) {T = float32}\n");
        assert_eq!(r.bypassed, 5);
        let y = out.node(out.find("y").unwrap());
        assert_eq!(y.inputs[0].node, out.find("x").unwrap());
        assert_eq!(out.len(), 2);
    }

    /// An Identity chain (and a `Neg(Neg(…))` chain) collapses with work linear in its
    /// length: every redirection goes to the end of its input's, so resolving one takes a
    /// hop or two (sweep 73: resolving through the whole chain once per node made a
    /// 20,000-node chain take 7 s and a 200,000-node one never finish).
    #[test]
    fn chains_collapse_in_linear_work() {
        let hops = |op: &str, n: usize| {
            let mut src = String::from("x = Placeholder() {dtype = float32, shape = shape[]}\n");
            let mut prev = "x".to_string();
            for i in 0..n {
                src += &format!("n{i} = {op}({prev}) {{T = float32}}\n");
                prev = format!("n{i}");
            }
            src += &format!("y = Exp({prev}) {{T = float32}}\n");
            crate::rewrite::RESOLVE_HOPS.with(|c| c.set(0));
            let (out, _) = run(&src);
            let y = out.node(out.find("y").unwrap());
            assert_eq!(out.node(y.inputs[0].node).name, "x", "{op} chain of {n} not collapsed");
            crate::rewrite::RESOLVE_HOPS.with(std::cell::Cell::get)
        };
        for op in ["Identity", "Neg"] {
            let (small, large) = (hops(op, 400), hops(op, 4000));
            assert!(large <= 12 * small.max(1), "{op}: 400 nodes {small} hops, 4000 nodes {large} hops");
        }
    }

    /// Grappler's ConvertPow: each exponent its op, under the node's name; a broadcasting,
    /// non-uniform, fed or integer exponent is left alone; values as the new ops compute them.
    #[test]
    fn pow_by_a_constant_becomes_the_cheaper_op() {
        let src = "x = Placeholder() {dtype = float32, shape = shape[3]}\n\
             n = Placeholder() {dtype = int32, shape = shape[3]}\n\
             c1 = Const() {dtype = float32, value = float32[]{1.0}}\n\
             c2 = Const() {dtype = float32, value = float32[1]{2.0}}\n\
             c3 = Const() {dtype = float32, value = float32[]{3.0}}\n\
             ch = Const() {dtype = float32, value = float32[]{0.5}}\n\
             cmh = Const() {dtype = float32, value = float32[]{-0.5}}\n\
             cm1 = Const() {dtype = float32, value = float32[]{-1.0}}\n\
             wide = Const() {dtype = float32, value = float32[2, 3]{2.0, 2.0, 2.0, 2.0, 2.0, 2.0}}\n\
             mixed = Const() {dtype = float32, value = float32[3]{2.0, 2.0, 3.0}}\n\
             i2 = Const() {dtype = int32, value = int32[]{2}}\n\
             p1 = Pow(x, c1) {T = float32}\n\
             p2 = Pow(x, c2) {T = float32}\n\
             p3 = Pow(x, c3) {T = float32}\n\
             ph = Pow(x, ch) {T = float32}\n\
             pmh = Pow(x, cmh) {T = float32}\n\
             pm1 = Pow(x, cm1) {T = float32}\n\
             pw = Pow(x, wide) {T = float32}\n\
             pm = Pow(x, mixed) {T = float32}\n\
             pi = Pow(n, i2) {T = int32}\n\
             out = IdentityN(p1, p2, p3, ph, pmh, pm1, pw, pm, pi) \
               {T = [float32, float32, float32, float32, float32, float32, float32, float32, int32]}\n";
        let keep = || Some(["out".to_string()].into_iter().collect());
        let ctx = PassContext { preserve: keep(), ..PassContext::default() };
        let (out, r) = arithmetic_simplify(&parse(src), &ctx).unwrap();
        assert_eq!(r.converted, 5);
        let op = |n: &str| out.node(out.find(n).unwrap_or_else(|| panic!("no {n}"))).op.clone();
        assert!(out.find("p1").is_none(), "pow(x, 1) is x");
        assert_eq!(
            ["p2", "p3", "ph", "pmh", "pm1", "pw", "pm", "pi"].map(op),
            ["Square", "Mul", "Sqrt", "Rsqrt", "Reciprocal", "Pow", "Pow", "Pow"]
        );
        let cube = out.node(out.find("p3").unwrap());
        assert_eq!(out.name(cube.inputs[0].node), "x");
        assert_eq!(out.node(cube.inputs[1].node).op, "Square");
        assert!(out.find("c2").is_none() && out.find("c3").is_none(), "the exponents are dead");
        // A fed exponent is not a constant.
        let fed =
            PassContext { preserve: keep(), fed: ["c2".to_string()].into_iter().collect(), ..PassContext::default() };
        let (out, r) = arithmetic_simplify(&parse(src), &fed).unwrap();
        assert_eq!(r.converted, 4);
        assert_eq!(out.node(out.find("p2").unwrap()).op, "Pow");
    }

    #[test]
    fn keeps_broadcasting_adds_and_bypasses_zero_adds() {
        let (out, r) = run("x = Placeholder() {dtype = float32, shape = shape[1]}\n\
             z = Const() {dtype = float32, value = float32[4]{0.0, 0.0, 0.0, 0.0}}\n\
             p = Const() {dtype = float32, value = float32[]{0.0}}\n\
             a = AddV2(x, z) {T = float32}\n\
             b = AddV2(x, p) {T = float32}\n\
             s = Sub(x, p) {T = float32}\n\
             y = AddN(a, b, s) {N = 3, T = float32}\n");
        assert_eq!(r.bypassed, 2);
        assert!(out.find("a").is_some() && out.find("b").is_none() && out.find("s").is_none());
    }

    #[test]
    fn reductions_over_no_axes_or_kept_unit_axes_are_bypassed() {
        let (out, r) = run("x = Placeholder() {dtype = float32, shape = shape[2, 1, 3]}\n\
             b = Placeholder() {dtype = bool, shape = shape[4]}\n\
             none = Const() {dtype = int32, value = int32[0]{}}\n\
             one = Const() {dtype = int32, value = int32[1]{-2}}\n\
             s = Sum(x, none) {T = float32, Tidx = int32, keep_dims = false}\n\
             m = Mean(s, one) {T = float32, Tidx = int32, keep_dims = true}\n\
             k = Max(m, one) {T = float32, Tidx = int32, keep_dims = false}\n\
             all = All(b, none) {Tidx = int32, keep_dims = false}\n\
             y = Exp(k) {T = float32}\n\
             z = LogicalNot(all)\n");
        assert_eq!(r.bypassed, 3, "{out:?}");
        assert!(out.find("s").is_none() && out.find("m").is_none() && out.find("all").is_none());
        // Without keep_dims the unit axis goes: not the input's shape.
        let k = out.node(out.find("k").unwrap());
        assert_eq!(k.inputs[0].node, out.find("x").unwrap());
    }

    #[test]
    fn inverse_transposes_cancel_and_control_inputs_block() {
        let (out, r) = run("x = Placeholder() {dtype = float32, shape = shape[2, 3, 4]}\n\
             p = Const() {dtype = int32, value = int32[3]{1, 2, 0}}\n\
             q = Const() {dtype = int32, value = int32[3]{2, 0, 1}}\n\
             t1 = Transpose(x, p) {T = float32, Tperm = int32}\n\
             t2 = Transpose(t1, q) {T = float32, Tperm = int32}\n\
             g = NoOp()\n\
             i = Identity(t2, ^g) {T = float32}\n\
             y = Exp(i) {T = float32}\n");
        assert_eq!(r.bypassed, 1);
        let i = out.node(out.find("i").unwrap());
        assert_eq!(i.inputs[0].node, out.find("x").unwrap());
    }
}
