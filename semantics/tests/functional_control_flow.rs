//! Functional control flow on variables (`While`, `If`, `Case` whose bodies read and write
//! variables): `explore_graph` lowers it to TensorFlow 1 control flow
//! (`autoclust_passes::lower_control_flow`) so each body access is an operation instance of
//! its own. Each expected outcome set is computed by hand in the test's comment.

use crate::common::*;
use autoclust_graph::{text, Graph, Tensor};
use autoclust_passes::cluster::ClusterConfig;
use autoclust_semantics::{
    autoclusterer, explore_graph, verify, ClusterFn, Exploration, Inputs, Query, Rmw, RuntimeKernels,
};

fn parse(src: &str) -> Graph {
    text::parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn q(fetches: &[&str], targets: &[&str], rmw: Rmw) -> Query {
    let mut q = query(fetches, rmw);
    q.targets = targets.iter().map(|s| s.to_string()).collect();
    q
}

/// Sorted rows of the named columns (fetches and variables).
fn rows(e: &Exploration, cols: &[&str]) -> Vec<Vec<i32>> {
    let mut out: Vec<Vec<i32>> = ints(e).iter().map(|r| cols.iter().map(|c| get(r, c)).collect()).collect();
    out.sort();
    out
}

fn clusterer() -> impl Fn(&Graph) -> Result<Vec<autoclust_semantics::ClusterSpec>, autoclust_semantics::SemanticsError>
{
    autoclusterer(ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() })
}

/// A functional `While` of three iterations whose body adds `i + 1` to `v` through the
/// loop-invariant handle it is passed; `after` reads `v` once the loop is done, `racer`
/// reads it with no order against the loop; `twice` doubles the loop counter next to the
/// read, so the clusterer has something pure to join.
const WHILE: &str = r#"
v = VarHandleOp() {container = "", dtype = int32, shape = shape[], shared_name = "v"}
zero = Const() {dtype = int32, value = int32[]{0}}
loop = While(zero, v) {T = [int32, resource], cond = @cond, body = @body, parallel_iterations = 10}
after = ReadVariableOp(v, ^loop) {dtype = int32}
two = Const() {dtype = int32, value = int32[]{2}}
twice = Mul(loop, two) {T = int32}
racer = ReadVariableOp(v) {dtype = int32}
function cond(i: int32, h: resource) -> (c: bool) {
  three = Const() {dtype = int32, value = int32[]{3}}
  l = Less(i, three:output:0) {T = int32}
  return c = l:z:0
}
function body(i: int32, h: resource) -> (i2: int32, h2: resource) stateful {
  one = Const() {dtype = int32, value = int32[]{1}}
  next = AddV2(i, one:output:0) {T = int32}
  add = AssignAddVariableOp(h, next:z:0) {dtype = int32}
  return i2 = next:z:0
  return h2 = h
}
"#;

