//! The seeds' examples with their known outcome sets (seeds 000, 001, 002).

use crate::common::*;
use autoclust_semantics::{verify, ClusterSpec, Rmw, RuntimeKernels};

/// Seed 000, "Simplest Non-Trivial Example": *X = 1 then (control) *Y = 2;
/// r0 = *Y then (control) r1 = *X. With X = Y = 0, r0 == 2 implies r1 == 1.
#[test]
fn simplest_example_r0_2_implies_r1_1() {
    let g = Builder::new()
        .var("X")
        .var("Y")
        .constant("one", 1)
        .constant("two", 2)
        .assign("wx", &["X", "one"])
        .assign("wy", &["Y", "two", "^wx"])
        .read("r0", &["Y"])
        .read("r1", &["X", "^r0"])
        .build();
    // The writes are targets: pruning to the fetches alone would drop them
    // (seed 002, footnote 7: the semantics applies after pruning).
    let q = query(&["r0:0", "r1:0"], Rmw::Split).with_targets(&["wy"]);
    let e = run(&g, &q, &vars(&[("X", 0), ("Y", 0)]), None);
    let rows = ints(&e);
    let pairs: Vec<(i32, i32)> = rows.iter().map(|r| (get(r, "r0:0"), get(r, "r1:0"))).collect();
    assert_eq!(pairs, [(0, 0), (0, 1), (2, 1)], "{rows:?}");
    assert!(e.states_explored > 1);
}

/// Seed 000, "Load/Store Reordering": *Y = 5 then (control) *X = 2; *X = 1
/// then (control) r0 = *Y. If X is 1 at the end, r0 must be 5.
#[test]
fn load_store_reordering_x_1_implies_r0_5() {
    let g = Builder::new()
        .var("X")
        .var("Y")
        .constant("one", 1)
        .constant("two", 2)
        .constant("five", 5)
        .assign("wy", &["Y", "five"])
        .assign("wx2", &["X", "two", "^wy"])
        .assign("wx1", &["X", "one"])
        .read("r0", &["Y", "^wx1"])
        .build();
    let e = run(&g, &query(&["r0:0", "wx2"], Rmw::Split).clone_with_target(), &vars(&[("X", 0), ("Y", 0)]), None);
    let rows = ints(&e);
    assert!(rows.iter().any(|r| get(r, "X") == 1), "{rows:?}");
    assert!(rows.iter().any(|r| get(r, "X") == 2 && get(r, "r0:0") == 0), "{rows:?}");
    for r in &rows {
        if get(r, "X") == 1 {
            assert_eq!(get(r, "r0:0"), 5, "{rows:?}");
        }
    }
}

/// Seed 000's two concurrent `*X += 1`: {1, 2} under the RFC's split model,
/// {2} when each increment is atomic (seed 002's Assign-Add, the executor).
#[test]
fn concurrent_increments() {
    let g = Builder::new()
        .var("X")
        .constant("one", 1)
        .assign_add("inc1", &["X", "one"])
        .assign_add("inc2", &["X", "one"])
        .build();
    let finals = |rmw| {
        let e = run(&g, &query(&[], rmw), &vars(&[("X", 0)]), None);
        ints(&e).iter().map(|r| get(r, "X")).collect::<Vec<_>>()
    };
    assert_eq!(finals(Rmw::Split), [1, 2]);
    assert_eq!(finals(Rmw::Atomic), [2]);
}

/// Seed 001's problem graph: Assign(v0, 6) then (control) r0 = Read(v1);
/// Assign(v1, 8) then (control) Assign(v0, 7).
fn problem_graph() -> autoclust_graph::Graph {
    Builder::new()
        .var("v0")
        .var("v1")
        .constant("six", 6)
        .constant("seven", 7)
        .constant("eight", 8)
        .assign("a6", &["v0", "six"])
        .read("r0", &["v1", "^a6"])
        .assign("a8", &["v1", "eight"])
        .assign("a7", &["v0", "seven", "^a8"])
        .build()
}

#[test]
fn problem_graph_v0_6_implies_r0_8() {
    let g = problem_graph();
    let q = query(&["r0:0"], Rmw::Split).with_targets(&["a7"]);
    let e = run(&g, &q, &vars(&[("v0", 0), ("v1", 0)]), None);
    let rows = ints(&e);
    assert!(rows.iter().any(|r| get(r, "v0") == 6), "{rows:?}");
    for r in &rows {
        if get(r, "v0") == 6 {
            assert_eq!(get(r, "r0:0"), 8, "{rows:?}");
        }
    }
}

