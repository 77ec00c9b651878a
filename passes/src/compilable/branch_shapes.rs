//! Branches of an `If`/`Case` that return results of different shapes.
//!
//! The JIT compiles a functional `If`/`Case` as a selection between its branches'
//! results, so every branch must return the same type — dtype *and* shape — for the
//! shapes the node is called with; otherwise its cluster's compile is declined and the
//! whole cluster runs in the interpreter (`autoclust_compiler::control_flow`). TensorFlow
//! allows such branches (`tf.cond(p, lambda: tf.range(3), lambda: tf.range(5))`: the
//! `If`'s result is `[?]`), and XLA keeps them out of its clusters. The clusterer does the
//! same when it can *prove* the branches disagree: each branch body is inferred with the
//! operand shapes the node is known to get (an operand's partly known shape, `[?, 3]`, seeds what it knows),
//! and two branches whose result `k` has different ranks, or a dimension known in both
//! and different, disagree for every call. Inference never invents a dimension, so a
//! proven disagreement is real; an unproven one (shapes that depend on what is only known
//! at run time) is left to the compiler, which decides per signature.

use autoclust_graph::infer::{infer_partial_seeded, Seeds};
use autoclust_graph::{AttrValue, DType, Library, ListValue, NodeId, Output, Shape};

/// The functions an `If` (`then_branch`, `else_branch`) or `Case` (`branches`) selects
/// between; empty for other ops.
fn branches<'a>(op: &str, attrs: &'a autoclust_graph::Attrs) -> Vec<&'a str> {
    let func = |name: &str| attrs.get(name).and_then(AttrValue::as_func).map(|f| f.name.as_str());
    match op {
        "If" | "StatelessIf" => func("then_branch").into_iter().chain(func("else_branch")).collect(),
        "Case" | "StatelessCase" => match attrs.get("branches") {
            Some(AttrValue::List(ListValue::Func(fs))) => fs.iter().map(|f| f.name.as_str()).collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The static shape of each result of `function` called with arguments of the given
/// types (`None`: unknown), by the index of its `_Retval`s; `None` when the body does not
/// instantiate or infer.
fn result_shapes(library: &Library, function: &str, args: &[Option<(DType, Shape)>]) -> Option<Vec<Shape>> {
    let function = library.function(function)?;
    let body = autoclust_graph::function::instantiate(function, library).ok()?;
    let mut seeds = Seeds::default();
    // `instantiate` numbers argument `i` as node `i`.
    for (i, arg) in args.iter().enumerate().take(function.signature.inputs.len()) {
        if let Some(arg) = arg {
            let o = Output { node: NodeId(i as u32), port: 0 };
            match arg.1.to_known() {
                Some(dims) => seeds.outputs.insert(o, (arg.0, dims)).map(drop),
                None => seeds.partial.insert(o, arg.clone()).map(drop),
            };
        }
    }
    let (types, _) = infer_partial_seeded(&body, &seeds, None).ok()?;
    let mut results = vec![Shape::unknown(); function.signature.outputs.len()];
    for id in body.node_ids().filter(|&id| body.node(id).op == "_Retval") {
        let node = body.node(id);
        let index = node.attr("index").and_then(AttrValue::as_int).and_then(|i| usize::try_from(i).ok());
        if let (Some(slot), Some(&input)) = (index.and_then(|i| results.get_mut(i)), node.inputs.first()) {
            *slot = types.output(input).map(|t| t.1.clone()).unwrap_or_default();
        }
    }
    Some(results)
}

/// Whether no value can have both shapes: ranks known and different, or a dimension known
/// in both and different.
fn disagree(a: &Shape, b: &Shape) -> bool {
    match (&a.dims, &b.dims) {
        (Some(x), Some(y)) => {
            x.len() != y.len()
                || x.iter().zip(y).any(|(p, q)| matches!((p, q), (Some(p), Some(q)) if p != q && *p >= 0 && *q >= 0))
        }
        _ => false,
    }
}

/// Why an `If`/`Case` (`op`, `attrs`) cannot be compiled: two of its branches provably
/// return a result of different shapes when called with `operands` (the node's data
/// operands' types, `None` where unknown; the predicate or branch index first).
pub(super) fn branch_shape_conflict(
    library: &Library,
    op: &str,
    attrs: &autoclust_graph::Attrs,
    operands: &[Option<(DType, Shape)>],
) -> Option<String> {
    let names = branches(op, attrs);
    if names.len() < 2 {
        return None;
    }
    let args = operands.get(1..).unwrap_or_default();
    let first = result_shapes(library, names[0], args)?;
    for name in &names[1..] {
        let Some(other) = result_shapes(library, name, args) else { continue };
        if let Some(k) = (0..first.len().min(other.len())).find(|&k| disagree(&first[k], &other[k])) {
            return Some(format!(
                "its branches '{}' and '{name}' return result {k} of different shapes ({} and {}): the JIT \
                 compiles an {op} whose branches agree on their results' types",
                names[0], first[k], other[k]
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(dims: &[Option<i64>]) -> Shape {
        Shape::with_dims(dims.to_vec())
    }

    #[test]
    fn shapes_disagree_only_when_provably_different() {
        assert!(disagree(&Shape::known(&[3]), &Shape::known(&[5])));
        assert!(disagree(&Shape::known(&[3]), &Shape::known(&[3, 1])));
        assert!(disagree(&shape(&[None, Some(3)]), &shape(&[None, Some(4)])));
        assert!(!disagree(&shape(&[None, Some(3)]), &shape(&[Some(7), Some(3)])));
        assert!(!disagree(&Shape::unknown(), &Shape::known(&[5])));
        assert!(!disagree(&Shape::known(&[2, 2]), &Shape::known(&[2, 2])));
    }
}