/// v = 10, then += 1, += 2, += 3 in three ordered iterations: v = 16 and `after` = 16 in
/// every outcome (no lost update: iteration j+1 starts after iteration j's write, also
/// with split read-modify-writes), the loop counter is 3 (`twice` = 6), and `racer` sees
/// v before the loop or after any iteration: 10, 11, 13 or 16. The original graph and the
/// clustered program have exactly these four outcomes, and verify holds.
#[test]
fn a_functional_while_writing_a_variable_explores_per_iteration() {
    let g = parse(WHILE);
    let want = vec![vec![3, 6, 16, 10, 16], vec![3, 6, 16, 11, 16], vec![3, 6, 16, 13, 16], vec![3, 6, 16, 16, 16]];
    let cols = ["loop:0", "twice:0", "after:0", "racer:0", "v"];
    let clusterer = clusterer();
    for rmw in [Rmw::Split, Rmw::Atomic] {
        let query = q(&["loop:0", "twice:0", "after:0", "racer:0"], &[], rmw);
        let inputs = vars(&[("v", 10)]);
        let original = explore_graph(&g, &query, None, &inputs, &RuntimeKernels).unwrap();
        assert_eq!(rows(&original, &cols), want, "{rmw:?}");
        let clustered =
            explore_graph(&g, &query, Some(&clusterer as &ClusterFn<'_>), &inputs, &RuntimeKernels).unwrap();
        assert_eq!(rows(&clustered, &cols), want, "{rmw:?} clustered");
        let verdict = verify(&g, &query, &clusterer as &ClusterFn<'_>, &inputs, &RuntimeKernels).unwrap();
        assert!(verdict.holds(), "{rmw:?}");
    }
}

/// The loop as the clustered program runs it: the pure `twice` is a cluster next to the
/// lowered loop, and the loop's variable accesses stay outside every cluster.
#[test]
fn the_clustered_while_keeps_its_accesses_outside_clusters() {
    let g = parse(WHILE);
    let clusters = clusterer()(&g).unwrap();
    assert!(clusters.iter().all(|c| c.nodes.iter().all(|&n| g.node(n).op != "While")), "{clusters:?}");
}

/// An `If` whose then-branch adds `x` to `v` and whose else-branch assigns 9 to it (its
/// write gets the handle through the predicate's `Switch`, its constant 9 only the branch's
/// pivot); `after` reads `v` after the `If`, `c:0` is the branch's result.
const IF: &str = r#"
v = VarHandleOp() {container = "", dtype = int32, shape = shape[], shared_name = "v"}
p = Placeholder() {dtype = bool, shape = shape[]}
x = Const() {dtype = int32, value = int32[]{5}}
c = If(p, v, x) {Tcond = bool, Tin = [resource, int32], Tout = [int32], then_branch = @add_x, else_branch = @set_nine}
after = ReadVariableOp(v, ^c) {dtype = int32}
function add_x(h: resource, x: int32) -> (y: int32) stateful {
  add = AssignAddVariableOp(h, x) {dtype = int32}
  return y = x
}
function set_nine(h: resource, x: int32) -> (y: int32) stateful {
  nine = Const() {dtype = int32, value = int32[]{9}}
  w = AssignVariableOp(h, nine:output:0) {dtype = int32}
  return y = nine:output:0
}
"#;

fn feed_p(p: bool) -> Inputs {
    let mut inputs = vars(&[("v", 1)]);
    inputs.feeds.insert("p".into(), Tensor::scalar_bool(p));
    inputs
}

/// The untaken branch stays dead after lowering: with p = true, v = 1 + 5 = 6, c = 5 and
/// `after` = 6 — and no outcome has the else-branch's assignment (v = 9, or 14 had it run
/// before the add). With p = false, v = 9, c = 9, `after` = 9 and the add never runs. The
/// clustered program agrees.
#[test]
fn the_untaken_branch_of_a_lowered_if_never_writes() {
    let g = parse(IF);
    let cols = ["c:0", "after:0", "v"];
    let clusterer = clusterer();
    for (p, want) in [(true, [5, 6, 6]), (false, [9, 9, 9])] {
        for rmw in [Rmw::Split, Rmw::Atomic] {
            let query = q(&["c:0", "after:0"], &[], rmw);
            let e = explore_graph(&g, &query, None, &feed_p(p), &RuntimeKernels).unwrap();
            assert_eq!(rows(&e, &cols), [want], "p = {p}, {rmw:?}");
            let e = explore_graph(&g, &query, Some(&clusterer as &ClusterFn<'_>), &feed_p(p), &RuntimeKernels).unwrap();
            assert_eq!(rows(&e, &cols), [want], "p = {p}, {rmw:?}, clustered");
        }
    }
}

/// A `Case` of three branches writing 100, 200 and 300 to `v`: index 1 writes 200, and an
/// out-of-range index (7, or -1) runs the last branch (300), as TensorFlow's does; one
/// outcome each.
#[test]
fn a_lowered_case_runs_exactly_its_branch() {
    let src = r#"
v = VarHandleOp() {container = "", dtype = int32, shape = shape[], shared_name = "v"}
i = Placeholder() {dtype = int32, shape = shape[]}
c = Case(i, v) {Tin = [resource], Tout = [], branches = [@b0, @b1, @b2]}
after = ReadVariableOp(v, ^c) {dtype = int32}
function b0(h: resource) -> () stateful {
  k = Const() {dtype = int32, value = int32[]{100}}
  w = AssignVariableOp(h, k:output:0) {dtype = int32}
}
function b1(h: resource) -> () stateful {
  k = Const() {dtype = int32, value = int32[]{200}}
  w = AssignVariableOp(h, k:output:0) {dtype = int32}
}
function b2(h: resource) -> () stateful {
  k = Const() {dtype = int32, value = int32[]{300}}
  w = AssignVariableOp(h, k:output:0) {dtype = int32}
}
"#;
    let g = parse(src);
    for (index, want) in [(0, 100), (1, 200), (2, 300), (7, 300), (-1, 300)] {
        let mut inputs = vars(&[("v", 1)]);
        inputs.feeds.insert("i".into(), Tensor::scalar_i32(index));
        let e = explore_graph(&g, &q(&["after:0"], &[], Rmw::Split), None, &inputs, &RuntimeKernels).unwrap();
        assert_eq!(rows(&e, &["after:0", "v"]), [[want, want]], "index {index}");
    }
}