/// Clustering a6 with r0 (a write → read pair the safety analysis forbids)
/// lets the snapshot read v1 before a8: v0 == 6 with r0 != 8.
#[test]
fn wrong_clustering_of_problem_graph_fails_verify_with_witness() {
    let g = problem_graph();
    let q = query(&["r0:0"], Rmw::Split).with_targets(&["a7"]);
    let inputs = vars(&[("v0", 0), ("v1", 0)]);
    let wrong = |g: &autoclust_graph::Graph| {
        Ok(vec![ClusterSpec { name: "cluster_0".into(), nodes: vec![g.find("a6").unwrap(), g.find("r0").unwrap()] }])
    };
    let verdict = verify(&g, &q, &wrong, &inputs, &RuntimeKernels).unwrap();
    assert!(!verdict.holds());
    let (outcome, schedule) = verdict.witness().unwrap();
    let v0 = outcome.variables.iter().find(|(n, _)| n == "v0").unwrap().1.as_i32().unwrap()[0];
    let r0 = outcome.fetches[0].1.as_i32().unwrap()[0];
    assert_eq!(v0, 6);
    assert_ne!(r0, 8);
    assert!(schedule.iter().any(|s| s.contains("snapshot")), "{schedule:?}");

    // The safe clustering (a8 with a7: write → write is fine) adds nothing.
    let safe = |g: &autoclust_graph::Graph| {
        Ok(vec![ClusterSpec { name: "cluster_0".into(), nodes: vec![g.find("a8").unwrap(), g.find("a7").unwrap()] }])
    };
    assert!(verify(&g, &q, &safe, &inputs, &RuntimeKernels).unwrap().holds());
}

/// Seed 002's first example: Write then (control) Read sees the written
/// value; without the control edge either value may be read.
#[test]
fn write_then_read_and_the_missing_control_edge() {
    let ordered = Builder::new().var("x").constant("b", 7).assign("w", &["x", "b"]).read("r", &["x", "^w"]).build();
    let e = run(&ordered, &query(&["r:0"], Rmw::Split).with_targets(&["w"]), &vars(&[("x", 3)]), None);
    assert_eq!(ints(&e).iter().map(|r| get(r, "r:0")).collect::<Vec<_>>(), [7]);
    let racy = Builder::new().var("x").constant("b", 7).assign("w", &["x", "b"]).read("r", &["x"]).build();
    let e = run(&racy, &query(&["r:0"], Rmw::Split).with_targets(&["w"]), &vars(&[("x", 3)]), None);
    assert_eq!(ints(&e).iter().map(|r| get(r, "r:0")).collect::<Vec<_>>(), [3, 7]);
}

/// A cluster computes in SSA: a write then a read of the same variable
/// inside one cluster sees the written value, and the write-back is final.
#[test]
fn cluster_body_is_ssa() {
    let g = Builder::new()
        .var("x")
        .var("y")
        .constant("c", 5)
        .read("r", &["x"])
        .binary("s", "AddV2", &["r", "c"])
        .assign("w", &["y", "s"])
        .build();
    let q = query(&["s:0"], Rmw::Split).with_targets(&["w"]);
    let nodes = |g: &autoclust_graph::Graph| {
        vec![ClusterSpec {
            name: "cluster_0".into(),
            nodes: ["r", "s", "w"].iter().map(|n| g.find(n).unwrap()).collect(),
        }]
    };
    let e = run(&g, &q, &vars(&[("x", 1)]), Some(nodes(&g)));
    let rows = ints(&e);
    assert_eq!(rows.len(), 1);
    assert_eq!(get(&rows[0], "s:0"), 6);
    assert_eq!(get(&rows[0], "y"), 6);
}

#[test]
fn uninitialised_read_names_the_node() {
    let g = Builder::new().var("x").read("r", &["x"]).build();
    let err = autoclust_semantics::explore_graph(&g, &query(&["r:0"], Rmw::Split), None, &vars(&[]), &RuntimeKernels)
        .unwrap_err();
    assert!(err.to_string().contains("'r'") && err.to_string().contains("'x'"), "{err}");
}

#[test]
fn state_bound_is_an_error() {
    let mut b = Builder::new();
    b.var("x").constant("one", 1);
    for i in 0..8 {
        b.assign_add(&format!("inc{i}"), &["x", "one"]);
    }
    let g = b.build();
    let mut q = query(&[], Rmw::Split);
    q.limits.max_states = 50;
    let err = autoclust_semantics::explore_graph(&g, &q, None, &vars(&[("x", 0)]), &RuntimeKernels).unwrap_err();
    assert!(err.to_string().contains("50"), "{err}");
}

trait QueryExt {
    fn with_targets(self, t: &[&str]) -> Self;
    fn clone_with_target(self) -> Self;
}

impl QueryExt for autoclust_semantics::Query {
    fn with_targets(mut self, t: &[&str]) -> Self {
        self.targets = t.iter().map(|s| s.to_string()).collect();
        self
    }
    /// Moves a fetch without a port (an op with no outputs) to the targets.
    fn clone_with_target(mut self) -> Self {
        let (f, t): (Vec<String>, Vec<String>) = self.fetches.into_iter().partition(|f| f.contains(':'));
        self.fetches = f;
        self.targets = t;
        self
    }
}

/// The real clusterer keeps seed 001's problem graph correct; told to ignore
/// the safety analysis (the test-only switch) it clusters `a6` with `r0`
/// and `verify` finds the witness v0 == 6, r0 != 8.
#[test]
fn real_clusterer_with_and_without_the_safety_analysis() {
    use autoclust_passes::cluster::ClusterConfig;
    use autoclust_semantics::autoclusterer;
    // One handle node per access (same variables), so that the clusterer
    // has no shared producer to merge the two halves through.
    let g = Builder::new()
        .handle("h0a", "v0")
        .handle("h0b", "v0")
        .handle("h1a", "v1")
        .handle("h1b", "v1")
        .constant("six", 6)
        .constant("seven", 7)
        .constant("eight", 8)
        .assign("a6", &["h0a", "six"])
        .read("r0", &["h1a", "^a6"])
        .assign("a8", &["h1b", "eight"])
        .assign("a7", &["h0b", "seven", "^a8"])
        .build();
    let q = query(&["r0:0"], Rmw::Split).with_targets(&["a7"]);
    let inputs = vars(&[("v0", 0), ("v1", 0)]);
    let safe = autoclusterer(ClusterConfig { min_cluster_size: 1, ..ClusterConfig::default() });
    assert!(verify(&g, &q, &safe, &inputs, &RuntimeKernels).unwrap().holds());
    // The clustering the safety analysis forbids: the write a6 and the read r0 it reaches.
    let unsafe_ = |g: &autoclust_graph::Graph| {
        let nodes = ["a6", "r0"].iter().map(|n| g.find(n).unwrap()).collect();
        Ok(vec![ClusterSpec { name: "cluster_0".into(), nodes }])
    };
    let verdict = verify(&g, &q, &unsafe_, &inputs, &RuntimeKernels).unwrap();
    let (outcome, schedule) =
        verdict.witness().expect("clustering a write with the read it reaches must add an outcome");
    let v0 = outcome.variables.iter().find(|(n, _)| n == "v0").unwrap().1.as_i32().unwrap()[0];
    let r0 = outcome.fetches[0].1.as_i32().unwrap()[0];
    assert_eq!((v0 == 6, r0 != 8), (true, true), "{outcome:?} via {schedule:?}");
}

/// The bridge snapshots and writes back in two atomic steps, so a clustered
/// `AssignAdd` is a split read-modify-write even where the plain executor
/// runs it atomically: against `--atomic-rmw`'s outcomes, clustering it next
/// to a racing write adds an outcome (the lost update). Under the RFC's
/// split model (seed 000) the same clustering adds nothing.
#[test]
fn clustered_increment_loses_executor_atomicity() {
    let g = Builder::new()
        .var("x")
        .constant("one", 1)
        .constant("two", 2)
        .assign("w", &["x", "two"])
        .assign_add("inc", &["x", "one"])
        .build();
    let inputs = vars(&[("x", 0)]);
    let alone = |g: &autoclust_graph::Graph| {
        Ok(vec![ClusterSpec { name: "cluster_0".into(), nodes: vec![g.find("inc").unwrap()] }])
    };
    let split = query(&[], Rmw::Split);
    assert!(verify(&g, &split, &alone, &inputs, &RuntimeKernels).unwrap().holds());
    let atomic = query(&[], Rmw::Atomic);
    let verdict = verify(&g, &atomic, &alone, &inputs, &RuntimeKernels).unwrap();
    let (outcome, _) = verdict.witness().expect("the lost update is clustered-only");
    assert_eq!(outcome.variables[0].1.as_i32().unwrap(), [1]);
}
